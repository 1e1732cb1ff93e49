"""ApiVersions (18): which APIs and versions this broker serves.

Invariants: the list is exactly the routed APIs (``Broker.advertised_versions``),
Produce advertised from v0 (KAFKA-18659); a v3+ request whose client software
name or version breaks Kafka's pattern is answered INVALID_REQUEST (42) with an
empty list, as Kafka's ``ApiVersionsRequest.getErrorResponse`` does. Versions we do not
serve never reach this handler: the server answers them with error 35 in a v0 body.
"""

from __future__ import annotations

import re

from broker.dispatch import RequestContext
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


_valid_software: set[tuple[str, str]] = set()


def _software_ok(name: str, version: str) -> bool:
    """Kafka's pattern for ClientSoftwareName/Version; answers are cached (clients repeat them)."""
    key = (name, version)
    if key in _valid_software:
        return True
    ok = bool(_SOFTWARE.match(name) and _SOFTWARE.match(version))
    if ok and len(_valid_software) < 1024:
        _valid_software.add(key)
    return ok


async def handle(request: Request[m.ApiVersionsRequest], ctx: RequestContext) -> m.ApiVersionsResponse:
    if request.api_version >= 3:
        body = request.body
        if not _software_ok(body.client_software_name or "", body.client_software_version or ""):
            return error_body(request, int(ErrorCode.INVALID_REQUEST))
    return m.ApiVersionsResponse(error_code=int(ErrorCode.NONE), api_keys=ctx.broker.advertised_versions(),
                                 throttle_time_ms=0)


def error_body(request: Request[m.ApiVersionsRequest], code: int) -> m.ApiVersionsResponse:
    return m.ApiVersionsResponse(error_code=code, api_keys=[], throttle_time_ms=0)
