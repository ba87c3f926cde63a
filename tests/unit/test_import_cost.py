"""What importing the command line loads (issue 50): every command imports it, so it must not
pull in the analysis's Spark, the Kafka protocol types of kio, or what kio brings along
(hypothesis, pytest); each costs a second or more before ``--help`` prints a line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Modules whose import is heavy, and which only some commands need once they run.
HEAVY = ("pyspark", "kio.static.primitive", "hypothesis", "pytest", "networkx")


def loaded_by(statement: str, watched: tuple[str, ...] = HEAVY) -> list[str]:
    """The modules of ``watched`` (default ``HEAVY``) that a fresh interpreter has loaded
    after ``statement``."""
    code = (f"import json, sys\n{statement}\n"
            f"print(json.dumps([m for m in {list(watched)!r} if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.splitlines()[-1])  # after what ``statement`` printed


def test_the_command_line_loads_no_spark_and_no_protocol_types() -> None:
    assert loaded_by("import kafka_chaos.cli") == []


def test_the_promises_load_without_spark_until_check_is_used() -> None:
    assert loaded_by("from kafka_chaos.analysis import promises") == []
    assert "pyspark" in loaded_by("from kafka_chaos.analysis import check")


def test_the_wire_protocol_types_load_when_first_spoken() -> None:
    statement = "from kafka_chaos.clusters import wire, share_state"
    assert loaded_by(statement) == []
    assert "kio.static.primitive" in loaded_by(f"{statement}\nwire.kio_types()")


def test_plan_check_offline_loads_no_client_library_spark_or_ssh() -> None:
    """``plan check`` without ``--online`` reads files only: the Kafka client library, the
    Docker SDK and paramiko load when a run (or ``--online``) reaches a cluster or a host."""
    plans = ["plans/acks-comparison.yaml", "plans/late-produce-unverified.yaml"]
    statement = ("from kafka_chaos.cli import app\n"
                 f"for p in {plans!r}:\n"
                 "    try:\n"
                 "        app(['plan', 'check', str(ROOT / p)])\n"
                 "    except SystemExit as exit:\n"
                 "        assert exit.code in (0, None), exit.code\n")
    code = f"from pathlib import Path\nROOT = Path({str(ROOT)!r})\n{statement}"
    assert loaded_by(code, HEAVY + ("confluent_kafka", "docker", "paramiko")) == []
