"""The wheel (what ``pipx install .`` installs): one top-level import name, ``kafka_chaos``,
with the design's folders as its subpackages and their data files, and a working command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_installs_only_kafka_chaos_and_works_from_it(tmp_path):
    # a copy of the sources: setuptools builds in the source tree (build/)
    source = shutil.copytree(ROOT, tmp_path / "src", ignore=shutil.ignore_patterns(
        ".git", ".venv", "runs", "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                            "--disable-pip-version-check", "-w", str(tmp_path / "dist"),
                            str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (tmp_path / "dist").glob("kafka_chaos-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"kafka_chaos", wheel.name.split("-py3")[0]
                                               + ".dist-info"}
    for package in ("clusters", "workloads", "nemesis", "history", "history/simulate",
                    "analysis", "analysis/checkers"):
        assert f"kafka_chaos/{package}/__init__.py" in names, package
    for data in ("kafka_chaos/templates/report.html.j2", "kafka_chaos/templates/compare.html.j2",
                 "kafka_chaos/analysis/conf/log4j2.properties",
                 "kafka_chaos/nemesis/scenarios/isr-shrink-unclean.yaml",
                 "kafka_chaos/workloads/java/kafkachaos/Worker.java"):
        assert data in names, data

    target = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                                "--disable-pip-version-check", "--target", str(target),
                                str(wheel)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr
    # from the installed copy only: not the checkout (cwd elsewhere, installed first on the path)
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = subprocess.run(
        [sys.executable, "-c", "import importlib.util as u, kafka_chaos.clusters.dist as d, "
         "kafka_chaos.nemesis.script as s; print(d.__file__); print(sorted(s.names())); "
         "print(u.find_spec('clusters'), u.find_spec('history'), u.find_spec('analysis'))"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    where, scenarios, generic = probe.stdout.splitlines()
    assert where.startswith(str(target / "kafka_chaos" / "clusters"))
    assert "isr-shrink-unclean" in scenarios and generic == "None None None"
    cli = subprocess.run([str(target / "bin" / "kafka-chaos"), "plan", "check",
                          str(ROOT / "plans" / "acks-comparison.yaml")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0 and '"repeats": 2' in cli.stdout, cli.stdout + cli.stderr
