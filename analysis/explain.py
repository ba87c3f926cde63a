"""Explanations as text: one sentence per anomaly example.

Checkers return examples as data (keys, values, offsets, op indexes, edge types); this module
only renders them, for the terminal and for reports (Elle keeps the same split between
``explain-pair-data`` and ``render-explanation``).
"""

from __future__ import annotations

from typing import Any, Callable


def _ops(ex: dict) -> str:
    ops = ex.get("op_indexes") or []
    return f" (ops {', '.join(map(str, ops))})" if ops else ""


def _lost(ex: dict) -> str:
    start, end = ex["covered_by"]
    where = f"offsets [{start}, {end}) were read" + (" to the end of the log"
                                                     if ex.get("final_end") is not None else "")
    seen = ", though a poll had returned it earlier" if ex.get("read_before") else ""
    return (f"key {ex['key']}: value {ex['value']} was acknowledged at offset {ex['offset']} "
            f"(op {ex['op']}) and is missing, although {where}{seen}")


def _unseen(ex: dict) -> str:
    at = "without an offset" if ex["offset"] is None else f"at offset {ex['offset']}"
    return (f"key {ex['key']}: value {ex['value']} was acknowledged {at} (op {ex['op']}) and "
            f"is missing; the log ends at offset {ex['final_end']}")


def _send_order(ex: dict) -> str:
    a, b = ex["values"]
    d = ex["delta"]
    how = ("at the same position" if d == 0 else f"{-d} position(s) before it" if d < 0
           else f"with {d - 1} other record(s) between them")
    return (f"process {ex['process']} sent {a} then {b} to key {ex['key']}; {b} landed {how}"
            f"{_ops(ex)}")


def _poll_order(ex: dict) -> str:
    a, b = ex["offsets"]
    how = (f"skipping {ex['skipped']} record(s)" if ex["delta"] > 1
           else "reading the same position again" if ex["delta"] == 0
           else f"going back {-ex['delta']} position(s)")
    return (f"process {ex['process']} read key {ex['key']} offset {a} then {b}, {how}"
            f"{_ops(ex)}")


def _g1a(ex: dict) -> str:
    reader = "the final read" if ex.get("reader_final") else f"op {ex['reader']}"
    return (f"{reader} read value {ex['value']} of key {ex['key']} (offset {ex['offset']}), "
            f"written by op {ex['writer']}, which {ex['writer_type']}ed")


_ENDED = {"revoked": "until it revoked it", "lost": "until it reported it lost",
          "gone": "until its process ended (a crash, or an op ending info)",
          "fenced": "until a commit of it failed as fenced",
          "still-owned": "without ever giving it up",
          "still-committing": "committing ok after the second was assigned it (still a "
                              "member of the group's generation, not fenced)"}

#: What a group-skip's commits above the record carried (``epochless``, KIP-320).
_EPOCH = {True: "; a commit above it was stored without its leader epoch",
          False: "; every commit above it carried its leader epoch"}

