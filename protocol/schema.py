"""The declarative message layer: Kafka's JSON message specs, as Python data.

A message is a list of :class:`Field`s. Each field carries what Kafka's JSON
carries — a version range (``"4+"``, ``"0-3"``), the versions in which it is
nullable, a tag for tagged fields and a default — and :meth:`Message.codec`
derives the construct codec of any one version from it, compiled.

Invariants:
- A field absent from a version is never on the wire in that version; decoding
  fills it with its default and encoding ignores it.
- Flexible versions (KIP-482) use compact strings/bytes/arrays and end every
  struct with tagged fields; non-flexible ones use int16 strings, int32 bytes
  and int32 arrays (-1 = null). Which versions are flexible is decided by the
  API table (``protocol.api.API_VERSIONS``), not by the message.
- A field's default follows Kafka's generator: explicit ``default``, else 0 /
  false / "" / empty / zero UUID, and ``None`` for nullable records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from construct import Construct, Float64b, Int8sb, Int16sb, Int32sb, Int64sb

from protocol.wire import KArray, KBool, KBytes, KNullableStruct, KString, KStruct, KUuid

ZERO_UUID = bytes(16)

_INTS: dict[str, Construct] = {
    "int8": Int8sb,
    "int16": Int16sb,
    "int32": Int32sb,
    "int64": Int64sb,
    "float64": Float64b,
}
PRIMITIVES = frozenset({*_INTS, "bool", "string", "bytes", "records", "uuid"})


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``high`` None means open-ended ("4+")."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str | None) -> Versions | None:
        if text is None or text == "none":
            return None
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        assert isinstance(version, int)
        return self.low <= version and (self.high is None or version <= self.high)


@dataclass(frozen=True)
class StructType:
    """A nested struct type: an array of structs, or (``array=False``) a single struct."""

    fields: tuple[Field, ...]
    array: bool = True


def arr(*fields: Field) -> StructType:
    """An array of structs (Kafka's ``[]SomeStruct``)."""
    return StructType(tuple(fields), True)


def obj(*fields: Field) -> StructType:
    """A single nested struct (Kafka's ``SomeStruct``; used by tagged fields here)."""
    return StructType(tuple(fields), False)


_NO_DEFAULT = object()


@dataclass(frozen=True)
class Field:
    name: str
    type: str | StructType
    versions: Versions
    nullable: Versions | None = None
    tag: int | None = None
    explicit_default: Any = field(default=_NO_DEFAULT, compare=False)

    def present(self, version: int) -> bool:
        return version in self.versions

    def nullable_in(self, version: int) -> bool:
        return self.nullable is not None and version in self.nullable

    @property
    def is_array(self) -> bool:
        if isinstance(self.type, StructType):
            return self.type.array
        return self.type.startswith("[]")

    @property
    def element(self) -> str | StructType:
        """The element type of an array (``"int32"`` for ``"[]int32"``), else the type."""
        if isinstance(self.type, str) and self.type.startswith("[]"):
            return self.type[2:]
        return self.type

    @property
    def default(self) -> Any:
        """Kafka's default for this field (a value to copy, never to mutate)."""
        if self.explicit_default is not _NO_DEFAULT:
            return self.explicit_default
        if self.is_array:
            return []
        t = self.type
        if isinstance(t, StructType):
            return {f.name: f.default for f in t.fields}
        if t == "records":
            return None
        if t == "string":
            return ""
        if t == "bytes":
            return b""
        if t == "bool":
            return False
        if t == "uuid":
            return ZERO_UUID
        if t == "float64":
            return 0.0
        return 0


def F(
    name: str,
    type: str | StructType,
    versions: str = "0+",
    *,
    nullable: str | None = None,
    tag: int | None = None,
    default: Any = _NO_DEFAULT,
) -> Field:
    """Declare one field the way Kafka's JSON does: ``F("leader_epoch", "int32", "4+", default=-1)``."""
    if isinstance(type, str):
        base = type[2:] if type.startswith("[]") else type
        if base not in PRIMITIVES:
            raise ValueError(f"unknown Kafka type {type!r} for field {name}")
    v = Versions.parse(versions)
    if v is None:
        raise ValueError(f"field {name} has no versions")
    return Field(name, type, v, Versions.parse(nullable), tag, default)


def _element_codec(t: str | StructType, version: int, flexible: bool, nullable: bool) -> Construct:
    if isinstance(t, StructType):
        inner = struct_codec(t.fields, version, flexible)
        return KNullableStruct(inner) if nullable else inner
    if t in _INTS:
        return _INTS[t]
    if t == "bool":
        return KBool()
    if t == "uuid":
        return KUuid()
    if t == "string":
        return KString(flexible, nullable)
    return KBytes(flexible, nullable)  # bytes, records


def field_codec(f: Field, version: int, flexible: bool) -> Construct:
    nullable = f.nullable_in(version)
    if f.is_array:
        return KArray(_element_codec(f.element, version, flexible, False), flexible, nullable)
    return _element_codec(f.type, version, flexible, nullable)


def struct_codec(fields: tuple[Field, ...], version: int, flexible: bool) -> KStruct:
    positional: list[tuple[str, Construct | None, Any]] = []
    tagged: list[tuple[int, str, Construct, Any]] = []
    for f in fields:
        if f.tag is not None:
            if flexible and f.present(version):
                tagged.append((f.tag, f.name, field_codec(f, version, flexible), f.default))
            else:
                positional.append((f.name, None, f.default))
        elif f.present(version):
            positional.append((f.name, field_codec(f, version, flexible), f.default))
        else:
            positional.append((f.name, None, f.default))
    return KStruct(positional, tagged if flexible else None)


@dataclass(frozen=True)
class Message:
    """One Kafka message (a request or a response body), all versions at once."""

    name: str
    fields: tuple[Field, ...]

    def codec(self, version: int, flexible: bool) -> Construct:
        """The compiled construct codec of ``version``; cached, compiled on first use."""
        return _compiled(self, version, flexible)

    def interpreted(self, version: int, flexible: bool) -> KStruct:
        """The same codec uncompiled (tests compare the two)."""
        return struct_codec(self.fields, version, flexible)


def message(name: str, *fields: Field) -> Message:
    return Message(name, tuple(fields))


@cache
def _compiled(msg: Message, version: int, flexible: bool) -> Construct:
    return struct_codec(msg.fields, version, flexible).compile()
