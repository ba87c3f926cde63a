"""File faults (``nemesis.files``) on files of a hand-made log directory: each damage does what
its record says and nothing else, the files are found by Kafka's names, and a run that damaged
files and found anomalies is unknown (``verdict.judge_run``). The real brokers' side is
``tests/integration/test_file_faults.py``."""

from __future__ import annotations

import hashlib
import random
import re
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_chaos.clusters.base import Killable, LocalFiles, Node, NodeFiles
from kafka_chaos.config import RunConfig
from kafka_chaos.nemesis.base import NemesisError
from kafka_chaos.catalogue.faults import FILE_KINDS, METADATA_KINDS
from kafka_chaos.nemesis import script
from kafka_chaos.nemesis.files import (BITS, ZERO_BYTES, FileNemesis, batch_spans, damage,
                                       find, hit_batches, segment_facts, value_spans)
from kafka_chaos.verdict import judge_run
from tests.record_batches import batch

#: the files of this host, where these tests lay out their log directories
HERE = LocalFiles()

pytestmark = pytest.mark.fast


def _bits(a: bytes, b: bytes) -> list[int]:
    return [i * 8 + k for i, (x, y) in enumerate(zip(a, b)) for k in range(8)
            if (x ^ y) >> k & 1]


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=1, max_size=300), st.integers(0, 2**32))
def test_a_bitflip_flips_the_bits_it_records(tmp_path_factory, content, seed) -> None:
    path = tmp_path_factory.mktemp("f") / "00000000000000000000.log"
    path.write_bytes(content)
    done = damage(HERE, str(path), "bitflip", random.Random(seed))
    after = path.read_bytes()
    assert _bits(content, after) == done["bits"] and len(done["bits"]) == min(BITS,
                                                                               8 * len(content))
    assert done["size"] == [len(content)] * 2
    assert done["sha256"] == [hashlib.sha256(content).hexdigest(),
                              hashlib.sha256(after).hexdigest()]


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=1, max_size=2000), st.integers(0, 2**32))
def test_truncate_and_zero_change_only_their_region(tmp_path_factory, content, seed) -> None:
    d = tmp_path_factory.mktemp("f")
    cut, zeroed = d / "cut", d / "zeroed"
    cut.write_bytes(content)
    zeroed.write_bytes(content)
    t = damage(HERE, str(cut), "truncate", random.Random(seed))
    keep, end = t["region"]
    assert end == len(content) and keep < end and cut.read_bytes() == content[:keep]
    assert t["size"] == [len(content), keep]
    z = damage(HERE, str(zeroed), "zero", random.Random(seed))
    a, b = z["region"]
    after = zeroed.read_bytes()
    assert b - a == min(ZERO_BYTES, len(content)) and after[a:b] == bytes(b - a)
    assert after[:a] == content[:a] and after[b:] == content[b:]


