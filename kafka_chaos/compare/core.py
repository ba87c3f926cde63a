"""``kafka-chaos compare``: one configuration per cell of a matrix, each run ``repeats`` times
with the same seeds in every cell, so every cell faces the same fault schedule (the nemesis
schedule is a pure function of the seed, ``nemesis.schedule.plan``).

A comparison directory ``<out>/compare-<UTC stamp>/`` holds:

- ``compare.json``: the manifest, written before the first run and after each one: the
  cells with their whole configurations, the seeds, ``fail_on``, the Spark master, and
  ``done`` (run id -> exit code and error) for every run that ended;
- ``<cell id>/seed-<seed>/``: one ordinary run directory per cell and repeat (``results.json``,
  ``junit.xml``, ``report.html``, ...);
- ``compare.csv``, ``runs.csv``, ``compare.html`` and ``junit.xml`` (``compare.report``).

Cells run one after another on this machine. Ctrl-C heals and tears down the running cell
(``runner.run``) and keeps every finished run; ``compare --resume DIR`` runs the rest from the
manifest alone (a run cut short is set aside as ``seed-<seed>.interrupted-<n>``, never
overwritten; a run that finished but was not analysed is analysed, not run again).
"""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from kafka_chaos import __version__, options
from kafka_chaos import verdict
from kafka_chaos import matrix
from kafka_chaos.config import RunConfig
from kafka_chaos.errors import CompareError

MANIFEST = "compare.json"


@dataclasses.dataclass
class Comparison:
    """A comparison directory and its manifest (``compare.json``'s content)."""

    dir: Path
    manifest: dict[str, Any]

    @property
    def seeds(self) -> list[int]:
        """The seed of each repeat, the same in every cell."""
        return self.manifest["seeds"]

    @property
    def cells(self) -> list[dict[str, Any]]:
        """``{"id", "label", "settings", "config" | "skipped"}`` per cell, in matrix order."""
        return self.manifest["cells"]

    def run_id(self, cell: dict[str, Any], seed: int) -> str:
        """``<cell id>/seed-<seed>``: the run's key in ``done`` and its directory."""
        return f"{cell['id']}/seed-{seed}"

    def run_dir(self, cell: dict[str, Any], seed: int) -> Path:
        """The run directory of ``cell`` with ``seed``."""
        return self.dir / self.run_id(cell, seed)

    def pending(self) -> list[tuple[dict[str, Any], int]]:
        """``(cell, seed)`` of every run still to do, in order."""
        return [(cell, seed) for cell in self.cells if "config" in cell for seed in self.seeds
                if self.run_id(cell, seed) not in self.manifest["done"]]

    def save(self) -> None:
        """Write the manifest atomically."""
        tmp = self.dir / f".{MANIFEST}.tmp"
        tmp.write_text(json.dumps(self.manifest, indent=2, default=str))
        tmp.replace(self.dir / MANIFEST)


def prepare(params: dict[str, Any], given: set[str], dims: list[matrix.Dimension],
            repeats: int) -> dict[str, Any]:
    """Validate every cell; returns the manifest of a new comparison (nothing is written).

    Args:
        params, given: the ``run`` options and those given on the command line
            (``options.configure``; a ``--plan`` among them).
        dims: the matrix; the cells are every combination (``matrix.cells``).
        repeats: runs per cell; repeat ``r`` has seed ``--seed + r`` in every cell.

    A cell whose combination is invalid (``--acks 1`` with ``--idempotence``) is kept as
    ``skipped`` with the reason. Raises ``CompareError`` when no cell is valid, or when a
    matrix value is invalid in every cell that has it (a bad value, not a bad combination).
    """
    cells = []
    fail_on = None
    for cell in matrix.cells(dims):
        entry: dict[str, Any] = {"id": cell.id, "label": cell.label,
                                 "settings": {k: matrix.show(v)
                                              for k, v in cell.settings.items()}}
        try:
            cfg, fail_on = options.configure(params, given, cell.settings)
            entry["config"] = cfg.model_dump(mode="json")
        except ValueError as exc:
            entry["skipped"] = str(exc)
        cells.append(entry)
    valid = [c for c in cells if "config" in c]
    if not valid:
        raise CompareError(f"no cell can run: {cells[0]['label']}: {cells[0]['skipped']}")
    for dim in dims:
        for value in dim.values:
            shown = matrix.show(value)
            having = [c for c in cells if c["settings"][dim.field] == shown]
            if all("skipped" in c for c in having):
                raise CompareError(f"--matrix {dim.label}={shown} is refused in every cell: "
                                   f"{having[0]['skipped']}")
    seed = valid[0]["config"]["seed"]
    plan = params.get("plan")
    manifest = {
        "kafka_chaos": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "plan": str(Path(plan).resolve()) if plan else None,
        "matrix": [{"setting": d.field, "label": d.label,
                    "values": [matrix.show(v) for v in d.values]} for d in dims],
        "repeats": repeats, "seeds": [seed + r for r in range(repeats)],
        "fail_on": fail_on, "spark_master": valid[0]["config"]["spark_master"],
        "cells": cells, "done": {}, "running": None,
    }
    return manifest


def create(out: Path, manifest: dict[str, Any], prefix: str = "compare") -> Comparison:
    """Make ``out/<prefix>-<UTC stamp>/`` and write ``manifest`` (``prepare``) into it."""
    comparison = Comparison(_new_dir(Path(out), prefix), manifest)
    comparison.save()
    return comparison


