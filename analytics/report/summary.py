"""The summary (headline cards), the verdicts (the count of every verdict beside the run's facts)
and the configuration the audit used, each value in a form people read (durations, times, lists,
tables). The summary opens the page and the configuration closes it: the Findings table
(``findings``) comes between, so where the audit found something is on the first screen.

The cards answer the contract's two questions apart (``docs/design.md``, "Verdicts"): the severities
say whether the broker kept its rules, the expectation suites whether the data is sound. A batch the
broker was right to accept can still be bad data, so the two sets of counts need not agree, and
each says which question it answers.
"""

from __future__ import annotations

from analytics.contract import BROKER_ANSWER, BROKER_QUESTION, DATA_ANSWER, DATA_QUESTION
from analytics.contract import (
    DUP_DUPLICATE, DUPLICATE, FENCED_ZOMBIE_WRITE, FINDING_SEVERITIES, HANGING, MISMATCH, NOT_IN_LOG, NOT_IN_SNAPSHOT,
    SEQUENCE_GAP, SEV_EXPLAINED, SEV_OK, SEV_VIOLATION, SEVERITIES, VERDICTS,
)
from analytics.report.markup import badge, nothing, section, span, table
from analytics.report.values import (
    DASH, as_dict, as_int, as_list, esc, fmt, fmt_path, fmt_time, human_ms, is_num,
)


def question(title: str, answer: str) -> str:
    """One of the two questions as a heading, with the sentence saying what answers it."""
    return f'<h3 class="question">{esc(title)}</h3><p class="note">{esc(answer)}</p>'


def summary(data: dict) -> str:
    """The ``summary`` section: the cards of both questions, from ``data["summary"]`` (the audit's
    ``summary.json``), the verdicts' severities, the validation's checks and the parse errors."""
    s = as_dict(data.get("summary"))
    chips = _severity_chips(as_dict(s.get("severities")))
    return section("summary", "Summary", (
        f'{question(BROKER_QUESTION, BROKER_ANSWER)}'
        f'<div class="cards">{_broker_cards(s, as_dict(data.get("verdict_severities")))}</div>'
        f'<p class="chips">{chips}</p>'
        f'{question(DATA_QUESTION, DATA_ANSWER)}<div class="cards">{_data_cards(data)}</div>'))


def verdicts(data: dict) -> str:
    """The ``verdicts`` section: every verdict's count split by the broker's answer, beside the run's
    facts (ids, time, output, inputs). The two wrap under each other when the page is narrow."""
    s = as_dict(data.get("summary"))
    table = _verdict_table(as_dict(s.get("verdicts")), as_dict(data.get("verdict_severities")))
    return section("verdicts", "Verdicts and run", (
        f'<div class="cols"><div class="col-table"><h3>Verdicts</h3>{table}</div>'
        f"<div><h3>Run</h3>{_facts(s, data.get('out'))}</div></div>"))


def configuration(data: dict) -> str:
    """The ``configuration`` section: the settings the audit ran with, last on the page, each broker
    and topic setting with where its value came from (``summary.json``'s ``settings``)."""
    s = as_dict(data.get("summary"))
    return section("configuration", "Configuration",
                   _configuration(as_dict(s.get("configuration")), as_dict(s.get("settings"))))


def _broker_cards(s: dict, severities: dict) -> str:
    """The severities, and the verdicts that break the broker's rules most often, each drawn in the
    worst severity among its batches (``severities``: verdict -> severity -> batches)."""
    verdicts, sev = as_dict(s.get("verdicts")), as_dict(s.get("severities"))

    def verdict_card(label: str, verdict: str) -> tuple:
        split = as_dict(severities.get(verdict))
        violations = as_int(split.get(SEV_VIOLATION))
        sub = f"{verdict} batches" + (f": {violations:,} {SEV_VIOLATION}, {as_int(split.get(SEV_EXPLAINED)):,} "
                                      f"{SEV_EXPLAINED}" if split else "")
        return label, as_int(verdicts.get(verdict)), SEV_VIOLATION if violations else SEV_EXPLAINED, sub

    return _cards([  # (label, value, severity of a non-zero value, what it counts)
        ("batches", sum(as_int(v) for v in verdicts.values()), SEV_OK, "all verdicts"),
        ("violations", as_int(sev.get(SEV_VIOLATION)), SEV_VIOLATION, "unexplained rule breaks"),
        ("explained", as_int(sev.get(SEV_EXPLAINED)), SEV_EXPLAINED, "rule breaks the broker was right to accept"),
        verdict_card("duplicates", DUPLICATE),
        verdict_card("sequence gaps", SEQUENCE_GAP),
        verdict_card("zombie writes", FENCED_ZOMBIE_WRITE),
    ])


