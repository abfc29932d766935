package txcoord;

import java.util.ArrayList;
import java.util.HashMap;
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
 * Rows to and from {@link Lifecycle} values: the stage's input (streams/coordinator_stage.py
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

  /** The state of one transaction (layout recorded with the checkpoint: STATE_LAYOUT). */
  public static final StructType STATE = DataTypes.createStructType(List.of(
      field("state", DataTypes.StringType), field("half", HALF),
      field("check_count", DataTypes.IntegerType),
      field("deciding_op_id", DataTypes.StringType),
      field("pending_ops", DataTypes.createArrayType(OP)),
      field("timer_ms", DataTypes.LongType),
      field("judged_ops", DataTypes.createArrayType(DataTypes.StringType))));

  public static final StructType KEY = DataTypes.createStructType(List.of(
      field("producer_group", DataTypes.StringType),
      field("transaction_id", DataTypes.StringType)));

  private static <T> scala.collection.immutable.Seq<T> seq(List<T> list) {
    return CollectionConverters.asScala(list).toSeq();
  }

  // -- input rows -> values ------------------------------------------------------------------
  /**
   * The half an input row carries, or null (streams/coordinator_stage.py half_of); its body
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
  /** The output row of one emitted value (row_of). */
  static Row rowOf(Emit emit, StructType output) {
    Object[] values = new Object[output.size()];
    Map<String, Object> v = new HashMap<>();
    v.put("kind", emit.kind().name());
    v.put("transaction_id", emit.transactionId());
    v.put("at_ms", emit.atMs());
    Half half = emit.half();
    if (half != null) {
      v.put("msg_id", half.msgId());
      v.put("producer_group", half.producerGroup());
      v.put("topic", half.topic());
      v.put("queue_id", half.queueId());
      v.put("body", half.body());
      v.put("keys", seq(half.keys()));
      v.put("tags", half.tags());
      Map<String, String> props = new java.util.LinkedHashMap<>();
      for (String[] p : half.properties()) props.put(p[0], p[1]);
      v.put("properties", CollectionConverters.asScala(props));
      v.put("check_immunity_seconds", half.checkImmunitySeconds());
      v.put("prepared_ms", half.storedMs());
    }
    Op op = emit.op();
    if (op != null) {
      v.put("op_id", op.opId());
      v.put("op_producer_group", op.producerGroup());
      v.put("op", op.op());
      v.put("op_from_check", op.fromCheck());
      v.put("op_operator", op.operator());
      v.put("op_reason", op.reason());
      v.put("op_stored_ms", op.storedMs());
    }
    v.put("check_number", emit.checkNumber());
    v.put("state", emit.state());
    v.put("reason", emit.reason());
    v.put("check_count", emit.checkCount());
    v.put("deciding_op_id", emit.decidingOpId());
    v.put("verdict", emit.verdict());
    v.put("detail", emit.detail());
    for (int i = 0; i < values.length; i++) values[i] = v.get(output.fields()[i].name());
    return new GenericRowWithSchema(values, output);
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

  static TxState decode(Row r) {
    Half half = null;
    if (!r.isNullAt(1)) {
      Row h = r.getStruct(1);
      List<String[]> props = new ArrayList<>();
      for (Object p : h.getList(8)) {
        Row pair = (Row) p;
        props.add(new String[] {pair.getString(0), pair.getString(1)});
      }
      half = new Half(h.getString(0), h.getString(1), h.getString(2), h.getString(3),
          h.getInt(4), (byte[]) h.get(5), List.copyOf(h.<String>getList(6)), h.getString(7),
          List.copyOf(props), h.isNullAt(9) ? null : h.getInt(9), h.getLong(10));
    }
    List<Op> pending = new ArrayList<>();
    for (Object o : r.getList(4)) {
      Row op = (Row) o;
      pending.add(new Op(op.getString(0), op.getString(1), op.getString(2), op.getString(3),
          op.getBoolean(4), op.getString(5), op.getString(6), op.getLong(7)));
    }
    return new TxState(r.getString(0), half, r.getInt(2), r.getString(3), List.copyOf(pending),
        r.isNullAt(5) ? null : r.getLong(5), List.copyOf(r.<String>getList(6)));
  }
}
