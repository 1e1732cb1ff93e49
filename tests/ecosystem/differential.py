"""Differential testing against the real Apache Kafka: one request, two brokers, one answer.

:class:`Pair` sends the same request frame, at an explicit API version, to Chronolog
and to the reference Kafka node, decodes both answers with the same codec, turns them
into plain data and applies :data:`INTENDED`, the one table of what may legitimately
differ (each entry with its reason; docs/compatibility.md repeats it). What is left
must be equal, field by field; :func:`diff` names every field that is not.

Normalising never hides a value it does not understand: an alias keeps the pattern
(the same producer id twice is the same alias twice; -1 stays -1), a clock value is
accepted only inside the wall-clock window of the test run, and Kafka's transient
coordinator/leadership errors are retried on the broker that answers them, with the
final answer compared.
"""

from __future__ import annotations

import re
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocol import api
from protocol.messages import KafkaMessage
from storage.records import (
    CONTROL_MASK,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    crc_ok,
    decode_batch,
    iter_batches,
)

# What may differ between Chronolog and Kafka 4.1, field by field. The key is a glob over
# "<Api>.<path>" (arrays as "[]"); the value is (how, why). How:
#   drop   - the field is not compared;
#   alias  - per broker, each distinct value becomes "<name#n>" in order of first
#            appearance (negative values stay as they are), so the pattern is compared;
#   clock  - a value inside the run's wall-clock window becomes "<clock>" (the broker's
#            own time); any other value is compared as it is;
#   self   - the broker's own host / port becomes "<self>".
INTENDED: dict[str, tuple[str, str]] = {
    "*.throttle_time_ms": ("drop", "quota throttling depends on each broker's load"),
    "*.cluster_id": ("drop", "each cluster has its own random id"),
    "*.node_id": ("alias:node", "Kafka's test node is node.id=1, Chronolog's is its own broker.id"),
    "*.leader_id": ("alias:node", "the leader is the one node: its id, as node_id"),
    "Metadata.controller_id": ("alias:node", "the controller is the one node: its id, as node_id"),
    "Metadata.*.replica_nodes": ("alias:node", "the one node's id, as node_id"),
    "Metadata.*.isr_nodes": ("alias:node", "the one node's id, as node_id"),
    "JoinGroup.leader": ("alias:member", "the leader's generated member id"),
    "*.host": ("self", "each broker advertises its own address"),
    "*.port": ("self", "each broker advertises its own address"),
    "*.topic_id": ("alias:topic", "topic ids are random UUIDs"),
    "*.producer_id": ("alias:producer", "producer ids are allocated per cluster"),
    "*.member_id": ("alias:member", "member ids are generated: client id + a random UUID"),
    "*.log_append_time_ms": ("clock", "LogAppendTime is each broker's own clock"),
    "ListOffsets.*.timestamp": ("clock", "under LogAppendTime a record's time is the broker's clock"),
    "Fetch.*.records[].base_timestamp": ("clock", "LogAppendTime batches and transaction "
                                         "markers carry the broker's clock"),
    "Fetch.*.records[].max_timestamp": ("clock", "as base_timestamp"),
    "Fetch.*.records[].records[].timestamp": ("clock", "as base_timestamp"),
    "Fetch.*.records[].crc": ("drop", "the CRC covers the timestamps: compared where no clock "
                              "is involved through crc_valid and the other fields"),
    "Metadata.topics[].partitions": ("sort:partition_index", "Kafka lists a topic's partitions "
                                     "in its metadata image's hash order; the protocol sets none"),
    "DescribeConfigs.results[].configs": ("sort:name", "Kafka lists configs in hash-map order "
                                          "(also for ConfigurationKeys); the protocol sets none"),
    "CreateTopics.topics[].configs": ("sort:name", "as DescribeConfigs"),
    "DescribeConfigs.results[].configs[]": ("unlisted", "topic configs Chronolog does not "
                                            "implement are listed only when set on the topic "
                                            "(UNLISTED)"),
    "CreateTopics.topics[].configs[]": ("unlisted", "as DescribeConfigs"),
    "Produce.*.batch_index_error_message": ("bounds", "the allowed timestamp range printed is "
                                            "now - before.max.ms .. now + after.max.ms, each "
                                            "broker's own now"),
}

# Kafka 4.1's topic configs that Chronolog neither implements nor lists (DescribeConfigs and
# CreateTopics list them only when set on the topic): replication, remote (tiered) storage
# and compression-level settings that have no effect on a single node that stores batches
# as the producer compressed them.
UNLISTED = frozenset({
    "compression.gzip.level", "compression.lz4.level", "compression.type", "compression.zstd.level",
    "follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "min.insync.replicas", "preallocate",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable",
    "unclean.leader.election.enable",
})

