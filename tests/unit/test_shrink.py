"""``kafka-chaos shrink``'s pure parts (``kafka_chaos.shrink``): a random schedule's faults
read back from a hand-made history as replayable steps, the timings, the decision of a
candidate from its replays, and delta debugging checked against every failure set
Hypothesis draws (1-minimal, a subset, reproducing)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_chaos.history import Op, OpType
from kafka_chaos.nemesis.script import Script
from kafka_chaos.shrink import (ShrinkError, ddmin, decide, describe, need_of, node_id,
                                script, timed, units_of_history, units_of_script)

pytestmark = pytest.mark.fast
S = 1_000_000_000


def _history(*nemesis: tuple[float, str, object, str, object]) -> list[Op]:
    """A client op at 1 s, then each nemesis op ``(time s, f, invoke value, completion
    type, completion value)`` as an invoke and its completion 0.1 s later."""
    ops = [Op(0, 1 * S, 0, OpType.INVOKE, "send", [["send", "k", 1]]),
           Op(1, int(1.05 * S), 0, OpType.OK, "send", [["send", "k", [0, 1]]])]
    for t, f, value, kind, done in nemesis:
        ops.append(Op(len(ops), int(t * S), "nemesis", OpType.INVOKE, f, value))
        ops.append(Op(len(ops), int((t + 0.1) * S), "nemesis", OpType(kind), f, done))
    return ops


def _target(name: str) -> dict:
    return {"target": name, "topic": "kafka-chaos", "partition": 0}


def test_a_random_schedule_becomes_faults_on_the_nodes_drawn_or_the_roles_named() -> None:
    ops = _history(
        (6, "partition", _target("halves"), "ok", {"isolated": [["n3", "n1"], ["n2"]]}),
        (11, "heal", None, "ok", {"healed": True}),
        (16, "kill", _target("lone-leader"), "ok", {"killed": ["n2"], "alone_after_s": 3}),
        (21, "start", None, "ok", {"started": ["n2"]}),
        (26, "pause", _target("one"), "ok", {"paused": ["c1"]}),
        (31, "resume", None, "ok", {"resumed": ["c1"]}),
        (36, "kill", _target("follower"), "info", "NemesisError: no follower"),
        (40, "heal-all", None, "ok", {}))
    units, end_s = units_of_history(ops, brokers=3)
    assert end_s == 39.0  # from the first client op (1 s) to the final heal
    assert [u.steps for u in units] == [
        ({"at": 5.0, "do": ["partition"], "target": [1, 3],
          "name": "partition nodes 1,3 (drawn: halves)"}, {"at": 10.0, "do": ["heal"]}),
        # a role is replayed as a role: whoever holds it in the replay
        ({"at": 15.0, "do": ["kill"], "target": "lone-leader", "name": "kill lone-leader"},
         {"at": 20.0, "do": ["start"]}),
        ({"at": 25.0, "do": ["pause"], "target": [4], "name": "pause nodes 4 (drawn: one)"},
         {"at": 30.0, "do": ["resume"]}),
        # not known to have happened, and never stopped but by the final heal
        ({"at": 35.0, "do": ["kill"], "target": "follower", "name": "kill follower"},
         {"at": 39.0, "do": ["start"]})]
    assert units[0].label == "partition nodes 1,3 at 5 s, heal at 10 s"
    steps = timed(units, [0, 2], "as-run", end_s)
    Script(**script("x", "", {}, steps))  # a valid scenario
    assert [s["at"] for s in steps] == [5.0, 10.0, 25.0, 30.0, 39.0]
    assert describe(steps) == ("partition nodes 1,3 at 5 s; heal at 10 s; pause nodes 4 at "
                               "25 s; resume at 30 s")


def test_a_file_fault_is_replayed_on_the_node_and_the_kind_of_file_it_chose() -> None:
    ops = _history(
        (5, "bitflip", _target("follower"), "ok",
         {"killed": ["n3"], "damaged": {"n3": {"file": "kafka-chaos-0/x.log",
                                               "kind": "segment", "bits": [1]}}}),
        (10, "start", None, "ok", {"started": ["n3"]}),
        (15, "snapshot-file", _target("one"), "ok",
         {"copied": {"n2": {"file": "replication-offset-checkpoint",
                            "kind": "replication-offset-checkpoint", "size": 9}}}),
        (20, "restore-file", None, "ok", {"restored": {}}),
        (25, "disk-slow", _target("one"), "ok", {"slow": ["n1"], "state": {}}),
        (30, "disk-heal", None, "ok", {"healed": ["n1"]}), (35, "heal-all", None, "ok", {}))
    units, _ = units_of_history(ops, brokers=3)
    starts = [u.steps[0] for u in units]
    assert [(s["do"], s["target"], s.get("file")) for s in starts] == [
        (["bitflip"], [3], "segment"),
        (["snapshot-file"], [2], "replication-offset-checkpoint"),
        (["disk-slow"], [1], None)]
    Script(**script("x", "", {}, timed(units, range(3), "as-run", 34)))


def test_shorter_timings_squeeze_the_idle_time_then_the_faults() -> None:
    ops = _history((12, "kill", _target("leader"), "ok", {"killed": ["n1"]}),
                   (22, "start", None, "ok", {}),
                   (40, "partition", _target("isolate-leader"), "ok", {}),
                   (50, "heal", None, "ok", {}), (60, "heal-all", None, "ok", {}))
    units, end_s = units_of_history(ops, brokers=3)
    compact = timed(units, [0, 1], "compact", end_s)
    assert [s["at"] for s in compact] == [5.0, 15.0, 17.0, 27.0, 32.0]
    halved = timed(units, [0, 1], "halved", end_s)
    assert [s["at"] for s in halved] == [5.0, 10.0, 12.0, 17.0, 22.0]
    assert [s.get("do") for s in halved] == [s.get("do") for s in compact]


def test_what_a_replay_cannot_express_is_refused_by_name() -> None:
    with pytest.raises(ShrinkError, match="request fault"):
        units_of_history(_history((5, "request-fault", _target("delay"), "ok", {})), 3)
    # --proxy-fault's own fault, begun before the workload, is no scheduled fault
    units, _ = units_of_history(_history((0.5, "request-fault", _target("delay"), "ok", {}),
                                         (5, "kill", _target("one"), "ok", {"killed": ["x"]}),
                                         (9, "heal-all", None, "ok", {})), 3, "request-fault")
    assert units[0].steps[0]["target"] == "one"  # a node the tool did not name: as drawn
    with pytest.raises(ShrinkError, match="no client op"):
        units_of_history([Op(0, 0, "nemesis", OpType.INVOKE, "heal-all", None)], 3)
    assert node_id("n2", 3) == 2 and node_id("c2", 3) == 5 and node_id("kafka-1", 3) is None
    assert [u.label for u in units_of_script([{"do": ["kill"]}, {"name": "x", "after": 2}])] \
        == ["step 1 (kill)", "x"]


def test_a_candidate_is_decided_as_soon_as_its_replays_can_tell() -> None:
    assert decide(2, 2, 3, 2) is True       # two of two: the third is not needed
    assert decide(0, 2, 3, 2) is False      # the third cannot make two
    assert decide(1, 1, 3, 2) is None
    assert decide(1, 2, 3, 2) is None
    assert need_of(3, None) == 2 and need_of(4, None) == 3 and need_of(1, None) == 1
    with pytest.raises(ShrinkError, match="--need 4"):
        need_of(3, 4)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.sets(st.integers(0, n - 1), min_size=1), min_size=1, max_size=4))))
def test_ddmin_ends_one_minimal(case: tuple[int, list[set[int]]]) -> None:
    """A candidate reproduces when it holds every unit of one of the causes: ddmin's answer
    holds a cause, and no single unit of it can go."""
    n, causes = case

    def reproduces(kept: tuple[int, ...]) -> bool:
        asked.append(kept)
        return any(c <= set(kept) for c in causes)

    asked: list[tuple[int, ...]] = []
    kept = ddmin(n, reproduces)
    assert reproduces(kept) and set(kept) <= set(range(n))
    assert all(not reproduces(tuple(i for i in kept if i != x)) for x in kept
               if len(kept) > 1)
    assert () not in asked
    assert len(set(asked)) <= 2 * n * n  # Zeller's worst case is quadratic


def test_ddmin_finds_one_fault_of_eight_in_few_candidates() -> None:
    asked = []
    kept = ddmin(8, lambda k: asked.append(k) or 5 in k)
    assert kept == (5,)
    assert len(asked) == 5  # a half, the other; a quarter; an eighth, the other
    pairs = [tuple(sorted(p)) for p in itertools.combinations(range(6), 2)]
    for pair in pairs:
        assert ddmin(6, lambda k, p=pair: set(p) <= set(k)) == pair


def test_a_run_that_cannot_be_shrunk_is_refused_by_name(tmp_path) -> None:
    """Bad input: one message naming the run directory and why, exit 254, nothing made."""
    import json

    from typer.testing import CliRunner

    from kafka_chaos.cli import app
    from kafka_chaos.config import RunConfig

    def shrink(*args: str) -> tuple[int, str]:
        got = CliRunner().invoke(app, ["shrink", *args, "--out", str(tmp_path / "out")])
        return got.exit_code, " ".join(got.output.split())

    run = tmp_path / "run"
    run.mkdir()
    code, said = shrink(str(run))
    assert code == 254 and "not a finished run directory (no config.json)" in said
    (run / "config.json").write_text(RunConfig(acks="1").model_dump_json())
    (run / "results.json").write_text(json.dumps({"verdict": "valid", "anomalies": {}}))
    code, said = shrink(str(run))
    assert code == 254 and "its verdict (valid) does not show violation" in said
    (run / "results.json").write_text(json.dumps(
        {"verdict": "valid", "anomalies": {"lost-write": {"count": 3}}}))
    (run / "history.jsonl").write_text("\n".join(json.dumps(op.to_json()) for op in _history(
        (5, "heal-all", None, "ok", {}))) + "\n")
    code, said = shrink(str(run), "--outcome", "anomaly:lost-write")
    assert code == 254 and "its run had no fault to remove" in said
    code, said = shrink(str(run), "--outcome", "anomaly:lost-write", "--runs", "3",
                        "--need", "4")
    assert code == 254 and "--need 4: between 1 and --runs 3" in said
    code, said = shrink("--resume", str(run))
    assert code == 254 and "not a shrink directory" in said
    assert not (tmp_path / "out").exists()
