"""Replays of the broker's producer-state rules: what a partition leader accepts, deduplicates or rejects.

Pure Python; imports only :mod:`analytics.contract` and :mod:`analytics.kafka`.

- :mod:`.broker`: the leader's producer state of one partition (the public face of the model)
- :mod:`.decisions`, :mod:`.profiles`, :mod:`.entries`, :mod:`.rules`: its parts (answers,
  version profiles, per-producer state, checks)
- :mod:`.severity`: the severity of a verdict, for the pure-Python labellers (the audit's
  reference replay, the generator's ground truth)
"""
