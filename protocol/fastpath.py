"""Hand-written ``struct`` codecs for the hot messages, checked against the schema.

Hot, as ``bench/bench_protocol.py`` shows: ListOffsets request decode and response
encode (every timestamp lookup), ApiVersions (the no-op floor), Produce request
decode and Fetch response encode (every produce and fetch), and on the client side
ListOffsets and Produce request encode (a declaratively encoded 1 MB Produce
request copied its records several times: ~0.6 ms). Each function here
is registered for every supported version of its message.

Invariants:
- Output is byte-for-byte (encoders) and value-for-value (decoders) what the
  declarative codec in the API's module produces; ``tests/protocol/test_fastpath.py``
  checks that with hypothesis for every version. Anything these functions do not
  handle (a non-default tagged field) is delegated to the declarative codec.
- Decoders raise only ``struct.error``/``ValueError``/``IndexError``/``ConstructError``
  on bad input (``protocol.api.decode_request`` turns those into
  ``MalformedRequestError``); every length is checked, slices never silently
  come up short.
- Records are never copied on decode (a ``memoryview`` of the frame) and copied
  once on encode (the final ``b"".join``).

Each codec writes out its own topic -> partition loop on purpose: sharing it
through a per-partition callback costs a Python call per topic and partition
(~75 ns each, a few percent of a ListOffsets decode in ``bench/bench_protocol.py``).
The field-level readers and writers below are shared.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

from construct import Container

from protocol.wire import KafkaDecodeError, uvarint_bytes

_i8 = struct.Struct(">b").unpack_from
_i16 = struct.Struct(">h").unpack_from
_i32 = struct.Struct(">i").unpack_from
_i64 = struct.Struct(">q").unpack_from
_p16 = struct.Struct(">h").pack
_p32 = struct.Struct(">i").pack
_p64 = struct.Struct(">q").pack

Decoder = Callable[[Any], tuple[str | None, Container]]
Encoder = Callable[[int, Any], bytes]

# ----------------------------------------------------------------------------- readers


def _uvarint(buf: Any, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    for i in range(1, 5):
        b = buf[pos + i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + i + 1
        shift += 7
    raise KafkaDecodeError("uvarint longer than 5 bytes")


def _length(buf: Any, pos: int, flexible: bool, width: int) -> tuple[int, int]:
    """A length/count: compact uvarint-1, else int16/int32; -1 = null, below that is invalid."""
    if flexible:
        b = buf[pos]
        if b < 0x80:
            return b - 1, pos + 1
        n, pos = _uvarint(buf, pos)
        n -= 1
    elif width == 2:
        n = _i16(buf, pos)[0]
        pos += 2
    else:
        n = _i32(buf, pos)[0]
        pos += 4
    if n < -1:
        raise KafkaDecodeError(f"negative length {n}")
    return n, pos


def _take(buf: Any, pos: int, n: int) -> Any:
    end = pos + n
    if end > len(buf):
        raise KafkaDecodeError(f"wanted {n} bytes at {pos}, frame has {len(buf)}")
    return buf[pos:end]


def _string(buf: Any, pos: int, flexible: bool, nullable: bool) -> tuple[str | None, int]:
    n, pos = _length(buf, pos, flexible, 2)
    if n < 0:
        if not nullable:
            raise KafkaDecodeError("non-nullable string was null")
        return None, pos
    return str(_take(buf, pos, n), "utf-8"), pos + n


def _count(buf: Any, pos: int, flexible: bool) -> tuple[int, int]:
    """A non-nullable array's element count."""
    n, pos = _length(buf, pos, flexible, 4)
    if n < 0:
        raise KafkaDecodeError("non-nullable array was null")
    return n, pos


def _skip_tags(buf: Any, pos: int) -> int:
    if buf[pos] == 0:  # the usual case: no tagged fields
        return pos + 1
    n, pos = _uvarint(buf, pos)
    for _ in range(n):
        _, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        _take(buf, pos, size)
        pos += size
    return pos


def _header(frame: Any, flexible: bool) -> tuple[str | None, int]:
    client_id, pos = _string(frame, 8, False, True)
    if flexible:
        pos = _skip_tags(frame, pos)
    return client_id, pos


# ----------------------------------------------------------------------------- writers


