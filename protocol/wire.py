"""Kafka's wire types as `construct` Constructs that also compile.

Every Kafka-specific type (nullable int16 strings, KIP-482 compact strings,
bytes and arrays, uvarints, tagged fields, structs with defaults) is a
``Construct`` subclass here with both an interpreted path (``_parse``/``_build``)
and a compiled path (``_emitparse``/``_emitbuild``). Both paths call the same
module-level helpers, so they cannot disagree. Fixed-width integers are
construct's own ``Int8sb`` … ``Int64sb``.

Invariants:
- A short read never returns fewer bytes silently: every helper checks lengths
  and raises ``StreamError`` (construct's own), so a truncated frame always
  fails loudly. Values that Kafka forbids (negative lengths other than -1, a
  null in a non-nullable field, a uvarint longer than 5 bytes) raise
  ``KafkaDecodeError``, also a ``ConstructError``.
- Kafka's default for a field missing from a dict being built is applied by
  :class:`KStruct`; an explicit ``None`` is kept as null (so null and "missing"
  stay distinct for nullable fields whose default is not null).
- Records/bytes read with a ``frame`` in the parse context are zero-copy
  ``memoryview`` slices of that frame (except inside tagged fields, which are
  parsed from their own buffer and so are copied).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from io import BytesIO
from typing import Any

from construct import Construct, ConstructError, Container, StreamError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class KafkaDecodeError(ConstructError):
    """Bytes that are well-formed construct input but violate Kafka's encoding rules."""


class KafkaEncodeError(ConstructError):
    """A value that cannot be encoded in the requested version (e.g. null where not nullable)."""


# --------------------------------------------------------------------------- helpers
# These are called both by the interpreted constructs and by the compiled code
# (the generated module imports them), so they are the single definition.


def read_exact(io: Any, n: int) -> bytes:
    data: bytes = io.read(n)
    if len(data) != n:
        raise StreamError(f"wanted {n} bytes, stream had {len(data)}")
    return data


def read_uvarint(io: Any) -> int:
    b = io.read(1)
    if b and b[0] < 0x80:
        return b[0]
    result = 0
    shift = 0
    for _ in range(5):
        if not b:
            raise StreamError("truncated uvarint")
        byte = b[0]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result
        shift += 7
        b = io.read(1)
    raise KafkaDecodeError("uvarint longer than 5 bytes")


def uvarint_bytes(n: int) -> bytes:
    if n < 0:
        raise KafkaEncodeError(f"uvarint cannot encode negative {n}")
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def write_uvarint(io: Any, n: int) -> int:
    io.write(uvarint_bytes(n))
    return n


def read_bool(io: Any) -> bool:
    return read_exact(io, 1) != b"\x00"


def write_bool(io: Any, value: Any) -> bool:
    io.write(b"\x01" if value else b"\x00")
    return bool(value)


def _null(what: str, nullable: bool) -> None:
    if not nullable:
        raise KafkaDecodeError(f"non-nullable {what} was null")


def read_string(io: Any, compact: bool, nullable: bool) -> str | None:
    n = read_uvarint(io) - 1 if compact else _I16.unpack(read_exact(io, 2))[0]
    if n < 0:
        if n != -1:
            raise KafkaDecodeError(f"negative string length {n}")
        _null("string", nullable)
        return None
    return read_exact(io, n).decode("utf-8")


def write_string(io: Any, value: str | None, compact: bool, nullable: bool) -> str | None:
    if value is None:
        if not nullable:
            raise KafkaEncodeError("non-nullable string is None")
        io.write(b"\x00" if compact else b"\xff\xff")
        return None
    data = value.encode("utf-8")
    if compact:
        io.write(uvarint_bytes(len(data) + 1))
    else:
        if len(data) > 0x7FFF:
            raise KafkaEncodeError(f"string of {len(data)} bytes exceeds int16 length")
        io.write(_I16.pack(len(data)))
    io.write(data)
    return value


def read_bytes(io: Any, this: Any, compact: bool, nullable: bool) -> bytes | memoryview | None:
    n = read_uvarint(io) - 1 if compact else _I32.unpack(read_exact(io, 4))[0]
    if n < 0:
        if n != -1:
            raise KafkaDecodeError(f"negative bytes length {n}")
        _null("bytes", nullable)
        return None
    frame = this.get("frame") if this is not None else None
    if frame is None:
        return read_exact(io, n)
    pos = io.tell()
    if pos + n > len(frame):
        raise StreamError(f"wanted {n} bytes at {pos}, frame has {len(frame)}")
    io.seek(n, 1)
    view: memoryview = frame[pos : pos + n]
    return view


