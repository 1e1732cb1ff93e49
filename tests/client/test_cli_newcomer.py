"""What a newcomer trips over (issue 28, items 1, 4 and 5), run as a user would: the
installed ``chronolog`` script in subprocesses against a real broker on 127.0.0.1.

Getting data in: JSON lines and CSV generated from random records go through
``chronolog produce`` and come back from ``chronolog consume`` field for field,
timestamps exact. Then the bootstrap variable everywhere, ``describe TOPIC``,
``--version``, a console started before its broker, the ten-digit epoch warning,
the missing-topic hint, and the broker's warning when retention deletes
just-written data whose timestamps are old.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from client_oracle import unique_topic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client.timeparse import format_time

CHRONOLOG = str(Path(sys.executable).parent / "chronolog")
ENV = "CHRONOLOG_BOOTSTRAP_SERVER"
NOW = time.time_ns() // 1_000_000
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=10)
# From 2000 to a day ago: the broker refuses records more than an hour ahead.
stamps = st.integers(min_value=946_684_800_000, max_value=NOW - 86_400_000)
with_broker = settings(max_examples=int(os.environ.get("CHRONOLOG_CLI_EXAMPLES", "8")),
                       suppress_health_check=[HealthCheck.function_scoped_fixture])


def cli(*args: str, stdin: bytes | None = None, check: bool = True,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run([CHRONOLOG, *args], input=stdin, capture_output=True, timeout=120,
                          env=env)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"chronolog {' '.join(args)} exited {proc.returncode}:\n{proc.stderr.decode()}")
    return proc


def new_topic(broker: Any, prefix: str, partitions: int = 1) -> str:
    topic = unique_topic(prefix)
    cli("topics", "create", topic, "--partitions", str(partitions), "--config", "retention.ms=-1",
        "--bootstrap-server", broker.bootstrap)
    return topic


def consumed(broker: Any, topic: str) -> list[dict[str, Any]]:
    out = cli("consume", topic, "--format", "json", "--bootstrap-server", broker.bootstrap)
    return [json.loads(line) for line in out.stdout.splitlines()]


# ----------------------------------------------------------------- 1. getting data in

@with_broker
@given(rows=st.lists(st.tuples(st.none() | text, stamps, text), min_size=1, max_size=12),
       idempotent=st.booleans(), as_number=st.booleans())
def test_json_lines_come_back_field_for_field(
    broker: Any, rows: list[tuple[str | None, int, str]], idempotent: bool, as_number: bool
) -> None:
    topic = new_topic(broker, "jsonl")
    lines = [json.dumps({"user": k, "at": ts if as_number else format_time(ts), "what": v,
                         "n": i}) for i, (k, ts, v) in enumerate(rows)]
    data = "".join(line + "\n" for line in lines).encode()
    args = ["produce", topic, "--input-format", "jsonl", "--key-field", "user",
            "--timestamp-field", "at", "--bootstrap-server", broker.bootstrap]
    out = cli(*args, *(["--idempotent"] if idempotent else []), "--value-field", "what",
              stdin=data)
    assert f"Produced {len(rows)} record(s)" in out.stderr.decode()
    got = consumed(broker, topic)
    assert [(r["key"], r["timestamp"], r["value"]) for r in got] == rows
    # Without --value-field the value is the line itself, byte for byte.
    whole = new_topic(broker, "jsonl-whole")
    cli(*[whole if a == topic else a for a in args], stdin=data)
    assert [r["value"] for r in consumed(broker, whole)] == lines


def _render(ts: int, how: str) -> tuple[str, list[str]]:
    """``ts`` as text in format ``how``, and the produce options that read it."""
    dt = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ts)
    if how == "epoch-s":
        return f"{ts // 1000}.{ts % 1000:03d}", ["--timestamp-format", "epoch-s"]
    if how == "epoch-ms":
        return str(ts), ["--timestamp-format", "epoch-ms"]
    if how == "iso-zoneless-utc":  # the documented default zone
        return dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{ts % 1000:03d}", []
    kolkata = dt.astimezone(ZoneInfo("Asia/Kolkata")).replace(tzinfo=None)
    if how == "iso-in-zone":
        return kolkata.isoformat(timespec="milliseconds"), ["--timezone", "Asia/Kolkata"]
    pattern = "%d/%m/%Y %H:%M:%S.%f"
    return kolkata.strftime(pattern), ["--timestamp-format", pattern, "--timezone",
                                       "Asia/Kolkata"]


@with_broker
@given(rows=st.lists(st.tuples(text, stamps, text), min_size=1, max_size=12),
       how=st.sampled_from(["epoch-s", "epoch-ms", "iso-zoneless-utc", "iso-in-zone",
                            "strftime"]))
def test_csv_rows_come_back_field_for_field(
    broker: Any, rows: list[tuple[str, int, str]], how: str
) -> None:
    topic = new_topic(broker, "csv", partitions=2)
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(["value", "key", "when"])
    options: list[str] = []
    for k, ts, v in rows:
        rendered, options = _render(ts, how)
        w.writerow([v, k, rendered])
    out = cli("produce", topic, "--input-format", "csv", "--key-field", "key",
              "--timestamp-field", "when", "--value-field", "value", *options,
              "--bootstrap-server", broker.bootstrap, stdin=buf.getvalue().encode())
    assert f"Produced {len(rows)} record(s)" in out.stderr.decode()
    got = consumed(broker, topic)
    # Two partitions: compare per key, in input order (one key, one partition).
    by_key: dict[str, list[tuple[int, str]]] = {}
    for k, ts, v in rows:
        by_key.setdefault(k, []).append((ts, v))
    got_by_key: dict[str, list[tuple[int, str]]] = {}
    for r in sorted(got, key=lambda r: (r["partition"], r["offset"])):
        got_by_key.setdefault(r["key"], []).append((r["timestamp"], r["value"]))
    assert got_by_key == by_key


def test_a_malformed_line_stops_with_its_number_or_is_skipped_and_counted(broker: Any) -> None:
    data = (b'{"id": "a", "ts": "2025-11-21T10:00:00Z"}\n'
            b'{"id": "b", "ts": "2025-11-21T10:01:00Z"\n'   # line 2: bad JSON
            b'{"id": "c", "ts": "yesterday"}\n'              # line 3: bad timestamp
            b'{"ts": "2025-11-21T10:03:00Z"}\n'              # line 4: no key field
            b'{"id": "e", "ts": "2025-11-21T10:04:00Z"}\n')
    args = ["--input-format", "jsonl", "--key-field", "id", "--timestamp-field", "ts",
            "--bootstrap-server", broker.bootstrap]
    stop = new_topic(broker, "stop")
    r = cli("produce", stop, *args, stdin=data, check=False)
    err = r.stderr.decode()
    assert r.returncode == 2
    assert "error: line 2: not valid JSON" in err and "(1 record(s) before it" in err
    assert [x["key"] for x in consumed(broker, stop)] == ["a"]
    skip = new_topic(broker, "skip")
    r = cli("produce", skip, *args, "--on-error", "skip", stdin=data)
    err = r.stderr.decode()
    assert "skipped line 2: not valid JSON" in err
    assert "skipped line 3: bad timestamp in field 'ts'" in err
    assert "skipped line 4: no field 'id'" in err
    assert "Skipped 3 malformed line(s)." in err and "Produced 2 record(s)" in err
    assert [x["key"] for x in consumed(broker, skip)] == ["a", "e"]
    # CSV: the line a record starts on, counting the header as line 1.
    csv_topic = new_topic(broker, "csvbad")
    r = cli("produce", csv_topic, "--input-format", "csv", "--key-field", "id",
            "--bootstrap-server", broker.bootstrap, check=False,
            stdin=b'id,note\na,"two\nlines"\nb\n')
    assert r.returncode == 2 and "error: line 4: has 1 field(s), the header has 2" in \
        r.stderr.decode()
    assert [(x["key"], x["value"]) for x in consumed(broker, csv_topic)] == [
        ("a", 'a,"two\nlines"')]


# ------------------------------------------------- 4. one bootstrap variable, describe, version

def _bootstrap_defaults() -> dict[str, Any]:
    """Every (sub)command with a --bootstrap-server option and its default, as parsed."""
    from client.cli import build_parser

    found: dict[str, Any] = {}

    def walk(p: argparse.ArgumentParser, name: str) -> None:
        for a in p._actions:
            if "--bootstrap-server" in a.option_strings:
                found[name] = a.default
            if isinstance(a, argparse._SubParsersAction):
                for sub, sp in a.choices.items():
                    walk(sp, f"{name} {sub}".strip())

    walk(build_parser(), "")
    return found


def test_every_bootstrap_option_defaults_to_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "10.9.8.7:1234")
    defaults = _bootstrap_defaults()
    assert len(defaults) >= 20
    # Resolved when the command runs (they have an alternative to a broker, or a config
    # file that may name one); each is run with only the variable set below.
    late = {"console", "describe", "users add", "users delete", "users list"}
    assert {n for n, d in defaults.items() if d is None} == late
    assert {n: d for n, d in defaults.items() if n not in late} == {
        n: "10.9.8.7:1234" for n in defaults if n not in late}


def test_client_commands_reach_the_broker_named_by_the_variable(broker: Any) -> None:
    topic = new_topic(broker, "env", partitions=2)
    env = {**os.environ, ENV: broker.bootstrap}
    cli("produce", topic, env=env, stdin=b"one\ntwo\n")
    for args in (["topics", "list"], ["topics", "describe", topic], ["describe", topic],
                 ["describe", "--topic", topic], ["offsets", topic, "--time", "earliest"],
                 ["consume", topic], ["groups", "list"], ["users", "list"],
                 ["quotas", "describe"]):
        cli(*args, env=env)
    desc = json.loads(cli("describe", topic, "--json", env=env).stdout)
    assert sum(p["log_end_offset"] for p in desc["partitions"]) == 2
    r = cli("describe", topic, "--topic", "other", env=env, check=False)
    assert r.returncode == 2 and "two topics" in r.stderr.decode()


def test_version_is_the_package_version() -> None:
    from importlib.metadata import version

    assert cli("--version").stdout.decode().strip() == f"chronolog {version('chronolog')}"


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return int(resp.status)


def test_console_started_before_the_broker_waits_for_it_then_serves(
    broker_process_class: Any, tmp_path: Path, free_port: int
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        console_port = s.getsockname()[1]
    broker_port = free_port
    env = {**os.environ, ENV: f"127.0.0.1:{broker_port}"}
    console = subprocess.Popen(
        [CHRONOLOG, "console", "--port", str(console_port)], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    b = None
    try:
        assert console.stderr is not None and console.stdout is not None
        first = console.stderr.readline().decode()
        assert first.startswith(f"broker at 127.0.0.1:{broker_port} not reachable yet, retrying")
        assert console.stdout.readline().decode().startswith(
            f"chronolog console on http://127.0.0.1:{console_port}/ (broker 127.0.0.1:{broker_port}")
        time.sleep(1.5)  # a retry or two, still waiting, still running
        assert console.poll() is None
        with pytest.raises(urllib.error.HTTPError) as waiting:
            _get(f"http://127.0.0.1:{console_port}/")
        assert waiting.value.code == 503
        (tmp_path / "data").mkdir()
        b = broker_process_class(tmp_path / "data", broker_port).start()
        deadline = time.monotonic() + 30
        while True:
            try:
                assert _get(f"http://127.0.0.1:{console_port}/") == 200
                break
            except urllib.error.HTTPError:
                assert time.monotonic() < deadline, "the console never reached the broker"
                time.sleep(0.2)
        console.send_signal(signal.SIGTERM)
        assert console.wait(30) == 0
        assert "NETWORK_EXCEPTION" not in console.stderr.read().decode()
    finally:
        if console.poll() is None:
            console.kill()
            console.wait()
        if b is not None:
            b.stop()


def test_console_waiting_for_a_broker_stops_cleanly_on_sigterm(free_port: int) -> None:
    console = subprocess.Popen(
        [CHRONOLOG, "console", "--port", "0", "--bootstrap-server", f"127.0.0.1:{free_port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert console.stderr is not None
    assert console.stderr.readline().startswith(b"broker at ")
    console.send_signal(signal.SIGTERM)
    assert console.wait(30) == 0


# --------------------------------------------------------- 5. times that are probably a mistake

SECONDS = "1700000000"
WARNING = ("1700000000 read as milliseconds = 1970-01-20T16:13:20Z; as seconds it would be "
           "2023-11-14T22:13:20Z — pass 1700000000000 or an ISO time")


def test_ten_digit_epochs_warn_naming_both_readings(broker: Any) -> None:
    topic = new_topic(broker, "secs")
    bs = ["--bootstrap-server", broker.bootstrap]
    for args in (["consume", topic, "--from-time", SECONDS], ["consume", topic, "--until", SECONDS],
                 ["offsets", topic, "--time", SECONDS]):
        assert f"warning: {WARNING}" in cli(*args, *bs).stderr.decode()
    out = cli("produce", topic, "--timestamp-column", "1", *bs,
              stdin=f"{SECONDS}\ta\n{SECONDS}\tb\n".encode())
    err = out.stderr.decode()
    assert f"warning: line 1: {WARNING}" in err
    assert "warning: 2 timestamps had ten digits and were read as milliseconds" in err
    out = cli("produce", topic, "--input-format", "jsonl", "--timestamp-field", "t",
              "--timestamp-format", "epoch-ms", *bs, stdin=b'{"t": 1700000000}\n')
    assert f"warning: line 1: {WARNING}" in out.stderr.decode()
    # Read as milliseconds all the same (Kafka's unit), and no warning for 13 digits.
    assert [r["timestamp"] for r in consumed(broker, topic)] == [1_700_000_000] * 3
    assert "warning" not in cli("offsets", topic, "--time", "1700000000000", *bs).stderr.decode()


def test_a_missing_topic_says_how_to_create_it(broker: Any) -> None:
    hint = ("topic 'nope' does not exist: create it with `chronolog topics create nope "
            "--partitions N`")
    bs = ["--bootstrap-server", broker.bootstrap]
    for args in (["produce", "nope"], ["consume", "nope"], ["offsets", "nope", "--time", "now"],
                 ["describe", "nope"]):
        r = cli(*args, *bs, stdin=b"x\n", check=False)
        err = r.stderr.decode()
        assert r.returncode == 1, (args, err)
        assert "UNKNOWN_TOPIC_OR_PARTITION" in err and hint in err, (args, err)
        assert "auto.create.topics.enable" in err


def test_retention_deleting_just_written_old_data_warns_once_per_partition(
    broker_factory: Any
) -> None:
    broker = broker_factory({"log.retention.check.interval.ms": "200"})
    topic = unique_topic("history")
    bs = ["--bootstrap-server", broker.bootstrap]
    cli("topics", "create", topic, "--partitions", "2", *bs)  # the default 7-day retention
    # Two keys that land on different partitions, each with 2020 timestamps.
    year_2020 = b"".join(b"%d\t2020-01-0%dT00:00:00Z\tv\n" % (i, 1 + i % 9) for i in range(20))
    for _ in range(2):
        cli("produce", topic, "--key-column", "1", "--timestamp-column", "2", *bs,
            stdin=year_2020)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ends = json.loads(cli("topics", "describe", topic, "--format", "json",
                                  *bs).stdout)["partitions"]
            if all(p["log_start_offset"] == p["log_end_offset"] for p in ends):
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"retention did not delete the 2020 records:\n{broker.log()}")
    warnings = [line for line in broker.log().splitlines() if " WARNING " in line
                and "retention" in line]
    assert len(warnings) == 2, "\n".join(warnings)
    for p, line in enumerate(sorted(warnings, key=lambda w: f"{topic}-1" in w)):
        assert f"of {topic}-{p} written only" in line
        assert re.search(r"timestamps \(CreateTime, the newest 2020-01-\d\dT00:00:00Z\)", line)
        assert "retention.ms=604800000 (7 days)" in line
        assert "log.retention.ms" in line and "retention.ms=-1" in line


# ------------------------------------------------------------------ the documented examples

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _doc_example(marker: str) -> tuple[list[str], str]:
    """The setup commands and the code of docs/cli.md's ```sh block containing ``marker``."""
    text = DOC.read_text()
    found = [m for m in re.finditer(r"^```sh\n(.*?)^```", text, re.M | re.S)
             if marker in m.group(1)]
    assert len(found) == 1, marker
    above = text[: found[0].start()].splitlines()
    setup = re.findall(r"^<!--\s*example:\s*setup:\s*(.*?)\s*-->$", above[-1])
    return setup, found[0].group(1)


