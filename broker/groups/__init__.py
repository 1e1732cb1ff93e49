"""Consumer groups: the coordinator (registry and timers), the classic protocol's state
machine, KIP-848 consumer groups (``consumer``, ``assignors``), and the durable store
of group state and committed offsets."""
