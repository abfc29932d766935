package txcoord.peer;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionChecker;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;
import org.apache.rocketmq.client.java.message.MessageViewImpl;

/**
 * A RocketMQ 5 application as its authors write it, with RocketMQ's own Java client: only the
 * endpoint (and the credentials) say that txcoord answers. One JSON object a line on stdout.
 *
 * <pre>
 * produce ENDPOINT TOPIC COUNT [ACCESS_KEY SECRET_KEY]
 *     COUNT transactions, keys jk-0 .. jk-(COUNT-1); by index mod 4: committed, rolled back,
 *     left open and committed by the checker, left open and answered UNKNOWN by the checker
 *     at its first check and COMMIT at a later one. Ends once every open one was committed.
 * consume ENDPOINT TOPIC GROUP EXPECTED SECONDS [ACCESS_KEY SECRET_KEY]
 *     a simple consumer of GROUP (says "ready" once built, as a new group reads from then
 *     on): receives and acks until EXPECTED messages came, then
 *     receives a while longer (a duplicate would show), or until SECONDS passed.
 * push ENDPOINT TOPIC GROUP STOP_FILE SECONDS [ACCESS_KEY SECRET_KEY]
 *     a push consumer of GROUP with one consumption thread (so its listener sees a queue's
 *     messages in the order they came): says "ready" once built, "received" for each message
 *     (its queue and offset: MessageViewImpl, the client's own view), consumed with SUCCESS;
 *     once STOP_FILE exists (or SECONDS passed) it closes, which tells the server it
 *     terminates, and says "closed".
 * </pre>
 */
public final class RocketMqPeer {
  private static final Map<String, AtomicInteger> CHECKS = new ConcurrentHashMap<>();

  private RocketMqPeer() {}

  public static void main(String[] args) throws Exception {
    switch (args.length > 0 ? args[0] : "") {
      case "produce" -> System.exit(produce(args));
      case "consume" -> System.exit(consume(args));
      case "push" -> System.exit(push(args));
      default -> {
        System.err.println("usage: produce ENDPOINT TOPIC COUNT [AK SK] | consume ENDPOINT TOPIC GROUP EXPECTED SECONDS [AK SK]"
            + " | push ENDPOINT TOPIC GROUP STOP_FILE SECONDS [AK SK]");
        System.exit(2);
      }
    }
  }

