"""Log compaction: how fast the cleaner cleans, and what it costs concurrent produce.

- Cleaning throughput: a compacted log of 1M records (10k distinct keys, 100-byte
  values, 1,000-record batches as a producer sends them, 16 MiB segments) is cleaned
  once in-process (``storage.cleaner``: plan, run, commit); MB/s = bytes of the dirty
  sealed segments / wall time of the clean. The same with 100-record batches of
  keys and values of varying length (the per-record path). Every cleaned log is
  checked: one record per key is left below the active segment. Also per CPU second
  of the cleaning process, which the shared machine's load does not change.
- Produce with and without the cleaner: a real broker, confluent-kafka producing
  600k keyed records (10k keys) to a compacted topic with 4 MiB segments and
  min.cleanable.dirty.ratio 0.1, once with log.cleaner.enable=false and once with the
  cleaner on (it cleans repeatedly while the producer runs), and once with the cleaner
  throttled to 10 MiB/s, alternately, three times each; the medians are compared (a
  ratio from one run, as the machine is shared).
"""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

from bench.harness import start_broker, stop_broker
from bench.report import Report
from storage.cleaner import CleanerSettings, log_to_clean, plan
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch, decode_batch

T0 = 1_700_000_000_000
KEYS = 10_000


def _fill(directory: Path, records: int, per_batch: int, uniform: bool) -> Log:
    cfg = LogConfig.from_kafka({"cleanup.policy": "compact", "segment.bytes": str(16 << 20),
                                "message.timestamp.before.max.ms": str(1 << 50)})
    log = Log(directory, cfg)
    rng = random.Random(1)
    value = bytes(100)
    for b in range(records // per_batch):
        recs = []
        for i in range(per_batch):
            k = rng.randrange(KEYS)
            key = f"key-{k:05d}".encode() if uniform else f"key-{k}".encode()
            v = value if uniform else value[:rng.randrange(20, 180)]
            recs.append(Record(i, T0 + b, key, v, []))
        log.append(build_batch(recs), now_ms=T0 + 10_000)
    log.roll(T0 + 10_000)
    return log


def _clean_throughput(report: Report, scratch: Path, name: str, per_batch: int,
                      uniform: bool) -> None:
    log = _fill(scratch / f"c-{per_batch}", 1_000_000, per_batch, uniform)
    dirty = sum(max(s.size, 0) for s in log.segments[:-1])
    started = time.monotonic()
    cpu = time.process_time()
    ltc = log_to_clean(log, None, T0 + 20_000)
    p = plan(log, ltc, T0 + 20_000)
    assert p is not None
    result = p.run(CleanerSettings())
    run_s = time.monotonic() - started
    assert result.commit(log)
    total_s = time.monotonic() - started
    cpu_s = time.process_time() - cpu
    keys = set()
    n = 0
    for seg in log.segments:
        for info in seg.iter_batches(0):
            for r in decode_batch(seg.pread(info.position, info.size), 0):
                keys.add(r.key)
                n += 1
    assert n == len(keys), "more than one record per key survived"
    report.add("compaction", f"clean 1M records, 10k keys, {name}", dirty / 1e6 / total_s, "MB/s",
               ">= 50 MB/s", f"{dirty / 1e6:.0f} MB dirty in {total_s:.2f} s "
               f"(commit {total_s - run_s:.3f} s); {n} records left")
    report.add("compaction", f"clean 1M records, 10k keys, {name}, per CPU second",
               dirty / 1e6 / cpu_s, "MB/s", "", "the same clean over its process CPU time "
               "(independent of the machine's load)")
    log.close()


def _produce(bootstrap: str, topic: str, count: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 262144,
                  "acks": 1, "queue.buffering.max.messages": 1_000_000})
    rng = random.Random(2)
    keys = [f"key-{k:05d}".encode() for k in range(KEYS)]
    value = bytes(100)
    started = time.monotonic()
    for _ in range(count):
        while True:
            try:
                p.produce(topic, value, keys[rng.randrange(KEYS)])
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    return count / (time.monotonic() - started)


def _produce_rate(scratch: Path, tag: str, cleaner: str, count: int) -> tuple[float, int, int]:
    """Records/s of one producer run; ``cleaner``: "off", "on", or a throttle in bytes/s."""
    from confluent_kafka.admin import AdminClient, NewTopic

    work = scratch / tag
    work.mkdir()
    overrides = {"log.cleaner.enable": "false" if cleaner == "off" else "true",
                 "log.cleaner.backoff.ms": "100"}
    if cleaner not in ("off", "on"):
        overrides["log.cleaner.io.max.bytes.per.second"] = cleaner
    proc, port = start_broker(work, work / "data", overrides)
    try:
        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("compacted", 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": str(4 << 20),
            "min.cleanable.dirty.ratio": "0.1"})])["compacted"].result(20)
        rate = _produce(bootstrap, "compacted", count)
    finally:
        stop_broker(proc)
    text = (work / "broker.log").read_text()
    started = len(re.findall(r"chronolog.cleaner: cleaning ", text))
    done = len(re.findall(r"chronolog.cleaner: cleaned ", text))
    return rate, started, done


def run(report: Report, scratch: str) -> None:
    root = Path(scratch)
    _clean_throughput(report, root, "uniform records in 1,000-record batches", 1000, True)
    _clean_throughput(report, root, "varying records in 100-record batches", 100, False)
    count = 600_000
    modes = {"off": "cleaner off", "on": "cleaner cleaning",
             str(10 << 20): "cleaner cleaning at log.cleaner.io.max.bytes.per.second=10 MiB/s"}
    rates: dict[str, list[float]] = {m: [] for m in modes}
    cleans: dict[str, list[int]] = {m: [0, 0] for m in modes}
    for i in range(3):  # alternating, so the machine's load falls on every mode alike
        for mode in modes:
            rate, started, done = _produce_rate(root, f"{mode}-{i}", mode, count)
            rates[mode].append(rate)
            cleans[mode][0] += started
            cleans[mode][1] += done
    base = sorted(rates["off"])[1]
    for mode, label in modes.items():
        median = sorted(rates[mode])[1]
        note = f"median of 3; runs {', '.join(f'{r:,.0f}' for r in rates[mode])}"
        if mode != "off":
            note += f"; cleans started {cleans[mode][0]}, finished {cleans[mode][1]}"
        report.add("compaction", f"produce 600k keyed records, {label}", median, "records/s", "",
                   note)
        if mode != "off":
            report.add("compaction", f"produce slowdown, {label}", 100 * (1 - median / base), "%",
                       "<= 20 %" if mode == "on" else "", "medians, same run")
