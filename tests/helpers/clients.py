"""What the three real-client suites share: a module-wide broker, the record and
timestamp strategies, and the brute-force oracle every time lookup is checked against.

The oracle is the definition of ListOffsets for a timestamp T: the smallest offset
whose record timestamp is >= T, or none. It scans every record the test produced
(for LogAppendTime topics: every record as the broker stamped it, read back).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import strategies as st

from storage.records import Record, decode_batch, iter_batches
from tests.helpers.broker import BrokerProcess, free_port_number
from tests.helpers.kafka_socket import KafkaSocket

# Timestamps an hour in the past and earlier: inside Kafka 4's default
# message.timestamp.after.max.ms (1 h) and the unlimited before.max.ms.
BASE_TS = int(time.time() * 1000) - 3_600_000
CODECS = ("gzip", "snappy", "lz4", "zstd")

_names = itertools.count()


def topic_name(prefix: str) -> str:
    """A topic name no other test of this process uses."""
    return f"{prefix}-{next(_names)}-{int(time.time() * 1000) % 100000}"


@contextmanager
def running_broker(
    tmp_path_factory: pytest.TempPathFactory, name: str, overrides: dict[str, str] | None = None
) -> Iterator[BrokerProcess]:
    """A real broker subprocess shared by one test module; stopped at the end."""
    data = tmp_path_factory.mktemp(name) / "data"
    data.mkdir()
    b = BrokerProcess(data, free_port_number(), dict(overrides or {}))
    b.start()
    try:
        yield b
    finally:
        b.stop()


def bring_back(b: BrokerProcess, how: str) -> None:
    """Restart the broker: "crash" kills it (SIGKILL) and starts it again, anything else stops it cleanly."""
    if how == "crash":
        b.kill()
        b.start()
    else:
        b.restart()


@dataclass(frozen=True)
class Rec:
    """One produced record as the test sent it."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def first_at_or_after(stamped: Sequence[tuple[int, int]], target: int) -> int | None:
    """Oracle: the smallest offset whose timestamp is >= target among (offset, ts) pairs."""
    hits = [off for off, ts in stamped if ts >= target]
    return min(hits) if hits else None


def probe_times(timestamps: Sequence[int]) -> list[int]:
    """Every produced timestamp, its neighbours, and the ends: where lookups can go wrong."""
    probes = {0, BASE_TS - 1_000_000}
    for ts in timestamps:
        probes.update((ts - 1, ts, ts + 1))
    if timestamps:
        probes.add(max(timestamps) + 10_000)
    return sorted(p for p in probes if p >= 0)


# Out-of-order and equal CreateTimes inside one batch: a small range forces repeats.
timestamp_lists = st.lists(st.integers(BASE_TS, BASE_TS + 40), min_size=1, max_size=25)

header_values = st.one_of(st.none(), st.binary(max_size=12))
records = st.builds(
    Rec,
    key=st.one_of(st.none(), st.binary(max_size=16)),
    value=st.one_of(st.none(), st.binary(max_size=200)),
    # librdkafka takes header names as C strings, so a NUL would end the name early;
    # header keys are UTF-8 on the wire, so lone surrogates (category Cs) cannot occur.
    headers=st.lists(
        st.tuples(st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
                        min_size=1, max_size=6),
                  header_values),
        max_size=3,
    ).map(tuple),
    timestamp=st.integers(BASE_TS, BASE_TS + 1000),
)


def index_valued(timestamps: Sequence[int]) -> list[Rec]:
    """One record a timestamp, its index as the value: what the lookup-oracle tests send."""
    return [Rec(None, f"{i}".encode(), (), ts) for i, ts in enumerate(timestamps)]


def assert_appended_after(
    sent: Sequence[Rec], recs: Sequence[Rec], offsets: Sequence[int], conf: dict[str, Any]
) -> None:
    """A send's offsets follow on from everything sent before (acks=0 gets none back to check)."""
    if conf.get("acks") != 0:
        assert list(offsets) == list(range(len(sent), len(sent) + len(recs)))


