"""Fixtures shared by every test area.

The broker under test is always the real thing: ``python -m broker`` in a
subprocess, on a free port on 127.0.0.1, with its own data directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Also imported from here by tests/ecosystem, which keeps its own imports.
from tests.helpers.broker import BrokerProcess, free_port_number

# Fixtures: the real S3 server (s3proxy) and a fresh bucket per test, for the tier.
from tests.helpers.s3server import s3_bucket, s3_server  # noqa: F401

settings.register_profile(
    "chronolog",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    max_examples=int(os.environ.get("CHRONOLOG_HYPOTHESIS_EXAMPLES", "60")),
)
settings.load_profile("chronolog")


def pytest_asyncio_loop_factories(config, item):  # type: ignore[no-untyped-def]
    """Run every asyncio test on uvloop, the loop the broker itself uses."""
    import uvloop

    return {"uvloop": uvloop.new_event_loop}


@pytest.fixture
def free_port() -> int:
    return free_port_number()


@pytest.fixture(scope="session")
def broker_process_class() -> type[BrokerProcess]:
    """For fixtures of a wider scope than ``broker_factory`` that start their own brokers."""
    return BrokerProcess


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """ONE real local SparkSession for the whole run (starting one costs 5-10 s and ~400 MB).

    It carries Spark's own Kafka connector on ``spark.jars`` (tests/helpers/spark_kafka.py)
    when Maven could fetch it, for the tests that read and write with ``format("kafka")``."""
    from pipeline.session import spark_session
    from tests.helpers.spark_kafka import connector_jars

    jars, _why_not = connector_jars()
    conf = {"spark.jars": ",".join(jars)} if jars else {}
    session = spark_session(app_name="chronolog-tests", conf=conf)
    yield session
    session.stop()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[object]:
    """Start brokers: ``broker_factory(overrides={...})``; all are stopped afterwards."""
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, name: str = "data") -> BrokerProcess:
        data = tmp_path / f"{name}-{len(started)}"
        data.mkdir()
        for attempt in range(3):
            b = BrokerProcess(data, free_port_number(), dict(overrides or {}))
            started.append(b)
            try:
                return b.start()
            except RuntimeError as e:
                # The free port was taken (e.g. as another socket's ephemeral port)
                # between free_port_number() and the broker's bind: pick another.
                if "address already in use" not in str(e) or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    yield make
    for b in started:
        b.stop()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:  # type: ignore[no-untyped-def]
    """One running broker with default settings."""
    return broker_factory()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One default broker for a whole test module; use it through ``shared_broker``."""
    data = tmp_path_factory.mktemp("module-broker") / "data"
    data.mkdir()
    b = BrokerProcess(data, free_port_number())
    b.start()
    yield b
    b.stop()


@pytest.fixture
def shared_broker(module_broker: BrokerProcess) -> BrokerProcess:
    """The module's broker, running: for modules whose tests each use their own topics, so
    a broker start per test is saved. A test that killed or stopped it gets it started
    again (same port, same data) before the next test."""
    if module_broker.proc is None or module_broker.proc.poll() is not None:
        module_broker.stop()
        module_broker.start()
    return module_broker