def _data_cards(data: dict) -> str:
    """The checks, and the findings of the tables outside ``batch_verdicts`` that checks or the
    reader count: hanging transactions, record duplicates, parse errors, snapshot disagreements."""
    s = as_dict(data.get("summary"))
    checks = [as_dict(c) for c in as_list(as_dict(data.get("validation")).get("checks"))]
    failed = sum(c.get("status") == "fail" for c in checks)
    warned = sum(c.get("status") == "warn" for c in checks)
    txn, snap = as_dict(s.get("transactions")), as_dict(s.get("snapshot_checks"))
    record_dups = s.get("record_duplicates")
    errors = as_dict(data.get("parse_errors"))
    # each snapshot_checks row is one producer of one snapshot: the card counts the producers whose
    # state the snapshot and the replay disagree on, and apart, those only one side has (not compared)
    snap_other = (f"producers whose snapshot state differs from the replay; not compared: "
                  f"{as_int(snap.get(NOT_IN_LOG)):,} only in a snapshot, {as_int(snap.get(NOT_IN_SNAPSHOT)):,} only in the log")
    return _cards([
        ("failed checks", failed if checks else None, SEV_VIOLATION,
         f"of {len(checks):,} checks" + (f", {warned:,} more warned" if warned else "") if checks
         else "not validated (segaudit validate OUT)"),
        ("hanging transactions", as_int(txn.get(HANGING)), SEV_VIOLATION, "open past the timeout"),
        ("record duplicates", record_dups if is_num(record_dups) else None, SEV_VIOLATION,
         "copies a consumer receives twice" + _around_aborts(s) if is_num(record_dups)
         else "not computed (export without --records)"),
        ("parse errors", as_int(errors.get("rows_total")) if errors else None, SEV_VIOLATION,
         f"{sum(as_int(k.get('bytes')) for k in map(as_dict, as_dict(errors.get('kinds')).values())):,} bytes affected"
         if errors else "not read"),
        ("snapshot mismatches", as_int(snap.get(MISMATCH)), SEV_VIOLATION, snap_other),
        _coverage_card(as_dict(s.get("coverage"))),
    ])


def _coverage_card(c: dict) -> tuple:
    """The files present that the export did not read whole (``summary.json``'s ``coverage``)."""
    if not c:
        return "files not read", None, SEV_VIOLATION, "not counted by this export"
    missed = as_int(c.get("files")) - as_int(c.get("files_read"))
    why = ", ".join(f"{as_int(as_dict(v).get('files')):,} {k}" for k, v in as_dict(c.get("not_read")).items())
    return ("files not read", missed, SEV_VIOLATION,
            f"of {as_int(c.get('files')):,} files, {as_int(c.get('bytes')) - as_int(c.get('bytes_read')):,} bytes"
            + (f": {why}; their batches are in no check" if why else ": every file read whole"))


def _around_aborts(s: dict) -> str:
    """The repeats of records around aborted transactions, which the card does not count."""
    kinds = as_dict(s.get("record_duplicate_kinds"))
    n = sum(as_int(v) for k, v in kinds.items() if k != DUP_DUPLICATE)
    return f"; {n:,} more around aborted transactions (information)" if n else ""


def _cards(cards: list[tuple]) -> str:
    return "".join(
        f'<div class="card {"sev-" + tone if is_num(v) and v > 0 and tone != SEV_OK else ""}">'
        f'<div class="card-value">{fmt(v)}</div><div class="card-label">{esc(label)}</div>'
        f'<div class="card-sub">{esc(sub)}</div></div>' for label, v, tone, sub in cards)


def _severity_chips(counts: dict) -> str:
    return " ".join(badge(f"{name} {fmt(as_int(counts.get(name)))}", name) for name in SEVERITIES)


def _verdict_table(counts: dict, severities: dict) -> str:
    """Every verdict of the contract in its order, zeros greyed (the full vocabulary stays listed);
    verdicts the contract does not know follow, sorted. Beside each count, how many of its batches
    the broker was right to accept (explained) and how many it should have refused (violation)."""
    names = list(VERDICTS) + sorted(str(k) for k in counts if k not in VERDICTS)
    rows = "".join(
        f'<tr class="{"" if as_int(counts.get(n)) else "zero"}"><td class="mono">{esc(n)}</td>'
        f'<td class="num">{fmt(as_int(counts.get(n)))}</td>'
        + "".join(f'<td class="num">{fmt(as_int(as_dict(severities.get(n)).get(s))) if severities else DASH}</td>'
                  for s in FINDING_SEVERITIES) + "</tr>"
        for n in names)
    head = "".join(f"<th>{esc(s)}</th>" for s in FINDING_SEVERITIES)
    return (f'<div class="scroll"><table class="verdicts"><thead><tr><th>verdict</th><th>batches</th>{head}</tr>'
            f"</thead><tbody>{rows}</tbody></table></div>")


