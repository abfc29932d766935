package txcoord;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The JVM twin of tests/reference/lifecycle.py: what happens to one transaction, in store time.
 *
 * <p>tests/reference/lifecycle.py is the readable reference model; this class follows it function by
 * function (same names in camelCase) so that the two can be read side by side, and
 * tests/streams/stage/test_lifecycle_twin.py drives both with random histories and demands identical
 * output. The table of legal moves is not repeated here: it is coordinator/core/state_machine.py's
 * TRANSITIONS, handed over as data ({@link Transitions}). No Spark in this class.
 */
public final class Lifecycle {
  private Lifecycle() {}

  public static final String COMMIT = "COMMIT";
  public static final String ROLLBACK = "ROLLBACK";
  public static final String UNKNOWN = "UNKNOWN";
  public static final String RESUME = "RESUME";
  /** How many judged decisive op ids a transaction remembers (lifecycle.JUDGED_MEMORY). */
  public static final int JUDGED_MEMORY = 8;

  public static final String PREPARED = "PREPARED";
  public static final String CHECKING = "CHECKING";
  public static final String COMMITTED = "COMMITTED";
  public static final String ROLLED_BACK = "ROLLED_BACK";
  public static final String DISCARDED = "DISCARDED";

  /** A half message, as the coordinator needs it for checks and delivery. */
  public record Half(
      String transactionId, String msgId, String producerGroup, String topic, int queueId,
      byte[] body, List<String> keys, String tags, List<String[]> properties,
      Integer checkImmunitySeconds, long storedMs) {
    Half withoutMessage() {
      return new Half(transactionId, msgId, producerGroup, topic, queueId, new byte[0],
          List.of(), tags, List.of(), checkImmunitySeconds, storedMs);
    }

    @Override
    public boolean equals(Object other) {
      if (!(other instanceof Half h)) return false;
      return transactionId.equals(h.transactionId) && msgId.equals(h.msgId)
          && producerGroup.equals(h.producerGroup) && topic.equals(h.topic)
          && queueId == h.queueId && Arrays.equals(body, h.body) && keys.equals(h.keys)
          && Objects.equals(tags, h.tags) && propertiesEqual(properties, h.properties)
          && Objects.equals(checkImmunitySeconds, h.checkImmunitySeconds)
          && storedMs == h.storedMs;
    }

    @Override
    public int hashCode() {
      return Objects.hash(transactionId, msgId, storedMs);
    }

    private static boolean propertiesEqual(List<String[]> a, List<String[]> b) {
      if (a.size() != b.size()) return false;
      for (int i = 0; i < a.size(); i++) {
        if (!Arrays.equals(a.get(i), b.get(i))) return false;
      }
      return true;
    }
  }

  /** An op record. */
  public record Op(
      String opId, String transactionId, String producerGroup, String op, boolean fromCheck,
      String operator, String reason, long storedMs) {}

  /** Store time, then op id (contract 3). */
  public static final Comparator<Op> ORDER =
      Comparator.comparingLong(Op::storedMs).thenComparing(Op::opId);

  /** The configuration, in milliseconds. */
  public record Rules(
      long timeoutMs, long checkIntervalMs, int checkMax, long fileReservedMs,
      long resolvedRetentionMs, long orphanWaitMs, long maxCheckImmunityMs)
      implements java.io.Serializable {}

  /** Everything remembered about one transaction between batches. */
  public record TxState(
      String state, Half half, int checkCount, String decidingOpId, List<Op> pendingOps,
      Long timerMs, List<String> judgedOps) {
    static TxState empty() {
      return new TxState(null, null, 0, null, List.of(), null, List.of());
    }

    TxState withState(String s) {
      return new TxState(s, half, checkCount, decidingOpId, pendingOps, timerMs, judgedOps);
    }

    TxState withHalf(Half h) {
      return new TxState(state, h, checkCount, decidingOpId, pendingOps, timerMs, judgedOps);
    }

    TxState withCheckCount(int n) {
      return new TxState(state, half, n, decidingOpId, pendingOps, timerMs, judgedOps);
    }

    TxState withDecidingOpId(String id) {
      return new TxState(state, half, checkCount, id, pendingOps, timerMs, judgedOps);
    }

    TxState withPendingOps(List<Op> ops) {
      return new TxState(state, half, checkCount, decidingOpId, ops, timerMs, judgedOps);
    }

    public TxState withTimerMs(Long t) {
      return new TxState(state, half, checkCount, decidingOpId, pendingOps, t, judgedOps);
    }

    TxState withJudgedOps(List<String> ids) {
      return new TxState(state, half, checkCount, decidingOpId, pendingOps, timerMs, ids);
    }
  }

