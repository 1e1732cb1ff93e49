"""The parts of :class:`client.aio.Client`, one concern each; import the client from
``client.aio``."""
