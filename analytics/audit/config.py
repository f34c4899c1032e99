"""The audit's configuration: a TOML file, every key also a command-line flag.

    profile = "3.9"                       # the brokers' Kafka version (replay rules §2.9); default "4.x"
    producer_id_expiration_ms = 86400000  # producer.id.expiration.ms (default: the profile's)
    transaction_max_timeout_ms = 900000   # transaction.max.timeout.ms
    export_time_ms = 1767490224297        # "now" for hanging transactions (default: newest batch timestamp)
    dedup_key = "delivery"                # or "key_value" or "header:<name>" (contract.DEDUP_DELIVERY)
    range_batches = 250000                # a longer partition history is replayed in ranges this long
                                          # (default: sized from the memory of a task)
    server_properties = "/etc/kafka/server.properties"  # the brokers' static settings (analytics.audit.settings)
    skip_deleted_topics = true            # leave out the partition folders of deleted topics
                                          # (analytics.audit.incarnations); default: audited, marked deleted

    [cleanup_policy]                      # default: the data dir's __cluster_metadata, server.properties
    "orders-compacted" = "compact"

    [message_timestamp_type]              # a topic's message.timestamp.type (CreateTime or LogAppendTime)
    "orders" = "LogAppendTime"

    [log_start_offsets]                   # when known and not in the export's checkpoint
    "orders:0" = 1200

    [[broker_restarts]]                   # known restarts or truncations; topic/partition optional
    topic = "orders"
    partition = 0
    offset = 5120                         # log end offset at the restart, or time_ms = ...

    [validation]                          # thresholds of the GX suites (defaults strict)
    warn = ["no_zombie_write"]            # these checks fail as warnings, not errors
    allow = { no_unexplained_sequence_gap = 3 }   # offending rows tolerated per check
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from analytics.contract import DEDUP_DELIVERY, DEDUP_HEADER_PREFIX, DEDUP_KEY_VALUE, DEFAULT_DEDUP_KEY
from analytics.replay.broker import LATEST_PROFILE_NAME, Profile, resolve_profile



@dataclass(frozen=True)
class Restart:
    """A broker restart or truncation that lost producer state. ``offset``: the partition's log end
    offset then (batches at or above it were written after; "Loading producer state till offset"
    in the broker log); ``time_ms``: when, compared with batch timestamps (producer clocks)."""

    time_ms: int | None = None
    offset: int | None = None
    topic: str | None = None
    partition: int | None = None


@dataclass(frozen=True)
class AuditConfig:
    """``profile``: the brokers' behaviour by Kafka version (``resolve_profile``: a profile name, ``4.x``
    or a version such as ``3.9``); an unknown one is a ValueError. ``producer_id_expiration_ms`` None
    takes the profile's default (:attr:`expiration_ms`). ``range_batches``: how long a partition's
    history gets before it is replayed in several tasks (:mod:`analytics.audit.ranges`); None: the
    audit's plan sizes it from the memory of a task (:func:`analytics.audit.audit_plan.range_decision`)."""

    profile: str = LATEST_PROFILE_NAME
    producer_id_expiration_ms: int | None = None
    transaction_max_timeout_ms: int = 900_000
    export_time_ms: int | None = None
    dedup_key: str = DEFAULT_DEDUP_KEY
    cleanup_policy: dict[str, str] = field(default_factory=dict)
    log_start_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    broker_restarts: tuple[Restart, ...] = ()
    range_batches: int | None = None
    message_timestamp_type: dict[str, str] = field(default_factory=dict)
    server_properties: str | None = None
    skip_deleted_topics: bool = False
    # who gave each setting, flag or config (per topic for a per-topic one): the others are resolved
    # from the data dir, server.properties or the defaults (analytics.audit.settings); not a setting
    given: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        resolve_profile(self.profile)
        if self.range_batches is not None and self.range_batches < 1:
            raise ValueError(f"range_batches must be at least 1, not {self.range_batches}")

    @property
    def broker_profile(self) -> Profile:
        return resolve_profile(self.profile)

    @property
    def expiration_ms(self) -> int:
        """producer.id.expiration.ms as configured, else the profile's default (before 3.4 the brokers
        expired producers after transactional.id.expiration.ms, 7 days; since, after 1 day)."""
        if self.producer_id_expiration_ms is not None:
            return self.producer_id_expiration_ms
        return self.broker_profile.default_producer_id_expiration_ms

    def compacted_topics(self) -> list[str]:
        return sorted(t for t, policy in self.cleanup_policy.items() if "compact" in policy)

    def with_overrides(self, **overrides) -> "AuditConfig":
        """``self`` with the settings flags give (None: not given), which ``given`` names ``flag``."""
        given = {k: v for k, v in overrides.items() if v is not None}
        marks = dict(self.given)
        for k, v in given.items():
            before = getattr(self, k)
            marks[k] = ({**marks.get(k, {}), **{t: "flag" for t in v if v[t] != before.get(t) or t not in before}}
                        if k in PER_TOPIC else "flag")
        return replace(self, **given, given=marks)


