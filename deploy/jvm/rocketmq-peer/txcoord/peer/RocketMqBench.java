package txcoord.peer;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionChecker;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * The load of `txcoord bench --path grpc` (coordinator/bench/grpc_driver.py): RocketMQ's own Java
 * client, a transactional producer as an application writes it (beginTransaction, send, commit or
 * rollback, or neither and its TransactionChecker decides), driven at the bench's mix and pace.
 *
 * <p>Arguments, each key=value: endpoint, topic, run (transaction id prefix), cycle (the mix's
 * kind codes in the order the bench deals them, repeated), kinds (code=name:FIRST:ANSWER:N;...:
 * FIRST is COMMIT, ROLLBACK or UNKNOWN, which leaves the transaction to the checker; ANSWER is
 * given at check N, UNKNOWN before), count or duration (s), window, rate (tx/s, 0: none),
 * senders (threads, each one transaction at a time: the client sends transactional messages
 * synchronously), body (bytes), out (file).
 *
 * <p>Standard input, a line each: "decided N" (the coordinator's decisions so far, for the
 * in-flight window), "enough" (send no more), "stop" (write the out file and end). Standard
 * output, one JSON object a line: ready, progress (4 a second), sent (all sent and answered),
 * error, done. The out file, one tab-separated line each: "tx key message_id began_ms half_ms
 * end_ms" (end_ms -1: left to the checker) and "check key number at_ms answer".
 */
public final class RocketMqBench {
  private final Map<String, String> args;
  private final Map<String, String[]> kinds = new HashMap<>(); // code -> name, first, answer, n
  private final String[] cycle;
  private final int window;
  private final double rate;
  private final long count;
  private final long durationNanos;
  private final byte[] body;
  private final ConcurrentLinkedQueue<String> lines = new ConcurrentLinkedQueue<>();
  private final long started = System.nanoTime();
  private long number; // transactions dealt; guarded by this
  private long sent; // transactions sent and ended as their kind says; guarded by this
  private long decided; // guarded by this
  private boolean enough; // guarded by this
  private volatile String failure;

  private RocketMqBench(Map<String, String> args) {
    this.args = args;
    for (String kind : args.get("kinds").split(";")) {
      String[] parts = kind.split("=", 2);
      kinds.put(parts[0], parts[1].split(":"));
    }
    cycle = args.get("cycle").split(",");
    window = Integer.parseInt(args.getOrDefault("window", "10000"));
    rate = Double.parseDouble(args.getOrDefault("rate", "0"));
    count = Long.parseLong(args.getOrDefault("count", "0"));
    durationNanos = (long) (Double.parseDouble(args.getOrDefault("duration", "0")) * 1e9);
    body = new byte[Integer.parseInt(args.getOrDefault("body", "100"))];
    Arrays.fill(body, (byte) 'x');
  }

  public static void main(String[] argv) throws Exception {
    Map<String, String> args = new HashMap<>();
    for (String arg : argv) {
      String[] parts = arg.split("=", 2);
      args.put(parts[0], parts.length > 1 ? parts[1] : "");
    }
    System.exit(new RocketMqBench(args).run());
  }

  private static void say(String json) {
    synchronized (System.out) {
      System.out.println(json);
      System.out.flush();
    }
  }

  private static long now() {
    return System.currentTimeMillis();
  }

  private static String quoted(String text) {
    return "\"" + text.replace("\\", "\\\\").replace("\"", "'").replace("\n", " ") + "\"";
  }

  /** The checker: each kind's answer, UNKNOWN before its deciding check; every check noted. */
  private TransactionResolution check(MessageView view) {
    String key = view.getKeys().isEmpty() ? "" : view.getKeys().iterator().next();
    String[] kind = kinds.get(key.substring(key.lastIndexOf('-') + 1));
    int nth = view.getDeliveryAttempt(); // the check's number (docs/rocketmq.md)
    TransactionResolution answer =
        kind == null || nth < Integer.parseInt(kind[3])
            ? TransactionResolution.UNKNOWN
            : TransactionResolution.valueOf(kind[2]);
    lines.add("check\t" + key + "\t" + nth + "\t" + now() + "\t" + answer);
    return answer;
  }

