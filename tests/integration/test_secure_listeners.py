"""The tool's clients against a real broker that asks for TLS and SASL: one KRaft node of
Kafka 4.4.0 started here by hand (not by a backend: the way a user's cluster is configured),
with a SASL_SSL listener (SCRAM-SHA-512 users formatted into its metadata, KIP-900,
PLAIN, and OAUTHBEARER with Kafka's unsecured token validator), an SSL listener that requires a client certificate (mTLS) and a plaintext one for
itself. ``clusters/wire.py``'s requests, librdkafka and the Java client driver
(``--client java``), configured from one client properties file (``clusters/security.py``),
must get in; wrong secrets must not."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import time
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_chaos.clusters import dist, security, wire
from kafka_chaos.clusters.dist import check_java
from kafka_chaos.clusters.local import kafka_uuid
from kafka_chaos.waiting import wait_until
from kafka_chaos.workloads.java_client import JavaClient, JavaDriver
from kafka_chaos.workloads.keys import KeySpace
from kafka_chaos.workloads.settings import WorkloadSettings
from tests.certs import authority
from tests.oidc import AUDIENCE, IdentityProvider

pytestmark = pytest.mark.kafka

SECRET = "Chaos-4-SCRAM"
OIDC_SECRET = "Chaos-4-OIDC"
PLAIN_SECRET = "Chaos-4-PLAIN"


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports of 127.0.0.1: bound together, so the kernel cannot hand one
    out twice (asked one by one, it did: two listeners on one port, refused by Kafka)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """The running broker: ``{"sasl_ssl": endpoint, "ssl": endpoint, "files": certs}``."""
    d = tmp_path_factory.mktemp("secure-broker")
    files = authority(d, {"broker": ["127.0.0.1", "localhost"], "client": ["chaos"]})
    (d / "broker-keystore.pem").write_bytes(files["broker.key"].read_bytes()
                                            + files["broker"].read_bytes())
    ports = dict(zip(("plain", "sasl_ssl", "ssl", "controller", "oidc"), free_ports(5)))
    idp = IdentityProvider("kafka-chaos", OIDC_SECRET, "chaos")
    props = f"""process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{ports['controller']}
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:{ports['plain']},SASL_SSL://127.0.0.1:{ports['sasl_ssl']},\
SSL://127.0.0.1:{ports['ssl']},CONTROLLER://127.0.0.1:{ports['controller']},\
OIDC://127.0.0.1:{ports['oidc']}
advertised.listeners=PLAINTEXT://127.0.0.1:{ports['plain']},\
SASL_SSL://127.0.0.1:{ports['sasl_ssl']},SSL://127.0.0.1:{ports['ssl']},\
OIDC://127.0.0.1:{ports['oidc']}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,\
CONTROLLER:PLAINTEXT,OIDC:SASL_PLAINTEXT
listener.name.oidc.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oidc.oauthbearer.sasl.jaas.config=\
org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
unsecuredLoginStringClaim_sub="broker";
listener.name.oidc.oauthbearer.sasl.server.callback.handler.class=\
org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
sasl.oauthbearer.jwks.endpoint.url={idp.url}/jwks
sasl.oauthbearer.expected.audience={AUDIENCE}
sasl.oauthbearer.expected.issuer={idp.url}
inter.broker.listener.name=PLAINTEXT
log.dirs={d / 'data'}
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN,OAUTHBEARER
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=\
org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=\
org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
unsecuredLoginStringClaim_sub="broker";
listener.name.sasl_ssl.plain.sasl.jaas.config=\
org.apache.kafka.common.security.plain.PlainLoginModule required user_chaos="{PLAIN_SECRET}";
ssl.keystore.type=PEM
ssl.keystore.location={d / 'broker-keystore.pem'}
ssl.truststore.type=PEM
ssl.truststore.location={files['ca']}
listener.name.ssl.ssl.client.auth=required
"""
    (d / "server.properties").write_text(props)
    java, classpath = check_java(), dist.resolve().classpath
    # the broker fetches only the OAuth URLs this system property allows (Kafka 3.9.1+)
    logs = [f"-Dkafka.logs.dir={d / 'logs'}",
            f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={idp.url}/jwks"]
    fmt = subprocess.run(
        [java, *logs, "-cp", classpath, "kafka.tools.StorageTool", "format", "-t",
         kafka_uuid(), "-c", str(d / "server.properties"),
         "--add-scram", f"SCRAM-SHA-512=[name=chaos,password={SECRET}]"],
        capture_output=True, text=True, timeout=120)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    with open(d / "server.out", "wb") as out:
        proc = subprocess.Popen([java, "-Xmx512m", *logs, "-cp", classpath, "kafka.Kafka",
                                 str(d / "server.properties")], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        endpoint = f"127.0.0.1:{ports['plain']}"
        wait_until(lambda: proc.poll() is not None or wire.answers(endpoint, 1.0), 90, 0.5,
                   "the broker's plaintext listener")
        assert proc.poll() is None, (d / "server.out").read_text()[-3000:]
        yield {"sasl_ssl": f"127.0.0.1:{ports['sasl_ssl']}",
               "ssl": f"127.0.0.1:{ports['ssl']}", "oidc": f"127.0.0.1:{ports['oidc']}",
               "idp": idp, "files": files, "dir": d}
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        idp.stop()


def client(tmp_path: Path, text: str, environ: dict[str, str] | None = None
           ) -> security.ClientSecurity:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return security.load(path, environ or {})


def test_wire_and_librdkafka_get_in_with_scram_plain_and_mtls_and_not_without(
        broker, tmp_path) -> None:
    ca = broker["files"]["ca"]
    scram = client(tmp_path, f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                   f"sasl.username=chaos\nsasl.password=${{env:KC_SECRET}}\n"
                   f"ssl.ca.location={ca}\n", {"KC_SECRET": SECRET})
    plain = client(tmp_path, f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                   f"sasl.username=chaos\nsasl.password={PLAIN_SECRET}\n"
                   f"ssl.ca.location={ca}\n")
    oauth = client(tmp_path, f"security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"
                   f"sasl.oauthbearer.config=principal=chaos\n"
                   f"enable.sasl.oauthbearer.unsecure.jwt=true\nssl.ca.location={ca}\n")
    mtls = client(tmp_path, f"security.protocol=SSL\nssl.ca.location={ca}\n"
                  f"ssl.certificate.location={broker['files']['client']}\n"
                  f"ssl.key.location={broker['files']['client.key']}\n")
    # librdkafka, configured from the same file, creates the topic over SASL_SSL
    admin = AdminClient({"bootstrap.servers": broker["sasl_ssl"], **scram.librdkafka()})
    admin.create_topics([NewTopic("secure", 1, 1)])["secure"].result(timeout=60)
    for sec, endpoint in ((scram, broker["sasl_ssl"]), (plain, broker["sasl_ssl"]),
                          (oauth, broker["sasl_ssl"]), (mtls, broker["ssl"])):
        assert wire.answers(endpoint, 5.0, security=sec), sec.describe()
        parts = wait_until(lambda: wire.describe_topic_partitions(
            endpoint, ["secure"], 5.0, security=sec).get("secure"), 30, 0.5, "the topic")
        assert parts[0]["leader"] == 1 and parts[0]["isr"] == [1], parts
        assert wire.describe_quorum(endpoint, 5.0, security=sec)["leader"] == 1
    # librdkafka takes the same OAUTHBEARER settings (its own unsecured token)
    assert "secure" in AdminClient({"bootstrap.servers": broker["sasl_ssl"],
                                    **oauth.librdkafka()}).list_topics(timeout=30).topics
    # wrong secrets, a missing client certificate, plaintext on a TLS port: refused
    wrong = client(tmp_path, f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                   f"sasl.username=chaos\nsasl.password=nope\nssl.ca.location={ca}\n")
    with pytest.raises(wire.WireError, match="SCRAM-SHA-512 authentication of chaos failed"):
        wire.describe_quorum(broker["sasl_ssl"], 5.0, security=wrong)
    no_cert = client(tmp_path, f"security.protocol=SSL\nssl.ca.location={ca}\n")
    assert not wire.answers(broker["ssl"], 5.0, security=no_cert)
    assert not wire.answers(broker["sasl_ssl"], 2.0)
    assert SECRET not in str(scram.describe()) and PLAIN_SECRET not in str(plain.describe())
    # the Java client, configured from the same files (JAAS, PEM stores), sends; with the
    # wrong password it does not
    for sec, endpoint in ((scram, broker["sasl_ssl"]), (plain, broker["sasl_ssl"]),
                          (oauth, broker["sasl_ssl"]), (mtls, broker["ssl"]),
                          (wrong, broker["sasl_ssl"])):
        typ, done = java_send(tmp_path, endpoint, sec)
        if sec is wrong:
            assert typ != "ok", done
        else:
            assert typ == "ok" and done[0][2][0] is not None, (sec.describe(), done)


def java_send(tmp_path: Path, endpoint: str, sec: security.ClientSecurity) -> tuple:
    """One ``send`` op of the Java client driver to topic ``secure`` through ``endpoint``
    with ``sec``'s settings: its completion type and value."""
    settings = dataclasses.replace(
        WorkloadSettings(client="java", client_version="4.4.0", delivery_timeout_ms=5000),
        **JavaDriver.connection(sec))
    logs = tmp_path / f"java-{time.monotonic_ns()}"
    logs.mkdir()
    driver = JavaDriver(endpoint, settings, KeySpace(keys=1, base="secure"), time.monotonic_ns,
                        logs)
    try:
        driver.start()
        typ, done, _ = JavaClient(driver, 0, 0, random.Random(0)).invoke(
            "send", [["send", 0, 7]])
        return typ, done
    finally:
        driver.close()


