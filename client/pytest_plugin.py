"""pytest fixtures for projects that test against Chronolog (entry point ``pytest11``).

Installing chronolog is enough: pytest loads this plugin by itself, and a test asks for

- ``chronolog_broker``: one broker for the whole session (:mod:`client.testing`), on a
  free loopback port with its data in pytest's temporary directory. Its ``bootstrap``
  is ``host:port`` for any Kafka client.
- ``chronolog_topic``: a factory, ``chronolog_topic(partitions=3, config={...})``, that
  creates a topic with a name no other test uses and returns the name; the topics a
  test created are deleted after it.

Nothing starts unless a test uses a fixture. Broker settings for the session come from
the ini option ``chronolog_broker_overrides`` (lines of ``name=value``, Kafka's names).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator, Mapping

import pytest

from client.testing import RunningBroker, broker

__all__ = ["chronolog_broker", "chronolog_topic"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("chronolog_broker_overrides", type="linelist", default=[],
                  help="chronolog_broker settings, one name=value per line (Kafka's names)")


def _overrides(config: pytest.Config) -> dict[str, str]:
    out = {}
    for line in config.getini("chronolog_broker_overrides"):
        name, sep, value = line.partition("=")
        if not sep:
            raise pytest.UsageError(f"chronolog_broker_overrides: {line!r} is not name=value")
        out[name.strip()] = value.strip()
    return out


@pytest.fixture(scope="session")
def chronolog_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningBroker]:
    """A Chronolog broker for the test session, started on first use."""
    data = tmp_path_factory.mktemp("chronolog-broker")
    with broker(data_dir=data, overrides=_overrides(request.config)) as running:
        yield running


@pytest.fixture
def chronolog_topic(
    chronolog_broker: RunningBroker, request: pytest.FixtureRequest
) -> Iterator[Callable[..., str]]:
    """``chronolog_topic(partitions=1, config=None) -> name``: a new topic for this test."""
    created: list[str] = []
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:120].strip("-.") or "topic"

    def make(partitions: int = 1, config: Mapping[str, str] | None = None) -> str:
        name = f"{stem}-{uuid.uuid4().hex[:8]}"
        created.append(chronolog_broker.create_topic(name, partitions, config))
        return name

    yield make
    for name in created:
        chronolog_broker.delete_topic(name)
