"""Client quotas (KIP-13/124/219/546): the sans-I/O model and rates in ``model``, their
durable store in ``store``; the broker's server mutes a throttled connection."""
