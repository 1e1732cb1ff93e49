"""Put a running broker's sealed segments into a bucket with the tier's own uploader.

For the tests and doc examples of Spark's ``remoteStorage``: a copy of the partition
directory is opened with the real storage ``Log`` (recovery cuts the active segment's
unflushed tail) and ``storage.remote.tier.RemoteTier.copy`` uploads every sealed segment
below the last stable offset (Kafka's rule), its files and the manifest, exactly as the
broker's remote-log manager does. The broker keeps its local copy, so reads through the
broker and from the bucket see the same records.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from storage.config import LogConfig
from storage.log import Log
from storage.remote.store import ObjectStore
from storage.remote.tier import RemoteTier


def upload_sealed(data_dir: Path, store: ObjectStore, topic: str, partition: int, *,
                  below: int, interval: int = 4096) -> int:
    """Upload the sealed segments of ``topic-partition`` whose records all lie below
    ``below``, zone maps of ``interval``-byte blocks; returns the highest uploaded offset
    (-1 when none)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / f"{topic}-{partition}"
        shutil.copytree(data_dir / f"{topic}-{partition}", copy)
        log = Log.open(copy, LogConfig(index_interval_bytes=interval), clean_shutdown=False)
        try:
            tier = RemoteTier(log, store, topic, partition, attach=False)
            tier.copy(below)
            return tier.highest_offset
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
