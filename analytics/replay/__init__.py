"""Replays of the broker's producer-state rules: what a partition leader accepts, deduplicates or rejects.

Pure Python. The broker model imports only :mod:`analytics.contract` and :mod:`analytics.kafka`;
the reference replay also reads the audit's configuration (:mod:`analytics.audit.config`).

- :mod:`.broker`: the leader's producer state of one partition (the public face of the model)
- :mod:`.decisions`, :mod:`.profiles`, :mod:`.entries`, :mod:`.rules`: its parts (answers,
  version profiles, per-producer state, checks)
- :mod:`.reference`: the audit's classification as a plain state machine (the Spark job's oracle)
- :mod:`.severity`: the severity of a verdict, for the pure-Python labellers
"""
