"""The bundled client's DescribeConfigs (Client, SyncClient) and ``chronolog topics describe``,
against the real broker started with non-default settings; expected values are derived
from those settings (``BrokerConfig.topic_config``), not written as literals.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from client_oracle import unique_topic

from broker.config import BrokerConfig
from broker.dynamic_config import dynamic_names
from client import Client, ErrorCode, KafkaError, SyncClient

CHRONOLOG = str(Path(sys.executable).parent / "chronolog")
BROKER_PROPS = {"log.retention.minutes": "90", "log.index.interval.bytes": "8192"}
TOPIC_CONFIGS = {"segment.bytes": "2000000", "cleanup.policy": "compact"}


def expected(overrides: dict[str, str]) -> dict[str, str]:
    return BrokerConfig.from_properties(BROKER_PROPS).topic_config(overrides).to_kafka()


def expected_source(name: str, overrides: dict[str, str]) -> str:
    if name in overrides:
        return "DYNAMIC_TOPIC_CONFIG"
    if name in ("retention.ms", "index.interval.bytes"):  # the log.* settings started with
        return "STATIC_BROKER_CONFIG"
    return "DEFAULT_CONFIG"


@pytest.fixture
def configured(broker_factory: Any) -> Any:
    return broker_factory(overrides=BROKER_PROPS)


def test_sync_client_describes_values_sources_and_filters(configured: Any) -> None:
    topic = unique_topic("dc")
    with SyncClient(configured.bootstrap, client_id="dc-sync") as c:
        c.create_topic(topic, 2, TOPIC_CONFIGS)
        assert c.describe_configs(topic) == expected(TOPIC_CONFIGS)
        assert c.describe_configs(topic, ["retention.ms", "nope"]) == {
            "retention.ms": expected(TOPIC_CONFIGS)["retention.ms"]}
        entries = c.describe_config_entries(topic, synonyms=True, documentation=True)
        assert {n: e.value for n, e in entries.items()} == expected(TOPIC_CONFIGS)
        for name, e in entries.items():
            assert e.source == expected_source(name, TOPIC_CONFIGS), name
            assert (e.read_only, e.sensitive) == (False, False)
            # segment.ms and the like list no synonym when no broker setting is made (Kafka)
            assert not e.synonyms or e.synonyms[0].source == e.source
            assert e.config_type is not None and e.documentation
        assert entries["segment.bytes"].config_type == "INT"
        assert [(s.name, s.value, s.source) for s in entries["retention.ms"].synonyms][:1] == [
            ("log.retention.minutes", "90", "STATIC_BROKER_CONFIG")]
        with pytest.raises(KafkaError) as exc:
            c.describe_configs(unique_topic("absent"))
        assert exc.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_async_client_describes_the_broker(configured: Any) -> None:
    async with await Client.connect(configured.bootstrap) as c:
        entries = await c.describe_config_entries("0", resource="broker")
        for name, value in BROKER_PROPS.items():
            assert (entries[name].value, entries[name].source) == (value, "STATIC_BROKER_CONFIG")
        assert entries["log.retention.hours"].source == "DEFAULT_CONFIG"
        # read-only exactly where Kafka cannot change a setting at runtime
        assert {n for n, e in entries.items() if not e.read_only} == dynamic_names()
        assert await c.describe_config_entries("", resource="broker") == {}
        with pytest.raises(KafkaError) as exc:
            await c.describe_config_entries("9", resource="broker")
        assert exc.value.code == ErrorCode.INVALID_REQUEST


def cli(*args: str) -> str:
    proc = subprocess.run([CHRONOLOG, *args], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def test_cli_topics_describe_shows_the_configs(configured: Any) -> None:
    topic = unique_topic("dc-cli")
    flags = [f"--config={k}={v}" for k, v in TOPIC_CONFIGS.items()]
    cli("topics", "create", topic, *flags, "--bootstrap-server", configured.bootstrap)
    want = expected(TOPIC_CONFIGS)
    info = json.loads(cli("topics", "describe", topic, "--format", "json",
                          "--bootstrap-server", configured.bootstrap))
    assert {n: c["value"] for n, c in info["configs"].items()} == want
    assert {n: c["source"] for n, c in info["configs"].items()} == {
        n: expected_source(n, TOPIC_CONFIGS) for n in want}
    table = cli("topics", "describe", topic, "--bootstrap-server", configured.bootstrap).splitlines()
    start = table.index(next(line for line in table if line.startswith("CONFIG")))
    assert table[start].split() == ["CONFIG", "VALUE", "SOURCE"]
    rows = [line.split() for line in table[start + 1:]]
    assert rows == [[n, want[n], expected_source(n, TOPIC_CONFIGS)] for n in sorted(want)]