# Requests both brokers answer, differently on purpose (checked as such by the tests).
BEHAVIOUR: dict[str, str] = {
    "time lookups after DeleteRecords": (
        "Kafka answers ListOffsets MAX_TIMESTAMP (-3) from a segment's maxTimestampSoFar, "
        "which still counts records deleted below the log start offset, so it can answer "
        "an offset below the log start; Chronolog answers only live records (or -1). No "
        "KAFKA- ticket found; franz-go's kfake copies Kafka here (twmb/franz-go#1432, "
        "#1433, which also describe the -1 Kafka answers for a time whose segment lost its "
        "only later records)"),
    "LogAppendTime never goes backwards": (
        "Chronolog stamps a LogAppendTime batch max(clock, largest timestamp in the log), so "
        "a topic switched to LogAppendTime after future CreateTimes keeps a time index that "
        "never decreases (docs/storage.md); Kafka stamps its clock. Normalised by Clock."),
    "segment.bytes below 1 MiB": (
        "Kafka 4.0 raised segment.bytes' minimum to 1 MiB (KIP-1030) and answers "
        "INVALID_CONFIG (40); Chronolog keeps the old minimum of 14 bytes, so small "
        "segments (its own tests, time-index demos) stay possible"),
}


class Clock:
    """The wall-clock window of a run: broker-assigned times fall inside it.

    Its top is now + 2 s, or the largest future CreateTime the run produced: Chronolog
    stamps LogAppendTime no lower than the largest timestamp its log holds
    (BEHAVIOUR["LogAppendTime never goes backwards"]), Kafka with its clock."""

    def __init__(self) -> None:
        self.start = int(time.time() * 1000) - 2_000
        self.future = 0

    def produced(self, ts: int) -> None:
        if ts >= self.start:
            self.future = max(self.future, ts)

    def inside(self, v: Any) -> bool:
        top = max(int(time.time() * 1000) + 2_000, self.future)
        return isinstance(v, int) and not isinstance(v, bool) and self.start <= v <= top


@dataclass
class Side:
    """One broker as the comparison sees it: a connection and its aliases."""

    name: str
    port: int
    sock: socket.socket | None = None
    next_id: int = 0
    aliases: dict[str, dict[Any, str]] = field(default_factory=dict)

    def connect(self) -> None:
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def call(self, key: int, version: int, body: dict[str, Any]) -> Any:
        assert self.sock is not None
        self.next_id += 1
        self.sock.sendall(api.encode_request(key, version, self.next_id, "chronolog-diff", body))
        (size,) = struct.unpack(">i", self._exact(4))
        frame = self._exact(size)
        cid, resp = api.decode_response(key, version, frame)
        assert cid == self.next_id, (cid, self.next_id)
        return resp

    def alias(self, kind: str, value: Any) -> Any:
        if isinstance(value, int) and value < 0:
            return value
        if isinstance(value, bytes) and value == bytes(16):
            return value
        table = self.aliases.setdefault(kind, {})
        return table.setdefault(value, f"<{kind}#{len(table)}>")

    def _exact(self, n: int) -> bytes:
        assert self.sock is not None
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"{self.name} closed the connection")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


Body = dict[str, Any] | Callable[[Side], dict[str, Any]]
API_NAMES = {int(k): v.name for k, v in api.API_VERSIONS.items()}

# Errors Kafka answers for a moment after a topic, a coordinator or a transaction
# changes (its metadata log and marker writes are asynchronous); asked again until
# they pass. COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
# NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION (right after CreateTopics),
# CONCURRENT_TRANSACTIONS.
TRANSIENT = {14, 15, 16, 6, 51}
FIND_COORDINATOR = 10


def plain(v: Any) -> Any:
    """A decoded message (a generated class or a construct Container) as dicts and
    lists (private keys dropped)."""
    if isinstance(v, KafkaMessage):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items() if not str(k).startswith("_")}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, memoryview):
        return bytes(v)
    return v


def batches(data: bytes | None) -> list[dict[str, Any]] | None:
    """Record batches as their header fields and decoded records."""
    if data is None:
        return None
    out = []
    for pos, h in iter_batches(data):
        d = h._asdict()
        d["timestamp_type"] = "LogAppendTime" if h.attributes & TIMESTAMP_TYPE_MASK else "CreateTime"
        d["transactional"] = bool(h.attributes & TRANSACTIONAL_MASK)
        d["control"] = bool(h.attributes & CONTROL_MASK)
        d["crc_valid"] = crc_ok(data, pos, h)
        d["records"] = [{"offset": r.offset, "timestamp": r.timestamp, "key": r.key,
                         "value": r.value, "headers": r.headers} for r in decode_batch(data, pos)]
        out.append(d)
    return out


def all_error_codes(v: Any) -> list[int]:
    if isinstance(v, dict):
        return [c for k, x in v.items()
                for c in ([x] if k.endswith("error_code") and isinstance(x, int) else all_error_codes(x))]
    if isinstance(v, list):
        return [c for x in v for c in all_error_codes(x)]
    return []


