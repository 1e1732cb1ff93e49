"""AlterConfigs (33), v0-2: the legacy form, which replaces a resource's whole set of
dynamic configs (keys not listed are deleted, as in Kafka); see ``broker.config_admin``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from broker import config_admin
from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request

R = TypeVar("R")


async def handle(request: Request[m.AlterConfigsRequest], ctx: RequestContext) -> m.AlterConfigsResponse:
    return _answer(config_admin.handle_resources(ctx, request.body, config_admin.replacement))


def error_body(request: Request[m.AlterConfigsRequest], code: int) -> m.AlterConfigsResponse:
    return _answer(config_admin.failed_resources(request, code))


def _answer(outcomes: list[config_admin.Outcome]) -> m.AlterConfigsResponse:
    return answer(m.AlterConfigsResponse, m.AlterConfigsResponseResponses, outcomes)


def answer(response: Callable[..., R], entry: Callable[..., Any],
           outcomes: list[config_admin.Outcome]) -> R:
    """The response of AlterConfigs or IncrementalAlterConfigs (same fields): one entry
    per resource outcome of ``config_admin``."""
    return response(throttle_time_ms=0, responses=[
        entry(error_code=c, error_message=msg, resource_type=t, resource_name=n)
        for c, msg, t, n in outcomes])
