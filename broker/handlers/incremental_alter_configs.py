"""IncrementalAlterConfigs (44), v0-1: SET / DELETE / APPEND / SUBTRACT on topic configs
and dynamic broker configs, applied at once and persisted (see ``broker.config_admin``)."""

from __future__ import annotations

from broker import config_admin
from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request


async def handle(request: Request[m.IncrementalAlterConfigsRequest], ctx: RequestContext) -> m.IncrementalAlterConfigsResponse:
    return _answer(config_admin.handle_resources(ctx, request.body, config_admin.incremental))


def error_body(request: Request[m.IncrementalAlterConfigsRequest], code: int) -> m.IncrementalAlterConfigsResponse:
    return _answer(config_admin.failed_resources(request, code))


def _answer(outcomes: list[config_admin.Outcome]) -> m.IncrementalAlterConfigsResponse:
    return m.IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[
        m.IncrementalAlterConfigsResponseResponses(error_code=c, error_message=msg, resource_type=t, resource_name=n)
        for c, msg, t, n in outcomes])
