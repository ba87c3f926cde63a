"""The reference model of one partition's replication (``history.simulate.replication``):
Kafka's documented cases, each by hand; and the histories it writes (``model_run``)."""

from __future__ import annotations

import json
from dataclasses import replace

from kafka_chaos.history.simulate.model_run import Config, Step, generate
from kafka_chaos.history.simulate.replication import (ACKS_BELOW_ALL, POWER_LOSS, UNCLEAN,
                                                       Partition)
from kafka_chaos.history.validate import validate


def test_acks_1_loses_what_only_the_leader_had_in_a_clean_election() -> None:
    p = Partition()
    assert p.produce(1, "1") is None and p.acks[1].holders == {1}
    p.kill(1)
    assert p.elections[-1].leader == 2 and not p.elections[-1].unclean
    assert p.fate() == {1: ACKS_BELOW_ALL}


def test_acks_all_is_acknowledged_once_the_isr_has_it_and_survives_clean_elections() -> None:
    p = Partition()
    p.produce(1, "all")
    assert 1 not in p.acks  # the followers have not fetched yet
    p.fetch(2)
    p.fetch(3)
    assert p.acks[1].offset == 0 and p.hw == 1
    p.kill(1)
    p.kill(2)
    assert p.leader == 3 and p.fate() == {1: None} and p.read() == [(0, 1)]


def test_acks_all_is_refused_below_min_isr_and_the_elr_keeps_what_was_committed() -> None:
    p = Partition(min_isr=2)
    p.produce(1, "all")
    p.fetch(2)
    p.fetch(3)
    p.shrink(2)
    p.shrink(3)
    # 2 left while the ISR still met min.insync.replicas (it may lack later commits); 3 left
    # the ISR below it, and every commit since is on the leader alone: none (KIP-966)
    assert p.isr == {1} and p.elr == {3}
    assert p.produce(2, "all") == "NOT_ENOUGH_REPLICAS"
    p.kill(1)
    assert p.leader == 3 and not p.elections[-1].unclean and p.fate() == {1: None}


def test_a_new_leader_counts_a_follower_only_once_it_fetched_in_its_epoch() -> None:
    """Found by the oracle bench (seed 2): 3 held value 1 at offset 0 from the old leader, 2
    was elected without it and appended 2 at offset 0; both logs were one record long, and
    the model acknowledged 2 while 3 held another record there. Kafka's leader learns a
    follower's log end only from its fetches in the leader's epoch."""
    p = Partition(min_isr=2)
    p.produce(1, "all")
    p.fetch(3)
    p.kill(1)
    assert p.leader == 2 and p.produce(2, "all") is None
    assert 2 not in p.acks and p.hw == 0
    p.fetch(3)  # truncates 1 (epoch 0 ends at 0 on the leader), copies 2
    assert p.acks[2].offset == 0 and p.replicas[3].log == p.replicas[2].log


