"""kafkajs 2.2.4 (Node, no code shared with the other clients) over SASL_PLAINTEXT and
SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512: produce, consume in a group and
commit, and look offsets up by time (``admin.fetchTopicOffsetsByTimestamp``) against the
oracle (the first offset whose timestamp is >= the target, else the high watermark);
and a wrong password is refused with an authentication error, for every mechanism.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.clients import BASE_TS, index_valued, probe_times, topic_name
from tests.helpers.kafkajs import JS_DIR, NODE, as_messages, expected_by_time, run_driver, unb64
from tests.security.secure_broker import ALICE, BOB, SecureBroker, start_secure_broker

PARTITIONS = 2


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    assert NODE and (JS_DIR / "node_modules" / "kafkajs").is_dir(), \
        "kafkajs is not installed: `make check-clients` installs it"
    b = start_secure_broker(tmp_path_factory.mktemp("kafkajs-sasl"),
                            {"num.partitions": str(PARTITIONS)})
    yield b
    b.proc.stop()


def job(sb: SecureBroker, listener: str, mechanism: str, user: tuple[str, str],
        steps: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    out = {"brokers": [sb.bootstrap(listener)], "steps": steps,
           "sasl": {"mechanism": mechanism.lower(), "username": user[0], "password": user[1]},
           **extra}
    if listener == "SASL_SSL":
        out["caFile"] = sb.pki.ca
    return out


def user_for(mechanism: str) -> tuple[str, str]:
    """alice is a PLAIN (JAAS) user, bob has SCRAM-SHA-256 and -512 credentials."""
    return ALICE if mechanism == "PLAIN" else BOB


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_kafkajs_produces_consumes_in_a_group_and_looks_up_times(
        sb: SecureBroker, listener: str, mechanism: str) -> None:
    rng = random.Random(f"{listener}/{mechanism}")
    stamps = {p: [BASE_TS + rng.randrange(40) for _ in range(6 + 3 * p)] for p in range(PARTITIONS)}
    per_partition = {p: index_valued(ts) for p, ts in stamps.items()}
    messages = [m for p, recs in per_partition.items() for m in as_messages(recs, p)]
    topic, group = topic_name("js-sasl"), topic_name("js-sasl-g")
    probes = probe_times([t for ts in stamps.values() for t in ts])
    done = run_driver(job(sb, listener, mechanism, user_for(mechanism), [
        {"op": "createTopics", "topics": [topic]},
        {"op": "produce", "topic": topic, "messages": messages},
        {"op": "consume", "topic": topic, "groupId": group, "count": len(messages), "commit": True},
        {"op": "fetchOffsets", "groupId": group, "topic": topic},
        {"op": "offsetsByTime", "topic": topic, "timestamps": probes},
    ]))
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    created, produced, got, fetched, answers = json.loads(done.stdout)
    assert created is True
    assert [o["error"] for o in produced] == [0] * len(messages)
    assert sorted((m["partition"], m["offset"], unb64(m["value"]), m["timestamp"]) for m in got) \
        == sorted((p, i, r.value, r.timestamp) for p, recs in per_partition.items()
                  for i, r in enumerate(recs))
    [offsets] = fetched
    assert sorted((p["partition"], int(p["offset"])) for p in offsets["partitions"]) == \
        [(p, len(recs)) for p, recs in per_partition.items()]
    for t, answer in zip(probes, answers, strict=True):
        assert {a["partition"]: a["offset"] for a in answer} == \
            {p: expected_by_time(list(enumerate(ts)), t) for p, ts in stamps.items()}, t


@pytest.mark.parametrize("listener, mechanism", [
    ("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SASL_SSL", "SCRAM-SHA-512")])
def test_kafkajs_with_a_wrong_password_is_refused(sb: SecureBroker, listener: str,
                                                   mechanism: str) -> None:
    user = (user_for(mechanism)[0], "not-the-password")
    done = run_driver(job(sb, listener, mechanism, user, [{"op": "listTopics"}], retries=0))
    err = done.stderr.decode(errors="replace")
    assert done.returncode != 0 and done.stdout == b""
    assert "KafkaJSSASLAuthenticationError" in err, err
