"""``chronolog consume --event-time`` and the disorder columns, run as real subprocesses
against a real broker and checked against a brute-force oracle over what was produced.

Hypothesis makes the records: random disorder, equal timestamps, whole late runs, into
topics with tiny segments, sometimes with an aborted transaction (librdkafka) in the
middle; windows are random, empty, a single timestamp, before and after all data. The
``--format json`` output of ``consume --event-time`` must be exactly the records with
T1 <= timestamp < T2 (aborted ones only under read_uncommitted), partitions ascending,
each in offset order; ``describe --json`` must count late records and the largest
lateness as a scan of the produced timestamps does, and a positional window must warn
exactly when a partition has late records.
"""

from __future__ import annotations

import itertools
import json
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.disorder import SHAPES, disordered

CHRONOLOG = str(Path(sys.executable).parent / "chronolog")
NOW = int(time.time() * 1000)
T0 = NOW - 3 * 86_400_000
_names = itertools.count()

# (partition, offset, timestamp, key, value) of one produced record
Row = tuple[int, int, int, str, str]


def cli(bootstrap: str, *args: str, stdin: bytes | None = None, check: bool = True
        ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([CHRONOLOG, *args, "--bootstrap-server", bootstrap], input=stdin,
                          capture_output=True, timeout=120)
    out = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(),
                                      proc.stderr.decode())
    if check and proc.returncode != 0:
        raise AssertionError(f"chronolog {' '.join(args)} exited {proc.returncode}:\n"
                             f"{out.stderr}")
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def mbroker(tmp_path_factory: pytest.TempPathFactory, broker_process_class: Any) -> Iterator[Any]:
    """One broker for every example of this module (each example has its own topic)."""
    data = tmp_path_factory.mktemp("cli-event-time") / "data"
    data.mkdir()
    b = broker_process_class(data, _free_port()).start()
    yield b
    b.stop()


def produce_lines(bootstrap: str, topic: str, rows: list[tuple[str, int, str]]) -> list[Row]:
    """``chronolog produce`` of key<TAB>ts<TAB>value lines in small batches; where each went."""
    text = "".join(f"{k}\t{t}\t{v}\n" for k, t, v in rows).encode()
    out = cli(bootstrap, "produce", topic, "--key-column", "1", "--timestamp-column", "2",
              "--print-offsets", "--linger-ms", "1", "--batch-bytes", "300", "--no-progress",
              stdin=text)
    placed = [tuple(map(int, line.split("\t"))) for line in out.stdout.splitlines()]
    assert len(placed) == len(rows)
    return [(p, o, t, k, v) for (p, o), (k, t, v) in zip(placed, rows, strict=True)]


def produce_aborted(bootstrap: str, topic: str, rows: list[tuple[str, int, str]]) -> list[Row]:
    """The rows in one transaction that librdkafka aborts; where each went."""
    placed: list[Row] = []
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn",
                  "linger.ms": 5})
    p.init_transactions(15)
    p.begin_transaction()
    for k, t, v in rows:
        p.produce(topic, key=k.encode(), value=v.encode(), timestamp=t,
                  on_delivery=lambda err, m, t=t: placed.append(
                      (m.partition(), m.offset(), t, m.key().decode(), m.value().decode())))
    p.flush(15)
    p.abort_transaction(15)
    assert len(placed) == len(rows)
    return placed


def oracle(rows: list[Row], t1: int, t2: int, aborted: set[str], committed: bool) -> list[Row]:
    """Every record with t1 <= ts < t2 (aborted ones only read_uncommitted), partitions
    ascending, each in offset order."""
    return sorted(r for r in rows if t1 <= r[2] < t2 and not (committed and r[4] in aborted))


