package kafkachaos;

import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;

/**
 * One Jepsen process on the Java client: a producer and (from its first assign or subscribe) a
 * consumer, running one op at a time, as {@code workloads/client.py} does on librdkafka. An op's
 * completion is {@code [type, value, error]} in the history format; {@code dead} tells the
 * caller the process must be retired (an {@code info} op, a fatal producer error, a crash).
 */
final class Proc {
    final int process;
    private final Worker.Settings s;
    private final KafkaProducer<byte[], byte[]> producer;
    private KafkaConsumer<byte[], byte[]> consumer;
    private Share share;
    private boolean txnReady;
    boolean dead;
    /** key -> next offset polled and not committed (the generator's commit ops read it). */
    final Map<String, Long> uncommitted = new HashMap<>();
    /** key -> leader epoch of the last record polled (-1 unknown), committed with it. */
    final Map<String, Integer> epochs = new HashMap<>();
    /** The completion being built; rebalance callbacks (run inside poll) append events. */
    private List<Object> out;
    private boolean inTxn;
    /** Partitions were revoked or lost while a transaction ran: it must abort. */
    private boolean revokedInTxn;

    Proc(int process, String txnId, Worker.Settings s) {
        this.process = process;
        this.s = s;
        Properties p = new Properties();
        p.putAll(s.producer);
        p.put("client.id", clientId());  // names the process in its requests (a proxy)
        if (txnId != null) p.put("transactional.id", txnId);
        producer = new KafkaProducer<>(p, Worker.BYTES_OUT, Worker.BYTES_OUT);
    }

    /**
     * Runs op {@code f}; never throws (an exception makes the op {@code info}, Jepsen).
     * {@code seed} draws a share op's acknowledgements.
     */
    Object[] invoke(String f, Object value, boolean abort, int seed) {
        try {
            switch (f) {
                case "share": return shareOp(Json.map(value), seed);
                case "send": return send(Json.list(value));
                case "poll": return pollOp(Json.list(value));
                case "txn": return txn(Json.list(value), abort);
                case "assign": return assign(Json.map(value));
                case "subscribe": return subscribe(Json.map(value));
                case "commit": return commit(Json.map(value));
                case "crash": drop(); return new Object[] {"info", null, "CRASHED"};
                default: throw new IllegalArgumentException("unknown client op " + f);
            }
        } catch (Exception e) {
            dead = true;
            String error = (Outcomes.name(e) + ": " + e.getMessage());
            return new Object[] {"info", partial(value, out),
                    error.substring(0, Math.min(200, error.length()))};
        } finally {
            out = null;
        }
    }

    /**
     * Ends the process at the end of the workload: its share consumer closes (it leaves the
     * share group, whose coordinator releases its records at once), the rest is dropped.
     */
    void end() {
        if (share != null) {
            share.close();
            share = null;
        }
        drop();
    }

    /**
     * Ends the process as a crash would: the producer is closed without waiting (unsent records
     * are dropped) and the consumer without leaving its group where the client can (kafka-clients
     * 4.1+, KIP-1092 REMAIN_IN_GROUP); older clients send a LeaveGroup on close. Both close on a
     * thread of their own, so the op returns at once: kafka-clients 4.4's consumer of the KIP-848
     * protocol was seen to take 30 s and more to close this way.
     */
    void drop() {
        dead = true;
        if (share != null) share.drop(s.shareLingerMs);
        KafkaConsumer<byte[], byte[]> c = consumer;
        consumer = null;
        Thread closing = new Thread(() -> {
            try {
                producer.close(Duration.ZERO);
            } catch (Exception ignored) {
                // a producer that cannot close is dropped all the same
            }
            if (c != null) {
                try {
                    closeRemaining(c);
                } catch (Exception ignored) {
                    // likewise
                }
            }
        }, "drop-" + process);
        closing.setDaemon(true);
        closing.start();
    }

    @SuppressWarnings("deprecation") // close(Duration) only where CloseOptions is missing
    private static void closeRemaining(KafkaConsumer<byte[], byte[]> c) throws Exception {
        Class<?> options;
        try {
            options = Class.forName("org.apache.kafka.clients.consumer.CloseOptions");
        } catch (ClassNotFoundException old) {
            c.close(Duration.ZERO);
            return;
        }
        Class<?> op = Class.forName(
                "org.apache.kafka.clients.consumer.CloseOptions$GroupMembershipOperation");
        @SuppressWarnings({"unchecked", "rawtypes"})
        Object remain = Enum.valueOf((Class) op, "REMAIN_IN_GROUP");
        Object o = options.getMethod("groupMembershipOperation", op).invoke(null, remain);
        o = options.getMethod("withTimeout", Duration.class).invoke(o, Duration.ofSeconds(5));
        Method close = KafkaConsumer.class.getMethod("close", options);
        close.invoke(c, o);
    }

