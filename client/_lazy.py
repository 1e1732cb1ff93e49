"""A module imported on first use, so ``import client`` (and every ``chronolog`` command)
does not pay for NumPy and PyArrow (~0.4 s) until a column-wise path runs."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for module ``name``; the first attribute access imports it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self._module
        if module is None:
            try:
                module = self._module = importlib.import_module(self._name)
            except ModuleNotFoundError as exc:
                from client.extras import extra_for, install_hint

                extra = extra_for(exc)
                if extra is None:
                    raise
                raise ModuleNotFoundError(f"{exc}: {install_hint(extra)}", name=exc.name) from exc
        return getattr(module, attr)
