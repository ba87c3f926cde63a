"""The known-bug matrix's pure parts (``kafka_chaos.known_bugs``) and its catalogue
(``catalogue.bugs``): every row is a run a user could type, its cells' record goes on from
where it stopped, and the table says only what the record holds."""

from __future__ import annotations

import json

import pytest

from kafka_chaos import known_bugs
from kafka_chaos.bisect import Outcome
from kafka_chaos.catalogue.bugs import KNOWN_BUGS
from kafka_chaos.errors import CompareError

pytestmark = pytest.mark.fast


def test_every_known_bug_is_a_run_a_user_could_type_with_an_outcome_to_look_for() -> None:
    """Each row's options parse as ``run``'s and configure a run with each client and with
    Kafka 3.9 (its scenario loads and is admitted), its broker properties are kept on top
    of the scenario's, and its outcome is one ``bisect`` reads."""
    from kafka_chaos.cli.run import run_params
    from kafka_chaos.options import configure

    assert {b.name for b in KNOWN_BUGS} >= {"delayed-end-txn", "acks1-leader-move",
                                            "truncated-commit", "late-produce",
                                            "lost-txn-marker"}
    assert len({b.name for b in KNOWN_BUGS}) == len(KNOWN_BUGS)
    for bug in KNOWN_BUGS:
        Outcome.parse(bug.outcome)
        assert bug.ticket and bug.summary and bug.status, bug.name
        params, given = run_params(list(bug.args), "test")
        for client in known_bugs.CLIENTS:
            cell = {"kafka_version": "3.9.1", "client": client}
            if bug.broker:
                cell["broker_properties"] = dict(bug.broker)
            cfg, _ = configure(params, given, cell)
            assert cfg.scenario is not None, bug.name
            for key, value in bug.broker:
                assert cfg.broker_properties[key] == value, (bug.name, key)
            if bug.name == "late-produce":  # the scenario's own properties stay
                assert cfg.broker_properties["producer.id.expiration.ms"] == "10000"


def test_the_default_columns_are_the_newest_patch_of_each_minor_line_from_3_9() -> None:
    served = ["2.8.2", "3.8.1", "3.9.0", "3.9.1", "3.9.2", "4.0.0", "4.0.2", "4.0.1",
              "4.1.0-rc1", "4.1.0", "4.4.0"]
    assert known_bugs.newest_patches(served) == ["3.9.2", "4.0.2", "4.1.0", "4.4.0"]
    assert known_bugs.newest_patches(served, since="4.1.0") == ["4.1.0", "4.4.0"]


def test_bugs_are_named_in_catalogue_order_and_an_unknown_one_is_refused() -> None:
    names = [b.name for b in known_bugs.bugs_named("lost-txn-marker,delayed-end-txn")]
    assert names == ["delayed-end-txn", "lost-txn-marker"]
    assert len(known_bugs.bugs_named(None)) == len(KNOWN_BUGS)
    with pytest.raises(ValueError, match="'nope' is no known bug; choose among"):
        known_bugs.bugs_named("delayed-end-txn,nope")


def test_the_record_goes_on_from_the_seeds_it_holds(tmp_path) -> None:
    """A record missing from disk is empty; each run added replaces one of its seed; the
    seeds still to run are those it lacks; a file that is no record is refused by name."""
    path = tmp_path / "docs" / "known-bugs.json"
    record = known_bugs.load(path)
    [cell] = known_bugs.cells(known_bugs.bugs_named("acks1-leader-move"), ["4.4.0"],
                              ["java"])
    assert cell.key == "acks1-leader-move/4.4.0/java"
    assert known_bugs.missing(record, cell, [1, 2, 3]) == [1, 2, 3]
    known_bugs.add(record, cell, {"seed": 2, "date": "2026-12-01", "verdict": "valid",
                                  "shown": True, "seconds": 100.0, "client": "java 4.4.0"})
    known_bugs.add(record, cell, {"seed": 2, "date": "2026-12-02", "verdict": "valid",
                                  "shown": False, "seconds": 90.0, "client": "java 4.4.0"})
    known_bugs.save(path, record)
    again = known_bugs.load(path)
    assert known_bugs.missing(again, cell, [1, 2, 3]) == [1, 3]
    assert [r["date"] for r in again["cells"][cell.key]] == ["2026-12-02"]
    path.write_text(json.dumps({"cells": []}))
    with pytest.raises(CompareError, match="known-bugs.json: not a known-bug record"):
        known_bugs.load(path)
    path.write_text("{")
    with pytest.raises(CompareError, match="known-bugs.json: not a known-bug record"):
        known_bugs.load(path)


def test_a_cells_rate_counts_only_the_runs_that_could_say() -> None:
    runs = [{"seed": 1, "date": "2026-12-01", "shown": True, "seconds": 60.0, "client": "a"},
            {"seed": 2, "date": "2026-12-03", "shown": None, "seconds": 30.0},
            {"seed": 3, "date": "2026-12-02", "shown": False, "seconds": 10.0, "client": "a"}]
    t = known_bugs.tally(runs)
    assert (t["runs"], t["judged"], t["shown"], t["rate"]) == (3, 2, 1, 0.5)
    assert t["dates"] == ["2026-12-01", "2026-12-03"] and t["clients"] == ["a"]
    assert t["verdicts"] == {"None": 3}
    assert t["seconds"] == 100.0
    assert known_bugs.tally([])["rate"] is None


