"""franz-go's own ``pkg/kgo`` integration tests, run against one Chronolog broker.

The module zip that the Go proxy serves for github.com/twmb/franz-go carries its
``_test.go`` files; ``golang.franz_go_source()`` copies it into ``.cache/go`` and
``go test ./pkg/kgo/`` runs there with franz-go's own knobs: ``KGO_SEEDS`` (the broker),
``KGO_TEST_RF=1`` (one broker), ``KGO_TEST_RECORDS`` (records per ETL test; upstream's
default is 500000). The broker also has a SASL_PLAINTEXT listener with a SCRAM user, so
franz-go's SCRAM tests run too (``KGO_TEST_SCRAM_SEEDS``, ``KGO_TEST_SCRAM``).

The tests that do not apply to Chronolog are in NOT_APPLICABLE with the reason, which
docs/compatibility.md repeats; SKIPPED_BY_SUITE are those the suite skips by itself after
asking the broker (ApiVersions), for the reason given.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import BrokerProcess, free_port_number
from tests.ecosystem.golang import REPO, franz_go_source, go_env, go_exe, wait_for_prebuild

SCRAM_USER = ("kgo", "kgo-Secret-1")

# Run with ``go test -skip``: they fail here for a reason that is Chronolog's design.
NOT_APPLICABLE = {
    "TestConsumeRegex": (
        "needs an internal topic in Metadata: it creates one with kfake's own topic config "
        "kfake.is_internal, else uses __consumer_offsets; Chronolog keeps group offsets in a "
        "file (broker/groups/store.py), so it has no __consumer_offsets topic to list, fetch "
        "or list offsets of (docs/compatibility.md: why __consumer_offsets is not listed)"),
    "Test848RegexBrokerResolves": (
        "same: needs __consumer_offsets in Metadata, for the broker's KIP-848 regex to "
        "assign it and the client to fetch it"),
}

# Skipped by franz-go itself on what Chronolog's ApiVersions (or our settings) say.
SKIPPED_BY_SUITE = {
    "TestShareGroup": "share groups (KIP-932: ShareFetch, ShareAcknowledge) are not implemented",
    "TestShareGroupETL": "share groups are not implemented",
    "TestShareGroupAckOnClose": "share groups are not implemented",
    "TestShareGroupOffsetsAdmin": "share groups are not implemented",
    "TestConsumeRegexShareSkipsInternal": "share groups are not implemented",
    "TestOAuthAuth": "SASL/OAUTHBEARER is not implemented (PLAIN and SCRAM are)",
    "TestIssueProduceBrokerTooOldFailsRecords": (
        "Chronolog, like Kafka 4 (KAFKA-18659), advertises Produce from v0, so there is no "
        "broker too old for a client pinned to Kafka 0.10"),
}


@dataclass
class SuiteResult:
    """Top-level test outcomes ("pass", "fail", "skip"), each test's output, go's whole output."""

    outcomes: dict[str, str] = field(default_factory=dict)
    per_test: dict[str, list[str]] = field(default_factory=dict)
    output: str = ""
    returncode: int = 0
    seconds: float = 0.0

    def named(self, outcome: str) -> list[str]:
        return sorted(t for t, o in self.outcomes.items() if o == outcome)


def start_broker(data: Path) -> tuple[BrokerProcess, int]:
    """A Chronolog broker with PLAINTEXT and SASL_PLAINTEXT (SCRAM) listeners."""
    data.mkdir(parents=True)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        subprocess.run([sys.executable, "-m", "client.cli", "users", "add", "--data-dir",
                        str(data), "--user", SCRAM_USER[0], "--password", SCRAM_USER[1],
                        "--mechanism", mechanism], cwd=REPO, check=True, capture_output=True,
                       timeout=60)
    plain, sasl = free_port_number(), free_port_number()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "group.initial.rebalance.delay.ms": "0",  # as in Kafka's own test setups
    }
    return BrokerProcess(data, plain, overrides).start(), sasl


def run_suite(broker: BrokerProcess, sasl_port: int, run: str = "", records: int = 20_000,
              timeout_s: int = 1200) -> SuiteResult:
    """``go test -json ./pkg/kgo/`` against ``broker``; ``run`` selects tests (-run)."""
    wait_for_prebuild("kgo")
    source = franz_go_source()
    env = go_env()
    env.update(KGO_SEEDS=broker.bootstrap, KGO_TEST_RF="1", KGO_TEST_RECORDS=str(records),
               KGO_TEST_SCRAM_SEEDS=f"127.0.0.1:{sasl_port}",
               KGO_TEST_SCRAM=f"{SCRAM_USER[0]}:{SCRAM_USER[1]}:512")
    args = ["test", "-json", "-count=1", f"-timeout={timeout_s}s", "-skip",
            "^(" + "|".join(NOT_APPLICABLE) + ")$"]
    if run:
        args.append(f"-run={run}")
    args.append("./pkg/kgo/")
    proc = subprocess.run([go_exe(), *args], cwd=source, env=env, capture_output=True,
                          text=True, timeout=timeout_s + 600)
    result = SuiteResult(returncode=proc.returncode)
    lines = []
    for raw in proc.stdout.splitlines():
        try:
            event = json.loads(raw)
        except json.JSONDecodeError:
            lines.append(raw)
            continue
        test, action = event.get("Test"), event.get("Action")
        if event.get("Output"):
            lines.append(event["Output"].rstrip("\n"))
            if test:
                result.per_test.setdefault(test.split("/")[0], []).append(
                    event["Output"].rstrip("\n"))
        if test and "/" not in test and action in ("pass", "fail", "skip"):
            result.outcomes[test] = action
        if not test and action in ("pass", "fail") and "Elapsed" in event:
            result.seconds = float(event["Elapsed"])
    result.output = "\n".join(lines) + "\n" + proc.stderr
    return result


def failure_report(result: SuiteResult, limit: int = 20000) -> str:
    """go's output of each failed test (or the tail of everything), for an assertion."""
    failed = result.named("fail")
    if not failed:
        return f"go test exited {result.returncode}:\n{result.output[-limit:]}"
    text = "\n".join(f"===== {name}\n" + "\n".join(result.per_test.get(name, [])[-200:])
                     for name in failed)
    return f"failed: {failed}\n{text}"[-limit:]
