"""WriteTxnMarkers (27), v1: append COMMIT/ABORT markers for one producer's transaction.

Chronolog's coordinator writes its markers itself; this API serves the one outside
caller Kafka has, ``kafka-transactions abort`` (Admin.abortTransaction), which aborts
a hanging transaction on one partition with the epochs DescribeProducers showed.

Invariants, as Kafka's ProducerAppendInfo.appendEndTxnMarker checks them, per partition:
unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION (3); a producer epoch below the
one the partition knows -> INVALID_PRODUCER_EPOCH (47); a coordinator epoch below the
last marker's -> TRANSACTION_COORDINATOR_FENCED (52); a refused partition gets no marker.
Otherwise the marker is appended (a marker for a producer with no open transaction
there is appended too and closes nothing). Without CLUSTER_ACTION on the cluster every
partition answers CLUSTER_AUTHORIZATION_FAILED (31) (``broker.acl.check.REQUEST_CHECKS``).
"""

from __future__ import annotations

import logging

from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("chronolog.broker")

Marker = m.WriteTxnMarkersRequestMarkers


def _write(ctx: RequestContext, marker: Marker, topic: str, partition: int) -> int:
    """The error code of one partition's marker (0: appended)."""
    try:
        ctx.partitions.get_log(topic, partition)
    except KafkaError as exc:
        return int(exc.code)
    producers = ctx.partitions.producers
    entry = producers.active(topic, partition).get(marker.producer_id) if producers else None
    if entry is not None and marker.producer_epoch < entry.epoch:
        log.info("WriteTxnMarkers from %s: %s-%d producer %d epoch %d is below %d: refused",
                 ctx.peer, topic, partition, marker.producer_id, marker.producer_epoch,
                 entry.epoch)
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if entry is not None and marker.coordinator_epoch < entry.coordinator_epoch:
        log.info("WriteTxnMarkers from %s: %s-%d producer %d coordinator epoch %d is below %d:"
                 " refused", ctx.peer, topic, partition, marker.producer_id,
                 marker.coordinator_epoch, entry.coordinator_epoch)
        return ErrorCode.TRANSACTION_COORDINATOR_FENCED
    offset = ctx.partitions.write_marker(topic, partition, marker.producer_id,
                                         marker.producer_epoch, bool(marker.transaction_result),
                                         marker.coordinator_epoch)
    log.info("WriteTxnMarkers from %s: %s marker for producer %d at %s-%d offset %d", ctx.peer,
             "COMMIT" if marker.transaction_result else "ABORT", marker.producer_id, topic,
             partition, offset)
    return 0


async def handle(request: Request[m.WriteTxnMarkersRequest],
                 ctx: RequestContext) -> m.WriteTxnMarkersResponse:
    return m.WriteTxnMarkersResponse(markers=[
        m.WriteTxnMarkersResponseMarkers(producer_id=marker.producer_id, topics=[
            m.WriteTxnMarkersResponseMarkersTopics(name=t.name, partitions=[
                m.WriteTxnMarkersResponseMarkersTopicsPartitions(
                    partition_index=p, error_code=_write(ctx, marker, t.name, p))
                for p in t.partition_indexes])
            for t in marker.topics])
        for marker in request.body.markers])


def error_body(request: Request[m.WriteTxnMarkersRequest], code: int) -> m.WriteTxnMarkersResponse:
    return m.WriteTxnMarkersResponse(markers=[
        m.WriteTxnMarkersResponseMarkers(producer_id=marker.producer_id, topics=[
            m.WriteTxnMarkersResponseMarkersTopics(name=t.name, partitions=[
                m.WriteTxnMarkersResponseMarkersTopicsPartitions(partition_index=p,
                                                                 error_code=code)
                for p in t.partition_indexes])
            for t in marker.topics])
        for marker in request.body.markers])
