package txcoord;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import txcoord.Lifecycle.Half;
import txcoord.Lifecycle.Op;
import txcoord.Lifecycle.TxState;

/**
 * A transaction's state as the bytes the stage keeps (state layout v4, STATE_LAYOUT in
 * streams/query/decision_query.py).
 *
 * <p>Why bytes and not a {@link StageRows#STATE} row: Spark builds a value state's encoders in
 * every task of every batch (the processor's {@code init}), and for the state's nested row
 * layout that is code generation of a wide serializer and deserializer: ~8 ms of each task
 * (async-profiler, a steady 100 tx/s), whatever its rows; a byte array's encoder is one
 * field. Each row is then also written and read here directly, not through a Row and Spark's
 * generated projections. The layout starts with a version byte, so a later layout can still
 * read this one.
 */
public final class StateCodec {
  private StateCodec() {}

  /** The layout's version, the first byte of every encoded state. */
  static final byte VERSION = 1;

  /** The bytes of {@code s}. */
  static byte[] encode(TxState s) {
    ByteArrayOutputStream buffer = new ByteArrayOutputStream(
        128 + (s.half() != null ? s.half().body().length : 0));
    try (DataOutputStream out = new DataOutputStream(buffer)) {
      out.writeByte(VERSION);
      string(out, s.state());
      Half h = s.half();
      out.writeBoolean(h != null);
      if (h != null) {
        string(out, h.transactionId());
        string(out, h.msgId());
        string(out, h.producerGroup());
        string(out, h.topic());
        out.writeInt(h.queueId());
        out.writeInt(h.body().length);
        out.write(h.body());
        strings(out, h.keys());
        string(out, h.tags());
        out.writeInt(h.properties().size());
        for (String[] p : h.properties()) {
          string(out, p[0]);
          string(out, p[1]);
        }
        out.writeBoolean(h.checkImmunitySeconds() != null);
        if (h.checkImmunitySeconds() != null) out.writeInt(h.checkImmunitySeconds());
        out.writeLong(h.storedMs());
      }
      out.writeInt(s.checkCount());
      string(out, s.decidingOpId());
      out.writeInt(s.pendingOps().size());
      for (Op o : s.pendingOps()) {
        string(out, o.opId());
        string(out, o.transactionId());
        string(out, o.producerGroup());
        string(out, o.op());
        out.writeBoolean(o.fromCheck());
        string(out, o.operator());
        string(out, o.reason());
        out.writeLong(o.storedMs());
      }
      out.writeBoolean(s.timerMs() != null);
      if (s.timerMs() != null) out.writeLong(s.timerMs());
      strings(out, s.judgedOps());
    } catch (IOException e) {
      throw new UncheckedIOException(e); // a byte array's stream does not fail
    }
    return buffer.toByteArray();
  }

  /** The state {@code bytes} hold (written by {@link #encode}). */
  static TxState decode(byte[] bytes) {
    try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes))) {
      byte version = in.readByte();
      if (version != VERSION) {
        throw new IllegalStateException("a transaction state of layout " + version
            + ", not " + VERSION + ": rebuild the stage's state (txcoord state rebuild)");
      }
      String state = string(in);
      Half half = null;
      if (in.readBoolean()) {
        String transactionId = string(in);
        String msgId = string(in);
        String producerGroup = string(in);
        String topic = string(in);
        int queueId = in.readInt();
        byte[] body = new byte[in.readInt()];
        in.readFully(body);
        List<String> keys = strings(in);
        String tags = string(in);
        int count = in.readInt();
        List<String[]> properties = new ArrayList<>(count);
        for (int i = 0; i < count; i++) properties.add(new String[] {string(in), string(in)});
        Integer immunity = in.readBoolean() ? in.readInt() : null;
        half = new Half(transactionId, msgId, producerGroup, topic, queueId, body, keys, tags,
            List.copyOf(properties), immunity, in.readLong());
      }
      int checkCount = in.readInt();
      String decidingOpId = string(in);
      int count = in.readInt();
      List<Op> pending = new ArrayList<>(count);
      for (int i = 0; i < count; i++) {
        pending.add(new Op(string(in), string(in), string(in), string(in), in.readBoolean(),
            string(in), string(in), in.readLong()));
      }
      Long timerMs = in.readBoolean() ? in.readLong() : null;
      return new TxState(state, half, checkCount, decidingOpId, List.copyOf(pending), timerMs,
          strings(in));
    } catch (IOException e) {
      throw new IllegalStateException("a transaction state cut short: " + e.getMessage(), e);
    }
  }

  private static void string(DataOutputStream out, String value) throws IOException {
    if (value == null) {
      out.writeInt(-1);
      return;
    }
    byte[] utf8 = value.getBytes(StandardCharsets.UTF_8);
    out.writeInt(utf8.length);
    out.write(utf8);
  }

  private static String string(DataInputStream in) throws IOException {
    int length = in.readInt();
    if (length < 0) return null;
    byte[] utf8 = new byte[length];
    in.readFully(utf8);
    return new String(utf8, StandardCharsets.UTF_8);
  }

  private static void strings(DataOutputStream out, List<String> values) throws IOException {
    out.writeInt(values.size());
    for (String value : values) string(out, value);
  }

  private static List<String> strings(DataInputStream in) throws IOException {
    int count = in.readInt();
    List<String> values = new ArrayList<>(count);
    for (int i = 0; i < count; i++) values.add(string(in));
    return List.copyOf(values);
  }

  /**
   * The states of {@code raw} (rows of the key's fields, then the encoded state as the
   * binary column {@code value}) as rows of the key's fields, then {@link StageRows#STATE}'s:
   * what streams/state/rebuild.py reads from a checkpoint's state.
   */
  public static Dataset<Row> decoded(Dataset<Row> raw) {
    List<StructField> fields = new ArrayList<>(List.of(StageRows.KEY.fields()));
    fields.addAll(List.of(StageRows.STATE.fields()));
    StructType layout = new StructType(fields.toArray(new StructField[0]));
    int keys = StageRows.KEY.size();
    return raw.map((MapFunction<Row, Row>) row -> {
      Row state = StageRows.encode(decode(row.<byte[]>getAs("value")));
      Object[] values = new Object[keys + state.size()];
      for (int i = 0; i < keys; i++) values[i] = row.get(i);
      for (int i = 0; i < state.size(); i++) values[keys + i] = state.get(i);
      return RowFactory.create(values);
    }, Encoders.row(layout));
  }
}
