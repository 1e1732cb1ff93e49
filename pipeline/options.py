"""Parse the options users pass to ``spark.read/readStream/write.format("chronolog")``.

The names and meanings are those of Spark's Kafka source, so a job written for
``format("kafka")`` needs only its format name changed. Spark hands a Python
data source its options with lower-cased keys and string values; everything
here is parsed once, on the driver side, into frozen dataclasses that pickle
to the planner and executors.

Invariants:
- A bad option raises :class:`OptionError` naming the option, the value and an
  accepted form, before any Spark job starts.
- Bound precedence is Spark's: ``startingTimestamp`` over
  ``startingOffsetsByTimestamp`` over ``startingOffsets`` (likewise for ending).
- Offsets JSON uses Spark's form ``{"topic": {"0": 23, "1": -2}}``; -2 means
  earliest and -1 latest. Timestamps are epoch ms or ISO-8601 with a zone.
- ``eventTime`` (batch only) turns ``startingTimestamp``/``endingTimestamp`` into
  the window start <= timestamp < end; without it they keep Kafka's positional
  (offsetsForTimes) meaning. Offsets or per-partition times cannot be mixed with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from client.timeparse import TimeParseError, parse_time

__all__ = [
    "OptionError",
    "Bound",
    "Subscription",
    "ReadOptions",
    "WriteOptions",
    "parse_read_options",
    "parse_write_options",
    "EARLIEST",
    "LATEST",
    "NO_END",
]

EARLIEST = -2
LATEST = -1
NO_END = 2**63 - 1
"""The end of an event-time window without ``endingTimestamp``: every timestamp is below it."""

_DEFAULT_FETCH_MAX_BYTES = 4 * 1024 * 1024
_DEFAULT_BATCH_BYTES = 1_000_000
"""The Spark sink's batch.size: librdkafka's and the bundled client's default, under Kafka's
default max.message.bytes (1,048,588); fewer, larger requests cost the broker and the
task less per row than 512 KiB did (full Spark writes, A/B: pyworker CPU -10 %)."""


class OptionError(ValueError):
    """An option of the chronolog data source is missing, unknown in form, or inconsistent."""


@dataclass(frozen=True)
class Bound:
    """Where one end of a read starts or stops, per Spark's Kafka options.

    ``kind`` is ``earliest``, ``latest``, ``offsets`` (explicit per-partition
    offsets, -2/-1 allowed), ``timestamp`` (one time for every partition) or
    ``timestamps`` (per-partition times).
    """

    kind: str
    timestamp: int = -1
    per_partition: Mapping[str, Mapping[int, int]] = field(default_factory=dict)

    def describe(self) -> str:
        if self.kind in ("earliest", "latest"):
            return self.kind
        if self.kind == "timestamp":
            return f"timestamp {self.timestamp}"
        return f"{self.kind} {json.dumps({t: dict(p) for t, p in self.per_partition.items()})}"


@dataclass(frozen=True)
class Subscription:
    """Which topics (and partitions) to read: exactly one of subscribe, subscribePattern, assign."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def select(self, available: Mapping[str, list[int]]) -> dict[str, list[int]]:
        """The topic partitions to read, given the broker's topics; unknown topics are errors."""
        if self.pattern is not None:
            rx = re.compile(self.pattern)
            return {t: list(ps) for t, ps in sorted(available.items()) if rx.fullmatch(t)}
        if self.assign:
            out: dict[str, list[int]] = {}
            for t, ps in self.assign.items():
                if t not in available:
                    raise OptionError(f"assign: topic {t!r} does not exist on the broker")
                missing = sorted(set(ps) - set(available[t]))
                if missing:
                    raise OptionError(f"assign: topic {t!r} has no partitions {missing}")
                out[t] = sorted(ps)
            return out
        missing_topics = [t for t in self.topics if t not in available]
        if missing_topics:
            raise OptionError(
                f"subscribe: topic(s) {', '.join(map(repr, missing_topics))} do not exist on the "
                f"broker (it has {', '.join(sorted(available)) or 'no topics'})"
            )
        return {t: list(available[t]) for t in self.topics}


