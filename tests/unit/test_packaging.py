"""The wheel is what users get (``pipx install .``, ``pip install kafka-chaos``): built from a
copy of the sources, installed into a fresh virtualenv that has no path to the checkout, and
used from there. One top-level import name, ``kafka_chaos``, with the design's folders and every
package below them as its subpackages, their data files, and a working command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"kafka_chaos": "kafka_chaos", "clusters": "kafka_chaos/clusters",
           "workloads": "kafka_chaos/workloads", "nemesis": "kafka_chaos/nemesis",
           "history": "kafka_chaos/history", "analysis": "kafka_chaos/analysis"}

# Run by the fresh virtualenv's Python: imports every module of the installed package, says
# where each came from, and shows the --help of every command, in one process (each command
# as its own process would pay the CLI's import time once per command).
PROBE = r"""
import importlib, json, pkgutil, sys
import kafka_chaos, typer
from typer.testing import CliRunner
from kafka_chaos.cli import app

files = {}
for m in pkgutil.walk_packages(kafka_chaos.__path__, "kafka_chaos."):
    if not m.name.endswith("__main__"):
        files[m.name] = importlib.import_module(m.name).__file__

def commands(group, path):
    yield path
    for name, sub in getattr(group, "commands", {}).items():
        yield from commands(sub, path + [name])

helps = {}
for path in commands(typer.main.get_command(app), []):
    got = CliRunner().invoke(app, path + ["--help"])
    helps[" ".join(path)] = [got.exit_code, got.output[:2000]]
print(json.dumps({"files": files, "helps": helps, "path": sys.path,
                  "finders": [type(f).__name__ for f in sys.meta_path]}))
"""


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_wheel_installed_in_a_fresh_virtualenv_is_complete_and_works(tmp_path):
    # a copy of the sources: setuptools builds in the source tree (build/)
    source = shutil.copytree(ROOT, tmp_path / "src", ignore=shutil.ignore_patterns(
        ".git", ".venv", "runs", "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    # with the setuptools of requirements.lock, not one fetched from the index: a CI run's
    # isolated build spent 216 s fetching it
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                  "--no-build-isolation", "--disable-pip-version-check", "-w",
                  str(tmp_path / "dist"), str(source)], tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (tmp_path / "dist").glob("kafka_chaos-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {n.split("/")[0] for n in names} == {"kafka_chaos", wheel.name.split("-py3")[0]
                                               + ".dist-info"}
    # every package of the sources, however deep, is in the wheel
    packages = [(init.parent.relative_to(ROOT / folder), installed)
                for folder, installed in FOLDERS.items()
                for init in (ROOT / folder).rglob("__init__.py")]
    assert len(packages) >= 12
    for rel, installed in packages:
        assert f"{installed}/{rel.as_posix()}/__init__.py".replace("/./", "/") in names, rel
    for data in ("kafka_chaos/templates/report.html.j2", "kafka_chaos/templates/compare.html.j2",
                 "kafka_chaos/analysis/conf/log4j2.properties",
                 "kafka_chaos/nemesis/scenarios/isr-shrink-unclean.yaml",
                 "kafka_chaos/workloads/java/kafkachaos/Worker.java"):
        assert data in names, data

    # a fresh virtualenv; the dependencies come from this one's site-packages as a plain path
    # entry, so its editable install of the checkout (a .pth hook) does not run there
    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                      "['purelib'])"], tmp_path).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                      "--no-deps", "--disable-pip-version-check", str(wheel)], tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    cli = str(venv / "bin" / "kafka-chaos")

    version = _run([cli, "--version"], tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("kafka-chaos "), version
    top = _run([cli, "--help"], tmp_path)
    assert top.returncode == 0 and "run" in top.stdout and "analyze" in top.stdout, top
    probe = _run([str(python), "-c", PROBE], tmp_path)
    assert probe.returncode == 0, probe.stderr[-3000:]
    seen = json.loads(probe.stdout)
    assert not [p for p in seen["path"] if p and Path(p).resolve() == ROOT], seen["path"]
    assert not [f for f in seen["finders"] if "editable" in f.lower()], seen["finders"]
    assert len(seen["files"]) > 100, sorted(seen["files"])
    outside = {m: f for m, f in seen["files"].items() if not f.startswith(str(site))}
    assert not outside, outside
    for module in ("kafka_chaos.nemesis.proxy", "kafka_chaos.nemesis.script",
                   "kafka_chaos.analysis.checkers.share", "kafka_chaos.history.simulate"):
        assert module in seen["files"], module
    assert {"run", "analyze", "cluster up", "plan check", "spark-server start"} \
        <= seen["helps"].keys(), sorted(seen["helps"])
    for command, (code, text) in seen["helps"].items():
        assert code == 0 and "Usage:" in text, (command, code, text)
    checked = _run([cli, "plan", "check", str(ROOT / "plans" / "acks-comparison.yaml")],
                   tmp_path)
    # offline: the installed scenarios and matrix read, nothing of the machine checked
    assert checked.returncode == 0 and "4 × 2 repeat(s)" in checked.stdout \
        and checked.stdout.splitlines()[-1].startswith("ok: "), checked.stdout + checked.stderr
