"""Write analytics/spark/jars.sha256: the SHA-256 of every jar segaudit may fetch
(``objectstore.every_coordinate``), each downloaded from Maven Central and checked against the
``.sha1`` Central serves before its SHA-256 is written down. Run it when a version is added to
``analytics/spark/objectstore.py``; review the diff like any other.

    .venv/bin/python scripts/pin_jars.py
"""

from __future__ import annotations

import hashlib
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from analytics.spark import maven, objectstore


def _pin(coordinate: str) -> str:
    url = maven.MAVEN + maven.path(coordinate)
    with urllib.request.urlopen(url + ".sha1", timeout=60) as answer:
        sha1 = answer.read().decode("ascii").split()[0].lower()
    with urllib.request.urlopen(url, timeout=120) as answer:
        body = answer.read()
    if hashlib.sha1(body).hexdigest() != sha1:
        raise SystemExit(f"{url} does not match the .sha1 Central serves")
    return f"{hashlib.sha256(body).hexdigest()}  {coordinate}"


def main() -> int:
    coordinates = objectstore.every_coordinate()
    with ThreadPoolExecutor(max_workers=8) as pool:
        lines = list(pool.map(_pin, coordinates))
    header = ["# The SHA-256 of every jar segaudit fetches (analytics/spark/maven.py), each checked against",
              "# the .sha1 Maven Central serves when pinned. Written by scripts/pin_jars.py."]
    maven.PINS.write_text("\n".join([*header, *lines]) + "\n")
    print(f"{len(lines)} jars pinned in {maven.PINS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