# The settings held per topic (topic -> value); the sources a user gives (analytics.audit.settings.SOURCES)
PER_TOPIC = ("cleanup_policy", "message_timestamp_type")
GIVEN = ("flag", "config")


def load_config(path: str | Path | None) -> AuditConfig:
    """Read a TOML audit configuration; no path gives the defaults. Unknown keys are an error."""
    if path is None:
        return AuditConfig()
    return config_from_mapping(tomllib.loads(Path(path).read_text()), str(path))


def load_validation_section(path: str | Path | None) -> dict:
    """The ``[validation]`` table of a configuration file (thresholds of the GX suites)."""
    if path is None:
        return {}
    return dict(tomllib.loads(Path(path).read_text()).get("validation", {}))


def config_from_mapping(doc: dict, path: str = "configuration") -> AuditConfig:
    """An AuditConfig from a TOML document, or from the ``configuration`` an audit's summary.json records."""
    known = set(AuditConfig.__dataclass_fields__) - {"given"} | {"validation"}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ValueError(f"{path}: unknown configuration keys: {', '.join(unknown)}")
    starts = {}
    for key, offset in doc.get("log_start_offsets", {}).items():
        topic, _, partition = key.rpartition(":")
        starts[(topic, int(partition))] = int(offset)
    restarts = []
    for r in doc.get("broker_restarts", []):
        if r.get("time_ms") is None and r.get("offset") is None:
            raise ValueError(f"{path}: a broker_restarts entry needs time_ms or offset")
        restarts.append(Restart(
            None if r.get("time_ms") is None else int(r["time_ms"]),
            None if r.get("offset") is None else int(r["offset"]),
            r.get("topic"),
            None if r.get("partition") is None else int(r["partition"]),
        ))
    dedup_key = str(doc.get("dedup_key", DEFAULT_DEDUP_KEY))
    check_dedup_key(dedup_key)
    return AuditConfig(
        profile=str(doc.get("profile", LATEST_PROFILE_NAME)),
        producer_id_expiration_ms=None if doc.get("producer_id_expiration_ms") is None
        else int(doc["producer_id_expiration_ms"]),
        transaction_max_timeout_ms=int(doc.get("transaction_max_timeout_ms", 900_000)),
        export_time_ms=None if doc.get("export_time_ms") is None else int(doc["export_time_ms"]),
        dedup_key=dedup_key,
        cleanup_policy={str(k): str(v) for k, v in doc.get("cleanup_policy", {}).items()},
        log_start_offsets=starts,
        broker_restarts=tuple(restarts),
        range_batches=None if doc.get("range_batches") is None else int(doc["range_batches"]),
        message_timestamp_type={str(k): str(v) for k, v in doc.get("message_timestamp_type", {}).items()},
        server_properties=None if doc.get("server_properties") is None else str(doc["server_properties"]),
        skip_deleted_topics=_boolean(doc.get("skip_deleted_topics", False), path, "skip_deleted_topics"),
        given={k: ({str(t): "config" for t in doc[k]} if k in PER_TOPIC else "config")
               for k in doc if k in AuditConfig.__dataclass_fields__},
    )


def _boolean(value, path: str, key: str) -> bool:
    """A TOML boolean; a ValueError naming ``key`` for anything else."""
    if not isinstance(value, bool):
        raise ValueError(f"{path}: {key} must be true or false, not {value!r}")
    return value


