"""Simulated power loss: a torn active segment, flipped bytes in its indexes and last batch.

After a SIGKILL, each partition's active segment is cut at a random byte, a random
byte inside the CRC-covered part of its last complete batch is flipped, and random
bytes of both index files are flipped. On restart the broker must keep exactly the
complete batches before the damage (the oracle is the segment's own bytes, parsed
before the damage), rebuild the indexes so that every time lookup equals the
oracle's, say in its log what it removed, and go on appending at the right offset.
``make chaos`` runs more examples (CHRONOLOG_POWER_LOSS_EXAMPLES).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from client import ProducerRecord, SyncClient
from storage.records import decode_batch, iter_batches
from tests.helpers.broker import BrokerProcess, free_port_number

PARTITIONS = 2
CRC_COVERED_FROM = 21  # attributes onward; the CRC itself is at 17..20


def _active_segment(data: Path, topic: str, p: int) -> Path:
    return sorted((data / f"{topic}-{p}").glob("*.log"))[-1]


def _damage(log_path: Path, rng: random.Random) -> list[tuple[int, int]]:
    """Tear and corrupt one segment; returns the (offset, timestamp) records that must survive."""
    data = log_path.read_bytes()
    base = int(log_path.stem)
    cut = rng.randint(0, len(data))
    torn = data[:cut]
    batches = list(iter_batches(torn))  # complete batches only
    keep = batches[:-1] if batches else []
    if batches:
        pos, h = batches[-1]
        end = pos + h.batch_length + 12
        at = rng.randrange(pos + CRC_COVERED_FROM - 4, end)  # the CRC or what it covers
        flipped = bytearray(torn)
        flipped[at] ^= 1 << rng.randrange(8)
        torn = bytes(flipped)
    log_path.write_bytes(torn)
    for suffix in (".index", ".timeindex"):
        idx = log_path.with_suffix(suffix)
        if idx.exists() and idx.stat().st_size:
            raw = bytearray(idx.read_bytes())
            for _ in range(3):
                raw[rng.randrange(len(raw))] ^= 0xFF
            idx.write_bytes(bytes(raw))
    survivors = [(r.offset, r.timestamp) for pos, _h in keep for r in decode_batch(data, pos)]
    # earlier (sealed) segments are untouched
    assert all(o >= base for o, _ in survivors)
    return survivors


def _stored(client: SyncClient, topic: str, p: int) -> list[tuple[int, int]]:
    end = client.latest(topic, [p])[p]
    out: list[tuple[int, int]] = []
    offset = client.earliest(topic, [p])[p]
    while offset < end:
        buf = client.fetch_raw(topic, p, offset, 8 << 20).records_bytes
        for pos, h in iter_batches(buf):
            out += [(r.offset, r.timestamp) for r in decode_batch(buf, pos) if r.offset >= offset]
            offset = max(offset, h.last_offset + 1)
    return out


@settings(max_examples=int(os.environ.get("CHRONOLOG_POWER_LOSS_EXAMPLES", "4")))
@given(seed=st.integers(0, 2**32 - 1))
def test_power_loss_cuts_only_the_damaged_tail(tmp_path_factory, seed: int) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    data = tmp_path_factory.mktemp("powerloss")
    broker = BrokerProcess(data, free_port_number(), {"log.segment.bytes": "65536"}).start()
    topic = "pl"
    try:
        with SyncClient(broker.bootstrap) as c:
            c.create_topic(topic, PARTITIONS)
            t0 = 1_700_000_000_000
            for b in range(rng.randint(5, 40)):
                recs = [ProducerRecord(key=None, value=rng.randbytes(rng.randint(1, 300)),
                                       timestamp=t0 + rng.randint(-5000, 5000) + b * 100)
                        for _ in range(rng.randint(1, 30))]
                c.produce(topic, recs, partition=b % PARTITIONS, acks=-1)
            before = {p: _stored(c, topic, p) for p in range(PARTITIONS)}
        broker.kill()
        expected = {}
        for p in range(PARTITIONS):
            seg = _active_segment(data, topic, p)
            base = int(seg.stem)
            expected[p] = [r for r in before[p] if r[0] < base] + _damage(seg, rng)
        broker.start()
        with SyncClient(broker.bootstrap) as c:
            for p in range(PARTITIONS):
                assert _stored(c, topic, p) == expected[p]
                stamps = [ts for _, ts in expected[p]]
                for t in ([min(stamps) - 1, max(stamps) + 1] if stamps else [t0]) + \
                        [rng.randint(t0 - 6000, t0 + 10_000) for _ in range(20)]:
                    want = next(((o, ts) for o, ts in expected[p] if ts >= t), None)
                    assert c.offsets_for_times(topic, t, [p])[p] == want, (p, t)
            # appends continue right after the survivors
            for p in range(PARTITIONS):
                got = c.produce(topic, [ProducerRecord(value=b"after", timestamp=t0)],
                                partition=p, acks=-1)
                assert got == [expected[p][-1][0] + 1 if expected[p] else 0]
                assert _stored(c, topic, p) == expected[p] + [(got[0], t0)]
        if any(len(expected[p]) < len(before[p]) for p in range(PARTITIONS)):
            assert "removed a damaged or torn tail" in broker.log()
    finally:
        broker.stop()
