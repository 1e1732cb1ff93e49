"""BrokerConfig: Kafka names, defaults, properties files, overrides and topic configs."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from broker.config import BrokerConfig, ConfigError, add_arguments, read_properties


def test_every_setting_carries_its_kafka_name_and_snake_case_attribute() -> None:
    for f in dataclasses.fields(BrokerConfig):
        kafka = f.metadata["kafka"]
        assert f.name == kafka.replace(".", "_"), (f.name, kafka)


def test_defaults_are_kafkas() -> None:
    cfg = BrokerConfig()
    assert (cfg.host, cfg.port) == ("127.0.0.1", 9092)
    assert cfg.log_dirs == "./data"
    assert cfg.node_id == 0
    assert cfg.num_partitions == 1
    assert cfg.auto_create_topics_enable is True
    assert cfg.message_max_bytes == 1048588
    assert cfg.socket_request_max_bytes == 104857600
    assert cfg.log_message_timestamp_after_max_ms == 3_600_000
    assert cfg.retention_ms == 168 * 3_600_000
    assert cfg.roll_ms == 168 * 3_600_000
    assert cfg.udp_format == "raw" and cfg.udp_partitioning == "hash"


def test_properties_file_then_overrides_then_flags(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "# comment\n"
        "! another comment\n"
        "log.segment.bytes=1024\n"
        "num.partitions : 3\n"
        "log.retention.ms=5000\n"
        "listeners=PLAINTEXT://127.0.0.1:9999\n"
        "log.message.timestamp.type=LogAppendTime\n"
        "auto.create.topics.enable=FALSE\n"
        "advertised.listeners=PLAINTEXT://example.org:\\\n"
        "  19092\n"
    )
    cfg = BrokerConfig.load(props, ["num.partitions=4"], data_dir=str(tmp_path / "d"), port=7777)
    assert cfg.log_segment_bytes == 1024
    assert cfg.num_partitions == 4
    assert cfg.retention_ms == 5000
    assert (cfg.host, cfg.port) == ("127.0.0.1", 7777)
    assert cfg.auto_create_topics_enable is False
    assert cfg.advertised_host_port(1234) == ("example.org", 19092)
    assert cfg.log_dirs == str(tmp_path / "d")
    topic = cfg.topic_config({"retention.ms": "10"})
    assert topic.segment_bytes == 1024
    assert topic.retention_ms == 10
    assert topic.message_timestamp_type == "LogAppendTime"


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("no.such.setting=1", "unknown broker setting 'no.such.setting'"),
        ("num.partitions=zero", "num.partitions: expected an integer"),
        ("num.partitions=0", "num.partitions: must be at least 1"),
        ("auto.create.topics.enable=yes", "expected true or false"),
        ("log.message.timestamp.type=Whenever", "must be one of CreateTime, LogAppendTime"),
        ("listeners=SSL://127.0.0.1:9093", "ssl.keystore.type must be PEM"),
        ("listeners=SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms"),
        ("listeners=CLIENT://127.0.0.1:9093", "listener.security.protocol.map"),
        ("listeners=127.0.0.1", "expected PLAINTEXT://host:port"),
        ("udp.format=xml", "udp.format"),
        ("log.segment.bytes=99999999999", "segment.bytes"),
        ("missing-equals", "name=value"),
    ],
)
def test_bad_settings_are_rejected_with_a_message_naming_them(override: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(None, [override])
    assert fragment in str(info.value)


def test_retention_precedence_ms_over_minutes_over_hours() -> None:
    assert BrokerConfig.load(None, ["log.retention.hours=2"]).retention_ms == 7_200_000
    assert BrokerConfig.load(
        None, ["log.retention.hours=2", "log.retention.minutes=3"]).retention_ms == 180_000
    assert BrokerConfig.load(
        None, ["log.retention.minutes=3", "log.retention.ms=-1"]).retention_ms == -1


def test_topic_configs_reject_unknown_names_and_bad_values() -> None:
    cfg = BrokerConfig()
    with pytest.raises(ConfigError, match="segment.bytess"):
        cfg.topic_config({"segment.bytess": "1"})
    with pytest.raises(ConfigError, match="message.timestamp.type"):
        cfg.topic_config({"message.timestamp.type": "Sometime"})
    with pytest.raises(ConfigError, match="retention.ms"):
        cfg.topic_config({"retention.ms": "soon"})
    assert cfg.topic_config({"compression.type": "lz4"}).extra == {"compression.type": "lz4"}
    # Kafka keeps a list in the order given (the Java admin's APPEND of compact to delete
    # describes "delete,compact"); repeats are dropped.
    assert cfg.topic_config({"cleanup.policy": "delete,compact"}).cleanup_policy == "delete,compact"
    assert cfg.topic_config({"cleanup.policy": "compact,delete,compact"}).cleanup_policy == \
        "compact,delete"
    with pytest.raises(ConfigError, match="cleanup.policy"):
        cfg.topic_config({"cleanup.policy": "compact,shred"})
    with pytest.raises(ConfigError, match="min.compaction.lag.ms"):
        cfg.topic_config({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_missing_properties_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        read_properties(tmp_path / "absent.properties")


def test_serve_arguments_parse_as_documented() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        ["server.properties", "--data-dir", "d", "--host", "0.0.0.0", "--port", "1",
         "--override", "a=b", "--override", "c=d", "--log-format", "json"]
    )
    assert args.properties == "server.properties"
    assert args.override == ["a=b", "c=d"]
    assert (args.data_dir, args.host, args.port, args.log_format) == ("d", "0.0.0.0", 1, "json")
