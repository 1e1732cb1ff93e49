"""kill -9 under load: nothing acknowledged is lost or duplicated, lookups stay exact.

Real confluent-kafka producers (one idempotent, one not; acks=all) write without
pause while the broker is SIGKILLed at random moments and restarted on the same
data dir. After every restart, the log read back through the codec is the oracle:

- every acknowledged record is at the offset its acknowledgement named, with its
  value and timestamp;
- each partition's offsets are contiguous from 0;
- the idempotent producer's records appear exactly once and in send order;
- the non-idempotent producer's acknowledged records appear at least once (a
  write whose acknowledgement died with the broker is retried, as in Kafka; the
  test reports how many such duplicates it saw);
- ``offsets_for_times`` for random times equals the first offset at or after the
  time in the log as read.

``make test`` runs a few rounds; ``make chaos`` runs CHRONOLOG_CHAOS_ROUNDS (25).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from client import SyncClient
from storage.records import decode_batch, iter_batches
from tests.helpers.broker import BrokerProcess, free_port_number

ROUNDS = int(os.environ.get("CHRONOLOG_CHAOS_ROUNDS", "3"))
PARTITIONS = 3
PRODUCER = Path(__file__).with_name("chaos_producer.py")


class Stored(NamedTuple):
    offset: int
    timestamp: int
    value: str


class Ack(NamedTuple):
    partition: int
    offset: int
    timestamp: int
    value: str


def read_log(client: SyncClient, topic: str) -> dict[int, list[Stored]]:
    """Every partition up to its high watermark, decoded by the codec."""
    out: dict[int, list[Stored]] = {}
    for p in range(PARTITIONS):
        end = client.latest(topic, [p])[p]
        rows: list[Stored] = []
        offset = 0
        while offset < end:
            buf = client.fetch_raw(topic, p, offset, 8 << 20).records_bytes
            for pos, h in iter_batches(buf):
                for r in decode_batch(buf, pos):
                    if offset <= r.offset < end:
                        assert r.value is not None
                        rows.append(Stored(r.offset, r.timestamp, r.value.decode()))
                offset = max(offset, h.last_offset + 1)
        out[p] = rows
    return out


def read_acks(path: Path) -> list[Ack]:
    acks = []
    for line in path.read_text().splitlines(keepends=True):
        if not line.endswith("\n"):
            break  # being written
        p, off, ts, value = line.split()
        acks.append(Ack(int(p), int(off), int(ts), value))
    return acks


class Round(NamedTuple):
    acked: int
    stored: int
    duplicates: int


def check(client: SyncClient, topic: str, acks: list[Ack], rng: random.Random) -> Round:
    log = read_log(client, topic)
    for p, rows in log.items():
        assert [r.offset for r in rows] == list(range(len(rows))), f"offset gap in partition {p}"
    for a in acks:
        rows = log[a.partition]
        assert a.offset < len(rows), f"acknowledged {a} is gone"
        assert rows[a.offset] == Stored(a.offset, a.timestamp, a.value), f"{a} != {rows[a.offset]}"
    counts = Counter(r.value for rows in log.values() for r in rows)
    twice = [v for v, n in counts.items() if n > 1]
    assert not [v for v in twice if v.startswith("idem:")], "idempotent producer duplicated"
    for p, rows in log.items():
        seqs = [int(r.value.split(":")[1]) for r in rows if r.value.startswith("idem:")]
        assert seqs == sorted(seqs), f"idempotent records out of order in partition {p}"
    stamps = [r.timestamp for rows in log.values() for r in rows]
    if stamps:
        for _ in range(20):
            t = rng.randint(min(stamps) - 10, max(stamps) + 10)
            got = client.offsets_for_times(topic, t)
            for p, rows in log.items():
                want = next((r for r in rows if r.timestamp >= t), None)
                if want is not None:
                    assert got[p] == (want.offset, want.timestamp), (p, t, got[p], want)
                else:  # only records written after the read can answer
                    assert got[p] is None or got[p][0] >= len(rows), (p, t, got[p])
    return Round(len(acks), sum(len(r) for r in log.values()), len(twice))


@pytest.fixture
def chaos_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    data = tmp_path / "data"
    data.mkdir()
    b = BrokerProcess(data, free_port_number()).start()
    yield b
    b.stop()


def test_kill_9_rounds_lose_and_duplicate_nothing_acknowledged(
    chaos_broker: BrokerProcess, tmp_path: Path
) -> None:
    rng = random.Random(int(os.environ.get("CHRONOLOG_CHAOS_SEED", "7")))
    topic = "chaos"
    client = SyncClient(chaos_broker.bootstrap)
    client.create_topic(topic, PARTITIONS)
    stop = tmp_path / "stop"
    producers = []
    logs = {}
    for name, idem in (("idem", "1"), ("plain", "0")):
        logs[name] = tmp_path / f"{name}.acks"
        producers.append(subprocess.Popen(
            [sys.executable, str(PRODUCER), chaos_broker.bootstrap, topic, name, idem,
             str(logs[name]), str(stop)]))
    rounds: list[Round] = []
    try:
        for _ in range(ROUNDS):
            # Kill only while both producers are writing: wait for fresh acknowledgements
            # from each since the last restart, then a random moment later.
            _wait_for_progress(logs, timeout=30.0)
            time.sleep(rng.uniform(0.05, 1.0))
            chaos_broker.kill()
            acks = [a for f in logs.values() if f.exists() for a in read_acks(f)]
            chaos_broker.start()
            client.close()
            client = SyncClient(chaos_broker.bootstrap)
            rounds.append(check(client, topic, acks, rng))
        stop.touch()
        for proc in producers:
            assert proc.wait(60) == 0
        final = check(client, topic, [a for f in logs.values() for a in read_acks(f)], rng)
    finally:
        stop.touch()
        for proc in producers:
            if proc.poll() is None:
                proc.kill()
        client.close()
    print(f"\nchaos: {ROUNDS} kill -9 rounds; acknowledged/stored/duplicated per round: "
          f"{[tuple(r) for r in rounds]}; final {tuple(final)}")
    assert [r.acked for r in rounds] == sorted(set(r.acked for r in rounds))  # progress each round


def _wait_for_progress(logs: dict[str, Path], timeout: float) -> None:
    start = {n: f.stat().st_size if f.exists() else 0 for n, f in logs.items()}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(f.exists() and f.stat().st_size > start[n] for n, f in logs.items()):
            return
        time.sleep(0.05)
    raise AssertionError(f"producers made no progress in {timeout}s after a restart")
