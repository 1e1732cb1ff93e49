"""The remote tier's copy, file set, index cache, settings and a real kill -9 (#26).

Every test uses a real ``file://`` bucket in a temporary directory and real segment
files; the state machine (test_tier_state.py) checks lookups and reads against an oracle.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from storage import txnindex
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch, iter_batches
from storage.remote import manifest as mf
from storage.remote.index_cache import RemoteIndexCache
from storage.remote.snapshot import decode_epochs, decode_snapshot
from storage.remote.store import ObjectStore, RemoteStorageError
from storage.remote.tier import RemoteTier
from storage.txnindex import TxnIndexEntry
from storage.zonemap import ZoneMap

T0 = 1_700_000_000_000
CFG = LogConfig(segment_bytes=600, index_interval_bytes=120, segment_index_bytes=240,
                message_timestamp_after_max_ms=1 << 62, retention_ms=-1,
                remote_storage_enable=True, local_retention_bytes=0)
ROOT = Path(__file__).resolve().parents[2]


def fill(log: Log, batches: int, *, epoch_every: int = 0) -> list[tuple[int, int]]:
    out = []
    for i in range(batches):
        stamps = [(i * 37) % 500, (i * 91) % 700]
        r = log.append(build_batch([Record(0, T0 + s, None, b"w" * 30) for s in stamps],
                                   producer_id=3, producer_epoch=0, base_sequence=2 * i),
                       now_ms=T0, leader_epoch=i // epoch_every if epoch_every else 0)
        out += [(r.base_offset + k, T0 + s) for k, s in enumerate(stamps)]
    return out


def open_tier(tmp: Path, log: Log, budget: int = 1 << 20) -> tuple[ObjectStore, RemoteTier]:
    store = ObjectStore(f"file://{tmp}/bucket")
    cache = RemoteIndexCache(tmp / "remote-log-index-cache", budget)
    return store, RemoteTier(log, store, "t", 0, topic_id="ab" * 16, partitions=3, cache=cache)


def tiered_log(tmp: Path, below_segment: int | None = None
           ) -> tuple[Log, list[tuple[int, int]], ObjectStore, RemoteTier]:
    """A log of 30 batches with its sealed segments copied to a file:// bucket: all of them,
    or those below segment number `below_segment`."""
    log = Log(tmp / "t-0", CFG)
    recs = fill(log, 30)
    store, tier = open_tier(tmp, log)
    tier.copy(log.high_watermark if below_segment is None else
              log.segments[below_segment].base_offset)
    return log, recs, store, tier


def bucket_contents(bucket: Path) -> dict[str, bytes]:
    return {str(p.relative_to(bucket)): p.read_bytes() for p in bucket.rglob("*") if p.is_file()}


def test_copy_uploads_kafkas_file_set_for_every_sealed_segment_below_the_lso(
        tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", CFG)
    fill(log, 30, epoch_every=7)
    aborted = TxnIndexEntry(3, 4, 5, 4)
    txnindex.append(txnindex.path_for(log.dir, log.segments[0].base_offset), aborted)
    store, tier = open_tier(tmp_path, log)
    lso = log.segments[3].base_offset
    assert tier.copy(lso) == 3  # the segments whose next base <= LSO, no more
    done = tier.finished()
    assert [s.base_offset for s in done] == [s.base_offset for s in log.segments[:3]]
    for rs, seg, nxt in zip(done, log.segments, log.segments[1:], strict=False):
        assert (rs.end_offset, rs.next_offset) == (nxt.base_offset - 1, nxt.base_offset)
        assert rs.size_bytes == seg.size and rs.max_timestamp == seg.max_timestamp

        def get(suffix: str, rs: mf.RemoteSegment = rs) -> bytes:
            return store.get(mf.segment_key("t", 0, rs, suffix))
        assert get(".log") == seg.log_path.read_bytes()
        assert get(".index") == seg.offset_index.path.read_bytes()  # sealed: trimmed files
        assert get(".timeindex") == seg.time_index.path.read_bytes()
        txn = txnindex.path_for(log.dir, seg.base_offset)
        assert get(".txnindex") == (txn.read_bytes() if txn.exists() else b"")
        assert rs.txn_index_empty == (not txn.exists())
        # the snapshot holds producer 3 as of the segment's end
        [entry] = decode_snapshot(get(".snapshot")).values()
        last = [h for _, h in iter_batches(get(".log"))][-1]
        assert (entry.producer_id, entry.last_offset, entry.last_sequence) == (
            3, last.last_offset, last.base_sequence + last.last_offset_delta)
        # leader epochs: the lineage up to the segment's end, Kafka's text format
        epochs = decode_epochs(get(".leader_epoch_checkpoint"))
        assert epochs and all(start < rs.next_offset for _, start in epochs)
        assert get(".leader_epoch_checkpoint").startswith(b"0\n%d\n" % len(epochs))
        # the segment's own epochs: the one of its first batch from its base, then the
        # lineage's entries inside it
        assert rs.leader_epochs[0][1] == rs.base_offset
        assert rs.leader_epochs[1:] == [e for e in epochs if e[1] > rs.base_offset]
        assert epochs[-1][0] == rs.leader_epochs[-1][0]
        assert get(".zonemap")
    assert txnindex.decode(store.get(mf.segment_key("t", 0, done[0], ".txnindex"))) == [aborted]
    topic = mf.decode_topic(store.get(mf.topic_key("t")))
    assert (topic.topic_id, topic.partitions, topic.configs["remote.storage.enable"]) == (
        "ab" * 16, 3, "true")
    assert tier.copy(lso) == 0  # nothing new below the same LSO
    assert tier.copy(log.high_watermark) == len(log.segments) - 4  # never the active one


def test_copy_disable_copies_nothing_and_local_retention_keeps_uncopied_data(
        tmp_path: Path) -> None:
    cfg = LogConfig.from_kafka({"remote.log.copy.disable": "true", "local.retention.bytes": "-2"},
                               CFG)
    log = Log(tmp_path / "t-0", cfg)
    fill(log, 30)
    _, tier = open_tier(tmp_path, log)
    assert tier.copy(log.high_watermark) == 0
    log.update_config(CFG)  # local.retention.bytes=0: everything is due, nothing copied
    before = [s.base_offset for s in log.segments]
    assert log.delete_old_segments(T0 + 10**9) == 0
    assert [s.base_offset for s in log.segments] == before


def test_a_corrupt_cached_index_is_fetched_again_and_a_corrupt_remote_one_rebuilt(
        tmp_path: Path) -> None:
    log, recs, store, tier = tiered_log(tmp_path)
    log.delete_old_segments(T0)
    assert log.local_log_start_offset > 0
    target = recs[3]
    assert log.offset_for_timestamp(target[1]) is not None
    cached = sorted((tmp_path / "remote-log-index-cache").iterdir())
    assert cached
    for path in cached:
        path.write_bytes(b"\xff" * 5)  # torn: not a whole entry
    _, again = open_tier(tmp_path, Log(tmp_path / "t-0", CFG))
    assert again.log.read(0, 1)[:4] == log.read(0, 1)[:4]
    assert again.cache is not None and again.cache.misses >= 1
    # the bucket's index is damaged: rebuilt from the remote .log, answers unchanged
    rs = again.finished()[0]
    store.put(mf.segment_key("t", 0, rs, ".index"), b"\x00\x00\x00\x09")
    store.put(mf.segment_key("t", 0, rs, ".timeindex"), b"junk")
    for p in (tmp_path / "remote-log-index-cache").iterdir():
        p.unlink()
    _, third = open_tier(tmp_path, Log(tmp_path / "t-0", CFG))
    for off in range(rs.base_offset, rs.next_offset):
        (_, h), *_ = list(iter_batches(third.log.read(off, 1)))
        assert h.base_offset <= off <= h.last_offset
    for _, ts in recs:
        want = next(o for o, t in recs if t >= ts)
        hit = third.log.offset_for_timestamp(ts)
        assert hit is not None and hit.offset == want


def test_index_cache_stays_within_its_byte_budget_and_survives_a_restart(
        tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", CFG)
    recs = fill(log, 40)
    _, tier = open_tier(tmp_path, log, budget=100)
    tier.copy(log.high_watermark)
    log.delete_old_segments(T0)
    for _, ts in recs:
        log.offset_for_timestamp(ts)
    assert tier.cache is not None and 0 < tier.cache.size_bytes <= 100
    on_disk = sum(p.stat().st_size for p in (tmp_path / "remote-log-index-cache").iterdir())
    assert on_disk == tier.cache.size_bytes
    reopened = RemoteIndexCache(tmp_path / "remote-log-index-cache", 100)
    assert reopened.size_bytes == on_disk


@pytest.mark.parametrize(("props", "message"), [
    ({"cleanup.policy": "compact"}, "unsupported for the compacted topics"),
    ({"cleanup.policy": "compact,delete"}, "unsupported for the compacted topics"),
    ({"retention.ms": "1000", "local.retention.ms": "2000"}, "must be <= retention.ms"),
    ({"retention.bytes": "1000", "local.retention.bytes": "-1"}, "-1 is not allowed"),
    ({"retention.bytes": "100", "local.retention.bytes": "50", "remote.log.copy.disable": "true"},
     "must equal"),
    ({"local.retention.ms": "-3"}, ">= -2"),
    ({"remote.log.copy.disable": "maybe"}, "true or false"),
])
def test_remote_storage_settings_are_validated_as_kafka(props: dict[str, str],
                                                        message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LogConfig.from_kafka({"remote.storage.enable": "true", **props})


def test_remote_settings_are_typed_and_echoed() -> None:
    cfg = LogConfig.from_kafka({"remote.storage.enable": "TRUE", "local.retention.ms": "5",
                                "retention.ms": "10"})
    assert cfg.remote_storage_enable and cfg.local_retention_ms == 5
    assert cfg.effective_local_retention_bytes == cfg.retention_bytes
    assert cfg.to_kafka()["remote.storage.enable"] == "true"
    assert LogConfig.from_kafka(cfg.to_kafka()) == cfg
    # without remote storage the values are only kept (Kafka validates them then)
    assert LogConfig.from_kafka({"cleanup.policy": "compact", "local.retention.ms": "1"})


_CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from pathlib import Path
    from storage.log import Log
    from storage.remote.store import ObjectStore
    from storage.remote.tier import RemoteTier
    from tests.storage.test_tier import CFG
    tmp = Path(sys.argv[2])
    log = Log(tmp / "t-0", CFG, clean_shutdown=False, recovery_point=0)
    tier = RemoteTier(log, ObjectStore(f"file://{tmp}/bucket"), "t", 0)
    steps = [tier.copy_steps(s) for s in tier.copy_candidates(log.high_watermark)[:1]]
    if sys.argv[3] == "delete":
        steps = [tier.delete_steps(tier.finished()[0])]
    for i, step in enumerate(steps[0], 1):
        print(step, flush=True)
        if i == int(sys.argv[4]):
            time.sleep(60)  # the parent kills us here, right after this step
""")


