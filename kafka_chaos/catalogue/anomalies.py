"""The anomaly catalogue: every anomaly's name in report order, its family and the property
it breaks (a JUnit test case each). Names follow Jepsen's Kafka checker and Elle. Imports
nothing: the settings model checks a plan's ``allow``/``forbid`` lists against it, and the
checkers (``analysis/``) name what they find by it."""

from __future__ import annotations

import dataclasses

#: Elle's cycle anomalies (``analysis.elle.ANOMALY_SPECS`` holds their definitions).
CYCLE_ANOMALIES = ["G0", "G1c", "G0-process", "G1c-process", "G0-realtime", "G1c-realtime"]
#: A record in the log that no send wrote, to that key (Elle's "garbage read"; Jepsen's Kafka
#: checker throws ``:no-writer-of-value`` on such a history instead of reporting it).
GARBAGE_READ = "garbage-read"
#: A record a consumer met at an offset and could not read: bytes that are no value the
#: workload writes, or a batch its CRC check refused (the workload's ``corrupt`` events).
CORRUPT_READ = "corrupt-read"
#: A group delivering again a record below the offset it had committed before the delivery.
GROUP_REWIND = "group-rewind"
#: A record consumed by two committed read-process-write transactions of one group.
EOS_DUPLICATE = "eos-duplicate"
#: A partition owned by two members of one group at once, by their own rebalance callbacks.
GROUP_OVERLAP = "group-overlap"
#: Liveness: a partition's last stable offset stuck below its high watermark longer than the
#: transaction timeout allows (``analysis.liveness``); a consumer reading on past what an
#: aborted transaction consumed instead of rewinding (``analysis.checkers.rewind``).
HANGING_TXN = "hanging-transaction"
NO_REWIND = "no-rewind-after-abort"
#: The KRaft metadata quorum, from the monitor's samples (``analysis.quorum``): two quorum
#: leaders in one epoch; a leader's high watermark below an earlier one of its epoch or an
#: older; a deposed leader still answering as leader past the check-quorum bound; a broker's
#: metadata log not caught up after the final heal; a broker's own view of a partition's
#: leader epoch going back.
QUORUM_SPLIT_BRAIN = "quorum-split-brain"
QUORUM_HW_REGRESS = "quorum-hw-regress"
QUORUM_EPOCH_REGRESS = "quorum-epoch-regress"
METADATA_LAG = "metadata-lag"
LEADER_EPOCH_REGRESS = "leader-epoch-regress"
METADATA = [QUORUM_SPLIT_BRAIN, QUORUM_HW_REGRESS, QUORUM_EPOCH_REGRESS, METADATA_LAG,
            LEADER_EPOCH_REGRESS]
#: Share groups (KIP-932, ``analysis.checkers.share``): an acknowledged record never
#: accepted, rejected or archived; accepted twice; delivered after it was settled; a delivery
#: count not above an earlier one; above the limit; two holders of one lock; and the
#: redeliveries KIP-932 permits, counted.
SHARE_LOST = "share-lost"
SHARE_ACCEPTED_TWICE = "share-accepted-twice"
SHARE_AFTER_ACK = "share-after-ack"
SHARE_COUNT_REGRESS = "share-count-regress"
SHARE_OVER_LIMIT = "share-over-limit"
SHARE_LOCK_OVERLAP = "share-lock-overlap"
SHARE_REDELIVERY = "share-redelivery"
#: Records a share group's drain could not settle the fate of: not an anomaly, a reason for
#: an unknown verdict (as ``lost.UNJUDGED``).
SHARE_UNJUDGED = "share-not-judged"
SHARE = [SHARE_LOST, SHARE_ACCEPTED_TWICE, SHARE_AFTER_ACK, SHARE_COUNT_REGRESS,
         SHARE_OVER_LIMIT, SHARE_LOCK_OVERLAP, SHARE_REDELIVERY]


