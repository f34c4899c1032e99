"""A ``kafka://`` export whose TLS does not match the listener's: one line naming what to change,
exit 2. The listener is a TLS server on loopback with a certificate made here (a broker's TLS
handshake is TLS's own; a broker that refuses TLS is in ``tests/test_live_cluster.py``)."""

from __future__ import annotations

import datetime
import socket
import ssl
import subprocess
import sys
import threading

import pytest

from tests.commands import assert_own_lines
from tests.conftest import REPO


@pytest.fixture(scope="module")
def tls_listener(tmp_path_factory):
    """A listener that completes TLS handshakes with a self-signed certificate for 127.0.0.1, then
    closes the connection (it speaks no Kafka); its address and the certificate's PEM file."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "a broker")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    cert, key_file = folder / "broker.pem", folder / "broker.key"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key_file)
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.settimeout(1)
                    tls.recv(1)
            except OSError:
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}", cert
    stop.set()
    thread.join(timeout=5)
    server.close()


def _export(tmp_path, bootstrap: str, properties: str) -> subprocess.CompletedProcess:
    config = tmp_path / "client.properties"
    config.write_text(properties + "default.api.timeout.ms=3000\nrequest.timeout.ms=3000\n")
    done = subprocess.run([sys.executable, "-m", "analytics", "export", f"kafka://{bootstrap}", "--out",
                           str(tmp_path / "out"), "--client-config", str(config)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert_own_lines(done.stderr)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert not (tmp_path / "out").exists()
    return done


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SASL_PLAINTEXT"])
def test_no_tls_configured_for_a_listener_that_speaks_it(tls_listener, tmp_path, protocol):
    bootstrap, _ = tls_listener
    sasl = ("sasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="audit" password="p";\n') if protocol.startswith("SASL") else ""
    done = _export(tmp_path, bootstrap, f"security.protocol={protocol}\n{sasl}")
    assert done.stderr == (f"segaudit: cannot use kafka://{bootstrap}: the listener speaks TLS, and security.protocol "
                           f"is {protocol}: set SSL (or SASL_SSL) in --client-config\n")


def test_a_certificate_that_is_not_trusted(tls_listener, tmp_path):
    bootstrap, _ = tls_listener
    done = _export(tmp_path, bootstrap, "security.protocol=SSL\n")
    assert done.stderr.startswith(f"segaudit: cannot use kafka://{bootstrap}: the broker's TLS certificate is not "
                                  "trusted (self-signed certificate): give its CA as ssl.truststore.location"), done.stderr


def test_the_probe_finds_nothing_wrong_where_the_handshake_is_trusted(tls_listener, tmp_path):
    from analytics.cluster import login
    from analytics.cluster.config import load

    bootstrap, cert = tls_listener
    config = tmp_path / "client.properties"
    config.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={cert}\n")
    assert login.tls_problem(load(f"kafka://{bootstrap}", str(config))) is None