def _wlen(n: int, flexible: bool, width: int) -> bytes:
    if flexible:
        return uvarint_bytes(n + 1)
    return _p16(n) if width == 2 else _p32(n)


def _wstring(value: str | None, flexible: bool) -> bytes:
    if value is None:
        raise ValueError("non-nullable string is None")
    data = value.encode("utf-8")
    if not flexible and len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes exceeds int16 length")
    return _wlen(len(data), flexible, 2) + data


def _records(parts: list[Any], head: bytes, records: Any, flexible: bool) -> None:
    """``head``, then a nullable records field: its length and the batches themselves
    as their own part (not copied until the frame's join)."""
    if records is None:
        parts.append(head + (b"\x00" if flexible else b"\xff\xff\xff\xff"))
    else:
        size = records.nbytes if isinstance(records, memoryview) else len(records)
        parts.append(head + _wlen(size, flexible, 4))
        parts.append(records)


def _start(correlation_id: int, header_tags: bool) -> list[Any]:
    """Parts of a response; slot 0 is reserved for the size, filled by :func:`_finish`."""
    return [b"", _p32(correlation_id), b"\x00"] if header_tags else [b"", _p32(correlation_id)]


def _sized(parts: list[Any]) -> list[Any]:
    """``parts`` with slot 0 set to the frame's size prefix: the frame in pieces."""
    parts[0] = _p32(sum(map(len, parts)))
    return parts


def _finish(parts: list[Any]) -> bytes:
    return b"".join(_sized(parts))


# ----------------------------------------------------------------------------- ApiVersions


def api_versions_request(version: int) -> Decoder:
    flexible = version >= 3

    def decode(frame: Any) -> tuple[str | None, Container]:
        client_id, pos = _header(frame, flexible)
        if not flexible:
            return client_id, Container(client_software_name="", client_software_version="")
        name, pos = _string(frame, pos, True, False)
        ver, pos = _string(frame, pos, True, False)
        _skip_tags(frame, pos)
        return client_id, Container(client_software_name=name, client_software_version=ver)

    return decode


_API_VERSIONS_TAGGED: tuple[tuple[str, Any], ...] = (
    ("supported_features", []),
    ("finalized_features_epoch", -1),
    ("finalized_features", []),
    ("zk_migration_ready", False),
)


def api_versions_response(version: int, fallback: Encoder) -> Encoder:
    flexible = version >= 3
    entry = "hhhx" if flexible else "hhh"

    def encode(correlation_id: int, body: Mapping[str, Any]) -> bytes:
        if flexible:
            for name, default in _API_VERSIONS_TAGGED:
                if name in body and body[name] != default:
                    return fallback(correlation_id, body)
        keys = body.get("api_keys", [])
        parts = _start(correlation_id, False)
        parts.append(_p16(body.get("error_code", 0)))
        parts.append(_wlen(len(keys), flexible, 4))
        tail = b"\x00" if flexible else b""
        # one pack for the whole table; "x" is a zero byte: each entry's empty tag section
        parts.append(struct.pack(
            ">" + entry * len(keys),
            *[v for k in keys for v in (k.get("api_key", 0), k.get("min_version", 0), k.get("max_version", 0))],
        ))
        if version >= 1:
            parts.append(_p32(body.get("throttle_time_ms", 0)))
        parts.append(tail)
        return _finish(parts)

    return encode


# ----------------------------------------------------------------------------- ListOffsets


