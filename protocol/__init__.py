"""Kafka's wire protocol, sans I/O: frames in, messages out (and back).

- ``protocol.api``: the API/version table and the four entry points
  (``decode_request``, ``encode_response``, ``encode_request``, ``decode_response``).
- ``protocol.schema`` + one module per API (``produce``, ``fetch``, ``list_offsets``, …):
  every message declared once, with Kafka's version ranges; everything else is derived.
- ``protocol.codegen``: from each declaration, the typed classes (``protocol.messages``,
  generated at build time by ``python -m protocol.generate``) and each version's codec
  (generated Python, compiled on first use), tested against the construct codec.
- ``protocol.wire``: Kafka's wire types as compilable construct Constructs (the reference).
- ``protocol.primitives``: varints, once.
- ``protocol.errors``: Kafka's error codes.
- ``protocol.tls``: TLS's record layer as bytes in, bytes out, for broker and client.

Invariant: nothing here touches sockets, files or our other packages; records
travel through as opaque bytes.
"""
