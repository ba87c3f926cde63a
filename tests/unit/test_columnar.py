"""The columnar copy (``history.columnar``): the recorder's copy equals a conversion of the same
file, a copy that no longer matches its file is made again, and a bad line is named."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from kafka_chaos.history import HistoryError, columnar
from tests.queue_builder import Q


def history(tmp_path: Path, name: str = "history.jsonl") -> Path:
    q = (Q().subscribe(0, [0, 1])
         .send(1, [(0, 10), (1, 11)], type="info", acked=[True, False])
         .poll(0, {0: [(0, 10)]}, events=[["assigned", [0, 1]]])
         .txn(2, [("poll", {1: [(0, 11)]}), ("send", 0, 12)], offsets=[1],
              events=[["committed", {"1": 1}]])
         .send(3, [(1, 13)], type="pending")
         .final(4, 0, [(0, 10), (1, 12)], eof=True))
    return q.write(tmp_path / name)


def tables(copy: columnar.Copy) -> dict[str, list[dict]]:
    return {name: list(columnar.iter_table_rows(copy, name)) for name in columnar.TABLES}


def test_the_recorders_copy_equals_a_conversion_of_its_file(tmp_path: Path) -> None:
    path = history(tmp_path)
    live = columnar.current(path)
    assert live is not None and live.meta["source"] == "recorder"
    converted = columnar.convert(path, tmp_path / "converted")
    again = columnar.Copy(tmp_path / "converted", converted)
    assert tables(live) == tables(again)
    assert {k: v for k, v in live.meta.items() if k != "source"} == \
        {k: v for k, v in converted.items() if k != "source"}
    assert live.meta["ops"] == 11 and live.meta["records"] == 4
    assert live.meta["op_counts"]["send"] == {"info": 1, "pending": 1}
    assert live.meta["rows"]["sends"] == 4 and live.meta["rows"]["ranges"] == 1


def test_a_copy_that_no_longer_matches_its_file_is_made_again(tmp_path: Path) -> None:
    path = history(tmp_path)
    first = columnar.ensure(path)
    assert first.meta["source"] == "recorder"
    with open(path, "ab") as fh:  # an op appended after the run: the copy is stale
        fh.write(b'{"index":11,"time":999999,"process":"nemesis","type":"invoke",'
                 b'"f":"kill","value":null,"error":null}\n')
    assert columnar.current(path) is None
    made = columnar.ensure(path)
    assert made.meta["source"] == "converted" and made.meta["ops"] == 12
    assert columnar.current(path) == made
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_copy_without_meta_is_incomplete_and_replaced(tmp_path: Path) -> None:
    path = history(tmp_path)
    (columnar.copy_dir(path) / "meta.json").unlink()  # a run killed before the copy closed
    assert columnar.current(path) is None
    assert columnar.ensure(path).meta["ops"] == 11


def test_a_bad_line_is_named_and_the_old_copy_kept(tmp_path: Path) -> None:
    path = history(tmp_path)
    before = (columnar.copy_dir(path) / "meta.json").read_bytes()
    lines = path.read_bytes().splitlines(keepends=True)
    op = orjson.loads(lines[4])
    op["value"] = "not a list"
    lines[4] = orjson.dumps(op) + b"\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(HistoryError, match="line 5"):
        columnar.ensure(path)
    # nothing half-written replaced the earlier copy; it is stale, so never used for this file
    assert (columnar.copy_dir(path) / "meta.json").read_bytes() == before
    assert columnar.current(path) is None
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_torn_last_line_is_left_out(tmp_path: Path) -> None:
    src = history(tmp_path)
    torn = tmp_path / "torn.jsonl"
    shutil.copy(src, torn)
    with open(torn, "ab") as fh:
        fh.write(b'{"index":11,"time":99,"process":0,"type":"inv')
    copy = columnar.ensure(torn)
    assert copy.meta["ops"] == 11
    assert tables(copy) == tables(columnar.current(src))


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only bind mount needs root")
def test_a_history_in_a_read_only_folder_gets_its_copy_in_the_cache(tmp_path: Path,
                                                                      monkeypatch) -> None:
    src = tmp_path / "run"
    src.mkdir()
    path = history(src)
    (columnar.copy_dir(path) / "meta.json").unlink()  # a run killed before the copy closed
    ro = tmp_path / "ro"
    ro.mkdir()
    monkeypatch.setenv(columnar.CACHE_ENV, str(tmp_path / "cache"))
    subprocess.run(["mount", "--bind", str(src), str(ro)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        with pytest.raises(OSError):  # as root too: the mount refuses writes
            (ro / "probe").write_text("")
        made = columnar.ensure(ro / "history.jsonl")
        assert made.dir == columnar.cache_dir(ro / "history.jsonl")
        assert made.dir.is_relative_to(tmp_path / "cache") and made.meta["ops"] == 11
        assert columnar.current(ro / "history.jsonl") == made  # found there next time
        assert not (columnar.copy_dir(path) / "meta.json").exists()  # nothing written beside
        assert tables(made) == tables(columnar.Copy(tmp_path / "c", columnar.convert(
            path, tmp_path / "c")))
    finally:
        subprocess.run(["umount", str(ro)], check=True)