_RENDER: dict[str, Callable[[dict], str]] = {
    "lost-write": _lost,
    "unseen": _unseen,
    "duplicate": lambda ex: (f"key {ex['key']}: value {ex['value']} is at offsets "
                             f"{', '.join(map(str, ex['offsets']))}{_ops(ex)}"),
    "inconsistent-offsets": lambda ex: (f"key {ex['key']} offset {ex['offset']} holds values "
                                        f"{', '.join(map(str, ex['values']))}{_ops(ex)}"),
    "nonmonotonic-send": _send_order,
    "int-nonmonotonic-send": _send_order,
    "int-send-skip": _send_order,
    "poll-skip": _poll_order,
    "nonmonotonic-poll": _poll_order,
    "int-poll-skip": _poll_order,
    "int-nonmonotonic-poll": _poll_order,
    "G1a": _g1a,
    "precommitted-read": lambda ex: (f"op {ex['reader']} read value {ex['value']} of key "
                                     f"{ex['key']}, which it had itself sent and not committed"),
    "hanging-transaction": lambda ex: (
        f"{ex['partition']}: the last stable offset stayed at {ex['lso']} below the high "
        f"watermark ({ex['hw']}) from {ex['at_s'][0]} s to {ex['at_s'][1]} s, {ex['quiet_s']} s "
        f"of it in one stretch with no fault active (at most {ex['bound_s']} s: the "
        f"transaction timeout and the coordinator's abort check)"),
    "quorum-split-brain": lambda ex: (
        f"nodes {_pair(ex['leaders'])} each answered as quorum leader in epoch {ex['epoch']} "
        f"(first at {_pair(ex['at_s'], ' s and ')} s, samples {_pair(ex['indexes'], ', ')})"),
    "quorum-hw-regress": lambda ex: (
        f"quorum leader {ex['node']} in epoch {ex['epoch']} reported high watermark "
        f"{ex['high_watermark']} {_span(ex)}, below the {ex['earlier']['high_watermark']} "
        f"that leader {ex['earlier']['node']} reported in epoch {ex['earlier']['epoch']} "
        f"{_sample(ex['earlier'])}"),
    "quorum-epoch-regress": lambda ex: (
        f"node {ex['node']} answered as quorum leader in epoch {ex['epoch']} {_span(ex)}, "
        f"after node {ex['higher']['node']} had answered as leader in epoch "
        f"{ex['higher']['epoch']} {_sample(ex['higher'])}: {ex['after_s']} s with no pause "
        f"or clock fault active (at most {ex['bound_s']} s: 1.5 x "
        f"controller.quorum.fetch.timeout.ms and slack, KAFKA-15489's check quorum)"),
    "metadata-lag": lambda ex: (
        f"{ex['role']} {ex['node']}'s metadata log did not reach offset "
        f"{ex['high_watermark']}, the quorum's high watermark {_sample(ex['reference'])}, "
        f"within {ex['bound_s']:g} s of the final heal at {ex['healed_s']} s: at "
        f"{ex['at_s'][1]} s (sample {ex['indexes'][1]}) it "
        + ("was absent from the quorum's voters and observers" if ex["end_offset"] is None
           else f"had reached offset {ex['end_offset']}")
        + ("" if ex.get("caught_up_s") is None else
           f"; it caught up at {ex['caught_up_s']} s")),
    "leader-epoch-regress": lambda ex: (
        f"broker {ex['node']}'s own view of {ex['partition']}'s leader epoch went back from "
        f"{ex['earlier']['epoch']} {_sample(ex['earlier'])} to {ex['epoch']} {_span(ex)}"),
    "no-rewind-after-abort": lambda ex: (
        f"process {ex['process']} aborted a transaction that had read key {ex['key']} from "
        f"offset {ex['aborted_from']} and sought back to offset {ex['seek_to']}, then read on "
        f"from offset {ex['offset']}{_ops(ex)}"),
    "group-skip": lambda ex: (f"group {ex['group']} committed key {ex['key']} up to offset "
                              f"{ex['committed']} but never delivered offset {ex['offset']} "
                              f"(value {ex['value']})" + _EPOCH.get(ex.get("epochless"), "")),
    "group-redelivery": lambda ex: (f"group {ex['group']} delivered key {ex['key']} offset "
                                    f"{ex['offset']} (value {ex['value']}) {ex['deliveries']} "
                                    f"times{_ops(ex)}"),
    "group-rewind": lambda ex: (f"group {ex['group']} delivered key {ex['key']} offset "
                                f"{ex['offset']} (value {ex['value']}) again after it had "
                                f"committed offset {ex['committed']}{_ops(ex)}"),
    "eos-duplicate": lambda ex: (f"group {ex['group']} consumed key {ex['key']} offset "
                                 f"{ex['offset']} (value {ex['value']}) in two committed "
                                 f"transactions{_ops(ex)}"),
    "group-overlap": lambda ex: (f"group {ex['group']}: processes "
                                 f"{' and '.join(map(str, ex['processes']))} both owned key "
                                 f"{ex['key']} at once, the first "
                                 f"{_ENDED.get(ex['ended_by'], ex['ended_by'])}{_ops(ex)}"),
    "garbage-read": lambda ex: (f"key {ex['key']} offset {ex['offset']} holds value "
                                f"{ex['value']}, which no send wrote to that key"),
    "corrupt-read": lambda ex: (f"key {ex['key']} offset {ex['offset']} could not be read: "
                                f"its bytes are no value a send wrote, or its batch failed "
                                f"the consumer's CRC check ({ex['reads']} time(s), processes "
                                f"{', '.join(map(str, ex['processes']))}; op {ex['op']} "
                                f"first)"),
    "share-lost": lambda ex: (f"key {ex['key']} offset {ex['offset']} (value {ex['value']}) "
                              f"was never accepted, rejected or archived: delivered "
                              f"{ex['deliveries']} time(s), the share group's drain ended "
                              f"quiet (op {ex['op']} wrote it)"),
    "share-accepted-twice": lambda ex: (f"{_record(ex)} was accepted twice, by processes "
                                        f"{_pair(ex['processes'])}{_ops(ex)}"),
    "share-after-ack": lambda ex: (f"{_record(ex)} was delivered to process "
                                   f"{ex['processes'][1]} after process {ex['processes'][0]}'s "
                                   f"{ex['settled_by']} was acknowledged{_ops(ex)}"),
    "share-count-regress": lambda ex: (f"{_record(ex)}: delivery count "
                                       f"{_pair(ex['delivery_counts'], ' then ')}{_ops(ex)}"),
    "share-over-limit": lambda ex: (f"{_record(ex)} was delivered with delivery count "
                                    f"{ex['delivery_counts'][0]}, above the limit "
                                    f"{ex['limit']}{_ops(ex)}"),
    "share-lock-overlap": lambda ex: (f"{_record(ex)} went to process {ex['processes'][1]} "
                                      f"within {ex['lock_ms']} ms of its acquisition by process "
                                      f"{ex['processes'][0]}, which had not released it"
                                      f"{' and had crashed' if ex['ended_by'] == 'gone' else ''}"
                                      f"{_ops(ex)}"),
    "share-redelivery": lambda ex: (f"{_record(ex)} delivered again (count "
                                    f"{_pair(ex['delivery_counts'], ' then ')}) after "
                                    f"{_AFTER.get(ex['after'], ex['after'])}{_ops(ex)}"),
}

