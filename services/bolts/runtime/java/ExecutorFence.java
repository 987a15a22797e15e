package squall.spark;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.spark.ExceptionFailure;
import org.apache.spark.ExecutorAllocationClient;
import org.apache.spark.SparkContext;
import org.apache.spark.Success$;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Removes from the application an executor whose bolt task said its host is cut off from
 * Kafka (services/bolts/kafka_fence.py), and asks for executors again later.
 *
 * A failed task is retried, and Spark may well retry it on the same executor: on a host cut
 * off from Kafka every retry waits out the fence again. Spark's own exclusion
 * (spark.excludeOnFailure) would also exclude executors for a bolt's crash, and abort the
 * stage where no other executor is free. So only the executors a task named are removed, with
 * the application's executor target lowered first, or the cluster manager would start the
 * replacement on the same host. The target is lifted after {@code rejoinMs}, doubled for each
 * removal on the same host in a row, until a task succeeds there again. The last executor
 * is never removed: when every one says it, Kafka is down for all, and its tasks wait.
 */
public final class ExecutorFence extends SparkListener {
    /** The text a bolt task's error carries when its host cannot reach Kafka. */
    public static final String MARKER = "squall: executor cut off from Kafka";
    private static final Logger LOG = LoggerFactory.getLogger("squall.bolts.fence");
    private static final int MAX_DOUBLINGS = 4;

    private final SparkContext sc;
    private final long rejoinMs;
    /** Every executor removed or being removed (an application never reuses an id). */
    private final Set<String> fenced = ConcurrentHashMap.newKeySet();
    private final Map<String, Integer> strikes = new ConcurrentHashMap<>();
    private final AtomicLong removed = new AtomicLong();
    private final AtomicLong kept = new AtomicLong();
    private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "squall-executor-fence");
        t.setDaemon(true);
        return t;
    });

    private ExecutorFence(SparkContext sc, long rejoinMs) {
        this.sc = sc;
        this.rejoinMs = rejoinMs;
    }

    /** The fence, listening to {@code sc}'s tasks. */
    public static ExecutorFence install(SparkContext sc, long rejoinMs) {
        ExecutorFence f = new ExecutorFence(sc, rejoinMs);
        sc.addSparkListener(f);
        return f;
    }

    /** How many executors this fence removed. */
    public long removed() {
        return removed.get();
    }

    /** How many times the application's last executor was named and kept. */
    public long kept() {
        return kept.get();
    }

    /** How many executors a task named as cut off from Kafka (removed, or being removed). */
    public int named() {
        return fenced.size();
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd end) {
        String host = end.taskInfo().host();
        if (end.reason() == Success$.MODULE$) {
            strikes.remove(host);
            return;
        }
        if (!(end.reason() instanceof ExceptionFailure)) {
            return;
        }
        // The Python error reaches the JVM as text only: the marker is its one channel.
        ExceptionFailure failure = (ExceptionFailure) end.reason();
        if (!(failure.description() + failure.fullStackTrace()).contains(MARKER)) {
            return;
        }
        String id = end.taskInfo().executorId();
        if (fenced.add(id)) {
            // The listener bus must not wait on the cluster manager.
            timer.execute(() -> remove(id, host));
        }
    }

    private void remove(String id, String host) {
        try {
            long keep = CollectionConverters.asJava(sc.getExecutorIds()).stream()
                .filter(e -> !fenced.contains(e)).count();
            if (keep == 0) {
                // Every executor says so: Kafka is down for all, not this host cut off.
                fenced.remove(id);
                kept.incrementAndGet();
                LOG.warn("executor {} on {} cannot get a write acknowledged by Kafka, nor can "
                         + "any other of this application: Kafka itself is unreachable, so "
                         + "it stays", id, host);
                return;
            }
            sc.requestTotalExecutors((int) keep, 0, scala.collection.immutable.Map$.MODULE$.empty());
            ExecutorAllocationClient client = (ExecutorAllocationClient) sc.schedulerBackend();
            client.killExecutors(CollectionConverters.asScala(List.of(id)).toList(), false, false, true);
            removed.incrementAndGet();
            int n = strikes.merge(host, 1, Integer::sum);
            long after = rejoinMs << Math.min(n - 1, MAX_DOUBLINGS);
            LOG.warn("executor {} on {} cannot get a write acknowledged by Kafka: removed from "
                     + "this application; executors are asked for again in {} s", id, host,
                     after / 1000);
            timer.schedule(this::rejoin, after, TimeUnit.MILLISECONDS);
        } catch (RuntimeException e) {  // local mode, or dynamic allocation: nothing to remove
            LOG.warn("executor {} on {} is cut off from Kafka and could not be removed: {}", id,
                     host, e.toString());
        }
    }

    private void rejoin() {
        try {
            // A standalone application's own target: as many as its cores allow.
            sc.requestTotalExecutors(Integer.MAX_VALUE, 0, scala.collection.immutable.Map$.MODULE$.empty());
        } catch (RuntimeException e) {
            LOG.warn("asking for executors again failed: {}", e.toString());
        }
    }
}
