"""Hypothesis strategies derived from the protocol schema itself, and the oracle for decoding.

``body(message, version, flexible)`` generates any valid body of that version;
``expected(message, version, flexible, value)`` is what decoding must return:
the value, with every field absent from the version set to its default.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from protocol.api import API_VERSIONS, MESSAGES, ApiKey
from protocol.messages import KafkaMessage
from protocol.schema import Field, StructType

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _element(t: str | StructType, version: int, flexible: bool, nullable: bool) -> st.SearchStrategy[Any]:
    if isinstance(t, StructType):
        s: st.SearchStrategy[Any] = body_fields(t.fields, version, flexible)
    elif t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        s = st.integers(lo, hi)
    elif t == "bool":
        s = st.booleans()
    elif t == "string":
        s = st.text(max_size=12)
    elif t in ("bytes", "records"):
        s = st.binary(max_size=40)
    elif t == "uuid":
        s = st.binary(min_size=16, max_size=16)
    elif t == "float64":
        s = st.floats(allow_nan=False)
    else:
        raise AssertionError(t)
    return st.none() | s if nullable else s


def field_value(f: Field, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    nullable = f.nullable_in(version)
    if f.is_array:
        items = st.lists(_element(f.element, version, flexible, False), max_size=3)
        return st.none() | items if nullable else items
    return _element(f.type, version, flexible, nullable)


def on_wire(f: Field, version: int, flexible: bool) -> bool:
    return f.present(version) and (f.tag is None or flexible)


def body_fields(fields: tuple[Field, ...], version: int, flexible: bool) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {f.name: field_value(f, version, flexible) for f in fields if on_wire(f, version, flexible)}
    )


def expected_fields(fields: tuple[Field, ...], version: int, flexible: bool, value: Any) -> dict[str, Any]:
    out = {}
    for f in fields:
        if on_wire(f, version, flexible) and f.name in value:
            v = value[f.name]
        else:
            v = f.default
        out[f.name] = _expected_value(f, version, flexible, v)
    return out


def _expected_value(f: Field, version: int, flexible: bool, v: Any) -> Any:
    t = f.element
    if v is None:
        return None
    if isinstance(t, StructType):
        if f.is_array:
            return [expected_fields(t.fields, version, flexible, x) for x in v]
        return expected_fields(t.fields, version, flexible, v)
    if f.is_array:
        return [plain(x) for x in v]
    return plain(v)


def plain(value: Any) -> Any:
    """Messages and Containers → dicts, lists → lists, bytes-likes → bytes: a comparable form."""
    if isinstance(value, KafkaMessage):
        return {k: plain(getattr(value, k)) for k in value.__struct_fields__}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


def all_versions() -> list[tuple[ApiKey, int]]:
    return [
        (key, v)
        for key, rng in API_VERSIONS.items()
        for v in range(rng.min_version, rng.max_version + 1)
    ]


def version_ids(pairs: list[tuple[int, int]] | list[tuple[ApiKey, int]]) -> list[str]:
    """pytest ids for (api key, version) parameters, e.g. ``PRODUCE-v9``."""
    return [f"{ApiKey(k).name}-v{v}" for k, v in pairs]


def is_flexible(key: ApiKey, version: int) -> bool:
    return version >= API_VERSIONS[key].first_flexible


def request_body(key: ApiKey, version: int) -> st.SearchStrategy[dict[str, Any]]:
    return body_fields(MESSAGES[key][0].fields, version, is_flexible(key, version))


def response_body(key: ApiKey, version: int) -> st.SearchStrategy[dict[str, Any]]:
    return body_fields(MESSAGES[key][1].fields, version, is_flexible(key, version))


_RICH = {"int8": 7, "int16": 300, "int32": 70_000, "int64": 1 << 40, "bool": True, "string": "ab",
         "bytes": b"xyz", "records": b"\x00" * 70, "uuid": bytes(range(16)), "float64": 1.5}


def rich_body(
    fields: tuple[Field, ...], version: int, flexible: bool, big: bool = False, depth: int = 0
) -> dict[str, Any]:
    """A deterministic body with every field of the version set (arrays of two, no nulls).

    ``big`` makes lengths need multi-byte uvarints: 130 top-level array elements,
    300-character strings (non-ASCII) and 20 KB records.
    """
    out: dict[str, Any] = {}
    for f in fields:
        if not on_wire(f, version, flexible):
            continue
        t = f.element
        if isinstance(t, StructType):
            one: Any = rich_body(t.fields, version, flexible, big, depth + 1)
        elif big and t == "string":
            one = "é" * 150
        elif big and t in ("bytes", "records"):
            one = bytes(range(256)) * 80
        else:
            one = _RICH[t]
        n = 130 if big and depth == 0 else 2
        out[f.name] = [one] * n if f.is_array else one
    return out
