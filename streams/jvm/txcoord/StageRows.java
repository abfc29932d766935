package txcoord;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;
import txcoord.Lifecycle.Emit;
import txcoord.Lifecycle.Half;
import txcoord.Lifecycle.Op;
import txcoord.Lifecycle.TxState;

/**
 * Rows to and from {@link Lifecycle} values: the stage's input (streams/stage/processor.py
 * INPUT_SCHEMA), its output (OUTPUT_SCHEMA, handed over by Python), and the state it keeps.
 */
public final class StageRows {
  private StageRows() {}

  private static StructField field(String name, org.apache.spark.sql.types.DataType type) {
    return DataTypes.createStructField(name, type, true);
  }

  static final StructType PROPERTY = DataTypes.createStructType(List.of(
      field("key", DataTypes.StringType), field("value", DataTypes.StringType)));

  static final StructType HALF = DataTypes.createStructType(List.of(
      field("transaction_id", DataTypes.StringType), field("msg_id", DataTypes.StringType),
      field("producer_group", DataTypes.StringType), field("topic", DataTypes.StringType),
      field("queue_id", DataTypes.IntegerType), field("body", DataTypes.BinaryType),
      field("keys", DataTypes.createArrayType(DataTypes.StringType)),
      field("tags", DataTypes.StringType),
      field("properties", DataTypes.createArrayType(PROPERTY)),
      field("check_immunity_seconds", DataTypes.IntegerType),
      field("stored_ms", DataTypes.LongType)));

  static final StructType OP = DataTypes.createStructType(List.of(
      field("op_id", DataTypes.StringType), field("transaction_id", DataTypes.StringType),
      field("producer_group", DataTypes.StringType), field("op", DataTypes.StringType),
      field("from_check", DataTypes.BooleanType), field("operator", DataTypes.StringType),
      field("reason", DataTypes.StringType), field("stored_ms", DataTypes.LongType)));

  /**
   * The state of one transaction as rows show it: an initial state's documents, a rebuild's
   * reading of a checkpoint. The stage keeps it as bytes ({@link StateCodec}).
   */
  public static final StructType STATE = DataTypes.createStructType(List.of(
      field("state", DataTypes.StringType), field("half", HALF),
      field("check_count", DataTypes.IntegerType),
      field("deciding_op_id", DataTypes.StringType),
      field("pending_ops", DataTypes.createArrayType(OP)),
      field("timer_ms", DataTypes.LongType),
      field("judged_ops", DataTypes.createArrayType(DataTypes.StringType))));

  /** STATE as JSON, for Python (streams/stage/processor.py state_schema). */
  public static String stateJson() {
    return STATE.json();
  }

  public static final StructType KEY = DataTypes.createStructType(List.of(
      field("producer_group", DataTypes.StringType),
      field("transaction_id", DataTypes.StringType)));

  private static <T> scala.collection.immutable.Seq<T> seq(List<T> list) {
    return CollectionConverters.asScala(list).toSeq();
  }

  // -- input rows -> values ------------------------------------------------------------------
  /**
   * The half an input row carries, or null (streams/stage/processor.py half_of); its body
   * is {@code body}, read by the caller from the landed record's columns.
   */
  static Half halfOf(Row row, byte[] body) {
    String msgId = row.getAs("h_msg_id");
    if (msgId == null) return null;
    Map<String, String> props = row.isNullAt(row.fieldIndex("h_properties"))
        ? Map.of() : row.getJavaMap(row.fieldIndex("h_properties"));
    List<String> keys = row.isNullAt(row.fieldIndex("h_keys"))
        ? List.of() : List.copyOf(row.getList(row.fieldIndex("h_keys")));
    return new Half(row.getAs("transaction_id"), msgId, row.getAs("h_producer_group"),
        row.getAs("h_topic"), (Integer) row.getAs("h_queue_id"),
        body != null ? body : new byte[0], keys, row.getAs("h_tags"), sorted(props),
        row.getAs("h_check_immunity_seconds"), (Long) row.getAs("h_stored_ms"));
  }

  static List<String[]> sorted(Map<String, String> properties) {
    List<String[]> pairs = new ArrayList<>();
    for (Map.Entry<String, String> e : properties.entrySet()) {
      pairs.add(new String[] {String.valueOf(e.getKey()), String.valueOf(e.getValue())});
    }
    pairs.sort((a, b) -> a[0].equals(b[0]) ? a[1].compareTo(b[1]) : a[0].compareTo(b[0]));
    return List.copyOf(pairs);
  }