def test_the_table_says_what_the_record_holds_and_what_remains() -> None:
    bugs = known_bugs.bugs_named("delayed-end-txn,lost-txn-marker")
    record = {"format": known_bugs.FORMAT, "cells": {}}
    shown, unshown, undecided = known_bugs.cells(bugs[:1], ["4.4.0"], ["librdkafka", "java"]) \
        + known_bugs.cells(bugs[1:], ["4.4.0"], ["java"])
    known_bugs.add(record, shown, {"seed": 1, "date": "2026-12-01", "verdict": "violation",
                                   "shown": True, "seconds": 120.0,
                                   "client": "librdkafka 2.16.0"})
    known_bugs.add(record, unshown, {"seed": 1, "date": "2026-12-01", "verdict": "valid",
                                     "shown": False, "seconds": 120.0, "client": "java 4.4.0",
                                     "verdict_as_run": "violation", "rejudged": "why"})
    known_bugs.add(record, undecided, {"seed": 1, "date": "2026-12-02", "verdict": "unknown",
                                       "shown": None, "seconds": 60.0})
    text = known_bugs.render(record, bugs, ["3.9.2", "4.4.0"], ["librdkafka", "java"], 2,
                             "kafka-chaos known-bugs --runs 2")
    assert "    kafka-chaos known-bugs --runs 2" in text
    assert "## `delayed-end-txn`: KAFKA-17754" in text
    assert ("| 4.4.0 | **shown** 1/1 (1 violation; 2026-12-01) | not shown 0/1 (1 valid †; "
            "2026-12-01) |") in text
    assert "| 3.9.2 | not run | not run |" in text
    assert "| 4.4.0 | not run | undecided: none of 1 judged (1 unknown; 2026-12-02) |" in text
    assert "Client releases run: java 4.4.0, librdkafka 2.16.0." in text
    assert "= 8 cells, 2 runs each: 16 runs." in text
    assert "The record holds 3 runs, 3 of those 16, which took 5 min" in text
    assert "the 13 runs left would take about 22 min more" in text


def test_the_command_refuses_bad_input_by_name_and_renders_the_record_alone(tmp_path) -> None:
    from typer.testing import CliRunner

    from kafka_chaos.cli import app

    record, md = tmp_path / "k.json", tmp_path / "out" / "k.md"
    base = ["known-bugs", "--kafka-versions", "4.4.0", "--record", str(record),
            "--markdown", str(md), "--render-only"]
    for extra, said in ((["--bugs", "nope"], "'nope' is no known bug"),
                        (["--clients", "go"], "--clients go: 'go': choose among"),
                        (["--kafka-versions", "4.4"], "'4.4' is no release version"),
                        (["--scenario", "late-produce"], "--scenario: each known bug's row")):
        got = CliRunner().invoke(app, [*base, *extra])
        assert got.exit_code == 254 and said in got.output, got.output
        assert not md.exists()
    record.write_text("[]")
    got = CliRunner().invoke(app, base)
    assert got.exit_code == 254 and "not a known-bug record" in got.output, got.output
    record.unlink()
    got = CliRunner().invoke(app, [*base, "--bugs", "late-produce", "--runs", "2"])
    assert got.exit_code == 2, got.output  # nothing run: every cell still lacks its runs
    text = md.read_text()
    assert "kafka-chaos known-bugs --bugs late-produce --kafka-versions 4.4.0 --runs 2" in text
    assert "| 4.4.0 | not run | not run |" in text and not record.exists()


def test_a_table_drawn_for_part_of_the_matrix_keeps_the_versions_the_record_holds(
        tmp_path) -> None:
    """``--kafka-versions 4.3.1`` rewrites docs/known-bugs.md: the columns the record holds
    stay in it (seen 2026-12-01: a run of two versions left a table of two)."""
    from typer.testing import CliRunner

    from kafka_chaos.cli import app

    record, md = tmp_path / "k.json", tmp_path / "k.md"
    kept = {"format": known_bugs.FORMAT, "cells": {}}
    [cell] = known_bugs.cells(known_bugs.bugs_named("late-produce"), ["3.9.2"], ["java"])
    known_bugs.add(kept, cell, {"seed": 1, "date": "2026-12-01", "verdict": "valid",
                                "shown": True, "seconds": 60.0, "client": "java 3.9.2"})
    known_bugs.save(record, kept)
    assert known_bugs.columns(kept, ["4.4.0", "4.3.1"]) == ["3.9.2", "4.3.1", "4.4.0"]
    got = CliRunner().invoke(app, ["known-bugs", "--kafka-versions", "4.3.1", "--bugs",
                                   "late-produce", "--runs", "1", "--record", str(record),
                                   "--markdown", str(md), "--render-only"])
    assert got.exit_code == 2, got.output  # 4.3.1 still lacks its runs
    text = md.read_text()
    assert "| 3.9.2 | not run | **shown** 1/1 (1 valid; 2026-12-01) |" in text, text
    assert "| 4.3.1 | not run | not run |" in text
    assert text.index("| 3.9.2 |") < text.index("| 4.3.1 |")
