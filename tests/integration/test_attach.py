"""Runs against a cluster the tool did not start: a secured compose project
(``tests/compose_cluster.py``: SASL_SSL with SCRAM-SHA-512, mTLS, an authorizer) brought up
by ``docker-compose`` as users do, holding a canary topic of known data. Each run must leave
the canary's records as they were, delete its own topics, leave every container there and
never write the secret into its run directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafka_chaos.clusters import admin, dist, security
from tests import compose_cluster as cc
from tests.integration.conftest import down_removed, faults_observed, kafka_chaos, results_of

pytestmark = [pytest.mark.kafka, pytest.mark.docker]

PROJECT = "kcattach"
CANARY = "canary"
ENV = "KC_ATTACH_SECRET"


def _properties(path: Path, user: str, files: dict[str, Path]) -> Path:
    path.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"sasl.username={user}\nsasl.password=${{env:{ENV}}}\n"
                    f"ssl.ca.location={files['ca']}\n")
    return path


def _canary(bootstrap: str, conn: dict[str, str]) -> str:
    """The canary's records, checksummed (``compose_cluster.checksum``)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kc-canary-check",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "auto.offset.reset": "earliest", **conn})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(CANARY, 0), timeout=30)
        consumer.assign([TopicPartition(CANARY, 0, low)])
        records = []
        while len(records) < high - low:
            msg = consumer.poll(10)
            assert msg is not None, f"the canary ends at {len(records)} of {high - low}"
            if msg.error() is None:
                records.append((msg.offset(), msg.key(), msg.value()))
        return cc.checksum(records)
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def compose_cluster(tmp_path_factory):
    """The running compose project: ``{"bootstrap", "files", "properties", "limited",
    "canary", "dir"}``; the canary (100 records) checksummed at the start."""
    import docker

    from kafka_chaos.clusters import docker_image

    image = docker_image.ensure_image(docker.from_env(), dist.resolve())
    d = tmp_path_factory.mktemp("compose")
    project = cc.write(d, image)
    cc.compose(PROJECT, project["compose"], "up", "-d")
    try:
        files = project["files"]
        env = {ENV: cc.SECRET}
        props = _properties(d / "client.properties", "chaos", files)
        conn = security.load(props, env).librdkafka()
        bootstrap = ",".join(f"{cc.host(n)}:9092" for n in cc.NODES)
        admin.wait_ready(bootstrap, 3, [], timeout_s=120,
                         security=security.load(props, env))
        admin.create_topic(bootstrap, CANARY, 1, 3, security=security.load(props, env))
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **conn})
        for i in range(100):
            producer.produce(CANARY, key=str(i).encode(), value=f"canary {i}".encode())
        assert producer.flush(60) == 0
        yield {"bootstrap": bootstrap, "files": files, "properties": props, "dir": d,
               "limited": _properties(d / "limited.properties", "limited", files),
               "conn": conn, "canary": _canary(bootstrap, conn)}
    finally:
        cc.compose(PROJECT, project["compose"], "down", "-v")


def _containers() -> list[str]:
    import docker

    return sorted(c.name for c in docker.from_env().containers.list(
        all=True, filters={"label": f"com.docker.compose.project={PROJECT}"}))


def _topics(cluster: dict) -> set[str]:
    sec = security.load(cluster["properties"], {ENV: cc.SECRET})
    return set(admin.client(cluster["bootstrap"], 10.0, sec).list_topics(timeout=15).topics)


def _groups(cluster: dict) -> set[str]:
    sec = security.load(cluster["properties"], {ENV: cc.SECRET})
    listed = admin.client(cluster["bootstrap"], 10.0, sec).list_consumer_groups().result(15)
    return {g.group_id for g in listed.valid}


def _no_secret_in(run_dir: Path) -> None:
    for path in run_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert cc.SECRET.encode() not in data, path
            assert cc.LIMITED_SECRET.encode() not in data, path