def fixed_records(n: int, tag: str, seed: int = 0) -> list[Rec]:
    """Deterministic records covering null keys/values, empty and binary payloads, headers."""
    out = []
    for i in range(n):
        j = i + seed
        key = None if j % 5 == 0 else f"k{j}".encode()
        value = None if j % 7 == 3 else bytes((j * 31 + b) % 256 for b in range(j % 50)) + tag.encode()
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if j % 3 == 1:
            headers = (("h", f"{j}".encode()), ("null", None))
        elif j % 3 == 2:
            headers = (("bin", bytes(range(j % 20))),)
        out.append(Rec(key, value, headers, BASE_TS + (j * 7919) % 5000))
    return out


def produce_body(topic: str, partitions: dict[int, bytes], acks: int = -1) -> dict[str, Any]:
    return {
        "transactional_id": None, "acks": acks, "timeout_ms": 10_000,
        "topic_data": [{
            "name": topic,
            "partition_data": [{"index": p, "records": r} for p, r in partitions.items()],
        }],
    }


def partition_errors(resp: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (error code, base offset) of a Produce response."""
    return {
        (t.name, p.index): (p.error_code, p.base_offset)
        for t in resp.responses for p in t.partition_responses
    }


def fetch_all(conn: KafkaSocket, topic: str, partition: int = 0) -> list[Record]:
    """Every record of a partition, read with Fetch v12 from offset 0 to the high watermark."""
    out: list[Record] = []
    offset = 0
    while True:
        resp = conn.request(1, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 8 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "fetch_offset": offset, "partition_max_bytes": 8 << 20,
            }]}],
            "forgotten_topics_data": [], "rack_id": "",
        })
        part = resp.responses[0].partitions[0]
        assert part.error_code == 0, part.error_code
        data = bytes(part.records or b"")
        for pos, _h in iter_batches(data):
            out += [r for r in decode_batch(data, pos) if r.offset >= offset]
        if out:
            offset = out[-1].offset + 1
        if offset >= part.high_watermark:
            return out
        assert data, "fetch returned nothing below the high watermark"


def list_offset(conn: KafkaSocket, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
    """ListOffsets v7 for one partition: (offset, timestamp)."""
    resp = conn.request(2, 7, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "timestamp": timestamp},
        ]}],
    })
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0, p.error_code
    return p.offset, p.timestamp


def for_kafka_python(recs: Sequence[Rec], null_headers: bool = False) -> list[Rec]:
    """kafka-python refuses null header values, and it and aiokafka refuse records with
    neither key nor value (``null_headers=True`` keeps null header values, for aiokafka)."""
    out = []
    for r in recs:
        headers = tuple((k, b"" if v is None and not null_headers else v) for k, v in r.headers)
        value = b"" if r.key is None and r.value is None else r.value
        out.append(Rec(r.key, value, headers, r.timestamp))
    return out


CODEC_IDS = {None: 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def stored_codecs(b: BrokerProcess, topic: str, partition: int = 0) -> set[int]:
    """The compression codec of every batch in the partition's segment files, read from disk.

    Proves the client really compressed (librdkafka silently sends uncompressed data
    when Produce v0 is not advertised, KAFKA-18659) and the broker kept the codec.
    """
    codecs: set[int] = set()
    for seg in sorted((b.data_dir / f"{topic}-{partition}").glob("*.log")):
        data = seg.read_bytes()
        codecs.update(h.compression for _pos, h in iter_batches(data))
    return codecs


def assert_stored_with(b: BrokerProcess, topic: str, compression: str | None) -> None:
    """The partition's batches use the requested codec. A client may send a batch that
    compression would not shrink uncompressed (librdkafka does), never another codec."""
    codec = CODEC_IDS[compression]
    found = stored_codecs(b, topic)
    assert codec in found, found
    assert found <= {0, codec}, found
