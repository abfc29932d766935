package txcoord;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import txcoord.Lifecycle.Emit;
import txcoord.Lifecycle.Half;
import txcoord.Lifecycle.Op;
import txcoord.Lifecycle.Step;
import txcoord.Lifecycle.TxState;

/**
 * Runs a history through {@link Lifecycle}, for tests/streams/stage/test_lifecycle_twin.py.
 *
 * <p>A history is JSON: the rules, the table of moves, and steps ("input" with halves, ops and
 * the two times; "timer" at a time, acting only if the transaction's timer is due; "restart":
 * the state goes through the bytes the processor keeps, StateCodec, and back). The answer is, per step, the
 * rows emitted and the state after, in the field names of tests/reference/lifecycle.py.
 */
public final class Twin {
  private Twin() {}

  private static final ObjectMapper JSON = new ObjectMapper();

  /** Return the outputs of the history {@code historyJson} (see the class comment). */
  public static String run(String historyJson) throws Exception {
    JsonNode history = JSON.readTree(historyJson);
    Lifecycle.Rules rules = Stage.rules(history.get("rules"));
    Lifecycle.Transitions transitions = Stage.transitions(history.get("transitions"));
    ArrayNode out = JSON.createArrayNode();
    TxState state = null;
    for (JsonNode step : history.get("steps")) {
      String kind = step.get("kind").asText();
      List<Emit> emits = List.of();
      if (kind.equals("input")) {
        List<Half> halves = new ArrayList<>();
        for (JsonNode h : step.get("halves")) halves.add(half(h));
        List<Op> ops = new ArrayList<>();
        for (JsonNode o : step.get("ops")) ops.add(op(o));
        Step result = Lifecycle.onInput(state, halves, ops, step.get("now").asLong(),
            step.get("wall").asLong(), rules, transitions);
        state = result.state();
        emits = result.emits();
      } else if (kind.equals("timer")) {
        long now = step.get("now").asLong();
        if (state != null && state.timerMs() != null && state.timerMs() <= now) {
          Step result =
              Lifecycle.onTimer(state, now, step.get("wall").asLong(), rules, transitions);
          state = result.state();
          emits = result.emits();
        }
      } else if (kind.equals("restart")) {
        state = state == null ? null : StateCodec.decode(StateCodec.encode(state));
      } else {
        throw new IllegalArgumentException("unknown step kind " + kind);
      }
      ObjectNode result = out.addObject();
      ArrayNode rows = result.putArray("emits");
      for (Emit e : emits) rows.add(emit(e));
      result.set("state", state == null ? null : state(state));
    }
    return JSON.writeValueAsString(out);
  }

  private static Integer optInt(JsonNode node, String name) {
    JsonNode v = node.get(name);
    return v == null || v.isNull() ? null : v.asInt();
  }

  private static String optText(JsonNode node, String name) {
    JsonNode v = node.get(name);
    return v == null || v.isNull() ? null : v.asText();
  }

  static Half half(JsonNode h) {
    List<String> keys = new ArrayList<>();
    for (JsonNode k : h.get("keys")) keys.add(k.asText());
    List<String[]> props = new ArrayList<>();
    for (JsonNode p : h.get("properties")) props.add(new String[] {p.get(0).asText(), p.get(1).asText()});
    return new Half(h.get("transaction_id").asText(), h.get("msg_id").asText(),
        h.get("producer_group").asText(), h.get("topic").asText(), h.get("queue_id").asInt(),
        Base64.getDecoder().decode(h.get("body").asText()), List.copyOf(keys),
        optText(h, "tags"), List.copyOf(props), optInt(h, "check_immunity_seconds"),
        h.get("stored_ms").asLong());
  }

  static Op op(JsonNode o) {
    return new Op(o.get("op_id").asText(), o.get("transaction_id").asText(),
        o.get("producer_group").asText(), o.get("op").asText(),
        o.get("from_check").asBoolean(), optText(o, "operator"), optText(o, "reason"),
        o.get("stored_ms").asLong());
  }

  private static ObjectNode half(Half h) {
    ObjectNode n = JSON.createObjectNode();
    n.put("transaction_id", h.transactionId());
    n.put("msg_id", h.msgId());
    n.put("producer_group", h.producerGroup());
    n.put("topic", h.topic());
    n.put("queue_id", h.queueId());
    n.put("body", Base64.getEncoder().encodeToString(h.body()));
    ArrayNode keys = n.putArray("keys");
    h.keys().forEach(keys::add);
    n.put("tags", h.tags());
    ArrayNode props = n.putArray("properties");
    for (String[] p : h.properties()) props.addArray().add(p[0]).add(p[1]);
    n.put("check_immunity_seconds", h.checkImmunitySeconds());
    n.put("stored_ms", h.storedMs());
    return n;
  }

  private static ObjectNode op(Op o) {
    ObjectNode n = JSON.createObjectNode();
    n.put("op_id", o.opId());
    n.put("transaction_id", o.transactionId());
    n.put("producer_group", o.producerGroup());
    n.put("op", o.op());
    n.put("from_check", o.fromCheck());
    n.put("operator", o.operator());
    n.put("reason", o.reason());
    n.put("stored_ms", o.storedMs());
    return n;
  }

  private static ObjectNode emit(Emit e) {
    ObjectNode n = JSON.createObjectNode();
    n.put("kind", e.kind().name());
    n.put("transaction_id", e.transactionId());
    n.put("at_ms", e.atMs());
    n.set("half", e.half() == null ? null : half(e.half()));
    n.put("check_number", e.checkNumber());
    n.put("state", e.state());
    n.put("reason", e.reason());
    n.set("op", e.op() == null ? null : op(e.op()));
    n.put("verdict", e.verdict());
    n.put("detail", e.detail());
    n.put("check_count", e.checkCount());
    n.put("deciding_op_id", e.decidingOpId());
    return n;
  }

  private static ObjectNode state(TxState s) {
    ObjectNode n = JSON.createObjectNode();
    n.put("state", s.state());
    n.set("half", s.half() == null ? null : half(s.half()));
    n.put("check_count", s.checkCount());
    n.put("deciding_op_id", s.decidingOpId());
    ArrayNode pending = n.putArray("pending_ops");
    for (Op o : s.pendingOps()) pending.add(op(o));
    n.put("timer_ms", s.timerMs());
    ArrayNode judged = n.putArray("judged_ops");
    s.judgedOps().forEach(judged::add);
    return n;
  }
}
