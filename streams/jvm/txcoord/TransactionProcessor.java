package txcoord;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessorWithInitialState;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.execution.streaming.operators.stateful.transformwithstate.statefulprocessor.ImplicitGroupingKeyTracker;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.LongAccumulator;
import scala.jdk.javaapi.CollectionConverters;
import txcoord.Lifecycle.Emit;
import txcoord.Lifecycle.Half;
import txcoord.Lifecycle.Op;
import txcoord.Lifecycle.Step;
import txcoord.Lifecycle.TxState;

/**
 * transformWithState processor, in event time: one {@link Lifecycle} transaction per key
 * (producer group, transaction id).
 *
 * <p>The watermark is store time the stream has seen everything up to; the batch's processing
 * time is what output rows record. One state variable holds a transaction, live or decided (a
 * decided one without its message: it only judges later ops), with its one event-time timer
 * (Spark allows no TTL in event time): the next check, discard or expiry, or when a decided
 * one is forgotten ({@code resolved_retention} after its decision). The variable holds the
 * state as bytes ({@link StateCodec}: Spark builds a variable's encoders in every task). A
 * second variable for decided transactions lost them in this Spark
 * (tests/streams/stage/test_retention.py failed).
 */
public final class TransactionProcessor
    extends StatefulProcessorWithInitialState<Row, Row, Row, byte[]> {
  private final Lifecycle.Rules rules;
  private final Lifecycle.Transitions transitions;
  private final StageRows.OutputLayout output;
  private final String heartbeatId;
  private final Landing landing;
  private final LongAccumulator applied;
  private transient ValueState<byte[]> live;

  public TransactionProcessor(Lifecycle.Rules rules, Lifecycle.Transitions transitions,
      StructType output, String heartbeatId, Landing landing, LongAccumulator applied) {
    this.rules = rules;
    this.applied = applied;
    this.landing = landing;
    this.transitions = transitions;
    this.output = new StageRows.OutputLayout(output);
    this.heartbeatId = heartbeatId;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    live = getHandle().getValueState(
        "transaction", Encoders.BINARY(), TTLConfig.NONE());
  }

  private record Loaded(TxState state, ValueState<byte[]> heldIn) {}

  private Loaded load() {
    byte[] stored = live.get();
    return stored == null ? new Loaded(null, null) : new Loaded(StateCodec.decode(stored), live);
  }

  private scala.collection.Iterator<Row> save(Loaded before, Long oldTimer, Step step,
      List<Row> rows) {
    TxState after = step.state();
    if (after != null && Lifecycle.isResolved(after)) {
      after = Lifecycle.resolvedMemory(after); // no message: it only judges later ops
    }
    Long newTimer = after != null ? after.timerMs() : null;
    if (oldTimer != null && !oldTimer.equals(newTimer)) getHandle().deleteTimer(oldTimer);
    if (newTimer != null && !newTimer.equals(oldTimer)) getHandle().registerTimer(newTimer);
    ValueState<byte[]> target = after == null ? null : live;
    if (before.heldIn() != null && before.heldIn() != target) before.heldIn().clear();
    if (target != null && (!after.equals(before.state()) || before.heldIn() != target)) {
      target.update(StateCodec.encode(after));
    }
    for (Emit emit : step.emits()) rows.add(StageRows.rowOf(emit, output));
    return CollectionConverters.asScala(rows.iterator());
  }

  /**
   * The timer that wakes a transaction started with ops to judge (WAKE_MS: due at the first
   * watermark): ops a crash left unjudged, in a state derived from the warehouse.
   */
  static final long WAKE_MS = 1L;

  /**
   * Load a chunk of transactions (Stage.java): each under its own key, made the handle's
   * current key for its writes, as Spark does for the key it passes (the chunk's
   * representative, restored last). The chunk must have reached the task of its stage
   * partition: a state kept in another partition would never meet its transaction's input.
   */
  @Override
  public void handleInitialState(Row key, byte[] chunk, TimerValues timerValues) {
    JsonNode document = StageRows.json(chunk);
    int partition = document.get("partition").asInt();
    if (partition != TaskContext.getPartitionId()) {
      throw new IllegalStateException("a chunk of initial state for stage partition "
          + partition + " reached the task of partition " + TaskContext.getPartitionId());
    }
    long loaded = 0;
    try {
      for (JsonNode member : document.get("states")) {
        ImplicitGroupingKeyTracker.setImplicitKey(StageRows.keyOf(member));
        TxState state = StageRows.ofJson(member.get("state"));
        live.update(StateCodec.encode(state));
        if (state.timerMs() != null) getHandle().registerTimer(state.timerMs());
        if (state.half() != null && !state.pendingOps().isEmpty()) {
          getHandle().registerTimer(WAKE_MS);
        }
        loaded++;
      }
    } finally {
      ImplicitGroupingKeyTracker.setImplicitKey(key);
    }
    if (applied != null) applied.add(loaded);
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(
      Row key, scala.collection.Iterator<Row> inputRows, TimerValues timerValues) {
    List<Row> out = new ArrayList<>();
    Iterator<Row> rows = CollectionConverters.asJava(inputRows);
    if (key.isNullAt(0) && heartbeatId.equals(key.getString(1))) {
      // Heartbeats (they only move the watermark) and invalid records: landed, not decided.
      while (rows.hasNext()) out.add(landing.rowOf(rows.next()));
      return CollectionConverters.asScala(out.iterator());
    }
    List<Half> halves = new ArrayList<>();
    List<Op> ops = new ArrayList<>();
    while (rows.hasNext()) {
      Row row = rows.next();
      out.add(landing.rowOf(row));
      Half half = StageRows.halfOf(row, landing.body(row));
      if (half != null) halves.add(half);
      Op op = StageRows.opOf(row);
      if (op != null) ops.add(op);
    }
    Loaded before = load();
    Step step = Lifecycle.onInput(before.state(), halves, ops,
        timerValues.getCurrentWatermarkInMs(), timerValues.getCurrentProcessingTimeInMs(),
        rules, transitions);
    Long oldTimer = before.state() != null ? before.state().timerMs() : null;
    return save(before, oldTimer, step, out);
  }

  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(
      Row key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    Loaded before = load();
    TxState state = before.state();
    if (state != null && state.half() != null && !state.pendingOps().isEmpty()) {
      // Woken to judge ops it started with (handleInitialState): as if they came now.
      Step step = Lifecycle.onInput(state, List.of(), List.of(),
          timerValues.getCurrentWatermarkInMs(), timerValues.getCurrentProcessingTimeInMs(),
          rules, transitions);
      Long ownTimer = expiredTimerInfo.getExpiryTimeInMs() == WAKE_MS ? state.timerMs() : null;
      return save(before, ownTimer, step, new ArrayList<>());
    }
    if (state == null || state.timerMs() == null
        || state.timerMs() != expiredTimerInfo.getExpiryTimeInMs()) {
      return scala.collection.Iterator.empty(); // a timer this transaction no longer uses
    }
    Step step = Lifecycle.onTimer(state, timerValues.getCurrentWatermarkInMs(),
        timerValues.getCurrentProcessingTimeInMs(), rules, transitions);
    return save(before, null, step, new ArrayList<>()); // the fired timer is gone: never delete it again
  }
}