def disorder_oracle(rows: list[Row]) -> dict[int, tuple[int, int]]:
    """Per partition, records below the running max of those before them (offset order),
    and the largest gap; every data record counts, aborted ones too."""
    out: dict[int, tuple[int, int]] = {}
    for p in sorted({r[0] for r in rows}):
        running, late, worst = None, 0, 0
        for _, _, t, _, _ in sorted(r for r in rows if r[0] == p):
            if running is not None and t < running:
                late, worst = late + 1, max(worst, running - t)
            running = t if running is None else max(running, t)
        out[p] = (late, worst)
    return out


def consume_event_time(bootstrap: str, topic: str, t1: int, t2: int, isolation: str
                       ) -> list[Row]:
    out = cli(bootstrap, "consume", topic, "--event-time", "--from-time", str(t1),
              "--until", str(t2), "--format", "json", "--isolation", isolation)
    recs = [json.loads(line) for line in out.stdout.splitlines()]
    assert f"Consumed {len(recs)} record(s) from {topic}." in out.stderr
    assert "warning" not in out.stderr  # an event-time window is exact: nothing to warn of
    return [(r["partition"], r["offset"], r["timestamp"], r["key"], r["value"]) for r in recs]


def _timestamps(shape: str, n: int, at: int, rng: random.Random) -> list[int]:
    return disordered(shape, n, T0 + at, T0 - 86_400_000, rng)


runs = st.lists(
    st.tuples(st.sampled_from(SHAPES), st.integers(1, 25),
              st.integers(0, 2_000_000)),
    min_size=1, max_size=8)


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(shape=runs, parts=st.integers(1, 3), with_abort=st.booleans(), seed=st.integers(0, 999))
def test_consume_event_time_equals_the_oracle(
    mbroker: Any, shape: list[tuple[str, int, int]], parts: int, with_abort: bool, seed: int
) -> None:
    rng = random.Random(seed)
    bs = mbroker.bootstrap
    topic = f"cli-evt-{next(_names)}"
    cli(bs, "topics", "create", topic, "--partitions", str(parts), "--config",
        "segment.bytes=1200", "--config", "index.interval.bytes=200",
        "--config", "retention.ms=-1")
    made = [(f"k{rng.randrange(7)}", t, f"v{i}")
            for i, t in enumerate(t for s, n, at in shape for t in _timestamps(s, n, at, rng))]
    half = len(made) // 2
    rows = produce_lines(bs, topic, made[:half]) if half else []
    aborted: set[str] = set()
    if with_abort:
        dropped = [(f"k{rng.randrange(7)}", T0 + rng.randint(-100_000, 2_100_000), f"a{i}")
                   for i in range(rng.randint(1, 8))]
        rows += produce_aborted(bs, topic, dropped)
        aborted = {v for _, _, v in dropped}
    rows += produce_lines(bs, topic, made[half:])

    tss = sorted(r[2] for r in rows)
    windows = [(tss[0] - 10_000, tss[0]),          # before all data
               (tss[-1] + 1, tss[-1] + 10_000),    # after all data
               (tss[0], tss[0]),                   # empty
               (tss[0], tss[-1] + 1),              # everything
               (tss[-1], tss[-1] + 1)]             # one timestamp (ties included)
    for _ in range(2):
        a = rng.choice(tss)
        windows.append((a - rng.randint(0, 200_000), a + rng.randint(1, 400_000)))
    for n, (t1, t2) in enumerate(windows):
        committed = n % 3 != 2  # read_committed is consume's default; some read_uncommitted
        isolation = "read_committed" if committed else "read_uncommitted"
        assert consume_event_time(bs, topic, t1, t2, isolation) == \
            oracle(rows, t1, t2, aborted, committed), (t1, t2, isolation)

    t1, t2 = windows[-1]
    last = parts - 1
    out = cli(bs, "consume", topic, "--event-time", "--from-time", str(t1), "--until", str(t2),
              "--partition", str(last), "--format", "json").stdout
    assert [(r["partition"], r["offset"]) for r in map(json.loads, out.splitlines())] == \
        [(p, o) for p, o, _, _, _ in oracle(rows, t1, t2, aborted, True) if p == last]

    want = disorder_oracle(rows)
    described = json.loads(cli(bs, "describe", topic, "--json").stdout)["partitions"]
    assert {d["partition"]: (d["late_records"], d["max_lateness_ms"]) for d in described} == \
        {p: want.get(p, (0, 0)) for p in range(parts)}
    topics_json = json.loads(cli(bs, "topics", "describe", topic, "--format", "json").stdout)
    assert {d["partition"]: (d["late_records"], d["max_lateness_ms"])
            for d in topics_json["partitions"]} == {p: want.get(p, (0, 0)) for p in range(parts)}

    positional = cli(bs, "consume", topic, "--from-time", str(tss[0]), "--until",
                     str(tss[-1] + 1), "--format", "json")
    warned = [line for line in positional.stderr.splitlines() if line.startswith("warning:")]
    late = sum(n for n, _ in want.values())
    if late:
        assert len(warned) == 1 and "--event-time" in warned[0], positional.stderr
        assert f"{topic} has {late} late record(s)" in warned[0]
    else:
        assert warned == [], positional.stderr


