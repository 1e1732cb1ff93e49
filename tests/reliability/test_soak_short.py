"""A 20-second soak inside ``make test`` (``make soak`` runs 10 minutes and writes the
report): the load runs, every lookup is answered, the report and plot are written."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.soak import soak, write_report


def test_a_short_soak_runs_answers_every_lookup_and_reports(tmp_path: Path) -> None:
    samples, errors = soak(20 / 60, producers=4, consumers=4, rate=200, scratch=tmp_path)
    assert errors == []
    assert len(samples) >= 2
    assert all(s.produced > 0 and s.consumed > 0 and s.lookups > 0 for s in samples[1:])
    args = argparse.Namespace(minutes=20 / 60, producers=4, consumers=4, rate=200)
    write_report(samples, errors, tmp_path / "out", args)
    assert (tmp_path / "out" / "soak.png").stat().st_size > 10_000
    assert "| t (s) |" in (tmp_path / "out" / "soak.md").read_text()
