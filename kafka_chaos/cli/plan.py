"""``kafka-chaos plan``: the JSON schema of plan files, and checking one without running it."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from pydantic import ValidationError

from kafka_chaos import plan as plan_file
from kafka_chaos.cli.app import plan_app
from kafka_chaos.cli.common import fail
from kafka_chaos.config import RunConfig


@plan_app.command("schema")
def plan_schema() -> None:
    """Print the JSON schema of plan files (for editors and CI linters)."""
    print(json.dumps(plan_file.schema(), indent=2))


@plan_app.command("check")
def plan_check(path: Path = typer.Argument(..., help="A plan file.")) -> None:
    """Validate a plan and print the run configuration it gives, and the cells and repeats of
    its matrix (exit 2 naming the line and key path of the first problem)."""
    from kafka_chaos.compare import matrix

    try:
        plan = plan_file.load(path)
        fields = plan_file.run_fields(plan, path)
        fail_on = fields.pop("fail_on", "violation")
        cfg = RunConfig(**fields)
    except ValidationError as exc:
        fail(f"--plan {path}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}")
    except ValueError as exc:
        fail(str(exc))
    shown = {**cfg.model_dump(mode="json"), "fail_on": fail_on}
    if plan.compares:  # what `compare --plan` would run
        cells = matrix.cells(plan_file.dimensions(plan, path))
        shown["compare"] = {"cells": [c.label for c in cells], "repeats": plan.repeats or 1}
    print(json.dumps(shown, indent=2))
