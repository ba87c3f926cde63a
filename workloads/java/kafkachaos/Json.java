package kafkachaos;

import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;

/** JSON lines in and out (Jackson, which every Kafka distribution ships), and typed views. */
final class Json {
    private Json() {}

    private static final ObjectMapper MAPPER = new ObjectMapper();

    @SuppressWarnings("unchecked")
    static Map<String, Object> parse(String line) throws JsonProcessingException {
        return MAPPER.readValue(line, Map.class);
    }

    static String write(Object value) {
        try {
            return MAPPER.writeValueAsString(value);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    @SuppressWarnings("unchecked")
    static List<Object> list(Object o) {
        return (List<Object>) o;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> map(Object o) {
        return (Map<String, Object>) o;
    }

    static int integer(Object o) {
        return ((Number) o).intValue();
    }

    static long longValue(Object o) {
        return ((Number) o).longValue();
    }
}
