"""DescribeConfigs (32) against the real broker, every version, over raw sockets; and the
config resolution (values, sources, synonyms) property-tested against a brute-force oracle.

The oracle never reads the handler's tables: a broker setting is a synonym of a topic
config when changing that setting alone changes the topic config's default
(``BrokerConfig.topic_config``), and a broker setting is "set" when the test set it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker import group_configs
from broker.config import LONG_MAX, BrokerConfig
from broker.dynamic_config import dynamic_names
from broker.handlers.describe_configs import TOPIC_SYNONYMS, broker_entries, select, topic_entries
from tests.helpers.kafka_socket import KafkaSocket, api_versions, create_topic

DYNAMIC_TOPIC, STATIC_BROKER, DEFAULT = 1, 4, 5
TOPIC, BROKER = 2, 4
SETTINGS = BrokerConfig.settings()
BASE = BrokerConfig()
BASE_TOPIC = BASE.topic_config().to_kafka()
TOPIC_NAMES = sorted(BASE_TOPIC)


def _other_value(name: str) -> str:
    """A valid value of broker setting ``name`` that differs from its default."""
    f = SETTINGS[name]
    if f.metadata["choices"]:
        return next(c for c in f.metadata["choices"] if c != f.default)
    if isinstance(f.default, float):
        return repr(f.default / 2)
    low = max(f.metadata["minimum"] or 0, 24)
    return str(low + 1000 if f.default != low + 1000 else low + 2000)


def _synonyms_by_probe() -> dict[str, list[str]]:
    """Topic config -> broker settings that alone move its default (the oracle's synonym table)."""
    out: dict[str, list[str]] = {t: [] for t in TOPIC_NAMES}
    for name in SETTINGS:
        try:
            probe = BrokerConfig.from_properties({name: _other_value(name)}).topic_config().to_kafka()
        except ValueError:
            continue
        for t in TOPIC_NAMES:
            if probe[t] != BASE_TOPIC[t]:
                out[t].append(name)
    return out


SYNONYMS = _synonyms_by_probe()
LOG_SETTINGS = sorted({s for names in SYNONYMS.values() for s in names})


def test_every_storage_topic_config_has_a_broker_synonym() -> None:
    assert all(SYNONYMS[t] for t in TOPIC_NAMES), SYNONYMS
    assert SYNONYMS["retention.ms"] and set(SYNONYMS["retention.ms"]) == {
        "log.retention.ms", "log.retention.minutes", "log.retention.hours"}


def _raw_setting(cfg: BrokerConfig, name: str) -> str | None:
    value = getattr(cfg, SETTINGS[name].name)
    if value is None:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


def oracle_topic(broker_props: dict[str, str], overrides: dict[str, str]) -> dict[str, dict[str, Any]]:
    """What DescribeConfigs must say of a topic: value, source and the synonym set."""
    cfg = BrokerConfig.from_properties(broker_props)
    effective = cfg.topic_config(overrides).to_kafka()
    out = {}
    for name, value in effective.items():
        syns = SYNONYMS.get(name, [])
        set_here = [s for s in syns if s in broker_props]
        if name in overrides:
            source = DYNAMIC_TOPIC
        elif set_here:
            source = STATIC_BROKER
        else:
            source = DEFAULT
        # Kafka's order (highest priority first: ServerTopicConfigSynonyms), then its
        # dropWhile when no broker synonym is set: nothing before the first one named
        # after the primary synonym.
        ordered = list(TOPIC_SYNONYMS.get(name, ()))
        assert set(ordered) == set(syns), (name, ordered, syns)
        broker_syns = [(s, _raw_setting(cfg, s), STATIC_BROKER) for s in ordered if s in set_here]
        broker_syns += [(s, _raw_setting(BASE, s), DEFAULT) for s in ordered
                        if SETTINGS[s].default is not None]
        while not set_here and broker_syns and broker_syns[0][0] != ordered[0]:
            broker_syns.pop(0)  # only defaults: Kafka's dropWhile (a set one keeps all)
        expected_syns = [(name, value, DYNAMIC_TOPIC)] if name in overrides else []
        out[name] = {"value": value, "source": source, "synonyms": expected_syns + broker_syns}
    return out


def _topic_values() -> st.SearchStrategy[dict[str, str]]:
    ints = {n: st.integers(1000, 10**9).map(str) for n in TOPIC_NAMES if n != "message.timestamp.type"}
    pool = {**ints, "message.timestamp.type": st.sampled_from(["CreateTime", "LogAppendTime"]),
            "cleanup.policy": st.sampled_from(["delete", "compact", "compact,delete"]),
            "min.cleanable.dirty.ratio": st.sampled_from(["0.1", "0.9"]),
            # below every broker max.compaction.lag.ms drawn in _broker_values (>= 24)
            "min.compaction.lag.ms": st.integers(0, 23).map(str),
            "min.insync.replicas": st.integers(1, 3).map(str)}
    return st.dictionaries(st.sampled_from(sorted(pool)), st.just(""), max_size=6).flatmap(
        lambda d: st.fixed_dictionaries({k: pool[k] for k in d}))


def _broker_values() -> st.SearchStrategy[dict[str, str]]:
    def value(name: str) -> st.SearchStrategy[str]:
        f = SETTINGS[name]
        if f.metadata["choices"]:
            return st.sampled_from([c for c in f.metadata["choices"] if c != f.default])
        if isinstance(f.default, float):
            return st.sampled_from([repr(f.default / 2), repr(f.default / 4)])
        if name == "log.cleaner.min.compaction.lag.ms":  # must stay below the max lag
            return st.integers(1, 23).map(str)
        lo = max(f.metadata["minimum"] or 0, 24)
        return st.integers(lo, 10**6).filter(lambda v: v != f.default).map(str)

    return st.lists(st.sampled_from(LOG_SETTINGS), unique=True, max_size=5).flatmap(
        lambda names: st.fixed_dictionaries({n: value(n) for n in names}))


@given(broker_props=_broker_values(), overrides=_topic_values(),
       keys=st.none() | st.lists(st.sampled_from([*TOPIC_NAMES, "cleanup.policy", "no.such"]),
                                 max_size=4))
@settings(max_examples=150)
def test_topic_entries_match_the_oracle(
    broker_props: dict[str, str], overrides: dict[str, str], keys: list[str] | None
) -> None:
    cfg = BrokerConfig.from_properties(broker_props)
    effective = cfg.topic_config(overrides).to_kafka()
    got = select(topic_entries(cfg, overrides, effective), keys)
    want = oracle_topic(broker_props, overrides)
    names = sorted(want) if not keys else sorted(set(keys) & set(want))
    assert [e.name for e in got] == names
    for e in got:
        w = want[e.name]
        assert (e.value, e.source, e.read_only, e.is_default) == (
            w["value"], w["source"], False, e.name not in overrides)
        assert [(s.name, s.value, s.source) for s in e.synonyms] == w["synonyms"]


def test_broker_entries_are_every_setting_with_its_value_and_source() -> None:
    props = {"log.retention.hours": "48", "num.partitions": "3", "auto.create.topics.enable": "false"}
    cfg = BrokerConfig.from_properties(props)
    got = {e.name: e for e in broker_entries(cfg)}
    assert set(got) == set(SETTINGS)
    for name, e in got.items():
        assert e.value == _raw_setting(cfg, name)
        assert e.source == (STATIC_BROKER if name in props else DEFAULT), name
        assert e.read_only == (name not in dynamic_names()), name  # what AlterConfigs may change
    assert got["auto.create.topics.enable"].value == "false"
    assert got["log.roll.ms"].value is None and got["log.roll.ms"].synonyms == ()


# ------------------------------------------------------------------ the real broker


def describe(raw: KafkaSocket, version: int, resources: list[tuple[int, str, list[str] | None]],
             synonyms: bool = False, documentation: bool = False) -> list[Any]:
    resp = raw.request(32, version, {
        "resources": [{"resource_type": t, "resource_name": n, "configuration_keys": k}
                      for t, n, k in resources],
        "include_synonyms": synonyms, "include_documentation": documentation,
    })
    assert resp.throttle_time_ms == 0
    return list(resp.results)


BROKER_PROPS = {"log.retention.hours": "48", "log.segment.bytes": "5000000",
                "message.max.bytes": "2000000", "log.message.timestamp.type": "LogAppendTime"}
TOPIC_CONFIGS = {"retention.ms": "3600000", "cleanup.policy": "delete", "segment.ms": "60000"}


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.helpers.broker import BrokerProcess, free_port_number

    data = tmp_path_factory.mktemp("describe-configs") / "data"
    data.mkdir()
    b = BrokerProcess(data, free_port_number(), dict(BROKER_PROPS)).start()
    raw = KafkaSocket(b.port)
    assert create_topic(raw, "configured", 2, TOPIC_CONFIGS).topics[0].error_code == 0
    assert create_topic(raw, "plain", 1).topics[0].error_code == 0
    raw.close()
    yield b
    b.stop()


@pytest.mark.parametrize("version", range(5))
def test_every_version_describes_a_topic_as_the_oracle_says(configured: Any, version: int) -> None:
    raw = KafkaSocket(configured.port)
    want = oracle_topic(BROKER_PROPS, TOPIC_CONFIGS)
    (res,) = describe(raw, version, [(TOPIC, "configured", None)], synonyms=True, documentation=True)
    assert (res.error_code, res.error_message, res.resource_type, res.resource_name) == (
        0, "", TOPIC, "configured")  # Kafka: "" when described
    got = {c.name: c for c in res.configs}
    assert set(got) == set(want)
    for name, c in got.items():
        assert c.value == want[name]["value"], name
        assert not c.read_only and not c.is_sensitive
        if version == 0:
            assert c.is_default == (name not in TOPIC_CONFIGS)
            assert c.config_source == -1 and list(c.synonyms) == []  # not on the wire
        else:
            assert c.config_source == want[name]["source"], name
            assert [(s.name, s.value, s.source) for s in c.synonyms] == want[name]["synonyms"]
        if version >= 3:
            assert c.config_type in (1, 2, 3, 5, 6, 7)
            assert c.documentation
        else:
            assert c.config_type == 0 and not c.documentation  # absent: Kafka's default
    assert got["message.timestamp.type"].value == "LogAppendTime"  # inherited from the broker
    raw.close()


def test_synonyms_and_documentation_only_when_asked(configured: Any) -> None:
    raw = KafkaSocket(configured.port)
    (res,) = describe(raw, 4, [(TOPIC, "plain", None)])
    assert all(list(c.synonyms) == [] and c.documentation is None for c in res.configs)
    types = {c.name: c.config_type for c in res.configs}
    assert (types["segment.bytes"], types["retention.ms"], types["message.timestamp.type"]) == (3, 5, 2)
    raw.close()


def test_configuration_keys_filter_and_per_resource_errors(configured: Any) -> None:
    raw = KafkaSocket(configured.port)
    results = describe(raw, 4, [
        (TOPIC, "configured", ["retention.ms", "no.such.config", "segment.ms"]),
        (TOPIC, "configured", []),
        (TOPIC, "missing", None),
        (TOPIC, "bad/name", None),
        (BROKER, "0", ["log.retention.hours", "num.partitions"]),
        (BROKER, "", None),
        (BROKER, "7", None),
        (BROKER, "zero", None),
        (8, "0", None),  # BROKER_LOGGER
        (32, "group", None),  # GROUP
    ])
    assert [(r.resource_type, r.resource_name) for r in results] == [
        (2, "configured"), (2, "configured"), (2, "missing"), (2, "bad/name"), (4, "0"),
        (4, ""), (4, "7"), (4, "zero"), (8, "0"), (32, "group")]
    assert [r.error_code for r in results] == [0, 0, 3, 17, 0, 0, 42, 42, 42, 0]
    assert [(c.name, c.value, c.config_source) for c in results[0].configs] == [
        ("retention.ms", "3600000", 1), ("segment.ms", "60000", 1)]
    assert len(results[1].configs) == len(oracle_topic(BROKER_PROPS, TOPIC_CONFIGS))
    assert [(c.name, c.value, c.config_source, c.read_only) for c in results[4].configs] == [
        ("log.retention.hours", "48", 4, True), ("num.partitions", "1", 5, True)]
    assert list(results[5].configs) == []  # no dynamic cluster-wide defaults exist
    for r in results[2:4] + results[6:9]:
        assert r.error_message and list(r.configs) == []
    assert "8" in results[8].error_message
    # GROUP (Kafka 4.0+): any group id, existing or not, has Kafka's group configs.
    assert [(c.name, c.config_source) for c in results[9].configs] == [
        (d.name, 5) for d in sorted(group_configs.DEFINITIONS, key=lambda d: d.name)]
    raw.close()


def test_broker_resource_lists_every_setting_with_the_values_it_was_started_with(configured: Any) -> None:
    raw = KafkaSocket(configured.port)
    (res,) = describe(raw, 4, [(BROKER, "0", None)], synonyms=True)
    got = {c.name: c for c in res.configs}
    cfg = BrokerConfig.load(overrides=[f"{k}={v}" for k, v in BROKER_PROPS.items()],
                            data_dir=str(configured.data_dir), host="127.0.0.1", port=configured.port)
    assert set(got) == set(SETTINGS)
    for name, c in got.items():
        assert c.value == _raw_setting(cfg, name), name
    for name, value in BROKER_PROPS.items():
        assert (got[name].value, got[name].config_source) == (value, STATIC_BROKER)
        assert [(s.name, s.source) for s in got[name].synonyms][0] == (name, STATIC_BROKER)
    assert got["log.flush.interval.messages"].value == str(LONG_MAX)
    raw.close()


def test_api_versions_advertises_describe_configs(broker: Any) -> None:
    raw = KafkaSocket(broker.port)
    keys = {k.api_key: (k.min_version, k.max_version) for k in api_versions(raw).api_keys}
    assert keys[32] == (0, 4)
    raw.close()


def test_topic_configs_survive_a_restart(broker_factory: Any) -> None:
    b = broker_factory(overrides={"log.retention.ms": "86400000"})
    raw = KafkaSocket(b.port)
    assert create_topic(raw, "kept", 1, {"max.message.bytes": "4096"}).topics[0].error_code == 0
    raw.close()
    b.restart()
    raw = KafkaSocket(b.port)
    (res,) = describe(raw, 4, [(TOPIC, "kept", ["max.message.bytes", "retention.ms"])])
    assert [(c.name, c.value, c.config_source) for c in res.configs] == [
        ("max.message.bytes", "4096", 1), ("retention.ms", "86400000", 4)]
    raw.close()