  /** What an emitted row asks the writer to do (lifecycle.Kind). */
  public enum Kind { DELIVER, CHECK, FINAL, DISCARD, VERDICT }

  /** One row for the writer; which fields matter depends on the kind. */
  public record Emit(
      Kind kind, String transactionId, long atMs, Half half, Integer checkNumber, String state,
      String reason, Op op, String verdict, String detail, Integer checkCount,
      String decidingOpId) {}

  /** The result of an input or a timer: new state (null: forget it) and rows. */
  public record Step(TxState state, List<Emit> emits) {}

  /** coordinator/core/state_machine.py's TRANSITIONS: (state, event) -> (state, verdict). */
  public static final class Transitions implements java.io.Serializable {
    private final Map<String, String[]> table = new LinkedHashMap<>();

    /** Add one entry; `state|event` -> {new state, verdict}. */
    public void put(String state, String event, String newState, String verdict) {
      table.put(state + "|" + event, new String[] {newState, verdict});
    }

    String[] apply(String state, String event) {
      String[] outcome = table.get(state + "|" + event);
      if (outcome == null) {
        throw new IllegalStateException("no transition for " + state + " --" + event + "-->");
      }
      return outcome;
    }
  }

  static boolean isFinal(String state) {
    return COMMITTED.equals(state) || ROLLED_BACK.equals(state) || DISCARDED.equals(state);
  }

  public static boolean isResolved(TxState s) {
    return COMMITTED.equals(s.state()) || ROLLED_BACK.equals(s.state());
  }

  static boolean isLive(TxState s) {
    return PREPARED.equals(s.state()) || CHECKING.equals(s.state());
  }

  /** lifecycle.resolved_memory: a resolved transaction keeps no message. */
  public static TxState resolvedMemory(TxState s) {
    return s.withHalf(s.half().withoutMessage());
  }

  static String eventForOp(String op, boolean byOperator) {
    boolean allowed = COMMIT.equals(op) || ROLLBACK.equals(op) || UNKNOWN.equals(op)
        || (byOperator && RESUME.equals(op));
    if (!allowed) throw new IllegalArgumentException("op must not be " + op);
    if (byOperator && COMMIT.equals(op)) return "OPERATOR_COMMIT";
    if (byOperator && ROLLBACK.equals(op)) return "OPERATOR_ROLLBACK";
    return op;
  }

  static long firstCheckDueMs(Half half, Rules rules) {
    long immunity = half.checkImmunitySeconds() == null ? 0 : half.checkImmunitySeconds();
    long immunityMs = Math.min(immunity * 1000L, rules.maxCheckImmunityMs());
    return half.storedMs() + Math.max(rules.timeoutMs(), immunityMs);
  }

  static long expiresAtMs(Half half, Rules rules) {
    return half.storedMs() + rules.fileReservedMs();
  }

  static long liveTimer(Half half, long dueMs, Rules rules) {
    return Math.min(dueMs, expiresAtMs(half, rules));
  }

  private static Emit verdict(Op op, String verdict, long wallMs, String detail) {
    return new Emit(Kind.VERDICT, op.transactionId(), wallMs, null, null, null, null, op,
        verdict, detail, null, null);
  }

  private static Emit fin(TxState s, long wallMs, String reason, Op op) {
    return new Emit(Kind.FINAL, s.half().transactionId(), wallMs, s.half(), null, s.state(),
        reason, null, null, null, s.checkCount(), op != null ? op.opId() : s.decidingOpId());
  }

