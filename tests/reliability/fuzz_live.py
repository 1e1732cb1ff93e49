"""A live-socket fuzzer: mutated requests of every API and version against a real broker.

Seeds are one well-formed request per (API, version) the broker serves (every field
set, from the protocol schema), Produce requests carrying real record batches (plain,
compressed, several records) and the same batches corrupted (CRC, lengths, counts,
magic, compressed bytes). Each frame sent is a seed mutated 1-4 times (bit flips,
boundary integers written over any offset, bytes inserted, deleted or repeated, the
body cut short) behind a correct size prefix, or now and then a wrong one. Eight
connections send rounds of four pipelined frames and a sentinel request; a
malformed frame makes the broker close the connection (the rest of that round is
never read), so only requests the broker decoded count: answered ones and the
ones it closed a connection for.

Findings:
- crash: the broker process exits;
- hang: a connection with requests outstanding gets no answer and is not closed
  within ``HANG_S`` seconds;
- unbounded allocation: the broker's RSS grows more than ``RSS_BOUND_MIB``;
- unexpected exception: a traceback in the broker's log (a decoder or handler bug,
  even if the connection was closed cleanly).
The frames of the last round before a finding are written to the findings directory.

``python -m tests.reliability.fuzz_live --requests N --seconds S`` (``make fuzz``:
1,000,000 requests); ``tests/reliability/test_fuzz_live.py`` runs a short round.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from protocol.api import API_VERSIONS, MESSAGES, ApiKey, encode_request
from storage.records import Record, build_batch
from tests.protocol.strategies import is_flexible, rich_body

HANG_S = 10.0
WAITING = {1, 11, 14}  # Fetch, JoinGroup, SyncGroup may wait as long as the request says
RSS_BOUND_MIB = 300
CONNECTIONS = 8
PIPELINE = 4
# Requests that change the broker's own settings would let the fuzzer lock itself out
# (max.connections=0); their decoders are fuzzed by tests/protocol/test_fuzz.py.
NOT_SEEDED = {ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS}
SENTINEL_ID = 0x5E5E5E5E
# An ApiVersions v0 request after each round: its answer says the round is over.
SENTINEL = encode_request(ApiKey.API_VERSIONS, 0, SENTINEL_ID, "fuzz", {})
BOUNDARY = [b"\x00", b"\xff", b"\x7f", b"\x80", b"\x00\x00", b"\xff\xff", b"\x7f\xff",
            b"\x80\x00", b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff",
            b"\x80\x00\x00\x00", b"\x00\x00\x00\x01"]


def _batches() -> list[bytes]:
    t0 = 1_700_000_000_000
    recs = [Record(i, t0 + i, b"k%d" % i, b"v" * (i * 7 % 50), [("h", b"x")]) for i in range(20)]
    out = [build_batch(recs[:1]), build_batch(recs)]
    out += [build_batch(recs, compression=c) for c in (1, 2, 3, 4)]
    return out


def _corrupt_batches(batches: list[bytes], rng: random.Random) -> list[bytes]:
    out = []
    for b in batches:
        for off, val in ((17, b"\x00\x00\x00\x00"), (8, b"\x7f\xff\xff\xff"), (8, b"\x00\x00\x00\x05"),
                         (16, b"\x01"), (57, b"\xff\xff\xff\xff"), (23, b"\x00\x01\x00\x00"),
                         (61, b"\xff\xff\xff")):
            m = bytearray(b)
            m[off:off + len(val)] = val
            out.append(bytes(m))
        cut = rng.randrange(12, len(b))
        out.append(b[:cut])
    return out


def seeds(topic: str, rng: random.Random) -> list[bytes]:
    """Well-formed frames: every served (API, version), and Produce with real batches."""
    frames = []
    for key, rng_v in API_VERSIONS.items():
        if key in NOT_SEEDED:
            continue
        for v in range(rng_v.min_version, rng_v.max_version + 1):
            body = rich_body(MESSAGES[key][0].fields, v, is_flexible(key, v))
            try:
                frames.append(encode_request(key, v, 1, "fuzz", body))
            except Exception:
                continue
    batches = _batches()
    for records in batches + _corrupt_batches(batches, rng):
        for v in (3, 7, 9, 11):
            frames.append(encode_request(ApiKey.PRODUCE, v, 1, "fuzz", {
                "transactional_id": None, "acks": rng.choice([-1, 1]), "timeout_ms": 1000,
                "topic_data": [{"name": topic, "partition_data": [
                    {"index": 0, "records": records}]}]}))
    return frames


def mutate(frame: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.25:
        return frame  # well-formed, unusual values: reaches the handlers
    body = bytearray(frame[4:])
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        if not body:
            body += bytes([rng.randrange(256)])
        pos = rng.randrange(len(body))
        if op == 0:
            body[pos] ^= 1 << rng.randrange(8)
        elif op == 1:
            val = rng.choice(BOUNDARY)
            body[pos:pos + len(val)] = val
        elif op == 2:
            body[pos:pos] = rng.randbytes(rng.randint(1, 16))
        elif op == 3:
            del body[pos:pos + rng.randint(1, 16)]
        elif op == 4:
            end = min(len(body), pos + rng.randint(1, 64))
            body[pos:pos] = body[pos:end] * rng.randint(1, 8)
        else:
            del body[pos:]
    if len(body) >= 8 and rng.random() < 0.7:
        body[0:4] = frame[4:8]  # mostly keep a served key/version so the decoder is reached
    size = len(body)
    if rng.random() < 0.02:  # beyond socket.request.max.bytes, or negative: must close
        size = rng.choice([0x7FFFFFFF, -1 & 0xFFFFFFFF])
    return struct.pack(">I", size & 0xFFFFFFFF) + bytes(body)


@dataclass
class Stats:
    sent: int = 0
    answered: int = 0
    closed: int = 0  # a close ends a round: the request that caused it was processed too
    parked: int = 0  # rounds that held a request allowed to wait (long-poll, parked join)
    hangs: list[str] = field(default_factory=list)

    @property
    def processed(self) -> int:
        """Requests the broker decoded (and answered, or closed the connection for)."""
        return self.answered + self.closed


async def _lane(port: int, frames: list[bytes], rng: random.Random, stats: Stats, deadline: float,
                budget: list[int], findings: Path) -> None:
    while budget[0] > 0 and time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        batch = [mutate(rng.choice(frames), rng) for _ in range(PIPELINE)]
        writer.write(b"".join(batch) + SENTINEL)
        stats.sent += len(batch)
        round_ = Stats()
        try:
            await asyncio.wait_for(_read_all(reader, round_), HANG_S)
        except TimeoutError:
            # A request may legitimately wait that long (a Fetch long-poll, a parked
            # JoinGroup/SyncGroup with a mutated timeout): not a hang if the broker answers
            # a fresh connection at once and the round held such a request.
            if await _responsive(port) and WAITING & {_key(f) for f in batch}:
                stats.parked += 1
            else:
                name = findings / f"hang-{len(stats.hangs)}.bin"
                name.write_bytes(b"".join(batch))
                stats.hangs.append(str(name))
        except (ConnectionError, OSError):
            round_.closed += 1
        finally:
            writer.close()
            stats.answered += round_.answered
            stats.closed += round_.closed
            budget[0] -= round_.processed


def _key(frame: bytes) -> int:
    return struct.unpack_from(">h", frame, 4)[0] if len(frame) >= 6 else -1


async def _responsive(port: int) -> bool:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
        writer.write(SENTINEL)
        await asyncio.wait_for(reader.readexactly(8), 5)
        writer.close()
        return True
    except (TimeoutError, OSError, asyncio.IncompleteReadError):
        return False


async def _read_all(reader: asyncio.StreamReader, stats: Stats) -> None:
    """Read answers until the sentinel's, or until the broker closes the connection (some
    requests get no answer: acks=0 Produce; the sentinel marks the end of the round)."""
    while True:
        try:
            head = await reader.readexactly(8)
        except asyncio.IncompleteReadError:
            stats.closed += 1
            return
        size, corr = struct.unpack(">ii", head)
        await reader.readexactly(size - 4)
        if corr == SENTINEL_ID:
            return
        stats.answered += 1


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Result:
    stats: Stats
    crashed: bool
    rss_growth_mib: float
    tracebacks: list[str]
    seconds: float


def fuzz(broker: object, requests: int, seconds: float, seed: int, findings: Path) -> Result:
    """Fuzz a running ``tests.conftest.BrokerProcess``."""
    from client import ProducerRecord, SyncClient

    b = broker
    proc = b.proc  # type: ignore[attr-defined]
    findings.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    with SyncClient(b.bootstrap) as c:  # type: ignore[attr-defined]
        c.create_topic("fuzz", 2)
        c.produce("fuzz", [ProducerRecord(value=b"x" * 100, timestamp=1_700_000_000_000 + i)
                           for i in range(2000)], partition=0)
    frames = seeds("fuzz", rng)
    time.sleep(1.0)
    base = _rss_mib(proc.pid)
    stats = Stats()
    started = time.monotonic()
    deadline = started + seconds
    budget = [requests]
    worst = 0.0

    async def run() -> None:
        nonlocal worst
        lanes = [asyncio.create_task(_lane(b.port, frames, random.Random(rng.random()), stats,  # type: ignore[attr-defined]
                                           deadline, budget, findings))
                 for _ in range(CONNECTIONS)]
        while not all(t.done() for t in lanes):
            await asyncio.sleep(0.5)
            if proc.poll() is not None:
                for t in lanes:
                    t.cancel()
                break
            worst = max(worst, _rss_mib(proc.pid) - base)
        await asyncio.gather(*lanes, return_exceptions=True)

    asyncio.run(run())
    crashed = proc.poll() is not None
    log = b.log()  # type: ignore[attr-defined]
    tracebacks = [block.split("\n", 1)[0] for block in log.split("Traceback")[1:]]
    return Result(stats, crashed, worst, tracebacks, time.monotonic() - started)


def main(argv: list[str]) -> int:
    from tests.helpers.broker import BrokerProcess, free_port_number

    p = argparse.ArgumentParser(prog="fuzz_live", description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=1_000_000)
    p.add_argument("--seconds", type=float, default=1800)
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--dir", type=Path, default=Path("fuzz-out"))
    a = p.parse_args(argv)
    data = a.dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    b = BrokerProcess(data, free_port_number()).start()
    try:
        r = fuzz(b, a.requests, a.seconds, a.seed, a.dir / "findings")
    finally:
        b.stop()
    s = r.stats
    print(f"seed {a.seed}: {s.processed:,} requests decoded in {r.seconds:.0f} s "
          f"({s.processed / r.seconds:,.0f}/s; {s.sent:,} sent): "
          f"{s.answered:,} answered, {s.closed:,} connections closed by the broker, "
          f"{s.parked:,} rounds waiting on a long-poll; "
          f"crashes {int(r.crashed)}, hangs {len(s.hangs)}, RSS growth {r.rss_growth_mib:.0f} MiB "
          f"(bound {RSS_BOUND_MIB}), unexpected exceptions {len(r.tracebacks)}")
    for t in sorted(set(r.tracebacks))[:20]:
        print("  traceback:", t)
    bad = r.crashed or s.hangs or r.rss_growth_mib > RSS_BOUND_MIB or r.tracebacks
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
