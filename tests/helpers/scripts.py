"""Import a repository script (a file outside any package, e.g. under tools/) as a module.

The module is registered in ``sys.modules`` under ``name`` before it runs, so dataclasses
and pickling inside it resolve their own module; a second load reuses the first entry.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, f"cannot import {path}"
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module