def _facts(s: dict, out) -> str:
    inputs = "".join(f"<li class='mono path'>{fmt_path(p)}</li>" for p in as_list(s.get("inputs")))
    inputs = inputs or f"<li>{DASH}</li>"
    facts = [("run id", esc(s.get("run_id") or DASH)),
             ("export run id", esc(s.get("export_run_id") or DASH)),
             ("audit time", f"{fmt(s.get('seconds'))} s" if is_num(s.get("seconds")) else DASH),
             ("output", span("mono path", fmt_path(out or DASH))), ("inputs", f"<ul>{inputs}</ul>")]
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>"


def _configuration(config: dict, settings: dict) -> str:
    if not config:
        return nothing("no configuration")
    rows = [[span("mono", esc(k)), config_value(str(k), v)] for k, v in config.items()]
    if not settings:  # an audit that recorded no sources
        return table(["setting", "value"], rows)
    return table(["setting", "value", "from"], [[*row, setting_source(settings.get(k))] for row, k in zip(rows, config)])


MAX_SOURCE_TOPICS = 12  # topics named per source; the others counted


def setting_source(entry) -> str:
    """Where a setting's value came from (``flag``, ``config``, ``cluster_metadata``,
    ``server.properties``, ``default``), with the broker's name of it; for a per-topic setting, the
    topics each source gave it to. A setting the audit does not resolve from the brokers: a dash.

    >>> setting_source({"value": 60000, "source": "cluster_metadata", "name": "producer.id.expiration.ms"})
    'cluster_metadata <span class="muted">(producer.id.expiration.ms)</span>'
    >>> setting_source({"value": {}, "name": "cleanup.policy", "topics": {"flag": ["a"], "default": ["b", "c"]}})
    'flag: a<br>default: b, c <span class="muted">(cleanup.policy)</span>'
    """
    entry = as_dict(entry)
    if not entry:
        return DASH
    broker_name = entry.get("name")
    name = f" {span('muted', esc(f'({broker_name})'))}" if broker_name else ""
    topics = as_dict(entry.get("topics"))
    if not topics:
        return f"{esc(entry.get('source') or DASH)}{name}"
    lines = []
    for source, names in topics.items():
        names = [str(t) for t in as_list(names)]
        shown = ", ".join(esc(t) for t in names[:MAX_SOURCE_TOPICS])
        more = f" and {len(names) - MAX_SOURCE_TOPICS:,} more" if len(names) > MAX_SOURCE_TOPICS else ""
        lines.append(f"{esc(source)}: {shown}{more}")
    return "<br>".join(lines) + name


def config_value(key: str, v) -> str:
    """A configuration value as HTML people read: a table (cleanup policies) as one ``key = value``
    line per entry; a list comma-separated or, when its entries are tables (broker restarts), one
    line each; durations in ms with the duration beside them; epoch times with the UTC time.

    >>> config_value("cleanup_policy", {"orders": "compact", "logs": "delete"})
    'orders = compact<br>logs = delete'
    >>> config_value("producer_id_expiration_ms", 604_800_000)
    '604,800,000 ms <span class="muted">(7 d)</span>'
    """
    if isinstance(v, dict):
        return "<br>".join(f"{esc(k)} = {_inline(str(k), x)}" for k, x in v.items()) or DASH
    if isinstance(v, list):
        if any(isinstance(x, dict) for x in v):
            return "<br>".join(_pairs(x) if isinstance(x, dict) else _inline(key, x) for x in v) or DASH
        return ", ".join(_inline(key, x) for x in v) or DASH
    return _scalar(key, v)


def _inline(key: str, v) -> str:
    """A value nested in a table or list, on one line: tables in braces, lists in brackets (as TOML)."""
    if isinstance(v, dict):
        return "{" + _pairs(v) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_inline(key, x) for x in v) + "]"
    return _scalar(key, v)


def _pairs(entries: dict) -> str:
    return ", ".join(f"{esc(k)} = {_inline(str(k), x)}" for k, x in entries.items())


def _scalar(key: str, v) -> str:
    """A single value; its key gives the unit: ``time_ms`` and ``*_time_ms`` an epoch time (a restart's,
    the export's), any other ``*_ms`` a duration."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if is_num(v) and (key == "time_ms" or key.endswith("_time_ms")):
        return f"{fmt(v)} {span('muted', esc(f'({fmt_time(v)})'))}"
    if is_num(v) and key.endswith("_ms"):
        return f"{fmt(v)} ms" + (f" {span('muted', esc(f'({human_ms(v)})'))}" if abs(v) >= 1000 else "")
    return fmt(v)
