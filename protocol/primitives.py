"""The wire primitives the protocol side uses: varints and zig-zag.

One definition, in ``storage/primitives.py`` (storage may import nothing outside
itself, and record batches need varints too); this module is where protocol code
imports them from. ``VarintError`` is raised for a truncated or over-long varint.
"""

from storage.primitives import (
    VarintError,
    read_uvarint,
    read_uvarint_trusted,
    read_varint,
    read_varlong,
    unzigzag,
    uvarint_bytes,
    varint_bytes,
    write_uvarint,
    write_varint,
    zigzag,
)

__all__ = [
    "VarintError",
    "read_uvarint",
    "read_uvarint_trusted",
    "read_varint",
    "read_varlong",
    "unzigzag",
    "uvarint_bytes",
    "varint_bytes",
    "write_uvarint",
    "write_varint",
    "zigzag",
]
