"""The standalone reproductions of ``docs/findings/`` still show what their reports say, run
as the reports ran them (the longer tier: a cluster of their own, about a minute each).

librdkafka #5158 (``docs/findings/librdkafka-5158.md``): the confluent-kafka release this
environment installs resumes a group from a committed offset whose leader epoch predates an
unclean election without validating it, so records written at the truncated offsets after
the election are never delivered (exit 1). A release that validates would exit 0 and fail
this test: the report is then out of date."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import confluent_kafka
import pytest

from tests.integration.conftest import leftovers

pytestmark = [pytest.mark.kafka, pytest.mark.long]
FINDING = Path(__file__).parents[2] / "docs" / "findings" / "librdkafka-5158"


def test_librdkafka_skips_records_below_an_unvalidated_committed_offset(tmp_path) -> None:
    version = confluent_kafka.__version__
    done = subprocess.run([sys.executable, str(FINDING / "on_this_machine.py"), version,
                           "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"confluent-kafka {version}: exit 1: NOT DELIVERED" in done.stdout, done.stdout
    out = (tmp_path / f"repro-{version}.txt").read_text()
    # the log was truncated below the commit, and the refill took the truncated offsets
    assert "committed offset 150 with leader epoch 0" in out, out
    assert "refill written at offsets 50..199" in out, out
    assert "NOT DELIVERED: offsets 50..149 (100 records" in out, out
    # librdkafka's own log of the resume: the validation the new leader epoch asked for was
    # skipped (no fetch yet), and the committed offset fetched as is
    log = (tmp_path / f"librdkafka-{version}.log").read_text()
    assert "skipping offset validation in fetch state none" in log, log[-3000:]
    assert "start fetching at offset 150 (leader epoch 0)" in log, log[-3000:]
    assert leftovers() == []
