"""Code generated from the one declaration per message: typed classes and per-version codecs.

Like franz-go's ``kmsg`` or Kafka's message generator, everything here is
derived from the ``message(...)``/``F(...)`` declarations in the per-API modules:

- :func:`classes_source` writes ``protocol/messages.py``: one ``msgspec.Struct``
  per message and per nested struct, every field of every version with its Kafka
  default, keyword-only (an unknown or misspelt field is a ``TypeError`` when the
  message is built, and a mypy error in checked code). It is generated at build
  time (``make generate``) so that mypy sees the classes; a test fails when the
  committed file differs from what the declarations generate.
- :func:`codec_source` writes the decoder and encoder of one message in one
  version as straight-line Python (fixed-width runs packed with one ``struct``
  call, flexible/tagged rules resolved at generation time); :func:`codec`
  compiles it on first use and caches it, so importing costs nothing and each
  (message, version) pays ~1 ms once (``protocol.api.compile_all`` pays it up front).

Invariants:
- Generated codecs produce exactly the bytes, and decode exactly the values, of
  the declarative construct codec (``protocol.schema``): tests/protocol/
  test_generated.py checks every API, every version, both directions, with hypothesis.
- Decoded ``bytes``/``records`` are zero-copy ``memoryview`` slices of the frame
  (except inside tagged fields, decoded from their own copy, as construct does);
  encoded ``bytes``/``records`` are parts of their own, copied only by the final join.
- Every length is checked: a short or damaged frame raises ``IndexError``,
  ``struct.error``, ``KafkaDecodeError`` or (a truncated or over-5-byte uvarint,
  from the one varint module ``protocol.primitives``) ``VarintError``, never a
  silently short value.
"""

from __future__ import annotations

import keyword
import struct
from collections.abc import Callable, Mapping
from typing import Any

from protocol import messages
from protocol.primitives import read_uvarint, uvarint_bytes
from protocol.schema import Field, Message, StructType
from protocol.wire import KafkaDecodeError, KafkaEncodeError

_FIXED = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "float64": "d", "bool": "?", "uuid": "16s"}
_PY_TYPES = {"int8": "int", "int16": "int", "int32": "int", "int64": "int", "float64": "float",
             "bool": "bool", "string": "str", "bytes": "Buffer", "records": "Buffer", "uuid": "bytes"}


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


# ----------------------------------------------------------------------------- class names


def struct_names(msg: Message) -> dict[int, str]:
    """``id(StructType)`` -> class name, for every nested struct of ``msg`` (parent name + field)."""
    names: dict[int, str] = {}

    def walk(fields: tuple[Field, ...], prefix: str) -> None:
        for f in fields:
            if isinstance(f.type, StructType):
                name = prefix + _camel(f.name)
                names[id(f.type)] = name
                walk(f.type.fields, name)

    walk(msg.fields, msg.name)
    return names


# ----------------------------------------------------------------------------- classes


def _annotation(f: Field, names: dict[int, str]) -> str:
    element = f.element
    base = names[id(element)] if isinstance(element, StructType) else _PY_TYPES[element]
    text = f"list[{base}]" if f.is_array else base
    if f.nullable is not None or f.default is None:
        text += " | None"
    return text


def _class_default(f: Field, names: dict[int, str]) -> str:
    default = f.default
    if f.is_array:
        if default is None:
            return "None"
        assert default == [], f"{f.name}: only empty list defaults are supported"
        return "msgspec.field(default_factory=list)"
    if isinstance(f.type, StructType):
        if default is None:
            return "None"
        return f"msgspec.field(default_factory={names[id(f.type)]})"
    return repr(default)


