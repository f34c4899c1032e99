"""The Spark layer: session setup, the ``kafka-segments`` data source, and the table schemas for Spark."""
