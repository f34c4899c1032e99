"""Thin Spark entry points: each is ``main(argv)`` over the library, usable with ``spark-submit``."""
