"""The lossy filesystem's bookkeeping (``clusters.lossyfs.Lossy``) on a plain directory: what a
power loss keeps and drops. The FUSE mount itself is exercised in tests/integration."""

from __future__ import annotations

import os

import pytest

from kafka_chaos.clusters.lossyfs import Lossy


def _write(lossy: Lossy, path: str, data: bytes, new: bool = False) -> None:
    real = lossy.real(path)
    if new:
        lossy.created(path)
    size = os.path.getsize(real) if os.path.exists(real) else 0
    lossy.before_write(path, size)
    with open(real, "ab") as f:
        f.write(data)


def test_appends_after_the_last_fsync_are_lost_and_new_files_come_back_empty(tmp_path):
    (tmp_path / "old.log").write_bytes(b"a" * 100)  # on disk before the mount: synced
    lossy = Lossy(str(tmp_path))
    _write(lossy, "/old.log", b"b" * 50)
    _write(lossy, "/new.log", b"c" * 70, new=True)
    _write(lossy, "/synced.log", b"d" * 30, new=True)
    lossy.fsynced("/synced.log")
    _write(lossy, "/synced.log", b"e" * 5)
    report = lossy.lose()
    assert report == {"files": {"/new.log": [0, 70], "/old.log": [100, 50],
                                "/synced.log": [30, 5]}, "lost_bytes": 125}
    assert (tmp_path / "old.log").read_bytes() == b"a" * 100
    assert (tmp_path / "new.log").read_bytes() == b""
    assert (tmp_path / "synced.log").read_bytes() == b"d" * 30
    assert lossy.lose() == {"files": {}, "lost_bytes": 0}  # nothing left to lose


def test_renames_carry_the_synced_length_and_deletions_forget_it(tmp_path):
    (tmp_path / "d").mkdir()
    lossy = Lossy(str(tmp_path))
    _write(lossy, "/d/x.tmp", b"x" * 10, new=True)
    os.rename(lossy.real("/d"), lossy.real("/e"))
    lossy.renamed("/d", "/e")  # a partition directory renamed (e.g. for deletion)
    _write(lossy, "/gone", b"y", new=True)
    os.unlink(lossy.real("/gone"))
    lossy.removed("/gone")
    assert lossy.lose()["files"] == {"/e/x.tmp": [0, 10]}


def test_truncation_is_kept_and_sync_all_makes_everything_durable(tmp_path):
    lossy = Lossy(str(tmp_path))
    _write(lossy, "/a", b"a" * 40, new=True)
    lossy.fsynced("/a")
    _write(lossy, "/a", b"b" * 10)
    os.truncate(lossy.real("/a"), 20)
    lossy.truncated("/a", 20)  # below the synced 40: only 20 can come back
    assert lossy.lose()["files"] == {}
    _write(lossy, "/b", b"b" * 10, new=True)
    lossy.sync_all()
    assert lossy.lose()["lost_bytes"] == 0 and os.path.getsize(lossy.real("/b")) == 10


def test_a_full_disk_refuses_only_writes_that_grow_a_file_and_a_slow_one_waits(tmp_path):
    """``full``: a write past a file's end fails with ENOSPC, one inside it goes through (the
    blocks it has stay writable: Kafka's mmapped indexes); ``slow <ms>`` delays each write."""
    import errno
    import time

    lossy = Lossy(str(tmp_path))
    lossy.write_allowed(100, lambda: 10)  # not full: anything goes
    lossy.disk("full")
    assert lossy.disk_state() == {"full": True, "slow_ms": 0, "refused": 0, "delayed": 0}
    lossy.write_allowed(10, lambda: 10)
    with pytest.raises(OSError) as refused:
        lossy.write_allowed(11, lambda: 10)
    assert refused.value.errno == errno.ENOSPC
    lossy.disk("free")
    lossy.disk("slow 30")
    started = time.monotonic()
    lossy.write_allowed(11, lambda: 10)
    lossy.wait()  # an fsync
    assert time.monotonic() - started >= 0.06 and lossy.disk_state()["slow_ms"] == 30
    lossy.disk("fast")
    lossy.wait()  # a fast disk does not count
    # what each fault did stays readable after it ends, until the same fault is set again
    assert lossy.disk_state() == {"full": False, "slow_ms": 0, "refused": 1, "delayed": 2}
    lossy.disk("full")
    assert lossy.disk_state()["refused"] == 0 and lossy.disk_state()["delayed"] == 2
    for bad in ("slow", "slow x", "fast 3", "explode"):
        with pytest.raises(ValueError, match="unknown disk command"):
            lossy.disk(bad)
