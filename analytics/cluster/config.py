"""Where a live cluster is and how to log in: ``kafka://HOST:PORT[,HOST:PORT...]`` and a client
properties file in Kafka's own property names (``--client-config FILE``).

The properties a Java client's ``client.properties`` uses for security are read and turned into
kafka-python's settings: ``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL),
``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with ``sasl.jaas.config``'s
``username="..." password="..."``, and PEM trust and key stores (``ssl.truststore.location`` /
``ssl.keystore.location`` with ``.type=PEM``, ``ssl.key.password``,
``ssl.endpoint.identification.algorithm``), and ``request.timeout.ms``, ``default.api.timeout.ms``
(how long to wait for a first broker) and ``client.id``. JKS and PKCS12 stores cannot be read from Python: the
error says to convert them. Every other property of a producer or consumer file is ignored, as
segaudit only reads. Secrets stay in :class:`ClientConfig` (whose ``repr`` hides them): the
driver passes the file's path to the executors, never its contents.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from analytics.errors import InputError, UsageError

SCHEME = "kafka://"
CLIENT_ID = "segaudit"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_JAAS = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def is_cluster(source: str) -> bool:
    """Whether an input names a live cluster rather than log files.

    >>> is_cluster("kafka://b1:9092,b2:9092"), is_cluster("/var/kafka-logs")
    (True, False)
    """
    return source.startswith(SCHEME)


def bootstrap_of(source: str) -> str:
    """The bootstrap servers of ``kafka://HOST:PORT[,HOST:PORT...]``.

    >>> bootstrap_of("kafka://b1:9092,b2:9093/")
    'b1:9092,b2:9093'
    """
    servers = [s.strip() for s in source.removeprefix(SCHEME).rstrip("/").split(",") if s.strip()]
    bad = [s for s in servers if not re.fullmatch(r"[^:/\s]+:\d{1,5}|\[[0-9a-fA-F:]+\]:\d{1,5}", s)]
    if not servers or bad:
        raise UsageError(f"a cluster is kafka://HOST:PORT[,HOST:PORT...], not {source!r}")
    return ",".join(servers)


@dataclass(frozen=True)
class ClientConfig:
    """kafka-python settings for one cluster (bootstrap, security, client id); ``repr`` shows no secret."""

    bootstrap: str
    settings: dict = field(default_factory=dict, repr=False)
    source: str | None = None  # the properties file, when one was given

    def __repr__(self) -> str:
        return f"ClientConfig(bootstrap={self.bootstrap!r}, {describe(self.settings)})"

    def kwargs(self, **more) -> dict:
        """Keyword arguments of a kafka-python client."""
        return {"bootstrap_servers": self.bootstrap, "client_id": CLIENT_ID, **self.settings, **more}


def describe(settings: dict) -> str:
    """The settings without their secrets, for messages.

    >>> describe({"security_protocol": "SASL_SSL", "sasl_plain_password": "x"})
    'sasl_plain_password=***, security_protocol=SASL_SSL'
    """
    return ", ".join(f"{k}={'***' if _secret(k) else v}" for k, v in sorted(settings.items())) or "PLAINTEXT"


def load(source: str, properties: str | None = None) -> ClientConfig:
    """The :class:`ClientConfig` of ``kafka://...`` with the properties file ``properties`` (or none)."""
    bootstrap = bootstrap_of(source)
    if properties is None:
        return ClientConfig(bootstrap)
    path = Path(properties)
    try:
        text = path.read_text()
    except OSError as e:
        raise InputError(f"cannot read the client configuration {properties}: {e.strerror or e}") from None
    return ClientConfig(bootstrap, settings(parse_properties(text), properties), str(path.resolve()))


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties text's keys and values (``key=value`` or ``key: value``, ``#``/``!`` comments,
    lines continued with a trailing backslash).

    >>> parse_properties('a=1\\n# c\\nb : two \\\\\\n  words\\n')
    {'a': '1', 'b': 'two words'}
    """
    out: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if (len(line) - len(line.rstrip("\\"))) % 2:  # an odd number of backslashes continues the line
            logical += line[:-1]
            continue
        logical += line
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", logical)
        key, value = (m.group(1), m.group(2)) if m else (logical, "")
        out[key] = value
        logical = ""
    return out


def settings(props: dict[str, str], where: str = "the client configuration") -> dict:
    """kafka-python's settings of the security properties of a Kafka client properties file."""
    out: dict = {}
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise InputError(f"{where}: security.protocol must be one of {', '.join(PROTOCOLS)}, not {protocol}")
    out["security_protocol"] = protocol
    if protocol.startswith("SASL"):
        mechanism = props.get("sasl.mechanism", "GSSAPI").upper()
        if mechanism not in MECHANISMS:
            raise InputError(f"{where}: sasl.mechanism {mechanism} is not supported (use one of {', '.join(MECHANISMS)})")
        jaas = dict(_JAAS.findall(props.get("sasl.jaas.config", "")))
        if "username" not in jaas or "password" not in jaas:
            raise InputError(f"{where}: sasl.jaas.config needs username=\"...\" and password=\"...\"")
        out.update(sasl_mechanism=mechanism, sasl_plain_username=jaas["username"],
                   sasl_plain_password=jaas["password"].replace('\\"', '"'))
    if protocol.endswith("SSL"):
        for store, setting in (("truststore", "ssl_cafile"), ("keystore", "ssl_certfile")):
            location = props.get(f"ssl.{store}.location")
            if not location:
                continue
            kind = props.get(f"ssl.{store}.type", "JKS").upper()
            if kind != "PEM":
                raise InputError(f"{where}: ssl.{store}.type {kind} cannot be read by segaudit; convert the store to "
                                 f"PEM (openssl pkcs12 -in STORE -out store.pem) and set ssl.{store}.type=PEM")
            out[setting] = location
        if "ssl.key.password" in props:
            out["ssl_password"] = props["ssl.key.password"]
        if props.get("ssl.endpoint.identification.algorithm", "https") == "":
            out["ssl_check_hostname"] = False
    for name, setting in (("request.timeout.ms", "request_timeout_ms"), ("default.api.timeout.ms", "bootstrap_timeout_ms"),
                          ("client.id", "client_id")):
        if name in props:
            out[setting] = int(props[name]) if name.endswith(".ms") else props[name]
    return out


def _secret(setting: str) -> bool:
    return "password" in setting or "secret" in setting or "token" in setting
