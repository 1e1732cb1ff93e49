"""IncrementalAlterConfigs (44), v0-1: SET / DELETE / APPEND / SUBTRACT on topic configs
and dynamic broker configs, applied at once and persisted (see ``broker.config_admin``)."""

from __future__ import annotations

from typing import Any

from broker import config_admin
from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request


async def handle(request: Request[m.IncrementalAlterConfigsRequest], ctx: RequestContext) -> dict[str, Any]:
    return config_admin.handle_resources(ctx, request.body, config_admin.incremental)


error_body = config_admin.error_body
