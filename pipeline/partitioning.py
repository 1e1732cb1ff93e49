"""Kafka's default partitioner for a whole Arrow column: lives with the client's partitioner.

Kept so ``pipeline.partitioning.partitions_for_keys`` still names it; see
:func:`client.partitioner.partitions_for_keys`.
"""

from __future__ import annotations

from client.partitioner import partitions_for_keys

__all__ = ["partitions_for_keys"]
