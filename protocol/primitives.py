"""The wire primitives the protocol side uses: varints and zig-zag.

One definition, in ``storage/primitives.py`` (storage may import nothing outside
itself, and record batches need varints too); this module is where protocol code
imports them from. ``VarintError`` is raised for a truncated or over-long varint.
"""

from storage.primitives import VarintError as VarintError
from storage.primitives import read_uvarint as read_uvarint
from storage.primitives import read_uvarint_trusted as read_uvarint_trusted
from storage.primitives import read_varint as read_varint
from storage.primitives import read_varlong as read_varlong
from storage.primitives import unzigzag as unzigzag
from storage.primitives import uvarint_bytes as uvarint_bytes
from storage.primitives import varint_bytes as varint_bytes
from storage.primitives import write_uvarint as write_uvarint
from storage.primitives import write_varint as write_varint
from storage.primitives import zigzag as zigzag
