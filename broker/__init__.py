"""The Chronolog broker: the Kafka wire protocol over asyncio/uvloop on top of ``storage``.

Modules: ``config`` (every setting under its Kafka name), ``server`` (connections,
ordering, limits, shutdown), ``dispatch`` (API key -> handler), ``handlers/`` (one
module per API), ``partitions`` (topics and partition logs), ``errors`` (storage
exceptions -> Kafka error codes), ``producers`` (idempotent producers), ``groups/``
(the group coordinator, committed offsets), ``udp``, ``metrics`` and ``logs`` (operations).
Run it with ``python -m broker`` or ``chronolog serve``.
"""