@dataclasses.dataclass(frozen=True)
class Anomaly:
    """One anomaly a checker may find.

    Attributes:
        name: its name in results (Jepsen's Kafka checker's error types, Elle's).
        breaks: the property it breaks (``PROPERTIES``): its JUnit test case and its section
            of the reports.
        consumer: it is of a consumer group's delivery (or a share group's), not of the log.
        needs: the client ops (``f``) of which the history must hold one that completed
            ``ok`` each, for its checker to have anything to check (the checker's own
            gate: no transaction, no consumer group or no share group, nothing to scan);
            empty: every run has something. Without them it is *not applicable*
            (``NEEDED`` says why), which the reports show and JUnit skips, never "passed".
            A checker may also say so itself, for what no client op decides (the
            ``metadata`` checks of a history whose monitor recorded no quorum state): its
            result's ``not_applicable`` (``kafka_chaos.verdict.RunVerdict.not_applicable``).
    """

    name: str
    breaks: str
    consumer: bool = False
    needs: tuple[str, ...] = ()


#: Why an anomaly that needs a client op (``Anomaly.needs``) had nothing to check without it.
NEEDED = {"txn": "no transaction ran (--txn)",
          "subscribe": "no consumer group ran (--sub-via subscribe)",
          "share": "no share group ran (--sub-via share)"}
TXN, GROUP, SHARES = ("txn",), ("subscribe",), ("share",)


#: Every anomaly, in report order (the consumer-side ones last). Adding one: a record here,
#: its checker (``analysis/checkers``), its sentence (``analysis/explain.py``), the rules
#: that may permit it (``analysis/promises.py``): ``tests/unit/test_catalogues.py`` walks it.
CATALOGUE: tuple[Anomaly, ...] = (
    Anomaly("lost-write", "lost writes"), Anomaly("unseen", "lost writes"),
    Anomaly("duplicate", "duplicates"),
    Anomaly("inconsistent-offsets", "log integrity"), Anomaly(GARBAGE_READ, "log integrity"),
    Anomaly(CORRUPT_READ, "log integrity"),
    *(Anomaly(n, "ordering") for n in (
        "nonmonotonic-send", "int-nonmonotonic-send", "int-send-skip", "poll-skip",
        "nonmonotonic-poll", "int-poll-skip", "int-nonmonotonic-poll")),
    # a failed send read back is G1a with or without transactions (Jepsen's g1a-cases)
    Anomaly("G1a", "transactions"), Anomaly("precommitted-read", "transactions", needs=TXN),
    *(Anomaly(n, "cycles") for n in CYCLE_ANOMALIES),
    *(Anomaly(n, "metadata") for n in METADATA),
    Anomaly(HANGING_TXN, "liveness", needs=TXN),
    *(Anomaly(n, "consumer delivery", consumer=True, needs=GROUP) for n in (
        "group-skip", "group-redelivery", GROUP_REWIND)),
    Anomaly(EOS_DUPLICATE, "consumer delivery", consumer=True, needs=TXN + GROUP),
    Anomaly(GROUP_OVERLAP, "consumer delivery", consumer=True, needs=GROUP),
    Anomaly(NO_REWIND, "liveness", consumer=True, needs=TXN),
    *(Anomaly(n, "share delivery", consumer=True, needs=SHARES) for n in SHARE),
)
#: Anomaly names in report order.
ANOMALIES = [a.name for a in CATALOGUE]
#: Anomalies of a consumer group's delivery, not of the log.
CONSUMER_SIDE = tuple(a.name for a in CATALOGUE if a.consumer)
#: The properties a run checks, in report order, each with the anomalies that break it
#: (every name of ``ANOMALIES`` once): one JUnit test case each (``kafka_chaos.report.junit``).
PROPERTIES = {prop: [a.name for a in CATALOGUE if a.breaks == prop] for prop in (
    "lost writes", "duplicates", "log integrity", "ordering", "transactions", "cycles",
    "consumer delivery", "share delivery", "metadata", "liveness")}
