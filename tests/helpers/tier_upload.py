"""Put a running broker's sealed segments into a bucket, as the tier's uploader does.

For the Spark tests of ``remoteStorage``: a copy of the partition directory is opened
with the real storage ``Log`` (recovery cuts the active segment's unflushed tail), and
every sealed segment wholly below ``below`` (the last stable offset, the uploader's rule)
is written to the store under manifest.py's layout with its .index, .timeindex,
.txnindex and .zonemap, then the manifest saying COPY_SEGMENT_FINISHED. The broker keeps
its local copy, so reads through the broker and from the bucket see the same records.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from storage import txnindex
from storage.config import LogConfig
from storage.log import Log
from storage.remote import manifest as mf
from storage.remote.store import ObjectStore


def upload_sealed(data_dir: Path, store: ObjectStore, topic: str, partition: int, *,
                  below: int, log_start: int = 0, interval: int = 4096) -> int:
    """Upload the sealed segments of ``topic-partition`` whose records all lie below
    ``below``, zone maps of ``interval``-byte blocks; returns the highest uploaded offset
    (-1 when none)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / f"{topic}-{partition}"
        shutil.copytree(data_dir / f"{topic}-{partition}", copy)
        log = Log.open(copy, LogConfig(index_interval_bytes=interval), clean_shutdown=False)
        try:
            segments: list[mf.RemoteSegment] = []
            for seg in log.segments[:-1]:
                nxt = seg.next_offset
                if nxt > below or nxt <= max(seg.base_offset, log_start):
                    break
                zm = seg.zone_map()
                seg.write_zone_map()
                txn = txnindex.path_for(copy, seg.base_offset)
                rs = mf.RemoteSegment(
                    segment_id=uuid.uuid4().hex, base_offset=seg.base_offset,
                    end_offset=nxt - 1, next_offset=nxt, size_bytes=seg.size,
                    max_timestamp=seg.max_timestamp, offset_of_max=seg.offset_of_max,
                    min_timestamp=zm.min_timestamp, state=mf.SegmentState.COPY_SEGMENT_FINISHED,
                    leader_epochs=[], txn_index_empty=not txn.exists() or not txnindex.read(txn),
                    created_ms=int(time.time() * 1000))
                files = {".log": seg.log_path, ".index": Path(f"{seg.log_path.with_suffix('')}.index"),
                         ".timeindex": Path(f"{seg.log_path.with_suffix('')}.timeindex"),
                         ".zonemap": seg.zone_map_path}
                if not rs.txn_index_empty:
                    files[".txnindex"] = txn
                for suffix, path in files.items():
                    if path.exists():
                        store.put(mf.segment_key(topic, partition, rs, suffix), path.read_bytes())
                segments.append(rs)
            store.put(mf.manifest_key(topic, partition), mf.encode(mf.PartitionManifest(
                version=mf.FORMAT_VERSION, topic=topic, partition=partition, topic_id="0" * 32,
                generation=1, log_start_offset=log_start, segments=segments)))
            return segments[-1].end_offset if segments else -1
        finally:
            log.close()


def main(argv: list[str]) -> int:
    """``python -m tests.helpers.tier_upload DATA_DIR TOPIC URL``: upload every partition's
    sealed segments below its last stable offset (the broker at
    CHRONOLOG_BOOTSTRAP_SERVER, else 127.0.0.1:9092, answers the LSO). For the docs'
    examples, until the broker's own remote-log manager does this."""
    from client import SyncClient, TopicPartition

    data_dir, topic, url = Path(argv[0]), argv[1], argv[2]
    store = ObjectStore(url)
    uploaded = []
    with SyncClient(os.environ.get("CHRONOLOG_BOOTSTRAP_SERVER", "127.0.0.1:9092")) as c:
        for p in c.list_topics()[topic]:
            tp = TopicPartition(topic, p)
            lso = c.list_offsets({tp: -1}, 1)[tp][0]
            uploaded.append(upload_sealed(data_dir, store, topic, p, below=lso))
            print(f"{topic}-{p}: uploaded up to offset {uploaded[-1]}")
    if max(uploaded, default=-1) < 0:
        print(f"{topic}: no sealed segment to upload", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
