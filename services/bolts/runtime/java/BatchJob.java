package squall.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.SparkContext;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;

import scala.collection.Iterator;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction2;

/**
 * A micro-batch's job (RDD.collect's) without Spark's closure cleaner.
 *
 * RDD.collect hands SparkContext.runJob two lambdas, and the cleaner reads the class file
 * of each lambda's declaring class (RDD, SparkContext) out of Spark's jar and parses it
 * with ASM, for every job: ~15 % of the bolts JVM's CPU at the word count's half rate, on
 * each micro-batch's way to its tasks. The cleaner leaves a named function class alone;
 * this one has no outer reference to clean.
 */
public final class BatchJob {
    private BatchJob() {}

    /** Every partition's rows, by partition (one job, as RDD.collect runs it). */
    public static byte[][][] run(RDD<byte[]> rdd) {
        SparkContext sc = rdd.sparkContext();
        int n = rdd.partitions().length;
        List<Object> ids = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            ids.add(i);
        }
        @SuppressWarnings("unchecked")
        Seq<Object> partitions = (Seq<Object>) (Seq<?>) CollectionConverters.asScala(ids).toList();
        ClassTag<byte[][]> tag = ClassTag$.MODULE$.apply(byte[][].class);
        Object[] parts = (Object[]) sc.runJob(rdd, new Collect(), partitions, tag);
        byte[][][] out = new byte[parts.length][][];
        for (int i = 0; i < parts.length; i++) {
            out[i] = (byte[][]) parts[i];
        }
        return out;
    }

    /** A partition's rows (Python's pickled batches), as RDD.collect's function. */
    static final class Collect extends AbstractFunction2<TaskContext, Iterator<byte[]>, byte[][]>
            implements Serializable {
        private static final long serialVersionUID = 1L;

        @Override
        public byte[][] apply(TaskContext context, Iterator<byte[]> rows) {
            List<byte[]> out = new ArrayList<>();
            while (rows.hasNext()) {
                out.add(rows.next());
            }
            return out.toArray(new byte[0][]);
        }
    }
}