@dataclass(frozen=True)
class ReadOptions:
    """Everything a batch or streaming read needs, parsed and validated."""

    bootstrap: str
    subscription: Subscription
    starting: Bound
    ending: Bound
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    fetch_max_bytes: int = _DEFAULT_FETCH_MAX_BYTES
    fail_on_data_loss: bool = True
    starting_strategy: str = "latest"
    request_timeout: float = 30.0
    isolation_level: int = 0
    """Kafka's IsolationLevel: 0 read_uncommitted (Spark's default), 1 read_committed."""
    event_time: bool = False
    """``eventTime``: the time bounds select records by their own timestamps, not positions."""
    remote: tuple[tuple[str, str], ...] = ()
    """``remoteStorage`` and its ``remoteStorage.*`` options as the object store takes them
    (``url``, ``s3.endpoint``, ...): read what the tier holds straight from the bucket."""

    @property
    def positional_window(self) -> bool:
        """Time bounds with Kafka's offsetsForTimes meaning (the read a disorder warning is for)."""
        return not self.event_time and (
            self.starting.kind in ("timestamp", "timestamps")
            or self.ending.kind in ("timestamp", "timestamps"))

    def event_window(self) -> tuple[int, int]:
        """[start, end) in epoch ms of an event-time read; an absent bound is open."""
        start = self.starting.timestamp if self.starting.kind == "timestamp" else 0
        end = self.ending.timestamp if self.ending.kind == "timestamp" else NO_END
        return start, end


@dataclass(frozen=True)
class WriteOptions:
    """Everything a write task needs."""

    bootstrap: str
    topic: str | None
    acks: int = -1
    compression: int = 0
    batch_bytes: int = _DEFAULT_BATCH_BYTES
    request_timeout: float = 30.0


def _bootstrap(options: Mapping[str, str]) -> str:
    for key in ("bootstrap.servers", "kafka.bootstrap.servers"):
        value = options.get(key)
        if value:
            return value.strip()
    raise OptionError(
        'option "bootstrap.servers" is required, e.g. .option("bootstrap.servers", "127.0.0.1:9092")'
    )


def _int(options: Mapping[str, str], key: str, minimum: int = 1) -> int | None:
    raw = options.get(key)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {key!r} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {key!r} must be >= {minimum}, got {value}")
    return value


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    v = raw.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise OptionError(f"option {key!r} must be true or false, got {raw!r}")


def parse_timestamp(text: str, what: str) -> int:
    """Epoch ms (digits) or ISO-8601 with a zone, as client.timeparse accepts."""
    try:
        return parse_time(text)
    except TimeParseError as e:
        raise OptionError(f"option {what!r}: {e}") from None


def _json_partitions(raw: str, key: str, *, times: bool) -> dict[str, dict[int, int]]:
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as e:
        raise OptionError(
            f'option {key!r} is not valid JSON ({e.msg}); expected e.g. {{"topic": {{"0": 23}}}}'
        ) from None
    if not isinstance(doc, dict):
        raise OptionError(f'option {key!r} must be a JSON object like {{"topic": {{"0": 23}}}}')
    out: dict[str, dict[int, int]] = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {key!r}: topic {topic!r} must map partitions to values")
        per: dict[int, int] = {}
        for p, v in parts.items():
            try:
                pid = int(p)
            except ValueError:
                raise OptionError(f"option {key!r}: partition {p!r} is not an integer") from None
            if times:
                if isinstance(v, bool) or not isinstance(v, (int, str)):
                    raise OptionError(f"option {key!r}: {topic}-{p} time {v!r} is not a time")
                per[pid] = v if isinstance(v, int) else parse_timestamp(v, key)
                if per[pid] < 0:
                    raise OptionError(f"option {key!r}: {topic}-{p} time {v} is negative")
            else:
                if isinstance(v, bool) or not isinstance(v, int) or v < -2:
                    raise OptionError(
                        f"option {key!r}: {topic}-{p} offset {v!r} must be an integer >= -2 "
                        "(-2 earliest, -1 latest)"
                    )
                per[pid] = v
        out[topic] = per
    return out


