"""``kafka-chaos plan``: the JSON schema of plan files, and checking one without running it.

``plan check`` is offline unless ``--online``: it reads the plan and the files it names and
builds the run configuration(s) as ``run`` and ``compare`` would, in well under a second,
with no network, no root and no download (``orchestrate.check_offline``). ``--online`` adds
what needs the machine or the network: the cluster a plan attaches to is contacted, then
``orchestrate.check_inputs`` (root, Docker, the Kafka jars fetched, Java).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import typer
from rich.console import Console
from rich.text import Text

from kafka_chaos import options as run_options
from kafka_chaos import orchestrate
from kafka_chaos import plan as plan_file
from kafka_chaos import verdict
from kafka_chaos.admission import admit
from kafka_chaos.cli.app import plan_app
from kafka_chaos.cli.common import fail
from kafka_chaos.cli.run import run_params
from kafka_chaos.config import ATTACHED, RunConfig
from kafka_chaos.errors import KafkaChaosError

#: Seconds each bootstrap server of an attached cluster has to answer under ``--online``.
CONTACT_TIMEOUT_S = 5.0

CHECK_HELP = ("Prints what the plan would run: its settings as the run flags a user would type, "
              "its scenario and what that sets, the nemesis faults, a comparison's cells and "
              "repeats; then one line 'ok: PLAN — WHAT IT WOULD RUN'.\n\n"
              "Exit codes: 0 the plan is good; 254 bad input (the first problem, with its line "
              "and key path; with --online also an unreachable cluster, not root, a Kafka "
              "version Maven Central lacks); 255 the tool failed.")


@plan_app.command("schema")
def plan_schema() -> None:
    """Print the JSON schema of plan files (for editors and CI linters)."""
    print(json.dumps(plan_file.schema(), indent=2))


@plan_app.command("check", epilog=CHECK_HELP)
def plan_check(
    path: Path = typer.Argument(..., help="A plan file."),
    online: bool = typer.Option(
        False, "--online", metavar="", help="Also check what needs this machine or the "
        "network, as run does before it starts: contact the cluster the plan attaches to, "
        "root and the backend's tools, the Kafka version (jars downloaded if missing), Java, "
        "the Spark master."),
    as_json: bool = typer.Option(
        False, "--json", metavar="", help="Print the run configuration (and a comparison's "
        "cells) as JSON on stdout instead of the summary; what the scenario sets goes to "
        "stderr."),
) -> None:
    """Check a plan file without running it: parse and validate it, resolve its settings as
    run (or compare, for a matrix) would, and check the files it names (an inventory, client
    properties, --kafka-home) and the Spark master's syntax. Offline and fast unless
    --online."""
    from kafka_chaos.compare import core as compare

    params, given = run_params(["--plan", str(path)], "kafka-chaos plan check")
    told: list[str] = []  # what the scenario sets: part of the summary, or stderr beside JSON
    announce = Console(stderr=True, soft_wrap=True).print if as_json else told.append
    manifest = None
    try:
        plan = plan_file.load(path)
        cfg, fail_on = run_options.configure(params, given, announce=announce)
        if plan.compares:  # what `compare --plan` would run: nothing is written
            manifest = compare.prepare(params, given, plan_file.dimensions(plan, path),
                                       plan.repeats or 1)
    except ValueError as exc:
        fail(str(exc) if str(exc).startswith("--plan") else f"--plan {path}: {exc}")
    configs = [cfg] + [RunConfig(**c["config"]) for c in (manifest or {}).get("cells", [])
                       if "config" in c]
    admitted = _checked(path, configs, orchestrate.check_offline)[0]
    if as_json:
        if online:  # its lines beside the JSON, as what the scenario sets
            _checked(path, configs, lambda c: _online(c, lambda line: print(line, file=sys.stderr)))
        shown: dict[str, Any] = {**cfg.model_dump(mode="json"), "fail_on": fail_on}
        if manifest is not None:
            shown["compare"] = {"cells": [c["label"] for c in manifest["cells"]
                                          if "config" in c],
                                "repeats": manifest["repeats"]}
            skipped = {c["label"]: c["skipped"] for c in manifest["cells"] if "skipped" in c}
            if skipped:
                shown["compare"]["skipped"] = skipped
        print(json.dumps(shown, indent=2))
        return
    _summary(path, plan, cfg, fail_on, admitted.faults, told, manifest)
    if online:
        _checked(path, configs, lambda c: _online(c, print))
    print(f"ok: {path} — {_what(cfg, configs, manifest)}")


def _checked(path: Path, configs: list[RunConfig], check: Callable[[RunConfig], Any]) -> list:
    """``check`` of each distinct configuration (``orchestrate.distinct``); returns what it
    returned for each. Exits 254 or 255 with the first problem (``fail``)."""
    try:
        return [check(cfg) for cfg in orchestrate.distinct(configs)]
    except (ValueError, KafkaChaosError) as exc:
        fail(f"--plan {path}: {exc}", getattr(exc, "exit_code", verdict.EXIT_BAD_INPUT))


def _online(cfg: RunConfig, show: Callable[[str], Any]) -> None:
    """``--online`` for one configuration: the cluster a run of ``cfg`` attaches to answers
    (first: a wrong address is told before any download), then ``check_inputs``; ``show``
    gets one line of each. Raises as ``backends.reach`` and ``check_inputs`` do."""
    from kafka_chaos.clusters import backends

    brokers = backends.reach(cfg.backend, admit(cfg).backend, CONTACT_TIMEOUT_S)
    if brokers is not None:
        show(f"  cluster   {cfg.bootstrap_servers} answers: {len(brokers)} broker(s), "
             + ", ".join(brokers))
    kafka = orchestrate.check_inputs(cfg)
    show(f"  machine   backend {cfg.backend} can run here; Kafka {kafka.version} jars in "
         f"{kafka.libs}; Java ready; Spark master {cfg.spark_master} ready")


def _summary(path: Path, plan: plan_file.Plan, cfg: RunConfig, fail_on: str,
             faults: frozenset[str], told: list[str], manifest: dict | None) -> None:
    """What the plan would run, a few lines on stdout: the flags of its settings (and the
    plan-only ones), what its scenario sets, its nemesis, a comparison's cells."""
    command = "compare" if manifest is not None else "run"
    print(f"plan {path}: kafka-chaos {command} --plan {path}")
    flags = run_options.run_args(cfg.model_dump(mode="json"))
    if fail_on != "violation":
        flags += ["--fail-on", fail_on]
    print("  settings  " + " ".join(flags))
    planned = plan_file.run_fields(plan, path)
    only = [run_options.shown(k, v) for k, v in planned.items() if k in run_options.NO_FLAG]
    if only:
        print("  plan only " + "; ".join(only))
    for line in told:
        print("  " + Text.from_markup(line).plain)
    if cfg.scenario is not None:
        what = f"scenario {Path(cfg.scenario).stem}"
    elif cfg.nemesis:
        what = (f"{'+'.join(cfg.nemesis)} every {cfg.nemesis_interval_s:g} s"
                + (f", targets {cfg.nemesis_targets}" if cfg.nemesis_targets else ""))
    else:
        what = "none"
    print(f"  nemesis   {what}" + (f"; faults: {', '.join(sorted(faults))}" if faults else ""))
    if manifest is None:
        return
    ready = [c for c in manifest["cells"] if "config" in c]
    print(f"  cells     {len(ready)} × {manifest['repeats']} repeat(s), seeds "
          f"{', '.join(map(str, manifest['seeds']))}:")
    for cell in manifest["cells"]:
        print(f"    {cell['label']}" + (f"  (skipped: {cell['skipped']})"
                                       if "skipped" in cell else ""))