  /** The op an input row carries, or null (op_of). */
  static Op opOf(Row row) {
    String opId = row.getAs("o_op_id");
    if (opId == null) return null;
    Boolean fromCheck = row.getAs("o_from_check");
    return new Op(opId, row.getAs("transaction_id"), row.getAs("o_producer_group"),
        row.getAs("o_op"), fromCheck != null && fromCheck, row.getAs("o_operator"),
        row.getAs("o_reason"), (Long) row.getAs("o_stored_ms"));
  }

  // -- emits -> output rows ------------------------------------------------------------------
  /**
   * Where each emitted value goes in the stage's output row, found once per stage: a row is
   * then filled by position, not through a map of names (a map per row and a lookup per
   * column were 2% of the Spark JVM's CPU under load). A name the output lacks is dropped.
   */
  static final class OutputLayout implements Serializable {
    private static final long serialVersionUID = 1L;

    private final StructType output;
    private final int kind;
    private final int transactionId;
    private final int atMs;
    private final int msgId;
    private final int producerGroup;
    private final int topic;
    private final int queueId;
    private final int body;
    private final int keys;
    private final int tags;
    private final int properties;
    private final int checkImmunitySeconds;
    private final int preparedMs;
    private final int opId;
    private final int opProducerGroup;
    private final int op;
    private final int opFromCheck;
    private final int opOperator;
    private final int opReason;
    private final int opStoredMs;
    private final int checkNumber;
    private final int state;
    private final int reason;
    private final int checkCount;
    private final int decidingOpId;
    private final int verdict;
    private final int detail;

    OutputLayout(StructType output) {
      this.output = output;
      List<String> names = List.of(output.fieldNames());
      kind = names.indexOf("kind");
      transactionId = names.indexOf("transaction_id");
      atMs = names.indexOf("at_ms");
      msgId = names.indexOf("msg_id");
      producerGroup = names.indexOf("producer_group");
      topic = names.indexOf("topic");
      queueId = names.indexOf("queue_id");
      body = names.indexOf("body");
      keys = names.indexOf("keys");
      tags = names.indexOf("tags");
      properties = names.indexOf("properties");
      checkImmunitySeconds = names.indexOf("check_immunity_seconds");
      preparedMs = names.indexOf("prepared_ms");
      opId = names.indexOf("op_id");
      opProducerGroup = names.indexOf("op_producer_group");
      op = names.indexOf("op");
      opFromCheck = names.indexOf("op_from_check");
      opOperator = names.indexOf("op_operator");
      opReason = names.indexOf("op_reason");
      opStoredMs = names.indexOf("op_stored_ms");
      checkNumber = names.indexOf("check_number");
      state = names.indexOf("state");
      reason = names.indexOf("reason");
      checkCount = names.indexOf("check_count");
      decidingOpId = names.indexOf("deciding_op_id");
      verdict = names.indexOf("verdict");
      detail = names.indexOf("detail");
    }
  }

  private static void put(Object[] values, int at, Object value) {
    if (at >= 0) values[at] = value;
  }

  /** The output row of one emitted value (row_of). */
  static Row rowOf(Emit emit, OutputLayout at) {
    Object[] values = new Object[at.output.size()];
    put(values, at.kind, emit.kind().name());
    put(values, at.transactionId, emit.transactionId());
    put(values, at.atMs, emit.atMs());
    Half half = emit.half();
    if (half != null) {
      put(values, at.msgId, half.msgId());
      put(values, at.producerGroup, half.producerGroup());
      put(values, at.topic, half.topic());
      put(values, at.queueId, half.queueId());
      put(values, at.body, half.body());
      put(values, at.keys, seq(half.keys()));
      put(values, at.tags, half.tags());
      Map<String, String> props = new java.util.LinkedHashMap<>();
      for (String[] p : half.properties()) props.put(p[0], p[1]);
      put(values, at.properties, CollectionConverters.asScala(props));
      put(values, at.checkImmunitySeconds, half.checkImmunitySeconds());
      put(values, at.preparedMs, half.storedMs());
    }
    Op op = emit.op();
    if (op != null) {
      put(values, at.opId, op.opId());
      put(values, at.opProducerGroup, op.producerGroup());
      put(values, at.op, op.op());
      put(values, at.opFromCheck, op.fromCheck());
      put(values, at.opOperator, op.operator());
      put(values, at.opReason, op.reason());
      put(values, at.opStoredMs, op.storedMs());
    }
    put(values, at.checkNumber, emit.checkNumber());
    put(values, at.state, emit.state());
    put(values, at.reason, emit.reason());
    put(values, at.checkCount, emit.checkCount());
    put(values, at.decidingOpId, emit.decidingOpId());
    put(values, at.verdict, emit.verdict());
    put(values, at.detail, emit.detail());
    return new GenericRowWithSchema(values, at.output);
  }