def _bound(options: Mapping[str, str], side: str, default: str) -> Bound:
    ts_key = f"{side}timestamp"
    by_ts_key = f"{side}offsetsbytimestamp"
    off_key = f"{side}offsets"
    if options.get(ts_key):
        return Bound("timestamp", timestamp=parse_timestamp(options[ts_key], ts_key))
    if options.get(by_ts_key):
        return Bound("timestamps", per_partition=_json_partitions(options[by_ts_key], by_ts_key, times=True))
    raw = (options.get(off_key) or default).strip()
    if raw.lower() in ("earliest", "latest"):
        return Bound(raw.lower())
    return Bound("offsets", per_partition=_json_partitions(raw, off_key, times=False))


def _subscription(options: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if options.get(k)]
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options subscribe, subscribePattern, assign is required"
            + (f" (got {', '.join(given)})" if given else "")
        )
    key = given[0]
    raw = options[key].strip()
    if key == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' names no topic")
        return Subscription(topics=topics)
    if key == "subscribepattern":
        try:
            re.compile(raw)
        except re.error as e:
            raise OptionError(f"option 'subscribePattern' is not a regular expression: {e}") from None
        return Subscription(pattern=raw)
    try:
        doc = json.loads(raw)
        assign = {str(t): tuple(int(p) for p in ps) for t, ps in doc.items()}
    except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
        raise OptionError(f'option \'assign\' must be JSON like {{"topic": [0, 1]}}, got {raw!r}') from None
    return Subscription(assign=assign)


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Validate and parse read options (keys case-insensitive, values strings)."""
    opts = {k.lower(): v for k, v in options.items()}
    if streaming and any(opts.get(k) for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")):
        raise OptionError("ending offsets/timestamps apply to batch reads only, not readStream")
    strategy = (opts.get("startingoffsetsbytimestampstrategy") or "latest").strip().lower()
    if strategy not in ("latest", "error"):
        raise OptionError(
            f"option 'startingOffsetsByTimestampStrategy' must be 'latest' or 'error', got {strategy!r}"
        )
    starting = _bound(opts, "starting", "latest" if streaming else "earliest")
    ending = _bound(opts, "ending", "latest")
    if ending.kind == "earliest":
        raise OptionError("endingOffsets may not be 'earliest' (the read would always be empty)")
    if not streaming and starting.kind == "latest":
        raise OptionError("startingOffsets may not be 'latest' for a batch read (always empty)")
    isolation = (opts.get("kafka.isolation.level") or "read_uncommitted").strip().lower()
    if isolation not in _ISOLATION:
        raise OptionError(
            f"option 'kafka.isolation.level' must be read_uncommitted (Spark's default) or "
            f"read_committed, got {isolation!r}")
    event_time = _bool(opts, "eventtime", False)
    if event_time:
        _check_event_time(starting, ending, streaming=streaming)
    remote = _remote(opts, streaming=streaming)
    fetch_max = _int(opts, "fetch.max.bytes", 1024) or _DEFAULT_FETCH_MAX_BYTES
    timeout_ms = _int(opts, "request.timeout.ms", 1) or 30000
    return ReadOptions(
        bootstrap=_bootstrap(opts),
        subscription=_subscription(opts),
        starting=starting,
        ending=ending,
        min_partitions=_int(opts, "minpartitions"),
        max_records_per_partition=_int(opts, "maxrecordsperpartition"),
        max_offsets_per_trigger=_int(opts, "maxoffsetspertrigger"),
        fetch_max_bytes=fetch_max,
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        starting_strategy=strategy,
        request_timeout=timeout_ms / 1000.0,
        isolation_level=_ISOLATION[isolation],
        event_time=event_time,
        remote=remote,
    )


_REMOTE = "remotestorage"
_REMOTE_KEYS = ("s3.endpoint", "s3.region", "s3.access.key.id", "s3.secret.access.key")


def _remote(opts: Mapping[str, str], *, streaming: bool) -> tuple[tuple[str, str], ...]:
    """``remoteStorage`` (the broker's rsm.config.url) and ``remoteStorage.<name>`` (its
    rsm.config.<name>) as the object store's options; unknown names are errors."""
    given = {k: v for k, v in opts.items() if k == _REMOTE or k.startswith(_REMOTE + ".")}
    if not given:
        return ()
    url = (given.pop(_REMOTE, "") or "").strip()
    if not url:
        raise OptionError(
            'option "remoteStorage" names the bucket the broker tiers to, e.g. '
            '.option("remoteStorage", "s3://bucket/prefix") (the broker\'s rsm.config.url); '
            f"got {', '.join(sorted(given))} without it")
    if not url.startswith(("file://", "s3://")):
        raise OptionError(f'option "remoteStorage" must be file:///a/dir or s3://bucket/prefix, '
                          f"got {url!r}")
    if streaming:
        raise OptionError('option "remoteStorage" applies to batch reads (spark.read) only')
    out = [("url", url)]
    for k, v in sorted(given.items()):
        name = k[len(_REMOTE) + 1:]
        if name not in _REMOTE_KEYS:
            raise OptionError(
                f"unknown option {k!r}; remoteStorage takes "
                + ", ".join(f"remoteStorage.{n}" for n in _REMOTE_KEYS))
        out.append((name, v.strip()))
    return tuple(out)


