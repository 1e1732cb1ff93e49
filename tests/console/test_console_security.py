"""The console against a secured broker: ``chronolog console --client-config FILE`` with
SASL_SSL (SCRAM) and with SSL client certificates, its pages fetched over plain HTTP.

One real broker with PLAINTEXT, SASL_SSL and SSL (client certificate required) listeners
(tests/security/secure_broker.py), certificates made with the openssl CLI. The test data is
produced over SASL_SSL by the bundled client bootstrapped at ``127.0.0.1``: the broker
advertises ``localhost``, so the leader's connection is a second connection the client
opens itself, and the produce succeeds only if that one runs TLS and SASL too.

The CLI's commands (topics, produce, consume, groups) take the same file with
``--client-config``.

Oracles: the records the test produced (counts, offsets, timestamps, keys), and for the
timeline the brute-force reader-of-each-window counts of console_oracle.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from console_oracle import BASE, bucket_counts, unique_topic
from consolehelp import start_console, stop_console

from client import ProducerRecord
from client.aio import Client
from client.security import ClientSecurity
from console.settings import parse_properties
from tests.helpers.broker import free_port_number
from tests.security.secure_broker import BOB, SecureBroker, start_secure_broker

ROOT = Path(__file__).resolve().parents[2]
CONSOLE_DOC = ROOT / "docs" / "console.md"
CLIENT_DOC = ROOT / "docs" / "client.md"
# Per partition, the CreateTime offsets of its records (out of order on purpose).
STAMPS = {0: [0, 5_000, 1_000, 9_000], 1: [2_000, 2_000, 700, 30_000, 12_000], 2: [40_000]}


@dataclass
class Setup:
    sb: SecureBroker
    topic: str
    produced: dict[int, list[tuple[int, int, str]]]  # partition -> (offset, timestamp, key)
    tmp: Path

    def props(self, name: str, **settings: str) -> Path:
        path = self.tmp / name
        path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        return path

    def sasl_ssl(self, name: str, password: str = BOB[1], ca: str | None = None) -> Path:
        """docs/console.md's SASL_SSL properties, pointed at this broker, its CA and user bob."""
        doc = parse_properties(_doc_block(CONSOLE_DOC, "<!-- console-example: sasl_ssl -->"))
        assert doc["bootstrap.servers"] == "localhost:9093"
        return self.props(name, **doc | {
            "bootstrap.servers": f"localhost:{self.sb.ports['SASL_SSL']}",
            "sasl.username": BOB[0], "sasl.password": password,
            "ssl.ca.location": ca or self.sb.pki.ca, "request.timeout.ms": "10000",
        })


def _doc_block(doc: Path, marker: str) -> str:
    m = re.search(re.escape(marker) + r"\s*\n```\w+\n(.*?)```", doc.read_text(), re.S)
    assert m is not None, f"{marker} not in {doc}"
    return m.group(1)


async def _produce(sb: SecureBroker, topic: str) -> dict[int, list[tuple[int, int, str]]]:
    sec = ClientSecurity(protocol="SASL_SSL", mechanism="SCRAM-SHA-512", username=BOB[0],
                         password=BOB[1], ca_location=sb.pki.ca)
    out: dict[int, list[tuple[int, int, str]]] = {}
    async with await Client.connect(f"127.0.0.1:{sb.ports['SASL_SSL']}", client_id="t",
                                    request_timeout=10, security=sec) as c:
        await c.create_topic(topic, len(STAMPS))
        for p, stamps in STAMPS.items():
            recs = [ProducerRecord(key=f"k{p}-{i}", value=json.dumps({"p": p, "i": i}).encode(),
                                   timestamp=BASE + t) for i, t in enumerate(stamps)]
            offsets = await c.produce(topic, recs, partition=p)
            out[p] = [(o, BASE + t, f"k{p}-{i}") for i, (o, t) in enumerate(zip(offsets, stamps, strict=True))]
    return out


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    import uvloop

    tmp = tmp_path_factory.mktemp("console-security")
    sb = start_secure_broker(tmp)
    try:
        topic = unique_topic("secured")
        yield Setup(sb, topic, uvloop.run(_produce(sb, topic)), tmp)
    finally:
        sb.proc.stop()


@pytest.fixture(scope="module")
def sasl_ssl_console(setup: Setup) -> Iterator[str]:
    props = setup.sasl_ssl("sasl-ssl.properties")
    proc, url = start_console(["--client-config", str(props), "--port", str(free_port_number())],
                              setup.tmp / "sasl-ssl-console.log")
    try:
        yield url
    finally:
        stop_console(proc)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        body: bytes = r.read()
    return body.decode()


