"""The import structure the design fixes: no import cycle among the project's modules, nothing
outside the CLI imports it, and no import between ``analysis/`` and ``clusters/``.

Read from the source with ``ast`` (imports inside functions included: a lazy import is a
dependency all the same); nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Folder -> package name, as ``pyproject.toml``'s ``package-dir`` installs them.
PACKAGES = {"kafka_chaos": "kafka_chaos", "clusters": "kafka_chaos.clusters",
            "workloads": "kafka_chaos.workloads", "nemesis": "kafka_chaos.nemesis",
            "history": "kafka_chaos.history", "analysis": "kafka_chaos.analysis"}


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package, *parts])] = path
    return out


def _target(name: str, modules: dict[str, Path]) -> str | None:
    """The deepest module of ``modules`` that ``name`` (a dotted import) is or lies in."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> nx.DiGraph:
    """module -> every project module it imports."""
    modules = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                # ``from pkg import mod`` imports the module pkg.mod when there is one
                names = [f"{base}.{a.name}" for a in node.names] or [base]
            for name in names:
                if name.startswith("kafka_chaos"):
                    target = _target(name, modules)
                    if target is not None and target != module:
                        graph.add_edge(module, target)
    return graph


def test_the_modules_import_each_other_without_a_cycle() -> None:
    graph = import_graph()
    assert graph.number_of_nodes() > 90 and graph.number_of_edges() > 200
    cycles = list(nx.simple_cycles(graph))
    assert cycles == [], "\n".join(" -> ".join(c + c[:1]) for c in cycles[:10])


def test_nothing_outside_the_cli_imports_it() -> None:
    """``python -m kafka_chaos`` (``__main__``) is the CLI's one door besides the script."""
    graph = import_graph()
    cli = {m for m in graph if m == "kafka_chaos.cli" or m.startswith("kafka_chaos.cli.")}
    cli.add("kafka_chaos.__main__")
    assert len(cli) >= 5
    outside = sorted((a, b) for a, b in graph.edges if b in cli and a not in cli)
    assert outside == []


def test_analysis_and_clusters_do_not_import_each_other() -> None:
    graph = import_graph()

    def inside(m: str, package: str) -> bool:
        return m == package or m.startswith(package + ".")

    crossing = sorted((a, b) for a, b in graph.edges
                      if {inside(a, "kafka_chaos.analysis"), inside(b, "kafka_chaos.clusters")}
                      == {True} or {inside(a, "kafka_chaos.clusters"),
                                    inside(b, "kafka_chaos.analysis")} == {True})
    assert crossing == []


def test_every_run_setting_has_one_flag_whose_default_is_the_configurations() -> None:
    """``run``'s options, as click parses them, are ``RunConfig``'s fields (less
    ``options.NO_FLAG``) under their table flags, and its own few; and a run given no flag
    gets the field's every default (``options.command_of`` relies on it: the rerun command
    leaves defaults out)."""
    import typer

    from kafka_chaos.cli import app
    from kafka_chaos.cli.run import run_params
    from kafka_chaos.config import SETTINGS, RunConfig
    from kafka_chaos.options import NO_FLAG, fields_of

    command = typer.main.get_command(app).get_command(None, "run")
    flags = {p.name: p.opts[0] for p in command.params}
    own = {"plan", "fail_on", "out", "publish"}
    assert set(flags) - own == set(RunConfig.model_fields) - NO_FLAG
    assert all(flags[f] == SETTINGS[f].flag for f in set(flags) - own)
    assert NO_FLAG == {"allow", "forbid", "broker_properties", "scenario_settings"}
    params, given = run_params([], "kafka-chaos run")
    assert given == set()
    assert RunConfig(**fields_of(params)).model_dump() == RunConfig().model_dump()


def test_a_plan_the_matrix_and_the_command_line_name_the_same_settings() -> None:
    """Every setting with a flag has a plan key, and every name of it (field, flag, Kafka
    property, label) is a matrix key for it unless a comparison may not vary it; no two
    settings share a name."""
    from kafka_chaos import plan
    from kafka_chaos import matrix
    from kafka_chaos.config import SETTINGS
    from kafka_chaos.settings import SECTIONS

    planned = {f for section in SECTIONS[:-1] for f in plan.keys_of(section).values()}
    assert {f for f, s in SETTINGS.items() if s.flag} - planned == {"seed"}
    assert "seed" in plan.Plan.model_fields
    names = [n for s in SETTINGS.values() for n in s.names()]
    assert len(names) == len(set(names))
    for field, s in SETTINGS.items():
        for name in s.names():
            if s.fixed:
                with pytest.raises(ValueError, match="cannot vary"):
                    matrix.field_of(name)
            else:
                assert matrix.field_of(name) == field


def test_every_error_of_the_project_is_in_one_tree() -> None:
    """Each exception class a module of the project defines descends from
    ``kafka_chaos.errors.KafkaChaosError`` (private control-flow ones, ``_Name``, aside), so
    a caller catches one root and exits with the error's own code: 254 for bad input, 255
    for a failure (``verdict``)."""
    import importlib

    from kafka_chaos.errors import BadInput, KafkaChaosError

    found = {}
    for module, path in _modules().items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and any(
                    isinstance(b, ast.Name) and b.id.endswith(("Error", "Exception"))
                    or isinstance(b, ast.Name) and b.id in ("BadInput", "KafkaChaosError")
                    for b in node.bases):
                found[f"{module}.{node.name}"] = getattr(importlib.import_module(module),
                                                         node.name)
    assert len(found) >= 15, sorted(found)
    outside = sorted(name for name, cls in found.items() if not issubclass(cls, KafkaChaosError))
    assert outside == []
    bad_input = {name.rpartition(".")[2] for name, cls in found.items()
                 if issubclass(cls, BadInput)}
    assert bad_input >= {"HistoryError", "YamlFileError", "CompareError", "ReportError",
                         "DistributionError", "EnvironmentUnsupported", "ServerBusy"}
    assert {c.exit_code for c in found.values()} == {254, 255}