def test_event_time_without_a_window_or_with_offsets_or_follow_is_refused(mbroker: Any) -> None:
    bs = mbroker.bootstrap
    topic = f"cli-evt-{next(_names)}"
    cli(bs, "topics", "create", topic)
    for args, says in (([], "--event-time needs a window"),
                       (["--from-offset", "0", "--until", "now"], "not --from-offset"),
                       (["--from-time", "-1h", "--follow"], "cannot --follow")):
        r = cli(bs, "consume", topic, "--event-time", *args, check=False)
        assert r.returncode == 2, (args, r.stderr)
        assert says in r.stderr, (args, r.stderr)
        assert r.stdout == ""


def test_one_sided_event_time_windows_and_max(mbroker: Any) -> None:
    bs = mbroker.bootstrap
    topic = f"cli-evt-{next(_names)}"
    cli(bs, "topics", "create", topic, "--config", "retention.ms=-1")
    stamps = [T0 + d for d in (500, 100, 900, 100, 300, 700, 200)]
    rows = produce_lines(bs, topic, [("k", t, f"v{i}") for i, t in enumerate(stamps)])

    def values(*args: str) -> list[str]:
        out = cli(bs, "consume", topic, "--event-time", *args)
        return out.stdout.split()

    assert values("--from-time", str(T0 + 300)) == [r[4] for r in rows if r[2] >= T0 + 300]
    assert values("--until", str(T0 + 300)) == [r[4] for r in rows if r[2] < T0 + 300]
    assert values("--from-time", str(T0 + 300), "--max", "2") == ["v0", "v2"]
    text = cli(bs, "consume", topic, "--event-time", "--until", str(T0 + 150),
               "--print-timestamp", "--print-key").stdout
    assert text.splitlines() == [f"{_iso(T0 + 100)}\tk\tv1", f"{_iso(T0 + 100)}\tk\tv3"]


def _iso(ms: int) -> str:
    from client.timeparse import format_time

    return format_time(ms)


@pytest.fixture
def broker_without_plan(tmp_path: Path) -> Iterator[str]:
    """A real broker that does not offer PlanTimeWindow, as Kafka and older Chronologs do:
    its handler module says it is not available (the flag a handler that needs a missing
    extra sets), so dispatch routes no key 10000 and ApiVersions does not advertise it
    (broker/dispatch.py)."""
    port = _free_port()
    code = ("import sys; import broker.handlers.plan_time_window as h; h.AVAILABLE = False; "
            "h.UNAVAILABLE_WHY = 'switched off by the test'; "
            "from broker.server import main; sys.exit(main())")
    log = tmp_path / "broker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, "--data-dir", str(tmp_path / "data"),
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[2])
    try:
        deadline = time.monotonic() + 30
        while b"chronolog broker ready on" not in log.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


