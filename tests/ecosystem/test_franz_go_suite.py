"""franz-go's own pkg/kgo tests against Chronolog (tests/ecosystem/franz_suite.py).

``make test`` runs a handful of representative tests (transactional consume-produce
in groups with every balancer, KIP-848 included; produce, consume, partition changes,
SCRAM) with 1000 records; ``make test-peers`` (and ``make test-ecosystem``) runs the whole suite
with 20000. A failing franz-go test fails here with go's output for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import BrokerProcess
from tests.ecosystem.franz_suite import (
    NOT_APPLICABLE,
    SKIPPED_BY_SUITE,
    SuiteResult,
    failure_report,
    run_suite,
    start_broker,
)
from tests.ecosystem.golang import REPO, GoError

# TestTxnEtl runs consumer groups with every balancer (KIP-848 and static members too)
# inside transactions; TestGroupETL, the same without, runs in the whole suite only.
SUBSET = ("TestTxnEtl", "TestClient_Produce", "TestGroupSimple",
          "TestAddRemovePartitions", "TestIssue434", "TestConsumeMaxDecompressBatchBytes",
          "TestDirectPartitionPurge", "TestSCRAMAuth", "TestSCRAMAuthBadCredentials")


@pytest.fixture(scope="module")
def suite_broker(module_tmp: Path) -> Iterator[tuple[BrokerProcess, int]]:
    broker, sasl_port = start_broker(module_tmp / "chronolog")
    yield broker, sasl_port
    assert broker.stop() == 0, broker.log()


def _run(suite_broker: tuple[BrokerProcess, int], run: str, records: int) -> SuiteResult:
    try:
        return run_suite(*suite_broker, run=run, records=records)
    except GoError as e:
        pytest.fail(f"franz-go's tests could not be fetched or built: {e}", pytrace=False)


def test_franz_go_kgo_subset_passes(suite_broker: tuple[BrokerProcess, int]) -> None:
    result = _run(suite_broker, run="^(" + "|".join(SUBSET) + ")$", records=1000)
    assert result.outcomes == dict.fromkeys(SUBSET, "pass"), failure_report(result)
    assert result.returncode == 0, failure_report(result)


@pytest.mark.ecosystem_full
def test_franz_go_kgo_whole_suite_passes(suite_broker: tuple[BrokerProcess, int]) -> None:
    result = _run(suite_broker, run="", records=20_000)
    print(f"franz-go pkg/kgo: {len(result.named('pass'))} passed, "
          f"{len(result.named('fail'))} failed, {len(result.named('skip'))} skipped "
          f"in {result.seconds:.0f} s")
    assert result.named("fail") == [], failure_report(result)
    assert result.named("skip") == sorted(SKIPPED_BY_SUITE), failure_report(result)
    assert len(result.named("pass")) > 100 and result.returncode == 0, failure_report(result)


def test_compatibility_doc_names_every_franz_go_test_left_out() -> None:
    doc = (REPO / "docs" / "compatibility.md").read_text()
    section = doc[doc.index("## Go clients"):]
    if end := re.search(r"^## ", section[1:], re.M):
        section = section[:end.start() + 1]
    for name in [*NOT_APPLICABLE, *SKIPPED_BY_SUITE]:
        assert f"`{name}`" in section, name