def _class_blocks(fields: tuple[Field, ...], name: str, doc: str, names: dict[int, str],
                  seen: set[str], blocks: list[list[str]]) -> None:
    """The class of one struct, after the classes of its nested structs."""
    if name in seen:
        raise ValueError(f"two generated classes named {name}")
    seen.add(name)
    for f in fields:
        if isinstance(f.type, StructType):
            _class_blocks(f.type.fields, names[id(f.type)], f"{name}.{f.name}", names, seen, blocks)
    lines = ["", "", f"class {name}(KafkaMessage, kw_only=True):", f'    """{doc}"""', ""]
    for f in fields:
        if keyword.iskeyword(f.name) or f.name.startswith("_"):
            raise ValueError(f"field name {f.name!r} cannot be an attribute")
        lines.append(f"    {f.name}: {_annotation(f, names)} = {_class_default(f, names)}")
    blocks.append(lines)


def classes_source(all_messages: list[Message]) -> str:
    """The source of ``protocol/messages.py``."""
    out = [
        '"""Typed Kafka messages, GENERATED by ``protocol/codegen.py`` from the declarations in',
        "``protocol/<api>.py``: do not edit (``make generate`` rewrites it; a test fails when stale).",
        "",
        "Every field of every version, with its Kafka default; construct with keywords only.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from collections.abc import Mapping",
        "from typing import TYPE_CHECKING, Any",
        "",
        "import msgspec",
        "",
        "Buffer = bytes | bytearray | memoryview",
        "_struct_eq = msgspec.Struct.__eq__",
        "",
        "",
        "class KafkaMessage(msgspec.Struct, kw_only=True):",
        '    """Base of every generated message. Read fields as attributes; the mapping-style',
        "    reads below exist only for untyped callers (tests, tools) and mypy does not see them.\"\"\"",
        "",
        "    if not TYPE_CHECKING:",
        "",
        "        def __getitem__(self, name: str) -> Any:",
        "            try:",
        "                return getattr(self, name)",
        "            except AttributeError:",
        "                raise KeyError(name) from None",
        "",
        "        def __setitem__(self, name: str, value: Any) -> None:",
        "            setattr(self, name, value)",
        "",
        "        def __contains__(self, name: object) -> bool:",
        "            return name in self.__struct_fields__",
        "",
        "        def get(self, name: str, default: Any = None) -> Any:",
        "            return getattr(self, name, default)",
        "",
        "        def keys(self) -> tuple[str, ...]:",
        "            return self.__struct_fields__",
        "",
        "        def items(self) -> list[tuple[str, Any]]:",
        "            return [(n, getattr(self, n)) for n in self.__struct_fields__]",
        "",
        "        def __eq__(self, other: object) -> bool:",
        "            if isinstance(other, Mapping):  # a message equals the dict of its fields",
        "                return dict(self.items()) == dict(other)",
        "            return _struct_eq(self, other)",
        "",
        "        def __ne__(self, other: object) -> bool:",
        "            equal = self.__eq__(other)",
        "            return equal if equal is NotImplemented else not equal",
        "",
    ]
    seen: set[str] = set()
    for msg in all_messages:
        blocks: list[list[str]] = []
        _class_blocks(msg.fields, msg.name, f"{msg.name}, all versions.", struct_names(msg), seen, blocks)
        for block in blocks:
            out.extend(block)
    out.append("")
    return "\n".join(out)


# ----------------------------------------------------------------------------- runtime helpers
# Called by the generated codecs (each is one definition, shared by every message).

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_p16 = _I16.pack
_p32 = _I32.pack
_u16 = _I16.unpack_from
_u32 = _I32.unpack_from


def _short(pos: int, n: int, size: int) -> KafkaDecodeError:
    return KafkaDecodeError(f"wanted {n} bytes at {pos}, frame has {size}")


def _len(buf: Any, pos: int, compact: bool, width: int, nullable: bool, what: str) -> tuple[int, int]:
    if compact:
        b = buf[pos]
        if b < 0x80:
            n, pos = b - 1, pos + 1
        else:
            n, pos = read_uvarint(buf, pos, len(buf), 5)
            n -= 1
    elif width == 2:
        n, pos = _u16(buf, pos)[0], pos + 2
    else:
        n, pos = _u32(buf, pos)[0], pos + 4
    if n < 0:
        if n != -1:
            raise KafkaDecodeError(f"negative {what} length {n}")
        if not nullable:
            raise KafkaDecodeError(f"non-nullable {what} was null")
    return n, pos


