"""The remote tier's topic configs through confluent-kafka's admin client: accepted,
described, and refused with Kafka's error (INVALID_CONFIG, 40) and Kafka's messages
(LogConfig.validateTopicLogConfigValues and friends) where Kafka refuses them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from broker.config import BrokerConfig, ConfigError
from tests.helpers.broker import BrokerProcess, free_port_number

TIMEOUT = 15.0


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    """One broker with tiering on, one with it off (Kafka's default)."""
    tmp = tmp_path_factory.mktemp("tier-configs")
    on = BrokerProcess(tmp / "on", free_port_number(), {
        "remote.log.storage.system.enable": "true", "rsm.config.url": f"file://{tmp}/bucket"})
    off = BrokerProcess(tmp / "off", free_port_number())
    on.start()
    try:
        off.start()
        try:
            yield on, off
        finally:
            off.stop()
    finally:
        on.stop()


def create(b: BrokerProcess, name: str, config: dict[str, str]) -> KafkaError | None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    fut = admin.create_topics([NewTopic(name, 1, 1, config=config)])[name]
    try:
        fut.result(TIMEOUT)
    except KafkaException as exc:
        return exc.args[0]
    return None


def alter(b: BrokerProcess, name: str, **values: str) -> KafkaError | None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource("TOPIC", name, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in values.items()])
    try:
        admin.incremental_alter_configs([res])[res].result(TIMEOUT)
    except KafkaException as exc:
        return exc.args[0]
    return None


def described(b: BrokerProcess, name: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource("TOPIC", name)
    return {k: e.value for k, e in admin.describe_configs([res])[res].result(TIMEOUT).items()}


@pytest.mark.parametrize(("config", "message"), [
    ({"remote.storage.enable": "true", "cleanup.policy": "compact"},
     "Remote log storage is unsupported for the compacted topics"),
    ({"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "2000"},
     "Invalid value 2000 for configuration local.retention.ms: Value must not be more than "
     "retention.ms property value: 1000"),
    ({"remote.storage.enable": "true", "retention.bytes": "1000", "local.retention.bytes": "-1"},
     "Invalid value -1 for configuration local.retention.bytes: Value must not be -1 as "
     "retention.bytes value is set as 1000."),
    ({"remote.storage.enable": "true", "remote.log.copy.disable": "true", "retention.ms": "1000",
      "local.retention.ms": "500"},
     "When `remote.log.copy.disable` is set to true, the `local.retention.ms` and `retention.ms` "
     "must be set to the identical value because there will be no more logs copied to the "
     "remote storage."),
    ({"remote.storage.enable": "yes"},
     "Invalid value yes for configuration remote.storage.enable: Expected value to be either "
     "true or false"),
    ({"local.retention.ms": "-3"},
     "Invalid value -3 for configuration local.retention.ms: Value must be at least -2"),
])
def test_kafka_refusals_with_kafkas_messages(brokers: tuple[BrokerProcess, BrokerProcess],
                                             config: dict[str, str], message: str) -> None:
    on, _ = brokers
    name = f"bad-{abs(hash(tuple(sorted(config.items()))))}"
    err = create(on, name, config)
    assert err is not None and err.code() == KafkaError.INVALID_CONFIG, err
    assert err.str() == message


def test_remote_storage_needs_the_broker_switch(brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    _, off = brokers
    err = create(off, "needs-switch", {"remote.storage.enable": "true"})
    assert err is not None and err.code() == KafkaError.INVALID_CONFIG
    assert err.str() == ("Tiered Storage functionality is disabled in the broker. Topic cannot "
                         "be configured with remote log storage.")


def test_tiered_topic_configs_are_kept_described_and_altered(
        brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    on, _ = brokers
    assert create(on, "ok", {"remote.storage.enable": "true", "local.retention.ms": "60000",
                             "retention.ms": "600000"}) is None
    got = described(on, "ok")
    assert got["remote.storage.enable"] == "true" and got["local.retention.ms"] == "60000"
    # Turning it off without deleting the remote data: Kafka's KIP-950 refusal.
    err = alter(on, "ok", remote_storage_enable="false")
    assert err is not None and err.code() == KafkaError.INVALID_CONFIG
    assert err.str().startswith("It is invalid to disable remote storage without deleting "
                                "remote data.")
    # Read-only tier (Kafka's advice in that message) is accepted.
    assert alter(on, "ok", remote_storage_enable="true", remote_log_copy_disable="true",
                 local_retention_ms="-2") is None
    assert described(on, "ok")["remote.log.copy.disable"] == "true"


def test_broker_settings_with_kafkas_names_and_defaults(tmp_path: Path) -> None:
    cfg = BrokerConfig.from_properties({"log.dirs": str(tmp_path / "data")})
    assert (cfg.remote_log_storage_system_enable, cfg.remote_log_manager_task_interval_ms,
            cfg.log_local_retention_ms, cfg.log_local_retention_bytes,
            cfg.remote_log_manager_task_retry_backoff_ms,
            cfg.remote_log_manager_task_retry_backoff_max_ms,
            cfg.remote_log_index_file_cache_total_size_bytes) == (
        False, 30000, -2, -2, 500, 30000, 1 << 30)
    # The default bucket sits beside the data directory; rsm.config.* pass through.
    cfg = BrokerConfig.from_properties({
        "log.dirs": str(tmp_path / "data"), "remote.log.storage.system.enable": "true",
        "rsm.config.s3.region": "eu-west-1", "rsm.config.s3.secret.access.key": "s3cr3t"})
    assert cfg.rsm_options == {"url": f"file://{tmp_path}/data-remote", "s3.region": "eu-west-1",
                               "s3.secret.access.key": "s3cr3t"}
    assert cfg.describe()["rsm.config.s3.secret.access.key"] == "[hidden]"
    with pytest.raises(ConfigError, match="log.local.retention.ms: Value must not be more than"):
        BrokerConfig.from_properties({"remote.log.storage.system.enable": "true",
                                      "log.retention.ms": "1000", "log.local.retention.ms": "5000"})
    with pytest.raises(ConfigError, match="rsm.config.url: expected file:///a/dir or s3://"):
        BrokerConfig.from_properties({"remote.log.storage.system.enable": "true",
                                      "rsm.config.url": "ftp://x"})
