"""Consumer groups: the coordinator (registry and timers), the classic protocol's state
machine, and the durable store of group state and committed offsets."""
