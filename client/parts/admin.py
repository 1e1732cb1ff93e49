"""Topic administration and configs (CreateTopics, DeleteTopics, DescribeConfigs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import protocol.describe_configs as dc
from client.model import (
    _RESOURCE_TYPES,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    ConfigEntry,
    ConfigSynonym,
    _raise_for,
)
from client.parts.core import ClientCore


class AdminMixin(ClientCore):
    """The admin part of :class:`client.aio.Client`."""

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        replication_factor: int = 1,
    ) -> None:
        """Create ``name``; raises KafkaError (e.g. TOPIC_ALREADY_EXISTS, INVALID_CONFIG)."""
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": str(v)} for k, v in (configs or {}).items()],
                }
            ],
            "timeout_ms": int(self.request_timeout * 1000),
            "validate_only": False,
        }
        resp = await self._request(CREATE_TOPICS, body)
        for t in resp["topics"]:
            _raise_for(t["error_code"], f"create topic {name!r}", t.get("error_message"))
        self._topics.pop(name, None)

    async def delete_topic(self, name: str) -> None:
        """Delete ``name``; raises KafkaError (UNKNOWN_TOPIC_OR_PARTITION if absent)."""
        body = {
            "topic_names": [name],
            "topics": [{"name": name, "topic_id": bytes(16)}],
            "timeout_ms": int(self.request_timeout * 1000),
        }
        resp = await self._request(DELETE_TOPICS, body)
        for t in resp["responses"]:
            _raise_for(t["error_code"], f"delete topic {name!r}", t.get("error_message"))
        self._topics.pop(name, None)

    async def describe_configs(
        self, topic: str, keys: Sequence[str] | None = None
    ) -> dict[str, str | None] | None:
        """The topic's configs (name -> value) via DescribeConfigs, or None if the broker
        lacks that API; ``keys`` limits the answer to those names (None = every config)."""
        if not self.supports(DESCRIBE_CONFIGS):
            return None
        entries = await self.describe_config_entries(topic, keys=keys)
        return {name: e.value for name, e in entries.items()}

    async def describe_config_entries(
        self,
        name: str,
        *,
        resource: str = "topic",
        keys: Sequence[str] | None = None,
        synonyms: bool = False,
        documentation: bool = False,
    ) -> dict[str, ConfigEntry]:
        """Every config of a topic (``resource="topic"``) or broker (``"broker"``, name =
        its node id) with value, source and flags, via DescribeConfigs.

        ``keys`` limits the answer to those names (None = all); ``synonyms`` and
        ``documentation`` ask for those extras (documentation needs v3). Raises
        KafkaError with the broker's error for that resource (e.g.
        UNKNOWN_TOPIC_OR_PARTITION), or UNSUPPORTED_VERSION without the API.
        """
        try:
            rtype = _RESOURCE_TYPES[resource]
        except KeyError:
            raise ValueError(f"resource must be one of {sorted(_RESOURCE_TYPES)}, got {resource!r}") from None
        body = {
            "resources": [
                {"resource_type": rtype, "resource_name": name,
                 "configuration_keys": None if keys is None else list(keys)}
            ],
            "include_synonyms": synonyms,
            "include_documentation": documentation,
        }
        node = int(name) if rtype == dc.RESOURCE_BROKER and name.isdigit() else None
        resp = await self._retry_read(lambda: self._request(DESCRIBE_CONFIGS, body, node))
        out: dict[str, ConfigEntry] = {}
        for r in resp["results"]:
            _raise_for(r["error_code"], f"describe configs of {resource} {name!r}", r.get("error_message"))
            for c in r["configs"]:
                out[c["name"]] = ConfigEntry(
                    name=c["name"],
                    value=c["value"],
                    source=dc.SOURCE_NAMES.get(c["config_source"], "UNKNOWN"),
                    read_only=c["read_only"],
                    sensitive=c["is_sensitive"],
                    synonyms=tuple(
                        ConfigSynonym(s["name"], s["value"], dc.SOURCE_NAMES.get(s["source"], "UNKNOWN"))
                        for s in c["synonyms"]
                    ),
                    config_type=(dc.TYPE_NAMES.get(c["config_type"], "UNKNOWN")
                                 if self.api_version(DESCRIBE_CONFIGS) >= 3 else None),
                    documentation=c["documentation"],
                )
        return out