def check_dedup_key(value: str) -> None:
    """``delivery`` (key, value, headers and a CreateTime batch's timestamp: what a retry repeats),
    ``key_value`` (record key and value hash) or ``header:<name>`` (``contract.DEDUP_*``).

    >>> check_dedup_key("header:event-id")
    """
    if value in (DEDUP_DELIVERY, DEDUP_KEY_VALUE) or (
            value.startswith(DEDUP_HEADER_PREFIX) and len(value) > len(DEDUP_HEADER_PREFIX)):
        return
    if value.startswith("json:"):
        raise ValueError("dedup_key json:<field> needs record values, which the records table does not keep; "
                         "use delivery, key_value or header:<name>")
    raise ValueError(f"dedup_key must be delivery, key_value or header:<name>, not {value!r}")


def recorded_config(summary: dict) -> AuditConfig:
    """The configuration the audit whose ``summary.json`` is ``summary`` was given, to make it again:
    its export time only when it was configured (else the next audit finds it as that one did)."""
    doc = dict(summary.get("configuration") or {})
    if summary.get("export_time_source") != "configuration":
        doc.pop("export_time_ms", None)
    if "settings" not in summary:  # an audit before settings were resolved recorded the defaults it used
        for setting, default in (("producer_id_expiration_ms", _profile_default(doc.get("profile"))),
                                 ("transaction_max_timeout_ms", AuditConfig.transaction_max_timeout_ms)):
            if doc.get(setting) == default:
                doc.pop(setting)
    given: dict = {}
    for setting, entry in (summary.get("settings") or {}).items():  # resolved ones are resolved again
        if "topics" in entry:
            given[setting] = {t: s for s, ts in entry["topics"].items() if s in GIVEN for t in ts}
            doc[setting] = {t: v for t, v in (doc.get(setting) or {}).items() if t in given[setting]}
        elif entry.get("source") in GIVEN:
            given[setting] = entry["source"]
        else:
            doc.pop(setting, None)
    config = config_from_mapping(doc, "the previous audit's summary.json")
    return replace(config, given=config.given | given) if given else config


def _profile_default(profile) -> int | None:
    """The expiration a profile defaults to (None for a profile that does not resolve)."""
    try:
        return resolve_profile(str(profile or LATEST_PROFILE_NAME)).default_producer_id_expiration_ms
    except ValueError:
        return None


def settings_of(config: AuditConfig) -> dict:
    """``config`` as the values the audit uses, by setting (the expiration resolved from the profile),
    in the form ``summary.json`` records."""
    values = {k: getattr(config, k) for k in AuditConfig.__dataclass_fields__ if k != "given"}
    values["producer_id_expiration_ms"] = config.expiration_ms
    values["log_start_offsets"] = {f"{t}:{p}": o for (t, p), o in config.log_start_offsets.items()}
    values["broker_restarts"] = [asdict(r) for r in config.broker_restarts]
    return values


def changes(before: AuditConfig, after: AuditConfig, *, export_time: bool = True) -> list[str]:
    """One phrase per setting ``after`` gives another value than ``before``: ``name old -> new`` for a
    value, ``name N -> M entries`` for a table (restarts, cleanup policies, log starts).

    >>> changes(AuditConfig(), AuditConfig(producer_id_expiration_ms=60_000, cleanup_policy={"t": "compact"}))
    ['producer_id_expiration_ms 86400000 -> 60000', 'cleanup_policy 0 -> 1 entries']
    """
    old, new = settings_of(before), settings_of(after)
    return [f"{name} {_shown(name, old[name])} -> {_shown(name, value)}" for name, value in new.items()
            if value != old[name] and (export_time or name != "export_time_ms")]


def non_defaults(config: AuditConfig) -> list[str]:
    """One phrase per setting of ``config`` other than the default (the export time aside).

    >>> non_defaults(AuditConfig(profile="3.9", broker_restarts=(Restart(offset=5),)))
    ['profile 3.9', 'broker_restarts 1 entries']
    """
    default, values = settings_of(AuditConfig()), settings_of(config)
    return [f"{name} {_shown(name, value)}" for name, value in values.items()
            if value != default[name] and name != "export_time_ms"]


def _shown(name: str, value) -> str:
    if isinstance(value, (dict, list, tuple)):
        return f"{len(value)} entries" if value else "0"
    if value is None:
        return "from the log" if name == "export_time_ms" else "unset"
    return str(value)
