"""AlterConfigs (33), v0-2: the legacy form, which replaces a resource's whole set of
dynamic configs (keys not listed are deleted, as in Kafka); see ``broker.config_admin``."""

from __future__ import annotations

from broker import config_admin
from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request


async def handle(request: Request[m.AlterConfigsRequest], ctx: RequestContext) -> m.AlterConfigsResponse:
    return _answer(config_admin.handle_resources(ctx, request.body, config_admin.replacement))


def error_body(request: Request[m.AlterConfigsRequest], code: int) -> m.AlterConfigsResponse:
    return _answer(config_admin.failed_resources(request, code))


def _answer(outcomes: list[config_admin.Outcome]) -> m.AlterConfigsResponse:
    return m.AlterConfigsResponse(throttle_time_ms=0, responses=[
        m.AlterConfigsResponseResponses(error_code=c, error_message=msg, resource_type=t, resource_name=n)
        for c, msg, t, n in outcomes])
