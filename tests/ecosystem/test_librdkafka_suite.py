"""librdkafka's own integration tests against Chronolog: a short subset in ``make test``.

The whole suite, both group protocols, is ``make test-peers-rdkafka``
(tools/peers/librdkafka.py). Here a handful of its representative tests run against a
fresh broker with the harness's usual settings: produce and consume with every codec,
offsets for times, a balanced consumer group, the idempotent producer and an aborted
transaction; and, as the harness's "SASL SCRAM" suite runs them, two over a
SASL_PLAINTEXT listener with SCRAM-SHA-512 (``make test-peers-rdkafka-sasl`` runs the
whole suite so). The build is
cached in ``.cache/librdkafka`` (the first one takes minutes, so tests/ecosystem/
prebuild.py starts it in the background when collection selects this test); a missing
toolchain, a refused download or a failed build fails this test with the reason.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.ecosystem import prebuild
from tests.helpers.scripts import load_script

REPO = Path(__file__).resolve().parents[2]

#: test-runner name -> what it exercises. Numbers chosen for coverage per second.
SUBSET = {
    "0012_produce_consume": "produce to and consume from several partitions, offsets kept",
    "0017_compression": "produce and consume with gzip, snappy, lz4 and zstd",
    "0031_get_offsets": "query_watermark_offsets and offsets_for_times",
    "0054_offset_time": "offsets_for_times on CreateTime records",
    "0056_balanced_group_mt": "a balanced consumer group on several threads",
    "0090_idempotence": "the idempotent producer's sequence checks",
    "0129_fetch_aborted_msgs": "fetches that hold only an aborted transaction's records",
}


peer = load_script(REPO / "tools" / "peers" / "librdkafka.py", "librdkafka_peer")


@pytest.fixture(scope="module")
def librdkafka_runner() -> Path:
    """The built test-runner: waits for the background build, then checks it (a no-op)."""
    try:
        prebuild.wait("librdkafka")
        return peer.build()
    except (prebuild.PrebuildFailed, peer.PeerError) as e:
        pytest.fail(f"librdkafka's test suite could not be built: {e}", pytrace=False)


def test_librdkafka_subset(librdkafka_runner: Path, tmp_path: Path) -> None:
    numbers = ",".join(name.split("_")[0] for name in SUBSET)
    outcomes, output = peer.run(
        numbers, "classic", 3, tmp_path, sys.executable, 300.0, scenarios=("default",)
    )
    report = peer.summary(outcomes, "classic")
    passed = {o.name for o in outcomes if o.state == "passed"}
    failed = [o.name for o in outcomes if o.state == "failed"]
    assert passed == set(SUBSET) and not failed, (
        f"{report}\n--- test-runner output (last 20000 chars) ---\n{output[-20000:]}"
    )


#: Over SASL/SCRAM-SHA-512 (the harness's "SASL SCRAM" suite runs every test so).
SASL_SUBSET = {
    "0001_multiobj": "producers and topics made and destroyed, each logging in",
    "0135_sasl_credentials": "a failed login, then sasl_set_credentials() and a good one",
}


def test_librdkafka_subset_over_sasl_scram(librdkafka_runner: Path, tmp_path: Path) -> None:
    numbers = ",".join(name.split("_")[0] for name in SASL_SUBSET)
    outcomes, output = peer.run(
        numbers,
        "classic",
        2,
        tmp_path,
        sys.executable,
        300.0,
        scenarios=("default",),
        security="sasl-scram",
    )
    report = peer.summary(outcomes, "classic", "sasl-scram")
    passed = {o.name for o in outcomes if o.state == "passed"}
    failed = [o.name for o in outcomes if o.state == "failed"]
    logins = (tmp_path / "default" / "broker.log").read_text()
    assert passed == set(SASL_SUBSET) and not failed, (
        f"{report}\n--- test-runner output (last 20000 chars) ---\n{output[-20000:]}"
    )
    assert "as User:myuser (SASL/SCRAM-SHA-512)" in logins, logins[-4000:]