  private static ClientConfiguration configuration(String endpoint, String[] args, int keyAt) {
    ClientConfigurationBuilder builder =
        ClientConfiguration.newBuilder()
            .setEndpoints(endpoint)
            .enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(30));
    if (args.length > keyAt + 1) {
      builder.setCredentialProvider(new StaticSessionCredentialsProvider(args[keyAt], args[keyAt + 1]));
    }
    return builder.build();
  }

  private static void say(String json) {
    synchronized (System.out) {
      System.out.println(json);
      System.out.flush();
    }
  }

  private static String key(MessageView view) {
    return view.getKeys().isEmpty() ? "" : view.getKeys().iterator().next();
  }

  private static int produce(String[] args) throws Exception {
    String endpoint = args[1];
    String topic = args[2];
    int count = Integer.parseInt(args[3]);
    ClientServiceProvider provider = ClientServiceProvider.loadService();
    TransactionChecker checker =
        view -> {
          String key = key(view);
          int nth = CHECKS.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
          int index = Integer.parseInt(key.substring(key.indexOf('-') + 1));
          TransactionResolution answer =
              index % 4 == 3 && nth == 1 ? TransactionResolution.UNKNOWN : TransactionResolution.COMMIT;
          say(String.format("{\"event\": \"check\", \"key\": \"%s\", \"nth\": %d, \"answer\": \"%s\"}", key, nth, answer));
          return answer;
        };
    try (Producer producer =
        provider.newProducerBuilder()
            .setClientConfiguration(configuration(endpoint, args, 4))
            .setTopics(topic)
            .setTransactionChecker(checker)
            .build()) {
      List<String> open = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        String key = "jk-" + i;
        Message message =
            provider.newMessageBuilder()
                .setTopic(topic)
                .setKeys(key)
                .setTag("java")
                .addProperty("index", Integer.toString(i))
                .setBody(("java message " + i).getBytes(StandardCharsets.UTF_8))
                .build();
        Transaction transaction = producer.beginTransaction();
        SendReceipt receipt = producer.send(message, transaction);
        String action;
        switch (i % 4) {
          case 0 -> { transaction.commit(); action = "commit"; }
          case 1 -> { transaction.rollback(); action = "rollback"; }
          default -> { open.add(key); action = "open"; }
        }
        say(String.format("{\"event\": \"sent\", \"key\": \"%s\", \"message_id\": \"%s\", \"action\": \"%s\"}",
            key, receipt.getMessageId(), action));
      }
      long deadline = System.nanoTime() + Duration.ofSeconds(240).toNanos();
      while (System.nanoTime() < deadline && !resolved(open)) {
        Thread.sleep(200);
      }
      boolean done = resolved(open);
      say(String.format("{\"event\": \"done\", \"resolved\": %b}", done));
      return done ? 0 : 1;
    }
  }

  /** Every open transaction had its COMMIT from the checker (the UNKNOWN ones at a later check). */
  private static boolean resolved(List<String> open) {
    for (String key : open) {
      int index = Integer.parseInt(key.substring(key.indexOf('-') + 1));
      AtomicInteger checks = CHECKS.get(key);
      if (checks == null || checks.get() < (index % 4 == 3 ? 2 : 1)) {
        return false;
      }
    }
    return true;
  }

  private static int consume(String[] args) throws Exception {
    String endpoint = args[1];
    String topic = args[2];
    String group = args[3];
    int expected = Integer.parseInt(args[4]);
    long deadline = System.nanoTime() + Duration.ofSeconds(Long.parseLong(args[5])).toNanos();
    ClientServiceProvider provider = ClientServiceProvider.loadService();
    FilterExpression all = new FilterExpression("*", FilterExpressionType.TAG);
    int received = 0;
    long quietUntil = Long.MAX_VALUE;
    try (SimpleConsumer consumer =
        provider.newSimpleConsumerBuilder()
            .setClientConfiguration(configuration(endpoint, args, 6))
            .setConsumerGroup(group)
            .setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(Collections.singletonMap(topic, all))
            .build()) {
      say("{\"event\": \"ready\"}");
      while (System.nanoTime() < Math.min(deadline, quietUntil)) {
        for (MessageView view : consumer.receive(16, Duration.ofSeconds(30))) {
          received++;
          say(String.format(
              "{\"event\": \"received\", \"key\": \"%s\", \"topic\": \"%s\", \"tag\": \"%s\", \"body\": \"%s\", \"attempt\": %d}",
              key(view), view.getTopic(), view.getTag().orElse(""),
              StandardCharsets.UTF_8.decode(view.getBody()), view.getDeliveryAttempt()));
          consumer.ack(view);
        }
        if (received >= expected && quietUntil == Long.MAX_VALUE) {
          quietUntil = System.nanoTime() + Duration.ofSeconds(6).toNanos();
        }
      }
      say(String.format("{\"event\": \"done\", \"received\": %d}", received));
      return received >= expected ? 0 : 1;
    }
  }

  private static int push(String[] args) throws Exception {
    String endpoint = args[1];
    String topic = args[2];
    String group = args[3];
    Path stop = Path.of(args[4]);
    long deadline = System.nanoTime() + Duration.ofSeconds(Long.parseLong(args[5])).toNanos();
    ClientServiceProvider provider = ClientServiceProvider.loadService();
    FilterExpression all = new FilterExpression("*", FilterExpressionType.TAG);
    PushConsumer consumer =
        provider.newPushConsumerBuilder()
            .setClientConfiguration(configuration(endpoint, args, 6))
            .setConsumerGroup(group)
            .setSubscriptionExpressions(Collections.singletonMap(topic, all))
            .setConsumptionThreadCount(1)
            .setMessageListener(
                view -> {
                  MessageViewImpl impl = (MessageViewImpl) view;
                  say(String.format(
                      "{\"event\": \"received\", \"key\": \"%s\", \"message_id\": \"%s\", \"queue\": %d, \"offset\": %d, \"attempt\": %d}",
                      key(view), view.getMessageId(), impl.getMessageQueue().getQueueId(),
                      impl.getOffset(), view.getDeliveryAttempt()));
                  return ConsumeResult.SUCCESS;
                })
            .build();
    say("{\"event\": \"ready\"}");
    while (System.nanoTime() < deadline && !Files.exists(stop)) {
      Thread.sleep(100);
    }
    consumer.close();
    say("{\"event\": \"closed\"}");
    return 0;
  }
}
