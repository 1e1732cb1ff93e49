"""A first CountTimeWindows on an unindexed partition does not stop the broker.

Right after a start without sidecars (kill -9, a deleted ``.zonemap``/``.tsindex``)
CountTimeWindows must first build the partition's zone maps and sorted-timestamp
indexes from the .log: seconds for a million records. It builds them in slices with
the event loop free between them, so another connection's requests are answered
meanwhile; the counts stay exact (oracle: the records written, timestamps
``T0 + offset``). PlanTimeWindow waits for the zone maps the same way, but rebuilding
those alone takes a few hundredths of a second here (measured: 0.05 s for these
records), too short to show anything.
"""

from __future__ import annotations

import struct
import threading
import time
from pathlib import Path

import crc32c

from client import SyncClient
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch

T0 = 1_700_000_000_000
RECORDS = 1_000_000
PER_BATCH = 1000


def _write_topic(data: Path, topic: str) -> None:
    """RECORDS records (timestamps T0 + offset) written with storage, then every
    event-time sidecar removed, as a kill -9 before any was written leaves them."""
    tpl = bytearray(build_batch([Record(0, T0 + i, None, b"x" * 20, []) for i in range(PER_BATCH)]))
    log = Log(data / f"{topic}-0", LogConfig(retention_ms=-1, segment_bytes=8 << 20))
    chunk = []
    for base in range(0, RECORDS, PER_BATCH):
        struct.pack_into(">q", tpl, 0, base)
        struct.pack_into(">qq", tpl, 27, T0 + base, T0 + base + PER_BATCH - 1)
        struct.pack_into(">I", tpl, 17, crc32c.crc32c(memoryview(tpl)[21:]))
        chunk.append(bytes(tpl))
        if len(chunk) == 100:
            log.append_as_is(b"".join(chunk), now_ms=T0 + RECORDS)
            chunk = []
    log.close()
    for sidecar in [*data.glob(f"{topic}-0/*.zonemap"), *data.glob(f"{topic}-0/*.tsindex")]:
        sidecar.unlink()


def test_other_connections_are_served_while_a_cold_partition_is_indexed(
        broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory()
    broker.stop()
    _write_topic(broker.data_dir, "cold")
    broker.start()
    answered: list[float] = []
    done = threading.Event()

    def ping() -> None:
        with SyncClient(broker.bootstrap, client_id="ping") as c:
            while not done.is_set():
                c.partitions_for("cold")  # a Metadata request
                answered.append(time.monotonic())

    pinger = threading.Thread(target=ping)
    with SyncClient(broker.bootstrap, client_id="evt") as c:
        c.partitions_for("cold")
        pinger.start()
        t1, t2 = T0 + 250_000, T0 + 250_500
        sent = time.monotonic()
        try:
            got = c.count_time_windows("cold", [T0 - 1, t1, t2, T0 + RECORDS])
            assert got == {0: [t1 - T0, t2 - t1, T0 + RECORDS - t2]}
        finally:
            took = time.monotonic() - sent
            done.set()
            pinger.join()
    during = [t for t in answered if sent <= t <= sent + took]
    # Indexing a million records takes the broker seconds; the other connection's
    # requests are answered between the slices, not after the last one.
    assert len(during) >= 3, (len(during), took, broker.log()[-2000:])
