package squall.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.SparkContext;
import org.apache.spark.TaskContext;
import org.apache.spark.api.python.PythonRDD;
import org.apache.spark.rdd.RDD;

import scala.collection.Iterator;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction2;

/**
 * PythonRDD.collectAndServe without Spark's closure cleaner.
 *
 * RDD.collect hands SparkContext.runJob two lambdas, and the cleaner reads the class file
 * of each lambda's declaring class (RDD, SparkContext) out of Spark's jar and parses it
 * with ASM, for every job: ~15 % of the bolts JVM's CPU at the word count's half rate, on
 * each micro-batch's way to its tasks. The cleaner leaves a named function class alone;
 * this one has no outer reference to clean.
 */
public final class BatchJob {
    private BatchJob() {}

    /** Every partition's rows, served to the Python driver as collectAndServe does. */
    public static Object[] collectAndServe(RDD<byte[]> rdd) {
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
        List<Object> rows = new ArrayList<>();
        for (Object part : parts) {
            for (byte[] row : (byte[][]) part) {
                rows.add(row);
            }
        }
        return PythonRDD.serveIterator(CollectionConverters.asScala(rows.iterator()),
                                       "serve a micro-batch's reports");
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
