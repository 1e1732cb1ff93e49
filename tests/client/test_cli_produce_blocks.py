"""`chronolog produce --file` reads in blocks: lines that span blocks, CRLF endings, keys,
a last line without a newline and --print-offsets, against the file's lines as the oracle."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from client_oracle import unique_topic

from client import SyncClient
from client.partitioner import partition_for_key

CHRONOLOG = str(Path(sys.executable).parent / "chronolog")
BASE = (time.time_ns() // 1_000_000 - 86_400_000) // 1000 * 1000


def test_a_multi_block_file_is_produced_line_for_line_in_order(broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("blocks")
    n = 30_000  # ~2.3 MiB: three read blocks, with lines cut at block edges
    lines = [b"k%d\t%d\t" % (i % 97, BASE + i) + b"v" * (i % 120) + b"%d" % i for i in range(n)]
    ends = [b"\r\n" if i % 5 == 0 else b"\n" for i in range(n)]
    path = tmp_path / "in.tsv"
    path.write_bytes(b"".join(line + end for line, end in zip(lines, ends, strict=True))[:-1])
    with SyncClient(broker.bootstrap) as c:
        c.create_topic(topic, partitions=3)
        out = subprocess.run(
            [CHRONOLOG, "produce", topic, "--file", str(path), "--key-column", "1",
             "--timestamp-column", "2", "--print-offsets", "--batch-bytes", "100000",
             "--bootstrap-server", broker.bootstrap],
            capture_output=True, timeout=300, check=True)
        printed = [tuple(map(int, row.split(b"\t"))) for row in out.stdout.splitlines()]
        stored = {p: {r.offset: r for r in c.consume(topic, p, 0)} for p in range(3)}
    assert f"Produced {n} record(s)".encode() in out.stderr
    assert len(printed) == n and sum(len(s) for s in stored.values()) == n
    last = {0: -1, 1: -1, 2: -1}
    for i, (p, o) in enumerate(printed):
        key, ts, value = lines[i].split(b"\t", 2)
        assert p == partition_for_key(key, 3)
        r = stored[p][o]
        assert (r.key, r.timestamp, r.value) == (key, int(ts), value)
        assert o > last[p]  # each partition in line order
        last[p] = o