_AFTER = {"release": "a release", "no-ack": "no acknowledgement (lock expiry or a crash)",
          "ack-refused": "an acknowledgement the broker refused",
          "ack-unknown": "an acknowledgement of unknown outcome",
          "accept": "an accept", "reject": "a reject"}


def _sample(at: dict) -> str:
    """``at 4.5 s (sample 126)``: one monitor sample of an example."""
    return f"at {at['at_s']} s (sample {at['index']})"


def _span(ex: dict) -> str:
    """When an example's monitor samples (``at_s``, ``indexes``: first and last) were."""
    (a, b), (i, j) = ex["at_s"], ex["indexes"]
    return f"at {a} s (sample {i})" if i == j else f"from {a} s to {b} s (samples {i} to {j})"


def _record(ex: dict) -> str:
    return f"key {ex['key']} offset {ex['offset']} (value {ex['value']})"


def _pair(xs: list, sep: str = " and ") -> str:
    return sep.join(map(str, xs))


def _nodes(names: Any) -> str:
    return "[" + ", ".join(map(str, names or [])) + "]"


def _when(e: dict) -> str:
    lo, hi = e["at_s"]
    return f"at {lo} s" if lo == hi else f"between {lo} s and {hi} s"


def _leader_change(e: dict) -> str:
    how = "the unclean election of" if e.get("unclean") else "the election of"
    was = f"ISR was {_nodes(e.get('isr'))}" + (f", ELR {_nodes(e['elr'])}" if e.get("elr")
                                                else "")
    logged = (f" ({e['to']}'s log: at {e['logged_s']} s, from offset {e['start_offset']}"
              + (", unclean by the controller's log" if e.get("logged_unclean") else "") + ")"
              if e.get("logged_s") is not None else "")
    return (f"{how} {e['to']} on {e['partition']} {_when(e)}, leader {e['from']} -> "
            f"{e['to']}, leader epoch {e['epochs'][0]} -> {e['epochs'][1]}, {was}{logged}")


