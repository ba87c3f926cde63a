"""Anomaly names in report order, importable without Spark or networkx (plan files and the CLI
check ``allow``/``forbid`` lists against them). Names follow Jepsen's Kafka checker and Elle."""

from __future__ import annotations

#: Elle's cycle anomalies (``analysis.elle.ANOMALY_SPECS`` holds their definitions).
CYCLE_ANOMALIES = ["G0", "G1c", "G0-process", "G1c-process", "G0-realtime", "G1c-realtime"]
#: Anomaly names in report order; the consumer-side ones last.
ANOMALIES = ["lost-write", "unseen", "duplicate", "inconsistent-offsets", "nonmonotonic-send",
             "int-nonmonotonic-send", "int-send-skip", "poll-skip", "nonmonotonic-poll",
             "int-poll-skip", "int-nonmonotonic-poll", "G1a", "precommitted-read",
             *CYCLE_ANOMALIES, "group-skip", "group-redelivery"]
#: Anomalies of a consumer group's delivery, not of the log.
CONSUMER_SIDE = ("group-skip", "group-redelivery")
