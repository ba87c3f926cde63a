"""``kafka-chaos``: run chaos tests, compare configurations, re-analyse histories, follow
verdicts across runs, manage clusters of every backend.

Commands only: each parses its options, calls the orchestration (``kafka_chaos.orchestrate``,
``kafka_chaos.check``, ``kafka_chaos.compare``) and turns errors into exit codes
(``kafka_chaos.verdict``). Nothing outside this package imports it.
"""

# each registers its commands on app; this order is the order of --help
from kafka_chaos.cli import run, tools, plan, compare, bisect, shrink, bugs  # noqa: F401,I001
from kafka_chaos.cli.app import app

__all__ = ["app"]
