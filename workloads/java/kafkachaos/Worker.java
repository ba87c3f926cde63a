package kafkachaos;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client driver of the queue workload ({@code workloads/java_client.py} starts it):
 * every process of a run on one JVM, each on a thread of its own, driven by JSON lines on stdin
 * and answering on stdout. Requests carry an {@code id} the answer repeats:
 *
 * <ul>
 *   <li>{@code {"op": "hello", "producer": {..}, "consumer": {..}, "settings": {..}, "keys":
 *       [[topic, partition], ..]}} -> {@code {"nano": System.nanoTime(), "version": the
 *       kafka-clients version, "idempotence": effective enable.idempotence of the producer
 *       config, "default_idempotence": the same without enable.idempotence}};
 *   <li>{@code {"op": "open", "process", "slot"}} -> {@code {}}: a new process;
 *   <li>{@code {"op": "invoke", "process", "f", "value", "abort", "seed"}} -> {@code {"type",
 *       "value", "error", "dead", "uncommitted"}}: one op (ack times are System.nanoTime;
 *       {@code seed} draws a share op's acknowledgements);
 *   <li>{@code {"op": "drop", "process"}} -> {@code {}}: the process crashes.
 * </ul>
 *
 * The JVM exits when stdin closes, once every process has ended ({@link Proc#end}). Client
 * logs go to stderr.
 */
public final class Worker {
    static final ByteArraySerializer BYTES_OUT = new ByteArraySerializer();
    static final ByteArrayDeserializer BYTES_IN = new ByteArrayDeserializer();

    /** What every process shares: client configs, the key -> partition map, op settings. */
    static final class Settings {
        Map<String, Object> producer;
        Map<String, Object> consumer;
        /** The share consumer's config (KIP-932 refuses the group consumer's own keys). */
        Map<String, Object> share;
        /** accept / release / reject -> weight ({@code workloads.share.ACKS}), their sum. */
        Map<String, Double> shareAcks = new LinkedHashMap<>();
        double shareAckTotal;
        /** How long a crashed share consumer stays unclosed: past its records' locks. */
        long shareLingerMs;
        List<TopicPartition> keys = new ArrayList<>();
        Map<TopicPartition, Integer> keyOf = new HashMap<>();
        boolean txn;
        int retries;
        int pollTimeoutMs;
        int requestTimeoutMs;
        String autoOffsetReset;
        String ids;

        TopicPartition tp(int key) {
            return keys.get(key);
        }

        int key(TopicPartition tp) {
            return keyOf.get(tp);
        }
    }

    private static final PrintStream OUT =
            new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false,
                    StandardCharsets.UTF_8);
    private final Map<Integer, Proc> procs = new ConcurrentHashMap<>();
    private final Map<Integer, ExecutorService> threads = new ConcurrentHashMap<>();
    private Settings settings;

    public static void main(String[] args) throws Exception {
        System.setOut(System.err); // only answers go to stdout
        new Worker().serve();
    }

    private void serve() throws Exception {
        BufferedReader in = new BufferedReader(
                new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            Map<String, Object> req = Json.parse(line);
            Object id = req.get("id");
            String op = (String) req.get("op");
            if (op.equals("hello")) {
                answer(id, hello(req));
                continue;
            }
            int process = Json.integer(req.get("process"));
            ExecutorService thread = threads.computeIfAbsent(
                    process, p -> Executors.newSingleThreadExecutor(r -> {
                        Thread t = new Thread(r, "process-" + p);
                        t.setDaemon(true);
                        return t;
                    }));
            thread.submit(() -> {
                try {
                    answer(id, handle(op, process, req));
                } catch (Throwable e) {
                    Map<String, Object> a = new HashMap<>();
                    a.put("failed", Outcomes.name(e) + ": " + e.getMessage());
                    answer(id, a);
                }
                if (op.equals("drop")) {
                    procs.remove(process);
                    threads.remove(process).shutdown();
                }
            });
        }
        List<Thread> ends = new ArrayList<>();
        for (Proc p : procs.values()) {
            Thread t = new Thread(p::end, "end-" + p.process);
            t.setDaemon(true);
            t.start();
            ends.add(t);
        }
        for (Thread t : ends) t.join(10_000);
        System.exit(0);
    }

    private Map<String, Object> handle(String op, int process, Map<String, Object> req) {
        Map<String, Object> a = new LinkedHashMap<>();
        switch (op) {
            case "open":
                procs.put(process, new Proc(process, (String) req.get("txn_id"), settings));
                return a;
            case "drop":
                Proc gone = procs.get(process);
                if (gone != null) gone.drop();
                return a;
            case "invoke":
                Proc p = procs.get(process);
                Object[] done = p.invoke((String) req.get("f"), req.get("value"),
                        Boolean.TRUE.equals(req.get("abort")),
                        req.get("seed") == null ? 0 : Json.integer(req.get("seed")));
                a.put("type", done[0]);
                a.put("value", done[1]);
                a.put("error", done[2]);
                a.put("dead", p.dead);
                a.put("uncommitted", p.uncommitted);
                return a;
            default:
                throw new IllegalArgumentException("unknown request " + op);
        }
    }

    private Map<String, Object> hello(Map<String, Object> req) {
        Settings s = new Settings();
        s.producer = Json.map(req.get("producer"));
        s.consumer = Json.map(req.get("consumer"));
        s.share = Json.map(req.get("share"));
        Map<String, Object> o = Json.map(req.get("settings"));
        s.txn = Boolean.TRUE.equals(o.get("txn"));
        s.retries = Json.integer(o.get("retries"));
        s.pollTimeoutMs = Json.integer(o.get("poll_timeout_ms"));
        s.requestTimeoutMs = Json.integer(o.get("request_timeout_ms"));
        s.autoOffsetReset = (String) o.get("auto_offset_reset");
        s.ids = (String) o.get("ids");
        for (Object w : Json.list(o.get("share_acks"))) {
            double weight = ((Number) Json.list(w).get(1)).doubleValue();
            s.shareAcks.put((String) Json.list(w).get(0), weight);
            s.shareAckTotal += weight;
        }
        s.shareLingerMs = Json.integer(o.get("share_linger_ms"));
        for (Object k : Json.list(req.get("keys"))) {
            List<Object> tp = Json.list(k);
            TopicPartition t = new TopicPartition((String) tp.get(0), Json.integer(tp.get(1)));
            s.keyOf.put(t, s.keys.size());
            s.keys.add(t);
        }
        settings = s;
        Map<String, Object> without = new HashMap<>(s.producer);
        without.remove(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG);
        Map<String, Object> a = new LinkedHashMap<>();
        a.put("nano", System.nanoTime());
        a.put("version", clientsVersion());
        a.put("idempotence", idempotence(s.producer));
        a.put("default_idempotence", idempotence(without));
        return a;
    }

    /** The kafka-clients version, from the properties file its jar carries. */
    private static String clientsVersion() {
        java.util.Properties p = new java.util.Properties();
        try (java.io.InputStream in = ProducerConfig.class.getResourceAsStream(
                "/kafka/kafka-version.properties")) {
            p.load(in);
        } catch (Exception e) {
            return "unknown";
        }
        return p.getProperty("version", "unknown");
    }

    /** enable.idempotence as the producer resolves it (KIP-679: on unless a config conflicts). */
    private static boolean idempotence(Map<String, Object> producer) {
        Map<String, Object> conf = new HashMap<>(producer);
        conf.put("key.serializer", ByteArraySerializer.class);
        conf.put("value.serializer", ByteArraySerializer.class);
        return new ProducerConfig(conf).getBoolean(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG);
    }

    private static void answer(Object id, Map<String, Object> a) {
        a.put("id", id);
        String line = Json.write(a);
        synchronized (OUT) {
            OUT.println(line);
            OUT.flush();
        }
    }
}