  private static long forgetAt(TxState s, long nowMs, Rules rules) {
    if (DISCARDED.equals(s.state())) return Math.max(nowMs, expiresAtMs(s.half(), rules));
    return nowMs + rules.resolvedRetentionMs();
  }

  private static boolean gaveUpBefore(TxState s, long storedMs, Rules rules) {
    long expiry = expiresAtMs(s.half(), rules);
    long timer = s.timerMs();
    return storedMs > expiry
        || (timer < storedMs && (timer >= expiry || s.checkCount() >= rules.checkMax()));
  }

  private static TxState applyOp(TxState s, Op op, long nowMs, long wallMs, Rules rules,
      Transitions transitions, List<Emit> emits) {
    Half half = s.half();
    String[] outcome =
        transitions.apply(s.state(), eventForOp(op.op(), op.operator() != null));
    emits.add(verdict(op, outcome[1], wallMs, null));
    if (!"APPLIED".equals(outcome[1])) return s;
    if (RESUME.equals(op.op())) {
      return s.withState(outcome[0]).withCheckCount(0)
          .withTimerMs(liveTimer(half, op.storedMs(), rules));
    }
    s = s.withState(outcome[0]).withDecidingOpId(op.opId());
    String reason = op.operator() != null ? "operator" : (op.fromCheck() ? "check" : "op");
    if (COMMITTED.equals(outcome[0])) {
      emits.add(new Emit(Kind.DELIVER, half.transactionId(), wallMs, half, null, null, null,
          op, null, null, null, null));
    }
    emits.add(fin(s, wallMs, reason, op));
    // From the decision (the batch's time; the watermark may be unset, 0, in first batches).
    long decided = Math.max(Math.max(nowMs, op.storedMs()), wallMs);
    return s.withTimerMs(forgetAt(s, decided, rules));
  }

  /** lifecycle.on_input. */
  public static Step onInput(TxState state, List<Half> halves, List<Op> ops, long nowMs,
      long wallMs, Rules rules, Transitions transitions) {
    TxState s = state != null ? state : TxState.empty();
    List<Emit> emits = new ArrayList<>();
    if (s.half() == null && !halves.isEmpty()) {
      Half first = halves.stream()
          .min(Comparator.comparingLong(Half::storedMs).thenComparing(Half::msgId)).get();
      s = s.withHalf(first).withState(s.state() != null ? s.state() : PREPARED);
    }
    java.util.Set<String> seen = new java.util.HashSet<>(s.judgedOps());
    for (Op op : s.pendingOps()) seen.add(op.opId());
    Map<String, Op> fresh = new LinkedHashMap<>();
    for (Op op : ops) {
      if (!seen.contains(op.opId())) fresh.put(op.opId(), op);
    }
    List<Op> arrived = new ArrayList<>(s.pendingOps());
    arrived.addAll(fresh.values());
    arrived.sort(ORDER);

    if (s.half() == null) {
      List<Op> waiting = new ArrayList<>();
      for (Op op : arrived) {
        if (COMMIT.equals(op.op()) || ROLLBACK.equals(op.op())) {
          waiting.add(op);
        } else {
          emits.add(verdict(op, "NO_EFFECT", wallMs, "no half yet"));
        }
      }
      if (waiting.isEmpty()) return new Step(null, emits);
      Long timer = !s.pendingOps().isEmpty()
          ? s.timerMs() : Long.valueOf(waiting.get(0).storedMs() + rules.orphanWaitMs());
      s = s.withPendingOps(List.copyOf(waiting)).withTimerMs(timer);
      if (timer != null && timer <= nowMs) {
        Step step = onTimer(s, nowMs, wallMs, rules, transitions);
        emits.addAll(step.emits());
        return new Step(step.state(), emits);
      }
      return new Step(s, emits);
    }

    s = armed(s.withPendingOps(List.of()), rules);
    for (Op op : arrived) {
      if (isLive(s) && gaveUpBefore(s, op.storedMs(), rules)) {
        Step step = fire(s, Math.max(nowMs, op.storedMs()), wallMs, rules, transitions);
        s = step.state();
        emits.addAll(step.emits());
      }
      s = applyOp(s, op, nowMs, wallMs, rules, transitions, emits);
      if (COMMIT.equals(op.op()) || ROLLBACK.equals(op.op()) || RESUME.equals(op.op())) {
        List<String> judged = new ArrayList<>(s.judgedOps());
        judged.add(op.opId());
        s = s.withJudgedOps(List.copyOf(
            judged.subList(Math.max(0, judged.size() - JUDGED_MEMORY), judged.size())));
      }
    }
    s = armed(s, rules);
    if (isLive(s) && s.timerMs() != null && s.timerMs() <= nowMs) {
      Step step = fire(s, nowMs, wallMs, rules, transitions);
      emits.addAll(step.emits());
      return settled(new Step(step.state(), emits), nowMs);
    }
    return settled(new Step(s, emits), nowMs);
  }

