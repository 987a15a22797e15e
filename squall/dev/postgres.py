"""A PostgreSQL server for the embedded stack, from the machine's own binaries.

Debian installs ``initdb`` and ``postgres`` in ``/usr/lib/postgresql/<version>/bin``, off
PATH (``apt-get install postgresql``). PostgreSQL refuses to run as root: as root, the data
directory is given to the ``postgres`` user (Debian's package creates it; else ``nobody``)
and the server runs as that user. It listens on loopback only, trusts local connections
(a development stack), and is stopped with SIGINT (PostgreSQL's fast shutdown).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from squall.core.errors import StackError
from squall.processes import HOST

USER = "squall"
DATABASE = "squall"


def find_bin(name: str = "initdb") -> Path:
    """The newest installed PostgreSQL's ``name`` (or the one on PATH)."""
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                   else 0)
    if found:
        return found[-1]
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path)
    raise StackError(f"PostgreSQL's {name} not found (in /usr/lib/postgresql/*/bin or on "
                     "PATH): install Debian's postgresql package")


def run_as() -> tuple[int, int] | None:
    """(uid, gid) to run the server as when this process is root; None: as ourselves."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            continue
        return pw.pw_uid, pw.pw_gid
    raise StackError("running as root, and no 'postgres' or 'nobody' user to run "
                     "PostgreSQL as (it refuses root)")


def data_dir(home: Path) -> Path:
    """Where the cluster's files go: under ``home``, or, as root, in a directory of the
    server's user under the system's temp directory (``home`` may sit below directories
    only root can enter, as pytest's do). Delete it after the server stopped."""
    who = run_as()
    if who is None:
        return home / "data"
    top = Path(tempfile.mkdtemp(prefix="squall-postgres-"))
    os.chown(top, *who)
    return top / "data"


def init_cluster(data: Path, log: Path) -> None:
    """``initdb`` a fresh data directory owned by the server's user."""
    data.mkdir(parents=True)
    who = run_as()
    if who is not None:
        os.chown(data, *who)
    with open(log, "ab") as out:
        done = subprocess.run(
            [str(find_bin("initdb")), "-D", str(data), "-U", USER, "--auth=trust",
             "-E", "UTF8", "--no-instructions", "--no-sync"],
            stdout=out, stderr=subprocess.STDOUT, user=who[0] if who else None,
            group=who[1] if who else None, cwd=data.parent, timeout=120)
    if done.returncode:
        raise StackError(f"initdb of {data} failed ({done.returncode}); see {log}")


def server_argv(data: Path, port: int, listen: str = HOST) -> list[str]:
    # The socket directory is the data directory: /var/run/postgresql may not be writable.
    return [str(find_bin("postgres")), "-D", str(data), "-p", str(port), "-k", str(data),
            "-c", f"listen_addresses={listen}", "-c", "fsync=on", "-c", "max_connections=200"]


def url(port: int) -> str:
    return f"postgresql://{USER}@{HOST}:{port}/{DATABASE}"


def answers(conninfo: str) -> bool:
    """A real session: connect and run a query (creating the database the first time)."""
    import psycopg

    base = conninfo.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(base, autocommit=True, connect_timeout=5) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                        (DATABASE,)).fetchone() is None:
            conn.execute(f"CREATE DATABASE {DATABASE}")
    with psycopg.connect(conninfo, connect_timeout=5) as conn:
        return conn.execute("SELECT 1").fetchone() == (1,)


class Server:
    """A server of its own, that a test or a fault may stop and start again on its data:
    ``listen`` its address, ``trust`` a network (``10.0.0.0/24``) whose clients it lets in
    as well as local ones; ``wrap`` what its command is run in (a host's namespace of
    squall/dev/hosts.py), which then runs as root and drops to the server's user itself."""

    def __init__(self, home: Path, port: int, listen: str = HOST, trust: str = "",
                 wrap: Callable[[Sequence[str]], list[str]] | None = None) -> None:
        self.home, self.port, self.listen, self.wrap = home, port, listen, wrap
        home.mkdir(parents=True, exist_ok=True)
        self.data = data_dir(home)
        init_cluster(self.data, home / "postgres.log")
        if trust:
            with open(self.data / "pg_hba.conf", "a") as hba:
                hba.write(f"host all all {trust} trust\n")
        self.url = f"postgresql://{USER}@{listen}:{port}/{DATABASE}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> Server:
        """Start it, and wait until it answers."""
        from squall.dev.probes import wait_until
        from squall.processes import die_with_parent

        who = run_as()
        argv = server_argv(self.data, self.port, self.listen)
        if self.wrap is not None:
            drop = [] if who is None else ["setpriv", f"--reuid={who[0]}", f"--regid={who[1]}",
                                           "--clear-groups", "--"]
            argv, who = self.wrap([*drop, *argv]), None
        with open(self.home / "postgres.log", "ab") as out:
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                 user=who[0] if who else None, group=who[1] if who else None,
                                 start_new_session=True, preexec_fn=die_with_parent)
        self.proc = p
        wait_until(lambda: answers(self.url), timeout_s, f"PostgreSQL on port {self.port}",
                   lambda: p.poll() is None, self.home / "postgres.log")
        return self

    def stop(self, kill: bool = False) -> None:
        """Shut it down (fast: its sessions are ended), or kill it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        if kill:
            self.proc.kill()
        else:
            self.proc.send_signal(signal.SIGINT)
        self.proc.wait(30)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def remove(self) -> None:
        """Its files, once stopped (outside ``home`` as root: :func:`data_dir`)."""
        shutil.rmtree(self.data.parent, ignore_errors=True)
