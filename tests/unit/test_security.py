"""Client security settings (``clusters/security.py``) and the TLS and SASL handshakes of the
tool's own protocol requests (``clusters/wire.py``), against a socket server that plays the
broker's side of KIP-152 with scramp's SCRAM server. The real broker's side comes with the
attach backends' cluster tests (issue 35)."""

from __future__ import annotations

import base64
import datetime
import http.server
import io
import json
import socket
import ssl
import struct
import threading
from pathlib import Path

import pytest
import scramp
from kio.schema.describe_quorum.v1 import response as quorum
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.schema.sasl_authenticate.v2 import request as auth_req
from kio.schema.sasl_authenticate.v2 import response as auth_resp
from kio.schema.sasl_handshake.v1 import response as handshake_resp
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32, i64

from kafka_chaos.clusters import security, wire
from tests.certs import authority

SECRET = "s3cr3t-Value"


def props(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return path


def test_a_properties_file_resolves_kafkas_config_providers_and_hides_secrets(
        tmp_path) -> None:
    (tmp_path / "creds.properties").write_text("# creds\nuser = chaos\n")
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "ca.pem").write_text("pem\n")
    path = props(tmp_path, "# the cluster's\nsecurity.protocol=sasl_ssl\n"
                 "sasl.mechanisms: SCRAM-SHA-512\n"
                 f"sasl.username=${{file:{tmp_path}/creds.properties:user}}\n"
                 "sasl.password=${env:KC_PASSWORD}\n"
                 f"ssl.ca.location={tmp_path}/secrets/ca.pem\n")
    got = security.load(path, {"KC_PASSWORD": SECRET})
    assert got.librdkafka() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "chaos", "sasl.password": SECRET,
        "ssl.ca.location": f"{tmp_path}/secrets/ca.pem"}
    assert got.tls and got.sasl == "SCRAM-SHA-512"
    assert got.describe()["sasl.password"] == "[hidden]" and SECRET not in str(got.describe())
    dir_ref = props(tmp_path, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.username=u\n"
                    f"sasl.password=${{dir:{tmp_path}/secrets:ca.pem}}\n")
    assert security.load(dir_ref, {}).settings["sasl.password"] == "pem"
    assert security.load(props(tmp_path, "")).protocol == "PLAINTEXT"


@pytest.mark.parametrize("text, environ, message", [
    ("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n", {},
     ":2: sasl.mechanism: 'GSSAPI': choose from PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
     "OAUTHBEARER"),
    ("security.protocol=TLS\n", {}, ":1: security.protocol: 'TLS': choose from"),
    ("bootstrap.servers=x:9092\n", {}, ":1: bootstrap.servers: not a client security"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=u\n", {},
     ": sasl.password: SASL_PLAINTEXT with PLAIN needs it"),
    ("sasl.password=${env:NOPE}\n", {}, ":1: sasl.password: environment variable NOPE"),
    ("ssl.ca.location=/no/such/ca.pem\n", {}, ":1: ssl.ca.location: /no/such/ca.pem cannot"),
    ("just words\n", {}, ":1: 'just words' is no key=value"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n", {},
     ": sasl.oauthbearer.config: OAUTHBEARER without oidc needs principal=NAME"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\nsasl.oauthbearer.config="
     "principal=p\n", {}, ": enable.sasl.oauthbearer.unsecure.jwt: must be true"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\nsasl.oauthbearer.method=oidc\n"
     "sasl.oauthbearer.client.id=kc\nsasl.oauthbearer.client.secret=s\n", {},
     ": sasl.oauthbearer.token.endpoint.url: sasl.oauthbearer.method=oidc needs it"),
])
def test_a_bad_properties_file_is_one_error_naming_line_and_key(tmp_path, text, environ,
                                                                 message) -> None:
    path = props(tmp_path, text)
    with pytest.raises(security.SecurityError) as err:
        security.load(path, environ)
    assert str(err.value).startswith(str(path)) and message in str(err.value)
    assert err.value.exit_code == 254


# -- the broker's side of TLS and SASL, for the wire tests ------------------------------------

def _write(entity) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def _answer(correlation: int, entity) -> bytes:
    header_type = type(entity).__header_schema__
    body = _write(header_type(correlation_id=i32(correlation))) + _write(entity)
    return struct.pack(">i", len(body)) + body