    /** A share op ({@link Share}); its consumer is made at the first. An {@code info} op (a
     *  commit of unknown outcome) retires the process, as on librdkafka. */
    private Object[] shareOp(Map<String, Object> value, int seed) {
        if (share == null) {
            Set<String> topics = new TreeSet<>();
            for (TopicPartition tp : s.keys) topics.add(tp.topic());
            share = new Share(s, (String) value.get("group"), topics, clientId());
        }
        Object[] done = share.op(Boolean.TRUE.equals(value.get("hold")), seed);
        if ("info".equals(done[0])) dead = true;
        return done;
    }

    // -- sends --------------------------------------------------------------------------------

    /** A send's delivery report: its exception or offset, and when it came (System.nanoTime). */
    private static final class Report {
        volatile Exception error;
        volatile long offset = -1;
        volatile long ackNs;
        volatile boolean done;
    }

    /**
     * Sends every {@code ["send", k, v]} without waiting, then flushes (bounded by
     * delivery.timeout.ms). Returns one report per send, in order.
     */
    private List<Report> produceAll(List<List<Object>> sends) {
        List<Report> reports = new ArrayList<>();
        for (List<Object> m : sends) {
            Report r = new Report();
            reports.add(r);
            TopicPartition tp = s.tp(Json.integer(m.get(1)));
            byte[] payload = Long.toString(Json.longValue(m.get(2))).getBytes();
            try {
                producer.send(new ProducerRecord<>(tp.topic(), tp.partition(), null, payload),
                        (md, e) -> {
                            r.ackNs = System.nanoTime();
                            if (e != null) r.error = e;
                            else r.offset = md.hasOffset() ? md.offset() : -1;
                            r.done = true;
                        });
            } catch (KafkaException e) { // refused before it was queued
                r.error = e;
                r.done = true;
            }
        }
        producer.flush();
        return reports;
    }

    private Object[] send(List<Object> value) {
        List<List<Object>> sends = new ArrayList<>();
        for (Object m : value) sends.add(Json.list(m));
        List<Report> reports = produceAll(sends);
        List<Object> done = new ArrayList<>();
        List<String> errors = new ArrayList<>();
        boolean definite = true;
        int acked = 0;
        for (int i = 0; i < sends.size(); i++) {
            List<Object> m = sends.get(i);
            Report r = reports.get(i);
            if (!r.done) {
                errors.add("NO_DELIVERY_REPORT");
                definite = false;
                done.add(List.of("send", m.get(1), unacked(m.get(2))));
            } else if (r.error != null) {
                errors.add(Outcomes.name(r.error));
                definite &= Outcomes.send(r.error, s.retries).equals("fail");
                if (Outcomes.fatal(r.error)) dead = true;
                done.add(List.of("send", m.get(1), unacked(m.get(2))));
            } else {
                acked++;
                done.add(List.of("send", m.get(1), acked(r, m.get(2))));
            }
        }
        if (errors.isEmpty()) return new Object[] {"ok", done, null};
        if (acked == 0 && definite) return new Object[] {"fail", done, errors.get(0)};
        dead = true; // a request of this producer may still land later: retire it
        return new Object[] {"info", done, errors.get(0)};
    }

    private static List<Object> unacked(Object v) {
        List<Object> x = new ArrayList<>();
        x.add(null);
        x.add(v);
        return x;
    }

    private static List<Object> acked(Report r, Object v) {
        if (r.offset < 0) return unacked(v);
        return List.of(r.offset, v, r.ackNs);
    }

    // -- consumer -----------------------------------------------------------------------------

    private void event(String kind, Object payload) {
        if (out != null) out.add(List.of(kind, payload));
    }

    private List<Integer> keysOf(Collection<TopicPartition> tps) {
        List<Integer> ks = new ArrayList<>();
        for (TopicPartition tp : tps) ks.add(s.key(tp));
        ks.sort(null);
        return ks;
    }

