"""docs/protocol.md's version table says what protocol.api serves."""

from __future__ import annotations

import re
from pathlib import Path

from protocol.api import API_VERSIONS, ApiKey

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def test_documented_version_table_matches_api_versions() -> None:
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+)–(\d+) \| (\d+) \| (\d+) \|$", DOC.read_text(), re.M)
    documented = {int(key): (name, int(lo), int(hi), int(adv), int(flex)) for name, key, lo, hi, adv, flex in rows}
    actual = {int(k): (r.name, r.min_version, r.max_version, r.advertised_min, r.first_flexible)
              for k, r in API_VERSIONS.items()}
    assert documented == actual
    assert set(API_VERSIONS) == set(ApiKey)
