"""A live Kafka cluster over the protocol, for the export that reads no log dir: where it is and how
to log in (``config``), the requests (``client``), what to read (``plan``), and the fetch loop of one
offset range on an executor (``fetch``). No Spark here; the export's Spark task is
:mod:`analytics.spark.fetching`."""
