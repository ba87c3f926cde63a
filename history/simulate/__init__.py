"""Simulated histories: discrete-event simulations of a run, written through
``HistoryWriter`` in simulated time (ns since the start), so a million-op history spans the
hours a real one would without taking them to write.

Two shapes of run, one engine (``core.Simulation``: the event heap, the writer, each key's
log, the cluster's leaders, leader epochs and ISRs, monitor samples, final reads):

- ``vignettes.generate``: a run that keeps every promise, with a chosen number of seeded
  anomalies of each type planted among its ops (the analysis benchmarks' histories, and the
  tests that the checkers find exactly those);
- ``faults.generate``: a run directory shaped like a real run under kills, pauses and
  partitions, with lost writes and duplicates planted (the report's tests and benchmark).

Neither needs Kafka, Spark or root: ``bench/history_gen.py`` is the command line of the
first.
"""

from kafka_chaos.history.simulate.faults import generate as generate_run
from kafka_chaos.history.simulate.vignettes import VIGNETTES
from kafka_chaos.history.simulate.vignettes import generate as generate_vignettes

__all__ = ["VIGNETTES", "generate_run", "generate_vignettes"]
