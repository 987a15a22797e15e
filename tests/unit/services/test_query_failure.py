"""What a bolts job says when a query stops, and how many times local Spark tries a task."""

from __future__ import annotations

from services.bolts.query_watch import python_error
from services.bolts.runtime.session import with_task_retries

SPARK = """[PYTHON_EXCEPTION] An exception was thrown from the Python worker: \
Traceback (most recent call last):
  File "/x/services/bolts/tasks.py", line 300, in _executor
    ex = _EXECUTORS[key] = new_executor(spec, bolt, task, state_url)
  File "/x/examples/faults.py", line 12, in prepare
    raise ConnectionError("cannot reach db:5432: connection refused")
ConnectionError: cannot reach db:5432: connection refused

\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)
org.apache.spark.SparkException: Job aborted due to stage failure
"""


def test_a_stopped_query_is_told_by_what_its_python_worker_raised() -> None:
    assert python_error(SPARK) == "ConnectionError: cannot reach db:5432: connection refused"
    assert python_error("Job aborted: Python worker exited unexpectedly (crashed)\n\tat x") == \
        "Job aborted: Python worker exited unexpectedly (crashed)"
    assert python_error("") == "(no message)"


def test_local_spark_tries_a_task_as_often_as_a_cluster_does() -> None:
    assert with_task_retries("local[*]") == "local[*,4]"
    assert with_task_retries("local[2]") == "local[2,4]"
    assert with_task_retries("local[2,8]") == "local[2,8]"  # the user's own count
    assert with_task_retries("spark://h:7077") == "spark://h:7077"