def test_without_plan_time_window_event_time_fails_clearly_and_nothing_else_changes(
    broker_without_plan: str
) -> None:
    bs = broker_without_plan
    from client import SyncClient
    from client.aio import PLAN_TIME_WINDOW

    with SyncClient(bs) as c:
        assert not c.supports(PLAN_TIME_WINDOW)
    topic = "no-plan"
    cli(bs, "topics", "create", topic, "--config", "retention.ms=-1")
    rows = produce_lines(bs, topic, [("k", T0 + d, f"v{i}") for i, d in enumerate((5, 1, 9))])
    r = cli(bs, "consume", topic, "--event-time", "--from-time", str(T0), "--until",
            str(T0 + 6), check=False)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("error: UNSUPPORTED_VERSION: --event-time needs a Chronolog "
                               "broker"), r.stderr
    # The positional window still works, silently: the broker cannot count late records.
    r = cli(bs, "consume", topic, "--from-time", str(T0), "--until", str(T0 + 6))
    assert r.stdout.split() == [rows[0][4], rows[1][4]]
    assert "warning" not in r.stderr
    d = json.loads(cli(bs, "describe", topic, "--json").stdout)["partitions"][0]
    assert (d["late_records"], d["max_lateness_ms"]) == (None, None)
    assert cli(bs, "describe", topic).stdout.splitlines()[-1].split()[-2:] == ["-", "-"]
    t = json.loads(cli(bs, "topics", "describe", topic, "--format", "json").stdout)
    assert (t["partitions"][0]["late_records"], t["partitions"][0]["max_lateness_ms"]) == \
        (None, None)


def test_event_time_after_delete_records_and_before_an_open_transaction(mbroker: Any) -> None:
    """Records below a DeleteRecords log start are gone from both the window and the late
    counts; read_committed stops at an open transaction's first offset (the LSO), as
    positional consume does, while read_uncommitted reads everything."""
    bs = mbroker.bootstrap
    topic = f"cli-evt-{next(_names)}"
    cli(bs, "topics", "create", topic, "--config", "segment.bytes=1200",
        "--config", "index.interval.bytes=200", "--config", "retention.ms=-1")
    rng = random.Random(5)
    made = [("k", T0 + rng.randint(0, 100_000), f"v{i}") for i in range(120)]
    rows = produce_lines(bs, topic, made[:80])
    cli(bs, "delete-records", topic, "--before-offset", "30")
    rows = [r for r in rows if r[1] >= 30]
    want = disorder_oracle(rows)
    d = json.loads(cli(bs, "describe", topic, "--json").stdout)["partitions"][0]
    assert (d["log_start_offset"], d["late_records"], d["max_lateness_ms"]) == (30, *want[0])

    p = Producer({"bootstrap.servers": bs, "transactional.id": f"{topic}-open", "linger.ms": 5})
    p.init_transactions(15)
    p.begin_transaction()
    pending: list[Row] = []
    for i in range(5):
        t = T0 + rng.randint(0, 100_000)
        p.produce(topic, key=b"k", value=b"o%d" % i, timestamp=t,
                  on_delivery=lambda err, m, t=t: pending.append(
                      (m.partition(), m.offset(), t, m.key().decode(), m.value().decode())))
    p.flush(15)  # left open: the last stable offset is its first offset
    lso = min(r[1] for r in pending)
    after = produce_lines(bs, topic, made[80:])
    everything = rows + pending + after
    for t1, t2 in [(T0, T0 + 100_001), (T0 + 20_000, T0 + 40_000), (T0 + 99_000, T0 + 99_500)]:
        assert consume_event_time(bs, topic, t1, t2, "read_committed") == \
            [r for r in oracle(everything, t1, t2, set(), True) if r[1] < lso]
        assert consume_event_time(bs, topic, t1, t2, "read_uncommitted") == \
            oracle(everything, t1, t2, set(), False)
    p.abort_transaction(15)
    for t1, t2 in [(T0, T0 + 100_001), (T0 + 20_000, T0 + 40_000)]:
        assert consume_event_time(bs, topic, t1, t2, "read_committed") == \
            oracle(everything, t1, t2, {r[4] for r in pending}, True)
