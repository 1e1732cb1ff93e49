"""ListPartitionReassignments (46, KIP-455), v0: a single node never moves a replica,
so there is never an ongoing reassignment: an empty list, error NONE, whatever is asked."""

from __future__ import annotations

from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request


async def handle(request: Request[m.ListPartitionReassignmentsRequest], ctx: RequestContext) -> m.ListPartitionReassignmentsResponse:
    return m.ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, topics=[])


def error_body(request: Request[m.ListPartitionReassignmentsRequest], code: int) -> m.ListPartitionReassignmentsResponse:
    return m.ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=code,
                                                error_message="unexpected server error", topics=[])
