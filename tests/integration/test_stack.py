"""The development stack itself: real Apache Kafka, real ZooKeeper, the CLI, and its failure
modes."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from squall.core.errors import StackError
from squall.core.reliability.tuples import Tuple
from squall.core.wire.tuple_batch import TupleBatch, decode_tuples, encode_tuples
from squall.dev.probes import find_java, zookeeper_session
from squall.dev.smoke import run_smoke
from squall.dev.stack import EmbeddedStack, StackInfo, StackSettings
from squall.kafka import ensure_topics
from squall.processes import pid_alive
from tests.integration.helpers import clients, consume, wait_for

pytestmark = pytest.mark.integration


def test_tuple_batches_cross_the_real_broker(bootstrap: str) -> None:
    topic = f"squall.t-{uuid.uuid4().hex[:6]}.edge.split.default.count"
    ensure_topics(clients(bootstrap), {topic: 1})
    tuples = [Tuple([f"w{i}", i], ("word", "n"), {i + 1: i + 100}) for i in range(500)]
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, encode_tuples(TupleBatch.from_tuples(tuples, ("word", "n"), source="split")),
              partition=0)
    assert p.flush(10) == 0
    (msg,) = consume(bootstrap, topic, 1)
    raw = msg.value()
    back = decode_tuples(raw).tuples()
    assert [t.values for t in back] == [t.values for t in tuples]
    assert [t.anchors for t in back] == [t.anchors for t in tuples]


def test_zookeeper_holds_a_session_and_data(zookeeper: str) -> None:
    zk = KazooClient(hosts=zookeeper)
    zk.start(timeout=10)
    try:
        path = f"/squall-test/{uuid.uuid4().hex}"
        zk.create(path, b"hello", makepath=True, ephemeral=True)
        assert zk.get(path)[0] == b"hello"
    finally:
        zk.stop()


def test_smoke_completes_every_tree(bootstrap: str) -> None:
    report = run_smoke(clients(bootstrap), trees=3_000)
    assert report.completed == 3_000
    assert report.records == 3_000 * 12


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "squall", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_up_status_down_leaves_no_process(tmp_path: Path) -> None:
    home = str(tmp_path / "dev")
    up = run_cli("dev", "up", "--home", home)
    assert up.returncode == 0, up.stderr
    assert "kafka" in up.stdout
    assert "zookeeper" in up.stdout
    assert "starting Apache Kafka" in up.stderr
    env = (Path(home) / "env").read_text()
    assert "SQUALL_BOOTSTRAP_SERVERS=127.0.0.1:" in env
    state = StackInfo.from_json((Path(home) / "stack.json").read_text())
    pids = [p.pid for p in state.processes]
    try:
        st = run_cli("dev", "status", "--home", home)
        assert st.returncode == 0, st.stdout
        assert st.stdout.count("running") == 2
        again = run_cli("dev", "up", "--home", home)
        assert again.returncode == 2
        assert "already running" in again.stderr
        smoke = run_cli("dev", "smoke", "--home", home, "--trees", "500")
        assert smoke.returncode == 0, smoke.stderr
        assert '"completed": 500' in smoke.stdout
    finally:
        down = run_cli("dev", "down", "--home", home)
    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(p) for p in pids)
    assert run_cli("dev", "status", "--home", home).returncode == 1


def test_zookeeper_probe_gives_up_on_a_server_that_never_answers() -> None:
    # A ZooKeeper still booting can take a connection and never answer it (it fails to
    # close it): one probe attempt must not wait kazoo's 10 s for that answer, since
    # wait_until retries.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()  # the kernel completes the connection; nothing ever reads or answers
        t0 = time.monotonic()
        with pytest.raises(KazooTimeoutError):
            zookeeper_session(f"127.0.0.1:{s.getsockname()[1]}")
        assert time.monotonic() - t0 < 6.0


def test_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(StackError, match=f"Kafka port {port} on 127.0.0.1 is taken"):
            EmbeddedStack(StackSettings(home=tmp_path, kafka_port=port)).start()
    assert not (tmp_path / "stack.json").exists()


def test_missing_java_is_a_clear_error(tmp_path: Path) -> None:
    r = run_cli("dev", "up", "--home", str(tmp_path), "--java", "/nonexistent/java")
    assert r.returncode == 2
    assert "Java not found (tried /nonexistent/java)" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_process_dying_at_start_shows_its_log_and_stops_the_rest(tmp_path: Path) -> None:
    # A java that runs Kafka's broker for real and fails ZooKeeper's start.
    fake = tmp_path / "java"
    fake.write_text(
        "#!/bin/sh\ncase \"$*\" in *QuorumPeerMain*)\n"
        "  echo 'Error: could not reserve enough space for heap' >&2; exit 1;;\nesac\n"
        f"exec {find_java()} \"$@\"\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    stack = EmbeddedStack(StackSettings(home=tmp_path / "dev", java=str(fake), start_timeout_s=60))
    with pytest.raises(StackError) as e:
        stack.start()
    msg = str(e.value)
    assert "ZooKeeper on 127.0.0.1:" in msg
    assert "exited during start-up" in msg
    assert "could not reserve enough space for heap" in msg
    # Kafka had started before ZooKeeper failed: it must be gone too.
    assert (tmp_path / "dev" / "kafka" / "kafka.log").exists()
    assert not (tmp_path / "dev" / "stack.json").exists()
    out = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
    assert out.stdout.strip() == "", f"orphans: {out.stdout}"


def test_a_port_taken_before_its_bind_is_chosen_again(tmp_path: Path) -> None:
    # A java whose first ZooKeeper loses its port to another process, as when a parallel
    # test binds the port between its choice and the bind.
    fake, tries = tmp_path / "java", tmp_path / "zookeeper-starts"
    fake.write_text(
        "#!/bin/sh\ncase \"$*\" in *QuorumPeerMain*)\n"
        f"  echo start >> {tries}\n"
        f"  if [ $(wc -l < {tries}) -eq 1 ]; then\n"
        "    echo 'java.net.BindException: Address already in use' >&2; exit 1\n"
        "  fi;;\nesac\n"
        f"exec {find_java()} \"$@\"\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    with EmbeddedStack(StackSettings(home=tmp_path / "dev", java=str(fake),
                                     start_timeout_s=120)) as info:
        assert zookeeper_session(info.zookeeper)
    assert tries.read_text().count("start") == 2


def test_a_broker_that_cannot_format_its_storage_says_why(tmp_path: Path) -> None:
    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\necho 'Error: Invalid maximum heap size' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(StackError, match=r"(?s)formatting Kafka's storage.*Invalid maximum heap"):
        EmbeddedStack(StackSettings(home=tmp_path / "dev", java=str(fake))).start()
    assert not (tmp_path / "dev" / "stack.json").exists()


def test_fixture_processes_die_with_their_parent(tmp_path: Path) -> None:
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from squall.dev.stack import EmbeddedStack, StackSettings\n"
        f"info = EmbeddedStack(StackSettings(home=Path({str(tmp_path)!r}))).start()\n"
        "print(' '.join(str(p.pid) for p in info.processes), flush=True)\n"
        "os._exit(9)  # no cleanup: the kernel must take the children down\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    pids = [int(p) for p in r.stdout.split()]
    assert len(pids) == 2, r.stderr

    wait_for(lambda: not any(_exists(p) for p in pids), 10, "the orphaned children to die")


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
