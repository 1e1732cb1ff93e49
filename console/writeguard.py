"""The check every write of the console makes before it touches the cluster.

Invariants: a read-only console refuses (403); a form without this console process's
secret token refuses (403), so a page on another site cannot make a visitor's browser
post it. Only then is the form returned to the caller.
"""

from __future__ import annotations

import hmac
from typing import Any

from aiohttp import web

__all__ = ["checked_form"]


async def checked_form(request: web.Request, app_keys: dict[str, Any], what: str) -> Any:
    """The posted form, or the 403 page to answer with (``what``: "reset offsets")."""
    page = app_keys["page"]
    if not request.app[app_keys["config"]].allow_writes:
        return page(request, "error.html", 403, title="Read-only console",
                    message=f"Start the console with --allow-writes to {what}.")
    form = await request.post()
    if not hmac.compare_digest(str(form.get("token", "")), request.app[app_keys["token"]]):
        return page(request, "error.html", 403, title="Forbidden",
                    message="The form token does not match this console; reload the page.")
    return form
