package kafkachaos;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Random;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;

/**
 * One process's share consumer (KIP-932) and its {@code share} op, as {@code workloads/share.py}
 * does it on librdkafka: poll once, acknowledge each record with accept, release or reject drawn
 * with the op's seed by the weights of {@code share.ACKS} (none for a {@code hold} op), then
 * {@code commitSync}, whose answer gives one result per share-partition. The consumer runs in
 * explicit acknowledgement mode ({@code share.acknowledgement.mode=explicit}), where every
 * record a poll returned must be acknowledged before the next poll.
 */
final class Share {
    private final KafkaShareConsumer<byte[], byte[]> consumer;
    private final Worker.Settings s;
    private final String group;

    Share(Worker.Settings s, String group, Collection<String> topics, String clientId) {
        this.s = s;
        this.group = group;
        Properties p = new Properties();
        p.putAll(s.share);
        p.put("group.id", group);
        p.put("client.id", clientId);
        consumer = new KafkaShareConsumer<>(p, Worker.BYTES_IN, Worker.BYTES_IN);
        consumer.subscribe(topics);
    }

    /**
     * The op: {@code [type, {"group", "records": [[key, offset, value, delivery_count, ack]],
     * "acks": {key: "ok" | error name}}, error]}. {@code ok} once the commit answered;
     * {@code info} (with the records got, their acknowledgements of unknown outcome) when the
     * commit or an acknowledgement threw. A poll that throws throws (the process is retired).
     */
    Object[] op(boolean hold, long seed) {
        Random rng = new Random(seed);
        List<Object> records = new ArrayList<>();
        Map<String, Object> value = new LinkedHashMap<>();
        value.put("group", group);
        value.put("records", records);
        Map<String, Object> acks = new LinkedHashMap<>();
        value.put("acks", acks);
        Map<String, Boolean> acked = new HashMap<>();
        try {
            Duration timeout = Duration.ofMillis(s.pollTimeoutMs);
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(timeout)) {
                int key = s.key(new TopicPartition(r.topic(), r.partition()));
                String ack = hold ? null : draw(rng);
                List<Object> rec = new ArrayList<>();
                rec.add(key);
                rec.add(r.offset());
                rec.add(Long.parseLong(new String(r.value(), StandardCharsets.UTF_8)));
                rec.add(deliveryCount(r));
                rec.add(ack);
                records.add(rec);
                if (ack != null) {
                    consumer.acknowledge(r, AcknowledgeType.valueOf(ack.toUpperCase()));
                    acked.put(Integer.toString(key), true);
                }
            }
            if (acked.isEmpty()) return new Object[] {"ok", value, null};
            Map<TopicIdPartition, Optional<KafkaException>> results = consumer.commitSync();
            for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : results.entrySet()) {
                String k = Integer.toString(s.key(e.getKey().topicPartition()));
                if (acked.containsKey(k)) {
                    acks.put(k, e.getValue().map(Outcomes::name).orElse("ok"));
                }
            }
            return new Object[] {"ok", value, null};
        } catch (RuntimeException e) {
            if (records.isEmpty()) throw e;
            return new Object[] {"info", value, Outcomes.name(e)};
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("kafka-clients without delivery counts", e);
        }
    }

    /**
     * A record's delivery count, or null. By reflection: {@code ConsumerRecord.deliveryCount}
     * came with kafka-clients 4.0, and the driver also compiles against 3.x for other ops.
     */
    private static Object deliveryCount(ConsumerRecord<byte[], byte[]> r)
            throws ReflectiveOperationException {
        Optional<?> count = (Optional<?>) ConsumerRecord.class.getMethod("deliveryCount").invoke(r);
        return count.map(c -> ((Short) c).intValue()).orElse(null);
    }

    private String draw(Random rng) {
        double x = rng.nextDouble() * s.shareAckTotal;
        for (Map.Entry<String, Double> w : s.shareAcks.entrySet()) {
            x -= w.getValue();
            if (x < 0) return w.getKey();
        }
        return "accept";
    }

    /** Closes the consumer (at most 5 s): it leaves the share group. */
    void close() {
        try {
            consumer.close(Duration.ofSeconds(5));
        } catch (Exception ignored) {
            // a consumer that cannot close is dropped all the same
        }
    }

    /**
     * Ends the consumer as a crash would, as near as kafka-clients allows: it is left without a
     * poll (its acquired records stay locked until the lock expires, KIP-932) and closed on a
     * thread of its own only after {@code lingerMs}, which leaves the share group; the JVM's end
     * comes first at the end of a run. A fetch it had sent may still acquire records nobody
     * records (the share checker counts every consumer as one that may have).
     */
    void drop(long lingerMs) {
        Thread closing = new Thread(() -> {
            try {
                Thread.sleep(lingerMs);
                consumer.close(Duration.ofSeconds(5));
            } catch (Exception ignored) {
                // a consumer that cannot close is dropped all the same
            }
        }, "share-drop");
        closing.setDaemon(true);
        closing.start();
    }
}
