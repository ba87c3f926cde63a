"""``kafka-chaos shrink RUN``: replay a run's fault schedule with faults removed and its
intervals shortened until no fault can go without losing the finding
(``kafka_chaos.shrink`` chooses the candidates, ``kafka_chaos.compare.core`` runs and
stores them; a shrink directory is a comparison directory whose cells are the candidates,
added as the search asks for them).
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import typer
import yaml
from rich.table import Table

from kafka_chaos import __version__, bisect, shrink, verdict
from kafka_chaos.cli.app import app
from kafka_chaos.cli.common import console, fail, sigterm_as_interrupt
from kafka_chaos.cli.compare import _analyzer, _executor
from kafka_chaos.clusters.errors import ClusterError
from kafka_chaos.compare import core as compare
from kafka_chaos.config import RunConfig
from kafka_chaos.errors import ClientError
from kafka_chaos.orchestrate import check_inputs, check_offline

SHRINK_HELP = (
    "Writes into OUT/shrink-<stamp>/: compare.json (the manifest, with the shrink's entry), "
    "candidates/<id>.yaml and a run directory per candidate and seed, shrink.json, "
    "shrink.md and shrunk.yaml: the smallest schedule as a scenario, with the run's "
    "settings (kafka-chaos run --scenario shrunk.yaml replays it).\n\n"
    "Exit codes: 0 shrunk (or nothing to remove); 2 the whole schedule did not reproduce "
    "the finding, or interrupted (--resume DIR goes on); 254 bad input; 255 the tool failed.")
#: Options a shrunk scenario does not set: how and where a cluster is reached, the faults
#: (its steps are them), the length (its last step), and what makes no other configuration.
_NOT_SETTINGS = {"backend", "image", "inventory", "accept_unknown_host_keys",
                 "bootstrap_servers", "compose_project", "containers", "kafka_home",
                 "nemesis", "nemesis_targets", "nemesis_interval_s", "scenario",
                 "scenario_settings", "time_limit_s", "spark_master", "max_unavailable",
                 "max_recovery_s", "live", "live_interval_s"}


@app.command("shrink", epilog=SHRINK_HELP)
def shrink_cmd(
    run_dir: Optional[Path] = typer.Argument(None, help="A run directory whose verdict "
                                             "shows the outcome."),
    outcome: str = typer.Option(
        "violation", help="What a replay must show: violation, unknown or valid (its "
        "verdict), anomaly:NAME (found, permitted or not) or violation:NAME (found and "
        "forbidden)."),
    runs: int = typer.Option(3, min=1, help="Replays per candidate at most (seeds: the "
                             "run's, then the next ones)."),
    need: Optional[int] = typer.Option(None, help="How many of --runs replays must show "
                                       "the outcome (default: a majority, 2 of 3)."),
    resume: Optional[Path] = typer.Option(None, help="Go on with the shrink in this "
                                          "directory; takes no other option."),
    out: Path = typer.Option(Path("runs"), help="Directory the shrink directory is made in."),
) -> None:
    """Shrink a run's fault schedule by delta debugging: each candidate replayed until
    --need of --runs replays show the outcome (or cannot), until no single fault can be
    removed; then the gaps between faults and the faults themselves shortened."""
    if resume is not None:
        if run_dir is not None:
            fail("--resume DIR takes no run directory: the shrink's manifest holds it")
        try:
            comparison = compare.load(resume)
            comparison.manifest["shrink"]["units"]  # noqa: B018
        except (compare.CompareError, KeyError, TypeError) as exc:
            fail(f"--resume {resume}: not a shrink directory ({exc})")
    elif run_dir is None:
        fail("give the run directory to shrink (or --resume DIR)")
    else:
        comparison = _create(run_dir, outcome, runs, need, out)
    spec = comparison.manifest["shrink"]
    console.print(f"shrink directory: {comparison.dir}: {len(spec['units'])} fault(s) of "
                  f"{spec['source']}; a candidate reproduces when {spec['need']} of "
                  f"{spec['runs']} replays show {spec['outcome']}")
    sigterm_as_interrupt()
    try:
        answer = _search(comparison, spec)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: the running replay was healed and torn down; "
                      f"finish with: kafka-chaos shrink --resume {comparison.dir}")
        raise typer.Exit(verdict.EXIT_UNKNOWN)
    _write(comparison, spec, answer)
    raise typer.Exit(verdict.EXIT_VALID if answer["reproduced"] else verdict.EXIT_UNKNOWN)


def _create(run_dir: Path, outcome: str, runs: int, need: int | None, out: Path
            ) -> compare.Comparison:
    """A new shrink directory for ``run_dir``; every input checked first (exit 254)."""
    try:
        wanted = bisect.Outcome.parse(outcome)
        config = json.loads((run_dir / "config.json").read_text())
        results = json.loads((run_dir / "results.json").read_text())
        base = RunConfig(**config)
    except FileNotFoundError as exc:
        fail(f"{run_dir}: not a finished run directory (no {Path(exc.filename).name})")
    except ValueError as exc:
        fail(str(exc))
    if not wanted.shown(results):
        fail(f"{run_dir}: its verdict ({results.get('verdict')}) does not show {wanted}: "
             "nothing to shrink")
    try:
        want = shrink.need_of(runs, need)
        if base.scenario is not None:
            steps = json.loads((run_dir / "scenario.json").read_text())["steps"]
            units, end_s, kind = shrink.units_of_script(_lean(steps)), 0.0, "scenario"
        else:
            from kafka_chaos.history import read_history

            units, end_s = shrink.units_of_history(
                read_history(run_dir / "history.jsonl"), base.brokers,
                "request-fault" if base.proxy_fault else None)
            kind = "schedule"
    except (OSError, ValueError, KeyError) as exc:  # ShrinkError, HistoryError among them
        fail(f"{run_dir}: {exc}")
    if not units:
        fail(f"{run_dir}: its run had no fault to remove")
    replay = {**base.model_dump(mode="json"), "nemesis": [], "nemesis_targets": "",
              "scenario": None}
    try:
        check_inputs(RunConfig(**replay))  # check_offline's checks first
    except (ValueError, ClusterError, ClientError) as exc:
        fail(str(exc))
    spec = {"source": str(run_dir.resolve()), "outcome": str(wanted), "runs": runs,
            "need": want, "kind": kind, "end_s": end_s, "replay": replay,
            "name": f"shrunk-{base.scenario and Path(base.scenario).stem or 'run'}",
            "units": [dataclasses.asdict(u) for u in units]}
    manifest = {"kafka_chaos": __version__,
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "plan": None, "matrix": [], "repeats": runs,
                "seeds": [base.seed + r for r in range(runs)],
                "fail_on": results.get("fail_on") or "violation",
                "spark_master": base.spark_master, "cells": [], "done": {},
                "running": None, "shrink": spec}
    return compare.create(out, manifest, prefix="shrink")


def _lean(steps: list[dict]) -> list[dict]:
    """Scenario steps as ``scenario.json`` dumped them, without the fields at defaults."""
    from kafka_chaos.nemesis.script import Step

    return [Step(**s).model_dump(mode="json", exclude_defaults=True) for s in steps]


def _units(spec: dict) -> list[shrink.Unit]:
    return [shrink.Unit(u["label"], tuple(u["steps"])) for u in spec["units"]]


def _cell(comparison: compare.Comparison, spec: dict, kept: tuple[int, ...], timing: str
          ) -> dict[str, Any]:
    """The candidate's cell, added (with its scenario file) the first time it is asked."""
    key = f"{timing}:{','.join(map(str, kept))}"
    for cell in comparison.cells:
        if cell.get("key") == key:
            return cell
    n = len(comparison.cells) + 1
    cell_id = f"{n}_{len(kept)}-of-{len(spec['units'])}_{timing}"
    steps = shrink.timed(_units(spec), kept, timing, spec["end_s"])
    path = comparison.dir / "candidates" / f"{cell_id}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(shrink.script(
        f"{spec['name']}-{n}", f"candidate {n} of a shrink of {spec['source']}", {}, steps),
        sort_keys=False))
    cell = {"id": cell_id, "label": f"{len(kept)} of {len(spec['units'])} faults, {timing}",
            "settings": {"faults": len(kept), "timing": timing}, "key": key,
            "kept": list(kept), "timing": timing}
    try:
        cfg = RunConfig(**{**spec["replay"], "scenario": str(path)})
        check_offline(cfg)
        cell["config"] = cfg.model_dump(mode="json")
    except (ValueError, ClusterError) as exc:  # a kept step naming a mark of a dropped one
        cell["skipped"] = str(exc)
    comparison.cells.append(cell)
    comparison.save()
    return cell


