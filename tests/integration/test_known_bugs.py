"""Known Kafka bugs reproduced on demand, each by a built-in scenario on real brokers of the
versions it names, its precondition proven by the run's own record and its outcome judged.
(``delayed-end-txn``, KAFKA-17754, is in ``test_proxy.py``: it needs the proxy.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_chaos.clusters import dist
from kafka_chaos.history import read_history
from tests.integration.conftest import kafka_chaos, leftovers, prepare, results_of, steps_done
from tests.preconditions import require

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]


# the slow reproductions: the longer tier (docs/nightly.md); acks-below-all's loss on a clean
# election stays in the full suite with test_runs' acks1-lagging-follower
@pytest.mark.long
@pytest.mark.parametrize("version, acks", [
    ("3.9.1", "1"), (dist.DEFAULT_KAFKA_VERSION, "1"), (dist.DEFAULT_KAFKA_VERSION, "all")])
def test_acks1_writes_are_lost_in_a_planned_leader_move(request, tmp_path, version, acks):
    """``--scenario acks1-leader-move`` (KAFKA-20554, documented as expected under acks=1 by
    apache/kafka PR 22233, no fix): replication from the leader cut short of
    replica.lag.time.max.ms, then an operator's preferred election moves the leadership to
    an in-sync follower; no broker fails. With acks=1, on 3.9.1 and on 4.4.0, writes the old
    leader acknowledged alone are lost, each permitted by ``acks-below-all`` and pinned on
    that clean election (its ISR held the old leader and the new one), or, for what the new
    leader acknowledged alone, on the clean election that restores the old one. With
    acks=all those writes are never acknowledged (the leader waits for its ISR): valid,
    nothing lost."""
    _, args = prepare(request, "local", dist.resolve(version), [["broker", "controller"]] * 3,
                      tmp_path / "hosts.yaml")
    proc = kafka_chaos("run", *args, "--scenario", "acks1-leader-move", "--acks", acks,
                       "--kafka-version", version, "--seed", "5",
                       "--out", str(tmp_path / "runs"))
    run_dir = (tmp_path / "runs" / "latest").resolve()
    results = results_of(run_dir, proc)
    facts = json.loads((run_dir / "run.json").read_text())
    steps_done(facts["scenario"], 4, facts)
    old = facts["scenario"]["marks"]["L"]
    # the precondition, from the nemesis's own record: a planned move away from the cut leader
    ops = read_history(run_dir / "history.jsonl")
    [move] = [op for op in ops if op.f == "move-leader" and op.type.value == "ok"]
    names = {int(k[1:]): k for k in ("n1", "n2", "n3")}
    assert names[move.value["leader"][0]] == old and move.value["leader"][1] != \
        move.value["leader"][0], move.value
    assert facts["heal_left"] == [] and not any(
        op.f in ("kill", "stop") for op in ops if op.process == "nemesis"), "a broker failed"
    lost = results["anomalies"]["lost-write"]
    print(f"{version} acks={acks}: {lost['count']} lost writes, "
          f"{results['stats']['acked_sends']} acknowledged, valid {results['valid']}")
    if acks == "all":
        assert lost["count"] == 0 and results["valid"] is True, proc.stdout[-3000:]
        assert results["chances"].get("acks-below-all") is None
    else:
        assert lost["count"] > 0 and lost["outcomes"]["permitted"] == lost["count"], lost
        assert lost["rule"] == "acks-below-all" and results["valid"] is True, lost
        for ex in lost["examples"]:
            e = ex["evidence"]
            assert (e["event"], e["partition"], e["unclean"]) == (
                "leader-change", "kafka-chaos-0", False), e
            # the move away from the cut leader; or, for a write the moved-to leader
            # acknowledged, the restore back to the old one, whose own tail (never truncated:
            # it could not fetch) won (the brokers' logs say from which offset each began)
            assert old in (e["from"], e["to"]) and e["to"] in e["isr"], e
            assert e["indexes"][1] > ex["index"] or e.get("deposed_ns"), ex  # after the ack
        assert proc.returncode == 0
    assert leftovers() == []


@pytest.mark.parametrize("version, client, forget", [
    ("3.9.1", "librdkafka", True),  # the full suite's: a group-skip permitted without epochs
    pytest.param(dist.DEFAULT_KAFKA_VERSION, "java", False, marks=pytest.mark.long),
    pytest.param(dist.DEFAULT_KAFKA_VERSION, "librdkafka", False, marks=pytest.mark.long)])
def test_a_group_resuming_from_a_commit_above_a_truncation(request, tmp_path, version, client,
                                                           forget):
    """``--scenario truncated-commit`` (KAFKA-20507, documented by apache/kafka PR 23183, no
    fix): a group commits offsets only the leader has, an unclean election truncates the log
    below them, every client restarts, and the group resumes from its commits once new
    writes have refilled the truncated offsets. The workload commits each offset with its
    leader epoch; ``--proxy-fault forget-leader-epoch`` stores it without, as a client
    without KIP-320 does. Stripped (librdkafka, 3.9.1): the records written there after the
    election are never delivered, each ``group-skip`` permitted by the unclean election
    because the commit above it had no epoch. Kept, the Java client validates the offset
    (OffsetsForLeaderEpoch) and goes back: valid. Kept, librdkafka 2.16.0 fetches it
    unvalidated when it already knows the partition's current leader epoch (its KIP-320
    validation runs on a leader epoch change, not on an assignment), which depends on
    timing: either it goes back (valid) or it makes the same skips, each a violation, since
    the epoch was there to detect the truncation; never a permitted one."""
    _, args = prepare(request, "local", dist.resolve(version), [["broker", "controller"]] * 3,
                      tmp_path / "hosts.yaml")
    extra = ["--proxy-fault", "forget-leader-epoch"] if forget else []
    proc = kafka_chaos("run", *args, "--scenario", "truncated-commit", "--client", client,
                       "--kafka-version", version, "--seed", "5", *extra,
                       "--out", str(tmp_path / "runs"))
    run_dir = (tmp_path / "runs" / "latest").resolve()
    results = results_of(run_dir, proc)
    facts = json.loads((run_dir / "run.json").read_text())
    steps_done(facts["scenario"], 8, facts)
    # the precondition, from the run's own record: the group had committed past an offset
    # the election truncated (a lost write's), with the epoch of what it had read
    ops = read_history(run_dir / "history.jsonl")
    [crash] = [op for op in ops if op.f == "crash-clients" and op.type.value == "ok"]
    commits = [op for op in ops if op.f == "commit" and op.type.value == "ok"]
    before = [op.value["offsets"]["0"] for op in commits if op.index < crash.index]
    lost = results["anomalies"]["lost-write"]
    require(lost["count"] > 0, lost)
    assert lost["outcomes"]["permitted"] == lost["count"], lost
    require(before and max(before) > min(ex["offset"] for ex in lost["examples"]),
            (before[-3:], lost))
    assert all(e >= 0 for op in commits for e in op.value["epochs"].values())
    skip = results["anomalies"]["group-skip"]
    print(f"{version} {client} epochs {'stripped' if forget else 'kept'}: {skip['count']} "
          f"group-skip, {lost['count']} lost writes, valid {results['valid']}")
    if forget:
        [report] = [r for op in ops if op.f == "request-heal" and op.type.value == "ok"
                    for r in op.value["ended"] if r["fault"] == "forget-leader-epoch"]
        assert report["forgotten"], report
        assert skip["count"] > 0 and skip["outcomes"]["permitted"] == skip["count"], skip
        assert skip["rule"] == "unclean-leader-election", skip
        assert all(ex["epochless"] is True for ex in skip["examples"]), skip["examples"][:2]
        assert results["valid"] is True and proc.returncode == 0, results["violations"]
    elif skip["count"] == 0:
        # it went back: the group read records below its last commit after the restart
        again = [off for op in ops if op.f == "poll" and op.type.value == "ok"
                 and op.index > crash.index for m in op.value
                 if m[0] == "poll" and not (m[2:] and m[2].get("final"))
                 for off, _ in m[1].get("0", [])]
        assert again and min(again) < max(before), (min(again, default=None), max(before))
        assert results["valid"] is True and proc.returncode == 0, results["violations"]
    else:  # librdkafka 2.16.0 did not validate (skips in 5 of the first 7 runs here)
        assert client == "librdkafka", skip
        assert skip["outcomes"]["violation"] == skip["count"], skip
        assert all(ex["epochless"] is False for ex in skip["examples"]), skip["examples"][:2]
        assert results["valid"] is False and proc.returncode == 1
    assert leftovers() == []


# the longer tier's: the full suite keeps the hanging-transaction rules on hand-built
# records (test_liveness.py) and a known-bug scenario on real brokers (truncated-commit)
@pytest.mark.long
@pytest.mark.parametrize("version, verify", [("3.9.1", False),
                                             (dist.DEFAULT_KAFKA_VERSION, False),
                                             (dist.DEFAULT_KAFKA_VERSION, True)])
def test_a_produce_arriving_after_its_transaction_ended(request, tmp_path, version, verify):
    """``--scenario late-produce`` (KIP-890's hanging transaction): the proxy holds every
    Produce of one transactional process, which aborts and crashes; a process with a
    transactional id of its own replaces it, and once the broker has expired the old
    producer id (``producer.id.expiration.ms``), the held Produce is forwarded. With
    ``transaction.partition.verification.enable=false`` (``plans/late-produce-unverified``)
    it opens a transaction no coordinator ends, on 3.9.1 and on 4.4.0: the partition's LSO
    stops there for good, a ``hanging-transaction`` permitted by that setting and pinned on
    the late Produce, and read_committed final reads end there (``unseen`` above it,
    permitted with it). With verification (the default since 3.6) the leader refuses it:
    no hang, valid."""
    _, args = prepare(request, "local", dist.resolve(version), [["broker", "controller"]] * 3,
                      tmp_path / "hosts.yaml")
    how = ["--scenario", "late-produce"] if verify else [
        "--plan", str(ROOT / "plans" / "late-produce-unverified.yaml")]
    proc = kafka_chaos("run", *args, *how, "--kafka-version", version, "--seed", "3",
                       "--out", str(tmp_path / "runs"))
    run_dir = (tmp_path / "runs" / "latest").resolve()
    results = results_of(run_dir, proc)
    facts = json.loads((run_dir / "run.json").read_text())
    steps_done(facts["scenario"], 4, facts)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["broker_properties"].get(
        "transaction.partition.verification.enable", "true") == str(verify).lower()
    # the precondition, from the proxy's own record: the held Produce requests reached the
    # broker after their client had aborted (EndTxn) or fenced itself (InitProducerId), and
    # after the broker's producer id expiry (10 s) past its crash
    ops = read_history(run_dir / "history.jsonl")
    [crash] = [op for op in ops if op.f == "crash-clients" and op.type.value == "ok"]
    [report] = [r for op in ops if op.f == "request-heal" and op.type.value == "ok"
                for r in op.value["ended"]]
    late = [q for q in report["requests"] if q["api"] == "Produce"]
    assert late and report["applied"] == len(late), report
    for q in late:
        assert {"EndTxn", "InitProducerId"} & set(q["overtaken_by"]), q
        assert q["forwarded_ns"] > crash.time + 15e9, (q, crash.time)
    # what the leader answered: appended (no error) without verification, refused with it
    answers = sorted({q["errors"]["kafka-chaos-0"] for q in late})
    assert ("none" in answers) != verify, answers
    hang = results["anomalies"]["hanging-transaction"]
    unseen = results["anomalies"]["unseen"]
    print(f"{version} verification {verify}: late Produce answered {answers}, "
          f"{hang['count']} hanging transaction(s) "
          f"{[ex['lso'] for ex in hang['examples']]}, {unseen['count']} unseen, "
          f"valid {results['valid']}")
    if verify:
        assert hang["count"] == 0 and unseen["count"] == 0, (hang, unseen)
    else:
        assert hang["count"] == 1 and hang["rule"] == "no-partition-verification", hang
        [ex] = hang["examples"]
        e = ex["evidence"]
        assert (e["event"], e["partition"], e["client"]) == ("late-produce", "kafka-chaos-0",
                                                              "kc-p0"), e
        assert ex["at_s"][0] * 1e9 >= min(q["forwarded_ns"] for q in late), (ex, late)
        assert unseen["count"] == 0 or unseen["outcomes"]["permitted"] == unseen["count"], unseen
        assert all(u["offset"] >= ex["lso"] for u in unseen["examples"]), unseen["examples"]
    assert results["valid"] is True and proc.returncode == 0, results["violations"]
    assert leftovers() == []


@pytest.mark.long
def test_an_unclean_election_that_loses_a_transaction_marker_hangs_the_partition(request,
                                                                                tmp_path):
    """``--scenario lost-txn-marker`` (KAFKA-20716, documented by apache/kafka PR 22937, no
    fix): a follower F is cut off while transactions run, every client crashes (their
    producer ids never write again), the leader and the other follower, which hold the
    markers, are killed, and F is elected uncleanly. On F a transaction whose records it
    had before the cut stays open for good: a ``hanging-transaction`` permitted by
    ``unclean-election-lost-marker``, pinned on F's election, whose broker log says F's log
    already held the stuck offset; read_committed final reads end there, everything above
    ``unseen``, permitted with it. No poll-skip: a consumer passing over a marker's offset,
    which the truncation gave to a new record, skipped nothing. Valid."""
    version = dist.DEFAULT_KAFKA_VERSION
    _, args = prepare(request, "local", dist.resolve(version), [], tmp_path / "hosts.yaml")
    proc = kafka_chaos("run", *args, "--scenario", "lost-txn-marker", "--kafka-version",
                       version, "--seed", "1", "--out", str(tmp_path / "runs"))
    run_dir = (tmp_path / "runs" / "latest").resolve()
    results = results_of(run_dir, proc)
    facts = json.loads((run_dir / "run.json").read_text())
    steps_done(facts["scenario"], 8, facts)
    marks = facts["scenario"]["marks"]
    assert len({marks["L"], marks["F"], marks["G"]}) == 3, marks
    hang = results["anomalies"]["hanging-transaction"]
    unseen = results["anomalies"]["unseen"]
    print(f"{version}: {hang['count']} hanging transaction(s) "
          f"{[ex['lso'] for ex in hang['examples']]}, {unseen['count']} unseen, "
          f"valid {results['valid']}")
    assert hang["count"] == 1 and hang["rule"] == "unclean-election-lost-marker", hang
    [ex] = hang["examples"]
    e = ex["evidence"]
    assert (e["event"], e["to"], e["unclean"]) == ("leader-change", marks["F"], True), e
    # (not by time: on 4.0.2 the monitor saw the new leader about 30 ms before the log's
    # election; the rule matches the election by leader and epoch)
    assert e["start_offset"] > ex["lso"], ex
    assert unseen["count"] > 0 and unseen["outcomes"]["permitted"] == unseen["count"], unseen
    assert unseen["rule"] == "read-committed-behind-lost-marker", unseen
    assert "poll-skip" not in results["anomaly_types"], results["anomaly_types"]
    assert results["valid"] is True and proc.returncode == 0, results["violations"]
    assert leftovers() == []


@pytest.mark.long
def test_the_known_bug_matrix_records_each_run_and_goes_on_from_its_record(tmp_path):
    """``kafka-chaos known-bugs`` on one cell (``acks1-leader-move``, the Java client): the
    run is judged, its entry goes into the record with the client release it ran, the
    table shows it; run again, the command runs nothing, the record unchanged."""
    version = dist.DEFAULT_KAFKA_VERSION
    record, md = tmp_path / "k.json", tmp_path / "k.md"
    args = ["known-bugs", "--bugs", "acks1-leader-move", "--kafka-versions", version,
            "--clients", "java", "--runs", "1", "--record", str(record), "--markdown",
            str(md), "--out", str(tmp_path / "runs")]
    proc = kafka_chaos(*args)
    assert proc.returncode == 0, proc.stdout[-3000:]
    kept = json.loads(record.read_text())
    [entry] = kept["cells"][f"acks1-leader-move/{version}/java"]
    assert (entry["seed"], entry["shown"], entry["verdict"], entry["client"]) == (
        1, True, "valid", f"java {version}"), entry
    assert f"| {version} | **shown** 1/1 (1 valid; " in md.read_text()
    again = kafka_chaos(*args)
    assert again.returncode == 0 and "every cell has its runs in the record" in again.stdout
    assert json.loads(record.read_text()) == kept
    assert leftovers() == []
