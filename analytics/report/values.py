"""Data values as page text: the one escape, numbers, ids, durations, times and paths.

Every value from the report's data reaches the page through this module: ``esc`` (strings),
``fmt_path`` (file paths), ``fmt`` (numbers; anything else falls back to ``esc``), ``fmt_id``,
``fmt_time`` and ``human_ms``. The data is rendered, not judged: a missing or malformed value
becomes a dash or a default here rather than an exception.
"""

from __future__ import annotations

import html
import math
import re
from datetime import UTC, datetime

DURATION_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000), ("ms", 1))
DASH = "—"
_SEPARATOR = re.compile(r"([/\\])")


def esc(v) -> str:
    """The one way a data value becomes HTML/SVG text or an attribute value."""
    return html.escape(str(v), quote=True)


def fmt_path(v) -> str:
    """A file path or URI, escaped, with a line-break opportunity (``<wbr>``) after each separator:
    log dirs run long, and a path should wrap between its folders, not overflow its column or
    break inside a folder's name."""
    return _SEPARATOR.sub(r"\1<wbr>", esc(v))


def is_num(v) -> bool:
    """A finite int or float (not a bool, which is an int to Python but never a count)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def as_int(v, default: int = 0) -> int:
    """Counts from data; a missing or non-numeric count is ``default``."""
    return int(v) if is_num(v) else default


def as_dict(v) -> dict:
    return v if isinstance(v, dict) else {}


def as_list(v) -> list:
    return v if isinstance(v, list) else []


def fmt(v) -> str:
    """A number formatted for people (thousands separators); None is a dash; anything else escaped."""
    if v is None:
        return DASH
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if is_num(v):  # a float: JSON may turn counts into 12.0; seconds keep two decimals
        return f"{int(v):,}" if v.is_integer() else f"{v:,.2f}".rstrip("0").rstrip(".")
    return esc(v)


def fmt_id(v) -> str:
    """Ids, partitions and epochs: no thousands separators (people search for "1000", not "1,000")."""
    if v is None:
        return DASH
    return esc(int(v) if is_num(v) and float(v).is_integer() else v)


def human_ms(ms) -> str:
    """A duration in ms as people say it: the largest unit that is exact or at least 10 ("7 d", "25 h")."""
    if not is_num(ms):
        return DASH
    for unit, size in DURATION_UNITS:
        value = abs(ms) / size
        if value >= 10 or value >= 1 and value.is_integer():
            break
    else:
        unit, value = "ms", abs(ms)
    return f"{'-' if ms < 0 else ''}{f'{value:.1f}'.rstrip('0').rstrip('.')} {unit}"


def fmt_time(ms, pattern: str = "%Y-%m-%d %H:%M:%S UTC") -> str:
    """Epoch ms as UTC text; out-of-range or missing values are a dash rather than an exception."""
    if not is_num(ms) or not -62_135_596_800_000 < ms < 253_402_300_799_000:
        return DASH
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime(pattern)


def partition_name(row: dict) -> str:
    """``topic-partition`` as Kafka names the folder (plain text: escape it where it is shown)."""
    return f"{row.get('topic', '?')}-{row.get('partition', '?')}"