def _r_str(buf: Any, pos: int, compact: bool, nullable: bool) -> tuple[str | None, int]:
    n, pos = _len(buf, pos, compact, 2, nullable, "string")
    if n < 0:
        return None, pos
    end = pos + n
    if end > len(buf):
        raise _short(pos, n, len(buf))
    return str(buf[pos:end], "utf-8"), end


def _r_bytes(buf: Any, pos: int, compact: bool, nullable: bool) -> tuple[Any, int]:
    n, pos = _len(buf, pos, compact, 4, nullable, "bytes")
    if n < 0:
        return None, pos
    end = pos + n
    if end > len(buf):
        raise _short(pos, n, len(buf))
    return buf[pos:end], end


def _r_count(buf: Any, pos: int, compact: bool, nullable: bool) -> tuple[int, int]:
    return _len(buf, pos, compact, 4, nullable, "array")


def _r_tags(buf: Any, pos: int) -> tuple[list[tuple[int, bytes]], int]:
    """The tag section at ``pos`` (its first byte known non-zero): [(tag, data)] and the end."""
    n, pos = read_uvarint(buf, pos, len(buf), 5)
    out = []
    for _ in range(n):
        tag, pos = read_uvarint(buf, pos, len(buf), 5)
        size, pos = read_uvarint(buf, pos, len(buf), 5)
        end = pos + size
        if end > len(buf):
            raise _short(pos, size, len(buf))
        out.append((tag, bytes(buf[pos:end])))
        pos = end
    return out, pos


def _w_str(value: str | None, compact: bool, nullable: bool) -> bytes:
    if value is None:
        if not nullable:
            raise KafkaEncodeError("non-nullable string is None")
        return b"\x00" if compact else b"\xff\xff"
    data = value.encode("utf-8")
    if compact:
        return uvarint_bytes(len(data) + 1) + data
    if len(data) > 0x7FFF:
        raise KafkaEncodeError(f"string of {len(data)} bytes exceeds int16 length")
    return _p16(len(data)) + data


def _w_bytes_len(value: Any, compact: bool, nullable: bool) -> bytes:
    """The length prefix of a bytes field (the bytes themselves go in a part of their own)."""
    if value is None:
        if not nullable:
            raise KafkaEncodeError("non-nullable bytes is None")
        return b"\x00" if compact else b"\xff\xff\xff\xff"
    n = len(value) if type(value) is bytes else memoryview(value).nbytes  # not a buffer: TypeError
    return uvarint_bytes(n + 1) if compact else _p32(n)


def _w_count(value: Any, compact: bool, nullable: bool) -> bytes:
    if value is None:
        if not nullable:
            raise KafkaEncodeError("non-nullable array is None")
        return b"\x00" if compact else b"\xff\xff\xff\xff"
    return uvarint_bytes(len(value) + 1) if compact else _p32(len(value))


def _w_uuid(value: Any) -> bytes:
    data = bytes(value)
    if len(data) != 16:
        raise KafkaEncodeError(f"uuid must be 16 bytes, got {len(data)}")
    return data


def _w_tags(tags: list[tuple[int, bytes]]) -> bytes:
    out = [uvarint_bytes(len(tags))]
    for tag, data in tags:
        out.append(uvarint_bytes(tag))
        out.append(uvarint_bytes(len(data)))
        out.append(data)
    return b"".join(out)


def _null_struct() -> None:
    raise KafkaEncodeError("non-nullable struct is None")


_RUNTIME: dict[str, Any] = {
    "struct": struct, "uvarint_bytes": uvarint_bytes,
    "KafkaDecodeError": KafkaDecodeError, "KafkaEncodeError": KafkaEncodeError,
    "_short": _short, "_r_str": _r_str, "_r_bytes": _r_bytes, "_r_count": _r_count, "_r_tags": _r_tags,
    "_w_str": _w_str, "_w_bytes_len": _w_bytes_len, "_w_count": _w_count, "_w_uuid": _w_uuid,
    "_w_tags": _w_tags, "_null_struct": _null_struct,
}


