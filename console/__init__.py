"""Chronolog's web console: a Kafka client application that shows the time dimension.

It sits beside ``pipeline/`` above ``client/``: it imports ``client`` and
``protocol`` (and the record codec through the client), never ``broker`` or
``storage`` directly, so it works against Chronolog and any Kafka-protocol broker.
Modules: ``settings`` (the ``--client-config`` properties file), ``timeline``
(records per time bucket from ListOffsets alone), ``browse`` (bounded pages of
records, one partition or merged by timestamp), ``cluster`` (the overview),
``groups`` (consumer groups: lag in records and in time, reset to a time),
``render`` (how keys and values are shown), ``link`` (the connection to the broker,
waited for when it is not up yet), ``app`` (the aiohttp web app).
"""
