"""``remoteStorage``: reads of tiered segments straight from a bucket equal reads through
the broker, and a brute-force oracle over the log's bytes (tests/helpers/remote_read.py
describes the log and the oracle).

One broker holds the topic; its sealed segments below the last stable offset are
uploaded with the tier's uploader (tests/helpers/tier_upload.py: ``RemoteTier.copy`` on a
copy of the partition directories) to a file:// bucket, and to a real S3 server
(s3proxy), while the broker keeps its local copy. The planner and the task reader run
in-process, for many hypothesis examples; tests/pipeline/test_spark_tiered_broker.py
reads through a real SparkSession from a broker that tiers and deletes its local copy.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage.remote.manifest as mf
from client import SyncClient, TopicPartition
from pipeline.fetcher import DataLossError
from pipeline.options import OptionError, parse_read_options
from pipeline.remote import RemoteStats, Tier, open_store, read_task
from pipeline.source import ChronologBatchReader, RemoteSegmentPartition
from storage.remote.store import ObjectStore
from tests.helpers.broker import BrokerProcess
from tests.helpers.remote_read import (
    LEVELS,
    PARTITIONS,
    TOPIC,
    Tiered,
    at,
    options,
    oracle,
    read,
    remote_reach,
    row,
    table_rows,
    times,
    write,
)
from tests.helpers.tier_upload import upload_sealed


@pytest.fixture(scope="module")
def tiered(module_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Tiered:
    bs = module_broker.bootstrap
    with SyncClient(bs) as c:
        c.create_topic(TOPIC, PARTITIONS, {"segment.bytes": "3000", "retention.ms": "-1",
                                           "index.interval.bytes": "300"})
    t0 = int(time.time() * 1000)
    write(bs, random.Random(26), t0)
    t1 = int(time.time() * 1000)
    bucket = tmp_path_factory.mktemp("bucket")
    store = ObjectStore(bucket.as_uri())
    with SyncClient(bs) as c:
        records, hw = oracle(c)
        lso = {p: c.list_offsets({TopicPartition(TOPIC, p): -1}, 1)[TopicPartition(TOPIC, p)][0]
               for p in range(PARTITIONS)}
    highest = {p: upload_sealed(module_broker.data_dir, store, TOPIC, p, below=lso[p],
                                interval=300) for p in range(PARTITIONS)}
    assert lso[1] < hw[1], "a transaction was left open"
    straddling = [r for r in records if r.partition == 0 and r.fate == "abort"
                  and r.offset <= highest[0]
                  and not any(m.partition == 0 and not m.data and m.offset <= highest[0]
                              and m.offset > r.offset for m in records)]
    assert straddling, "an aborted transaction's data is in the tier, its marker is not"
    assert all(0 < highest[p] < hw[p] - 1 for p in highest), (highest, lso, hw)
    return Tiered(bs, bucket.as_uri(), records, hw, lso, highest, t0, t1)


@settings(max_examples=40)
@given(level=st.sampled_from(LEVELS), a=times, b=times, event=st.booleans())
def test_time_windows_from_the_bucket_equal_the_broker_and_the_oracle(
        tiered: Tiered, level: str, a: int | None, b: int | None, event: bool) -> None:
    t1, t2 = at(tiered, a), at(tiered, b)
    if event and t1 is None and t2 is None:
        t1 = tiered.t0
    if t1 is not None and t2 is not None and t2 < t1:
        t1, t2 = t2, t1
    extra = {"eventTime": "true"} if event else {}
    if t1 is not None:
        extra["startingTimestamp"] = str(t1)
    if t2 is not None:
        extra["endingTimestamp"] = str(t2)
    want = tiered.event_time(level, t1, t2) if event else tiered.positional(level, t1, t2)
    remote, parts = read(options(tiered, level, True, **extra))
    broker, _ = read(options(tiered, level, False, **extra))
    assert broker == want
    assert remote == want


@settings(max_examples=25)
@given(level=st.sampled_from(LEVELS), data=st.data())
def test_offset_ranges_across_the_remote_local_boundary(tiered: Tiered, level: str,
                                                        data: st.DataObject) -> None:
    starts, ends = {}, {}
    for p in range(PARTITIONS):
        limit = tiered.limit(p, level)
        s = data.draw(st.integers(0, limit), label=f"start-{p}")
        starts[str(p)] = s
        ends[str(p)] = data.draw(st.integers(s, limit), label=f"end-{p}")

    extra = {"startingOffsets": json.dumps({TOPIC: starts}),
             "endingOffsets": json.dumps({TOPIC: ends}),
             "maxRecordsPerPartition": str(data.draw(st.integers(5, 400), label="cap"))}
    want = sorted(row(r) for r in tiered.records if tiered.visible(r, level)
                  and starts[str(r.partition)] <= r.offset < ends[str(r.partition)])
    remote, parts = read(options(tiered, level, True, **extra))
    assert remote == want
    covered = sum(max(0, min(ends[str(p)], tiered.highest[p] + 1) - starts[str(p)])
                  for p in range(PARTITIONS))
    assert remote_reach(parts) == covered


def test_a_whole_read_takes_everything_up_to_the_highest_uploaded_offset_from_the_bucket(
        tiered: Tiered) -> None:
    for level in LEVELS:
        remote, parts = read(options(tiered, level, True))
        assert remote == tiered.positional(level, None, None)
        assert remote_reach(parts) == sum(h + 1 for h in tiered.highest.values())


def test_event_time_skips_segments_and_blocks_outside_the_window(tiered: Tiered) -> None:
    """A narrow window reads exactly its rows and only what was planned: no segment whose
    [min_timestamp, max_timestamp] misses the window, and of the others only the zone-map
    blocks whose [min, max] meets it (each span read once, whole)."""
    # The times of the tiered records at 30 % and 32 % of them in time order.
    stamps = sorted(r.timestamp for r in tiered.records
                    if r.data and r.offset <= tiered.highest[r.partition])
    t1, t2 = stamps[len(stamps) * 30 // 100], stamps[len(stamps) * 32 // 100]
    opts = options(tiered, "read_committed", True, eventTime="true",
                   startingTimestamp=str(t1), endingTimestamp=str(t2))
    reader = ChronologBatchReader(parse_read_options(opts, streaming=False))
    stats = RemoteStats()
    rows = []
    for part in reader.partitions():
        if isinstance(part, RemoteSegmentPartition):
            for b in read_task(reader.opts.remote, part.task, chunk_bytes=1 << 20, stats=stats):
                rows += table_rows(pa.Table.from_batches([b]))
    want = [r for r in tiered.event_time("read_committed", t1, t2)
            if r[1] <= tiered.highest[r[0]]]
    assert want, "the window holds tiered records"
    assert sorted(rows) == want
    tier = Tier(open_store(reader.opts.remote))
    segs = {mf.segment_key(TOPIC, p, s, ".log"): (p, s) for p in range(PARTITIONS)
            for s in tier.partition(TOPIC, p).segments}
    read_keys = {s.key for s in stats.spans}
    outside = [k for k, (_, s) in segs.items() if s.max_timestamp < t1 or s.min_timestamp >= t2]
    assert outside and not read_keys & set(outside)
    for span in stats.spans:
        p, seg = segs[span.key]
        zm = tier.zone_map(TOPIC, p, seg)
        assert zm is not None
        for i in range(len(zm)):
            lo, hi = zm.pos[i], zm.block_end(i)[1]
            if span.pos_lo <= lo and hi <= span.pos_hi:
                assert zm.max[i] >= t1 and zm.min[i] < t2, (span, i)
    assert stats.bytes_read == sum(s.pos_hi - s.pos_lo for s in stats.spans)
    total = sum(s.size_bytes for _, s in segs.values())
    print(f"event-time window of 2 %: read {stats.bytes_read} of {total} tiered bytes")


def test_reads_from_a_real_s3_server_with_the_rsm_style_options(
        tiered: Tiered, module_broker: BrokerProcess, s3_bucket: Any) -> None:
    """The same partitions uploaded to s3proxy (tests/helpers/s3server.py), read with
    ``remoteStorage=s3://...`` and ``remoteStorage.s3.*`` credentials: the oracle's rows,
    the tiered part from the bucket."""
    store = ObjectStore(s3_bucket.url, s3_bucket.options)
    highest = {p: upload_sealed(module_broker.data_dir, store, TOPIC, p, below=tiered.lso[p],
                                interval=300) for p in range(PARTITIONS)}
    assert highest == tiered.highest
    s3 = {f"remoteStorage.{k}" if k != "url" else "remoteStorage": v
          for k, v in s3_bucket.options.items()}
    for level, event, (a, b) in (("read_committed", False, (10, 90)),
                                 ("read_uncommitted", True, (20, 95)),
                                 ("read_committed", True, (None, None))):
        t1, t2 = at(tiered, a), at(tiered, b)
        extra = {"eventTime": "true", "startingTimestamp": str(t1 or tiered.t0)} if event else {}
        if not event and t1 is not None:
            extra["startingTimestamp"] = str(t1)
        if t2 is not None:
            extra["endingTimestamp"] = str(t2)
        opts = {**options(tiered, level, False, **extra), **s3}
        rows, parts = read(opts)
        want = (tiered.event_time(level, t1 or tiered.t0, t2) if event
                else tiered.positional(level, t1, t2))
        assert rows == want, (level, event)
        assert remote_reach(parts) > 0


def test_a_segment_deleted_from_the_bucket_after_planning_is_data_loss(
        tiered: Tiered, tmp_path: Path) -> None:
    """Remote retention between planning and reading: DataLossError naming the offsets, or
    with failOnDataLoss=false every other row (as a range the broker lost)."""
    bucket = tmp_path / "bucket"
    shutil.copytree(Path(tiered.bucket.removeprefix("file://")), bucket)
    t = dataclasses.replace(tiered, bucket=bucket.as_uri())
    want = t.positional("read_committed", None, None)
    for fail in (True, False):
        opts = options(t, "read_committed", True, failOnDataLoss=str(fail).lower(),
                       maxRecordsPerPartition="50")
        reader = ChronologBatchReader(parse_read_options(opts, streaming=False))
        parts = list(reader.partitions())
        victim = next(p.task.spans[0] for p in parts if isinstance(p, RemoteSegmentPartition))
        (bucket / victim.key).unlink(missing_ok=True)
        got: list[tuple[Any, ...]] = []
        if fail:
            with pytest.raises(DataLossError, match=f"offsets {victim.start}\\.\\."):
                for part in parts:
                    for b in reader.read(part):
                        got += table_rows(pa.Table.from_batches([b]))
            shutil.rmtree(bucket)
            shutil.copytree(Path(tiered.bucket.removeprefix("file://")), bucket)
            continue
        for part in parts:
            for b in reader.read(part):
                got += table_rows(pa.Table.from_batches([b]))
        lost = [s for p in parts if isinstance(p, RemoteSegmentPartition) for s in p.task.spans
                if s.key == victim.key]
        assert sorted(got) == [r for r in want if not any(
            f"/{r[0]}/" in s.key and s.start <= r[1] < s.end for s in lost)]


@pytest.mark.parametrize(("extra", "streaming", "message"), [
    ({"remoteStorage": "http://bucket"}, False, "file:///a/dir or s3://bucket/prefix"),
    ({"remoteStorage": "s3://b/p", "remoteStorage.s3.secret": "x"}, False,
     "unknown option 'remotestorage.s3.secret'"),
    ({"remoteStorage.s3.region": "eu-west-1"}, False, 'option "remoteStorage" names the bucket'),
    ({"remoteStorage": "s3://b/p"}, True, "batch reads"),
])
def test_bad_remote_storage_options_are_refused_before_any_job(
        extra: dict[str, str], streaming: bool, message: str) -> None:
    opts = {"bootstrap.servers": "127.0.0.1:1", "subscribe": "t", **extra}
    with pytest.raises(OptionError, match=re.escape(message)):
        parse_read_options(opts, streaming=streaming)


def test_remote_storage_options_reach_the_store_with_the_rsm_names() -> None:
    opts = parse_read_options({"bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
                               "remoteStorage": "s3://b/p", "remoteStorage.s3.endpoint": "http://e",
                               "remoteStorage.s3.access.key.id": "k",
                               "remoteStorage.s3.secret.access.key": "s",
                               "remoteStorage.s3.region": "r"}, streaming=False)
    assert dict(opts.remote) == {"url": "s3://b/p", "s3.endpoint": "http://e",
                                 "s3.access.key.id": "k", "s3.secret.access.key": "s",
                                 "s3.region": "r"}
