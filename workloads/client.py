"""One Jepsen client process: a producer and a consumer, running one op at a time.

``Client.invoke(f, value)`` executes an op of ``docs/history-format.md`` and returns its
completion ``(type, value, error)``; it never raises (Jepsen: an exception in ``invoke!`` makes the
op indeterminate). ``dead`` tells the worker that the process must be retired (after an ``info``
op, a fatal producer error or a crash), as Jepsen does, so one process never has two ops or two
producer sessions.
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kafka_chaos.clusters.admin import COORDINATOR_STARTING
from kafka_chaos.workloads import share
from kafka_chaos.workloads.base import Completion
from kafka_chaos.workloads.keys import KeySpace
from kafka_chaos.workloads.outcomes import (bad_batch, classify, classify_commit, record_value,
                                            txn_action)
from kafka_chaos.workloads.settings import WorkloadSettings



class Client:
    """The Kafka clients of process ``process``.

    Args:
        process: the Jepsen process id (recorded by the caller).
        slot: the worker thread it runs on; a transactional producer's id is the slot's
            (``WorkloadSettings.transactional_id``), so that a replacement process fences its
            dead predecessor (KIP-98 zombie fencing), or the process's own.
        bootstrap, settings, keys: where and how to connect, and the key -> partition map.
        rng: decides which transactions are aborted on purpose (``abort_p``).
        clock: ns on the history's clock (``HistoryWriter.now_ns``): when each delivery
            report arrived, the ``ack_ns`` of its send.
    """

    def __init__(self, process: int, slot: int, bootstrap: str, settings: WorkloadSettings,
                 keys: KeySpace, rng: random.Random, *, clock: Callable[[], int]) -> None:
        self.rng = rng
        self._clock = clock
        self.process = process
        self.slot = slot
        self.bootstrap = bootstrap
        self.s = settings
        self.keys = keys
        self._tps = [keys.tp(k) for k in range(keys.keys)]
        self.dead = False
        #: names the process in every request it sends (a proxy, a broker's request log)
        self.client_id = f"{settings.ids}-p{process}"
        self.producer = Producer({**settings.producer_config(
            bootstrap, settings.transactional_id(process, slot)),
            "client.id": self.client_id})
        self._txn_ready = False
        self.consumer: Consumer | None = None
        self.share_consumer: confluent_kafka.ShareConsumer | None = None
        self.uncommitted: dict[str, int] = {}  # key -> next offset, polled but not committed
        self.epochs: dict[str, int] = {}  # key -> leader epoch of the last record polled
        self._out: list | None = None  # the completion being built; callbacks append events
        self._in_txn = False
        self._revoked_in_txn = False  # partitions revoked or lost while a transaction ran
        self._acks: dict[bytes, tuple[KafkaError | None, int, int]] = {}

    # -- the op switch ------------------------------------------------------------------------
    def invoke(self, f: str, value: Any) -> Completion:
        """Run op ``f`` with invoke ``value``; return ``(type, completion value, error)``."""
        ops = {"send": self._send, "poll": self._poll_op, "txn": self._txn,
               "assign": self._assign, "subscribe": self._subscribe, "commit": self._commit,
               "crash": self._crash, "share": self._share}
        try:
            if f not in ops:
                raise ValueError(f"unknown client op {f!r}")
            return ops[f](value)
        except Exception as exc:  # indeterminate: retire the process (Jepsen)
            self.dead = True
            return "info", _partial(value, self._out), f"{type(exc).__name__}: {exc}"[:200]
        finally:
            self._out = None

    def _crash(self, value: None) -> Completion:
        self.drop()
        return "info", None, "CRASHED"

    def end(self) -> None:
        """End the process at the end of the workload: a share consumer is closed, so it
        leaves its share group and its unacknowledged records are released at once (a
        dropped one would keep them until its share session timed out, 45 s by default on a
        cluster not of the tool's own); the rest is dropped (``drop``)."""
        consumer, self.share_consumer = self.share_consumer, None
        if consumer is not None:
            try:
                consumer.close()
            except Exception:  # a consumer that cannot close is dropped all the same
                pass
        self.drop()

    def drop(self) -> None:
        """End the process as a crash would: unsent records are purged and both clients are
        destroyed without a consumer close, so no LeaveGroup is sent and the group rebalances
        only once the session times out (confluent-kafka destroys an unreferenced consumer with
        ``RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE``). Closing instead could also block for good:
        ``close()`` runs the rebalance callback, whose ``assign`` waits holding the GIL."""
        self.dead = True
        if self.producer is not None:
            try:
                self.producer.purge()
                self.producer.flush(0)
            except KafkaException:  # a producer in a fatal state (fenced) flushes nothing
                pass
        # the consumer holds this client's bound callbacks: dropping the reference here frees
        # it now, not at some later garbage collection
        self.producer = self.consumer = self.share_consumer = None

    # -- sends ---------------------------------------------------------------------------------
    def _on_delivery(self, err: KafkaError | None, msg) -> None:
        # the report is served after the broker's answer arrived: its time bounds the
        # acknowledgement from above, which is what a lost write's window needs
        self._acks[msg.value()] = (err, msg.offset(), self._clock())

    def _produce_all(self, sends: list[list]
                     ) -> list[tuple[KafkaError | None, int, int | None] | None]:
        """Produce every ``["send", k, v]`` without waiting, then flush. Returns, per send in
        order, its delivery report ``(error, offset, ack_ns)`` (``ack_ns``: when the report
        was served, on the history's clock; None for a send refused before it was queued),
        or None when none came. The hot loop of the workload: one ``produce`` call per send,
        reports matched by payload (the value as decimal ASCII, unique in the run)."""
        self._acks = acks = {}
        payloads: list[bytes] = []
        deadline = time.monotonic() + self.s.delivery_timeout_ms / 1000 + 5
        produce, tps, on_delivery = self.producer.produce, self._tps, self._on_delivery
        for _, k, v in sends:
            topic, partition = tps[k]
            payload = b"%d" % v
            payloads.append(payload)
            while True:
                try:
                    produce(topic, payload, partition=partition, on_delivery=on_delivery)
                    break
                except BufferError:  # local queue full: wait for deliveries, then retry
                    if time.monotonic() > deadline:
                        acks[payload] = (KafkaError(KafkaError._QUEUE_FULL), -1, None)
                        break
                    self.producer.poll(0.05)
                except KafkaException as exc:  # refused before it was queued
                    acks[payload] = (exc.args[0], -1, None)
                    break
        self.producer.flush(max(0.0, deadline - time.monotonic()))
        return [acks.get(p) for p in payloads]

    def _send(self, value: list[list]) -> Completion:
        reports = self._produce_all(value)
        if all(r is not None and r[0] is None for r in reports):  # the common case, fast
            return "ok", [["send", m[1], _acked(off, m[2], at)]
                          for m, (_, off, at) in zip(value, reports)], None
        out, errors, acked = [], [], 0
        for (_, k, v), report in zip(value, reports):
            if report is None:
                errors.append("NO_DELIVERY_REPORT")
                out.append(["send", k, [None, v]])
            elif report[0] is not None:
                errors.append(report[0])
                out.append(["send", k, [None, v]])
                if report[0].fatal():
                    self.dead = True
            else:
                acked += 1
                out.append(["send", k, _acked(report[1], v, report[2])])
        names = [e if isinstance(e, str) else e.name() for e in errors]
        definite = acked == 0 and all(not isinstance(e, str) and classify(e, self.s.retries)
                                      == "fail" for e in errors)
        if definite:
            return "fail", out, names[0]
        # the old producer may still deliver a retried record later: retire it
        self.dead = True
        return "info", out, names[0]

    # -- consumer ------------------------------------------------------------------------------
    def _event(self, kind: str, payload: Any) -> None:
        if self._out is not None:
            self._out.append([kind, payload])

    def _tp_keys(self, partitions: list[TopicPartition]) -> list[int]:
        return sorted(self.keys.key(tp.topic, tp.partition) for tp in partitions)

    def _on_assign(self, consumer, partitions) -> None:
        self._event("assigned", self._tp_keys(partitions))

    def _on_revoke(self, consumer, partitions) -> None:
        self._revoked_in_txn = self._revoked_in_txn or self._in_txn
        self._event("revoked", self._tp_keys(partitions))
        for k in self._tp_keys(partitions):
            self.uncommitted.pop(str(k), None)

    def _on_lost(self, consumer, partitions) -> None:
        self._revoked_in_txn = self._revoked_in_txn or self._in_txn
        self._event("lost", self._tp_keys(partitions))
        for k in self._tp_keys(partitions):
            self.uncommitted.pop(str(k), None)

    def _on_commit(self, err, partitions) -> None:
        if err is None:
            done = {str(self.keys.key(tp.topic, tp.partition)): tp.offset for tp in partitions
                    if tp.error is None and tp.offset >= 0}
            if done:
                self._event("committed", done)

    def _new_consumer(self, group: str) -> Consumer:
        conf = {**self.s.consumer_config(self.bootstrap, group), "client.id": self.client_id}
        if conf["enable.auto.commit"]:
            conf["on_commit"] = self._on_commit
        self.consumer = Consumer(conf)
        return self.consumer

    def _assign(self, value: dict) -> Completion:
        consumer = self.consumer or self._new_consumer(f"{self.s.ids}-assign-{self.process}")
        tps = [TopicPartition(*self.keys.tp(k)) for k in value["keys"]]
        consumer.assign(self._start_offsets(tps, value.get("seek") == "beginning"))
        self.uncommitted.clear()
        return "ok", value, None

    def _start_offsets(self, tps: list[TopicPartition], beginning: bool) -> list[TopicPartition]:
        """Concrete start offsets for ``tps``: the log start offset with ``beginning``, else the
        group's committed offset, else what ``auto.offset.reset`` would choose (log start or
        end offset). Raises ``KafkaException`` when the cluster does not answer in time.

        Never a logical offset (``OFFSET_BEGINNING``/``OFFSET_STORED``): librdkafka resolves one
        with a ListOffsets request and keeps it as the partition's query position; a ListOffsets
        reply that arrives after a later ``seek()`` is "outdated" and puts the partition back
        into offset-query for that old logical offset (``rd_kafka_toppar_handle_Offset`` ->
        ``rd_kafka_toppar_offset_retry``, librdkafka 2.x), so the consumer silently jumps back
        to the start of the log. Seen here as ``nonmonotonic-poll`` in ``assign`` runs with
        transactions, whose aborts seek; with concrete offsets that request is never sent.
        """
        timeout_s = 10.0  # a group coordinator or leader moves within seconds of a kill
        if not beginning:
            tps = self._committed(tps, time.monotonic() + timeout_s)
        out = []
        for tp in tps:
            offset = tp.offset
            if offset < 0:
                lo, hi = self.consumer.get_watermark_offsets(
                    TopicPartition(tp.topic, tp.partition), timeout_s, cached=False)
                offset = lo if beginning or self.s.auto_offset_reset == "earliest" else hi
            out.append(TopicPartition(tp.topic, tp.partition, offset))
        return out

    def _committed(self, tps: list[TopicPartition], deadline: float) -> list[TopicPartition]:
        """The group's committed offsets of ``tps``, asked again while the group's coordinator
        answers that it is moving or loading (``admin.COORDINATOR_STARTING``), until
        ``deadline`` (``time.monotonic()``, s), as the Java consumer's ``committed(partitions,
        timeout)`` does; librdkafka gives the first such answer back. Each process's assign
        group has a coordinator of its own: on a fresh cluster, one still loading its
        ``__consumer_offsets`` partition answered ``NOT_COORDINATOR`` 0.4 s after another
        group's coordinator had answered. Raises ``KafkaException`` for any other error, or
        for that one at the deadline."""
        while True:
            try:
                return self.consumer.committed(tps, max(0.1, deadline - time.monotonic()))
            except KafkaException as exc:
                if (exc.args[0].name() not in COORDINATOR_STARTING
                        or time.monotonic() + 0.2 > deadline):
                    raise
            time.sleep(0.2)

    def _subscribe(self, value: dict) -> Completion:
        consumer = self.consumer or self._new_consumer(value["group"])
        topics = sorted({self.keys.tp(k)[0] for k in value["keys"]})
        consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                           on_lost=self._on_lost)
        return "ok", value, None

    def _poll(self) -> list:
        """One ``consume()``: the poll mop (events from callbacks are appended before it, and
        a ``corrupt`` event for each record it could not read: ``outcomes.bad_batch``,
        ``outcomes.record_value``)."""
        read: dict[str, list[list[int]]] = {}
        if self.consumer is None:
            return ["poll", read]
        for msg in self.consumer.consume(self.s.poll_max, self.s.poll_timeout_ms / 1000):
            if msg.error() is not None:
                # a batch the consumer's CRC check refused (check.crcs): the position stays
                # at it (librdkafka: "failed CRC32C check"); other errors (partition EOF,
                # transient fetch errors) delivered nothing
                if bad_batch(msg.error()) and msg.topic() is not None:
                    self._event("corrupt", {str(self.keys.key(msg.topic(), msg.partition())):
                                            msg.offset()})
                continue
            key = str(self.keys.key(msg.topic(), msg.partition()))
            value = record_value(msg.value())
            self.uncommitted[key] = msg.offset() + 1
            if value is None:  # bytes no send wrote: read, but with no value to record
                self._event("corrupt", {key: msg.offset()})
                continue
            read.setdefault(key, []).append([msg.offset(), value])
            epoch = msg.leader_epoch()
            self.epochs[key] = -1 if epoch is None else epoch
        return ["poll", read]

    def _poll_op(self, value: list) -> Completion:
        self._out = []
        for _ in value:
            self._out.append(self._poll())
        return "ok", self._out, None

    def _commit(self, value: dict) -> Completion:
        """Commit ``value["offsets"]``, each with the leader epoch of the last record polled
        of its key, so that a member resuming from it can detect a truncation below it
        (KIP-320; KAFKA-20507 documents what omitting it costs). Completes with the epochs
        sent (``epochs``: key -> epoch, -1 none)."""
        epochs = {k: self.epochs.get(k, -1) for k in value["offsets"]}
        offsets = [TopicPartition(*self.keys.tp(int(k)), off, leader_epoch=epochs[k])
                   for k, off in value["offsets"].items()]
        try:
            done = self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            err = exc.args[0]
            return classify_commit(err), value, err.name()
        bad = [tp.error for tp in done or [] if tp.error is not None]
        if bad:
            return ("fail" if all(classify_commit(e) == "fail" for e in bad) else "info",
                    value, bad[0].name())
        for k, off in value["offsets"].items():
            if self.uncommitted.get(k) == off:
                del self.uncommitted[k]
        return "ok", {**value, "epochs": epochs}, None

    def _share(self, value: dict) -> Completion:
        """A share-group op (``workloads.share.share_op``). One that raised is ``info`` with
        the records it had got, their acknowledgements of unknown outcome (some may have been
        sent, and a later commit would send the rest): the process is retired."""
        if self.share_consumer is None:
            self.share_consumer = confluent_kafka.ShareConsumer({**share.consumer_config(
                self.bootstrap, value["group"], self.s.connection, self.s.request_timeout_ms),
                "client.id": self.client_id})
            self.share_consumer.subscribe(sorted({tp[0] for tp in self._tps}))
        records: list = []
        try:
            typ, done, err = share.share_op(
                self.share_consumer, self.keys, value["group"], self.rng,
                self.s.poll_timeout_ms / 1000, bool(value.get("hold")), records)
        except Exception as exc:
            self.dead = True
            name = share.error_name(exc) if isinstance(exc, KafkaException) \
                else f"{type(exc).__name__}: {exc}"[:200]
            return "info", {"group": value["group"], "records": records, "acks": {}}, name
        if typ == "info":
            self.dead = True  # acknowledgements of unknown outcome: retire the process
        return typ, done, err

    # -- transactions --------------------------------------------------------------------------
    def _txn(self, value: list) -> Completion:
        timeout_s = self.s.txn_timeout_ms / 1000
        p = self.producer
        self._out = out = []
        if not self._txn_ready:
            try:
                p.init_transactions(timeout_s)
            except KafkaException as exc:  # no transaction began: nothing can commit
                self.dead = exc.args[0].fatal()
                # no micro-op ran: an unexecuted ["poll"] is no completion's poll
                return "fail", [], exc.args[0].name()
            self._txn_ready = True
        committing = False
        self._in_txn, self._revoked_in_txn = True, False
        try:
            p.begin_transaction()
            # micro-ops in their generated order, as Jepsen runs them: the sends before a
            # poll are produced and flushed first, so the poll may meet the transaction's own
            # uncommitted writes (a precommitted read, visible under read_uncommitted)
            slots: list[int] = []
            for mop in value:
                if mop[0] == "send":
                    slots.append(len(out))
                    out.append(mop)
                else:
                    self._produce_slots(out, slots)
                    out.append(self._poll())
            self._produce_slots(out, slots)
            if self.rng.random() < self.s.abort_p:
                p.abort_transaction(timeout_s)
                self._rewind()
                return "fail", out, "ABORTED"
            if self._revoked_in_txn:
                # what it consumed from a partition it no longer owns cannot be committed with
                # it, and committing the rest would let the next owner consume it again in a
                # second committed transaction (KIP-447): abort
                p.abort_transaction(timeout_s)
                self._rewind()
                return "fail", out, "REVOKED"
            positions = self._positions()
            if positions:
                p.send_offsets_to_transaction(positions, self.consumer.consumer_group_metadata(),
                                              timeout_s)
            committing = True
            for attempt in range(3):
                try:
                    p.commit_transaction(timeout_s)
                    break
                except KafkaException as exc:
                    if txn_action(exc.args[0], True) != "retry" or attempt == 2:
                        raise
            if positions:
                out.append(["committed", {str(self.keys.key(tp.topic, tp.partition)): tp.offset
                                          for tp in positions}])
            self.uncommitted.clear()
            return "ok", out, None
        except KafkaException as exc:
            return self._txn_failed(exc.args[0], committing, out, value)
        finally:
            self._in_txn = False

    def _produce_slots(self, out: list, slots: list[int]) -> None:
        """Produce and flush the sends at ``slots`` of ``out`` (then emptied), each replaced
        by its completion ``["send", k, [offset, v, ack_ns]]`` (``[None, v]`` without a
        report); raises ``KafkaException`` on the first error: the transaction must abort."""
        reports = self._produce_all([out[i] for i in slots])
        failed = None
        for i, report in zip(slots, reports):
            _, k, v = out[i]
            err, offset, at = report or (KafkaError(KafkaError._TIMED_OUT), -1, None)
            out[i] = ["send", k, _acked(offset, v, at) if err is None else [None, v]]
            failed = failed or err
        slots.clear()
        if failed is not None:  # a lost delivery: this transaction must abort
            raise KafkaException(failed)

    def _txn_failed(self, err: KafkaError, committing: bool, out: list,
                    invoked: list) -> Completion:
        """The completion of a transaction that raised ``err``: ``out`` (what it did, its
        abort's ``seek`` included), then the invoked sends it never reached, all with outcome
        none (``_partial``; a delivery that failed before a poll leaves the sends after it
        unreached, which a reader refuses to find missing)."""
        # sends not produced yet: outcome none, as the format has it for an op cut short
        out[:] = [["send", m[1], [None, m[2]]] if m[0] == "send" and not isinstance(m[2], list)
                  else m for m in out]
        action = txn_action(err, committing)
        if action == "abort" or (action == "unknown" and not committing):
            try:
                self.producer.abort_transaction(self.s.txn_timeout_ms / 1000)
                self._rewind()
                return "fail", _partial(invoked, out), err.name()
            except KafkaException as exc:
                err = exc.args[0]
        # fatal, or an abort that failed: the producer is unusable; if the commit was never
        # sent the transaction cannot have committed (the coordinator aborts it on timeout or
        # when the next process fences this one)
        self.dead = True
        return ("info" if committing else "fail"), _partial(invoked, out), err.name()

    def _positions(self) -> list[TopicPartition]:
        if self.consumer is None:
            return []
        return [tp for tp in self.consumer.position(self.consumer.assignment()) if tp.offset >= 0]

    def _rewind(self) -> None:
        """After an abort, move the consumer back to its committed offsets (EOS processing
        re-reads what the aborted transaction consumed)."""
        if self.consumer is None or not self.consumer.assignment():
            return
        seeks = {}
        try:
            for tp in self._start_offsets(self.consumer.assignment(), False):
                self.consumer.seek(tp)
                seeks[str(self.keys.key(tp.topic, tp.partition))] = tp.offset
        except KafkaException:
            self.dead = True  # the consumer's position is unknown: retire the process
        self._event("seek", seeks)
        self.uncommitted.clear()


def _acked(offset: int, value: int, ack_ns: int | None) -> list:
    """A delivered send's result: ``[offset, value, ack_ns]``, or ``[None, value]`` when the
    report carried no offset (``docs/history-format.md``)."""
    if offset < 0 or ack_ns is None:
        return [None, value]
    return [offset, value, ack_ns]


def _partial(invoked: Any, out: list | None) -> Any:
    """The completion value of an op cut short by an exception: what was recorded so far, then
    the invoked sends not reached yet (outcome unknown), as the format requires."""
    if not isinstance(invoked, list):
        return invoked
    out = list(out or [])
    reached = sum(1 for m in out if m[0] == "send")
    rest = [m for m in invoked if m[0] == "send"][reached:]
    return out + [["send", m[1], [None, m[2]]] for m in rest]
