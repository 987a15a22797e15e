"""The bolts' Spark session: how it is built (the driver's classes and class archive, the
Python workers' heap and site hook, the executors' Kafka properties) and the Python data
sources registered per query."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.bolts.kafka_fence import GRACE_ENV
from services.bolts.runtime import heap
from services.bolts.runtime.archive import with_archive
from services.bolts.runtime.driver_classes import classes_loaded, driver_classes, spark_conf
from services.bolts.runtime.spark_python import launching_env, with_site
from services.bolts.settings import JAVA_OPTIONS, SparkSettings
from squall.core.control.spark_security import SparkSecurity, local, security_from
from squall.kafka_clients import property_environment


@dataclass(frozen=True)
class Fencing:
    """How a cluster's executors cut off from Kafka are fenced (services/bolts/kafka_fence.py):
    a waiting task's grace, and how long its executor stays out of the application."""

    grace_s: float
    rejoin_s: float


def fencing(s: SparkSettings) -> Fencing:
    return Fencing(s.executor_kafka_fence_s, s.executor_rejoin_s)


#: Each application's ExecutorFence (a py4j object), by application id.
FENCES: dict[str, Any] = {}


def spark_session(master: str, app: str, no_fork: bool = True,
                  java_options: str = JAVA_OPTIONS,
                  extra_conf: Mapping[str, str] | None = None,
                  fence: Fencing | None = None,
                  security: SparkSecurity | None = None) -> Any:
    """The bolts' Spark session. With ``fence``, on a cluster with the driver's classes, an
    executor cut off from Kafka is removed from the application (ExecutorFence.java). On a
    cluster, Spark's authentication and RPC encryption as ``security`` says (default: as
    this process's environment does; squall/core/control/spark_security.py)."""
    secured = (security or security_from(os.environ)).session(master)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # else workers hang, then fail
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    classes = driver_classes()
    conf = spark_conf(classes, no_fork) if classes else {}
    driver_options = with_archive(java_options)  # the class archive, if made (cds.py)
    if driver_options:
        conf |= {"spark.driver.extraJavaOptions": driver_options}
    if java_options:
        conf |= {"spark.executor.extraJavaOptions": java_options}
    conf |= {# The Spark UI on a port the kernel picks (the topology page links it), keeping
             # a few hundred jobs rather than thousands: a streaming job makes one a batch.
             "spark.ui.enabled": "true", "spark.ui.port": "0",
             "spark.ui.retainedJobs": "200", "spark.ui.retainedStages": "200",
             "spark.ui.retainedTasks": "10000", "spark.sql.ui.retainedExecutions": "200",
             "spark.sql.streaming.ui.retainedProgressUpdates": "100",
             "spark.sql.shuffle.partitions": "2",
             "spark.python.worker.reuse": "true",
             # The JVM and its Python workers over a Unix socket, not TCP: over TCP each
             # task's input waited out Nagle's algorithm against delayed ACKs
             # (benchmarks/handoff.py).
             "spark.python.unix.domain.socket.enabled": "true",
             "spark.sql.streaming.noDataMicroBatches.enabled": "false",
             # No tuple goes through Spark SQL: generating the Java code of the source's
             # scan every micro-batch would cost the JVM's CPU for nothing.
             "spark.sql.codegen.wholeStage": "false",
             # Memory the workers keep and touch once (services/bolts/runtime/heap.py).
             **{f"spark.executorEnv.{k}": v for k, v in heap.WORKER_ENV.items()},
             # The executors' Kafka clients read the user's properties from their
             # environment; Spark hides those values wherever it shows its settings.
             **{f"spark.executorEnv.{k}": v for k, v in property_environment(os.environ).items()},
             "spark.redaction.regex": "(?i)secret|password|token|access[.]key|SQUALL_KAFKA_"}
    conf |= secured
    fenced = fence is not None and classes is not None and not local(master)
    if fenced and fence is not None:
        conf[f"spark.executorEnv.{GRACE_ENV}"] = f"{fence.grace_s:g}"
    conf |= dict(extra_conf or {})
    if classes:  # BatchJob's function runs in the executors: they fetch the jar (spark.jars)
        conf["spark.jars"] = ",".join(j for j in (conf.get("spark.jars"), str(classes)) if j)
    # Spark's Python processes import the installed PySpark, not its zip (spark_python.py).
    conf["spark.executorEnv.PYTHONPATH"] = with_site(conf.get("spark.executorEnv.PYTHONPATH"))
    for k, v in conf.items():
        builder = builder.config(k, v)
    with launching_env():
        spark = builder.master(with_task_retries(master)).appName(app).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if fenced and fence is not None and classes_loaded(spark.sparkContext):
        sc: Any = spark.sparkContext
        FENCES[sc.applicationId] = sc._jvm.squall.spark.ExecutorFence.install(
            sc._jsc.sc(), int(fence.rejoin_s * 1000))
    return spark


#: Attempts at a task in local mode, as a cluster's ``spark.task.maxFailures`` default: a
#: task whose Python worker died runs again, its records isolated (services/bolts/isolation.py).
LOCAL_TASK_ATTEMPTS = 4
#: A local master without its own count of attempts.
_LOCAL_THREADS = re.compile(r"local\[(\*|\d+)\]")


def with_task_retries(master: str) -> str:
    """``local[N]`` as ``local[N,F]``: local mode tries a task once unless told otherwise."""
    m = _LOCAL_THREADS.fullmatch(master.strip())
    return f"local[{m.group(1)},{LOCAL_TASK_ATTEMPTS}]" if m else master


def register_for_query(spark: Any, source: type[Any], query: str) -> str:
    """Register a Python data source under a name of its own for one query; that name.

    Spark keeps one Python function per registered data source, and the map of its
    environment is shared: a query starting its source added to that map while another
    query's first tasks were being serialized, and those tasks failed to deserialize
    (``OptionalDataException``). One registration per query: one map each.
    """
    fmt = f"{source.name()}.{query}"

    def name(cls: type[Any]) -> str:
        return fmt

    spark.dataSource.register(type(f"{source.__name__}[{query}]", (source,),
                                   {"name": classmethod(name)}))
    return fmt
