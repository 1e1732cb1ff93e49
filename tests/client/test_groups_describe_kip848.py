"""``chronolog groups describe`` and the console's group page on a KIP-848 group, with real
confluent-kafka consumers (``group.protocol=consumer``) against a real broker.

The oracle is what the consumers say they own (``Consumer.assignment()``, keyed by
``Consumer.memberid()``), the offsets the test committed through them and the records
it produced: the CLI's JSON and table, and the console's page, must show exactly that
(members, each one's partitions, the owner and lag of every partition).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from bench.harness import start_console, stop_console
from client import SyncClient
from client.groups import SyncGroupAdmin
from tests.helpers.broker import BrokerProcess, free_port_number
from tests.helpers.kip848 import FAST_GROUPS

CHRONOLOG = str(Path(sys.executable).parent / "chronolog")
TOPIC = "orders"
PARTITIONS = 6
RECORDS = 10  # per partition: every log end is 10


def wait_until(what: str, cond: Callable[[], bool], pump: list[Consumer], timeout: float = 30.0) -> None:
    """Poll every consumer (their rebalance callbacks run inside poll) until ``cond``."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        for c in pump:
            c.poll(0.05)
        if not pump:
            time.sleep(0.05)


def owned(consumers: list[Consumer]) -> dict[str, dict[str, list[int]]]:
    """The oracle: per member id, the partitions the consumer itself says it owns."""
    out: dict[str, dict[str, list[int]]] = {}
    for c in consumers:
        by_topic: dict[str, list[int]] = {}
        for tp in c.assignment():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out[c.memberid()] = {t: sorted(ps) for t, ps in by_topic.items()}
    return out


def split(consumers: list[Consumer], sizes: list[int]) -> Callable[[], bool]:
    def check() -> bool:
        parts = [tp.partition for c in consumers for tp in c.assignment()]
        return sorted(parts) == list(range(PARTITIONS)) and \
            sorted(len(c.assignment()) for c in consumers) == sorted(sizes)
    return check


def describe_cli(b: BrokerProcess, group: str, *fmt: str) -> str:
    proc = subprocess.run([CHRONOLOG, "groups", "describe", group, *fmt, "--bootstrap-server", b.bootstrap],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


class GroupPage(HTMLParser):
    """The members table (``tr.member``) and lag table (``tr.lag``) of the console's page."""

    def __init__(self) -> None:
        super().__init__()
        self.members: dict[str, dict[str, str]] = {}
        self.lags: list[dict[str, str]] = []
        self.epochs: dict[str, str] = {}
        self._row: dict[str, str] | None = None
        self._cell: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        if tag == "tr" and "member" in classes:
            self._row = self.members.setdefault(a["data-member-id"], {})
        elif tag == "tr" and "lag" in classes:
            self.lags.append({k[5:]: v for k, v in a.items() if k.startswith("data-")})
        elif tag == "td" and self._row is not None and classes:
            self._cell = classes[-1]
            self._row[self._cell] = ""
        elif tag == "span" and a.get("id") in ("group-epoch", "assignment-epoch"):
            self._cell = a["id"]
            self.epochs[self._cell] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "span"):
            self._cell = None
        elif tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell in self.epochs:
            self.epochs[self._cell] += data
        elif self._row is not None and self._cell is not None:
            self._row[self._cell] += data


def page_text(assignment: dict[str, list[int]]) -> str:
    return "; ".join(f"{t}: {', '.join(map(str, ps))}" for t, ps in sorted(assignment.items()))


def table_text(assignment: dict[str, list[int]]) -> str:
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(assignment.items()))


@pytest.fixture
def console(broker_factory: Any, tmp_path: Path) -> Iterator[tuple[BrokerProcess, str]]:
    b = broker_factory(overrides=FAST_GROUPS)
    proc, url = start_console(["--bootstrap-server", b.bootstrap, "--port", str(free_port_number())],
                              tmp_path / "console.log")
    try:
        yield b, url
    finally:
        stop_console(proc)