def list_offsets_request(version: int) -> Decoder:
    flexible = version >= 6
    # one unpack per partition: index, [current leader epoch,] timestamp, [max num offsets]
    part = struct.Struct(">iq" if version < 4 else ">iiq") if version else struct.Struct(">iqi")
    part_unpack = part.unpack_from
    part_size = part.size

    def decode(frame: Any) -> tuple[str | None, Container]:
        client_id, pos = _header(frame, flexible)
        replica_id = _i32(frame, pos)[0]
        pos += 4
        isolation_level = 0
        if version >= 2:
            isolation_level = _i8(frame, pos)[0]
            pos += 1
        n, pos = _count(frame, pos, flexible)
        topics = []
        for _ in range(n):
            name, pos = _string(frame, pos, flexible, False)
            m, pos = _count(frame, pos, flexible)
            partitions = []
            for _ in range(m):
                fields = part_unpack(frame, pos)
                pos += part_size
                if version == 0:
                    index, timestamp, max_num = fields
                    epoch = -1
                elif version < 4:
                    index, timestamp = fields
                    epoch, max_num = -1, 1
                else:
                    index, epoch, timestamp = fields
                    max_num = 1
                if flexible:
                    pos = _skip_tags(frame, pos)
                partitions.append(Container(partition_index=index, current_leader_epoch=epoch,
                                            timestamp=timestamp, max_num_offsets=max_num))
            if flexible:
                pos = _skip_tags(frame, pos)
            topics.append(Container(name=name, partitions=partitions))
        timeout_ms = 0
        if version >= 10:
            timeout_ms = _i32(frame, pos)[0]
            pos += 4
        if flexible:
            pos = _skip_tags(frame, pos)
        return client_id, Container(replica_id=replica_id, isolation_level=isolation_level,
                                    topics=topics, timeout_ms=timeout_ms)

    return decode


def list_offsets_response(version: int) -> Encoder:
    flexible = version >= 6
    tail = b"\x00" if flexible else b""

    def encode(correlation_id: int, body: Mapping[str, Any]) -> bytes:
        parts = _start(correlation_id, flexible)
        if version >= 2:
            parts.append(_p32(body.get("throttle_time_ms", 0)))
        topics = body.get("topics", [])
        parts.append(_wlen(len(topics), flexible, 4))
        for t in topics:
            parts.append(_wstring(t.get("name", ""), flexible))
            partitions = t.get("partitions", [])
            parts.append(_wlen(len(partitions), flexible, 4))
            for p in partitions:
                head = struct.pack(">ih", p.get("partition_index", 0), p.get("error_code", 0))
                if version == 0:
                    olds = p.get("old_style_offsets", [])
                    parts.append(head + _p32(len(olds)) + b"".join(_p64(o) for o in olds))
                elif version < 4:
                    parts.append(head + struct.pack(">qq", p.get("timestamp", -1), p.get("offset", -1)))
                else:
                    parts.append(head + struct.pack(">qqi", p.get("timestamp", -1), p.get("offset", -1),
                                                    p.get("leader_epoch", -1)) + tail)
            parts.append(tail)
        parts.append(tail)
        return _finish(parts)

    return encode


# ----------------------------------------------------------------------------- Produce


def produce_request(version: int) -> Decoder:
    flexible = version >= 9

    def decode(frame: Any) -> tuple[str | None, Container]:
        view = frame if isinstance(frame, memoryview) else memoryview(frame)
        client_id, pos = _header(view, flexible)
        transactional_id, pos = _string(view, pos, flexible, True)
        acks = _i16(view, pos)[0]
        timeout_ms = _i32(view, pos + 2)[0]
        pos += 6
        n, pos = _count(view, pos, flexible)
        topic_data = []
        for _ in range(n):
            name, pos = _string(view, pos, flexible, False)
            m, pos = _count(view, pos, flexible)
            partition_data = []
            for _ in range(m):
                index = _i32(view, pos)[0]
                size, pos = _length(view, pos + 4, flexible, 4)
                records = None
                if size >= 0:
                    records = _take(view, pos, size)
                    pos += size
                if flexible:
                    pos = _skip_tags(view, pos)
                partition_data.append(Container(index=index, records=records))
            if flexible:
                pos = _skip_tags(view, pos)
            topic_data.append(Container(name=name, partition_data=partition_data))
        if flexible:
            pos = _skip_tags(view, pos)
        return client_id, Container(transactional_id=transactional_id, acks=acks,
                                    timeout_ms=timeout_ms, topic_data=topic_data)

    return decode


# ----------------------------------------------------------------------------- Fetch

_FETCH_PARTITION_TAGGED = (
    ("diverging_epoch", {"epoch": -1, "end_offset": -1}),
    ("current_leader", {"leader_id": -1, "leader_epoch": -1}),
    ("snapshot_id", {"end_offset": -1, "epoch": -1}),
)