def _tally(comparison: compare.Comparison, spec: dict, cell: dict) -> tuple[int, int]:
    """``(shown, ran)``: the candidate's replays that showed the outcome, and all it ran."""
    wanted = bisect.Outcome.parse(spec["outcome"])
    done = [s for s in comparison.seeds if comparison.run_id(cell, s) in
            comparison.manifest["done"]]
    shown = sum(1 for s in done
                if wanted.shown(compare.results_of(comparison.run_dir(cell, s)) or {}))
    return shown, len(done)


def _search(comparison: compare.Comparison, spec: dict) -> dict[str, Any]:
    """Delta debugging over the units, then the shorter timings; each candidate's answer
    comes from its stored replays, run as far as they are needed to decide it."""
    execute, analyze = _executor(comparison), _analyzer(comparison)

    def reproduces(kept: tuple[int, ...], timing: str = "as-run") -> bool:
        cell = _cell(comparison, spec, kept, timing)
        if "skipped" in cell:
            console.print(f"  {cell['label']}: not replayable: {cell['skipped']}")
            return False

        def answer() -> bool | None:
            return shrink.decide(*_tally(comparison, spec, cell), spec["runs"], spec["need"])

        if answer() is None:
            console.print(f"[bold]candidate {cell['id']}[/]: "
                          + "; ".join(_units(spec)[i].label for i in kept))
            compare.run_pending(comparison, execute, analyze, console.print,
                                only=cell["id"], enough=lambda: answer() is not None)
        shown, ran = _tally(comparison, spec, cell)
        decided = bool(answer())
        console.print(f"  {cell['label']}: {shown} of {ran} replay(s) showed "
                      f"{spec['outcome']}: {'reproduces' if decided else 'does not'}")
        return decided

    everything = tuple(range(len(spec["units"])))
    if not reproduces(everything):
        return {"reproduced": False, "kept": everything, "timing": "as-run"}
    kept = shrink.ddmin(len(everything), reproduces)
    timing = "as-run"
    for shorter in shrink.TIMINGS[1:]:
        if spec["kind"] != "schedule" or not reproduces(kept, shorter):
            break
        timing = shorter
    return {"reproduced": True, "kept": kept, "timing": timing}