def test_an_acks_all_write_the_isr_shrank_under_fails_after_its_append() -> None:
    """``Partition.checkEnoughReplicasReachOffset``: the HW passed the write while the ISR
    was below min.insync.replicas, so the producer gets NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
    p = Partition(min_isr=2, elr=False)
    p.produce(1, "all")
    p.fetch(2)
    p.shrink(2)
    p.shrink(3)
    assert p.hw == 1 and 1 not in p.acks and not p.pending
    # with ELR kept the HW does not move below min.insync.replicas at all (KIP-966)
    p = Partition(min_isr=2)
    p.produce(1, "all")
    p.fetch(2)
    p.shrink(2)
    p.shrink(3)
    assert p.hw == 0 and 1 not in p.acks


def test_an_unclean_election_loses_what_the_new_leader_never_had() -> None:
    p = Partition(min_isr=1, unclean=True, elr=False)
    p.shrink(2)
    p.shrink(3)
    p.produce(1, "all")
    assert p.acks[1].holders == {1}
    p.kill(1)
    assert p.elections[-1].unclean and p.fate() == {1: UNCLEAN}


def test_a_follower_truncates_where_it_diverges_from_the_new_leader() -> None:
    p = Partition(min_isr=1, unclean=True, elr=False)
    p.produce(1, "1")
    p.fetch(2)  # 2 has value 1; 3 has nothing
    p.shrink(2)
    p.shrink(3)
    p.produce(2, "1")  # only on 1
    p.kill(1)
    p.kill(2)
    p.start(3)  # nothing in the ISR lives: unclean, 3 has no record
    assert p.leader == 3 and p.elections[-1].unclean
    p.produce(3, "1")
    p.start(1)
    p.fetch(1)  # 1's epoch-0 records diverge from 3's log: truncated, then 3's copied
    assert [e.value for e in p.replicas[1].log] == [3]


def test_a_power_loss_of_every_replica_keeps_only_what_was_fsynced() -> None:
    p = Partition(elr=False)
    p.produce(1, "all")
    p.fetch(2)
    p.fetch(3)
    p.fsync(3)
    p.produce(2, "all")
    p.fetch(2)
    p.fetch(3)
    assert set(p.acks) == {1, 2}
    for node in (1, 2, 3):
        p.lose_power(node)
    # on 3.x the last ISR member stays in the ISR while it is down, and is elected cleanly
    # once it is back: with what it had fsynced
    assert p.leader is None and p.isr == {3}
    p.start(3)
    assert p.leader == 3 and not p.elections[-1].unclean
    assert p.fate() == {1: None, 2: POWER_LOSS}


def test_a_model_history_is_valid_and_says_which_losses_its_record_shows(tmp_path) -> None:
    """Three partitions under acks=1, each leader killed once after a write only it had: the
    history passes the reader's checks; the loss whose election falls between two samples
    taken after the write is shown; the one whose partition the monitor did not see for 8 s
    is not; one acknowledged after the last periodic sample before the kill is shown by the
    sample taken right before the kill op."""
    # samples every 500 ms: the first two writes come before the one at 500 ms
    cases = [[Step(450, "produce"), Step(900, "kill", 0)],
             [Step(450, "produce"), Step(600, "blind", 0, 8000), Step(900, "kill", 0)],
             [Step(1100, "produce"), Step(1200, "kill", 0)]]
    truth = generate(tmp_path / "history.jsonl", cases, Config(acks="1"))
    assert validate(tmp_path / "history.jsonl").ops > 0
    assert [(t.key, t.mechanism, t.expected) for t in truth] == [
        (0, ACKS_BELOW_ALL, "permitted"), (1, ACKS_BELOW_ALL, "unexplained"),
        (2, ACKS_BELOW_ALL, "permitted")]


def test_a_broker_back_from_an_unclean_shutdown_is_no_longer_eligible() -> None:
    """With ELR, the power-lost leader that left the ISR below min.insync.replicas is not
    elected when it comes back (KAFKA-15586): the partition waits for the replica that kept
    the record, and nothing is lost."""
    p = Partition(min_isr=2, elr=True)
    p.shrink(2)  # ISR {1, 3}
    p.produce(1, "all")
    p.fetch(3)
    assert 1 in p.acks
    p.lose_power(1)  # nothing fsynced: 1 keeps nothing
    p.kill(3)
    assert p.leader is None and p.elr == {1, 3}
    p.start(1)
    assert p.leader is None and p.elr == {3}
    p.start(3)
    assert p.leader == 3 and p.fate() == {1: None}


def test_an_acks_1_loss_is_shown_by_any_later_leader_change_the_samples_see(tmp_path) -> None:
    """The property test's first disagreement (2026-11-29): the election that lost the write
    came while the monitor was blind, a later one in its sight. acks=1 documents the loss of
    what a leader had not replicated when leadership changes, and the record cannot tell
    which change took a value: the later one shows the mechanism (the verdict permits)."""
    # blind for 6 s: longer than the 5 s the verdict reads as a located bracket
    cases = [[Step(450, "produce"), Step(600, "blind", 0, 6000), Step(900, "kill", 0),
              Step(1000, "start", 0), Step(8000, "kill", 1)],
             [Step(450, "produce"), Step(600, "blind", 0, 6000), Step(900, "kill", 0)]]
    truth = generate(tmp_path / "history.jsonl", cases, Config(acks="1"))
    assert [(t.key, t.mechanism, t.epoch, t.expected) for t in truth] == [
        (0, ACKS_BELOW_ALL, 1, "permitted"), (1, ACKS_BELOW_ALL, 1, "unexplained")]


def test_a_power_loss_after_a_kill_of_unknown_outcome_is_labelled_doubt(tmp_path) -> None:
    """acks=all, min.insync.replicas=2 with ELR: a write that n1 and n2 have, a consumer
    reads it, n2 is killed (into the ELR), then n1 loses power with the write un-fsynced.
    With the kill ``ok`` the record shows every in-sync or eligible replica dead
    (permitted); ``info``, it cannot tell whether n2 died (unexplained); ``fail`` or
    ``info-none``, n2 never died, was elected and had the write (nothing lost)."""
    steps = [Step(100, "shrink", 2), Step(200, "produce"), Step(300, "fetch", 1),
             Step(350, "poll")]
    labels = {}
    for ends in ("ok", "info", "fail", "info-none"):
        cases = [steps + [Step(400, "kill", 1, 0, ends), Step(1200, "lose-power", 0),
                          Step(1300, "start", 1)]]
        folder = tmp_path / ends
        folder.mkdir()
        truth = generate(folder / "history.jsonl", cases, Config(acks="all", min_isr=2))
        assert validate(folder / "history.jsonl").ops > 0
        labels[ends] = [(t.mechanism, t.expected) for t in truth]
    read = [json.loads(line) for line in (tmp_path / "ok" / "history.jsonl").read_text()
            .splitlines() if '"type":"ok","f":"poll"' in line]
    assert read[0]["value"] == [["poll", {"0": [[0, 1]]}]]  # the mid-run poll, its own process
    assert labels == {"ok": [(POWER_LOSS, "permitted")], "info": [(POWER_LOSS, "unexplained")],
                      "fail": [(None, None)], "info-none": [(None, None)]}


def test_a_loss_out_of_sight_is_shown_by_a_power_loss_of_every_in_sync_replica(tmp_path):
    """``bench/model_oracle.py --seed 11``'s disagreement (2026-11-29): acks=1, the ISR n1
    and n2, both lose power while the monitor is blind, and n3 is elected uncleanly. The
    unclean election is out of sight, but the power losses are nemesis ops, never blind, and
    the last sample names the ISR they took: Kafka's design doc drops its guarantee once all
    the nodes replicating a partition die, so the record shows a mechanism (the verdict
    permits)."""
    cases = [[Step(500, "shrink", 2), Step(1000, "blind", 0, 8000), Step(2000, "produce"),
              Step(3000, "lose-power", 1), Step(3500, "lose-power", 0)]]
    truth = generate(tmp_path / "history.jsonl", cases,
                     Config(acks="1", min_isr=1, unclean=True))
    assert [(t.mechanism, t.expected) for t in truth] == [(UNCLEAN, "permitted")]


def test_an_acks_1_write_lost_with_its_leader_s_power_is_shown_by_that_loss(tmp_path):
    """``bench/model_oracle.py --seed 16``'s disagreement (2026-11-29): acks=1, the leader
    n1 loses power with a write no follower fetched, while the monitor is blind; the last
    sample still named n2 in the ISR (it left just after), so the power loss did not take
    every replica the record says was in sync, and n1 comes back leading: no leader change.
    The producer docs for acks=1 document the loss should the leader fail before the
    followers have the record: the power loss of the leader the last sample named shows it."""
    cases = [[Step(100, "produce"), Step(200, "shrink", 2), Step(550, "blind", 0, 2000),
              Step(600, "shrink", 1), Step(700, "lose-power", 0)]]
    truth = generate(tmp_path / "history.jsonl", cases,
                     Config(acks="1", min_isr=2, elr=False))
    assert [(t.mechanism, t.expected) for t in truth] == [(POWER_LOSS, "permitted")]


def test_a_power_loss_whose_isr_was_sampled_before_the_ack_is_labelled_doubt(tmp_path):
    """``bench/model_oracle.py --seed 16`` (2026-11-29), the other half: acks=all with
    min.insync.replicas=1, the ISR sampled as n1 and n2, then shrunk to n1, which
    acknowledged the write alone and lost power while the monitor was blind. The record
    cannot tell that the ISR was n1 alone at the acknowledgement: unexplained, where it
    was "documented" (the model's word for a loss the record shows Kafka could not make)."""
    cases = [[Step(100, "produce"), Step(200, "shrink", 2), Step(550, "blind", 0, 2000),
              Step(600, "shrink", 1), Step(700, "lose-power", 0)]]
    truth = generate(tmp_path / "history.jsonl", cases,
                     Config(acks="all", min_isr=1, elr=False))
    assert [(t.mechanism, t.expected) for t in truth] == [(POWER_LOSS, "unexplained")]


def test_an_idempotent_retry_of_a_held_record_is_answered_with_its_offset() -> None:
    """KIP-98: the leader knows the producer's last sequence from its own log, so a retry of
    a batch the log holds is not appended again; a plain producer's retry is a new batch."""
    for idempotent, log in ((True, [1]), (False, [1, 1])):
        p = Partition(min_isr=2, elr=False)
        p.produce(1, "all")
        p.shrink(3)
        p.shrink(2)  # the HW passes the record with the ISR below min.insync.replicas
        assert p.failed == {1: "NOT_ENOUGH_REPLICAS_AFTER_APPEND"} and 1 not in p.acks
        assert p.produce(1, "all", idempotent) == "NOT_ENOUGH_REPLICAS"  # before the append
        p.fetch(2)
        assert p.produce(1, "all", idempotent) is None
        p.fetch(2)
        assert [e.value for e in p.replicas[1].log] == log
        assert p.acks[1].offset == len(log) - 1


def test_a_leader_change_fails_the_requests_the_old_leader_had_waiting() -> None:
    """The old leader's delayed produce ends when it stops leading (or its connection
    breaks): the producer learns nothing of the record, which the new leader may hold."""
    p = Partition(min_isr=2)
    p.produce(1, "all")
    p.fetch(2)  # the leader does not know yet that 2 has it
    p.kill(1)
    assert p.leader == 2 and p.failed == {1: "NOT_LEADER_OR_FOLLOWER"} and not p.pending
    assert 1 not in p.acks and [e.value for e in p.replicas[2].log] == [1]


def test_a_duplicate_is_labelled_by_the_producer_and_the_loss_of_its_first_copy(tmp_path):
    """A record read at offset 1 (its produce failed after the append), its first copy lost
    in an unclean election, written again at offset 0 by the producer's retry: permitted by
    the plain producer's retries, or by the election the idempotent one's retry follows;
    without retries it ends ``info`` and is never written twice."""
    case = [Step(100, "shrink", 2), Step(200, "produce"), Step(210, "fetch", 1),
            Step(300, "produce"), Step(310, "shrink", 1), Step(400, "poll"),
            Step(450, "kill", 1), Step(500, "kill", 0), Step(600, "start", 1),
            Step(610, "fetch", 1), Step(620, "fetch", 1)]
    base = Config("all", 2, unclean=True, elr=False)
    for name, config, dup in (("plain", replace(base, retries=True), "permitted"),
                              ("idem", replace(base, retries=True, idempotence=True),
                               "permitted"),
                              ("none", base, None)):
        (tmp_path / name).mkdir()
        truth = generate(tmp_path / name / "history.jsonl", [case], config)
        assert [(t.value, t.mechanism, t.expected) for t in truth] == [
            (1, UNCLEAN, "permitted")] + ([(2, None, None)] if dup else []), name
        assert [t.duplicate for t in truth][1:] == ([dup] if dup else []), name
        lines = [json.loads(x) for x in (tmp_path / name / "history.jsonl").open()][1:]
        ends = [x["type"] for x in lines if x["f"] == "send" and x["process"] == 1]
        assert ends == (["invoke", "ok"] if dup else ["invoke", "info"]), (name, ends)


def test_read_committed_stops_at_an_open_transaction_and_skips_aborted_ones() -> None:
    """KIP-98: the LSO is the first offset of the earliest transaction whose marker is not
    below the HW; read_committed reads stop there and leave out aborted records; markers
    are control records no consumer gets."""
    p = Partition(min_isr=2)
    p.produce(1, "all", idempotent=True, pid=7)
    p.produce(2, "all", idempotent=True)
    p.fetch(2)
    p.fetch(3)
    assert p.hw == 2 and p.lso() == 0
    assert p.read(committed=True) == [] and p.read() == [(0, 1), (1, 2)]
    assert p.write_marker(7, commit=False) is None and p.lso() == 0  # not below the HW yet
    p.fetch(2)
    p.fetch(3)
    assert p.hw == p.lso() == 3 and p.read(committed=True) == [(1, 2)]
    assert p.read() == [(0, 1), (1, 2)]


def test_a_marker_a_leader_change_failed_is_written_to_the_new_leader(tmp_path) -> None:
    """The coordinator writes a marker until the HW passes it: one the old leader had not
    replicated is written again to its successor, and nothing hangs."""
    case = [Step(100, "txn"), Step(110, "fetch", 1), Step(120, "fetch", 2), Step(200, "end"),
            Step(300, "kill", 0), Step(350, "poll"), Step(360, "fetch", 2), Step(400, "poll")]
    config = Config("all", 2, retries=True, idempotence=True, transactions=True,
                    read_committed=True)
    truth = generate(tmp_path / "history.jsonl", [case], config)
    assert [(t.value, t.mechanism, t.hidden) for t in truth] == [(1, None, False)]
    lines = [json.loads(x) for x in (tmp_path / "history.jsonl").open()][1:]
    polls = [x["value"][0][1] for x in lines if x["f"] == "poll" and x["type"] == "ok"]
    # before the new leader's follower has the marker again, the transaction is open
    assert polls == [{}, {"0": [[0, 1]]}, {"0": [[0, 1]]}]


#: A committed transaction whose marker (on n1 and n2 only) an unclean election of n3 lost,
#: then a write acknowledged after that election: both hidden behind the open transaction.
HUNG = [Step(100, "txn"), Step(110, "fetch", 1), Step(120, "fetch", 2), Step(200, "end"),
        Step(205, "shrink", 2), Step(210, "fetch", 1), Step(300, "produce"),
        Step(310, "fetch", 1), Step(400, "kill", 0), Step(410, "kill", 1), Step(500, "produce")]


def test_a_transaction_whose_marker_an_election_lost_hides_what_follows(tmp_path) -> None:
    """The coordinator, done with a transaction, never writes its marker again: after the
    election that lost it, read_committed reads stop at the transaction for good. What is
    hidden is labelled by that election: permitted where it lies inside the value's window,
    unexplained for a value acknowledged after it."""
    config = Config("all", 2, unclean=True, elr=False, retries=True, idempotence=True,
                    transactions=True, read_committed=True)
    truth = generate(tmp_path / "history.jsonl", [HUNG], config)
    assert [(t.value, t.mechanism, t.hidden, t.expected) for t in truth] == [
        (1, UNCLEAN, True, "permitted"), (2, UNCLEAN, False, "permitted"),
        (3, UNCLEAN, True, "unexplained")]
    lines = [json.loads(x) for x in (tmp_path / "history.jsonl").open()][1:]
    final = [x["value"][0][2] for x in lines if x["f"] == "poll" and x["type"] == "ok"]
    assert final == [{"final": True, "range": {"0": [0, 0]}, "eof": True}]


def test_a_commit_waits_for_its_flush_and_the_heal_commits_what_is_left_open(tmp_path):
    """``commitTransaction`` flushes first: asked before its send is acknowledged, the
    commit completes once the followers have the record; a transaction still open at the
    heal is committed by the workload then; one ended ``fail`` is aborted at once."""
    case = [Step(100, "txn"), Step(200, "end"), Step(300, "fetch", 1), Step(400, "fetch", 2),
            Step(500, "txn"), Step(600, "txn"), Step(700, "end", ends="fail")]
    config = Config("all", 2, retries=True, idempotence=True, transactions=True,
                    read_committed=True)
    truth = generate(tmp_path / "history.jsonl", [case], config)
    lines = [json.loads(x) for x in (tmp_path / "history.jsonl").open()][1:]
    ends = [(x["time"] // 1_000_000, x["value"][0][2][1], x["type"]) for x in lines
            if x["f"] == "txn" and x["type"] != "invoke"]
    heal = next(x["time"] // 1_000_000 for x in lines if x["f"] == "heal-all")
    assert ends == [(400, 1, "ok"), (700, 2, "fail"), (heal, 3, "ok")], ends
    assert [(t.value, t.mechanism) for t in truth] == [(1, None), (3, None)]


def test_a_retried_write_is_lost_by_what_took_its_acknowledged_copy(tmp_path) -> None:
    """min.insync.replicas=1, plain retries: the write's first copy (on n1 alone) goes with
    n1's power, the retry writes it to n3, which acknowledges it alone; n3 dies and n1, out
    of the ISR, is elected uncleanly. The acknowledged copy was lost by that election, not
    by the power loss that took the earlier one (found in the drawn cases). Without
    retries the write is never acknowledged."""
    case = [Step(61, "produce"), Step(143, "lose-power", 1), Step(161, "lose-power", 0),
            Step(254, "start", 0), Step(347, "kill", 2)]
    for retries, fates in ((True, [(1, UNCLEAN, "permitted")]), (False, [])):
        (tmp_path / str(retries)).mkdir()
        truth = generate(tmp_path / str(retries) / "history.jsonl", [case],
                         Config("all", 1, unclean=True, elr=False, retries=retries))
        assert [(t.value, t.mechanism, t.expected) for t in truth] == fates, retries
