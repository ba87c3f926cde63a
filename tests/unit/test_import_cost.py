"""What importing the command line loads (issue 50): every command imports it, so it must not
pull in the analysis's Spark, the Kafka protocol types of kio, or what kio brings along
(hypothesis, pytest); each costs a second or more before ``--help`` prints a line."""

from __future__ import annotations

import json
import subprocess
import sys

#: Modules whose import is heavy, and which only some commands need once they run.
HEAVY = ("pyspark", "kio.static.primitive", "hypothesis", "pytest", "networkx")


def loaded_by(statement: str, watched: tuple[str, ...] = HEAVY) -> list[str]:
    """The modules of ``watched`` (default ``HEAVY``) that a fresh interpreter has loaded
    after ``statement``."""
    code = (f"import json, sys\n{statement}\n"
            f"print(json.dumps([m for m in {list(watched)!r} if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def test_the_command_line_loads_no_spark_and_no_protocol_types() -> None:
    assert loaded_by("import kafka_chaos.cli") == []


def test_the_promises_load_without_spark_until_check_is_used() -> None:
    assert loaded_by("from kafka_chaos.analysis import promises") == []
    assert "pyspark" in loaded_by("from kafka_chaos.analysis import check")


def test_the_wire_protocol_types_load_when_first_spoken() -> None:
    statement = "from kafka_chaos.clusters import wire, share_state"
    assert loaded_by(statement) == []
    assert "kio.static.primitive" in loaded_by(f"{statement}\nwire.kio_types()")