def _overview_row(page: str, topic: str) -> tuple[int, int]:
    """(partitions, records) of ``topic``'s row on the overview page."""
    row = re.search(rf'<tr data-topic="{re.escape(topic)}">(.*?)</tr>', page, re.S)
    assert row, f"{topic} is not on the overview"
    partitions = re.search(r'<td class="n">(\d+)</td>', row.group(1))
    records = re.search(r'<td class="n records">([\d,]+)</td>', row.group(1))
    assert partitions and records
    return int(partitions.group(1)), int(records.group(1).replace(",", ""))


def test_overview_over_sasl_ssl_shows_the_produced_topic(setup: Setup, sasl_ssl_console: str) -> None:
    page = _get(sasl_ssl_console + "/")
    assert _overview_row(page, setup.topic) == (len(STAMPS), sum(len(v) for v in setup.produced.values()))
    # The broker list is what the SASL_SSL listener advertises.
    assert f"localhost:{setup.sb.ports['SASL_SSL']}" in page


def test_timeline_over_sasl_ssl_equals_a_reader_of_each_window(setup: Setup, sasl_ssl_console: str) -> None:
    start, end = BASE - 1_000, BASE + 45_000
    tl = json.loads(_get(f"{sasl_ssl_console}/api/topics/{setup.topic}/timeline"
                         f"?from={start}&to={end}&buckets=9&by=offset"))
    bounds = tl["bounds"]
    assert bounds[0] <= start and bounds[-1] >= end
    stamps = {p: [ts for _, ts, _ in recs] for p, recs in setup.produced.items()}
    assert tl["counts"] == bucket_counts(stamps, bounds)
    assert sum(tl["counts"]) == sum(len(v) for v in stamps.values())
    # By event time (the default), over the same secured connections.
    ev = json.loads(_get(f"{sasl_ssl_console}/api/topics/{setup.topic}/timeline"
                         f"?from={start}&to={end}&buckets=9"))
    assert ev["by"] == "event" and ev["bounds"] == bounds
    assert ev["counts"] == [sum(1 for ts in stamps.values() for t in ts if bounds[i] <= t < bounds[i + 1])
                            for i in range(len(bounds) - 1)]


@pytest.mark.parametrize("partition", sorted(STAMPS))
def test_record_pages_over_sasl_ssl_show_every_produced_record(setup: Setup, sasl_ssl_console: str,
                                                                partition: int) -> None:
    page = _get(f"{sasl_ssl_console}/topics/{setup.topic}/records?partition={partition}&offset=0&limit=50")
    rows = re.findall(r'<tr class="record" data-partition="(\d+)" data-offset="(\d+)" '
                      r'data-timestamp="(\d+)"[^>]*>(.*?)</tr>', page, re.S)
    assert [(int(p), int(o), int(ts)) for p, o, ts, _ in rows] == [
        (partition, o, ts) for o, ts, _ in setup.produced[partition]]
    for (_, _, _, cells), (_, _, key) in zip(rows, setup.produced[partition], strict=True):
        assert key in html.unescape(cells)


def test_ssl_with_a_client_certificate(setup: Setup) -> None:
    """Mutual TLS: the SSL listener requires a client certificate (ssl.certificate.location,
    ssl.key.location); the console's overview lists the topic produced over SASL_SSL."""
    pki = setup.sb.pki
    props = setup.props("mtls.properties", **{
        "bootstrap.servers": f"localhost:{setup.sb.ports['SSL']}", "security.protocol": "SSL",
        "ssl.ca.location": pki.ca, "ssl.certificate.location": pki.path("client.pem"),
        "ssl.key.location": pki.path("client.key"), "ssl.endpoint.identification.algorithm": "https",
    })
    proc, url = start_console(["--client-config", str(props), "--port", str(free_port_number())],
                              setup.tmp / "mtls-console.log")
    try:
        assert _overview_row(_get(url + "/"), setup.topic)[1] == sum(len(v) for v in setup.produced.values())
    finally:
        stop_console(proc)


