"""Transactions: the coordinator state machine, its durable store and the I/O shell."""
