"""segaudit: audit Apache Kafka log segments.

``analytics.kafka`` reads and writes Kafka's on-disk formats in pure Python (no Spark);
the rest of the package builds the Spark jobs, reports and the command line on top of it.
"""

__version__ = "0.1.0"
