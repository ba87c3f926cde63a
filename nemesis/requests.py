"""Request faults through the Kafka protocol proxy (``nemesis.proxy``): ``request-fault``
starts one, ``request-heal`` ends them all.

``request-fault``'s value is ``{"request": {RequestFault's fields}}`` (a scenario step), or
the schedule's ``{"target": <kind>, ...}``: that kind with ``DEFAULTS``. It completes with
the fault as started (``id`` and every field). ``request-heal`` (and the final heal)
completes with ``{"ended": [report, ...]}``, each the proxy's ``Applied.report``: how many
requests the fault matched and applied to, per API, the partitions of the Produce requests it
applied to (``{"topic-p": [first ns, last ns, n]}``, the history clock) and the first
requests one by one, with the times the proxy received and forwarded them.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from kafka_chaos.catalogue.faults import REQUEST_KINDS
from kafka_chaos.nemesis.base import Nemesis, NemesisError
from kafka_chaos.nemesis.proxy import KafkaProxy, ProxyError
from kafka_chaos.nemesis.proxy.faults import RequestFault

#: The requests whose fate decides what a client's write became: produce, commit,
#: transaction control.
WRITES = ["Produce", "EndTxn", "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit",
          "OffsetCommit"]
#: What the schedule's ``request`` package does for each kind (``--nemesis request``): a
#: share of the writes (and of the fetches, for the kinds that only slow them) hit, so that
#: the workload goes on between the faulted requests.
DEFAULTS: dict[str, dict[str, Any]] = {
    "delay": {"apis": [*WRITES, "Fetch"], "probability": 0.5, "delay_ms": 1000,
              "jitter_ms": 1000},
    "hold": {"apis": WRITES, "probability": 0.2},
    "drop-request": {"apis": WRITES, "probability": 0.2},
    "drop-response": {"apis": WRITES, "probability": 0.2},
    "duplicate": {"apis": WRITES, "probability": 0.2},
    "reorder": {"apis": [*WRITES, "Fetch"], "probability": 0.2},
    # every request and reply of every broker link at 200 kB/s each way
    "bandwidth": {"apis": ["*"], "bytes_per_s": 200_000},
    # every committed offset stored without its leader epoch (KAFKA-20507)
    "forget-leader-epoch": {"apis": ["OffsetCommit", "TxnOffsetCommit"]},
}


class RequestNemesis(Nemesis):
    """Request faults in ``proxy`` (started by the run). Raises ``NemesisError`` for a
    value that names no valid fault, and when the proxy does not answer."""

    fs = frozenset({"request-fault", "request-heal"})
    name = "request"

    def __init__(self, cluster, rng, proxy: KafkaProxy) -> None:
        super().__init__(cluster, rng)
        self.proxy = proxy

    def invoke(self, f: str, value: Any) -> Any:
        try:
            if f == "request-heal":
                return {"ended": self.proxy.end_faults()}
            spec = self.spec(value)
            return {"id": self.proxy.add_fault(spec), **spec.model_dump(mode="json")}
        except ProxyError as exc:
            raise NemesisError(str(exc)) from exc

    @staticmethod
    def spec(value: Any) -> RequestFault:
        """The fault a ``request-fault`` value asks for (module docstring). Raises
        ``NemesisError`` naming the field."""
        value = value or {}
        if "request" in value:
            given = value["request"]
        elif value.get("target") in REQUEST_KINDS:
            given = {"fault": value["target"], **DEFAULTS[value["target"]]}
        else:
            raise NemesisError(f"request-fault: {value!r} names no fault; give "
                               f"{{'request': {{'fault': ...}}}} or a target of "
                               f"{', '.join(REQUEST_KINDS)}")
        try:
            return RequestFault.model_validate(given)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "request"
            raise NemesisError(f"request-fault: {where}: {err['msg']}") from None

    def teardown(self) -> Any:
        return {"ended": self.proxy.end_faults()}
