package squall.spark;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.spark.SparkContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.execution.streaming.Sink;
import org.apache.spark.sql.sources.StreamSinkProvider;
import org.apache.spark.sql.streaming.OutputMode;

import scala.collection.immutable.Map;
import scala.collection.immutable.Seq;

/**
 * A query's sink that runs its bolt tasks: each micro-batch runs the one job the Python
 * driver planned (an RDD of the tasks, registered under the query's name) and queues its
 * reports for the driver, which reads them on a thread of its own.
 *
 * <p>foreachBatch did the same through a Python callback: Spark turned the batch's scan
 * into an RDD and a Dataset for the callback (which reads neither: the tasks plan their
 * ranges from the offset log), called into the driver's Python, which called back into
 * the JVM for the job and read its reports over a socket before the micro-batch could
 * end. Here the batch's data is not touched, and the reports wait for no one.
 */
public final class BatchSink implements StreamSinkProvider {
    /** Reports not yet read by the driver, per query: a bounded queue (the oldest go). */
    static final int KEPT = 256;

    static final ConcurrentHashMap<String, Tasks> QUERIES = new ConcurrentHashMap<>();

    /** A query's planned job and the reports its micro-batches left. */
    public static final class Tasks {
        final RDD<byte[]> rdd;
        final String property;
        final ArrayBlockingQueue<byte[]> reports = new ArrayBlockingQueue<>(KEPT);
        final AtomicLong dropped = new AtomicLong();
        /** The worker's lease file ("": none); the deadline last read from it. */
        final String lease;
        long leaseDeadline;
        boolean leaseHeld;

        Tasks(RDD<byte[]> rdd, String property, String lease) {
            this.rdd = rdd;
            this.property = property;
            this.lease = lease;
        }

        /**
         * Until the worker's lease lies ahead (squall/core/control/lease.py: one line, a
         * deadline in nanoseconds of the clock {@code System.nanoTime} reads, which a stopped
         * process's does too): a driver that froze runs no micro-batch for bolt tasks that
         * may have moved meanwhile. The file is read again only once the deadline passed.
         */
        void awaitLease() {
            if (lease.isEmpty()) {
                return;
            }
            while (System.nanoTime() >= leaseDeadline) {
                try {
                    String text = new String(Files.readAllBytes(Paths.get(lease)),
                                             StandardCharsets.US_ASCII).trim();
                    leaseDeadline = Math.max(leaseDeadline, Long.parseLong(text));
                } catch (IOException | NumberFormatException e) {
                    // unreadable or half-made: it holds nothing
                }
                if (System.nanoTime() < leaseDeadline) {
                    break;
                }
                if (!leaseHeld) {
                    System.err.println("squall: the worker's lease " + lease + " ran out: no "
                                       + "micro-batch runs until it is renewed");
                    leaseHeld = true;
                }
                try {
                    Thread.sleep(50);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException("stopped waiting for the worker's lease", e);
                }
            }
            leaseHeld = false;
        }

        /**
         * The reports of the next micro-batch: its id (8 bytes, big-endian), then the
         * job's rows framed as PySpark's serializers read a stream (a 4-byte length, the
         * bytes); null if none came within {@code timeoutMs}.
         */
        public byte[] take(long timeoutMs) throws InterruptedException {
            return reports.poll(timeoutMs, TimeUnit.MILLISECONDS);
        }

        /** How many micro-batches' reports were let go unread since the last call. */
        public long dropped() {
            return dropped.getAndSet(0);
        }

        void put(byte[] batch) {
            while (!reports.offer(batch)) {  // nobody reads: keep the newest
                if (reports.poll() != null) {
                    dropped.incrementAndGet();
                }
            }
        }
    }

    /** Query {@code query}'s micro-batches run {@code rdd}, told their batch id by the
     *  local property {@code property}, each once the lease file {@code lease} holds ("":
     *  none); where to read their reports. */
    public static Tasks register(String query, RDD<byte[]> rdd, String property,
                                 String lease) {
        Tasks t = new Tasks(rdd, property, lease);
        QUERIES.put(query, t);
        return t;
    }

    /** Forget {@code tasks}, if they are still query {@code query}'s. */
    public static void unregister(String query, Tasks tasks) {
        QUERIES.remove(query, tasks);
    }

    @Override
    public Sink createSink(SQLContext ctx, Map<String, String> parameters,
                           Seq<String> partitionColumns, OutputMode mode) {
        String query = parameters.get("query").getOrElse(() -> "");
        Tasks t = QUERIES.get(query);
        if (t == null) {
            throw new IllegalArgumentException("no bolt tasks registered for query '" + query
                                               + "' (BatchSink.register)");
        }
        return new Run(query, t);
    }

    static final class Run implements Sink {
        private final String query;
        private final Tasks tasks;

        Run(String query, Tasks tasks) {
            this.query = query;
            this.tasks = tasks;
        }

        @Override
        public void addBatch(long batchId, Dataset<Row> data) {
            tasks.awaitLease();
            SparkContext sc = tasks.rdd.sparkContext();
            sc.setLocalProperty(tasks.property, Long.toString(batchId));
            byte[][][] parts = BatchJob.run(tasks.rdd);
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            try (DataOutputStream out = new DataOutputStream(buf)) {
                out.writeLong(batchId);
                for (byte[][] part : parts) {
                    for (byte[] row : part) {
                        out.writeInt(row.length);
                        out.write(row);
                    }
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);  // a byte array's stream does not fail
            }
            tasks.put(buf.toByteArray());
        }

        @Override
        public String name() {
            return "squall bolt tasks of " + query;
        }

        @Override
        public String toString() {
            return name();
        }
    }
}