class Pair:
    """Chronolog and Kafka, asked the same thing."""

    def __init__(self, chronolog_port: int, kafka_port: int) -> None:
        self.sides = [Side("chronolog", chronolog_port), Side("kafka", kafka_port)]
        for s in self.sides:
            s.connect()
        self.clock = Clock()
        self.ask_last: tuple[Any, Any] = (None, None)

    def close(self) -> None:
        for s in self.sides:
            s.close()

    def ask(self, key: int, version: int, body: Body, *, retry: bool = True,
            settle: float = 10.0) -> tuple[Any, Any]:
        """Both raw answers (as plain data), each retried while it is transient. ``body``
        may be a function of the side, for what differs per broker (producer and member
        ids handed out earlier)."""
        answers = []
        for s in self.sides:
            deadline = time.monotonic() + settle
            while True:
                resp = plain(s.call(key, version, body(s) if callable(body) else body))
                if not retry or not TRANSIENT & set(all_error_codes(resp)) or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            if key == FIND_COORDINATOR and version >= 4:
                # v4 answers per key only: the top-level fields are not on the wire
                # (the decoder fills their defaults, which are no answer to compare).
                for name in ("error_code", "error_message", "node_id", "host", "port"):
                    resp.pop(name, None)
            answers.append(resp)
        self.ask_last = (answers[0], answers[1])
        return self.ask_last

    def compare(self, key: int, version: int, body: Body, **kw: Any) -> tuple[Any, Any, list[str]]:
        """Ask both; return both normalised answers and every difference left."""
        c, k = self.ask(key, version, body, **kw)
        api_name = API_NAMES[key]
        nc = self.normalise(self.sides[0], api_name, c)
        nk = self.normalise(self.sides[1], api_name, k)
        return nc, nk, diff(nc, nk, api_name)

    def normalise(self, side: Side, api_name: str, resp: Any) -> Any:
        return _normalise(side, self.clock, api_name, resp)


def _glob(pattern: str) -> re.Pattern[str]:
    """A table key as a regex: "*" is any text, everything else literal ("[]" too)."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")) + r"\Z")


_RULES = [(_glob(p), rule) for p, rule in INTENDED.items()]


def _rule(path: str) -> tuple[str, str] | None:
    for pattern, rule in _RULES:
        if pattern.match(path):
            return rule
    return None


def _normalise(side: Side, clock: Clock, path: str, v: Any) -> Any:
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            p = f"{path}.{k}"
            if k == "records" and isinstance(x, (bytes, type(None))) and path.startswith("Fetch"):
                x = batches(x)
            rule = _rule(p)
            if rule is not None and rule[0].startswith("sort:") and isinstance(x, list):
                by = rule[0].split(":", 1)[1]
                out[k] = _normalise(side, clock, p, sorted(x, key=lambda e: e[by]))
                continue
            if rule is None or isinstance(x, (dict, list)) and rule[0] in ("clock", "self", "bounds"):
                out[k] = _normalise(side, clock, p, x)
                continue
            how = rule[0]
            if how == "drop":
                continue
            if how == "bounds":
                out[k] = _BOUNDS.sub(lambda mo: _bounds(clock, mo), x) if isinstance(x, str) else x
                continue
            if how.startswith("alias:"):
                kind = how.split(":", 1)[1]
                out[k] = ([side.alias(kind, e) for e in x] if isinstance(x, list)
                          else side.alias(kind, x))
            elif how == "clock":
                out[k] = "<clock>" if clock.inside(x) else x
            elif how == "self":
                out[k] = "<self>" if x in ("127.0.0.1", "localhost", side.port) else x
            else:
                raise AssertionError(f"unknown rule {how} for {p}")
        return out
    if isinstance(v, list):
        item = f"{path}[]"
        if INTENDED.get(item, ("",))[0] == "unlisted":
            v = [x for x in v if not (x["name"] in UNLISTED and x["config_source"] != DYNAMIC_TOPIC_CONFIG)]
        return [_normalise(side, clock, item, x) for x in v]
    return v


DYNAMIC_TOPIC_CONFIG = 1
_BOUNDS = re.compile(r"within \[(-?\d+), (-?\d+)\]")


def _bounds(clock: Clock, mo: re.Match[str]) -> str:
    """'within [now - before, now + after]': each bound is named by its distance from the
    clock window, so the same settings print the same text on both brokers."""
    lo, hi = int(mo.group(1)), int(mo.group(2))
    now = int(time.time() * 1000)

    def rel(v: int) -> str:  # to the minute: the brokers' nows differ by milliseconds
        d = v - now
        return f"now{'+' if d >= 0 else '-'}{(abs(d) + 30_000) // 60_000}min"
    return f"within [{rel(lo)}, {rel(hi)}]"


def diff(a: Any, b: Any, path: str) -> list[str]:
    """Every field where Chronolog's (a) and Kafka's (b) normalised answers differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: chronolog={a.get(k, '<absent>')!r} kafka={b.get(k, '<absent>')!r}")
            else:
                out += diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: chronolog has {len(a)} items, kafka {len(b)}: chronolog={a!r} kafka={b!r}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in diff(x, y, f"{path}[{i}]")]
    if a != b:
        return [f"{path}: chronolog={a!r} kafka={b!r}"]
    return []
