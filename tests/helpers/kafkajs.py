"""kafkajs in a Node process (tests/js/driver.js), as the broker, security and
console tests drive it.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import (
    Rec,
    first_at_or_after,
)
from tests.helpers.kafka_socket import KafkaSocket

JS_DIR = Path(__file__).resolve().parents[1] / "js"


NODE = shutil.which("node")


def run_driver(job: dict[str, Any], timeout: float = 60.0) -> subprocess.CompletedProcess[bytes]:
    """One Node process running driver.js on the job (brokers, steps, optional sasl/caFile)."""
    env = {**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"}
    return subprocess.run([NODE or "node", str(JS_DIR / "driver.js")], input=json.dumps(job).encode(),
                          capture_output=True, timeout=timeout, env=env)


def kafkajs(b: BrokerProcess, steps: list[dict[str, Any]], timeout: float = 60.0) -> list[Any]:
    """Run the steps with one kafkajs client in a Node process; one result per step."""
    done = run_driver({"brokers": [b.bootstrap], "steps": steps}, timeout)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    result: list[Any] = json.loads(done.stdout)
    return result


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def unb64(data: str | None) -> bytes | None:
    return None if data is None else base64.b64decode(data)


def as_messages(recs: Sequence[Rec], partition: int = 0) -> list[dict[str, Any]]:
    """kafkajs takes headers as an object: one value per name, none null."""
    return [{"partition": partition, "key": b64(r.key), "value": b64(r.value), "timestamp": r.timestamp,
             "headers": [[k, b64(v)] for k, v in r.headers]} for r in recs]


def create(b: BrokerProcess, *topics: str, partitions: int | None = None) -> None:
    """Topics through kafkajs admin (broker defaults) or, with a count, over a raw socket."""
    if partitions is None:
        assert kafkajs(b, [{"op": "createTopics", "topics": list(topics)}]) == [True]
        return
    raw = KafkaSocket(b.port)
    resp = raw.request(19, 7, {"topics": [{"name": t, "num_partitions": partitions, "replication_factor": 1,
                                        "assignments": [], "configs": []} for t in topics],
                            "timeout_ms": 5000, "validate_only": False})
    assert [t.error_code for t in resp.topics] == [0] * len(topics)


def expected_by_time(stamped: Sequence[tuple[int, int]], t: int) -> int:
    """kafkajs's fetchTopicOffsetsByTimestamp: the oracle's offset, or the high watermark."""
    hit = first_at_or_after(stamped, t)
    return len(stamped) if hit is None else hit
