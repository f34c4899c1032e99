"""Each broker and topic setting the audit uses, resolved once, with where its value came from.

Precedence, highest first (``SOURCES``): a command-line flag, the ``--config`` file, the data dir's
KRaft metadata log (``cluster_configs``: a topic's own config for a per-topic setting; the dynamic
broker config, a broker's own entry then the cluster default ``""``), the broker's
``server.properties`` (``--server-properties``), the profile's default.

- broker settings: ``producer.id.expiration.ms``, ``transaction.max.timeout.ms``;
- per topic: ``cleanup.policy`` (broker default ``log.cleanup.policy``) and
  ``message.timestamp.type`` (``log.message.timestamp.type``).

An export of a live cluster asked it for the same configs (DescribeConfigs): its topics' own and
the brokers' dynamic configs stand where the metadata log's do (``cluster_metadata``: the
controllers' metadata is what the brokers answer from), and the brokers' static configs where
``server.properties`` does, unless a file is given (:func:`static_properties`).

The metadata log read is the one that went furthest (the highest ``end_offset``) when the export
holds several brokers' log dirs; a broker's own entry is that of a broker whose log dir is in the
export (``meta.properties``), the smallest value when they differ (each broker forgets producers
after its own expiration: the smallest is the one some broker applied).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from analytics.audit.config import GIVEN, AuditConfig
from analytics.contract import CONFIG_STATIC_BROKER

FLAG, CONFIG, CLUSTER_METADATA, SERVER_PROPERTIES, DEFAULT = "flag", "config", "cluster_metadata", "server.properties", "default"
SOURCES = (FLAG, CONFIG, CLUSTER_METADATA, SERVER_PROPERTIES, DEFAULT)
# setting -> the broker's config name (dynamic and in server.properties)
BROKER_SETTINGS = {"producer_id_expiration_ms": "producer.id.expiration.ms",
                   "transaction_max_timeout_ms": "transaction.max.timeout.ms"}
# setting -> (the topic's config name, the broker's default's name, the value when nothing sets it)
TOPIC_SETTINGS = {"cleanup_policy": ("cleanup.policy", "log.cleanup.policy", "delete"),
                  "message_timestamp_type": ("message.timestamp.type", "log.message.timestamp.type", "CreateTime")}
TOPIC, BROKER = "topic", "broker"


def read_server_properties(path: str | Path) -> dict[str, str]:
    """A ``server.properties`` file as ``java.util.Properties.load`` reads it (the broker's
    ``Utils.loadProps``): ISO-8859-1, ``key=value``, ``key: value`` or ``key value``, ``#`` and ``!``
    comments, a line ending in an odd number of backslashes continued on the next; OSError when it
    cannot be read."""
    text = Path(path).read_bytes().decode("latin-1")
    values: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not logical and (not line or line[0] in "#!"):
            continue
        if (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            logical += line[:-1]
            continue
        key, value = _split(logical + line)
        values[key] = value
        logical = ""
    if logical:
        key, value = _split(logical)
        values[key] = value
    return values


def _split(line: str) -> tuple[str, str]:
    """A logical line's key and value: the key ends at the first unescaped ``=``, ``:`` or whitespace."""
    for i, ch in enumerate(line):
        if ch in "=: \t\f" and (i == 0 or line[i - 1] != "\\"):
            rest = line[i:].lstrip(" \t\f")
            if rest[:1] in ("=", ":") and ch not in "=:":
                rest = rest[1:]
            elif ch in "=:":
                rest = rest[1:]
            return _unescape(line[:i]), _unescape(rest.lstrip(" \t\f"))
    return _unescape(line), ""


def _unescape(text: str) -> str:
    return text.replace("\\=", "=").replace("\\:", ":").replace("\\ ", " ").replace("\\\\", "\\")


