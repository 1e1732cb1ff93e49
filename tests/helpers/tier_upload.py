"""Put a running broker's sealed segments into a bucket with the tier's own uploader.

For the tests of Spark's ``remoteStorage``: a copy of the partition
directory is opened with the real storage ``Log`` (recovery cuts the active segment's
unflushed tail) and ``storage.remote.tier.RemoteTier.copy`` uploads every sealed segment
below the last stable offset (Kafka's rule), its files and the manifest, exactly as the
broker's remote-log manager does. The broker keeps its local copy, so reads through the
broker and from the bucket see the same records.
"""

from __future__ import annotations

import shutil
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