def load(path: Path) -> Comparison:
    """The comparison in directory ``path`` (``--resume``). Raises ``CompareError`` naming the
    file when it holds no readable manifest."""
    file = Path(path) / MANIFEST
    try:
        manifest = json.loads(file.read_text())
        for key in ("cells", "seeds", "done", "fail_on", "spark_master"):
            manifest[key]  # noqa: B018  (KeyError below names it)
    except FileNotFoundError:
        raise CompareError(f"--resume {path}: no {MANIFEST} here (not a comparison "
                           "directory)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CompareError(f"{file}: not a comparison manifest ({type(exc).__name__}: "
                           f"{exc})") from None
    return Comparison(Path(path), manifest)


def _new_dir(out: Path, prefix: str) -> Path:
    """``out/<prefix>-<UTC stamp>`` (``-2``, ``-3`` ... when taken)."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    path, n = out / f"{prefix}-{stamp}", 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = out / f"{prefix}-{stamp}-{n}"


#: ``execute(cfg, run_dir, command) -> facts`` runs one cell (``runner.run``, with whatever
#: display the caller wants); ``analyze(run_dir, facts) -> check.Verdict`` judges it.
Execute = Callable[[RunConfig, Path, str], dict]
Analyze = Callable[[Path, "dict | None"], Any]


def run_pending(comparison: Comparison, execute: Execute, analyze: Analyze,
                announce: Callable[[str], None], only: str | None = None,
                enough: Callable[[], bool] = lambda: False) -> None:
    """Run every pending run of ``comparison`` (of the cell whose id is ``only``, when
    given) in order, recording each in the manifest as it ends, until ``enough()`` says the
    runs so far decide what the caller asks (``kafka-chaos shrink``: a candidate that
    reproduced, or can no longer). A run that fails (a cluster
    that does not start, a crash) is recorded with exit 255 and its error, and the next one
    starts. ``KeyboardInterrupt`` propagates once the running cell is healed and torn down;
    the manifest's ``running`` then names the run it cut short."""
    from kafka_chaos.clusters.errors import ClusterError

    manifest = comparison.manifest
    todo = [(c, s) for c, s in comparison.pending() if only is None or c["id"] == only]
    total = (len(comparison.seeds) * sum(1 for c in comparison.cells if "config" in c)
             if only is None else len(todo))
    for n, (cell, seed) in enumerate(todo, total - len(todo) + 1):
        if enough():
            return
        run_dir = comparison.run_dir(cell, seed)
        cfg = RunConfig(**{**cell["config"], "seed": seed})
        announce(f"[bold]run {n}/{total}[/]: {cell['label']}, seed {seed} -> {run_dir}")
        manifest["running"] = comparison.run_id(cell, seed)  # a crash or Ctrl-C leaves it set
        comparison.save()
        facts = _finished_facts(run_dir)
        try:
            if facts is None:
                _set_aside(run_dir)
                run_dir.mkdir(parents=True)
                facts = execute(cfg, run_dir, options.command_of(cfg.model_dump(mode="json"),
                                                                 manifest.get("plan")))
            else:
                announce("its run had ended; analysing it")
            decided = analyze(run_dir, facts)
            outcome = {"exit_code": decided.code, "error": decided.error}
        except ClusterError as exc:
            outcome = {"exit_code": verdict.EXIT_ERROR, "error": str(exc)}
        except Exception as exc:  # a crash of one cell is that cell's error, not the end
            outcome = {"exit_code": verdict.EXIT_ERROR,
                       "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        if outcome["error"]:
            announce(f"[yellow]{cell['label']}, seed {seed}: no verdict: {outcome['error']}[/]")
        manifest["done"][comparison.run_id(cell, seed)] = outcome
        manifest["running"] = None
        comparison.save()


def results_of(run_dir: Path) -> dict[str, Any] | None:
    """The ``results.json`` of the run in ``run_dir``, or None when it has none readable (a
    run that ended without a verdict)."""
    try:
        return json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        return None


def _finished_facts(run_dir: Path) -> dict | None:
    """The facts of a run in ``run_dir`` that ran to its final reads but has no verdict yet
    (interrupted during its analysis), else None."""
    try:
        facts = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return None
    done = isinstance(facts, dict) and "final_reads" in facts and not facts.get("interrupted")
    return facts if done and (run_dir / "history.jsonl").is_file() else None


def _set_aside(run_dir: Path) -> None:
    """Rename what an interrupted run left in ``run_dir`` to ``<name>.interrupted-<n>``."""
    if not run_dir.exists():
        return
    n = 1
    while (aside := run_dir.with_name(f"{run_dir.name}.interrupted-{n}")).exists():
        n += 1
    os.rename(run_dir, aside)


def exit_code(comparison: Comparison) -> int:
    """The comparison's exit code, ranked as Jepsen's ``checker/compose`` ranks validity
    (false > unknown > true): 1 if any run counted anomalies under ``fail_on``, else 255 if
    the tool failed in some run (``verdict.EXIT_ERROR``; 254, a cell's bad input, ranks
    with it), else 2 if any run is unknown or did not run (interrupted), else 0."""
    codes = [o["exit_code"] for o in comparison.manifest["done"].values()]
    if verdict.EXIT_ANOMALIES in codes:
        return verdict.EXIT_ANOMALIES
    if {verdict.EXIT_ERROR, verdict.EXIT_BAD_INPUT} & set(codes):
        return verdict.EXIT_ERROR
    if comparison.pending() or verdict.EXIT_UNKNOWN in codes:
        return verdict.EXIT_UNKNOWN
    return verdict.EXIT_VALID
