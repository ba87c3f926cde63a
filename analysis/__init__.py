"""Offline analysis of a kafka-chaos history with Spark: Jepsen's Kafka anomaly checkers, Elle
cycles, and the verdict judged against what the run's configuration promises.

Entry point: ``check(path)`` (``verdict``). Layout: ``load`` (DataFrames of both history
formats), ``checkers`` (one module per family of anomalies), ``elle`` (bounded cycle
search, networkx), ``promises`` (configuration -> permitted anomalies), ``stats``,
``spark`` (the session), ``masters`` (Spark master URLs, without pyspark), ``warm`` (a
warm-up check while a short run goes).

The package's face loads nothing: ``check`` and the other names below come from
``verdict`` when first used (PEP 562), so importing ``kafka_chaos.analysis.promises`` (rules
over the configuration) loads no pyspark (issue 50; docs/performance.md, "Start-up").
"""

from kafka_chaos.lazy import face

__all__ = ["check", "AnalysisError", "HistoryError", "ANOMALIES", "CHECKERS", "History", "load",
           "session"]
__getattr__ = face(__name__, "verdict", __all__)
