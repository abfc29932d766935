package txcoord;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.zip.CRC32;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF8;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The ingest's rules in the JVM: one raw Kafka ingress record in, its parsed fields and the
 * reason it is refused (NULL when valid) out, as one struct.
 *
 * <p>This is the twin of the Spark SQL expressions of streams/ingest/rules.py, the readable
 * reference model (tests/streams/ingest/test_ingest_twin.py proves that both agree on random
 * records). One function call per record instead of an expression tree of a few hundred
 * nodes with lambda functions: Spark generates the code of such a tree again in every task,
 * and evaluates its lambdas without generated code. Every string a rule compares with, every
 * limit and every reason's text comes from Python as one JSON document ({@link #parse}), so
 * that each has one home; only the logic is written twice. Wherever Spark's own semantics
 * matter (UTF-8 validity, character counts, substrings, string to int), this calls the same
 * {@link UTF8String} methods Spark's expressions call.
 */
public final class Ingress
    implements UDF8<byte[], Integer, scala.collection.Seq<Row>, String, Integer, Long, Integer,
        scala.collection.Seq<String>, Row> {
  private static final long serialVersionUID = 1L;

  /** What the function returns; streams/ingest/transforms.py spreads it into the parsed columns. */
  public static final StructType OUTPUT = new StructType(new StructField[] {
      field("transaction_id", DataTypes.StringType, true),
      field("producer_group", DataTypes.StringType, true),
      field("topic", DataTypes.StringType, true),
      field("tags", DataTypes.StringType, true),
      field("op", DataTypes.StringType, true),
      field("operator", DataTypes.StringType, true),
      field("reason_text", DataTypes.StringType, true),
      field("ingress_kind", DataTypes.StringType, true),
      field("reason", DataTypes.StringType, true),
      field("is_tick", DataTypes.BooleanType, false),
      field("queue_id", DataTypes.IntegerType, true),
      field("msg_id", DataTypes.StringType, true),
      field("properties",
          DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType, true), true),
      field("check_immunity_seconds", DataTypes.IntegerType, true),
      field("born_at_ms", DataTypes.LongType, true),
      field("from_check", DataTypes.BooleanType, false),
      field("who", DataTypes.StringType, true),
      field("op_id", DataTypes.StringType, true),
  });

  /** The ids of the reasons, in the order the rules are tried (streams/ingest/rules.py). */
  static final List<String> REASONS = List.of(
      "create_time", "duplicate_header", "bad_text", "kind_not_tick", "header_bytes",
      "shared_topic", "key_missing", "key_not_utf8", "transaction_id", "group_missing", "group_pattern",
      "group_topic", "born_at",
      "topic_missing", "topic_pattern", "system_topic", "topic_not_allowed", "queue_id",
      "msg_id",
      "immunity_format", "immunity_max", "body_size", "keys_json", "property_utf8",
      "property_no_name", "property_name", "header_budget",
      "op_missing", "operator_on_group_topic", "operator_missing", "op_value",
      "resume_operator", "from_check", "operator_length", "reason_needs_operator",
      "reason_length");

  private static final Pattern DIGITS = Pattern.compile("^(0|[1-9][0-9]{0,17})\\z");
  // JSON's integers (no sign, no leading zero, no spaces): the REST ingress's rule.
  private static final Pattern QUEUE_DIGITS = Pattern.compile("^(0|[1-9][0-9]{0,3})\\z");
  private static final int LONG_STRING = 1 << 20;

  private static StructField field(String name, org.apache.spark.sql.types.DataType type,
      boolean nullable) {
    return new StructField(name, type, nullable,
        org.apache.spark.sql.types.Metadata.empty());
  }

  // The source topics (coordinator/core/topics.py's layout).
  private final String halfTopic;
  private final String opTopic;
  private final String operatorTopic;
  private final boolean perGroup;
  // The engine's own principal: on its operator topic the operator header is the "who".
  private final String enginePrincipal;
  // Header names.
  private final String kindHeader;
  private final String groupHeader;
  private final String topicHeader;
  private final String queueIdHeader;
  private final String msgIdHeader;
  private final String keysHeader;
  private final String tagsHeader;
  private final String immunityHeader;
  private final String bornAtHeader;
  private final String opHeader;
  private final String fromCheckHeader;
  private final String operatorHeader;
  private final String reasonHeader;
  private final String propertyPrefix;
  private final List<String> textHeaders;
  // Values and patterns.
  private final String kindTick;
  private final Set<String> ops;
  private final Set<String> operatorOps;
  private final Set<String> systemTopics;
  private final List<String> systemPrefixes;
  // The topics a half may name (auto_create_topic_enable off), or null for any.
  private final Set<String> allowedTopics;
  private final Pattern transactionId;
  private final Pattern group;
  private final Pattern topicName;
  private final Pattern propertyName;
  // Limits.
  private final int maxQueueId;
  private final long maxBornAtMs;
  private final long maxHeaderBytes;
  private final long headerBudget;
  private final int maxOperatorLength;
  private final int maxReasonLength;
  private final long maxMessageSize;
  private final long immunityCap;
  private final long defaultQueueCount;
  private final Map<String, String> messages;
  // The new topics a half may bring in (auto_create_topic_enable on, in the coordinator
  // query): null when there is no limit.
  private TopicAdmission admission;

  Ingress(JsonNode spec) {
    JsonNode layout = spec.get("layout");
    halfTopic = layout.get("half").asText();
    opTopic = layout.get("op").asText();
    operatorTopic = layout.get("operator").asText();
    perGroup = layout.get("per_group").asBoolean();
    enginePrincipal = layout.get("engine_principal").asText();
    JsonNode headers = spec.get("headers");
    kindHeader = headers.get("kind").asText();
    groupHeader = headers.get("producer_group").asText();
    topicHeader = headers.get("topic").asText();
    queueIdHeader = headers.get("queue_id").asText();
    msgIdHeader = headers.get("msg_id").asText();
    keysHeader = headers.get("keys").asText();
    tagsHeader = headers.get("tags").asText();
    immunityHeader = headers.get("check_immunity_seconds").asText();
    bornAtHeader = headers.get("born_at").asText();
    opHeader = headers.get("op").asText();
    fromCheckHeader = headers.get("from_check").asText();
    operatorHeader = headers.get("operator").asText();
    reasonHeader = headers.get("reason").asText();
    propertyPrefix = spec.get("property_prefix").asText();
    textHeaders = texts(spec.get("text_headers"));
    kindTick = spec.get("kind_tick").asText();
    ops = new HashSet<>(texts(spec.get("ops")));
    operatorOps = new HashSet<>(texts(spec.get("operator_ops")));
    systemTopics = new HashSet<>(texts(spec.get("system_topics")));
    systemPrefixes = texts(spec.get("system_prefixes"));
    JsonNode allowed = spec.get("allowed_topics");
    allowedTopics = allowed == null || allowed.isNull() ? null : new HashSet<>(texts(allowed));
    JsonNode patterns = spec.get("patterns");
    transactionId = Pattern.compile(patterns.get("transaction_id").asText());
    group = Pattern.compile(patterns.get("group").asText());
    topicName = Pattern.compile(patterns.get("topic").asText());
    propertyName = Pattern.compile(patterns.get("property_name").asText());
    JsonNode limits = spec.get("limits");
    maxQueueId = limits.get("max_queue_id").asInt();
    maxBornAtMs = limits.get("max_born_at_ms").asLong();
    maxHeaderBytes = limits.get("max_header_bytes").asLong();
    headerBudget = limits.get("header_budget").asLong();
    maxOperatorLength = limits.get("max_operator_length").asInt();
    maxReasonLength = limits.get("max_reason_length").asInt();
    maxMessageSize = limits.get("max_message_size").asLong();
    immunityCap = limits.get("immunity_cap").asLong();
    defaultQueueCount = limits.get("default_queue_count").asLong();
    messages = new HashMap<>();
    JsonNode texts = spec.get("messages");
    for (String id : REASONS) {
      JsonNode text = texts.get(id);
      if (text == null) throw new IllegalArgumentException("no message for reason " + id);
      messages.put(id, text.asText());
    }
    if (texts.size() != REASONS.size()) {
      throw new IllegalArgumentException("messages for unknown reasons: " + texts);
    }
  }

  private static List<String> texts(JsonNode array) {
    List<String> out = new ArrayList<>();
    for (JsonNode item : array) out.add(item.asText());
    return out;
  }

  /**
   * Return {@code records} (the Kafka source's columns and {@code _keys_json}) with column
   * {@code _parsed}: this function's struct, for the rules described by {@code specJson}.
   */
  public static Dataset<Row> parse(Dataset<Row> records, String specJson) throws Exception {
    return parse(records, specJson, null);
  }

  /**
   * {@link #parse(Dataset, String)}, and a valid half naming a new topic is refused past the
   * limits of {@code admission} (the driver updates it between batches).
   */
  public static Dataset<Row> parse(Dataset<Row> records, String specJson,
      TopicAdmission admission) throws Exception {
    Ingress rules = new Ingress(new ObjectMapper().readTree(specJson));
    rules.admission = admission;
    UserDefinedFunction udf = functions.udf(rules, OUTPUT).asNonNullable();
    return records.withColumn("_parsed", udf.apply(functions.col("key"),
        functions.length(functions.col("value")), functions.col("headers"),
        functions.col("topic"), functions.col("partition"), functions.col("offset"),
        functions.col("timestampType"), functions.col("_keys_json")));
  }

  // -- Spark's semantics, by Spark's own code --------------------------------------------

  private static boolean validUtf8(byte[] raw) {
    return UTF8String.fromBytes(raw).isValid();
  }

  /** The header's value as text; NULL when absent or not valid UTF-8 (ingest's _text). */
  private static String text(Map<String, byte[]> headers, String name) {
    byte[] raw = headers.get(name);
    return raw != null && validUtf8(raw) ? UTF8String.fromBytes(raw).toString() : null;
  }

  private static int chars(String s) {
    return UTF8String.fromString(s).numChars();
  }

  private static long octets(String s) {
    return s.getBytes(StandardCharsets.UTF_8).length;
  }

  private static String substring(String s, int pos, int len) {
    return UTF8String.fromString(s).substringSQL(pos, len).toString();
  }

  private static String hexPad(long value, int width) {
    String hex = Long.toHexString(value).toUpperCase(java.util.Locale.ROOT);
    if (hex.length() >= width) return hex.substring(0, width);
    return "0".repeat(width - hex.length()) + hex;
  }

  /**
   * A decimal of 1-4 digits and nothing else (no sign, leading zero or space), as an int;
   * NULL otherwise: what the Kafka path accepts as a queue id, the REST ingress accepts too.
   */
  private static Integer queueDigits(String s) {
    return QUEUE_DIGITS.matcher(s).find() ? Integer.valueOf(Integer.parseInt(s)) : null;
  }

  /** A decimal of 1-18 digits (JSON's: no sign, leading zero or space), as a long; else NULL. */
  private static Long digits(String s) {
    return s != null && DIGITS.matcher(s).find() ? Long.valueOf(Long.parseLong(s)) : null;
  }

  private static boolean found(Pattern pattern, String s) {
    return pattern.matcher(s).find(0);
  }

  // -- the rules -----------------------------------------------------------------------------

  @Override
  public Row call(byte[] key, Integer valueLength, scala.collection.Seq<Row> headerList,
      String source, Integer partition, Long offset, Integer timestampType,
      scala.collection.Seq<String> keysJson) {
    // The headers: a map (the last of a repeated name wins), and what the rules count.
    Map<String, byte[]> headers = new HashMap<>();
    Set<String> names = new HashSet<>();
    List<String> propertyKeys = new ArrayList<>();
    List<byte[]> propertyValues = new ArrayList<>();
    boolean repeated = false;
    long headerBytes = 0;
    long budgetBytes = 0;
    int count = headerList == null ? 0 : headerList.length();
    for (int i = 0; i < count; i++) {
      Row header = headerList.apply(i);
      String name = header.getString(0);
      byte[] value = (byte[]) header.get(1);
      headers.put(name, value);
      repeated |= !names.add(name);
      long bytes = octets(name) + (value == null ? 0 : value.length);
      headerBytes += bytes;
      boolean property = name.startsWith(propertyPrefix);
      if (property || name.equals(keysHeader) || name.equals(tagsHeader)) budgetBytes += bytes;
      if (property) {
        propertyKeys.add(name);
        propertyValues.add(value);
      }
    }

    String transaction = key != null && validUtf8(key) ? UTF8String.fromBytes(key).toString()
        : null;
    String kind = text(headers, kindHeader);
    String producerGroup = text(headers, groupHeader);
    String topic = text(headers, topicHeader);
    String queueText = text(headers, queueIdHeader);
    String keysText = text(headers, keysHeader);
    String tags = text(headers, tagsHeader);
    String immunityText = text(headers, immunityHeader);
    String bornAtText = text(headers, bornAtHeader);
    String op = text(headers, opHeader);
    String fromCheckText = text(headers, fromCheckHeader);
    String operator = text(headers, operatorHeader);
    String reasonText = text(headers, reasonHeader);

    // What the source topic says (ingest's _source_columns).
    String ingressKind = null;
    String topicGroup = null;
    String topicPrincipal = null;
    // In the per-group layout the shared topics carry the engine's heartbeats only.
    boolean onShared = perGroup && (halfTopic.equals(source) || opTopic.equals(source));
    if (source != null) {
      boolean underHalf = perGroup && source.startsWith(halfTopic + ".");
      boolean underOp = perGroup && source.startsWith(opTopic + ".");
      boolean underOperator = perGroup && source.startsWith(operatorTopic + ".");
      if (source.equals(halfTopic) || underHalf) {
        ingressKind = "half";
      } else if (source.equals(opTopic) || underOp || underOperator) {
        ingressKind = "op";
      }
      if (underHalf) {
        topicGroup = substring(source, chars(halfTopic) + 2, LONG_STRING);
      } else if (underOp) {
        topicGroup = substring(source, chars(opTopic) + 2, LONG_STRING);
      }
      if (underOperator) topicPrincipal = substring(source, chars(operatorTopic) + 2, LONG_STRING);
    }

    Integer queueId = queueText == null ? null : queueDigits(queueText);
    Long immunity = digits(immunityText);
    boolean immunityOk = immunity != null && immunity <= immunityCap;
    Long bornAt = digits(bornAtText);
    boolean bornAtOk = bornAt != null && bornAt <= maxBornAtMs;
    boolean isTick = kindTick.equals(kind);

    String reason = common(timestampType, repeated, headers, kind, headerBytes);
    if (reason == null && !isTick && ingressKind != null) {
      reason = message(onShared, key, transaction, producerGroup, topicGroup, bornAtText,
          bornAtOk);
      if (reason == null && ingressKind.equals("half")) {
        reason = half(topic, queueText, queueId, headers, immunityText, immunity, immunityOk,
            valueLength, keysText, keysJson, propertyKeys, propertyValues, budgetBytes);
        // Last: only a half valid in every other way counts against the topic limits.
        if (reason == null && admission != null) {
          reason = admission.refusal(topic, producerGroup, source, partition);
        }
      } else if (reason == null) {
        reason = op(op, topicGroup, topicPrincipal, operator, fromCheckText, reasonText);
      }
    }

    Integer queue = queueId;
    if (queue == null && key != null) {
      CRC32 crc = new CRC32();
      crc.update(key);
      queue = (int) (crc.getValue() % defaultQueueCount);
    }
    boolean located = partition != null && offset != null;
    Map<String, String> properties = null;
    if (headerList != null && !repeated) {
      properties = new LinkedHashMap<>();
      for (int i = 0; i < propertyKeys.size(); i++) {
        byte[] value = propertyValues.get(i);
        properties.put(substring(propertyKeys.get(i), chars(propertyPrefix) + 1, LONG_STRING),
            value == null ? null : UTF8String.fromBytes(value).toString());
      }
    }
    return RowFactory.create(transaction, producerGroup, topic, tags, op, operator, reasonText,
        ingressKind, reason, isTick, queue,
        located ? hexPad(partition, 4) + hexPad(offset, 16) : null,
        properties,
        immunityOk && immunity > 0 ? Integer.valueOf(immunity.intValue()) : null,
        bornAtOk ? bornAt : null,
        "true".equals(fromCheckText),
        who(topicPrincipal, operator),
        located ? "op-" + hexPad(partition, 4) + "-" + hexPad(offset, 16) : null);
  }

  private String reason(String id) {
    return messages.get(id);
  }

  /** The rules every record obeys, a heartbeat included. */
  private String common(Integer timestampType, boolean repeated, Map<String, byte[]> headers,
      String kind, long headerBytes) {
    if (timestampType != null && timestampType != 1) return reason("create_time");
    if (repeated) return reason("duplicate_header");
    for (String name : textHeaders) {
      byte[] raw = headers.get(name);
      if (raw != null && !validUtf8(raw)) return reason("bad_text");
    }
    if (kind != null && !kind.equals(kindTick)) return reason("kind_not_tick");
    if (headerBytes > maxHeaderBytes) return reason("header_bytes");
    return null;
  }

  /** The rules of halves and ops alike. */
  private String message(boolean onShared, byte[] key, String transaction,
      String producerGroup, String topicGroup, String bornAtText, boolean bornAtOk) {
    if (onShared) return reason("shared_topic");
    if (key == null) return reason("key_missing");
    if (transaction == null) return reason("key_not_utf8");
    if (!found(transactionId, transaction)) return reason("transaction_id");
    if (producerGroup == null) return reason("group_missing");
    if (!found(group, producerGroup)) return reason("group_pattern");
    if (topicGroup != null && !producerGroup.equals(topicGroup)) return reason("group_topic");
    if (bornAtText != null && !bornAtOk) return reason("born_at");
    return null;
  }

  private String half(String topic, String queueText, Integer queueId,
      Map<String, byte[]> headers, String immunityText, Long immunity, boolean immunityOk,
      Integer valueLength, String keysText, scala.collection.Seq<String> keysJson,
      List<String> propertyKeys, List<byte[]> propertyValues, long budgetBytes) {
    if (topic == null) return reason("topic_missing");
    if (!found(topicName, topic)) return reason("topic_pattern");
    if (systemTopics.contains(topic)) return reason("system_topic");
    for (String prefix : systemPrefixes) {
      if (topic.startsWith(prefix)) return reason("system_topic");
    }
    if (allowedTopics != null && !allowedTopics.contains(topic)) {
      return reason("topic_not_allowed");
    }
    if (queueText != null && (queueId == null || queueId < 0 || queueId > maxQueueId)) {
      return reason("queue_id");
    }
    if (headers.get(msgIdHeader) != null) return reason("msg_id");
    if (immunityText != null && immunity == null) return reason("immunity_format");
    if (immunityText != null && !immunityOk) return reason("immunity_max");
    if ((valueLength == null ? 0 : valueLength) > maxMessageSize) return reason("body_size");
    if (keysText != null && (keysJson == null || keysJson.contains(null))) {
      return reason("keys_json");
    }
    for (byte[] value : propertyValues) {
      if (value == null || !validUtf8(value)) return reason("property_utf8");
    }
    int prefixChars = chars(propertyPrefix);
    for (String name : propertyKeys) {
      if (chars(name) <= prefixChars) return reason("property_no_name");
    }
    for (String name : propertyKeys) {
      if (!found(propertyName, substring(name, prefixChars + 1, LONG_STRING))) {
        return reason("property_name");
      }
    }
    if (budgetBytes > headerBudget) return reason("header_budget");
    return null;
  }

  private String op(String op, String topicGroup, String topicPrincipal, String operator,
      String fromCheckText, String reasonText) {
    if (op == null) return reason("op_missing");
    if (topicGroup != null && operator != null) return reason("operator_on_group_topic");
    if (topicPrincipal != null && operator == null) return reason("operator_missing");
    if (!ops.contains(op) && !operatorOps.contains(op)) return reason("op_value");
    if (operatorOps.contains(op) && operator == null) return reason("resume_operator");
    if (fromCheckText != null && !fromCheckText.equals("true")
        && !fromCheckText.equals("false")) {
      return reason("from_check");
    }
    if (operator != null && (chars(operator) < 1 || chars(operator) > maxOperatorLength)) {
      return reason("operator_length");
    }
    if (reasonText != null && operator == null) return reason("reason_needs_operator");
    if (reasonText != null && chars(reasonText) > maxReasonLength) {
      return reason("reason_length");
    }
    return null;
  }

  /**
   * Who did an operator's op: the principal the broker let write its operator topic, with
   * the header's name beside it as a display name (coordinator/protocol/records.py's operator_label);
   * on the engine's own operator topic the header as written (the REST ingress authenticated it).
   */
  private String who(String principal, String operator) {
    if (principal == null || principal.equals(enginePrincipal)) return operator;
    if (operator == null) return null;
    if (operator.equals(principal)) return principal;
    return principal + " ("
        + substring(operator, 1, maxOperatorLength - 3 - chars(principal)) + ")";
  }
}