def _what(cfg: RunConfig, configs: list[RunConfig], manifest: dict | None) -> str:
    """One line of what the plan would run: the command, how many runs of how long, on
    which cluster, under which faults, with which seed(s)."""

    def each(field: str) -> str:  # a comparison's cells may vary it
        values = (getattr(c, field) for c in configs[1:] or configs)
        return "/".join(dict.fromkeys(f"{v:g}" if isinstance(v, float) else str(v)
                                      for v in values))

    if cfg.backend in ATTACHED:
        where = f"the {cfg.backend} cluster at {cfg.bootstrap_servers}"
    else:
        kafka = f"from {cfg.kafka_home}" if cfg.kafka_home else each("kafka_version")
        where = f"{each('brokers')} {cfg.backend} brokers (Kafka {kafka})"
    if cfg.scenario is not None:
        faults = f"scenario {Path(cfg.scenario).stem}"
    else:
        faults = (f"{'+'.join(cfg.nemesis)} faults every {cfg.nemesis_interval_s:g} s"
                  if cfg.nemesis else "no faults")
    if manifest is None:
        return (f"kafka-chaos run: {cfg.time_limit_s:g} s on {where}, {faults}, "
                f"seed {cfg.seed}")
    ready = sum("config" in c for c in manifest["cells"])
    seeds = manifest["seeds"]
    return (f"kafka-chaos compare: {ready} cells × {manifest['repeats']} repeat(s) = "
            f"{ready * manifest['repeats']} runs of {each('time_limit_s')} s on {where}, "
            f"{faults}, seeds {seeds[0]}" + (f"-{seeds[-1]}" if len(seeds) > 1 else ""))
