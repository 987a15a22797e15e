"""The bolts job's Spark session: the driver's own classes
(services/bolts/runtime/driver_classes.py:
checkpoints through the no-fork local file system, the tasks' sink and its job run without
the closure cleaner), its JVM flags, its Python processes' PySpark, and its progress
listener's counts."""

from __future__ import annotations

import stat
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.bolts.runtime import archive as class_archive
from services.bolts.runtime import driver_classes
from services.bolts.runtime.session import spark_session
from tests.integration.helpers import wait_for

pytestmark = pytest.mark.integration


def test_the_class_is_compiled_once_and_cached(tmp_path: Path) -> None:
    first = driver_classes.driver_classes(tmp_path)
    assert first is not None
    with zipfile.ZipFile(first) as jar:  # a jar: the class archive refuses directories
        assert {"squall/hadoop/NoForkLocalFs.class", "squall/spark/BatchJob.class",
                "squall/spark/BatchSink.class"} <= set(jar.namelist())
    mtime = first.stat().st_mtime_ns
    assert driver_classes.driver_classes(tmp_path) == first
    assert first.stat().st_mtime_ns == mtime  # not compiled again


def test_without_javac_hadoops_default_is_kept(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda _name: None)
    assert driver_classes.driver_classes(tmp_path / "fresh") is None


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session = spark_session("local[1]", "squall-checkpoint-fs-test", java_options="-Xss4m",
                            extra_conf={"spark.sql.streaming.numRecentProgressUpdates": "7"})
    yield session
    session.stop()


def test_the_tasks_sink_runs_the_planned_job_once_a_micro_batch(spark: Any,
                                                                tmp_path: Path) -> None:
    """The driver's sink (java/BatchSink.java) runs the registered job for every
    micro-batch, tells its tasks the batch id, and its reports (every task's, in batch
    order) reach the bolts' metrics through the reader thread."""
    from prometheus_client import CollectorRegistry

    from services.bolts import tasks_sink
    from services.bolts.metrics import BoltMetrics
    from services.bolts.report import BatchReport

    sc = spark.sparkContext
    assert driver_classes.classes_loaded(sc)

    def task(it: Iterator[int]) -> Iterator[BatchReport]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        batch = int(ctx.getLocalProperty("squall.test.batch") or -1)
        for i in it:
            yield BatchReport(task=i, component="count", executed=1000 * batch + 10 + i)

    registry = CollectorRegistry()
    metrics = BoltMetrics(registry, "sinktest")
    stop = threading.Event()
    rdd = sc.parallelize(range(2), 2).mapPartitions(task)
    reader = spark.readStream.format("rate").option("rowsPerSecond", 5).load()
    query = (tasks_sink.writer(reader, "sinktest.count", ["count"], rdd, "squall.test.batch",
                               metrics, stop)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(processingTime="200 milliseconds").queryName("sinktest_count").start())

    def executed() -> float:
        return registry.get_sample_value("squall_bolt_executed_total",
                                         {"topology": "sinktest", "component": "count"}) or 0.0

    def expected(batches: int) -> float:  # batch b's tasks report 1000 b + 10 and + 11
        return float(sum(2000 * b + 21 for b in range(batches)))

    try:
        wait_for(lambda: executed() >= expected(3), 60, "three micro-batches' reports")
        query.stop()
        batches = int(query.lastProgress["batchId"]) + 1
        # Every batch's reports counted once, the last ones too (read after the stop).
        wait_for(lambda: executed() == expected(batches), 30,
                 f"the reports of all {batches} micro-batches, each once")
    finally:
        query.stop()
        stop.set()


def test_sparks_python_processes_import_the_installed_pyspark(spark: Any) -> None:
    """A task's Python worker and a data source's planner import the PySpark installed
    here, not the zip Spark puts first on their path (services/bolts/runtime/spark_site)."""
    import pyspark
    from pyspark.sql.datasource import DataSource

    sc = spark.sparkContext
    assert sc.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__).collect() \
        == [pyspark.__file__]

    class Where(DataSource):  # its schema is asked for in a planner process of Spark's
        @classmethod
        def name(cls) -> str:
            return "squall_where"

        def schema(self) -> str:
            where = str(__import__("pyspark").__file__)
            return "zipped int" if ".zip" in where else "installed int"

    spark.dataSource.register(Where)
    assert spark.read.format("squall_where").load().columns == ["installed"]


