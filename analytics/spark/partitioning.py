"""Rows sent to chosen tasks: keys that Spark's hash partitioning places where they are wanted.

A DataFrame's ``repartition(n, column)`` sends a row to task ``pmod(hash(column), n)``, Spark's
Murmur3 hash (x86, 32 bits) with seed 42. Range partitioning would place contiguous keys, but it
samples the rows first (one more pass over them) and, with a few distinct keys, places them
unevenly: 16 offset ranges of one hot partition went to 16 tasks as 0, 1 or 2 ranges each. Instead
:func:`task_keys` gives, for each of ``n`` tasks, the smallest non-negative integer that Spark's
hash sends to it; a row carrying the key of its task goes exactly there, with no sampling.
"""

from __future__ import annotations

from functools import lru_cache

MASK = 0xFFFFFFFF
SEED = 42  # Spark's HashPartitioning: Murmur3Hash(expressions, 42)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & MASK


def hash_int(value: int, seed: int = SEED) -> int:
    """Spark's ``hash()`` of an int (``Murmur3_x86_32.hashInt``), as a signed 32-bit integer."""
    k1 = (value & MASK) * 0xCC9E2D51 & MASK
    k1 = _rotl(k1, 15) * 0x1B873593 & MASK
    h1 = _rotl((seed & MASK) ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & MASK
    h1 ^= 4  # the length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


@lru_cache(maxsize=64)
def task_keys(n: int) -> tuple[int, ...]:
    """For each task ``0..n-1`` of ``repartition(n, key)`` over an int column, a key that lands in it.

    >>> keys = task_keys(4)
    >>> [hash_int(k) % 4 for k in keys]
    [0, 1, 2, 3]
    """
    keys: list[int | None] = [None] * n
    missing, candidate = n, 0
    while missing:
        task = hash_int(candidate) % n
        if keys[task] is None:
            keys[task] = candidate
            missing -= 1
        candidate += 1
    return tuple(keys)  # type: ignore[arg-type]
