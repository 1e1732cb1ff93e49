"""Consumer group coordination: classic groups and KIP-848 consumer groups."""
