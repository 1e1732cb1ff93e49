"""An independent oracle: kafka-python 3's own codecs, generated from Kafka's JSON specs.

Different code, same specification. For every API and version both implement,
bodies generated from our schema are encoded by us, decoded by kafka-python
(every field on the wire must come out equal), and re-encoded by kafka-python
(the bytes must be ours exactly). kafka-python 3 dropped versions Kafka 4
removed (ListOffsets v0), so those are checked by the other tests only.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any

import kafka.protocol
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage

from protocol.api import API_VERSIONS, MESSAGES, ApiKey
from protocol.schema import Field, StructType
from tests.protocol.frames import body_of, request_round_trip, response_round_trip
from tests.protocol.strategies import is_flexible, on_wire, plain, request_body, response_body


def _kafka_python_messages() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for info in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, ApiMessage) and getattr(obj, "_json", None):
                cls: Any = obj
                found[cls.name] = cls
    return found


KP = _kafka_python_messages()
CASES = [
    (key, version, side)
    for key, rng in API_VERSIONS.items()
    for side in ("Request", "Response")
    for version in range(rng.min_version, rng.max_version + 1)
    if rng.name + side in KP  # kafka-python 3.0 has no KIP-848 messages
    and version >= KP[rng.name + side].valid_versions[0]
]


def _norm(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    if type(value).__name__ == "UUID":
        return value.bytes
    return value


# kafka-python's to_dict() turns these bitfields into sets of operation names under
# another key; the byte-identical re-encode still checks them.
_RENAMED_BY_KAFKA_PYTHON = {
    "cluster_authorized_operations", "topic_authorized_operations", "authorized_operations",
}

# Our field names that differ from Kafka's (and kafka-python's) because Kafka's would
# shadow a Container method: DescribeClientQuotas' Values.
_OUR_NAME_FOR = {"quota_values": "values"}


def _same_on_the_wire(fields: tuple[Field, ...], version: int, flexible: bool, ours: Any, theirs: Any) -> None:
    """Every field that version puts on the wire decodes to the same value in both."""
    for f in fields:
        if not on_wire(f, version, flexible) or f.name in _RENAMED_BY_KAFKA_PYTHON:
            continue
        a, b = ours[f.name], theirs[_OUR_NAME_FOR.get(f.name, f.name)]
        if isinstance(f.element, StructType) and a is not None and b is not None:
            if f.is_array:
                assert len(a) == len(b), f.name
                for x, y in zip(a, b, strict=True):
                    _same_on_the_wire(f.element.fields, version, flexible, x, y)
            else:
                _same_on_the_wire(f.element.fields, version, flexible, a, b)
        else:
            if f.type == "uuid" and b is None:
                b = bytes(16)  # kafka-python reads the zero UUID as None
            assert a == b, (f.name, a, b)


@pytest.mark.parametrize(("key", "version", "side"), CASES, ids=[f"{k.name}-{s}-v{v}" for k, v, s in CASES])
@given(data=st.data())
@settings(max_examples=12)
def test_kafka_python_decodes_our_bytes_and_reencodes_them_identically(
    key: ApiKey, version: int, side: str, data: st.DataObject
) -> None:
    flexible = is_flexible(key, version)
    cls = KP[API_VERSIONS[key].name + side]
    if side == "Request":
        body = data.draw(request_body(key, version))
        frame, req = request_round_trip(key, version, 7, "cross", body)
        ours = plain(req.body)
        header = 8 + 2 + len("cross") + (1 if flexible else 0)
        fields = MESSAGES[key][0].fields
    else:
        body = data.draw(response_body(key, version))
        if key == ApiKey.API_VERSIONS:
            body["error_code"] = 0  # kafka-python reads any error as a v0 body
        frame, decoded = response_round_trip(key, version, 7, body)
        ours = plain(decoded)
        header = 4 + (1 if flexible and key != ApiKey.API_VERSIONS else 0)
        fields = MESSAGES[key][1].fields
    theirs = cls.decode(body_of(frame, header), version=version)
    _same_on_the_wire(fields, version, flexible, ours, _norm(theirs.to_dict(json=False)))
    object.__setattr__(theirs, "_header", None)  # decoded messages lack it; encode() reads it
    assert bytes(theirs.encode(version=version)) == body_of(frame, header)
