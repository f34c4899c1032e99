"""Why a login fails, asked of a bootstrap broker directly: TLS, then SASL.

kafka-python reports a refused login only in its log, and not even there when the broker's
refusal and its closing of the connection arrive in one read (the answer is dropped and the
bootstrap retries until it times out). So when no broker could be bootstrapped, the first
bootstrap broker that accepts a connection is asked directly:

- :func:`tls_problem`: a TLS handshake. With ``security.protocol`` SSL or SASL_SSL, one that fails
  says the listener does not speak TLS, or that its certificate is not trusted; with PLAINTEXT or
  SASL_PLAINTEXT, one that succeeds (verifying nothing) says the listener speaks TLS.
- :func:`refusal`: with SASL configured, one blocking exchange of SaslHandshake and
  SaslAuthenticate, read to the end of the broker's answer, tells a refused login from a broker
  that does not answer.
"""

from __future__ import annotations

import socket
import ssl
import time

from analytics.cluster.config import ClientConfig

SASL = ("SASL_PLAINTEXT", "SASL_SSL")
TLS = ("SSL", "SASL_SSL")
WAIT_S = 10.0
TLS_WAIT_S = 5.0


def tls_problem(config: ClientConfig, wait_s: float = TLS_WAIT_S) -> str | None:
    """What is wrong with this configuration's TLS against the first bootstrap broker that accepts a
    connection (``None``: nothing found, or no broker accepts one)."""
    settings = config.kwargs()
    protocol = settings.get("security_protocol", "PLAINTEXT")
    for host, port in _servers(config):
        try:
            sock = socket.create_connection((host, port), timeout=wait_s)
        except OSError:
            continue
        with sock:
            if protocol in TLS:
                try:
                    _tls_context(settings).wrap_socket(sock, server_hostname=host).close()
                except ssl.SSLCertVerificationError as e:
                    return (f"the broker's TLS certificate is not trusted ({e.verify_message}): "
                            f"give its CA as ssl.truststore.location (ssl.truststore.type=PEM) in --client-config")
                except (OSError, EOFError) as e:
                    return (f"no TLS handshake ({_first_line(e)}): does this listener speak TLS? "
                            f"security.protocol is {protocol} in --client-config")
                return None
            unverified = ssl.create_default_context()
            unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE
            try:
                unverified.wrap_socket(sock).close()
            except (OSError, EOFError):
                return None  # it does not speak TLS: not what is wrong
            return (f"the listener speaks TLS, and security.protocol is {protocol}: set SSL (or SASL_SSL) "
                    f"in --client-config")
    return None


def _servers(config: ClientConfig) -> list[tuple[str, int]]:
    """The bootstrap brokers as (host, port); an entry whose port is no number left out."""
    out = []
    for server in config.bootstrap.split(","):
        host, _, port = server.rpartition(":")
        if port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def refusal(config: ClientConfig, wait_s: float = WAIT_S) -> str | None:
    """The broker's reason for refusing this configuration's login (``None`` when no SASL is
    configured, the login succeeds, or no bootstrap broker can be asked)."""
    settings = config.kwargs()
    if settings.get("security_protocol") not in SASL:
        return None
    for host, port in _servers(config):
        try:
            return _authenticate(host, port, settings, time.monotonic() + wait_s)
        except (OSError, ValueError, EOFError):
            continue  # this broker cannot be asked: the next one may
    return None


def _authenticate(host: str, port: int, settings: dict, deadline: float) -> str | None:
    from kafka.errors import for_code
    from kafka.net.sasl import get_sasl_mechanism
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

    with _connect(host, port, settings, deadline) as sock:
        exchange = _Exchange(sock, settings["client_id"], deadline)
        handshake = SaslHandshakeRequest(mechanism=settings["sasl_mechanism"])
        handshake.API_VERSION = 1  # v1: the exchange goes on in SaslAuthenticate requests
        answer = exchange.ask(handshake)
        if answer.error_code:
            return f"{for_code(answer.error_code).__name__}: the broker offers {', '.join(answer.mechanisms)}"
        mechanism = get_sasl_mechanism(settings["sasl_mechanism"])(host=host, **settings)
        while not mechanism.is_done():
            request = SaslAuthenticateRequest(auth_bytes=mechanism.auth_bytes())
            request.API_VERSION = 0
            answer = exchange.ask(request)
            if answer.error_code:
                return answer.error_message or for_code(answer.error_code).__name__
            mechanism.receive(answer.auth_bytes)
        return None if mechanism.is_authenticated() else f"the {settings['sasl_mechanism']} exchange did not end"


def _connect(host: str, port: int, settings: dict, deadline: float) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=max(0.1, deadline - time.monotonic()))
    if settings["security_protocol"] != "SASL_SSL":
        return sock
    return _tls_context(settings).wrap_socket(sock, server_hostname=host)


def _tls_context(settings: dict) -> ssl.SSLContext:
    """The TLS context kafka-python builds from these settings."""
    from kafka.net.transport import KafkaSSLTransport

    ssl_settings = {**KafkaSSLTransport.DEFAULT_CONFIG,
                    **{k: v for k, v in settings.items() if k in KafkaSSLTransport.DEFAULT_CONFIG}}
    return KafkaSSLTransport._build_ssl_context(ssl_settings)


class _Exchange:
    """Requests and their answers over a blocking socket (kafka-python's sans-IO framing)."""

    def __init__(self, sock: socket.socket, client_id: str, deadline: float):
        from kafka.protocol.parser import KafkaProtocol

        self.sock, self.deadline = sock, deadline
        self.protocol = KafkaProtocol(client_id=client_id)

    def ask(self, request):
        self.protocol.send_request(request)
        self.sock.sendall(self.protocol.send_bytes())
        while True:
            self.sock.settimeout(max(0.1, self.deadline - time.monotonic()))
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("the broker closed the connection")
            for _, answer in self.protocol.receive_bytes(data):
                return answer