_EVIDENCE: dict[str, Callable[[dict], str]] = {
    "leader-change": _leader_change,
    "zombie-leader": lambda e: (f"{e['node']} still leading {e['partition']} in leader epoch "
                                f"{e['epochs'][0]} after epoch {e['epochs'][1]} began, "
                                f"{_when(e)}"),
    "forced-unclean": lambda e: (f"the forced unclean election (ElectLeaders UNCLEAN) on "
                                 f"{e['partition']} {_when(e)}"),
    "power-loss": lambda e: (f"the power loss of {_nodes(e['nodes'])} on {e['partition']} "
                             f"{_when(e)} ({sum(e['bytes'].values())} bytes of its log lost), "
                             f"which had every replica of its ISR and ELR "
                             f"{_nodes(e.get('needed'))}"
                             + (f" with {_nodes(e['down'] + e['killed'])} down"
                                if e.get("down") or e.get("killed") else "")),
    "request-duplicated": lambda e: (f"{e['requests']} Produce request(s) of {e['partition']} "
                                     f"sent twice by the proxy {_when(e)}"),
    "late-produce": lambda e: (f"a Produce of {e['client']} to {e['partition']} the proxy "
                               f"kept from {e['received_s']} s and forwarded {_when(e)}, after "
                               f"its client's {' and '.join(e['after'])}"),
    "lso-stuck": lambda e: (f"the hanging transaction of {e['partition']} at offset {e['lso']} "
                            f"from {e['at_s'][0]} s"),
}


def explain_evidence(e: dict[str, Any]) -> str:
    """One phrase for an example's ``evidence`` (``analysis.evidence.Event.as_json``), e.g.
    ``"the unclean election of n2 on kafka-chaos-0 between 12.3 s and 12.8 s, leader n1 -> n2,
    leader epoch 4 -> 5, ISR was [n1]"``; the event's JSON-like text for a kind it does not
    know."""
    try:
        return _EVIDENCE[e["event"]](e)
    except (KeyError, TypeError, ValueError, AttributeError):
        return str(e)


def explain_judged(name: str, example: dict[str, Any]) -> str:
    """``explain`` of the example followed by how it was judged: ``permitted by RULE: by
    EVENT``, ``unexplained: the monitor did not see ...`` or nothing for a violation."""
    text = explain(name, example)
    if example.get("evidence"):
        why = explain_evidence(example["evidence"])
        return f"{text}; permitted by {example.get('rule')}: {why}"
    if example.get("outcome") == "permitted" and example.get("rule"):
        return f"{text}; permitted by {example['rule']}"
    if example.get("outcome") == "unexplained" and example.get("why") and \
            not example.get("blind"):
        return f"{text}; unexplained: {example['why']}"
    if example.get("outcome") == "unexplained":
        b = example.get("blind") or {}
        lo, hi = (b.get("at_s") or [None, None])
        where = (f"the monitor did not see {b.get('partition')} from {lo} s to "
                 f"{'the end' if hi is None else f'{hi} s'}" if lo is not None
                 else "the record does not show its partition")
        return f"{text}; unexplained: {where}"
    return text


def explain(name: str, example: dict[str, Any]) -> str:
    """One sentence for an example of anomaly ``name`` (cycles carry their own ``text``).

    Falls back to the example's JSON-like text for a name or shape it does not know, so a
    rendering bug never hides a finding.
    """
    if "text" in example:
        return str(example["text"])
    try:
        return _RENDER[name](example)
    except (KeyError, TypeError, ValueError):
        return str(example)