def fetch_response(version: int, fallback: Encoder) -> Encoder:
    flexible = version >= 12
    tail = b"\x00" if flexible else b""

    def encode(correlation_id: int, body: Mapping[str, Any]) -> bytes:
        parts = _start(correlation_id, flexible)
        head = _p32(body.get("throttle_time_ms", 0))
        if version >= 7:
            head += struct.pack(">hi", body.get("error_code", 0), body.get("session_id", 0))
        parts.append(head)
        responses = body.get("responses", [])
        parts.append(_wlen(len(responses), flexible, 4))
        for t in responses:
            parts.append(_wstring(t.get("topic", ""), flexible))
            partitions = t.get("partitions", [])
            parts.append(_wlen(len(partitions), flexible, 4))
            for p in partitions:
                if flexible:
                    for name, default in _FETCH_PARTITION_TAGGED:
                        if name in p and p[name] != default:
                            return fallback(correlation_id, body)
                fixed = struct.pack(">ihqq", p.get("partition_index", 0), p.get("error_code", 0),
                                    p.get("high_watermark", 0), p.get("last_stable_offset", -1))
                if version >= 5:
                    fixed += _p64(p.get("log_start_offset", -1))
                aborted = p.get("aborted_transactions", [])
                if aborted is None:
                    fixed += b"\x00" if flexible else b"\xff\xff\xff\xff"
                else:
                    fixed += _wlen(len(aborted), flexible, 4) + b"".join(
                        struct.pack(">qq", a.get("producer_id", 0), a.get("first_offset", 0)) + tail for a in aborted
                    )
                if version >= 11:
                    fixed += _p32(p.get("preferred_read_replica", -1))
                records = p.get("records")
                _records(parts, fixed, records, flexible)
                parts.append(tail)
            parts.append(tail)
        parts.append(tail)
        return _finish(parts)

    return encode


# ----------------------------------------------------------------------------- client side
# The bundled client (and the lookup benchmark) pays for ListOffsets request
# encode and response decode on every lookup, and ApiVersions response decode
# on every connection; same rules as above: byte/value identical to the schema.

RequestEncoder = Callable[[int, str | None, Any], bytes]
RequestPartsEncoder = Callable[[int, str | None, Any], list[Any]]
ResponseDecoder = Callable[[Any], tuple[int, Container] | None]


def _request_header(api_key: int, version: int, correlation_id: int, client_id: str | None,
                    flexible: bool) -> list[Any]:
    if client_id is None:
        cid = b"\xff\xff"
    else:
        data = client_id.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError(f"client id of {len(data)} bytes exceeds int16 length")
        cid = _p16(len(data)) + data
    head = struct.pack(">hhi", api_key, version, correlation_id) + cid
    return [b"", head + b"\x00"] if flexible else [b"", head]


def list_offsets_request_encoder(version: int) -> RequestEncoder:
    flexible = version >= 6
    tail = b"\x00" if flexible else b""

    def encode(correlation_id: int, client_id: str | None, body: Mapping[str, Any]) -> bytes:
        parts = _request_header(2, version, correlation_id, client_id, flexible)
        head = _p32(body.get("replica_id", 0))
        if version >= 2:
            head += struct.pack(">b", body.get("isolation_level", 0))
        topics = body.get("topics", [])
        parts.append(head + _wlen(len(topics), flexible, 4))
        for t in topics:
            partitions = t.get("partitions", [])
            parts.append(_wstring(t.get("name", ""), flexible) + _wlen(len(partitions), flexible, 4))
            for p in partitions:
                if version == 0:
                    parts.append(struct.pack(">iqi", p.get("partition_index", 0), p.get("timestamp", 0),
                                             p.get("max_num_offsets", 1)))
                elif version < 4:
                    parts.append(struct.pack(">iq", p.get("partition_index", 0), p.get("timestamp", 0)))
                else:
                    parts.append(struct.pack(">iiq", p.get("partition_index", 0),
                                             p.get("current_leader_epoch", -1), p.get("timestamp", 0)) + tail)
            parts.append(tail)
        if version >= 10:
            parts.append(_p32(body.get("timeout_ms", 0)))
        parts.append(tail)
        return _finish(parts)

    return encode