def test_external_mode_observes_a_secured_cluster_and_leaves_it_as_it_was(
        compose_cluster, tmp_path, monkeypatch):
    """No faults of ours, share consumers (KIP-932) of a share group of the run's own: the
    verdict is valid; the group took the run's lock (15 s: the brokers' default minimum)
    and delivery limit, the share checker judged every record, the coordinator's own log
    was read; the monitor reached every broker and the quorum through SASL_SSL; the run's
    topic was made with the promised configs and is gone, and so is its share group; the
    canary, the containers and the secret are as they were."""
    monkeypatch.setenv(ENV, cc.SECRET)
    before = _containers()
    assert len(before) == 3
    proc = kafka_chaos("run", "--backend", "external", "--bootstrap-servers",
                       compose_cluster["bootstrap"].split(",")[0], "--client-properties",
                       str(compose_cluster["properties"]), "--nemesis", "none",
                       "--sub-via", "share", "--share-lock-ms", "15000",
                       "--time-limit", "20", "--out", str(tmp_path / "runs"))
    run_dir = (tmp_path / "runs" / "latest").resolve()
    results = results_of(run_dir, proc)
    assert proc.returncode == 0 and results["valid"] is True, proc.stdout[-3000:]
    facts = json.loads((run_dir / "run.json").read_text())
    assert facts["share_group_config"] == {"share.auto.offset.reset": "earliest",
                                           "share.record.lock.duration.ms": "15000",
                                           "share.delivery.count.limit": "3"}
    assert facts["share"]["drain"] == "ok" and facts["share"]["persisted"] == "ok", facts
    assert results["anomalies"]["share-redelivery"]["count"] > 0  # releases came back
    attached = facts["attached"]
    assert sorted(attached["brokers"]) == ["n1", "n2", "n3"], attached
    assert attached["security"]["sasl.password"] == "[hidden]"
    topic = facts["topics"]["created"][0]
    assert topic.startswith("kafka-chaos-") and facts["topics"]["deleted"] == [topic], facts
    history = (run_dir / "history.jsonl").read_text()
    assert '"controller":{"leader"' in history and '"answering":{"1":true,"2":true,"3":true}' \
        in history
    assert topic not in _topics(compose_cluster) and CANARY in _topics(compose_cluster)
    # its share group is gone too (DeleteGroups: the group and its share state)
    groups = facts["groups"]
    assert f"{topic}-share" in groups["deleted"] and groups["kept"] == {}, groups
    assert not [g for g in _groups(compose_cluster) if g.startswith(topic)]
    assert _canary(compose_cluster["bootstrap"], compose_cluster["conn"]) == \
        compose_cluster["canary"]
    assert _containers() == before
    _no_secret_in(run_dir)


def test_a_wrong_secret_and_a_missing_acl_are_refused_before_anything_runs(
        compose_cluster, tmp_path, monkeypatch):
    bootstrap = compose_cluster["bootstrap"]
    cases = ((compose_cluster["properties"], "wrong-" + cc.SECRET,
              "refused the client properties", "authentication of chaos failed"),
             (compose_cluster["limited"], cc.LIMITED_SECRET,
              "was refused: TOPIC_AUTHORIZATION_FAILED", "lacks the permission"))
    for props, secret, *words in cases:
        monkeypatch.setenv(ENV, secret)
        proc = kafka_chaos("run", "--backend", "external", "--bootstrap-servers", bootstrap,
                           "--client-properties", str(props), "--nemesis", "none",
                           "--time-limit", "5", "--out", str(tmp_path / "runs"))
        out = proc.stdout + proc.stderr
        assert proc.returncode == 254 and all(w in out for w in words), out[-3000:]
        run_dir = (tmp_path / "runs" / "latest").resolve()
        assert not (run_dir / "history.jsonl").exists()
        _no_secret_in(run_dir)
    assert not [t for t in _topics(compose_cluster) if t.startswith("kafka-chaos")]


def test_docker_attach_faults_the_compose_containers_in_place(compose_cluster, tmp_path,
                                                              monkeypatch):
    """Kill, pause and partition faults on the containers of the compose project, found by
    its label and matched to brokers by address: each fault ran and the monitor saw its
    broker stop answering (kill, pause) or its ISR shrink (partition); everything healed
    (no chain of ours left, every container running); the verdict is valid (acks=all,
    min.insync.replicas=2, no unclean election); the run leaves the canary, the containers
    and no topic or secret behind."""
    monkeypatch.setenv(ENV, cc.SECRET)
    before = _containers()
    proc = kafka_chaos("run", "--backend", "docker-attach", "--compose-project", PROJECT,
                       "--bootstrap-servers", compose_cluster["bootstrap"],
                       "--client-properties", str(compose_cluster["properties"]),
                       "--nemesis", "kill,pause,partition", "--nemesis-interval", "6",
                       "--time-limit", "75", "--out", str(tmp_path / "runs"))
    run_dir = (tmp_path / "runs" / "latest").resolve()
    faults_observed(run_dir, proc, {"kill", "pause", "partition"})
    assert _containers() == before
    import docker

    states = {c.name: c.status for c in docker.from_env().containers.list(
        all=True, filters={"label": f"com.docker.compose.project={PROJECT}"})}
    assert set(states.values()) == {"running"}, states
    assert not [t for t in _topics(compose_cluster) if t.startswith("kafka-chaos")]
    facts = json.loads((run_dir / "run.json").read_text())
    assert facts["groups"]["kept"] == {} and facts["groups"]["error"] is None, facts["groups"]
    assert not [g for g in _groups(compose_cluster) if g.startswith("kafka-chaos")]
    assert _canary(compose_cluster["bootstrap"], compose_cluster["conn"]) == \
        compose_cluster["canary"]
    _no_secret_in(run_dir)
    down = kafka_chaos("cluster", "down", "--backend", "docker-attach", "--compose-project",
                       PROJECT)
    assert down_removed(down) == [], down.stdout