  /** Return the next transaction's number, or -1 when the plan is complete or stopped. */
  private synchronized long deal() throws InterruptedException {
    while (true) {
      long elapsed = System.nanoTime() - started;
      if (enough || failure != null || (count > 0 && number >= count)) {
        return -1;
      }
      if (durationNanos > 0 && elapsed >= durationNanos) {
        return -1;
      }
      boolean room = number - decided < window && (rate <= 0 || number < rate * elapsed / 1e9 + 1);
      if (room) {
        return number++;
      }
      wait(5);
    }
  }

  private void send(Producer producer, ClientServiceProvider provider) {
    try {
      for (long n; (n = deal()) >= 0; ) {
        String code = cycle[(int) (n % cycle.length)];
        String[] kind = kinds.get(code);
        String key = String.format("%s-%09d-%s", args.get("run"), n, code);
        Message message =
            provider.newMessageBuilder()
                .setTopic(args.get("topic"))
                .setKeys(key)
                .addProperty("bench.kind", kind[0])
                .setBody(body)
                .build();
        long began = now();
        Transaction transaction = producer.beginTransaction();
        SendReceipt receipt = producer.send(message, transaction);
        long half = now();
        long end = -1;
        if (kind[1].equals("COMMIT")) {
          transaction.commit();
          end = now();
        } else if (kind[1].equals("ROLLBACK")) {
          transaction.rollback();
          end = now();
        }
        lines.add(
            "tx\t" + key + "\t" + receipt.getMessageId() + "\t" + began + "\t" + half + "\t" + end);
        synchronized (this) {
          sent++;
        }
      }
    } catch (Exception exc) {
      failure = exc.toString();
      say("{\"event\": \"error\", \"message\": " + quoted(exc.toString()) + "}");
    }
  }

  /** Read the parent's lines: decided counts, enough, stop (or its end). */
  private void listen(CountDownLatch stop) {
    try (BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
      for (String line; (line = in.readLine()) != null; ) {
        if (line.startsWith("decided ")) {
          synchronized (this) {
            decided = Long.parseLong(line.substring(8).trim());
            notifyAll();
          }
        } else if (line.equals("enough")) {
          synchronized (this) {
            enough = true;
            notifyAll();
          }
        } else if (line.equals("stop")) {
          break;
        }
      }
    } catch (IOException exc) {
      failure = failure == null ? exc.toString() : failure;
    }
    stop.countDown();
  }

  private int run() throws Exception {
    ClientServiceProvider provider = ClientServiceProvider.loadService();
    ClientConfiguration configuration =
        ClientConfiguration.newBuilder()
            .setEndpoints(args.get("endpoint"))
            .enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(30))
            .build();
    TransactionChecker checker = this::check;
    CountDownLatch stop = new CountDownLatch(1);
    try (Producer producer =
        provider.newProducerBuilder()
            .setClientConfiguration(configuration)
            .setTopics(args.get("topic"))
            .setTransactionChecker(checker)
            .build()) {
      say("{\"event\": \"ready\"}");
      Thread listener = new Thread(() -> listen(stop), "bench-stdin");
      listener.setDaemon(true);
      listener.start();
      long sendStarted = now();
      int senders = Integer.parseInt(args.getOrDefault("senders", "16"));
      Thread[] threads = new Thread[senders];
      for (int i = 0; i < senders; i++) {
        threads[i] = new Thread(() -> send(producer, provider), "bench-sender-" + i);
        threads[i].start();
      }
      for (Thread thread : threads) {
        while (thread.isAlive()) {
          thread.join(250);
          synchronized (this) {
            say("{\"event\": \"progress\", \"sent\": " + sent + "}");
          }
        }
      }
      long sendFinished = now();
      synchronized (this) {
        say(String.format(
            "{\"event\": \"sent\", \"sent\": %d, \"started_ms\": %d, \"finished_ms\": %d}",
            sent, sendStarted, sendFinished));
      }
      stop.await(); // the checker answers until the parent saw every decision
    }
    Path file = Path.of(args.get("out"));
    try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(file, StandardCharsets.UTF_8))) {
      for (String line : lines) {
        out.println(line);
      }
    }
    say("{\"event\": \"done\", \"failure\": " + (failure == null ? "null" : quoted(failure)) + "}");
    return failure == null ? 0 : 1;
  }
}
