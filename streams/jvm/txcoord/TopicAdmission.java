package txcoord;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * Which new topics a half may bring in with auto_create_topic_enable on: the ingest's one
 * rule that depends on more than the record (streams/ingest/topic_admission.py holds its readable
 * model and sets what it knows; tests/streams/ingest/test_topic_admission.py holds the two together).
 *
 * <p>The driver sets the topics the warehouse knows before each batch (each with the producer
 * group that brought it in), and this object is serialized into the batch's tasks with them.
 * A half naming a known topic passes. A half naming a new one passes while there is room: at
 * most {@code maxTopics} known topics in all and {@code maxPerGroup} brought in by its group.
 * Tasks cannot tell each other what they let in, so each ingress partition gets its share of
 * the room for the batch, a ceiling of the room divided by {@code partitions} (the partitions
 * of a half topic), counted in offset order within that partition: the outcome of every record
 * depends only on what the driver set and on its own partition's records before it, so a task
 * run again (a retry, a replayed batch, a landing repair) decides exactly as the first time.
 * One batch may therefore pass a limit by less than one share per partition that carried new
 * topics, and a half past its partition's share is refused even while the warehouse still has
 * room: the limits are against a producer that names topics without end, not a quota.
 */
public final class TopicAdmission implements Serializable {
  private static final long serialVersionUID = 1L;

  private final int maxTopics;
  private final int maxPerGroup;
  private final int partitions;
  private final String limitText;
  private final String groupLimitText;
  // What the driver knows: topic -> the group that brought it in ("" when unknown), and the
  // count per group. Replaced whole by setKnown, between batches.
  private Map<String, String> known = new HashMap<>();
  private Map<String, Integer> perGroup = new HashMap<>();
  // A task's own: the new topics each of its partitions let in, and per group.
  private transient Map<String, Set<String>> admitted;
  private transient Map<String, Map<String, Integer>> admittedPerGroup;

  public TopicAdmission(int maxTopics, int maxPerGroup, int partitions, String limitText,
      String groupLimitText) {
    this.maxTopics = maxTopics;
    this.maxPerGroup = maxPerGroup;
    this.partitions = Math.max(1, partitions);
    this.limitText = limitText;
    this.groupLimitText = groupLimitText;
  }

  /** Set the known topics, a JSON object {topic: group or null}; the next batch uses them. */
  public void setKnown(String json) throws Exception {
    Map<String, String> topics = new HashMap<>();
    Map<String, Integer> counts = new HashMap<>();
    JsonNode node = new ObjectMapper().readTree(json);
    for (Map.Entry<String, JsonNode> entry : node.properties()) {
      String group = entry.getValue().isNull() ? "" : entry.getValue().asText();
      topics.put(entry.getKey(), group);
      if (!group.isEmpty()) counts.merge(group, 1, Integer::sum);
    }
    known = topics;
    perGroup = counts;
  }

  /** The number of known topics (for the driver's log). */
  public int knownCount() {
    return known.size();
  }

  private static int share(int room, int parts) {
    return room <= 0 ? 0 : (room + parts - 1) / parts;
  }

  /**
   * The reason a valid half of {@code group} naming {@code topic}, read from {@code source}
   * partition {@code partition}, is refused; null when it passes (and, if its topic is new,
   * it counts against its partition's share from now on).
   */
  String refusal(String topic, String group, String source, Integer partition) {
    if (known.containsKey(topic)) return null;
    if (admitted == null) {
      admitted = new HashMap<>();
      admittedPerGroup = new HashMap<>();
    }
    String where = source + "\u0000" + partition;
    Set<String> here = admitted.computeIfAbsent(where, k -> new HashSet<>());
    if (here.contains(topic)) return null;
    if (here.size() >= share(maxTopics - known.size(), partitions)) return limitText;
    Map<String, Integer> groups = admittedPerGroup.computeIfAbsent(where, k -> new HashMap<>());
    int used = perGroup.getOrDefault(group, 0);
    if (groups.getOrDefault(group, 0) >= share(maxPerGroup - used, partitions)) {
      return groupLimitText;
    }
    here.add(topic);
    groups.merge(group, 1, Integer::sum);
    return null;
  }
}
