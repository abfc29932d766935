package txcoord;

import java.util.HashMap;
import java.util.Map;
import org.apache.spark.util.AccumulatorV2;

/**
 * How many state rows each task of the stage added or removed, per (batch, partition): the
 * stage counts its own state (streams/state_rows.py) so that RocksDB need not.
 *
 * <p>Spark's own count of a RocksDB store's rows reads every key before it is written or
 * removed, to know whether it was there: 7% of the Spark JVM's CPU in the bench, the
 * processor already knowing the answer. A task adds its partition's net change once, when
 * it ends. Merging keeps the latest figure of a (batch, partition) instead of adding it
 * again: a retried task, or a batch computed twice (streams/batch_collect.py), starts from
 * the same state and reports the same change.
 */
public final class StateRowDeltas extends AccumulatorV2<long[], Map<Long, Long>> {
  private static final long serialVersionUID = 1L;

  /** (batch id, partition) -> net rows added. */
  private final Map<Long, Map<Integer, Long>> deltas = new HashMap<>();

  @Override
  public synchronized boolean isZero() {
    return deltas.isEmpty();
  }

  @Override
  public synchronized StateRowDeltas copy() {
    StateRowDeltas copy = new StateRowDeltas();
    copy.merge(this);
    return copy;
  }

  @Override
  public synchronized void reset() {
    deltas.clear();
  }

  /** Record {@code {batch id, partition, net rows added}}, replacing an earlier figure. */
  @Override
  public synchronized void add(long[] change) {
    deltas.computeIfAbsent(change[0], batch -> new HashMap<>()).put((int) change[1], change[2]);
  }

  @Override
  public void merge(AccumulatorV2<long[], Map<Long, Long>> other) {
    Map<Long, Map<Integer, Long>> theirs;
    synchronized (other) {
      theirs = new HashMap<>();
      for (Map.Entry<Long, Map<Integer, Long>> e : ((StateRowDeltas) other).deltas.entrySet()) {
        theirs.put(e.getKey(), new HashMap<>(e.getValue()));
      }
    }
    synchronized (this) {
      theirs.forEach((batch, parts) ->
          deltas.computeIfAbsent(batch, b -> new HashMap<>()).putAll(parts));
    }
  }

  /** Return each batch's net rows added, over its partitions. */
  @Override
  public synchronized Map<Long, Long> value() {
    Map<Long, Long> sums = new HashMap<>();
    deltas.forEach((batch, parts) ->
        sums.put(batch, parts.values().stream().mapToLong(Long::longValue).sum()));
    return sums;
  }

  /** Return batch {@code batchId}'s net rows added (0 if no task reported), and forget it
   * with every batch before it. */
  public synchronized long take(long batchId) {
    Map<Integer, Long> parts = deltas.get(batchId);
    long sum = parts == null ? 0 : parts.values().stream().mapToLong(Long::longValue).sum();
    deltas.keySet().removeIf(batch -> batch <= batchId);
    return sum;
  }
}
