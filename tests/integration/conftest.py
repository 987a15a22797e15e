"""The real stack, once per session: Tansu, ZooKeeper, PostgreSQL (and Spark, in later
suites)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from squall.dev.stack import EmbeddedStack, StackInfo, StackSettings


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackInfo]:
    home = tmp_path_factory.mktemp("stack")
    with EmbeddedStack(StackSettings(home=home, start_timeout_s=90, postgres=True)) as info:
        yield info


@pytest.fixture(scope="session")
def bootstrap(stack: StackInfo) -> str:
    return stack.bootstrap_servers


@pytest.fixture(scope="session")
def zookeeper(stack: StackInfo) -> str:
    return stack.zookeeper


@pytest.fixture(scope="session")
def postgres_url(stack: StackInfo) -> str:
    assert stack.postgres is not None
    return stack.postgres