def test_oidc_tokens_of_a_real_identity_provider_get_in_and_a_wrong_client_secret_not(
        broker, tmp_path) -> None:
    """The OIDC listener validates RS256 tokens against the identity provider's JWKS
    (``OAuthBearerValidatorCallbackHandler``): the tool's requests, librdkafka and the Java
    client, each getting tokens by the client-credentials grant from the same properties,
    get in; the tool fetches one token for many connections; a wrong client secret is one
    error."""
    text = ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
            "sasl.oauthbearer.method=oidc\nsasl.oauthbearer.client.id=kafka-chaos\n"
            "sasl.oauthbearer.client.secret=${env:KC_OIDC}\nsasl.oauthbearer.scope=kafka\n"
            f"sasl.oauthbearer.token.endpoint.url={broker['idp'].url}/token\n")
    sec = client(tmp_path, text, {"KC_OIDC": OIDC_SECRET})
    issued = broker["idp"].issued
    for _ in range(3):
        assert wire.describe_quorum(broker["oidc"], 5.0, security=sec)["leader"] == 1
    assert broker["idp"].issued == issued + 1
    metadata = AdminClient({"bootstrap.servers": broker["oidc"], **sec.librdkafka()}
                           ).list_topics(timeout=30)
    assert list(metadata.brokers) == [1] and broker["idp"].issued >= issued + 2
    wrong = client(tmp_path, text, {"KC_OIDC": "wrong"})
    with pytest.raises(wire.WireError, match="HTTP 401"):
        wire.describe_quorum(broker["oidc"], 5.0, security=wrong)
    assert OIDC_SECRET not in str(sec.describe())
    # the Java client gets its own token from the same endpoint and sends; with the wrong
    # secret it gets none and does not
    issued = broker["idp"].issued
    admin = AdminClient({"bootstrap.servers": broker["oidc"], **sec.librdkafka()})
    admin.create_topics([NewTopic("secure", 1, 1)])["secure"].exception(60)  # may exist
    typ, done = java_send(tmp_path, broker["oidc"], sec)
    assert typ == "ok" and done[0][2][0] is not None, done
    assert broker["idp"].issued > issued
    typ, done = java_send(tmp_path, broker["oidc"], wrong)
    assert typ != "ok", done
