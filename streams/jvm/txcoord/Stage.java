package txcoord;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.KeyValueGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.LongAccumulator;

/**
 * The entry point PySpark calls (streams/stage/processor.py): the stage's input, grouped by
 * (producer group, transaction id), through {@link TransactionProcessor} in event time.
 * Every input row also comes out once as a LAND row ({@link Landing}): the query reads Kafka
 * once, and the batch's records ride with its decisions to the writer.
 *
 * <p>Everything the stage needs comes from Python as one JSON document, so that every fact
 * has one home: the rules (streams/lifecycle.Rules), the table of legal moves
 * (core/state_machine.TRANSITIONS), the output schema, the heartbeat id and the landing.
 */
public final class Stage {
  private Stage() {}

  static Lifecycle.Rules rules(JsonNode r) {
    return new Lifecycle.Rules(r.get("timeout_ms").asLong(),
        r.get("check_interval_ms").asLong(), r.get("check_max").asInt(),
        r.get("file_reserved_ms").asLong(), r.get("resolved_retention_ms").asLong(),
        r.get("orphan_wait_ms").asLong(), r.get("max_check_immunity_ms").asLong());
  }

  static Lifecycle.Transitions transitions(JsonNode table) {
    Lifecycle.Transitions transitions = new Lifecycle.Transitions();
    for (JsonNode t : table) {
      transitions.put(t.get(0).asText(), t.get(1).asText(), t.get(2).asText(),
          t.get(3).asText());
    }
    return transitions;
  }

  /** Return the stage's output for its input, as described by {@code specJson}. */
  public static Dataset<Row> decisions(Dataset<Row> input, String specJson) throws Exception {
    return decisions(input, specJson, null, null);
  }

  /**
   * Return the stage's output for its input, starting a new checkpoint from {@code initial}:
   * rows of (producer_group, transaction_id, chunk), one per chunk of transactions, keyed by
   * one of them, chunk being the JSON document streams/stage/processor.py initial_chunks
   * makes (its stage partition and its transactions' states, each a {@link StageRows#STATE}
   * as Spark's to_json writes it), as bytes. Spark applies it in the checkpoint's first batch
   * only; {@code applied} counts the transactions loaded.
   */
  public static Dataset<Row> decisions(Dataset<Row> input, String specJson, Dataset<Row> initial,
      LongAccumulator applied) throws Exception {
    JsonNode spec = new ObjectMapper().readTree(specJson);
    StructType output = (StructType) DataType.fromJson(spec.get("output_schema").asText());
    TransactionProcessor processor = new TransactionProcessor(rules(spec.get("rules")),
        transitions(spec.get("transitions")), output, spec.get("heartbeat_id").asText(),
        Landing.of(input.schema(), output, spec.get("landing")), applied);
    // Grouped by columns, not by a key function: no row is turned into an object and back
    // just to compute its key (a key function costs a projection per row and the code
    // generated for it in every task).
    KeyValueGroupedDataset<Row, Row> grouped =
        input.groupBy(functions.col("producer_group"), functions.col("transaction_id"))
            .as(Encoders.row(StageRows.KEY), Encoders.row(input.schema()));
    if (initial == null) {
      return grouped.transformWithState(processor, TimeMode.EventTime(), OutputMode.Append(),
          Encoders.row(output));
    }
    // Each chunk crosses as one JSON document (bytes): Spark generates the code that turns an
    // initial-state row into its objects once per key (TransformWithStateExec
    // processInitialStateRows); for the state's nested layout that took ~2.4 ms a key (10^5
    // transactions: 4 minutes), for a byte array a key per transaction still two thirds of
    // loading 10^6 (profiled), so many transactions share one key.
    KeyValueGroupedDataset<Row, byte[]> start = initial
        .groupBy(functions.col("producer_group"), functions.col("transaction_id"))
        .as(Encoders.row(StageRows.KEY), Encoders.row(initial.schema()))
        .mapValues((MapFunction<Row, byte[]>) row -> row.<byte[]>getAs("chunk"),
            Encoders.BINARY());
    return grouped.transformWithState(processor, TimeMode.EventTime(), OutputMode.Append(),
        start, Encoders.row(output), Encoders.BINARY());
  }
}
