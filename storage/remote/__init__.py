"""The remote tier (KIP-405): sealed segments copied to object storage, read back transparently.

``store`` opens a bucket (``file://`` or ``s3://``) through obstore; ``manifest`` is the
bucket layout and the per-partition manifest every reader of the tier (the broker, a read
replica, Spark) plans from; ``tier`` copies, expires, reads and looks up one partition's
remote segments (``index_cache``: their indexes on local disk; ``snapshot``: the producer
snapshot and leader-epoch checkpoint formats). Nothing here imports above ``storage/``.
"""