def write_bytes(io: Any, value: Any, compact: bool, nullable: bool) -> Any:
    if value is None:
        if not nullable:
            raise KafkaEncodeError("non-nullable bytes is None")
        io.write(b"\x00" if compact else b"\xff\xff\xff\xff")
        return None
    n = len(value) if not isinstance(value, memoryview) else value.nbytes
    io.write(uvarint_bytes(n + 1) if compact else _I32.pack(n))
    io.write(value)
    return value


def read_array_len(io: Any, compact: bool, nullable: bool) -> int:
    """The element count, or -1 for a null array."""
    n = read_uvarint(io) - 1 if compact else _I32.unpack(read_exact(io, 4))[0]
    if n < 0:
        if n != -1:
            raise KafkaDecodeError(f"negative array length {n}")
        _null("array", nullable)
    return n


def write_array_len(io: Any, value: Any, compact: bool, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise KafkaEncodeError("non-nullable array is None")
        io.write(b"\x00" if compact else b"\xff\xff\xff\xff")
        return
    n = len(value)
    io.write(uvarint_bytes(n + 1) if compact else _I32.pack(n))


def read_uuid(io: Any) -> bytes:
    return read_exact(io, 16)


def write_uuid(io: Any, value: Any) -> Any:
    data = bytes(value)
    if len(data) != 16:
        raise KafkaEncodeError(f"uuid must be 16 bytes, got {len(data)}")
    io.write(data)
    return value


def skip_tag(io: Any) -> None:
    read_exact(io, read_uvarint(io))


def fresh(value: Any) -> Any:
    """A default value safe to hand out (mutable defaults are copied)."""
    if isinstance(value, dict):
        return Container([(k, fresh(v)) for k, v in value.items()])
    if isinstance(value, list):
        return [fresh(v) for v in value]
    return value


def as_mapping(obj: Any) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if isinstance(obj, Mapping):
        return obj
    raise KafkaEncodeError(f"expected a mapping for a struct, got {type(obj).__name__}")


def tagged_bytes(sub: Construct, value: Any, this: Any) -> bytes:
    buf = BytesIO()
    sub._build(value, buf, this, "(tagged)")
    return buf.getvalue()


_HELPERS = (
    "from io import BytesIO\n"
    "from construct import Container\n"
    "from protocol.wire import (read_exact, read_uvarint, uvarint_bytes, write_uvarint,"
    " read_bool, write_bool, read_string, write_string, read_bytes, write_bytes,"
    " read_array_len, write_array_len, read_uuid, write_uuid, skip_tag, fresh, as_mapping,"
    " KafkaEncodeError)\n"
)


def default_source(value: Any) -> str:
    """A Python expression that evaluates to a fresh copy of a default value."""
    if isinstance(value, dict):
        inner = ", ".join(f"({k!r}, {default_source(v)})" for k, v in value.items())
        return f"Container([{inner}])"
    if isinstance(value, list):
        return "[" + ", ".join(default_source(v) for v in value) + "]"
    return repr(value)


# --------------------------------------------------------------------------- constructs


class _Leaf(Construct):
    """A leaf type read by one helper call and written by another, the same calls in the
    interpreted path (``_parse``/``_build``) and, as source, in the compiled one.

    ``_read(io[, this], *args)`` and ``_write(io, obj, *args)``: ``args`` are the
    instance's settings (a sized leaf's ``compact`` and ``nullable``); ``this`` (the
    parse context, for a zero-copy slice of the frame) only where ``_reads_context``.
    """

    _read: Callable[..., Any]
    _write: Callable[..., Any]
    _reads_context = False

    def _args(self) -> tuple[Any, ...]:
        return ()

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        if self._reads_context:
            return self._read(stream, context, *self._args())
        return self._read(stream, *self._args())

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        return self._write(stream, obj, *self._args())

    def _emitparse(self, code: Any) -> str:
        code.append(_HELPERS)
        this = ["this"] if self._reads_context else []
        return _call(self._read, "io", *this, *self._args())

    def _emitbuild(self, code: Any) -> str:
        code.append(_HELPERS)
        return _call(self._write, "io", "obj", *self._args())


def _call(fn: Callable[..., Any], *names: Any) -> str:
    """The source of a call of ``fn``: strings are names, other arguments their repr."""
    return f"{fn.__name__}({', '.join(n if isinstance(n, str) else repr(n) for n in names)})"


class _Sized(_Leaf):
    """A length-prefixed leaf: int16/int32 length, or (compact) uvarint len+1."""

    def __init__(self, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.compact = compact
        self.nullable = nullable

    def _args(self) -> tuple[Any, ...]:
        return self.compact, self.nullable


class KBool(_Leaf):
    """Kafka boolean: one byte, 0 = false."""

    _read = staticmethod(read_bool)
    _write = staticmethod(write_bool)


class KUuid(_Leaf):
    """A 16-byte UUID kept as ``bytes`` (all-zero = Kafka's ZERO_UUID)."""

    _read = staticmethod(read_uuid)
    _write = staticmethod(write_uuid)


class KString(_Sized):
    """int16-length (or, compact, uvarint len+1) UTF-8 string; -1 / 0 = null when nullable."""

    _read = staticmethod(read_string)
    _write = staticmethod(write_string)


class KBytes(_Sized):
    """int32-length (or compact) bytes; ``records`` use it too. Zero-copy given a ``frame``."""

    _read = staticmethod(read_bytes)
    _write = staticmethod(write_bytes)
    _reads_context = True


class KArray(Construct):
    """int32-count (or compact uvarint count+1) array; -1 / 0 = null when nullable."""

    def __init__(self, subcon: Construct, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.subcon = subcon
        self.compact = compact
        self.nullable = nullable

    def _parse(self, stream: Any, context: Any, path: Any) -> list[Any] | None:
        n = read_array_len(stream, self.compact, self.nullable)
        if n < 0:
            return None
        sub = self.subcon
        return [sub._parsereport(stream, context, path) for _ in range(n)]

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        write_array_len(stream, obj, self.compact, self.nullable)
        if obj is not None:
            for item in obj:
                self.subcon._build(item, stream, context, path)
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_HELPERS)
        fname = f"parse_karray_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                n = read_array_len(io, {self.compact}, {self.nullable})
                if n < 0:
                    return None
                return [{self.subcon._compileparse(code)} for _ in range(n)]
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_HELPERS)
        fname = f"build_karray_{code.allocateId()}"
        code.append(f"""
            def {fname}(items, io, this):
                write_array_len(io, items, {self.compact}, {self.nullable})
                if items is not None:
                    for obj in items:
                        {self.subcon._compilebuild(code)}
                return items
        """)
        return f"{fname}(obj, io, this)"


class KStruct(Construct):
    """A Kafka struct for one version: positional fields, then (flexible) tagged fields.

    ``fields`` is ``[(name, construct | None, default)]``; a ``None`` construct
    means the field is absent from this version: parsing fills its default and
    building ignores it. ``tagged`` is ``None`` for non-flexible versions, else
    ``[(tag, name, construct, default)]``: unknown tags are skipped on parse,
    and a known tagged field is written only when it differs from its default
    (as Kafka does). Context is passed through unchanged: Kafka structs never
    refer to sibling fields, so the per-struct context of construct's ``Struct``
    would only cost time.
    """

    def __init__(
        self,
        fields: list[tuple[str, Construct | None, Any]],
        tagged: list[tuple[int, str, Construct, Any]] | None,
    ) -> None:
        super().__init__()
        self.fields = fields
        self.tagged = sorted(tagged, key=lambda t: t[0]) if tagged is not None else None
        self.flagbuildnone = True

    def _parse(self, stream: Any, context: Any, path: Any) -> Container:
        result = Container()
        for name, sub, default in self.fields:
            result[name] = fresh(default) if sub is None else sub._parsereport(stream, context, path)
        if self.tagged is not None:
            known = {}
            for tag, name, sub, default in self.tagged:
                result[name] = fresh(default)
                known[tag] = (name, sub)
            for _ in range(read_uvarint(stream)):
                tag = read_uvarint(stream)
                data = read_exact(stream, read_uvarint(stream))
                if tag in known:
                    name, sub = known[tag]
                    # a fresh stream: positions no longer match the frame, so no zero-copy here
                    result[name] = sub._parsereport(BytesIO(data), {}, path)
        return result

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        obj = as_mapping(obj)
        for name, sub, default in self.fields:
            if sub is not None:
                sub._build(obj[name] if name in obj else fresh(default), stream, context, path)
        if self.tagged is not None:
            out = []
            for tag, name, sub, default in self.tagged:
                if name in obj and obj[name] != default:
                    out.append((tag, tagged_bytes(sub, obj[name], context)))
            stream.write(uvarint_bytes(len(out)))
            for tag, data in out:
                stream.write(uvarint_bytes(tag))
                stream.write(uvarint_bytes(len(data)))
                stream.write(data)
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_HELPERS)
        fid = code.allocateId()
        fname = f"parse_kstruct_{fid}"
        lines = [f"def {fname}(io, this):", "    result = Container()"]
        for name, sub, default in self.fields:
            expr = default_source(default) if sub is None else sub._compileparse(code)
            lines.append(f"    result[{name!r}] = {expr}")
        if self.tagged is not None:
            for _tag, name, _sub, default in self.tagged:
                lines.append(f"    result[{name!r}] = {default_source(default)}")
            lines.append("    for _ in range(read_uvarint(io)):")
            lines.append("        tag = read_uvarint(io)")
            branch = "if"
            for tag, name, sub, _default in self.tagged:
                helper = f"parse_tag_{fid}_{tag}"
                code.append(f"""
                    def {helper}(io, this):
                        return {sub._compileparse(code)}
                """)
                lines.append(f"        {branch} tag == {tag}:")
                lines.append(
                    f"            result[{name!r}] = {helper}(BytesIO(read_exact(io, read_uvarint(io))), None)"
                )
                branch = "elif"
            if self.tagged:
                lines.append("        else:")
                lines.append("            skip_tag(io)")
            else:
                lines.append("        skip_tag(io)")
        lines.append("    return result")
        code.append("\n".join(lines))
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_HELPERS)
        fid = code.allocateId()
        fname = f"build_kstruct_{fid}"
        lines = [f"def {fname}(objdict, io, this):", "    objdict = as_mapping(objdict)"]
        for name, sub, default in self.fields:
            if sub is None:
                continue
            lines.append(
                f"    obj = objdict[{name!r}] if {name!r} in objdict else {default_source(default)}"
            )
            lines.append(f"    {sub._compilebuild(code)}")
        if self.tagged is not None:
            if not self.tagged:
                lines.append("    io.write(b'\\x00')")
            else:
                lines.append("    tags = []")
                for tag, name, sub, default in self.tagged:
                    helper = f"build_tag_{fid}_{tag}"
                    code.append(f"""
                        def {helper}(obj, this):
                            io = BytesIO()
                            {sub._compilebuild(code)}
                            return io.getvalue()
                    """)
                    lines.append(
                        f"    if {name!r} in objdict and objdict[{name!r}] != {default_source(default)}:"
                    )
                    lines.append(f"        tags.append(({tag}, {helper}(objdict[{name!r}], this)))")
                lines.append("    io.write(uvarint_bytes(len(tags)))")
                lines.append("    for tag, data in tags:")
                lines.append("        io.write(uvarint_bytes(tag))")
                lines.append("        io.write(uvarint_bytes(len(data)))")
                lines.append("        io.write(data)")
        lines.append("    return objdict")
        code.append("\n".join(lines))
        return f"{fname}(obj, io, this)"


class KNullableStruct(Construct):
    """A nullable struct field (not an array): one int8 marker, -1 = null, 1 = the struct follows.

    Kafka's generator writes nullable nested structs this way in every version
    (e.g. ConsumerGroupHeartbeatResponse.Assignment); any negative marker reads as null.
    """

    def __init__(self, subcon: Construct) -> None:
        super().__init__()
        self.subcon = subcon
        self.flagbuildnone = True

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        marker = read_exact(stream, 1)[0]
        if marker >= 0x80:
            return None
        return self.subcon._parsereport(stream, context, path)

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        if obj is None:
            stream.write(b"\xff")
            return None
        stream.write(b"\x01")
        self.subcon._build(obj, stream, context, path)
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_HELPERS)
        fname = f"parse_knullable_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                if read_exact(io, 1)[0] >= 0x80:
                    return None
                return {self.subcon._compileparse(code)}
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_HELPERS)
        fname = f"build_knullable_{code.allocateId()}"
        code.append(f"""
            def {fname}(obj, io, this):
                if obj is None:
                    io.write(b'\\xff')
                    return None
                io.write(b'\\x01')
                {self.subcon._compilebuild(code)}
                return obj
        """)
        return f"{fname}(obj, io, this)"
