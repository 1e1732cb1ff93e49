"""A short live-socket fuzz round in ``make test`` (``make fuzz`` runs 1,000,000 requests):
no crash, no hang, RSS bounded, no unexpected exception in the broker's log."""

from __future__ import annotations

import os
from pathlib import Path

from tests.reliability.fuzz_live import RSS_BOUND_MIB, fuzz

REQUESTS = int(os.environ.get("CHRONOLOG_FUZZ_REQUESTS", "10000"))


def test_mutated_requests_of_every_api_crash_hang_and_bloat_nothing(broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = fuzz(broker, REQUESTS, 300, seed=int(os.environ.get("CHRONOLOG_FUZZ_SEED", "1")),
             findings=tmp_path / "findings")
    assert not r.crashed, broker.log()[-3000:]
    assert r.stats.hangs == []
    assert r.rss_growth_mib < RSS_BOUND_MIB
    assert r.tracebacks == [], sorted(set(r.tracebacks))
    assert r.stats.processed >= REQUESTS
    assert r.stats.closed > 0 and r.stats.answered > 0  # both paths were exercised
