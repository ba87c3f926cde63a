"""The reference model of one partition's replication (``history.simulate.replication``):
Kafka's documented cases, each by hand; and the histories it writes (``model_run``)."""

from __future__ import annotations

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