  private static TxState armed(TxState s, Rules rules) {
    if (isLive(s) && (s.timerMs() == null || PREPARED.equals(s.state()))) {
      long due = s.checkCount() == 0 ? firstCheckDueMs(s.half(), rules) : s.timerMs();
      return s.withTimerMs(liveTimer(s.half(), due, rules));
    }
    return s;
  }

  private static Step settled(Step step, long nowMs) {
    TxState s = step.state();
    if (s != null && s.state() != null && isFinal(s.state()) && s.timerMs() != null
        && s.timerMs() <= nowMs) {
      return new Step(null, step.emits());
    }
    return step;
  }

  /** lifecycle.on_timer. */
  public static Step onTimer(TxState state, long nowMs, long wallMs, Rules rules,
      Transitions transitions) {
    return settled(fire(state, nowMs, wallMs, rules, transitions), nowMs);
  }

  private static Step fire(TxState s, long nowMs, long wallMs, Rules rules,
      Transitions transitions) {
    Half half = s.half();
    if (half == null) {
      String detail = String.format("no half within %.0f s", rules.orphanWaitMs() / 1000.0);
      List<Emit> emits = new ArrayList<>();
      for (Op op : s.pendingOps()) emits.add(verdict(op, "ORPHAN", wallMs, detail));
      return new Step(null, emits);
    }
    if (isFinal(s.state())) return new Step(null, List.of());
    long reached = s.timerMs() == null ? nowMs : Math.max(nowMs, s.timerMs());
    if (reached >= expiresAtMs(half, rules)) {
      return discard(s, "EXPIRED", "expired", nowMs, wallMs, rules, transitions);
    }
    if (s.checkCount() >= rules.checkMax()) {
      return discard(s, "CHECKS_EXHAUSTED", "check_max", nowMs, wallMs, rules, transitions);
    }
    String[] outcome = transitions.apply(s.state(), "CHECK_DUE");
    s = s.withState(outcome[0]).withCheckCount(s.checkCount() + 1)
        .withTimerMs(liveTimer(half, Math.max(wallMs, nowMs) + rules.checkIntervalMs(), rules));
    Emit check = new Emit(Kind.CHECK, half.transactionId(), wallMs, half, s.checkCount(), null,
        null, null, null, null, null, null);
    return new Step(s, new ArrayList<>(List.of(check)));
  }

  private static Step discard(TxState s, String event, String reason, long nowMs, long wallMs,
      Rules rules, Transitions transitions) {
    Half half = s.half();
    String[] outcome = transitions.apply(s.state(), event);
    s = s.withState(outcome[0]);
    Emit gone = new Emit(Kind.DISCARD, half.transactionId(), wallMs, half, null, null, reason,
        null, null, null, s.checkCount(), null);
    List<Emit> emits = new ArrayList<>(List.of(gone, fin(s, wallMs, reason, null)));
    return new Step(s.withTimerMs(forgetAt(s, nowMs, rules)), emits);
  }
}
