"""AlterConfigs (33), v0-2: the legacy form, which replaces a resource's whole set of
dynamic configs (keys not listed are deleted, as in Kafka); see ``broker.config_admin``."""

from __future__ import annotations

from typing import Any

from broker import config_admin
from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request


async def handle(request: Request[m.AlterConfigsRequest], ctx: RequestContext) -> dict[str, Any]:
    return config_admin.handle_resources(ctx, request.body, config_admin.replacement)


error_body = config_admin.error_body
