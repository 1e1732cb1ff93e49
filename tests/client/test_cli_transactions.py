"""The bundled client and CLI under both isolation levels, against a real broker with
transactions written by librdkafka (confluent-kafka): ``consume --isolation``,
``offsets --isolation`` and ``dump-log`` showing markers and the transactional bit."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from client import SyncClient

CHRONOLOG = str(Path(sys.executable).parent / "chronolog")


def cli(*args: str) -> str:
    proc = subprocess.run([CHRONOLOG, *args], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def test_isolation_levels_in_client_cli_and_dump_log(broker) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic("cli-txn", 1, 1)]).values():
        f.result(10)
    base = int(time.time() * 1000) + 600_000  # after the markers (stamped now)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "cli-txn", "linger.ms": 5})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce("cli-txn", value=b"c0", timestamp=base)
    p.produce("cli-txn", value=b"c1", timestamp=base + 1)
    p.commit_transaction(15)                      # offsets 0, 1; COMMIT at 2
    p.begin_transaction()
    p.produce("cli-txn", value=b"a0", timestamp=base + 2)
    p.flush(10)
    p.abort_transaction(15)                       # offset 3; ABORT at 4
    p.begin_transaction()
    p.produce("cli-txn", value=b"open", timestamp=base + 3)
    p.flush(10)                                   # offset 5, left open: LSO = 5
    committed = cli("consume", "cli-txn", "--bootstrap-server", bs)
    assert committed.split() == ["c0", "c1"]
    everything = cli("consume", "cli-txn", "--isolation", "read_uncommitted",
                     "--bootstrap-server", bs)
    assert everything.split() == ["c0", "c1", "a0", "open"]

    def offsets(when: str, isolation: str) -> tuple[int, int]:
        out = json.loads(cli("offsets", "cli-txn", "--time", when, "--isolation", isolation,
                             "--format", "json", "--bootstrap-server", bs))
        row = out["partitions"][0]
        return row["offset"], row["timestamp"]

    assert offsets("latest", "read_committed")[0] == 5
    assert offsets("latest", "read_uncommitted")[0] == 6
    assert offsets(str(base + 3), "read_committed") == (-1, -1)  # inside the open transaction
    assert offsets(str(base + 3), "read_uncommitted") == (5, base + 3)
    assert offsets(str(base + 2), "read_committed") == (3, base + 2)  # aborted data counts
    with SyncClient.connect(bs) as client:
        assert [r.value for r in client.consume("cli-txn", 0, 0, isolation_level=1)] == [
            b"c0", b"c1"]
        assert [r.value for r in client.consume("cli-txn", 0, 0)] == [
            b"c0", b"c1", b"a0", b"open"]
    p.commit_transaction(15)
    assert cli("consume", "cli-txn", "--bootstrap-server", bs).split() == ["c0", "c1", "open"]
    broker.stop()
    dump = cli("dump-log", "--print-records", str(broker.data_dir / "cli-txn-0"))
    assert "isTransactional: true isControl: true" in dump
    assert dump.count("endTxnMarker: COMMIT coordinatorEpoch: 0") == 2
    assert dump.count("endTxnMarker: ABORT coordinatorEpoch: 0") == 1
