"""``kafka-chaos plan``: the JSON schema of plan files, and checking one without running it."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from kafka_chaos import options as run_options
from kafka_chaos import plan as plan_file
from kafka_chaos import verdict
from kafka_chaos.cli.app import plan_app
from kafka_chaos.cli.common import fail
from kafka_chaos.cli.run import run_params
from kafka_chaos.errors import KafkaChaosError
from kafka_chaos.orchestrate import check_inputs


@plan_app.command("schema")
def plan_schema() -> None:
    """Print the JSON schema of plan files (for editors and CI linters)."""
    print(json.dumps(plan_file.schema(), indent=2))


@plan_app.command("check")
def plan_check(path: Path = typer.Argument(..., help="A plan file.")) -> None:
    """Validate a plan and print the run configuration it gives, its scenario's settings
    applied as run applies them, and the cells and repeats of its matrix; then check what
    run checks before it starts (Kafka version, backend, inventory, Spark master). Exit 254
    naming the line and key path of the first problem."""
    from kafka_chaos import matrix

    params, given = run_params(["--plan", str(path)], "kafka-chaos plan check")
    try:
        plan = plan_file.load(path)
        # what the scenario sets goes to stderr: stdout is the JSON, for jq and the like
        cfg, fail_on = run_options.configure(params, given, announce=Console(stderr=True).print)
        cells = matrix.cells(plan_file.dimensions(plan, path)) if plan.compares else []
        configs = [cfg] + [run_options.configure(params, given, cell.settings)[0]
                           for cell in cells]
    except ValueError as exc:
        fail(f"--plan {path}: {exc}" if not str(exc).startswith("--plan") else str(exc))
    checked = set()
    for c in configs:  # once per backend and Kafka version, as compare does
        key = (c.backend, c.kafka_version, c.kafka_home, c.inventory, c.spark_master)
        if key not in checked:
            checked.add(key)
            try:
                check_inputs(c)
            except (ValueError, KafkaChaosError) as exc:
                fail(f"--plan {path}: {exc}", getattr(exc, "exit_code", verdict.EXIT_BAD_INPUT))
    shown = {**cfg.model_dump(mode="json"), "fail_on": fail_on}
    if plan.compares:  # what `compare --plan` would run
        shown["compare"] = {"cells": [c.label for c in cells], "repeats": plan.repeats or 1}
    print(json.dumps(shown, indent=2))
