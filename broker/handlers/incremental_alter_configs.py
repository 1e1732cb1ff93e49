"""IncrementalAlterConfigs (44), v0-1: SET / DELETE / APPEND / SUBTRACT on topic configs
and dynamic broker configs, applied at once and persisted (see ``broker.config_admin``)."""

from __future__ import annotations

from broker import config_admin
from broker.dispatch import RequestContext
from broker.handlers.alter_configs import answer
from protocol import messages as m
from protocol.api import Request


async def handle(request: Request[m.IncrementalAlterConfigsRequest], ctx: RequestContext) -> m.IncrementalAlterConfigsResponse:
    return _answer(config_admin.handle_resources(ctx, request.body, config_admin.incremental))


def error_body(request: Request[m.IncrementalAlterConfigsRequest], code: int) -> m.IncrementalAlterConfigsResponse:
    return _answer(config_admin.failed_resources(request, code))


def _answer(outcomes: list[config_admin.Outcome]) -> m.IncrementalAlterConfigsResponse:
    return answer(m.IncrementalAlterConfigsResponse, m.IncrementalAlterConfigsResponseResponses,
                  outcomes)