def resolve(config: AuditConfig, topics: list[str], cluster: list[dict],
            server: dict[str, str] | None) -> tuple[AuditConfig, dict]:
    """``config`` (what the flags and the file gave: ``config.given``; a value of a caller's own
    ``AuditConfig`` other than the default counts as the file's) with every other setting taken
    from the metadata log's ``cluster`` rows and the ``server`` properties; and the provenance
    ``summary.json`` records: per broker setting its value and source, per topic setting the value
    and the topics each source gave (``topics``: the exported topics)."""
    server = server or {}
    given = config.given or {}
    rows = _freshest(cluster)
    topic_configs = {(r["resource_name"], r["name"]): r["value"] for r in rows if r["resource_type"] == TOPIC}
    nodes = {str(r["node_id"]) for r in cluster if r.get("node_id") is not None}
    broker_rows = [r for r in rows if r["resource_type"] == BROKER]

    def dynamic(name: str) -> str | None:
        """The dynamic broker config ``name``: the exported brokers' own entries, else the cluster default."""
        own = [r["value"] for r in broker_rows if r["name"] == name and r["resource_name"] in nodes]
        if own:
            return _smallest(own)
        cluster_wide = [r["value"] for r in broker_rows if r["name"] == name and r["resource_name"] == ""]
        return cluster_wide[0] if cluster_wide else None

    changes: dict = {}
    provenance: dict = {}
    for setting, name in BROKER_SETTINGS.items():
        source, value = given.get(setting), getattr(config, setting)
        if source is None and value != AuditConfig.__dataclass_fields__[setting].default:
            source = CONFIG  # set by a library caller, who says nothing of where from
        if source not in GIVEN:
            source, value = DEFAULT, AuditConfig.__dataclass_fields__[setting].default
            for candidate, found in ((CLUSTER_METADATA, dynamic(name)), (SERVER_PROPERTIES, server.get(name))):
                if found is not None and _as_int(found) is not None:
                    source, value = candidate, _as_int(found)
                    break
            changes[setting] = value
        shown = config.broker_profile.default_producer_id_expiration_ms if value is None else value
        provenance[setting] = {"value": shown, "source": source, "name": name}
    for setting, (name, broker_name, default) in TOPIC_SETTINGS.items():
        mine = dict(getattr(config, setting))
        from_user = given.get(setting) or {}
        broker_default = [(CLUSTER_METADATA, dynamic(broker_name)), (SERVER_PROPERTIES, server.get(broker_name))]
        values, by_source = {}, {s: [] for s in SOURCES}
        for topic in sorted(set(topics) | set(mine)):
            if topic in mine:  # before resolution, the map holds what a flag, the file or a caller gave
                source, value = from_user.get(topic, CONFIG), mine[topic]
            elif (topic, name) in topic_configs:
                source, value = CLUSTER_METADATA, topic_configs[(topic, name)]
            else:
                source, value = next(((s, v) for s, v in broker_default if v is not None), (DEFAULT, default))
            if source != DEFAULT:
                values[topic] = value
            by_source[source].append(topic)
        changes[setting] = values
        provenance[setting] = {"value": values, "name": name, "default": default,
                               "topics": {s: t for s, t in by_source.items() if t}}
    return replace(config, **changes), provenance


def _freshest(cluster: list[dict]) -> list[dict]:
    """The rows of the log dir whose metadata log went furthest."""
    if not cluster:
        return []
    ends: dict = {}
    for r in cluster:
        ends[r["log_dir"]] = max(ends.get(r["log_dir"], -1), r["end_offset"] if r.get("end_offset") is not None else -1)
    best = max(ends, key=lambda d: (ends[d], d))
    return [r for r in cluster if r["log_dir"] == best]


def _smallest(values: list[str]) -> str:
    """Of one setting's values on several brokers, the smallest number (the first broker to act on
    it: to forget a producer, say); values that are not numbers only when none is."""
    return min(values, key=lambda v: (_as_int(v) is None, _as_int(v) or 0, v))


def _as_int(text) -> int | None:
    try:
        return int(str(text).strip())
    except ValueError:
        return None


def resolved(store, config: AuditConfig) -> tuple[AuditConfig, dict]:
    """:func:`resolve` over the export published in ``store`` (:class:`analytics.publish.Published`):
    its topics (the ``batches`` folders), its ``cluster_configs`` (none in an export older than the
    table) and the ``server.properties`` the configuration names."""
    from analytics.kafka import sinks

    topics = [n.partition("=")[2] for n in sinks.names(store.path("batches")) if n.startswith("topic=")] \
        if store.is_dir("batches") else []
    cluster: list[dict] = []
    if store.is_dir("cluster_configs"):
        for f in sinks.parquet_files(store.path("cluster_configs")):
            cluster += sinks.read_table(f).to_pylist()
    server = (static_properties(cluster) if config.server_properties is None
              else read_server_properties(config.server_properties))
    return resolve(config, topics, [r for r in cluster if r["resource_type"] != CONFIG_STATIC_BROKER], server)


def static_properties(cluster: list[dict]) -> dict[str, str] | None:
    """The brokers' static settings (their server.properties) as a live cluster reported them
    (``cluster_configs`` rows of ``contract.CONFIG_STATIC_BROKER``); for a setting the brokers give
    differently, the smallest number (the first broker to forget a producer, say); None: no row.

    >>> static_properties([{"resource_type": "static_broker", "resource_name": "2", "name": "a", "value": "9"},
    ...                    {"resource_type": "static_broker", "resource_name": "1", "name": "a", "value": "7"}])
    {'a': '7'}
    """
    found: dict[str, list[str]] = {}
    for r in cluster:
        if r["resource_type"] == CONFIG_STATIC_BROKER:
            found.setdefault(r["name"], []).append(r["value"])
    return {name: _smallest(values) for name, values in found.items()} or None