def _console_exit(props: Path) -> tuple[int, str]:
    """The exit status and stderr of a console that must not start (a hang fails the test
    at the timeout; a timed-out request would say NETWORK_EXCEPTION, not the cause)."""
    r = subprocess.run([sys.executable, "-m", "client.cli", "console", "--client-config", str(props),
                        "--port", str(free_port_number())],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    return r.returncode, r.stderr


def test_a_wrong_password_stops_the_console_with_the_brokers_refusal(setup: Setup) -> None:
    code, err = _console_exit(setup.sasl_ssl("wrong.properties", password="not-" + BOB[1]))
    assert code == 1, err
    assert "SASL_AUTHENTICATION_FAILED" in err


def test_a_broker_certificate_from_another_ca_stops_the_console(setup: Setup) -> None:
    code, err = _console_exit(setup.sasl_ssl("foreign.properties",
                                                   ca=setup.sb.pki.path("foreign-ca.pem")))
    assert code == 1, err
    assert "certificate verify failed" in err.lower()


def test_the_documented_client_example_reads_topics_over_sasl_ssl(setup: Setup) -> None:
    """docs/client.md's ``security=`` example, as written but for this broker's port, CA and
    user: it lists the topic produced over SASL_SSL."""
    code = _doc_block(CLIENT_DOC, "tests/console/test_console_security.py runs this block against one -->")
    for doc_text, ours in (("localhost:9093", f"localhost:{setup.sb.ports['SASL_SSL']}"),
                           ("/etc/chronolog/ca.pem", setup.sb.pki.ca),
                           ('password="alice-secret"', f'password="{BOB[1]}"'),
                           ('username="alice"', f'username="{BOB[0]}"')):
        assert doc_text in code
        code = code.replace(doc_text, ours)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert setup.topic in r.stdout


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "client.cli", *args], input=stdin,
                          capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_cli_commands_take_the_same_client_config(setup: Setup, sasl_ssl_console: str) -> None:
    """topics, produce, consume and groups with ``--client-config`` (the console's
    SASL_SSL file; its bootstrap.servers and request.timeout.ms are not theirs to use),
    bootstrapped at 127.0.0.1 so the leader's and the group coordinator's connections
    (to the advertised ``localhost``) are new ones that must be secured too. The offsets
    the CLI commits show on the console's group page."""
    props = str(setup.sasl_ssl("cli.properties"))
    where = ["--bootstrap-server", f"127.0.0.1:{setup.sb.ports['SASL_SSL']}", "--client-config", props]
    r = _cli("topics", "list", *where)
    assert r.returncode == 0, r.stderr
    assert setup.topic in r.stdout.split()
    topic = unique_topic("cli-secured")
    assert _cli("topics", "create", topic, "--partitions", "1", *where).returncode == 0
    lines = [f"k{i},v{i}" for i in range(5)]
    r = _cli("produce", topic, "--separator", ",", "--key-column", "1", "--print-offsets", *where,
             stdin="".join(line + "\n" for line in lines))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"0\t{i}" for i in range(5)]
    r = _cli("consume", topic, "--from-offset", "0", "--format", "json", "--no-progress", *where)
    assert r.returncode == 0, r.stderr
    got = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(d["offset"], d["key"], d["value"]) for d in got] == [(i, f"k{i}", f"v{i}") for i in range(5)]
    group = unique_topic("cli-group")
    r = _cli("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-offset", "3", *where)
    assert r.returncode == 0, r.stderr
    r = _cli("groups", "list", *where)
    assert r.returncode == 0, r.stderr
    assert group in r.stdout
    page = _get(f"{sasl_ssl_console}/groups/{group}")
    assert re.search(r'<tr class="lag"[^>]*data-partition="0"[^>]*data-committed="3"', page), page


def test_cli_commands_refuse_a_bad_client_config_with_the_cause(setup: Setup) -> None:
    where = ["--bootstrap-server", f"localhost:{setup.sb.ports['SASL_SSL']}", "--client-config"]
    r = _cli("topics", "list", *where, str(setup.sasl_ssl("cli-wrong.properties", password="nope")))
    assert (r.returncode, "SASL_AUTHENTICATION_FAILED" in r.stderr) == (1, True), r.stderr
    r = _cli("consume", setup.topic, *where,
             str(setup.props("cli-truststore.properties", **{"security.protocol": "SSL",
                                                             "ssl.truststore.location": "/x"})))
    assert (r.returncode, "ssl.truststore.location" in r.stderr) == (2, True), r.stderr
    r = _cli("topics", "list", *where, str(setup.tmp / "no-such.properties"))
    assert (r.returncode, "cannot read client config" in r.stderr) == (2, True), r.stderr
