"""Hand-written ``struct`` codecs for the hot messages (placeholder tables filled below)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

REQUEST_DECODERS: dict[tuple[int, int], Callable[[Any], tuple[str | None, Any]]] = {}
RESPONSE_ENCODERS: dict[tuple[int, int], Callable[[int, Any], bytes]] = {}
