package kafkachaos;

import java.util.Set;

import org.apache.kafka.common.protocol.Errors;

/**
 * The Java client's exceptions -> Jepsen op outcomes: the Java twin of
 * {@code workloads/outcomes.py}. {@code fail} only where the exception proves the effect did not
 * happen; anything else is {@code info}. Exceptions are matched by simple class name, so one
 * table serves every kafka-clients version (classes such as {@code StaleMemberEpochException}
 * exist only in newer ones).
 */
final class Outcomes {
    private Outcomes() {}

    /**
     * A send's callback exception that proves the record was not appended. Source: the
     * {@code Callback#onCompletion} javadoc (non-retriable: the request was refused as a whole
     * before any append) and the broker's checks before append (size, authorization, topic).
     */
    static final Set<String> DEFINITE_FAILURES = Set.of(
            "RecordTooLargeException", "RecordBatchTooLargeException", "InvalidTopicException",
            "InvalidRecordException", "TopicAuthorizationException",
            "ClusterAuthorizationException", "SerializationException",
            "InvalidRequiredAcksException");

    /**
     * Refused before append ({@code min.insync.replicas}, Kafka doc
     * "NotEnoughReplicasException"), but conclusive only when that answer was the record's only
     * attempt ({@code retries=0}): an earlier timed-out attempt may have been appended.
     */
    static final Set<String> FAIL_IF_SINGLE_ATTEMPT = Set.of("NotEnoughReplicasException");

    /**
     * Producer exceptions after which the producer is unusable and must be closed (KafkaProducer
     * javadoc, "Transactions": "ProducerFencedException, OutOfOrderSequenceException,
     * UnsupportedVersionException, or an AuthorizationException ... the only option is to close
     * the producer"); an IllegalStateException is a producer in a fatal error state.
     */
    static final Set<String> FATAL = Set.of(
            "ProducerFencedException", "OutOfOrderSequenceException",
            "UnsupportedVersionException", "AuthorizationException",
            "TransactionalIdAuthorizationException", "ClusterAuthorizationException",
            "TopicAuthorizationException", "InvalidProducerEpochException",
            "FencedInstanceIdException", "IllegalStateException", "InvalidTxnStateException");

    /**
     * Offset commits the group coordinator rejected: the commit was not applied
     * (KafkaConsumer#commitSync javadoc: CommitFailedException "if the commit failed and cannot
     * be retried", RebalanceInProgressException; KIP-848: StaleMemberEpochException,
     * UnknownMemberIdException, FencedMemberEpochException).
     */
    static final Set<String> COMMIT_REJECTED = Set.of(
            "CommitFailedException", "RebalanceInProgressException", "IllegalGenerationException",
            "UnknownMemberIdException", "FencedInstanceIdException", "StaleMemberEpochException",
            "FencedMemberEpochException", "GroupAuthorizationException");

    /** The exception's simple class name: what the tables above match. */
    static String cls(Throwable e) {
        return e.getClass().getSimpleName();
    }

    /**
     * The error as the history records it: Kafka's protocol error name where the exception has
     * one ({@code STALE_MEMBER_EPOCH}, {@code NOT_ENOUGH_REPLICAS}, as librdkafka names them),
     * else the class name ({@code CommitFailedException}: a client-side conclusion).
     */
    static String name(Throwable e) {
        Errors err = Errors.forException(e);
        return err == Errors.UNKNOWN_SERVER_ERROR ? cls(e) : err.name();
    }

    /** {@code "fail"} or {@code "info"} for one send's callback exception. */
    static String send(Throwable e, int retries) {
        String n = cls(e);
        if (DEFINITE_FAILURES.contains(n)) return "fail";
        if (FAIL_IF_SINGLE_ATTEMPT.contains(n) && retries == 0) return "fail";
        return "info";
    }

    static boolean fatal(Throwable e) {
        return FATAL.contains(cls(e));
    }

    /** {@code "fail"} when the coordinator rejected an offset commit, else {@code "info"}. */
    static String commit(Throwable e) {
        return COMMIT_REJECTED.contains(cls(e)) ? "fail" : "info";
    }

    /**
     * What to do about an exception of a transactional call (KafkaProducer javadoc,
     * "Transactions"): {@code "fatal"} (close the producer, end the process), {@code "retry"}
     * (only while committing: a {@code TimeoutException} of commitTransaction, "it is safe to
     * retry ... the commit may already be in the progress of completing"), else {@code "abort"}
     * ("for any other exception, just call abortTransaction").
     */
    static String txnAction(Throwable e, boolean committing) {
        if (fatal(e)) return "fatal";
        if (committing && (cls(e).equals("TimeoutException")
                || cls(e).equals("InterruptException"))) return "retry";
        return "abort";
    }
}