def _read(conn: socket.socket, n: int) -> bytes:
    """Up to ``n`` bytes (fewer at the end of the stream; TLS sockets take no MSG_WAITALL)."""
    out = b""
    while len(out) < n:
        chunk = conn.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


QUORUM = quorum.DescribeQuorumResponse(error_code=ErrorCode.none, topics=(quorum.TopicData(
    topic_name=TopicName("__cluster_metadata"), partitions=(quorum.PartitionData(
        partition_index=i32(0), error_code=ErrorCode.none, leader_id=BrokerId(3),
        leader_epoch=i32(2), high_watermark=i64(9), current_voters=(), observers=()),)),))


class SaslBroker:
    """Serves one connection: TLS when ``context`` is given, then SASL ``mechanism`` for
    user ``chaos`` with password ``SECRET`` (scramp's SCRAM server, or PLAIN), then one
    ``DescribeQuorum`` answered with ``QUORUM``. ``seen`` lists the API keys asked."""

    def __init__(self, mechanism: str, context: ssl.SSLContext | None = None) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"localhost:{self.listener.getsockname()[1]}"
        self.mechanism, self.context, self.seen, self.tokens = mechanism, context, [], []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        raw, _ = self.listener.accept()
        try:
            conn = self.context.wrap_socket(raw, server_side=True) if self.context else raw
        except ssl.SSLError:
            raw.close()
            return
        scram = None
        if self.mechanism.startswith("SCRAM"):
            m = scramp.ScramMechanism(self.mechanism)
            auth = m.make_auth_info(SECRET, iteration_count=4096)
            scram = m.make_server(lambda user: auth)
        with conn:
            while True:
                head = _read(conn, 4)
                if len(head) < 4:
                    return
                data = _read(conn, struct.unpack(">i", head)[0])
                key, version = struct.unpack(">hh", data[:4])
                self.seen.append(key)
                header_type = HeaderV2 if key in (36, 55) else HeaderV1
                header, at = entity_reader(header_type)(data, 0)
                corr = header.correlation_id
                if key == 17:  # SaslHandshake
                    ok = self.mechanism != "refuse"
                    conn.sendall(_answer(corr, handshake_resp.SaslHandshakeResponse(
                        error_code=ErrorCode.none if ok else
                        ErrorCode.unsupported_sasl_mechanism,
                        mechanisms=("SCRAM-SHA-512",))))
                elif key == 36:  # SaslAuthenticate
                    token = entity_reader(auth_req.SaslAuthenticateRequest)(data, at)[0]
                    conn.sendall(_answer(corr, self._authenticate(scram, token.auth_bytes)))
                elif key == 55:
                    conn.sendall(_answer(corr, QUORUM))

    def _authenticate(self, scram, token: bytes):
        def reply(data: bytes = b"", error: ErrorCode = ErrorCode.none, message=None):
            return auth_resp.SaslAuthenticateResponse(
                error_code=error, error_message=message, auth_bytes=data,
                session_lifetime=datetime.timedelta(0))
        if self.mechanism == "OAUTHBEARER":  # RFC 7628: a bad token gets an error first
            if token == b"\x01":
                return reply(error=ErrorCode.sasl_authentication_failed, message="bad token")
            fields = dict(f.split("=", 1) for f in token.decode()[3:].split("\x01") if f)
            self.tokens.append(fields)
            bearer = fields["auth"].removeprefix("Bearer ")
            sub = json.loads(base64.urlsafe_b64decode(bearer.split(".")[1] + "==")).get("sub") \
                if bearer.count(".") == 2 else None
            ok = bearer == OIDC_TOKEN or sub == "chaos"
            return reply() if ok else reply(b'{"status":"invalid_token"}')
        if scram is None:  # PLAIN: authzid NUL user NUL password
            _, user, password = token.split(b"\0")
            return reply() if (user, password) == (b"chaos", SECRET.encode()) else reply(
                error=ErrorCode.sasl_authentication_failed, message="bad credentials")
        try:
            if scram.stage is None:
                scram.set_client_first(token.decode())
                return reply(scram.get_server_first().encode())
            scram.set_client_final(token.decode())
            return reply(scram.get_server_final().encode())
        except scramp.ScramException as exc:
            return reply(error=ErrorCode.sasl_authentication_failed, message=str(exc))


