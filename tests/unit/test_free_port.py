"""A free port for a child lies outside the kernel's ephemeral range and is bindable."""

from __future__ import annotations

import socket
from pathlib import Path

from squall.processes import LISTEN_PORTS_FROM, ephemeral_ports, free_port


def test_a_free_port_lies_below_the_ephemeral_range_and_can_be_bound() -> None:
    lo, _ = ephemeral_ports()
    for _ in range(20):
        port = free_port()
        if lo - LISTEN_PORTS_FROM >= 1000:
            assert LISTEN_PORTS_FROM <= port < lo
        with socket.socket() as s:
            s.bind(("", port))


def test_a_port_someone_listens_on_is_not_handed_out() -> None:
    held = []
    try:
        for _ in range(50):
            s = socket.socket()
            s.bind(("", free_port()))
            s.listen()
            held.append(s)
        ports = {s.getsockname()[1] for s in held}
        assert len(ports) == 50
        assert all(free_port() not in ports for _ in range(200))
    finally:
        for s in held:
            s.close()


def test_the_ephemeral_range_is_read_from_the_kernel_or_defaults(tmp_path: Path) -> None:
    f = tmp_path / "range"
    f.write_text("40000\t50000\n")
    assert ephemeral_ports(f) == (40000, 50000)
    assert ephemeral_ports(tmp_path / "missing") == (32768, 60999)
    f.write_text("nonsense")
    assert ephemeral_ports(f) == (32768, 60999)
