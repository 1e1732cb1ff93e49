"""kcat (Debian's, built on librdkafka 2.0.2) against the real broker, as a shell user runs it.

kcat shares no code with the Python clients and brings an older librdkafka than
confluent-kafka's: it negotiates lower API versions (ListOffsets v2, Produce v7,
OffsetCommit v7) and compresses only when the broker advertises Produce v0.
``make test`` installs it (``make check-clients``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings

from client import SyncClient
from client.groups import SyncGroupAdmin
from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import (
    BASE_TS,
    CODECS,
    assert_stored_with,
    fetch_all,
    first_at_or_after,
    index_valued,
    probe_times,
    running_broker,
    timestamp_lists,
    topic_name,
)
from tests.helpers.confluent import create_topic
from tests.helpers.confluent import produce as confluent_produce
from tests.helpers.kafka_socket import KafkaSocket

KCAT = shutil.which("kcat")
TIMEOUT = 30.0


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    assert KCAT, "kcat is not installed: `make check-clients` installs it"
    with running_broker(tmp_path_factory, "kcat") as b:
        yield b


def kcat(b: BrokerProcess, *args: str, stdin: bytes = b"") -> bytes:
    """Run kcat against the broker; its stdout (a failure shows stderr)."""
    done = subprocess.run([KCAT or "kcat", "-b", b.bootstrap, *args], input=stdin,
                          capture_output=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


def consume_exact(b: BrokerProcess, topic: str, partition: int = 0) -> list[tuple[int, bytes | None,
                                                                              bytes | None, int]]:
    """Every record of a partition as kcat reads it: (offset, key, value, timestamp), byte exact.

    The format prints the key and value lengths (-1 for null) before the raw bytes,
    so binary payloads (newlines, NULs) parse unambiguously.
    """
    out = kcat(b, "-C", "-t", topic, "-p", str(partition), "-o", "beginning", "-e", "-q",
               "-f", "%o %K %S %T\n%k%s\n")
    recs = []
    pos = 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        offset, klen, vlen, ts = (int(x) for x in out[pos:end].split())
        pos = end + 1
        key = None if klen < 0 else out[pos:pos + klen]
        pos += max(klen, 0)
        value = None if vlen < 0 else out[pos:pos + vlen]
        pos += max(vlen, 0)
        assert out[pos:pos + 1] == b"\n"
        pos += 1
        recs.append((offset, key, value, ts))
    return recs


def binary_payloads(tag: str) -> list[bytes]:
    """Values a line-based tool would mangle: newlines, NULs, every byte, large.
    (kcat skips an empty file, so there is no empty one.)"""
    return [b"\n\n", b"\x00" + tag.encode() + b"\x00", bytes(range(256)),
            (tag.encode() + b"\xff\n") * 3000]


@pytest.mark.parametrize("codec", ["none", *CODECS])
def test_produce_with_every_codec_reads_back_exactly(kb: BrokerProcess, tmp_path: Path,
                                                     codec: str) -> None:
    topic = topic_name(f"kcat-{codec}")
    create_topic(kb, topic)
    # Keyed text records through stdin (-K key delimiter, -Z: empty means null) ...
    keyed = [(b"k1", b"v1"), (b"", b"null key"), (b"k3", b""), (b"k\xc3\xa9", b"caf\xc3\xa9 " * 100)]
    kcat(kb, "-P", "-t", topic, "-p", "0", "-K", "\t", "-Z", "-X", f"compression.codec={codec}",
         "-H", "h1=one", "-H", "h2=",
         stdin=b"".join(k + b"\t" + v + b"\n" for k, v in keyed))
    # ... and binary values, one file each (kcat sends a whole file as one message).
    files = []
    for i, payload in enumerate(binary_payloads(codec)):
        files.append(tmp_path / f"m{i}.bin")
        files[-1].write_bytes(payload)
    kcat(kb, "-P", "-t", topic, "-p", "0", "-X", f"compression.codec={codec}", *map(str, files))

    expected = [(k or None, v or None) for k, v in keyed] + [(None, p) for p in binary_payloads(codec)]
    got = consume_exact(kb, topic)
    assert [(o, k, v) for o, k, v, _ in got] == [(i, k, v) for i, (k, v) in enumerate(expected)]
    with KafkaSocket(kb.port) as conn:
        stored = fetch_all(conn, topic)
    assert [(r.key, r.value) for r in stored] == expected
    assert [tuple(r.headers) for r in stored[:len(keyed)]] == [(("h1", b"one"), ("h2", b""))] * len(keyed)
    assert [r.timestamp for r in stored] == [ts for *_, ts in got]
    assert_stored_with(kb, topic, None if codec == "none" else codec)


def query(b: BrokerProcess, topic: str, times: Sequence[int], partitions: int) -> dict[tuple[int, int], int]:
    """``kcat -Q`` for every (partition, time): one run per time, every partition in it
    (kcat keeps only the last time given for one partition)."""
    answers = {}
    for ts in times:
        args = [a for p in range(partitions) for a in ("-t", f"{topic}:{p}:{ts}")]
        out = kcat(b, "-Q", *args).decode()
        found = re.findall(r"^(\S+) \[(\d+)\] offset (-?\d+)$", out, re.M)
        assert len(found) == partitions, out
        for name, p, off in found:
            assert name == topic
            answers[(int(p), ts)] = int(off)
    return answers


@settings(max_examples=5)
@given(timestamps=timestamp_lists, other=timestamp_lists)
def test_query_mode_time_lookups_match_the_oracle(kb: BrokerProcess, timestamps: list[int],
                                                  other: list[int]) -> None:
    """Out-of-order and equal CreateTimes in two partitions; probes include a time after
    the last record (kcat prints -1 there, as librdkafka gets it from the broker)."""
    topic = topic_name("kcat-q")
    create_topic(kb, topic, partitions=2)
    per_partition = {0: timestamps, 1: other}
    for p, ts in per_partition.items():
        confluent_produce(kb, topic, index_valued(ts), partition=p)
    probes = probe_times(timestamps + other)
    assert max(probes) > max(timestamps + other)
    got = query(kb, topic, probes, 2)
    for p, ts in per_partition.items():
        stamped = list(enumerate(ts))
        for t in probes:
            hit = first_at_or_after(stamped, t)
            assert got[(p, t)] == (-1 if hit is None else hit), (p, t)


def test_query_mode_after_kcat_produced_records(kb: BrokerProcess) -> None:
    """Records stamped by kcat's own clock (CreateTime at send): lookups of each stamp."""
    topic = topic_name("kcat-own")
    create_topic(kb, topic)
    for i in range(3):
        kcat(kb, "-P", "-t", topic, "-p", "0", stdin=f"a{i}\nb{i}\n".encode())
    got = consume_exact(kb, topic)
    stamped = [(o, ts) for o, _k, _v, ts in got]
    probes = probe_times([ts for _, ts in stamped])
    answers = query(kb, topic, probes, 1)
    for t in probes:
        hit = first_at_or_after(stamped, t)
        assert answers[(0, t)] == (-1 if hit is None else hit), t