def test_describe_shows_what_kip848_members_own_in_the_cli_and_the_console(
        console: tuple[BrokerProcess, str]) -> None:
    b, url = console
    group = "g-describe"
    with SyncClient(b.bootstrap) as sc:
        sc.create_topic(TOPIC, PARTITIONS)
    producer = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(PARTITIONS * RECORDS):
        producer.produce(TOPIC, value=str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(10) == 0

    def member(name: str) -> Consumer:
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "group.protocol": "consumer",
                      "client.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "topic.metadata.refresh.interval.ms": 1000})
        c.subscribe([TOPIC])
        return c

    consumers = [member("member-a"), member("member-b")]
    try:
        wait_until("two members split 6 partitions 3/3", split(consumers, [3, 3]), consumers)
        committed = {p: p + 1 for p in range(PARTITIONS)}
        for c in consumers:
            c.commit(offsets=[TopicPartition(TOPIC, tp.partition, committed[tp.partition])
                              for tp in c.assignment()], asynchronous=False)
        check_describe(b, url, group, consumers, committed)

        consumers[1].close()  # a clean leave: its partitions move to the other member
        survivor = consumers[:1]
        wait_until("the survivor owns all 6", split(survivor, [6]), survivor)
        check_describe(b, url, group, survivor, committed)

        survivor[0].close()  # the last member leaves: an Empty KIP-848 group keeps its offsets
        with SyncClient(b.bootstrap) as sc:
            admin = SyncGroupAdmin(sc)
            wait_until("the group is Empty", lambda: admin.describe_group(group).state == "Empty", [])
        desc = json.loads(describe_cli(b, group, "--format", "json"))
        assert (desc["state"], desc["type"], desc["members"]) == ("Empty", "consumer", [])
        assert desc["group_epoch"] is not None
        assert [(p["partition"], p["committed"], p["lag"], p["member_id"]) for p in desc["partitions"]] == [
            (p, committed[p], RECORDS - committed[p], None) for p in range(PARTITIONS)]
    finally:
        for c in consumers:
            try:
                c.close()
            except RuntimeError:
                pass  # already closed


def check_describe(b: BrokerProcess, url: str, group: str, consumers: list[Consumer],
                   committed: dict[int, int]) -> None:
    """The CLI (JSON and table) and the console page against the consumers' assignment()."""
    with SyncClient(b.bootstrap) as sc:
        admin = SyncGroupAdmin(sc)

        def settled() -> bool:  # the coordinator has nothing left to reconcile
            d = admin.describe_group(group)
            return d.state == "Stable" and len(d.members) == len(consumers)

        wait_until("the group is Stable", settled, consumers)
    oracle = owned(consumers)
    client_ids = {c.memberid(): name for c, name in zip(consumers, ["member-a", "member-b"], strict=False)}
    owner = {p: m for m, a in oracle.items() for p in a[TOPIC]}

    desc = json.loads(describe_cli(b, group, "--format", "json"))
    assert owned(consumers) == oracle, "the assignment moved while describing"
    assert (desc["state"], desc["type"], desc["protocol_type"]) == ("Stable", "consumer", "consumer")
    assert desc["protocol"] in ("uniform", "range")
    assert desc["group_epoch"] == desc["assignment_epoch"] >= 1
    assert {m["member_id"]: m["assignment"] for m in desc["members"]} == oracle
    assert {m["member_id"]: m["target_assignment"] for m in desc["members"]} == oracle
    assert {m["member_id"]: m["client_id"] for m in desc["members"]} == client_ids
    for m in desc["members"]:
        assert m["member_epoch"] == desc["group_epoch"] and m["client_host"]
        assert m["subscribed_topics"] == [TOPIC] and m["group_instance_id"] is None
    assert [(p["topic"], p["partition"], p["committed"], p["log_end"], p["lag"], p["member_id"])
            for p in desc["partitions"]] == [
        (TOPIC, p, committed[p], RECORDS, RECORDS - committed[p], owner[p]) for p in range(PARTITIONS)]

    text = describe_cli(b, group).splitlines()
    assert text[0].split() == ["GROUP", group, "STATE", "Stable", "TYPE", "consumer", "PROTOCOL-TYPE",
                               "consumer", "ASSIGNOR", desc["protocol"], "MEMBERS", str(len(oracle)),
                               "GROUP-EPOCH", str(desc["group_epoch"]), "ASSIGNMENT-EPOCH",
                               str(desc["group_epoch"])]
    rows = {line.split()[0]: line.split() for line in text if line.split() and line.split()[0] in oracle}
    assert rows == {m: [m, "-", client_ids[m], rows[m][3], str(desc["group_epoch"]),
                        table_text(a), table_text(a)] for m, a in oracle.items()}

    with urllib.request.urlopen(f"{url}/groups/{urllib.parse.quote(group, safe='')}", timeout=30) as resp:
        page = GroupPage()
        page.feed(resp.read().decode())
    assert owned(consumers) == oracle, "the assignment moved while the page was made"
    assert page.epochs == {"group-epoch": str(desc["group_epoch"]),
                           "assignment-epoch": str(desc["group_epoch"])}
    assert {m: (r["client-id"], r["assignment"], r["target-assignment"]) for m, r in page.members.items()} == {
        m: (client_ids[m], page_text(a), page_text(a)) for m, a in oracle.items()}
    assert [(r["topic"], int(r["partition"]), int(r["committed"]), int(r["log-end"]), int(r["lag"]), r["member"])
            for r in page.lags] == [
        (TOPIC, p, committed[p], RECORDS, RECORDS - committed[p], owner[p]) for p in range(PARTITIONS)]