def _run_until(tmp: Path, what: str, steps: int) -> list[str]:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(ROOT), str(tmp), what, str(steps)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    seen = []
    try:
        for _ in range(steps):
            line = proc.stdout.readline()
            assert line, "the child ended before the step it should be killed after"
            seen.append(line.strip())
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return seen


def test_kill_9_mid_copy_and_mid_delete_leaves_old_or_new_state(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", CFG)
    recs = fill(log, 20)
    log.close()

    def check(copied: int) -> RemoteTier:
        plog = Log(tmp_path / "t-0", CFG, clean_shutdown=False, recovery_point=0)
        store, tier = open_tier(tmp_path, plog)
        assert len(tier.finished()) == copied
        want = {mf.segment_key("t", 0, s, x) for s in tier.finished() for x in mf.FILE_SUFFIXES}
        assert {o.key for o in store.list("topics/t/0/")} - {mf.manifest_key("t", 0)} == want
        assert plog.log_end_offset == len(recs)  # nothing acknowledged is lost
        for seg in plog.segments:
            seg.release()
        return tier

    assert _run_until(tmp_path, "copy", 1) == ["COPY_SEGMENT_STARTED"]
    check(0)  # started, no file yet: dropped at open
    assert _run_until(tmp_path, "copy", 4)[-1] == ".timeindex"
    check(0)  # half the files: deleted with the entry
    assert _run_until(tmp_path, "copy", 9)[-1] == "COPY_SEGMENT_FINISHED"
    tier = check(1)
    assert tier.highest_offset == tier.finished()[0].end_offset
    assert _run_until(tmp_path, "delete", 3)[-1] == ".index"
    tier = check(0)  # DELETE_SEGMENT_STARTED: finished at open, log start moved past it
    plog = Log(tmp_path / "t-0", CFG, clean_shutdown=False, recovery_point=0)
    _, tier = open_tier(tmp_path, plog)
    assert plog.log_start_offset == tier.manifest.log_start_offset > 0


def test_a_read_replica_answers_like_the_writer_and_follows_new_uploads(tmp_path: Path) -> None:
    log, recs, store, tier = tiered_log(tmp_path, 2)
    replica = RemoteTier.open_read_replica(
        ObjectStore(f"file://{tmp_path}/bucket"), "t", 0, tmp_path / "replica" / "t-0", CFG)
    rlog = replica.log
    assert (rlog.log_start_offset, rlog.high_watermark) == (0, tier.highest_offset + 1)
    copied = [r for r in recs if r[0] <= tier.highest_offset]
    for _, ts in copied:
        want = next(o for o, t in copied if t >= ts)
        hit = rlog.offset_for_timestamp(ts)
        assert hit is not None and hit.offset == want
    for off in range(rlog.high_watermark):
        assert rlog.read(off, 1 << 16) == log.read(off, 1 << 16, max_offset=rlog.high_watermark)[
            :len(rlog.read(off, 1 << 16))]
    tier.copy(log.high_watermark)
    assert replica.refresh() and rlog.high_watermark == tier.highest_offset + 1
    assert not replica.refresh()
    with pytest.raises(Exception, match="read replica"):
        replica.persist_log_start() if rlog.advance_log_start_offset(1) is None else None
    assert store.list("topics/t/0/")  # nothing deleted by the replica


def test_disable_with_delete_on_disable_empties_the_bucket_and_topic_json_follows_configs(
        tmp_path: Path) -> None:
    log, _, store, tier = tiered_log(tmp_path)
    log.delete_old_segments(T0)
    first_local = log.segments[0].base_offset
    assert log.log_start_offset == 0 < first_local
    log.update_config(LogConfig.from_kafka({"remote.log.delete.on.disable": "true"}, CFG))
    tier.write_topic_manifest()
    configs = mf.decode_topic(store.get(mf.topic_key("t"))).configs
    assert configs["remote.log.delete.on.disable"] == "true"
    assert tier.disable() > 0
    assert log.tier is None and log.log_start_offset == first_local
    keys = {o.key for o in store.list("topics/t/")}
    assert keys == {mf.topic_key("t"), mf.manifest_key("t", 0)}
    assert mf.decode_partition(store.get(mf.manifest_key("t", 0))).segments == []


def test_a_damaged_or_missing_remote_zone_map_is_rebuilt_from_the_remote_log(
        tmp_path: Path) -> None:
    log, _, store, tier = tiered_log(tmp_path)
    log.delete_old_segments(T0)
    assert len(tier.readable()) >= 3

    def blocks(zm: ZoneMap) -> list[tuple[int, ...]]:
        zm.sync()
        return list(zip(zm.first, zm.pos, zm.min, zm.max, zm.records, zm.late, zm.worst,
                        strict=True))

    want = [(zm.covered, blocks(zm)) for zm in tier.zone_maps()]
    first, second = tier.readable()[:2]
    store.put(mf.segment_key("t", 0, first, ".zonemap"), b"CLZM" + b"\x00" * 40)
    store.delete(mf.segment_key("t", 0, second, ".zonemap"))
    for p in (tmp_path / "remote-log-index-cache").iterdir():
        p.unlink()
    _, again = open_tier(tmp_path, Log(tmp_path / "t-0", CFG))
    assert [(zm.covered, blocks(zm)) for zm in again.zone_maps()] == want


def test_a_read_replica_tier_refuses_every_write_and_leaves_the_bucket_as_it_was(
        tmp_path: Path) -> None:
    log, _, store, tier = tiered_log(tmp_path, 3)
    # a copy interrupted by a crash: the writer's recovery would delete it; a replica not
    steps = tier.copy_steps(log.segments[3])
    next(steps), next(steps)
    bucket = tmp_path / "bucket"

    before = bucket_contents(bucket)
    ro = ObjectStore(f"file://{bucket}", read_only=True)
    replica = RemoteTier.open_read_replica(ro, "t", 0, tmp_path / "replica" / "t-0", CFG)
    rlog = replica.log
    assert rlog.high_watermark == replica.highest_offset + 1 > 0
    writes = [lambda: replica.write_topic_manifest(), lambda: replica.recover(),
              lambda: replica.copy(rlog.high_watermark), lambda: replica.delete_all(),
              lambda: ro.put("x", b"x"), lambda: ro.delete("x")]
    rlog.advance_log_start_offset(10)  # past the first remote segment: expired
    writes.append(lambda: replica.persist_log_start())
    writes.append(lambda: replica.expire(T0))
    for write in writes:
        with pytest.raises(RemoteStorageError, match="read"):
            write()
    assert bucket_contents(bucket) == before
    # a writable store under a read-only tier: refused by the tier before the store
    rw = RemoteTier.open_read_replica(store, "t", 0, tmp_path / "replica2" / "t-0", CFG)
    for write in (rw.write_topic_manifest, rw.recover):
        with pytest.raises(RemoteStorageError, match="read replica"):
            write()
    assert bucket_contents(bucket) == before


def test_delete_on_disable_keeps_the_log_start_at_records_still_on_local_disk(
        tmp_path: Path) -> None:
    log, recs, store, tier = tiered_log(tmp_path)
    assert tier.highest_offset > 0 and log.segments[0].base_offset == 0  # all still local
    log.update_config(LogConfig.from_kafka({"remote.log.delete.on.disable": "true"}, CFG))
    assert tier.disable() > 0
    assert (log.tier, log.log_start_offset) == (None, 0)
    got = [o for off in range(len(recs)) for _, h in iter_batches(log.read(off, 1))
           for o in range(h.base_offset, h.last_offset + 1) if o == off]
    assert got == [o for o, _ in recs]
    assert {o.key for o in store.list("topics/t/")} == {mf.topic_key("t"), mf.manifest_key("t", 0)}
    assert mf.decode_partition(store.get(mf.manifest_key("t", 0))).segments == []


def test_a_delete_in_two_halves_moves_the_log_start_first_and_never_touches_the_log_after(
        tmp_path: Path) -> None:
    import threading

    log, _, store, tier = tiered_log(tmp_path)
    log.delete_old_segments(T0)
    bucket = tmp_path / "bucket"

    rs = tier.finished()[0]
    before = bucket_contents(bucket)
    assert tier.move_log_start_past(rs) == rs.next_offset == log.log_start_offset
    assert bucket_contents(bucket) == before  # the loop half does no store I/O
    worker = threading.Thread(target=lambda: list(tier.delete_segment_steps(rs)))
    worker.start()
    worker.join()
    assert log.log_start_offset == rs.next_offset
    m = mf.decode_partition(store.get(mf.manifest_key("t", 0)))
    assert rs.segment_id not in {s.segment_id for s in m.segments}
    assert m.log_start_offset == rs.next_offset
    assert not [k for k in bucket_contents(bucket) if rs.segment_id in k]
    # a deleted topic: nothing of the partition or the topic stays in the bucket
    assert tier.delete_all(topic_deleted=True) > 0
    assert store.list("topics/t/") == []


def test_a_read_replica_follows_a_topic_deleted_and_created_again_under_its_name(
        tmp_path: Path) -> None:
    """The new topic's manifest starts at a lower generation: still the one to serve."""
    log, _, _, tier = tiered_log(tmp_path)
    for start in range(1, 5):  # DeleteRecords four times: a high generation
        log.advance_log_start_offset(start)
        tier.persist_log_start()
    bucket = ObjectStore(f"file://{tmp_path}/bucket", read_only=True)
    replica = RemoteTier.open_read_replica(bucket, "t", 0, tmp_path / "replica" / "t-0", CFG)
    assert replica.log.log_start_offset == 4
    old_generation = replica.manifest.generation
    tier.delete_all(topic_deleted=True)
    log.close()
    new_log = Log(tmp_path / "again" / "t-0", CFG)
    recs = fill(new_log, 12)
    new_store = ObjectStore(f"file://{tmp_path}/bucket")
    new_tier = RemoteTier(new_log, new_store, "t", 0, topic_id="cd" * 16, partitions=1)
    new_tier.copy(new_log.segments[1].base_offset)
    assert 0 < new_tier.manifest.generation < old_generation
    assert replica.refresh()
    rlog = replica.log
    end = new_tier.highest_offset + 1
    assert (rlog.log_start_offset, rlog.high_watermark) == (0, end)
    copied = [r for r in recs if r[0] < end]
    for _, ts in copied:
        want = next(o for o, t in copied if t >= ts)
        hit = rlog.offset_for_timestamp(ts)
        assert hit is not None and hit.offset == want
    got = [(h.base_offset, h.last_offset) for _, h in iter_batches(rlog.read(0, 1 << 20))]
    assert got and got[0][0] == 0 and got[-1][1] <= end - 1
    assert not replica.refresh()