def client_security(tmp_path: Path, protocol: str, mechanism: str, password: str = SECRET,
                    extra: str = "") -> security.ClientSecurity:
    return security.load(props(tmp_path, f"security.protocol={protocol}\n"
                               f"sasl.mechanism={mechanism}\nsasl.username=chaos\n"
                               f"sasl.password={password}\n{extra}"), {})


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_authenticates_before_the_request(tmp_path, mechanism) -> None:
    broker = SaslBroker(mechanism)
    sec = client_security(tmp_path, "SASL_PLAINTEXT", mechanism)
    state = wire.describe_quorum(broker.endpoint, timeout_s=5, security=sec)
    assert state["leader"] == 3 and state["high_watermark"] == 9
    assert broker.seen[0] == 17 and broker.seen[-1] == 55


def test_wrong_credentials_and_a_refused_mechanism_are_one_clear_error(tmp_path) -> None:
    broker = SaslBroker("SCRAM-SHA-512")
    sec = client_security(tmp_path, "SASL_PLAINTEXT", "SCRAM-SHA-512", password="wrong")
    with pytest.raises(wire.WireError, match="SCRAM-SHA-512 authentication of chaos failed"):
        wire.describe_quorum(broker.endpoint, timeout_s=5, security=sec)
    assert 55 not in broker.seen and SECRET not in str(broker.seen)
    broker = SaslBroker("refuse")
    sec = client_security(tmp_path, "SASL_PLAINTEXT", "PLAIN")
    with pytest.raises(wire.WireError, match="PLAIN refused .* offers SCRAM-SHA-512"):
        wire.describe_quorum(broker.endpoint, timeout_s=5, security=sec)


def test_sasl_ssl_checks_the_brokers_certificate_against_the_ca(tmp_path) -> None:
    files = authority(tmp_path, {"broker": ["localhost"]})
    ca = files["ca"]
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(files["broker"], files["broker.key"])
    broker = SaslBroker("SCRAM-SHA-512", server)
    sec = client_security(tmp_path, "SASL_SSL", "SCRAM-SHA-512",
                          extra=f"ssl.ca.location={ca}\n")
    assert wire.describe_quorum(broker.endpoint, timeout_s=5, security=sec)["epoch"] == 2
    # without the CA the system's trust store does not know the broker: refused
    broker = SaslBroker("SCRAM-SHA-512", server)
    sec = client_security(tmp_path, "SASL_SSL", "SCRAM-SHA-512")
    with pytest.raises(wire.WireError, match="CERTIFICATE_VERIFY_FAILED"):
        wire.describe_quorum(broker.endpoint, timeout_s=5, security=sec)


OIDC_TOKEN = "token-of-the-endpoint"


class _TokenEndpoint(http.server.BaseHTTPRequestHandler):
    """An OAuth 2 token endpoint: client ``kc`` with secret ``SECRET`` gets ``OIDC_TOKEN``
    by the client-credentials grant; anyone else HTTP 401."""

    asked: list = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        basic = base64.b64encode(f"kc:{SECRET}".encode()).decode()
        _TokenEndpoint.asked.append(body)
        if self.headers["Authorization"] != f"Basic {basic}":
            self.send_response(401)
            self.end_headers()
            self.wfile.write(b'{"error":"invalid_client"}')
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(json.dumps({"access_token": OIDC_TOKEN, "expires_in": 600}).encode())

    def log_message(self, *args) -> None:
        pass