def test_an_empty_file_or_an_unknown_damage_is_refused(tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(NemesisError, match="empty"):
        damage(HERE, str(empty), "bitflip", random.Random(1))
    empty.write_bytes(b"x")
    with pytest.raises(NemesisError, match="unknown damage"):
        damage(HERE, str(empty), "shred", random.Random(1))


def _log_dir(root: Path) -> Path:
    """A broker's log directory as Kafka lays it out: partition 0 with two segments."""
    part = root / "kafka-chaos-0"
    part.mkdir(parents=True)
    for base in ("00000000000000000000", "00000000000000000500"):
        for suffix in (".log", ".index", ".timeindex"):
            (part / f"{base}{suffix}").write_bytes(b"\x01" * 64)
    (part / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                 "log-start-offset-checkpoint"):
        (root / name).write_text("0\n1\nkafka-chaos 0 500\n")
    return root


def _find(data: Path, kind: str, partition: int = 0, meta: Path | None = None) -> Path | None:
    found = find(HERE, str(data), kind, "kafka-chaos", partition,
                 None if meta is None else str(meta))
    return None if found is None else Path(found)


def test_files_are_found_by_kafkas_names(tmp_path) -> None:
    data = _log_dir(tmp_path / "data")
    assert _find(data, "segment").name == "00000000000000000500.log"
    assert _find(data, "old-segment").name == "00000000000000000000.log"
    first = data / "kafka-chaos-0" / "00000000000000000000.log"
    first.rename(first.with_suffix(".gone"))
    assert _find(data, "old-segment") is None  # only the active one left
    first.with_suffix(".gone").rename(first)
    assert _find(data, "index").name == "00000000000000000500.index"
    assert _find(data, "leader-epoch-checkpoint").parent.name == "kafka-chaos-0"
    assert _find(data, "replication-offset-checkpoint").parent == data
    assert _find(data, "snapshot") is None  # none written yet
    assert _find(data, "segment", 1) is None
    (data / "kafka-chaos-0" / "99.log").mkdir()  # a directory is no segment
    assert _find(data, "segment").name == "00000000000000000500.log"
    with pytest.raises(ValueError, match="file kind 'wal'"):
        _find(data, "wal")


class _Nodes(NodeFiles, Killable):
    """Three nodes' log directories on disk, and which of them run: what ``FileNemesis``
    reads of a cluster (no Kafka: its selection and its record are what is tested here)."""

    def __init__(self, root: Path) -> None:
        self.nodes = [Node(i, f"n{i}", "127.0.0.1", ("broker",)) for i in (1, 2, 3)]
        self.root, self.down = root, set()
        for n in self.nodes:
            _log_dir(root / n.name)

    def data_dir(self, node: Node) -> Path:
        return self.root / node.name

    def is_running(self, node: Node) -> bool:
        return node.node_id not in self.down

    def kill(self, node: Node) -> None:
        self.down.add(node.node_id)

    def start(self, node: Node) -> None:
        self.down.discard(node.node_id)

    def node(self, node_id: int) -> Node:
        return next(n for n in self.nodes if n.node_id == node_id)


def test_the_nemesis_kills_its_target_and_records_what_it_damaged(tmp_path) -> None:
    nodes = _Nodes(tmp_path)
    nemesis = FileNemesis(nodes, random.Random(3))
    done = nemesis.invoke("zero", {"target": [2], "topic": "kafka-chaos", "partition": 0,
                                   "file": "segment"})
    assert done["killed"] == ["n2"] and nodes.down == {2}
    record = done["damaged"]["n2"]
    assert record["file"] == "kafka-chaos-0/00000000000000000500.log"
    assert record["kind"] == "segment" and record["sha256"][0] != record["sha256"][1]
    assert nemesis.damaged == [{"node": "n2", "file": record["file"], "kind": "segment",
                                "damage": "zero", "running": False}]
    # without a kind, one that exists is drawn; a node without any is killed all the same
    for path in (tmp_path / "n1").rglob("*"):
        if path.is_file():
            path.write_bytes(b"")
    done = nemesis.invoke("bitflip", {"target": [1, 3], "topic": "kafka-chaos"})
    assert done["killed"] == ["n1", "n3"] and done["nothing"] == ["n1"]
    assert done["damaged"]["n3"]["kind"] in FILE_KINDS


def test_a_cluster_whose_files_are_elsewhere_is_refused() -> None:
    with pytest.raises(NemesisError, match="local, docker and ssh"):
        FileNemesis(object(), random.Random(1)).invoke("bitflip", {"target": "one"})
    # the ssh backend reaches its hosts' files over SFTP: file faults are admitted there
    assert RunConfig(backend="ssh", inventory="x.yaml", nemesis=["file"]).nemesis == ["file"]
    with pytest.raises(ValueError, match="need a cluster of the tool's own"):
        RunConfig(backend="docker-attach", bootstrap_servers="k:9092", nemesis=["file"])
    # an ssh-attach run opts in to damaging its brokers' files, and only such a run may
    attached = dict(backend="ssh-attach", inventory="x.yaml", bootstrap_servers="k:9092")
    with pytest.raises(ValueError, match="or --backend ssh-attach with --damage-files"):
        RunConfig(**attached, nemesis=["rollback"])
    assert RunConfig(**attached, nemesis=["file", "rollback"], damage_files=True).damage_files
    with pytest.raises(ValueError, match="need a cluster of the tool's own"):
        RunConfig(**attached, nemesis=["disk"], damage_files=True)
    for other in (dict(backend="docker-attach", bootstrap_servers="k:9092"),
                  dict(backend="local")):
        with pytest.raises(ValueError, match="--damage-files is for --backend ssh-attach"):
            RunConfig(**other, nemesis=["file"], damage_files=True)


DAMAGED = [{"node": "n2", "file": "kafka-chaos-0/00000000000000000000.log", "kind": "segment",
            "damage": "bitflip"}]


def test_findings_after_file_damage_are_unknown_and_a_clean_run_stays_valid() -> None:
    clean = judge_run({"valid": True, "anomaly_types": []}, {"file_damage": DAMAGED})
    assert clean["valid"] is True and not clean.get("unknown_reasons")
    for valid in (True, False):
        found = judge_run({"valid": valid, "anomaly_types": ["lost-write"]},
                          {"file_damage": DAMAGED})
        assert found["valid"] == "unknown", valid
        [reason] = found["unknown_reasons"]
        assert reason.startswith("files were damaged (bitflip of n2's kafka-chaos-0/"
                                 "00000000000000000000.log) and the run found lost-write")
    untouched = judge_run({"valid": False, "anomaly_types": ["lost-write"]}, {})
    assert untouched["valid"] is False
    # what the configuration alone permits stays permitted: G0 under interleaved-writes
    cycles = {"valid": True, "anomaly_types": ["G0", "duplicate"], "anomalies": {
        "G0": {"count": 3, "by_configuration": 3},
        "duplicate": {"count": 2, "by_configuration": 0}}}
    judged = judge_run(cycles, {"file_damage": DAMAGED})
    assert judged["valid"] == "unknown" and "the run found duplicate:" in \
        judged["unknown_reasons"][0]
    alone = {"valid": True, "anomaly_types": ["G0"],
             "anomalies": {"G0": {"count": 3, "by_configuration": 3}}}
    assert judge_run(alone, {"file_damage": DAMAGED})["valid"] is True
    # what the damage itself permits (the record's batch reached unchecked) is decided; a
    # finding beside it that nothing permits still leaves the run unknown
    def served(lost: int) -> dict:
        return {"valid": True, "anomaly_types": ["garbage-read", "lost-write"], "anomalies": {
            "garbage-read": {"count": 1, "rules": {"damage-served-unchecked": 1}},
            "lost-write": {"count": 2, "rules": {"damage-served-unchecked": lost}}}}

    assert judge_run(served(1), {"file_damage": DAMAGED})["unknown_reasons"] == [
        "files were damaged (bitflip of n2's kafka-chaos-0/00000000000000000000.log) and "
        "the run found lost-write: no rule of kafka-chaos judges these findings after a "
        "file fault yet, so they are neither permitted nor violations"]
    assert judge_run(served(2), {"file_damage": DAMAGED})["valid"] is True


def test_damage_kafka_repairs_itself_leaves_the_findings_to_the_other_rules() -> None:
    """The active segment's index rebuilt by recovery after a kill (R6) and a producer
    snapshot that fails its checks and is dropped (P1-P2) explain nothing and doubt nothing:
    a finding after them alone is judged as in any run. An index changed under a running
    broker, a rolled-back snapshot and a record that does not say whether the broker ran
    are not repaired: the run stays unknown."""
    found = {"valid": False, "anomaly_types": ["lost-write"]}

    def judged(**damage) -> object:
        entry = {"node": "n1", "file": "t-0/00000000000000000000.x", **damage}
        return judge_run(dict(found), {"file_damage": [entry]})["valid"]

    assert judged(kind="index", damage="zero", running=False) is False
    assert judged(kind="timeindex", damage="truncate", running=False) is False
    assert judged(kind="snapshot", damage="bitflip", running=True) is False
    assert judged(kind="index", damage="zero", running=True) == "unknown"
    assert judged(kind="index", damage="zero") == "unknown"
    assert judged(kind="snapshot", damage="rollback") == "unknown"
    assert judged(kind="segment", damage="bitflip", running=False) == "unknown"
    # an offset checkpoint: only when Kafka reads it as offsets no higher than before
    # (nemesis.checkpoints), rolled back or damaged, whether or not the broker ran
    for how in ("rollback", "truncate"):
        assert judged(kind="replication-offset-checkpoint", damage=how,
                      checkpoint="lowered") is False
    for change in ("raised", "unreadable", None):
        assert judged(kind="log-start-offset-checkpoint", damage="bitflip", running=False,
                      **({} if change is None else {"checkpoint": change})) == "unknown"
    assert judged(kind="leader-epoch-checkpoint", damage="rollback",
                  checkpoint="lowered") == "unknown"


def test_kraft_files_are_found_in_the_metadata_log_directory(tmp_path) -> None:
    data = _log_dir(tmp_path / "data")
    meta = tmp_path / "metadata" / "__cluster_metadata-0"
    meta.mkdir(parents=True)
    for name in ("00000000000000000000.log", "00000000000000000120.log",
                 "00000000000000000100-0000000002.checkpoint", "quorum-state"):
        (meta / name).write_bytes(b"\x02" * 32)
    (data / "meta.properties").write_text("version=1\n")
    found = {k: _find(data, k, 0, meta.parent) for k in METADATA_KINDS}
    assert found["metadata-segment"] == meta / "00000000000000000120.log"
    assert found["metadata-snapshot"].suffix == ".checkpoint"
    assert found["quorum-state"] == meta / "quorum-state"
    assert found["meta.properties"] == data / "meta.properties"
    # without a metadata directory of its own, the metadata log is in the log directory
    assert _find(data, "quorum-state") is None


def test_damage_while_running_keeps_the_node_up(tmp_path) -> None:
    nodes = _Nodes(tmp_path)
    nemesis = FileNemesis(nodes, random.Random(5))
    done = nemesis.invoke("truncate", {"target": [3], "topic": "kafka-chaos", "partition": 0,
                                       "file": "replication-offset-checkpoint",
                                       "running": True})
    assert done["running"] == ["n3"] and "killed" not in done and nodes.down == set()
    assert done["damaged"]["n3"]["file"] == "replication-offset-checkpoint"


def test_a_rollback_puts_the_copy_back_with_the_node_down_then_starts_it(tmp_path) -> None:
    nodes = _Nodes(tmp_path)
    nemesis = FileNemesis(nodes, random.Random(7))
    path = tmp_path / "n2" / "replication-offset-checkpoint"
    old = path.read_bytes()
    copied = nemesis.invoke("snapshot-file", {"target": [2], "topic": "kafka-chaos",
                                              "file": "replication-offset-checkpoint"})
    assert copied["copied"]["n2"] == {"file": "replication-offset-checkpoint",
                                      "kind": "replication-offset-checkpoint",
                                      "size": len(old),
                                      "sha256": hashlib.sha256(old).hexdigest()}
    assert nodes.down == set() and nemesis.damaged == []  # a copy damages nothing
    path.write_text("0\n1\nkafka-chaos 0 900\n")  # the broker moved its high watermark on
    newer = path.read_bytes()
    done = nemesis.invoke("restore-file", None)
    assert path.read_bytes() == old and nodes.down == set() and done["started"] == ["n2"]
    assert done["restored"]["n2"]["sha256"] == [hashlib.sha256(newer).hexdigest(),
                                                hashlib.sha256(old).hexdigest()]
    assert done["restored"]["n2"]["size"] == [len(newer), len(old)]
    assert nemesis.damaged == [{"node": "n2", "file": "replication-offset-checkpoint",
                                "kind": "replication-offset-checkpoint", "damage": "rollback",
                                "checkpoint": "lowered"}]  # 900 back to 500
    # a file the broker left as it was is put back all the same, but damages nothing
    nemesis.invoke("snapshot-file", {"target": [3], "file": "log-start-offset-checkpoint"})
    same = nemesis.invoke("restore-file", None)["restored"]["n3"]
    assert same["unchanged"] is True and len(nemesis.damaged) == 1
    # a copy never restored is dropped by the heal: putting it back would be the fault
    nemesis.invoke("snapshot-file", {"target": [1], "topic": "kafka-chaos"})
    assert nemesis.teardown() == {"dropped_copies": ["n1"]} and nemesis.copies == {}
    assert nemesis.invoke("restore-file", None) == {"restored": {}, "started": []}


def test_a_scenario_step_names_its_file_and_may_damage_a_running_broker(tmp_path) -> None:
    from kafka_chaos.admission import load_scenario

    step = {"do": "bitflip", "target": "one", "file": "quorum-state", "running": True}
    s = script.Script(name="x", steps=[step])
    value = script.Runner(None, None, None, "t", None, None)._value("bitflip", s.steps[0])
    assert value == {"target": "one", "topic": "t", "partition": 0, "file": "quorum-state",
                     "running": True}
    for text, words in [
            ("  - do: kill\n    file: segment\n", "file goes with do: bitflip"),
            ("  - do: zero\n    file: wal\n", "file: 'wal' is no file kind"),
            ("  - do: snapshot-file\n    running: true\n", "running (damage without a kill)"),
            ("  - do: bitflip\n    flip: value\n", "flip: value goes with do: bitflip and file"),
            ("  - do: zero\n    file: segment\n    flip: value\n", "goes with do: bitflip"),
            ("  - do: bitflip\n    flip: header\n", "flip")]:
        path = tmp_path / "s.yaml"
        path.write_text("name: x\nsteps:\n" + text)
        with pytest.raises(ValueError, match=re.escape(words)):
            load_scenario(str(path))


def _segment(batches: list[tuple[int, int]]) -> bytes:
    """A log segment of batches ``(base offset, bytes after the 12-byte overhead)``."""
    return b"".join(struct.pack(">qi", base, n) + bytes([base % 251]) * n for base, n in batches)


def test_a_segments_batches_are_walked_and_the_damaged_ones_named(tmp_path) -> None:
    content = _segment([(0, 40), (5, 100), (9, 20)])
    assert batch_spans(content) == [(0, 0, 52), (5, 52, 164), (9, 164, 196)]
    assert batch_spans(content + b"\x00" * 7) == batch_spans(content)  # a torn tail
    assert batch_spans(content[:100]) == [(0, 0, 52)]
    assert hit_batches(batch_spans(content), 50, 53) == [0, 5]
    path = tmp_path / "00000000000000000000.log"
    for seed in range(20):
        path.write_bytes(content)
        done = damage(HERE, str(path), "zero", random.Random(seed))
        lo, hi = done["region"]
        assert done["batches"] == hit_batches(batch_spans(content), lo, hi)
        assert done["past_batches"] is False
        path.write_bytes(content + b"\x01" * 30)
        done = damage(HERE, str(path), "truncate", random.Random(seed))
        keep = done["region"][0]
        assert done["batches"] == [b for b, _, end in batch_spans(content) if end > keep]
        assert done["past_batches"] is True  # the torn tail was cut too
    path.write_bytes(content)
    done = damage(HERE, str(path), "bitflip", random.Random(3))
    assert done["batches"] == sorted({b for bit in done["bits"]
                                      for b in hit_batches(batch_spans(content), bit // 8,
                                                           bit // 8 + 1)})
    other = tmp_path / "replication-offset-checkpoint"
    other.write_bytes(content)
    assert "batches" not in damage(HERE, str(other), "zero", random.Random(1))


def test_a_damaged_batch_names_its_records_and_whether_its_crc_can_see_the_change() -> None:
    """``offsets`` comes from each batch's own last offset delta (byte 23); a change only in
    the 17 bytes before the CRC (base offset, length, leader epoch, magic) is ``unchecked``,
    one reaching the CRC or what it covers is not."""
    def head(base: int, delta: int, n: int) -> bytes:
        body = bytes(9) + struct.pack(">hi", 0, delta) + bytes(n - 15)
        return struct.pack(">qi", base, n) + body

    content = head(0, 2, 60) + head(3, 4, 60) + head(8, 0, 60)  # 72 bytes each
    facts = segment_facts(content, [(5, 6), (72 + 20, 72 + 21)])
    assert facts["offsets"] == [[0, 2], [3, 7]] and facts["batches"] == [0, 3]
    assert facts["unchecked"] == [0] and facts["past_batches"] is False
    facts = segment_facts(content, [(144, 144 + 17), (216, 220)])  # the tail: no batch
    assert facts["offsets"] == [[8, 8]] and facts["unchecked"] == [8]
    assert facts["past_batches"] is True
    assert segment_facts(content, [(144 + 17, 144 + 18)])["unchecked"] == []  # the CRC


def test_a_rollback_that_fails_to_write_still_starts_its_node(tmp_path, monkeypatch) -> None:
    import kafka_chaos.nemesis.files as files

    nodes = _Nodes(tmp_path)
    nemesis = FileNemesis(nodes, random.Random(7))
    nemesis.invoke("snapshot-file", {"target": [2], "file": "replication-offset-checkpoint"})

    def broken(access, path, old):
        raise OSError("disk gone")

    monkeypatch.setattr(files, "restore", broken)
    with pytest.raises(NemesisError, match="restore-file: disk gone"):
        nemesis.invoke("restore-file", None)
    assert nodes.down == set() and nemesis.copies == {} and nemesis.damaged == []


def test_a_value_flip_changes_one_bit_of_one_records_value(tmp_path) -> None:
    """``value_spans`` finds the value bytes of uncompressed data batches only; ``flip:
    value`` flips one bit inside one of them and names that record's offset."""
    content = (batch([b"100", b"20001"]) + batch([b"7"], base=2, attributes=1)  # gzip
               + batch([b"4242"], base=3) + batch([b"9"], base=4, attributes=0x20))  # control
    spans = value_spans(content)
    assert [(o, content[a:b]) for o, a, b in spans] == [(0, b"100"), (1, b"20001"),
                                                        (3, b"4242")]
    path = tmp_path / "00000000000000000000.log"
    for seed in range(12):
        path.write_bytes(content)
        done = damage(HERE, str(path), "bitflip", random.Random(seed), "value")
        [bit] = done["bits"]
        offset, first, end = next(s for s in spans if s[0] == done["record"])
        assert first <= bit // 8 < end
        changed = path.read_bytes()
        assert [i for i in range(len(content)) if changed[i] != content[i]] == [bit // 8]
        assert not chr(changed[bit // 8]).isdigit()  # unreadable, never another value
        assert any(a <= offset <= b for a, b in done["offsets"]) and done["unchecked"] == []
    with pytest.raises(NemesisError, match="no record value"):
        path.write_bytes(batch([b"1"], attributes=2))
        damage(HERE, str(path), "bitflip", random.Random(1), "value")
    with pytest.raises(NemesisError, match="flip"):
        damage(HERE, str(path), "zero", random.Random(1), "value")


def test_a_segment_damaged_after_a_kill_records_whether_recovery_reads_it(tmp_path) -> None:
    """Recovery reads every segment from the one holding the recovery point on (R2): the
    active one always, a rolled one when its successor begins above the checkpointed
    recovery point; unreadable checkpoints leave it unknown. A running broker's damage
    meets no recovery and records none of it."""
    nodes = _Nodes(tmp_path)
    nemesis = FileNemesis(nodes, random.Random(3))
    aim = {"topic": "kafka-chaos", "partition": 0}
    old = nemesis.invoke("zero", {"target": [1], **aim, "file": "old-segment"})["damaged"]
    # _log_dir checkpoints 500, the active segment's base: the rolled one is below it
    assert {k: old["n1"][k] for k in ("recovery_point", "next_base", "recovered")} == {
        "recovery_point": 500, "next_base": 500, "recovered": False}
    (tmp_path / "n2" / "recovery-point-offset-checkpoint").write_text(
        "0\n2\nother 0 900\nkafka-chaos 0 499\n")
    old = nemesis.invoke("zero", {"target": [2], **aim, "file": "old-segment"})["damaged"]
    assert old["n2"]["recovered"] is True and old["n2"]["recovery_point"] == 499
    (tmp_path / "n3" / "recovery-point-offset-checkpoint").write_text("0\n1\nkafka-cha")
    old = nemesis.invoke("zero", {"target": [3], **aim, "file": "old-segment"})["damaged"]
    assert old["n3"]["recovered"] is None and old["n3"]["recovery_point"] is None
    nodes.down.clear()  # started again
    active = nemesis.invoke("zero", {"target": [1], **aim, "file": "segment"})["damaged"]
    assert active["n1"]["recovered"] is True and active["n1"]["next_base"] is None
    nodes.down.clear()
    running = nemesis.invoke("zero", {"target": [1], **aim, "file": "segment",
                                      "running": True})["damaged"]
    assert "recovered" not in running["n1"]


def test_a_segment_rolled_back_records_the_tail_it_cut(tmp_path) -> None:
    """A segment only grows: its older copy is a prefix, and putting it back cuts the
    batches written since, recorded as a ``truncate`` to the copy's length would be (with
    what the next start's recovery reads); a copy that is no prefix says so, with no
    batches to match offsets to."""
    nodes = _Nodes(tmp_path)
    nemesis = FileNemesis(nodes, random.Random(7))
    seg = tmp_path / "n2" / "kafka-chaos-0" / "00000000000000000500.log"
    seg.write_bytes(batch([b"1", b"2"], base=500))
    aim = {"target": [2], "topic": "kafka-chaos", "partition": 0, "file": "segment"}
    nemesis.invoke("snapshot-file", aim)
    seg.write_bytes(seg.read_bytes() + batch([b"3"], base=502) + batch([b"4", b"5"], base=503))
    done = nemesis.invoke("restore-file", None)["restored"]["n2"]
    assert done["prefix"] is True and done["batches"] == [502, 503], done
    assert done["offsets"] == [[502, 502], [503, 504]] and done["unchecked"] == []
    assert done["recovered"] is True and done["next_base"] is None  # the active segment
    assert seg.read_bytes() == batch([b"1", b"2"], base=500)
    nemesis.invoke("snapshot-file", aim)
    seg.write_bytes(batch([b"9"], base=500))  # rewritten, not appended: no prefix
    done = nemesis.invoke("restore-file", None)["restored"]["n2"]
    assert done["prefix"] is False and "offsets" not in done, done
