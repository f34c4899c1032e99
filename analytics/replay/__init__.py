"""Replays of the broker's producer-state rules: what a partition leader accepts, deduplicates or rejects."""