  // -- state <-> row -------------------------------------------------------------------------
  static Row encode(TxState s) {
    Half h = s.half();
    Row half = null;
    if (h != null) {
      List<Row> props = new ArrayList<>();
      for (String[] p : h.properties()) props.add(RowFactory.create(p[0], p[1]));
      half = RowFactory.create(h.transactionId(), h.msgId(), h.producerGroup(), h.topic(),
          h.queueId(), h.body(), seq(h.keys()), h.tags(), seq(props),
          h.checkImmunitySeconds(), h.storedMs());
    }
    List<Row> pending = new ArrayList<>();
    for (Op o : s.pendingOps()) {
      pending.add(RowFactory.create(o.opId(), o.transactionId(), o.producerGroup(), o.op(),
          o.fromCheck(), o.operator(), o.reason(), o.storedMs()));
    }
    return RowFactory.create(s.state(), half, s.checkCount(), s.decidingOpId(), seq(pending),
        s.timerMs(), seq(s.judgedOps()));
  }

  private static final com.fasterxml.jackson.databind.ObjectMapper JSON =
      new com.fasterxml.jackson.databind.ObjectMapper();

  private static String text(com.fasterxml.jackson.databind.JsonNode node, String name) {
    com.fasterxml.jackson.databind.JsonNode value = node.get(name);
    return value == null || value.isNull() ? null : value.asText();
  }

  private static List<String> texts(com.fasterxml.jackson.databind.JsonNode array) {
    List<String> found = new ArrayList<>();
    if (array != null) for (com.fasterxml.jackson.databind.JsonNode item : array) found.add(item.asText());
    return List.copyOf(found);
  }

  /** Parse a JSON document (streams/stage/processor.py initial_chunks: a chunk). */
  static com.fasterxml.jackson.databind.JsonNode json(byte[] document) {
    try {
      return JSON.readTree(document);
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("not a chunk of initial state: " + e.getMessage(), e);
    }
  }

  /** The key of a chunk's member: (producer_group, transaction_id). */
  static Row keyOf(com.fasterxml.jackson.databind.JsonNode member) {
    return RowFactory.create(text(member, "producer_group"), text(member, "transaction_id"));
  }

  /**
   * A transaction's state from Spark's to_json of a {@link #STATE} struct (an initial state's
   * document): a field that is null is absent, and the body is base64.
   */
  static TxState ofJson(com.fasterxml.jackson.databind.JsonNode s) {
    Half half = null;
    com.fasterxml.jackson.databind.JsonNode h = s.get("half");
    if (h != null && !h.isNull()) {
      List<String[]> props = new ArrayList<>();
      if (h.get("properties") != null) {
        for (com.fasterxml.jackson.databind.JsonNode p : h.get("properties")) {
          props.add(new String[] {text(p, "key"), text(p, "value")});
        }
      }
      String body = text(h, "body");
      half = new Half(text(h, "transaction_id"), text(h, "msg_id"), text(h, "producer_group"),
          text(h, "topic"), h.get("queue_id").asInt(),
          body == null ? new byte[0] : java.util.Base64.getDecoder().decode(body),
          texts(h.get("keys")), text(h, "tags"), List.copyOf(props),
          h.hasNonNull("check_immunity_seconds") ? h.get("check_immunity_seconds").asInt() : null,
          h.get("stored_ms").asLong());
    }
    List<Op> pending = new ArrayList<>();
    if (s.get("pending_ops") != null) {
      for (com.fasterxml.jackson.databind.JsonNode o : s.get("pending_ops")) {
        pending.add(new Op(text(o, "op_id"), text(o, "transaction_id"), text(o, "producer_group"),
            text(o, "op"), o.hasNonNull("from_check") && o.get("from_check").asBoolean(),
            text(o, "operator"), text(o, "reason"), o.get("stored_ms").asLong()));
      }
    }
    return new TxState(text(s, "state"), half,
        s.hasNonNull("check_count") ? s.get("check_count").asInt() : 0,
        text(s, "deciding_op_id"), List.copyOf(pending),
        s.hasNonNull("timer_ms") ? s.get("timer_ms").asLong() : null, texts(s.get("judged_ops")));
  }
}