def _check_event_time(starting: Bound, ending: Bound, *, streaming: bool) -> None:
    """eventTime is a batch window given by times; anything else is refused, not guessed at."""
    if streaming:
        raise OptionError(
            'option "eventTime" applies to batch reads (spark.read) only: a stream reads each '
            "partition in offset order from its starting position (startingTimestamp keeps "
            "Kafka's positional meaning there); drop the option, or filter on the timestamp "
            "column downstream")
    for side, b in (("starting", starting), ("ending", ending)):
        if b.kind in ("offsets", "timestamps"):
            raise OptionError(
                f'option "eventTime" takes {side}Timestamp (one time for every partition), not '
                f"{side}Offsets or {side}OffsetsByTimestamp ({b.describe()}): an event-time "
                "window selects records by their timestamps, not by offsets")
    if starting.kind != "timestamp" and ending.kind != "timestamp":
        raise OptionError(
            'option "eventTime" needs startingTimestamp and/or endingTimestamp (the window '
            "start <= timestamp < end; an absent one leaves that side open)")


_ISOLATION = {"read_uncommitted": 0, "read_committed": 1}
_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate and parse write options."""
    opts = {k.lower(): v for k, v in options.items()}
    acks_raw = (opts.get("acks") or opts.get("kafka.acks") or "all").strip().lower()
    if acks_raw not in _ACKS:
        raise OptionError(f"option 'acks' must be all, -1, 1 or 0, got {acks_raw!r}")
    codec_raw = (
        opts.get("compression.type") or opts.get("kafka.compression.type") or "none"
    ).strip().lower()
    if codec_raw not in _CODECS:
        raise OptionError(
            f"option 'compression.type' must be one of {', '.join(_CODECS)}, got {codec_raw!r}"
        )
    timeout_ms = _int(opts, "request.timeout.ms", 1) or 30000
    topic = (opts.get("topic") or "").strip() or None
    return WriteOptions(
        bootstrap=_bootstrap(opts),
        topic=topic,
        acks=_ACKS[acks_raw],
        compression=_CODECS[codec_raw],
        batch_bytes=_int(opts, "batch.size", 1024) or _DEFAULT_BATCH_BYTES,
        request_timeout=timeout_ms / 1000.0,
    )
