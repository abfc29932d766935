package txcoord;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.types.StructType;

/**
 * The LAND row of an input row (streams/ingest/land_rows.py): kind LAND, the input's pass-through
 * columns (named with the landing's prefix, the parsed ingress record) copied into the output
 * columns of the same name, every other column null.
 *
 * <p>The stage thereby hands the writer every record of the batch beside its decisions, so
 * the query reads each Kafka record once (a union of the decisions with a second read of
 * the source cost a second fetch of every body and twice the read tasks).
 */
public final class Landing implements Serializable {
  private static final long serialVersionUID = 1L;

  private final String kind;
  private final StructType output;
  private final int kindAt;
  private final int[] from;
  private final int[] to;
  private final int bodyAt;

  private Landing(String kind, StructType output, int kindAt, int[] from, int[] to,
      int bodyAt) {
    this.kind = kind;
    this.output = output;
    this.kindAt = kindAt;
    this.from = from;
    this.to = to;
    this.bodyAt = bodyAt;
  }

  /**
   * Map every input column named with {@code spec.prefix} to the output column of its name;
   * {@code spec.body} names the input column holding a half's body (the landed record's
   * value: the stage's own columns do not repeat it).
   */
  static Landing of(StructType input, StructType output, JsonNode spec) {
    String prefix = spec.get("prefix").asText();
    List<int[]> pairs = new ArrayList<>();
    for (int i = 0; i < input.size(); i++) {
      String name = input.fields()[i].name();
      if (name.startsWith(prefix)) pairs.add(new int[] {i, output.fieldIndex(name)});
    }
    int[] from = new int[pairs.size()];
    int[] to = new int[pairs.size()];
    for (int i = 0; i < pairs.size(); i++) {
      from[i] = pairs.get(i)[0];
      to[i] = pairs.get(i)[1];
    }
    return new Landing(spec.get("kind").asText(), output, output.fieldIndex("kind"), from, to,
        input.fieldIndex(spec.get("body").asText()));
  }

  /** Return the body {@code input} carries (a half's), or null. */
  byte[] body(Row input) {
    return input.isNullAt(bodyAt) ? null : (byte[]) input.get(bodyAt);
  }

  /** Return the LAND row carrying {@code input}'s pass-through columns. */
  Row rowOf(Row input) {
    Object[] values = new Object[output.size()];
    values[kindAt] = kind;
    for (int i = 0; i < from.length; i++) values[to[i]] = input.get(from[i]);
    return new GenericRowWithSchema(values, output);
  }
}