def produce_request_parts(version: int) -> RequestPartsEncoder:
    """Produce requests as the client sends them: the frame as a list of pieces, each
    record batch one of them, never copied (a socket writes the list as it is; the
    declarative codec copies each batch several times)."""
    flexible = version >= 9
    tail = b"\x00" if flexible else b""
    null = b"\x00" if flexible else b"\xff\xff"

    def encode(correlation_id: int, client_id: str | None, body: Mapping[str, Any]) -> list[Any]:
        parts = _request_header(0, version, correlation_id, client_id, flexible)
        head = b""
        if version >= 3:
            tid = body.get("transactional_id")
            head = null if tid is None else _wstring(tid, flexible)
        topics = body.get("topic_data", [])
        parts.append(head + struct.pack(">hi", body.get("acks", 0), body.get("timeout_ms", 0))
                     + _wlen(len(topics), flexible, 4))
        for t in topics:
            partitions = t.get("partition_data", [])
            parts.append(_wstring(t.get("name", ""), flexible) + _wlen(len(partitions), flexible, 4))
            for p in partitions:
                records = p.get("records")
                _records(parts, _p32(p.get("index", 0)), records, flexible)
                parts.append(tail)
            parts.append(tail)
        parts.append(tail)
        return _sized(parts)

    return encode


def produce_request_encoder(version: int) -> RequestEncoder:
    """:func:`produce_request_parts` joined into one frame."""
    pieces = produce_request_parts(version)

    def encode(correlation_id: int, client_id: str | None, body: Mapping[str, Any]) -> bytes:
        return b"".join(pieces(correlation_id, client_id, body))

    return encode


def list_offsets_response_decoder(version: int) -> ResponseDecoder:
    flexible = version >= 6
    part = struct.Struct(">ihqq" if version < 4 else ">ihqqi") if version else struct.Struct(">ih")
    part_unpack = part.unpack_from
    part_size = part.size

    def decode(frame: Any) -> tuple[int, Container]:
        correlation_id = _i32(frame, 0)[0]
        pos = _skip_tags(frame, 4) if flexible else 4
        throttle = 0
        if version >= 2:
            throttle = _i32(frame, pos)[0]
            pos += 4
        n, pos = _count(frame, pos, flexible)
        topics = []
        for _ in range(n):
            name, pos = _string(frame, pos, flexible, False)
            m, pos = _count(frame, pos, flexible)
            partitions = []
            for _ in range(m):
                fields = part_unpack(frame, pos)
                pos += part_size
                olds: list[int] = []
                timestamp = offset = epoch = -1
                if version == 0:
                    index, error = fields
                    k, pos = _count(frame, pos, False)
                    _take(frame, pos, 8 * k)
                    olds = list(struct.unpack_from(f">{k}q", frame, pos))
                    pos += 8 * k
                elif version < 4:
                    index, error, timestamp, offset = fields
                else:
                    index, error, timestamp, offset, epoch = fields
                if flexible:
                    pos = _skip_tags(frame, pos)
                partitions.append(Container(partition_index=index, error_code=error, old_style_offsets=olds,
                                            timestamp=timestamp, offset=offset, leader_epoch=epoch))
            if flexible:
                pos = _skip_tags(frame, pos)
            topics.append(Container(name=name, partitions=partitions))
        if flexible:
            _skip_tags(frame, pos)
        return correlation_id, Container(throttle_time_ms=throttle, topics=topics)

    return decode


def api_versions_response_decoder(version: int) -> ResponseDecoder:
    """Header v0 always; returns None (use the schema) when the body carries tagged fields."""
    flexible = version >= 3

    def decode(frame: Any) -> tuple[int, Container] | None:
        correlation_id, error = struct.unpack_from(">ih", frame, 0)
        n, pos = _count(frame, 6, flexible)
        entry = 7 if flexible else 6
        _take(frame, pos, entry * n)
        keys = []
        for _ in range(n):
            k, lo, hi = struct.unpack_from(">hhh", frame, pos)
            pos += 6
            if flexible:
                if frame[pos] != 0:
                    return None
                pos += 1
            keys.append(Container(api_key=k, min_version=lo, max_version=hi))
        throttle = 0
        if version >= 1:
            throttle = _i32(frame, pos)[0]
            pos += 4
        if flexible and frame[pos] != 0:
            return None
        return correlation_id, Container(error_code=error, api_keys=keys, throttle_time_ms=throttle,
                                         supported_features=[], finalized_features_epoch=-1,
                                         finalized_features=[], zk_migration_ready=False)

    return decode