def run_batches(spark: Any, checkpoint: Path, n: int) -> int:
    """A rate stream until ``n`` micro-batches committed; the last batch id."""
    q = (spark.readStream.format("rate").option("rowsPerSecond", 100).load()
         .writeStream.foreachBatch(lambda df, i: None)
         .option("checkpointLocation", str(checkpoint))
         .trigger(processingTime="50 milliseconds").start())
    try:
        wait_for(lambda: len(q.recentProgress) >= n, 60, f"{n} micro-batches")
    finally:
        q.stop()
    return int(q.lastProgress["batchId"])


def test_checkpoints_go_through_the_no_fork_file_system_and_resume(spark: Any,
                                                                  tmp_path: Path) -> None:
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    fc = jvm.org.apache.hadoop.fs.FileContext.getFileContext(jvm.java.net.URI("file:///"), conf)
    assert fc.getDefaultFileSystem().getClass().getName() == driver_classes.CLASS
    last = run_batches(spark, tmp_path / "ckpt", 3)
    offsets = tmp_path / "ckpt" / "offsets"
    written = sorted(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    assert written[-1] >= last
    first = offsets / str(written[0])
    assert first.read_text().startswith("v1")
    assert stat.S_IMODE(first.stat().st_mode) == 0o644  # as Hadoop's own would leave it
    assert (offsets / f".{written[0]}.crc").exists()  # checksums kept (ChecksumFs)
    # A restart reads the log back and goes on after what was committed.
    again = run_batches(spark, tmp_path / "ckpt", 1)
    assert again > last


def test_the_jvm_runs_with_the_java_options(spark: Any) -> None:
    """The session's JVM was started with the bolts job's JVM flags, and with the class
    archive ``scripts/setup.sh`` wrote (services/bolts/cds.py)."""
    args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
                .getInputArguments())
    assert "-Xss4m" in args
    archive = class_archive.archive_path()
    assert archive is not None and archive.exists(), "setup.sh wrote no class archive"
    assert f"-XX:SharedArchiveFile={archive}" in args


def test_the_class_archive_is_added_unless_the_flags_choose_their_own(tmp_path: Path) -> None:
    assert class_archive.with_archive("-Xss4m", cache=tmp_path) == "-Xss4m"  # none made there
    made = class_archive.archive_path(tmp_path)
    assert made is not None
    made.write_bytes(b"")
    assert class_archive.with_archive("-Xss4m", cache=tmp_path) == \
        f"-Xss4m -XX:SharedArchiveFile={made}"
    own = "-XX:SharedArchiveFile=/elsewhere.jsa"
    assert class_archive.with_archive(own, cache=tmp_path) == own
    assert class_archive.with_archive("-Xshare:off", cache=tmp_path) == "-Xshare:off"


def test_extra_spark_conf_is_applied_last(spark: Any) -> None:
    """The bolts job's --conf settings reach the session (over its own defaults)."""
    assert spark.conf.get("spark.sql.streaming.numRecentProgressUpdates") == "7"


def test_the_progress_listener_counts_every_micro_batch(spark: Any, tmp_path: Path) -> None:
    """Every micro-batch reaches the metrics, however fast they come (polling the last
    progress every 0.5 s counted one in three at ~150 ms a batch)."""
    from prometheus_client import CollectorRegistry

    from services.bolts.metrics import BoltMetrics

    registry = CollectorRegistry()
    metrics = BoltMetrics(registry, "topo")
    listener = metrics.listen(spark, {"topo.head": ("head", "fused")})
    try:
        q = (spark.readStream.format("rate").option("rowsPerSecond", 100).load()
             .writeStream.foreachBatch(lambda df, i: None).queryName("topo.head")
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(processingTime="10 milliseconds").start())
        try:
            wait_for(lambda: (q.lastProgress or {}).get("batchId", 0) >= 20, 60,
                     "20 micro-batches")
        finally:
            q.stop()
        batches = int(q.lastProgress["batchId"]) + 1

        def counted(component: str) -> float:
            v = registry.get_sample_value("squall_bolt_batches_total",
                                          {"topology": "topo", "component": component})
            return v or 0.0

        # The listener runs on Spark's listener thread: the last events arrive a little later.
        wait_for(lambda: counted("head") >= batches, 30, f"{batches} micro-batches counted")
        assert counted("head") == counted("fused") == batches
        assert registry.get_sample_value("squall_bolt_batch_duration_seconds_count", {
            "topology": "topo", "component": "head"}) == batches
    finally:
        spark._jsparkSession.streams().removeListener(listener)