def _write(comparison: compare.Comparison, spec: dict, answer: dict[str, Any]) -> None:
    """The candidates' table, ``shrink.json``, ``shrink.md`` and ``shrunk.yaml``."""
    units = _units(spec)
    rows = []
    for cell in comparison.cells:
        shown, ran = _tally(comparison, spec, cell)
        rows.append({"candidate": cell["id"], "faults": len(cell["kept"]),
                     "timing": cell["timing"], "shown": shown, "ran": ran,
                     "reproduces": shrink.decide(shown, ran, spec["runs"], spec["need"]),
                     "skipped": cell.get("skipped")})
    kept, timing = tuple(answer["kept"]), answer["timing"]
    final = _cell(comparison, spec, kept, timing)
    shown, ran = _tally(comparison, spec, final)
    defaults = RunConfig().model_dump(mode="json")
    settings = {k: v for k, v in spec["replay"].items()
                if k not in _NOT_SETTINGS and v != defaults.get(k)}
    about = (f"{len(kept)} of the {len(units)} faults of {spec['source']}, timing {timing}: "
             f"{shown} of {ran} replays showed {spec['outcome']}")
    steps = shrink.timed(units, kept, timing, spec["end_s"])
    shrunk = comparison.dir / "shrunk.yaml"
    shrunk.write_text(yaml.safe_dump(shrink.script(spec["name"], about, settings, steps),
                                     sort_keys=False))
    if answer["reproduced"]:
        summary = (f"{len(kept)} of {len(units)} fault(s) still show {spec['outcome']} "
                   f"({shown} of {ran} replays, timing {timing}): {shrink.describe(steps)}")
    else:
        summary = (f"the whole schedule, replayed, did not show {spec['outcome']} in "
                   f"{spec['need']} of {spec['runs']} runs ({shown} of {ran}): nothing was "
                   "shrunk (a finding rarer than that needs more --runs or a lower --need)")
    table = Table(title=f"shrink of {Path(spec['source']).name}: {spec['outcome']}")
    for column in ("candidate", "faults", "timing", "shown", "ran", "reproduces"):
        table.add_column(column)
    for row in rows:
        table.add_row(*_show(row))
    console.print(table)
    console.print(f"[bold]{summary}[/]")
    result = {**{k: spec[k] for k in ("source", "outcome", "runs", "need", "kind")},
              "units": [u.label for u in units], "reproduced": answer["reproduced"],
              "kept": [units[i].label for i in kept], "timing": timing,
              "rate": {"shown": shown, "ran": ran}, "scenario": str(shrunk),
              "candidates": rows, "summary": summary}
    (comparison.dir / "shrink.json").write_text(json.dumps(result, indent=2))
    lines = [f"## kafka-chaos shrink {comparison.dir.name}: {spec['outcome']}", "",
             f"Source: `{spec['source']}`", "",
             "| candidate | faults | timing | shown | ran | reproduces |",
             "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(_show(row)) + " |" for row in rows]
    (comparison.dir / "shrink.md").write_text(
        "\n".join(lines + ["", summary, "", f"Replay: `kafka-chaos run --scenario {shrunk}`",
                           ""]))
    console.print(f"written: {shrunk}, {comparison.dir / 'shrink.json'}, "
                  f"{comparison.dir / 'shrink.md'}; replay: kafka-chaos run --scenario "
                  f"{shrunk}")


def _show(row: dict[str, Any]) -> list[str]:
    word = {True: "yes", False: "no", None: "undecided"}[row["reproduces"]]
    if row["skipped"]:
        word = "not replayable"
    return [row["candidate"], str(row["faults"]), row["timing"], str(row["shown"]),
            str(row["ran"]), word]
