"""Hosts on one machine (squall/dev/hosts.py), for real: network namespaces on a bridge,
each with its own disk. What the cluster benchmark relies on: a file on one host's disk is
not on another's, the shared folder is on all, hosts reach each other at their addresses,
a cut host is unreachable until healed, a partial partition drops only the ports it names,
and killing a host kills all its processes."""

from __future__ import annotations

import functools
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from squall.dev.hosts import DISK, SHARED, Host, Hosts, netns_names

pytestmark = pytest.mark.integration

#: A client's whole request to the other host's server, with a short timeout.
FETCH = ("import sys, urllib.request; "
         "print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())")


@pytest.fixture()
def hosts(tmp_path: Path) -> Iterator[Hosts]:
    with Hosts(tmp_path / "hosts", 3, tag="sqtest") as h:
        yield h


def _wait(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"not in {timeout_s} s: {what}"
        time.sleep(0.1)


def test_each_host_has_its_own_disk_and_all_share_the_shared_folder(hosts: Hosts) -> None:
    h1, h2, _ = hosts.hosts
    wrote = hosts.run(h1, ["sh", "-c", f"echo one > {DISK}/mine && echo all > {SHARED}/ours"])
    assert wrote.returncode == 0, wrote.stderr
    assert (h1.disk / "mine").read_text() == "one\n"
    other = hosts.run(h2, ["sh", "-c", f"cat {DISK}/mine"])
    assert other.returncode != 0 and "No such file" in other.stderr
    assert hosts.run(h2, ["cat", f"{SHARED}/ours"]).stdout == "all\n"


def test_the_shared_folder_made_read_only_refuses_a_process_until_writable_again(
        hosts: Hosts, tmp_path: Path) -> None:
    """As root, whom no permission bit stops: what the checkpoint fault relies on."""
    h1, h2, _ = hosts.hosts
    # A process that tries a write each time it is told to (a line on its stdin).
    script = (f"import sys\nfor _ in sys.stdin:\n    try:\n        open('{SHARED}/probe', 'w')"
              ".write('x')\n        print('ok', flush=True)\n    except OSError as e:\n"
              "        print(e.strerror, flush=True)\n")
    proc = subprocess.Popen(hosts.command(h1, [sys.executable, "-c", script]),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def attempt() -> str:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        return proc.stdout.readline().strip()

    try:
        assert attempt() == "ok"
        hosts.shared_writable(proc.pid, False)
        assert attempt() == "Read-only file system"
        # Only that process's view: another host's process still writes.
        assert hosts.run(h2, ["sh", "-c", f"echo y > {SHARED}/other"]).returncode == 0
        hosts.shared_writable(proc.pid, True)
        assert attempt() == "ok"
    finally:
        proc.kill()
        proc.wait(10)


def test_hosts_talk_over_the_bridge_a_cut_host_is_unreachable_until_healed(
        hosts: Hosts, tmp_path: Path) -> None:
    h1, h2, _ = hosts.hosts
    (h2.disk / "hello").write_text("from h2")
    server = hosts.start(h2, [sys.executable, "-m", "http.server", "--bind", h2.address,
                              "--directory", str(DISK), "8000"], tmp_path / "server.log")
    url = f"http://{h2.address}:8000/hello"
    try:
        _wait(lambda: hosts.run(h1, [sys.executable, "-c", FETCH, url]).stdout == "from h2\n",
              30, "h1 reads h2's server")
        hosts.cut(h2)
        cut = hosts.run(h1, [sys.executable, "-c", FETCH, url])
        assert cut.returncode != 0  # timed out or unreachable
        hosts.heal(h2)
        _wait(lambda: hosts.run(h1, [sys.executable, "-c", FETCH, url]).returncode == 0,
              30, "h1 reads h2's server again")
        # Killing a host kills every process it runs, the server among them.
        assert hosts.pids(h2)
        assert hosts.kill(h2) >= 1
        _wait(lambda: server.poll() is not None, 10, "the server is gone")
        assert hosts.pids(h2) == []
    finally:
        server.kill()


def test_a_partial_partition_drops_its_ports_both_ways_and_nothing_else(
        hosts: Hosts, tmp_path: Path) -> None:
    h1, h2, h3 = hosts.hosts
    (h2.disk / "hello").write_text("from h2")
    servers = [hosts.start(h, [sys.executable, "-m", "http.server", "--bind", h.address,
                               "--directory", str(DISK), str(port)],
                           tmp_path / f"{h.name}-{port}.log")
               for h, port in ((h2, 8001), (h2, 8002), (h3, 8001))]
    (h3.disk / "hello").write_text("from h3")

    def reads(client: Host, server: Host, port: int) -> bool:
        url = f"http://{server.address}:{port}/hello"
        return hosts.run(client, [sys.executable, "-c", FETCH, url]).returncode == 0

    try:
        for server, port in ((h2, 8001), (h2, 8002), (h3, 8001)):
            _wait(functools.partial(reads, h1, server, port), 30, f"{server.name}:{port} up")
        hosts.cut_ports(h2, [8001])
        assert not reads(h1, h2, 8001)  # h2's own server on the port, from outside
        assert not reads(h2, h3, 8001)  # h2 as a client of the port elsewhere
        assert reads(h1, h2, 8002) and reads(h1, h3, 8001)  # everything else flows
        assert reads(h2, h2, 8001)  # and h2's processes among themselves
        hosts.heal_ports(h2)
        _wait(functools.partial(reads, h1, h2, 8001), 30, "h2:8001 again")
        assert reads(h2, h3, 8001)
    finally:
        for p in servers:
            p.kill()


def test_down_leaves_no_namespace_behind(tmp_path: Path) -> None:
    h = Hosts(tmp_path / "hosts", 2, tag="sqdown")
    h.up()
    names = [x.netns for x in h.hosts]
    assert set(names) <= set(netns_names())
    h.down()
    assert not set(names) & set(netns_names())


def test_a_zookeeper_ensemble_answers_while_a_majority_of_its_hosts_runs(
        hosts: Hosts) -> None:
    from kazoo.client import KazooClient

    from squall.dev.ensemble import Ensemble

    h1, h2, h3 = hosts.hosts
    ensemble = Ensemble(hosts, [h1, h2, h3])
    connect = ensemble.start()
    zk = KazooClient(hosts=connect, timeout=10)
    zk.start(timeout=30)
    try:
        zk.create("/kept", b"by the ensemble")
    finally:
        zk.stop()
        zk.close()
    hosts.kill(h3)  # two of three: a majority
    _wait(lambda: _answers(connect), 60, "the ensemble answers without h3")
    hosts.kill(h2)  # one of three: none
    assert not any(_answers(connect) for _ in range(3))
    ensemble.start_member(h2)
    _wait(lambda: _answers(connect), 90, "the ensemble answers with h2 back")
    zk = KazooClient(hosts=connect, timeout=10)
    zk.start(timeout=30)
    try:
        assert zk.get("/kept")[0] == b"by the ensemble"  # on h1's and h2's disks
    finally:
        zk.stop()
        zk.close()


def test_sessions_outlive_the_ensemble_leader_cut_off(hosts: Hosts) -> None:
    """Squall's ZooKeeper clients (squall/coord.py), spread over an ensemble's servers, when
    the leader's host is cut off (packets dropped, as in a partition: no reset tells a
    client). The lost server's clients notice it; the others' are dropped while those
    elect a leader, and try every server, the lost one too, meanwhile. Each keeps its
    session, and its ephemeral node with it. With kazoo's defaults a connect to the lost
    server takes the whole session timeout, and some sessions end
    (benchmarks/zookeeper_failover.py)."""
    from squall.coord import connect as zk_connect
    from squall.dev.ensemble import PORT, Ensemble

    ensemble = Ensemble(hosts, list(hosts.hosts))
    connect = ensemble.start()
    _wait(lambda: ensemble.leader() is not None, 60, "a leader of the ensemble")
    lead = ensemble.leader()
    assert lead is not None
    states: list[list[str]] = []
    clients = []
    try:
        for i in range(24):
            seen: list[str] = []
            states.append(seen)
            zk = zk_connect(connect, session_timeout_s=6.0,
                            listener=functools.partial(_record, seen), first_server=i)
            clients.append(zk)
            zk.create(f"/squall/workers/probe-{i}", b"", ephemeral=True)
        sessions = [zk.client_id[0] for zk in clients]
        hosts.cut_ports(lead, [PORT, 2888, 3888])
        _wait(lambda: all("SUSPENDED" in seen for seen in states), 30,
              "every client is cut off (the lost server's, and the others' for the election)")
        _wait(lambda: all(zk.connected for zk in clients), 30, "every client is back")
        assert [i for i, seen in enumerate(states) if "LOST" in seen] == []
        assert [zk.client_id[0] for zk in clients] == sessions
        assert all(zk.exists(f"/squall/workers/probe-{i}") for i, zk in enumerate(clients))
    finally:
        hosts.heal_ports(lead)
        for zk in clients:
            zk.stop()
            zk.close()


def _record(seen: list[str], state: object) -> None:
    seen.append(str(state))


def _answers(connect: str) -> bool:
    from squall.dev.probes import zookeeper_session

    try:
        return zookeeper_session(connect, 2.0)
    except Exception:  # not yet
        return False


def test_a_database_on_a_host_answers_the_others_and_dies_with_its_host(
        hosts: Hosts, tmp_path: Path) -> None:
    """The cluster's state database on h3: reached at h3's address from the machine, gone
    with h3's kill, and back on its data when started again."""
    from squall.dev import postgres
    from squall.processes import free_port

    h3 = hosts.hosts[2]
    pg = postgres.Server(tmp_path / "pg", free_port(), h3.address,
                         trust=hosts.subnet + ".0/24",
                         wrap=functools.partial(hosts.command, h3)).start()
    try:
        assert pg.proc is not None and pg.proc.pid in hosts.pids(h3)
        assert postgres.answers(pg.url)
        hosts.kill(h3)
        _wait(lambda: not pg.alive(), 10, "the database to die with its host")
        pg.start()
        assert postgres.answers(pg.url)
    finally:
        pg.stop(kill=True)
        pg.remove()