def test_consume_from_an_offset_and_a_time(kb: BrokerProcess) -> None:
    """-o N starts at N; -o s@T (librdkafka's offsets-for-times) starts at the oracle's offset."""
    topic = topic_name("kcat-from")
    create_topic(kb, topic)
    times = [BASE_TS + d for d in (50, 10, 30, 30, 70, 20)]
    confluent_produce(kb, topic, index_valued(times))
    from_three = kcat(kb, "-C", "-t", topic, "-p", "0", "-o", "3", "-e", "-q", "-f", "%o:%s\n")
    assert from_three.decode().split() == [f"{i}:{i}" for i in range(3, 6)]
    stamped = list(enumerate(times))
    for t in (BASE_TS + 25, BASE_TS + 30, BASE_TS + 60):
        start = first_at_or_after(stamped, t)
        assert start is not None
        out = kcat(kb, "-C", "-t", topic, "-p", "0", "-o", f"s@{t}", "-e", "-q", "-f", "%o\n")
        assert [int(x) for x in out.split()] == list(range(start, len(times))), t


def test_metadata_list_shows_the_topics(kb: BrokerProcess) -> None:
    topic = topic_name("kcat-l")
    create_topic(kb, topic, partitions=3)
    out = kcat(kb, "-L", "-t", topic).decode()
    assert f'topic "{topic}" with 3 partitions' in out, out


def test_two_balanced_consumers_split_the_partitions_and_read_each_record_once(kb: BrokerProcess) -> None:
    """Two ``kcat -G`` members (librdkafka 2.0.2's KafkaConsumer: JoinGroup v5, SyncGroup v3,
    OffsetCommit v7) started together join one generation within the initial rebalance
    delay, get disjoint halves of the partitions, read every record exactly once between
    them, and commit the log end of each partition as they close."""
    topic = topic_name("kcat-g")
    create_topic(kb, topic, partitions=4)
    per_partition = {p: [BASE_TS + 3 * i for i in range(2 + p)] for p in range(4)}
    for p, ts in per_partition.items():
        confluent_produce(kb, topic, index_valued(ts), partition=p)
    group = topic_name("kcat-group")
    args = [KCAT or "kcat", "-b", kb.bootstrap, "-G", group, "-o", "beginning", "-e", "-q",
            "-f", "%p %o %s\n", topic]
    members = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = []
    for m in members:
        out, err = m.communicate(timeout=TIMEOUT)
        assert m.returncode == 0, err.decode(errors="replace")
        outs.append(sorted(tuple(int(x) for x in line.split()) for line in out.decode().splitlines()))
    parts = [{p for p, _o, _v in out} for out in outs]
    assert parts[0] and parts[1] and not parts[0] & parts[1], parts
    assert sorted(outs[0] + outs[1]) == sorted((p, i, i) for p, ts in per_partition.items() for i in range(len(ts)))
    with SyncClient(kb.bootstrap) as c:
        done = SyncGroupAdmin(c).committed_offsets(group)
    assert {tp.partition: o for tp, o in done.items()} == {p: len(ts) for p, ts in per_partition.items()}
