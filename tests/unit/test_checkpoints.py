"""Kafka's offset checkpoint files read as Kafka reads them (``nemesis.checkpoints``): what a
damage did to the offsets a broker loads decides whether the verdict may call it harmless,
so each case of ``CheckpointFile``'s reader is checked both ways, and every damage of a real
file is either read or refused, never misread as lower."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_chaos.clusters.base import LocalFiles
from kafka_chaos.nemesis import checkpoints
from kafka_chaos.nemesis.checkpoints import LOWERED, RAISED, UNREADABLE, change, read
from kafka_chaos.nemesis.files import damage, restore

pytestmark = pytest.mark.fast

GOOD = b"0\n2\nkafka-chaos 0 1234\nkafka-chaos 1 987\n"


@pytest.mark.parametrize("text, entries", [
    (GOOD, {("kafka-chaos", 0): 1234, ("kafka-chaos", 1): 987}),
    (b"", {}), (b"0", {}), (b"0\n", {}),                      # no count line: no entries
    (b"0\r\n1\r\nt 0 5", {("t", 0): 5}),                      # \r\n and no final newline
    (b"0\r1\rt 0 5\r", {("t", 0): 5}),                        # a lone \r ends a line too
    (b"0\n1\nt\t0  +5 \n", {("t", 0): 5}),                    # \s+, a sign, a trailing space
    (b"0\n2\nt 0 5\nt 0 7\n", {("t", 0): 7}),                 # the last of a key wins
])
def test_what_kafka_reads(text, entries) -> None:
    assert read(text) == entries


@pytest.mark.parametrize("text", [
    b"1\n1\nt 0 5\n",                 # another version
    b"0\n3\nt 0 5\nt 1 5\n",          # fewer entries than counted
    b"0\n1\n",                        # ... none at all
    b"0\n1\nt 0 5\nt 1 5\n",          # more
    b"0\n1\n t 0 5\n",                # a leading blank makes a fourth, empty field
    b"0\n1\nt 0\n",                   # two fields
    b"0\n1\nt 0 5a\n",                # not a number
    b"0\n1\nt 0 1_000\n",             # Python would take it, Java does not
    b"0\n1\nt 2147483648 5\n",        # a partition beyond an int
    b"0\n1\nt 0 9223372036854775808\n",  # an offset beyond a long
    b"0\n1\nt 0 \xb5\n",              # no UTF-8
    b"0\nx\n",                        # the count no number
])
def test_what_kafka_cannot_read(text) -> None:
    assert read(text) is None


def test_a_change_is_lowered_only_when_every_offset_read_is_no_higher() -> None:
    assert change(GOOD, GOOD.replace(b"1234", b"1034")) == LOWERED
    assert change(GOOD, GOOD.replace(b"1234", b"123")) == LOWERED     # cut in the number
    assert change(GOOD, b"0\n") == LOWERED                              # every one from 0
    assert change(GOOD, b"0\n1\nkafka-chaos 1 987\n") == LOWERED       # one gone: from 0
    assert change(GOOD, GOOD.replace(b"987", b"997")) == RAISED
    assert change(GOOD, GOOD.replace(b"s 1 ", b"s 3 ")) == RAISED      # a partition it lacked
    assert change(GOOD, GOOD.replace(b"2\n", b"3\n", 1)) == UNREADABLE
    assert change(b"0\nx\n", b"0\n") == RAISED  # nothing readable to compare with: no verdict


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["kafka-chaos", "kafka-chaos-1"]),
                          st.integers(0, 5), st.integers(0, 10**12)),
                min_size=1, max_size=6, unique_by=lambda e: e[:2]),
       st.sampled_from(["bitflip", "truncate", "zero"]), st.integers(0, 2**32))
def test_a_damage_is_never_called_lower_when_an_offset_kafka_reads_went_up(
        tmp_path_factory, entries, how, seed) -> None:
    """Whatever a damage does to a checkpoint Kafka wrote, the record's ``checkpoint`` is
    ``lowered`` only if each offset read from the damaged file is one the file held for that
    partition, or lower; and a rollback to the file's earlier state says the same."""
    text = "0\n%d\n%s" % (len(entries), "".join(f"{t} {p} {o}\n" for t, p, o in entries))
    path = tmp_path_factory.mktemp("cp") / "replication-offset-checkpoint"
    path.write_text(text)
    done = damage(LocalFiles(), str(path), how, random.Random(seed))
    before = {(t, p): o for t, p, o in entries}
    damaged = path.read_bytes()
    after = read(damaged)
    if done["checkpoint"] == LOWERED:
        assert after is not None and all(v <= before[k] for k, v in after.items())
    elif done["checkpoint"] == UNREADABLE:
        assert after is None
    else:
        assert after is not None and any(k not in before or v > before[k]
                                         for k, v in after.items())
    # the copy put back: judged from the damaged file to the copy, as the broker meets it
    back = restore(LocalFiles(), str(path), text.encode())
    assert back["checkpoint"] == change(damaged, text.encode())
    assert read(path.read_bytes()) == before
    if after is not None and after != before:
        lowered = all(k in after and after[k] >= v for k, v in before.items())
        assert back["checkpoint"] == (LOWERED if lowered else RAISED)


def test_other_files_get_no_checkpoint_record(tmp_path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n1\n0 0\n")
    assert "checkpoint" not in damage(LocalFiles(), str(path), "truncate", random.Random(1))
    assert path.name not in checkpoints.OFFSET_CHECKPOINTS
