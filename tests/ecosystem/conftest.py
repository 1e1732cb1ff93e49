"""Fixtures for the ecosystem tests: Kafka's own Java world pointed at Chronolog.

Kafka's jars come from Maven Central through tools/kafka-ref/kafkaref.py, cached in
``.cache/`` inside the repo. A missing Java or Maven, or a refused download, fails
the test that needs them with the reason: nothing here is skipped.

``make test`` runs the short set; tests marked ``ecosystem_full`` run only under
``make test-ecosystem`` (CHRONOLOG_ECOSYSTEM=full), and are deselected, not skipped,
otherwise.

When the selected tests need slow builds (Go programs, librdkafka: tests/ecosystem/
prebuild.py), they start in the background as soon as collection ends, so a cold build
overlaps the tests before them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import BrokerProcess, free_port_number
from tests.ecosystem import prebuild
from tests.ecosystem.kafka_peer import KafkaNode, KafkaRefError, fetch

FULL = os.environ.get("CHRONOLOG_ECOSYSTEM") == "full"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "ecosystem_full: runs only under make test-ecosystem (CHRONOLOG_ECOSYSTEM=full)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FULL:
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("ecosystem_full") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# The fixture whose tests need a slow build -> that build's job in prebuild.JOBS.
PREBUILD_FOR_FIXTURE = {
    "programs": "programs", "suite_broker": "kgo", "librdkafka_runner": "librdkafka"}


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the builds the selected tests need (none, if none is selected)."""
    if session.config.option.collectonly:
        return
    jobs = {job: None for item in session.items
            for fixture, job in PREBUILD_FOR_FIXTURE.items()
            if fixture in getattr(item, "fixturenames", ())}
    prebuild.start(list(jobs))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """No build outlives the session (one still running after -x, say, is ended)."""
    prebuild.stop_all()


@pytest.fixture(scope="session")
def kafka_classpath() -> str:
    """Kafka's classpath, fetched with Maven on first use; fails (never skips) without it."""
    try:
        return fetch()
    except KafkaRefError as e:
        pytest.fail(f"the reference Kafka could not be fetched: {e}", pytrace=False)


@pytest.fixture(scope="module")
def kafka_node(kafka_classpath: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    """One real Apache Kafka 4.x node (KRaft, combined mode) per test module: stopped when
    the module ends, so it never idles through the rest of ``make test``, and at most one
    runs at a time."""
    node = KafkaNode(tmp_path_factory.mktemp("kafka-ref"))
    try:
        node.start()
    except KafkaRefError as e:
        pytest.fail(f"the reference Kafka did not start: {e}", pytrace=False)
    yield node
    node.stop()


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    return tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])


@pytest.fixture(scope="module")
def chronolog(module_tmp: Path) -> Iterator[BrokerProcess]:
    """A Chronolog broker for one module, beside the Kafka node; stops cleanly."""
    data = module_tmp / "chronolog"
    data.mkdir()
    b = BrokerProcess(data, free_port_number()).start()
    yield b
    assert b.stop() == 0, b.log()
