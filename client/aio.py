"""The asyncio Chronolog/Kafka client: topics, produce, time lookups, exact reads.

It speaks the Kafka wire protocol through ``protocol.api`` and builds/decodes
record batches with ``storage.records``, so it works against Chronolog and
against any Kafka broker that supports the same API versions.

Invariants:
- Each API is used at ``min(our max, broker's max)`` as negotiated by ApiVersions
  at connect time; an API the broker cannot serve in our range raises
  ``KafkaError(UNSUPPORTED_VERSION)`` naming it, before anything is sent.
- Every broker error reaches the caller as ``KafkaError`` with Kafka's code;
  nothing is silently skipped. "No record at or after T" is not an error: it is
  offset -1 in :meth:`Client.list_offsets` and ``None`` in :meth:`Client.offsets_for_times`.
- Reads are exact: :meth:`Client.consume` yields precisely the offsets in
  ``[start, end)`` that exist (compaction gaps and control batches are skipped,
  records before ``start`` in the first batch are dropped), in offset order.
- One TCP connection per broker, shared by all calls; requests pipeline on it.
  A dead connection is replaced on next use; reads (Metadata, ListOffsets,
  Fetch) are retried once on the new one, Produce never is (it could duplicate).
- Produce builds batches from columns (:mod:`storage.columnar`), never record by
  record, and keeps up to ``max_in_flight`` Produce requests on the wire at once;
  they are written and answered in order, so a partition's records get offsets
  in input order. If one fails, no further request is sent and the call raises;
  requests already in flight behind it may still have been appended (as with
  Kafka's ``max.in.flight.requests.per.connection`` > 1 without idempotence).
"""

from __future__ import annotations

from client.model import (
    _API_NAMES as _API_NAMES,
)
from client.model import (
    _RECORD_OVERHEAD as _RECORD_OVERHEAD,
)
from client.model import (  # re-exported: client.aio stays their import path
    API_VERSIONS as API_VERSIONS,
)
from client.model import (
    CLIENT_VERSIONS as CLIENT_VERSIONS,
)
from client.model import (
    COMPRESSION_CODECS as COMPRESSION_CODECS,
)
from client.model import (
    COUNT_TIME_WINDOWS as COUNT_TIME_WINDOWS,
)
from client.model import (
    CREATE_TOPICS as CREATE_TOPICS,
)
from client.model import (
    DEFAULT_MAX_BATCH_BYTES as DEFAULT_MAX_BATCH_BYTES,
)
from client.model import (
    DEFAULT_MAX_IN_FLIGHT as DEFAULT_MAX_IN_FLIGHT,
)
from client.model import (
    DELETE_TOPICS as DELETE_TOPICS,
)
from client.model import (
    DESCRIBE_CONFIGS as DESCRIBE_CONFIGS,
)
from client.model import (
    EARLIEST as EARLIEST,
)
from client.model import (
    FETCH as FETCH,
)
from client.model import (
    INIT_PRODUCER_ID as INIT_PRODUCER_ID,
)
from client.model import (
    LATEST as LATEST,
)
from client.model import (
    LIST_OFFSETS as LIST_OFFSETS,
)
from client.model import (
    MAX_TIMESTAMP as MAX_TIMESTAMP,
)
from client.model import (
    METADATA as METADATA,
)
from client.model import (
    METADATA_MAX_AGE_S as METADATA_MAX_AGE_S,
)
from client.model import (
    PLAN_TIME_WINDOW as PLAN_TIME_WINDOW,
)
from client.model import (
    PRODUCE as PRODUCE,
)
from client.model import (
    ConfigEntry as ConfigEntry,
)
from client.model import (
    ConfigSynonym as ConfigSynonym,
)
from client.model import (
    FetchResult as FetchResult,
)
from client.model import (
    Placement as Placement,
)
from client.model import (
    ProducerRecord as ProducerRecord,
)
from client.model import (
    ProduceWindow as ProduceWindow,
)
from client.model import (
    Record as Record,
)
from client.model import (
    TimeWindowPlan as TimeWindowPlan,
)
from client.model import (
    TopicPartition as TopicPartition,
)
from client.model import (
    WireRecord as WireRecord,
)
from client.model import (
    _raise_for as _raise_for,
)
from client.model import (
    _without_aborted as _without_aborted,
)
from client.model import (
    arrow_schema as arrow_schema,
)
from client.model import (
    compression_codec as compression_codec,
)
from client.model import (
    decode_arrow as decode_arrow,
)
from client.model import (
    decode_records as decode_records,
)
from client.model import (
    record_size as record_size,
)
from client.model import (
    to_wire as to_wire,
)
from client.parts.admin import AdminMixin
from client.parts.consume import ConsumeMixin
from client.parts.produce import ProduceMixin

__all__ = [
    "Client",
    "ConfigEntry",
    "ConfigSynonym",
    "FetchResult",
    "Placement",
    "ProduceWindow",
    "ProducerRecord",
    "Record",
    "TimeWindowPlan",
    "TopicPartition",
    "COMPRESSION_CODECS",
    "DEFAULT_MAX_IN_FLIGHT",
    "LATEST",
    "EARLIEST",
    "MAX_TIMESTAMP",
]


class Client(AdminMixin, ProduceMixin, ConsumeMixin):
    """An asyncio client for one cluster; create it with :meth:`Client.connect`.

    Its methods come in parts by concern (client/parts/): connections, versions and
    metadata (``core``), topic administration (``admin``), producing (``produce``),
    time lookups (``lookup``) and reading (``consume``).
    """