def test_oauthbearer_sends_an_unsecured_token_or_one_of_the_token_endpoint(tmp_path) -> None:
    """RFC 7628's first message with librdkafka's unsecured JWT (its principal and SASL
    extensions), or with the token of an OIDC endpoint (client credentials, fetched once
    for many connections); a refused token or a refused client is one clear error."""
    unsecured = "sasl.oauthbearer.config=principal={} extension_traceId=42\n" \
        "enable.sasl.oauthbearer.unsecure.jwt=true\n"
    broker = SaslBroker("OAUTHBEARER")
    sec = security.load(props(tmp_path, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism="
                              "OAUTHBEARER\n" + unsecured.format("chaos")), {})
    assert wire.describe_quorum(broker.endpoint, timeout_s=5, security=sec)["leader"] == 3
    assert broker.tokens[0]["traceId"] == "42"
    broker = SaslBroker("OAUTHBEARER")
    sec = security.load(props(tmp_path, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism="
                              "OAUTHBEARER\n" + unsecured.format("mallory")), {})
    with pytest.raises(wire.WireError, match="OAUTHBEARER token refused.*invalid_token"):
        wire.describe_quorum(broker.endpoint, timeout_s=5, security=sec)

    server = http.server.HTTPServer(("127.0.0.1", 0), _TokenEndpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/token"
    try:
        oidc = ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                "sasl.oauthbearer.method=oidc\nsasl.oauthbearer.client.id=kc\n"
                f"sasl.oauthbearer.client.secret={{}}\nsasl.oauthbearer.scope=kafka\n"
                f"sasl.oauthbearer.token.endpoint.url={url}\n")
        sec = security.load(props(tmp_path, oidc.format("${env:KC_SECRET}")),
                            {"KC_SECRET": SECRET})
        for _ in range(2):
            broker = SaslBroker("OAUTHBEARER")
            assert wire.describe_quorum(broker.endpoint, timeout_s=5, security=sec)["epoch"] \
                == 2
        assert _TokenEndpoint.asked == ["grant_type=client_credentials&scope=kafka"]
        assert SECRET not in str(sec.describe())
        broker = SaslBroker("OAUTHBEARER")
        bad = security.load(props(tmp_path, oidc.format("wrong")), {})
        with pytest.raises(wire.WireError, match="HTTP 401.*invalid_client"):
            wire.describe_quorum(broker.endpoint, timeout_s=5, security=bad)
    finally:
        server.shutdown()


def test_the_java_client_gets_the_same_settings_as_jaas_and_pem(tmp_path) -> None:
    """``--client java`` takes the file too: SASL as ``sasl.jaas.config`` (values quoted and
    escaped), TLS as PEM stores (KIP-651), librdkafka's ``none`` as Java's empty value."""
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("CERT")
    key.write_text("KEY")
    path = tmp_path / "client.properties"
    path.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"sasl.username=chaos\nsasl.password=p\"w\\d\nssl.ca.location={cert}\n"
                    f"ssl.certificate.location={cert}\nssl.key.location={key}\n"
                    "ssl.endpoint.identification.algorithm=none\n")
    java = security.load(path, {}).java()
    assert java["sasl.mechanism"] == "SCRAM-SHA-512"
    assert java["sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule '
                                        'required username="chaos" password="p\\"w\\\\d";')
    assert java["ssl.truststore.type"] == "PEM" and java["ssl.truststore.location"] == str(cert)
    assert java["ssl.keystore.certificate.chain"] == "CERT" and java["ssl.keystore.key"] == "KEY"
    assert java["ssl.endpoint.identification.algorithm"] == ""
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                    "sasl.oauthbearer.config=principal=chaos scope=x\n"
                    "enable.sasl.oauthbearer.unsecure.jwt=true\n")
    java = security.load(path, {}).java()
    assert java["sasl.jaas.config"].endswith('required unsecuredLoginStringClaim_sub="chaos";')
    assert "ssl.truststore.type" not in java
    assert security.load(path, {}).java_system() == {}
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"
                    "sasl.oauthbearer.method=oidc\nsasl.oauthbearer.client.id=a\n"
                    "sasl.oauthbearer.client.secret=b\"c\nsasl.oauthbearer.scope=kafka\n"
                    "sasl.oauthbearer.extensions=tenant=t1, env=ci\n"
                    "sasl.oauthbearer.token.endpoint.url=https://idp/token\n")
    sec = security.load(path, {})
    java = sec.java()
    assert java["sasl.jaas.config"].endswith(
        ' required clientId="a" clientSecret="b\\"c" scope="kafka" extension_tenant="t1" '
        'extension_env="ci";'), java["sasl.jaas.config"]
    assert java["sasl.login.callback.handler.class"].endswith(".OAuthBearerLoginCallbackHandler")
    assert java["sasl.oauthbearer.token.endpoint.url"] == "https://idp/token"
    assert sec.java_system() == {
        "org.apache.kafka.sasl.oauthbearer.allowed.urls": "https://idp/token"}
