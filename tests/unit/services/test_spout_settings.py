from __future__ import annotations

from pathlib import Path

import pytest

from services.spout.settings import parse_args
from squall.core.errors import ConfigError
from squall.core.topology.grouping import parse_edge
from squall.core.topology.model import Guarantee, TopologySpec

WORDCOUNT = Path("examples/wordcount.yaml")


def test_the_topology_file_gives_what_the_topology_decides() -> None:
    s = parse_args(["--topology-file", str(WORDCOUNT), "--component", "sentences",
                    "--tasks", "1", "--num-tasks", "2"])
    assert (s.topology, s.component, s.topics, s.num_tasks) == (
        "wordcount", "sentences", ("sentences",), 2)
    assert (s.num_ackers, s.scheme, s.message_timeout_s, s.max_spout_pending) == (
        2, "text", 30.0, 10_000)
    assert s.guarantee is Guarantee.AT_LEAST_ONCE
    (edge,) = s.edge_list()
    assert edge == parse_edge("split:2:shuffle", "wordcount", "sentences", sources=2)


def test_what_the_topology_decides_is_not_set_again_by_a_flag_or_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes of one topology must not disagree on its message timeout, say: a
    setting the file gives is refused from a flag or the environment, naming both."""
    base = ["--topology-file", str(WORDCOUNT), "--component", "sentences", "--tasks", "0",
            "--num-tasks", "2"]
    with pytest.raises(ConfigError, match=r"message_timeout_s is the topology's \(30\.0 in "
                       r"examples/wordcount.yaml\): set it there, not with "
                       r"--message-timeout-s or SQUALL_SPOUT_MESSAGE_TIMEOUT_S \(5\.0\)"):
        parse_args([*base, "--message-timeout-s", "5"])
    with pytest.raises(ConfigError, match="set it there, not with --edge or SQUALL_SPOUT_EDGES"):
        parse_args([*base, "--edge", "split:2:shuffle"])
    monkeypatch.setenv("SQUALL_SPOUT_MAX_SPOUT_PENDING", "77")
    with pytest.raises(ConfigError, match="max_spout_pending is the topology's"):
        parse_args(base)
    monkeypatch.delenv("SQUALL_SPOUT_MAX_SPOUT_PENDING")
    # The process's own settings and its placement stay the flags' and the environment's.
    monkeypatch.setenv("SQUALL_SPOUT_FETCH_WAIT_MAX_MS", "35")
    s = parse_args([*base, "--num-tasks", "3", "--producer-linger-ms", "1"])
    assert (s.num_tasks, s.fetch_wait_max_ms, s.producer_linger_ms) == (3, 35, 1)
    # Without a topology file every setting is a flag (a spout run by hand).
    s = parse_args(["--topology", "wc", "--topics", "src", "--tasks", "0", "--num-tasks",
                    "1", "--message-timeout-s", "5"])
    assert s.message_timeout_s == 5.0


@pytest.mark.parametrize(("argv", "needle"), [
    (["--topology-file", "no/such.yaml", "--component", "sentences", "--tasks", "0",
      "--num-tasks", "1"], "no/such.yaml"),
    (["--topology-file", str(WORDCOUNT), "--component", "split", "--tasks", "0",
      "--num-tasks", "1"], "'split' is not a spout"),
    (["--topology-file", str(WORDCOUNT), "--component", "sentences", "--tasks", "3",
      "--num-tasks", "2"], "within 0..1"),
    (["--topology", "wc", "--topics", "src", "--tasks", "0", "--num-tasks", "1", "--start",
      "tail"], "start 'tail' is not earliest, latest or group"),
])
def test_bad_settings_name_what_is_wrong(argv: list[str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        parse_args(argv)


def test_the_producers_linger_and_the_read_ahead_are_flags() -> None:
    base = ["--topology-file", str(WORDCOUNT), "--component", "sentences", "--tasks", "0",
            "--num-tasks", "1"]
    s = parse_args(base)
    assert (s.producer_linger_ms, s.read_ahead_records, s.fetch_backoff_ms) == (5, 1_000, 40)
    s = parse_args([*base, "--producer-linger-ms", "0", "--read-ahead-records", "500"])
    assert (s.producer_linger_ms, s.read_ahead_records) == (0, 500)
    with pytest.raises(ConfigError, match="producer_linger_ms"):
        parse_args([*base, "--producer-linger-ms", "-1"])


def test_a_fetchs_least_bytes_is_a_flag() -> None:
    base = ["--topology-file", str(WORDCOUNT), "--component", "sentences", "--tasks", "0",
            "--num-tasks", "1"]
    assert parse_args(base).fetch_min_bytes == 1  # Kafka's default: the first record
    assert parse_args([*base, "--fetch-min-bytes", "1048576"]).fetch_min_bytes == 1 << 20
    with pytest.raises(ConfigError, match="fetch_min_bytes"):
        parse_args([*base, "--fetch-min-bytes", "0"])


def test_where_a_new_spout_starts_comes_from_the_topology(tmp_path: Path) -> None:
    spec = TopologySpec.from_text(WORDCOUNT.read_text())
    doc = spec.to_dict()
    doc["spouts"][0]["start"] = "group:legacy-app"
    f = tmp_path / "t.json"
    f.write_text(TopologySpec.from_dict(doc).to_json())
    args = ["--topology-file", str(f), "--component", "sentences", "--tasks", "0",
            "--num-tasks", "1"]
    assert parse_args(args).start == "group:legacy-app"
    assert parse_args(["--topology-file", str(WORDCOUNT), *args[2:]]).start == "earliest"
    with pytest.raises(ConfigError, match="start is the topology's"):
        parse_args([*args, "--start", "latest"])
