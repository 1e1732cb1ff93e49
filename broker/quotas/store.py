"""The durable quota configs: ``<data>/__chronolog/client-quotas.json``.

Invariant: a change is written whole (temp file, fsync, rename, fsync of the
directory) before it is applied and acknowledged; an unreadable file stops the broker.
"""

from __future__ import annotations

import json
from pathlib import Path

from broker.quotas.model import Entity, InvalidQuota, QuotaConfigs, check_value, entity
from storage.fsutil import atomic_write_text

FILE_NAME = "client-quotas.json"


def load(path: Path) -> QuotaConfigs:
    if not path.exists():
        return QuotaConfigs()
    try:
        doc = json.loads(path.read_text())
        out: dict[Entity, dict[str, float]] = {}
        for row in doc["quotas"]:
            ent = entity((str(t), None if n is None else str(n)) for t, n in row["entity"])
            values = {str(k): float(v) for k, v in row["values"].items()}
            for k, v in values.items():
                check_value(ent, k, v)
            out[ent] = values
    except (ValueError, KeyError, TypeError, InvalidQuota) as exc:
        raise RuntimeError(f"client quota file {path} is unreadable: {exc}") from exc
    return QuotaConfigs(out)


def save(path: Path, configs: QuotaConfigs) -> None:
    rows = [{"entity": [list(p) for p in ent], "values": values}
            for ent, values in sorted(configs.entries.items(), key=lambda e: repr(e[0]))]
    atomic_write_text(path, json.dumps({"version": 1, "quotas": rows}, indent=1) + "\n")