def test_the_documented_jsonl_and_csv_examples_give_what_the_page_says(
    broker: Any, tmp_path: Path
) -> None:
    env = {**os.environ, ENV: broker.bootstrap,
           "PATH": f"{Path(CHRONOLOG).parent}{os.pathsep}{os.environ['PATH']}"}
    for marker in ("--input-format jsonl", "--input-format csv"):
        setup, code = _doc_example(marker)
        for cmd in [*setup, code]:
            subprocess.run(["bash", "-e", "-o", "pipefail", "-c", cmd], cwd=tmp_path, env=env,
                           check=True, capture_output=True, timeout=120)
    orders = sorted(consumed(broker, "orders"), key=lambda r: r["timestamp"])
    assert [(r["key"], r["timestamp_iso"], json.loads(r["value"])["order"]) for r in orders] == [
        ("alice", "2025-11-21T10:30:00.000Z", "o-1"), ("bob", "2025-11-21T10:31:00.000Z", "o-2")]
    weather = sorted(consumed(broker, "weather"), key=lambda r: r["timestamp"])
    assert [(r["key"], r["timestamp_iso"], r["value"]) for r in weather] == [
        ("Paris", "2025-11-21T10:30:00.000Z", "4 C, windy"),
        ("Lyon", "2025-11-21T10:45:00.000Z", 'said "cold"')]