# ----------------------------------------------------------------------------- codec generator


class _Gen:
    """Emits the source of one message's decoder and encoder for one version."""

    def __init__(self, msg: Message, version: int, flexible: bool) -> None:
        self.msg = msg
        self.version = version
        self.flexible = flexible
        self.names = struct_names(msg)
        self.consts: dict[str, str] = {}  # source -> name
        self.funcs: list[list[str]] = []
        self.n = 0

    def var(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def const(self, source: str) -> str:
        name = self.consts.get(source)
        if name is None:
            name = self.consts[source] = f"_K{len(self.consts)}"
        return name

    def positional(self, fields: tuple[Field, ...]) -> list[Field]:
        return [f for f in fields if f.tag is None and f.present(self.version)]

    def tagged(self, fields: tuple[Field, ...]) -> list[Field]:
        if not self.flexible:
            return []
        return sorted((f for f in fields if f.tag is not None and f.present(self.version)),
                      key=lambda f: f.tag or 0)

    def cls(self, t: StructType) -> str:
        return self.names[id(t)]

    # ------------------------------------------------------------------ decode

    def dec_struct(self, fields: tuple[Field, ...], cls: str, out: str, lines: list[str], ind: str) -> None:
        values: list[tuple[str, str]] = []
        run: list[tuple[str, str]] = []

        def flush() -> None:
            if not run:
                return
            fmt = ">" + "".join(code for _, code in run)
            unpack = self.const(f"struct.Struct({fmt!r}).unpack_from")
            names = [self.var("v") for _ in run]
            target = ", ".join(names) + ("," if len(names) == 1 else "")
            lines.append(f"{ind}{target} = {unpack}(buf, pos)")
            lines.append(f"{ind}pos += {struct.calcsize(fmt)}")
            values.extend((name, v) for (name, _), v in zip(run, names, strict=True))
            run.clear()

        for f in self.positional(fields):
            if isinstance(f.type, str) and f.type in _FIXED:
                run.append((f.name, _FIXED[f.type]))
                continue
            flush()
            values.append((f.name, self.dec_field(f, lines, ind)))
        flush()
        tagged = self.tagged(fields)
        if self.flexible:
            tag_vars = []
            for f in tagged:
                v = self.var("t")
                lines.append(f"{ind}{v} = {self.const(self.default_source(f))}()")
                tag_vars.append((f, v))
                values.append((f.name, v))
            lines.append(f"{ind}if buf[pos] == 0:")
            lines.append(f"{ind}    pos += 1")
            lines.append(f"{ind}else:")
            tags = self.var("tags")
            lines.append(f"{ind}    {tags}, pos = _r_tags(buf, pos)")
            if tag_vars:
                lines.append(f"{ind}    for tag, data in {tags}:")
                branch = "if"
                for f, v in tag_vars:
                    lines.append(f"{ind}        {branch} tag == {f.tag}:")
                    lines.append(f"{ind}            {v} = {self.tag_decoder(f)}(data)")
                    branch = "elif"
        args = ", ".join(f"{name}={v}" for name, v in values)
        lines.append(f"{ind}{out} = {cls}({args})")

    def default_source(self, f: Field) -> str:
        """A zero-argument callable's source returning a fresh default for ``f``."""
        if f.is_array:
            return "list" if f.default is not None else "(lambda: None)"
        if isinstance(f.type, StructType):
            return self.cls(f.type) if f.default is not None else "(lambda: None)"
        return f"(lambda: {f.default!r})"

    def tag_decoder(self, f: Field) -> str:
        name = self.var("_tagdec")
        body: list[str] = []
        v = self.dec_field(f, body, "    ")
        self.funcs.append([f"def {name}(buf):", "    pos = 0", *body, f"    return {v}"])
        return name

    def dec_field(self, f: Field, lines: list[str], ind: str) -> str:
        flex = self.flexible
        nullable = f.nullable_in(self.version)
        v = self.var("v")
        if f.is_array:
            element = f.element
            n = self.var("n")
            lines.append(f"{ind}{n}, pos = _r_count(buf, pos, {flex}, {nullable})")
            lines.append(f"{ind}if {n} < 0:")
            lines.append(f"{ind}    {v} = None")
            lines.append(f"{ind}else:")
            inner = ind + "    "
            if isinstance(element, str) and element in _FIXED and element != "uuid":
                code = _FIXED[element]
                lines.append(f"{inner}{v} = list(struct.unpack_from('>%d{code}' % {n}, buf, pos))")
                lines.append(f"{inner}pos += {struct.calcsize('>' + code)} * {n}")
                return v
            lines.append(f"{inner}{v} = []")
            lines.append(f"{inner}for _ in range({n}):")
            item_ind = inner + "    "
            if isinstance(element, StructType):
                e = self.var("e")
                self.dec_struct(element.fields, self.cls(element), e, lines, item_ind)
            else:
                e = self.dec_scalar(element, False, lines, item_ind)
            lines.append(f"{item_ind}{v}.append({e})")
            return v
        t = f.type
        if isinstance(t, StructType):
            if nullable:
                lines.append(f"{ind}pos += 1")
                lines.append(f"{ind}if buf[pos - 1] >= 0x80:")
                lines.append(f"{ind}    {v} = None")
                lines.append(f"{ind}else:")
                self.dec_struct(t.fields, self.cls(t), v, lines, ind + "    ")
            else:
                self.dec_struct(t.fields, self.cls(t), v, lines, ind)
            return v
        return self.dec_scalar(t, nullable, lines, ind)

    def dec_scalar(self, t: str, nullable: bool, lines: list[str], ind: str) -> str:
        v = self.var("v")
        if t in _FIXED:
            fmt = ">" + _FIXED[t]
            lines.append(f"{ind}{v}, = {self.const(f'struct.Struct({fmt!r}).unpack_from')}(buf, pos)")
            lines.append(f"{ind}pos += {struct.calcsize(fmt)}")
        elif t == "string":
            lines.append(f"{ind}{v}, pos = _r_str(buf, pos, {self.flexible}, {nullable})")
        else:  # bytes, records
            lines.append(f"{ind}{v}, pos = _r_bytes(buf, pos, {self.flexible}, {nullable})")
        return v

    # ------------------------------------------------------------------ encode

    def fixed_struct_format(self, fields: tuple[Field, ...]) -> str | None:
        """The struct format of a struct whose whole encoding is fixed-width (or None)."""
        fmt = ""
        for f in self.positional(fields):
            if not isinstance(f.type, str) or f.type not in _FIXED or f.type == "uuid":
                return None
            fmt += _FIXED[f.type]
        if self.tagged(fields):
            return None
        return fmt + ("x" if self.flexible else "")

    def enc_struct(self, fields: tuple[Field, ...], o: str, lines: list[str], ind: str,
                   tag_section: bool = True) -> None:
        segs: list[str] = []
        run: list[tuple[str, str]] = []

        def flush_run() -> None:
            if run:
                fmt = ">" + "".join(code for code, _ in run)
                pack = self.const(f"struct.Struct({fmt!r}).pack")
                segs.append(f"{pack}({', '.join(expr for _, expr in run)})")
                run.clear()

        def flush() -> None:
            flush_run()
            if segs:
                lines.append(f"{ind}parts.append({' + '.join(segs)})")
                segs.clear()

        flex = self.flexible
        for f in self.positional(fields):
            expr = f"{o}.{f.name}"
            nullable = f.nullable_in(self.version)
            t = f.type
            if isinstance(t, str) and t in _FIXED and t != "uuid" and not f.is_array:
                run.append((_FIXED[t], expr))
                continue
            flush_run()
            if f.is_array:
                segs.append(f"_w_count({expr}, {flex}, {nullable})")
                flush()
                self.enc_array(f, expr, nullable, lines, ind)
            elif isinstance(t, StructType):
                flush()
                x = self.var("x")
                lines.append(f"{ind}{x} = {expr}")
                if nullable:
                    lines.append(f"{ind}if {x} is None:")
                    lines.append(f"{ind}    parts.append(b'\\xff')")
                    lines.append(f"{ind}else:")
                    lines.append(f"{ind}    parts.append(b'\\x01')")
                    self.enc_struct(t.fields, x, lines, ind + "    ")
                else:
                    lines.append(f"{ind}if {x} is None:")
                    lines.append(f"{ind}    _null_struct()")
                    self.enc_struct(t.fields, x, lines, ind)
            elif t == "string":
                segs.append(f"_w_str({expr}, {flex}, {nullable})")
            elif t == "uuid":
                segs.append(f"_w_uuid({expr})")
            else:  # bytes, records: the value is a part of its own, never copied here
                x = self.var("x")
                flush()
                lines.append(f"{ind}{x} = {expr}")
                lines.append(f"{ind}parts.append(_w_bytes_len({x}, {flex}, {nullable}))")
                lines.append(f"{ind}if {x} is not None:")
                lines.append(f"{ind}    parts.append({x})")
        flush_run()
        if not flex or not tag_section:
            flush()
            return
        tagged = self.tagged(fields)
        if not tagged:
            segs.append("b'\\x00'")
            flush()
            return
        flush()
        tags = self.var("tags")
        lines.append(f"{ind}{tags} = []")
        for f in tagged:
            default = self.const(f"{self.default_source(f)}()")
            lines.append(f"{ind}if {o}.{f.name} != {default}:")
            lines.append(f"{ind}    {tags}.append(({f.tag}, {self.tag_encoder(f)}({o}.{f.name})))")
        lines.append(f"{ind}parts.append(_w_tags({tags}) if {tags} else b'\\x00')")

    def tag_encoder(self, f: Field) -> str:
        name = self.var("_tagenc")
        body: list[str] = []
        self.enc_struct((Field(f.name, f.type, f.versions, f.nullable),), "holder", body, "    ", False)
        self.funcs.append([f"def {name}(value):", "    parts = []", f"    holder = _Holder({f.name}=value)",
                           *body, "    return b''.join(parts)"])
        return name

    def enc_array(self, f: Field, expr: str, nullable: bool, lines: list[str], ind: str) -> None:
        flex = self.flexible
        a = self.var("a")
        lines.append(f"{ind}{a} = {expr}")
        lines.append(f"{ind}if {a}:")
        inner = ind + "    "
        element = f.element
        if isinstance(element, StructType):
            fmt = self.fixed_struct_format(element.fields)
            if fmt is not None:
                # the whole array in one pack ("x" is each element's empty tag section)
                e = self.var("e")
                fields = ", ".join(f"{e}.{g.name}" for g in self.positional(element.fields))
                one = self.const(f"struct.Struct('>' + {fmt!r}).pack")
                lines.append(f"{inner}if len({a}) == 1:")
                lines.append(f"{inner}    {e} = {a}[0]")
                lines.append(f"{inner}    parts.append({one}({fields}))")
                lines.append(f"{inner}else:")
                lines.append(f"{inner}    parts.append(struct.pack('>' + {fmt!r} * len({a}),"
                             f" *[y for {e} in {a} for y in ({fields},)]))")
                return
            e = self.var("e")
            lines.append(f"{inner}for {e} in {a}:")
            self.enc_struct(element.fields, e, lines, inner + "    ")
            return
        if element in _FIXED and element != "uuid":
            lines.append(f"{inner}parts.append(struct.pack('>%d{_FIXED[element]}' % len({a}), *{a}))")
            return
        e = self.var("e")
        lines.append(f"{inner}for {e} in {a}:")
        if element == "string":
            lines.append(f"{inner}    parts.append(_w_str({e}, {flex}, False))")
        elif element == "uuid":
            lines.append(f"{inner}    parts.append(_w_uuid({e}))")
        else:
            lines.append(f"{inner}    parts.append(_w_bytes_len({e}, {flex}, False))")
            lines.append(f"{inner}    parts.append({e})")


def codec_source(msg: Message, version: int, flexible: bool) -> str:
    """The generated ``decode(buf, pos) -> (message, pos)`` and ``encode(message, parts)``."""
    g = _Gen(msg, version, flexible)
    dec: list[str] = []
    g.dec_struct(msg.fields, msg.name, "result", dec, "    ")
    enc: list[str] = []
    g.enc_struct(msg.fields, "o", enc, "    ")
    out = [f"# {msg.name} v{version}{' (flexible)' if flexible else ''}: generated by protocol/codegen.py"]
    out += [f"{name} = {source}" for source, name in g.consts.items()]
    for func in g.funcs:
        out += ["", *func]
    out += ["", "def decode(buf, pos):", *dec, "    return result, pos"]
    out += ["", "def encode(o, parts):", *enc, "    return parts"]
    return "\n".join(out) + "\n"


Decoder = Callable[[Any, int], tuple[Any, int]]
Encoder = Callable[[Any, list[Any]], list[Any]]


class _Holder:
    """Lets a tagged field's encoder reuse the struct emitter (``holder.<field>``)."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


def codec(msg: Message, version: int, flexible: bool) -> tuple[Decoder, Encoder]:
    """Compile the generated decoder and encoder of ``msg`` at ``version``."""
    source = codec_source(msg, version, flexible)
    namespace: dict[str, Any] = {**_RUNTIME, **vars(messages), "_Holder": _Holder}
    exec(compile(source, f"<generated {msg.name} v{version}>", "exec"), namespace)  # noqa: S102
    return namespace["decode"], namespace["encode"]


# ----------------------------------------------------------------------------- mappings


# class -> (its field names, {struct field: (is an array, child class)}), from the declarations
_SHAPES: dict[type[Any], tuple[frozenset[str], dict[str, tuple[bool, type[Any]]]]] = {}


def register(msg: Message) -> None:
    """Record the shape of ``msg``'s classes for :func:`from_mapping`."""
    names = struct_names(msg)

    def walk(fields: tuple[Field, ...], cls_name: str) -> None:
        nested: dict[str, tuple[bool, type[Any]]] = {}
        for f in fields:
            if isinstance(f.type, StructType):
                child = names[id(f.type)]
                nested[f.name] = (f.is_array, getattr(messages, child))
                walk(f.type.fields, child)
        _SHAPES[getattr(messages, cls_name)] = (frozenset(f.name for f in fields), nested)

    walk(msg.fields, msg.name)


def from_mapping(cls: type[Any], value: Any) -> Any:
    """``value`` as a ``cls`` message: a message passes through, a mapping (nested dicts and
    Containers) is converted, and a key that is not one of ``cls``'s fields is an error
    (msgspec's ``TypeError: Unexpected keyword argument``)."""
    if type(value) is cls:
        return value
    if value is None:
        return cls()
    if not isinstance(value, Mapping):
        raise KafkaEncodeError(f"{cls.__name__}: expected a mapping or message, got {type(value).__name__}")
    nested = _SHAPES[cls][1]
    if not nested:
        return cls(**value)
    kwargs = dict(value)
    for key, (many, child) in nested.items():
        item = kwargs.get(key)
        if item is not None:
            kwargs[key] = [from_mapping(child, x) for x in item] if many else from_mapping(child, item)
    return cls(**kwargs)


def as_plain(value: Any) -> Any:
    """A message as nested dicts (lists and bytes kept): what the construct codec takes."""
    if isinstance(value, messages.KafkaMessage):
        return {name: as_plain(getattr(value, name)) for name in value.__struct_fields__}
    if isinstance(value, list):
        return [as_plain(v) for v in value]
    return value