    private final ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> tps) {
            event("assigned", keysOf(tps));
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> tps) {
            revokedInTxn |= inTxn;
            event("revoked", keysOf(tps));
            for (int k : keysOf(tps)) uncommitted.remove(Integer.toString(k));
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> tps) {
            revokedInTxn |= inTxn;
            event("lost", keysOf(tps));
            for (int k : keysOf(tps)) uncommitted.remove(Integer.toString(k));
        }
    };

    /** The {@code client.id} of this process's clients, as on librdkafka. */
    private String clientId() {
        return s.ids + "-p" + process;
    }

    private KafkaConsumer<byte[], byte[]> consumer(String group) {
        if (consumer == null) {
            Properties p = new Properties();
            p.putAll(s.consumer);
            p.put("group.id", group);
            p.put("client.id", clientId());
            consumer = new KafkaConsumer<>(p, Worker.BYTES_IN, Worker.BYTES_IN);
        }
        return consumer;
    }

    private Object[] assign(Map<String, Object> value) {
        KafkaConsumer<byte[], byte[]> c = consumer(s.ids + "-assign-" + process);
        Set<TopicPartition> tps = new HashSet<>();
        for (Object k : Json.list(value.get("keys"))) tps.add(s.tp(Json.integer(k)));
        Map<TopicPartition, Long> start = startOffsets(tps, "beginning".equals(value.get("seek")));
        c.assign(tps);
        start.forEach(c::seek);
        uncommitted.clear();
        return new Object[] {"ok", value, null};
    }

    /**
     * Concrete start offsets: the log start with {@code beginning}, else the group's committed
     * offset, else what auto.offset.reset would choose; as the librdkafka client does.
     */
    private Map<TopicPartition, Long> startOffsets(Set<TopicPartition> tps, boolean beginning) {
        Duration timeout = Duration.ofSeconds(10);
        Map<TopicPartition, Long> out = new HashMap<>();
        Map<TopicPartition, OffsetAndMetadata> committed =
                beginning ? Map.of() : consumer.committed(tps, timeout);
        Set<TopicPartition> rest = new HashSet<>();
        for (TopicPartition tp : tps) {
            OffsetAndMetadata o = committed.get(tp);
            if (o != null) out.put(tp, o.offset());
            else rest.add(tp);
        }
        if (!rest.isEmpty()) {
            boolean earliest = beginning || s.autoOffsetReset.equals("earliest");
            out.putAll(earliest ? consumer.beginningOffsets(rest, timeout)
                                : consumer.endOffsets(rest, timeout));
        }
        return out;
    }

    private Object[] subscribe(Map<String, Object> value) {
        KafkaConsumer<byte[], byte[]> c = consumer((String) value.get("group"));
        Set<String> topics = new TreeSet<>();
        for (Object k : Json.list(value.get("keys"))) topics.add(s.tp(Json.integer(k)).topic());
        c.subscribe(topics, listener);
        return new Object[] {"ok", value, null};
    }

    /** What the consumer throws for a batch that fails its CRC check (CompletedFetch)... */
    private static final Pattern BAD_BATCH = Pattern.compile(
            "Record batch for partition (.+)-(\\d+) at offset (\\d+) is invalid");
    /** ...and at every poll after, the consumer staying at that record (CompletedFetch). */
    private static final Pattern STUCK = Pattern.compile(
            "Received exception when fetching the next record from (.+)-(\\d+)\\. If needed");

    /**
     * The partition and offset of the record a poll refused ({@code BAD_BATCH}, in the
     * exception or its causes: the batch's base offset; else {@code STUCK}: the consumer's
     * position, where it stays), or null for another exception.
     */
    private Object[] refused(KafkaException e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            Matcher m = BAD_BATCH.matcher(String.valueOf(t.getMessage()));
            if (m.find()) {
                return new Object[] {new TopicPartition(m.group(1), Integer.parseInt(m.group(2))),
                        Long.parseLong(m.group(3))};
            }
        }
        Matcher m = STUCK.matcher(String.valueOf(e.getMessage()));
        if (!m.find()) return null;
        TopicPartition tp = new TopicPartition(m.group(1), Integer.parseInt(m.group(2)));
        return new Object[] {tp, consumer.position(tp)};
    }

    /**
     * One consumer poll: the poll micro-op (callbacks' events are appended before it, and a
     * {@code corrupt} event for a record that is no value a send wrote or a batch refused).
     */
    private List<Object> poll() {
        Map<String, List<Object>> read = new LinkedHashMap<>();
        if (consumer != null) {
            ConsumerRecords<byte[], byte[]> polled;
            try {
                polled = consumer.poll(Duration.ofMillis(s.pollTimeoutMs));
            } catch (KafkaException e) {
                // a batch the CRC check refused (check.crcs, on by default): the consumer
                // stays at it and throws again at every poll (CompletedFetch)
                Object[] at = refused(e);
                if (at == null) throw e;
                event("corrupt", Map.of(Integer.toString(s.key((TopicPartition) at[0])), at[1]));
                return List.of("poll", read);
            }
            for (ConsumerRecord<byte[], byte[]> r : polled) {
                String key = Integer.toString(s.key(new TopicPartition(r.topic(), r.partition())));
                uncommitted.put(key, r.offset() + 1);
                epochs.put(key, r.leaderEpoch().orElse(-1));
                long value;
                try {
                    String text = new String(r.value(), StandardCharsets.UTF_8);
                    value = Long.parseLong(text);
                    // only the exact text a send writes: parseLong takes "+7" and "007" too
                    if (!Long.toString(value).equals(text)) throw new NumberFormatException(text);
                } catch (NumberFormatException | NullPointerException e) {
                    // bytes no send wrote (a record damaged on disk): read, with no value
                    event("corrupt", Map.of(key, r.offset()));
                    continue;
                }
                read.computeIfAbsent(key, x -> new ArrayList<>()).add(List.of(r.offset(), value));
            }
        }
        return List.of("poll", read);
    }

    private Object[] pollOp(List<Object> value) {
        out = new ArrayList<>();
        for (int i = 0; i < value.size(); i++) out.add(poll());
        return new Object[] {"ok", out, null};
    }

    private Object[] commit(Map<String, Object> value) {
        Map<String, Object> offsets = Json.map(value.get("offsets"));
        Map<TopicPartition, OffsetAndMetadata> commits = new HashMap<>();
        Map<String, Object> sent = new LinkedHashMap<>();
        // the epoch of the last record read lets a member resuming from this offset detect
        // a truncation below it (KIP-320; KAFKA-20507 for what omitting it costs)
        offsets.forEach((k, off) -> {
            int epoch = epochs.getOrDefault(k, -1);
            sent.put(k, epoch);
            commits.put(s.tp(Integer.parseInt(k)), new OffsetAndMetadata(Json.longValue(off),
                    epoch >= 0 ? Optional.of(epoch) : Optional.empty(), ""));
        });
        try {
            consumer.commitSync(commits, Duration.ofMillis(s.requestTimeoutMs * 3L));
        } catch (KafkaException e) {
            return new Object[] {Outcomes.commit(e), value, Outcomes.name(e)};
        }
        offsets.forEach((k, off) -> {
            Long mine = uncommitted.get(k);
            if (mine != null && mine == Json.longValue(off)) uncommitted.remove(k);
        });
        Map<String, Object> done = new LinkedHashMap<>(value);
        done.put("epochs", sent);
        return new Object[] {"ok", done, null};
    }

    // -- transactions -------------------------------------------------------------------------

    private Object[] txn(List<Object> value, boolean abort) {
        out = new ArrayList<>();
        if (!txnReady) {
            try {
                producer.initTransactions();
            } catch (KafkaException e) { // no transaction began: nothing can commit
                dead = Outcomes.fatal(e) || Outcomes.cls(e).equals("TimeoutException");
                return new Object[] {"fail", new ArrayList<>(), Outcomes.name(e)};
            }
            txnReady = true;
        }
        boolean committing = false;
        List<Integer> slots = new ArrayList<>();
        inTxn = true;
        revokedInTxn = false;
        try {
            producer.beginTransaction();
            for (Object o : value) {
                List<Object> mop = Json.list(o);
                if (mop.get(0).equals("send")) {
                    slots.add(out.size());
                    out.add(mop);
                } else {
                    produceSlots(slots);
                    out.add(poll());
                }
            }
            produceSlots(slots);
            if (abort || revokedInTxn) {
                // a partition revoked mid-transaction: what was consumed from it cannot be
                // committed with it, and committing the rest would let the next owner consume
                // it again in a second committed transaction (KIP-447)
                producer.abortTransaction();
                rewind();
                return new Object[] {"fail", out, abort ? "ABORTED" : "REVOKED"};
            }
            Map<TopicPartition, OffsetAndMetadata> positions = positions();
            if (!positions.isEmpty()) {
                producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
            }
            committing = true;
            for (int attempt = 0; ; attempt++) {
                try {
                    producer.commitTransaction();
                    break;
                } catch (KafkaException e) {
                    if (!Outcomes.txnAction(e, true).equals("retry") || attempt == 2) throw e;
                }
            }
            if (!positions.isEmpty()) {
                Map<String, Long> done = new LinkedHashMap<>();
                positions.forEach((tp, o) -> done.put(Integer.toString(s.key(tp)), o.offset()));
                out.add(List.of("committed", done));
            }
            uncommitted.clear();
            return new Object[] {"ok", out, null};
        } catch (KafkaException e) {
            return txnFailed(e, committing, value);
        } finally {
            inTxn = false;
        }
    }

    /** Produces and flushes the sends at {@code slots} of {@code out}; throws the first error. */
    private void produceSlots(List<Integer> slots) {
        List<List<Object>> sends = new ArrayList<>();
        for (int i : slots) sends.add(Json.list(out.get(i)));
        List<Report> reports = produceAll(sends);
        KafkaException failed = null;
        for (int j = 0; j < slots.size(); j++) {
            List<Object> m = sends.get(j);
            Report r = reports.get(j);
            boolean ok = r.done && r.error == null;
            out.set(slots.get(j), List.of("send", m.get(1), ok ? acked(r, m.get(2))
                                                                : unacked(m.get(2))));
            if (!ok && failed == null) {
                failed = r.error instanceof KafkaException ? (KafkaException) r.error
                        : new KafkaException("no delivery report", r.error);
            }
        }
        slots.clear();
        if (failed != null) throw failed;
    }

    private Object[] txnFailed(KafkaException e, boolean committing, List<Object> invoked) {
        // sends not produced yet: outcome none, as the format has it for an op cut short
        for (int i = 0; i < out.size(); i++) {
            List<Object> m = Json.list(out.get(i));
            if (m.get(0).equals("send") && !(m.get(2) instanceof List)) {
                out.set(i, List.of("send", m.get(1), unacked(m.get(2))));
            }
        }
        Throwable err = e;
        String action = Outcomes.txnAction(e, committing);
        if (action.equals("abort")) {
            try {
                producer.abortTransaction();
                rewind();
                return new Object[] {"fail", partial(invoked, out), Outcomes.name(e)};
            } catch (KafkaException again) {
                err = again;
            }
        }
        // fatal, retries exhausted, or an abort that failed: if the commit was never sent the
        // transaction cannot have committed (the next process of the slot fences it, or with
        // --txn-ids process the coordinator aborts it at its timeout)
        dead = true;
        return new Object[] {committing ? "info" : "fail", partial(invoked, out),
                Outcomes.name(err)};
    }

    private Map<TopicPartition, OffsetAndMetadata> positions() {
        Map<TopicPartition, OffsetAndMetadata> p = new HashMap<>();
        if (consumer == null) return p;
        for (TopicPartition tp : consumer.assignment()) {
            p.put(tp, new OffsetAndMetadata(consumer.position(tp, Duration.ofSeconds(10))));
        }
        return p;
    }

    /** After an abort, back to the committed offsets (EOS processing re-reads them). */
    private void rewind() {
        if (consumer == null || consumer.assignment().isEmpty()) return;
        Map<String, Long> seeks = new LinkedHashMap<>();
        try {
            startOffsets(consumer.assignment(), false).forEach((tp, off) -> {
                consumer.seek(tp, off);
                seeks.put(Integer.toString(s.key(tp)), off);
            });
        } catch (KafkaException e) {
            dead = true; // the consumer's position is unknown: retire the process
        }
        event("seek", seeks);
        uncommitted.clear();
    }

    /** What an op cut short did so far, then the invoked sends not reached (outcome none). */
    private static Object partial(Object invoked, List<Object> done) {
        if (!(invoked instanceof List)) return invoked;
        List<Object> result = new ArrayList<>(done == null ? List.of() : done);
        int reached = 0;
        for (Object m : result) if (Json.list(m).get(0).equals("send")) reached++;
        int seen = 0;
        for (Object o : Json.list(invoked)) {
            List<Object> m = Json.list(o);
            if (m.get(0).equals("send") && seen++ >= reached) {
                result.add(List.of("send", m.get(1), unacked(m.get(2))));
            }
        }
        return result;
    }
}
