"""``chronolog groups``: list, describe, delete and reset-offsets, run as the installed
script against the real broker, checked against a brute-force oracle and against what
real consumers (confluent-kafka) then do.

The oracle of a reset is kafka-consumer-groups' definition (groups-facts §4): per
partition, to-time = the first offset whose timestamp is >= T, else the log end;
to-offset / shift-by are clamped to [earliest, latest].
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from hypothesis import example, given, settings
from hypothesis import strategies as st

from client import SyncClient
from client.groups import SyncGroupAdmin, parse_duration
from protocol.consumer_protocol import decode_assignment, decode_subscription, encode_assignment
from protocol.errors import ErrorCode, KafkaError
from tests.helpers.broker import BrokerProcess
from tests.helpers.clients import (
    BASE_TS,
    first_at_or_after,
    index_valued,
    running_broker,
    topic_name,
)
from tests.helpers.confluent import create_topic, produce

CHRONOLOG = str(Path(sys.executable).parent / "chronolog")
TIMEOUT = 30.0
PARTITIONS = 3


@pytest.fixture(scope="module")
def gb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, "groups-cli", {"group.initial.rebalance.delay.ms": "0"}) as b:
        yield b


def groups(b: BrokerProcess, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([CHRONOLOG, "groups", *args, "--bootstrap-server", b.bootstrap],
                          capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, f"groups {args} exited {proc.returncode}:\n{proc.stderr}"
    return proc


def reset(b: BrokerProcess, group: str, *args: str, check: bool = True) -> Any:
    proc = groups(b, "reset-offsets", "--group", group, *args, "--format", "json", check=check)
    return json.loads(proc.stdout) if proc.returncode == 0 else proc


def committed(b: BrokerProcess, group: str) -> dict[tuple[str, int], int]:
    with SyncClient(b.bootstrap) as c:
        return {(tp.topic, tp.partition): o for tp, o in SyncGroupAdmin(c).committed_offsets(group).items()}


def commit(b: BrokerProcess, group: str, offsets: dict[int, int], topic: str) -> None:
    """Commit as a group-less consumer does (generation -1): the group stays Empty."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def fill(b: BrokerProcess, per_partition: Sequence[Sequence[int]], prefix: str) -> str:
    """A topic whose partition p holds records with timestamps per_partition[p], in that order."""
    topic = topic_name(prefix)
    create_topic(b, topic, partitions=len(per_partition))
    for p, times in enumerate(per_partition):
        if times:
            produce(b, topic, index_valued(list(times)), partition=p)
    return topic


def oracle_to_time(times: Sequence[int], t: int) -> int:
    hit = first_at_or_after(list(enumerate(times)), t)
    return len(times) if hit is None else hit


def first_offsets_of_a_restarted_consumer(b: BrokerProcess, group: str, topic: str,
                                          subscribe: bool) -> dict[int, int]:
    """Where a new consumer of the group starts in each partition: the offset of the first
    record it receives (each partition ends with a sentinel record, so there is one)."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "error", "fetch.wait.max.ms": 50, "session.timeout.ms": 6000})
    first: dict[int, int] = {}
    try:
        if subscribe:
            c.subscribe([topic])
        else:
            c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])  # offsets: the group's
        deadline = time.monotonic() + TIMEOUT
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            for m in c.consume(num_messages=100, timeout=0.5):
                assert m.error() is None, m.error()
                first.setdefault(m.partition(), m.offset())
    finally:
        c.close()
    return first


def first_offsets_after_sentinels(b: BrokerProcess, group: str, topic: str,
                                  subscribe: bool) -> dict[int, int]:
    """Append a sentinel record to every partition (so a consumer positioned at the log end
    receives one), then: where a restarted consumer of the group starts."""
    now = time.time_ns() // 1_000_000
    for p in range(PARTITIONS):
        produce(b, topic, index_valued([now]), partition=p)
    return first_offsets_of_a_restarted_consumer(b, group, topic, subscribe)


times_per_partition = st.lists(
    st.lists(st.integers(BASE_TS, BASE_TS + 40), max_size=12), min_size=PARTITIONS, max_size=PARTITIONS)


@settings(max_examples=3)
@given(per_partition=times_per_partition, pick=st.integers(-2, 45), subscribe=st.booleans())
# Always: a time after every record (each partition starts at its end), and one inside
# out-of-order CreateTimes where the first match is not the closest timestamp.
@example(per_partition=[[BASE_TS + 5, BASE_TS + 1], [], [BASE_TS + 40, BASE_TS + 3]], pick=41,
         subscribe=True)
@example(per_partition=[[BASE_TS + 30, BASE_TS + 10, BASE_TS + 20], [BASE_TS + 9, BASE_TS + 9],
                        [BASE_TS + 1, BASE_TS + 25, BASE_TS + 12]], pick=12, subscribe=False)
def test_reset_to_time_moves_a_restarted_consumer_to_the_oracle_offset(
    gb: BrokerProcess, per_partition: list[list[int]], pick: int, subscribe: bool
) -> None:
    """Out-of-order and equal CreateTimes; T ranges from before the first record to after
    the last (where the consumer must start at the log end)."""
    topic = fill(gb, per_partition, "reset-time")
    group = topic_name("g-time")
    commit(gb, group, {p: 0 for p in range(PARTITIONS)}, topic)
    t = BASE_TS + pick
    plan = reset(gb, group, "--topic", topic, "--to-time", str(t))
    want = {p: oracle_to_time(times, t) for p, times in enumerate(per_partition)}
    assert plan["applied"] is True
    assert {e["partition"]: e["new"] for e in plan["partitions"]} == want
    assert committed(gb, group) == {(topic, p): o for p, o in want.items()}
    assert first_offsets_after_sentinels(gb, group, topic, subscribe) == want


@settings(max_examples=6)
@given(
    per_partition=times_per_partition,
    start=st.lists(st.integers(0, 14), min_size=PARTITIONS, max_size=PARTITIONS),
    scenario=st.sampled_from(["--to-earliest", "--to-latest", "--to-offset", "--shift-by"]),
    n=st.integers(-20, 20),
    only=st.one_of(st.none(), st.lists(st.integers(0, PARTITIONS - 1), min_size=1, unique=True)),
)
def test_reset_scenarios_are_clamped_to_the_log_like_kafkas_tool(
    gb: BrokerProcess, per_partition: list[list[int]], start: list[int], scenario: str, n: int,
    only: list[int] | None,
) -> None:
    topic = fill(gb, per_partition, "reset-sc")
    group = topic_name("g-sc")
    before = {p: min(s, len(per_partition[p])) for p, s in enumerate(start)}
    commit(gb, group, before, topic)
    scope = topic if only is None else f"{topic}:{','.join(map(str, only))}"
    args = [scenario] + ([str(n)] if scenario in ("--to-offset", "--shift-by") else [])
    plan = reset(gb, group, "--topic", scope, *args)
    in_scope = sorted(only) if only is not None else list(range(PARTITIONS))

    def oracle(p: int) -> int:
        latest = len(per_partition[p])
        new = {"--to-earliest": 0, "--to-latest": latest, "--to-offset": n,
               "--shift-by": before[p] + n}[scenario]
        return min(max(new, 0), latest)

    want = {p: oracle(p) for p in in_scope}
    assert [(e["partition"], e["current"], e["new"]) for e in plan["partitions"]] == \
        [(p, before[p], want[p]) for p in in_scope]
    assert committed(gb, group) == {(topic, p): want.get(p, before[p]) for p in range(PARTITIONS)}


def test_dry_run_prints_the_plan_and_writes_nothing(gb: BrokerProcess) -> None:
    topic = fill(gb, [[BASE_TS + 5, BASE_TS + 1, BASE_TS + 9]] * PARTITIONS, "dry")
    group = topic_name("g-dry")
    commit(gb, group, {0: 3, 1: 2}, topic)
    plan = reset(gb, group, "--all-topics", "--to-time", str(BASE_TS + 2), "--dry-run")
    assert plan["applied"] is False
    # --all-topics: the partitions the group has committed, nothing else.
    assert [(e["partition"], e["current"], e["new"]) for e in plan["partitions"]] == [(0, 3, 0), (1, 2, 0)]
    assert committed(gb, group) == {(topic, 0): 3, (topic, 1): 2}
    table = groups(gb, "reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--dry-run")
    assert "NEW-OFFSET" in table.stdout and "nothing changed" in table.stderr
    assert committed(gb, group) == {(topic, 0): 3, (topic, 1): 2}


def test_reset_a_group_that_never_committed_creates_its_offsets(gb: BrokerProcess) -> None:
    topic = fill(gb, [[BASE_TS + 1, BASE_TS + 2]] * PARTITIONS, "fresh")
    group = topic_name("g-new")
    plan = reset(gb, group, "--topic", f"{topic}:1", "--to-latest")
    assert [(e["partition"], e["current"], e["new"]) for e in plan["partitions"]] == [(1, None, 2)]
    assert committed(gb, group) == {(topic, 1): 2}


def test_shift_by_without_a_committed_offset_fails_and_writes_nothing(gb: BrokerProcess) -> None:
    topic = fill(gb, [[BASE_TS]] * PARTITIONS, "shift")
    group = topic_name("g-shift")
    commit(gb, group, {0: 1}, topic)
    proc = reset(gb, group, "--topic", topic, "--shift-by", "-1", check=False)
    assert proc.returncode == 1 and f"{topic}:1" in proc.stderr
    assert committed(gb, group) == {(topic, 0): 1}


def test_by_duration_resolves_from_now(gb: BrokerProcess) -> None:
    now = time.time_ns() // 1_000_000
    times = [now - 600_000, now - 60_000, now - 900_000, now - 30_000]
    topic = fill(gb, [times] * PARTITIONS, "dur")
    group = topic_name("g-dur")
    plan = reset(gb, group, "--topic", topic, "--by-duration", "PT5M")
    assert {e["partition"]: e["new"] for e in plan["partitions"]} == {p: 1 for p in range(PARTITIONS)}
    plan = reset(gb, group, "--topic", topic, "--by-duration", "PT20M")
    assert {e["partition"]: e["new"] for e in plan["partitions"]} == {p: 0 for p in range(PARTITIONS)}
    plan = reset(gb, group, "--topic", topic, "--to-time", "-5m")  # a relative time, as a value
    assert {e["partition"]: e["new"] for e in plan["partitions"]} == {p: 1 for p in range(PARTITIONS)}


def test_all_topics_and_repeated_topic_scopes(gb: BrokerProcess) -> None:
    """--all-topics takes every committed partition of every topic; --topic repeats, and a
    bare topic covers all its partitions even when also listed with some."""
    a = fill(gb, [[BASE_TS] * 2, [BASE_TS] * 3, [BASE_TS] * 4], "scope-a")
    b = fill(gb, [[BASE_TS] * 5, [BASE_TS] * 6, []], "scope-b")
    group = topic_name("g-scope")
    commit(gb, group, {0: 0, 2: 1}, a)
    commit(gb, group, {1: 2}, b)
    plan = reset(gb, group, "--all-topics", "--to-latest")
    assert [(e["topic"], e["partition"], e["current"], e["new"]) for e in plan["partitions"]] == \
        [(a, 0, 0, 2), (a, 2, 1, 4), (b, 1, 2, 6)]
    plan = reset(gb, group, "--topic", f"{b}:0", "--topic", f"{a}:1", "--topic", f"{b}:2",
                 "--to-earliest")
    assert [(e["topic"], e["partition"]) for e in plan["partitions"]] == [(a, 1), (b, 0), (b, 2)]
    plan = reset(gb, group, "--topic", f"{a}:1", "--topic", a, "--to-offset", "3", "--dry-run")
    assert [(e["partition"], e["new"]) for e in plan["partitions"]] == [(0, 2), (1, 3), (2, 3)]
    proc = reset(gb, group, "--topic", f"{a}:7", "--to-earliest", check=False)
    assert proc.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in proc.stderr


def test_bad_arguments_exit_2(gb: BrokerProcess) -> None:
    for args in (["--topic", "t", "--to-time", "2026-01-01T00:00:00"],  # no zone
                 ["--topic", "t", "--by-duration", "five minutes"],
                 ["--topic", "t:x", "--to-earliest"],
                 ["--topic", "t", "--to-earliest", "--to-latest"],
                 ["--all-topics"]):
        proc = groups(gb, "reset-offsets", "--group", "g", *args, check=False)
        assert proc.returncode == 2, (args, proc.stderr)


@pytest.mark.parametrize(("text", "ms"), [
    ("PT15M", 900_000), ("P1DT2H", 93_600_000), ("PT0.5S", 500), ("PT1H30M", 5_400_000),
    ("P2D", 172_800_000), ("15m", 900_000), ("250ms", 250), ("-PT1M", -60_000),
])
def test_parse_duration_reads_javas_format_and_short_forms(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "15", "1h30m", "P1H"])
def test_parse_duration_rejects_other_text(text: str) -> None:
    with pytest.raises(ValueError, match="PnDTnHnMnS"):
        parse_duration(text)


@settings(max_examples=50)
@given(st.dictionaries(st.text(min_size=1, max_size=8), st.lists(st.integers(0, 2**31 - 1), unique=True),
                       max_size=4), st.integers(0, 3))
def test_assignment_blobs_decode_like_kafka_pythons_encoder(assignment: dict[str, list[int]],
                                                            version: int) -> None:
    """Our declarative ConsumerProtocolAssignment reads what kafka-python writes, and back."""
    from kafka.protocol.old.consumer_protocol import ConsumerProtocolMemberAssignment_v0

    theirs = ConsumerProtocolMemberAssignment_v0(0, sorted(assignment.items()), b"").encode()
    want = {t: sorted(ps) for t, ps in assignment.items() if ps}
    assert {t: ps for t, ps in decode_assignment(theirs).items() if ps} == want
    assert decode_assignment(encode_assignment(assignment, version)) == \
        {t: sorted(ps) for t, ps in assignment.items()}
    assert decode_subscription(b"") == []


DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
EXAMPLE_INPUT = (  # the five records of docs/cli.md's first example
    b"alice\t2025-11-21T10:30:00Z\tlogin\nbob\t2025-11-21T10:31:00Z\tlogin\n"
    b"carol\t2025-11-21T10:31:30Z\tlogin\ndave\t2025-11-21T10:29:00Z\tlogin\n"
    b"alice\t2025-11-21T10:32:00Z\tlogout\n"
)


def docs_transcript() -> list[tuple[list[str], list[str]]]:
    """The ``$ chronolog groups ...`` commands of docs/cli.md's groups example, each with
    the output lines the page shows for it."""
    section = DOCS.read_text().split("## `chronolog groups`", 1)[1]
    block = next(b for b in section.split("```")[1::2] if "$ chronolog groups describe" in b)
    steps: list[tuple[list[str], list[str]]] = []
    for line in block.strip("\n").splitlines():
        if line.startswith("$ "):
            steps.append((line[2:].split()[1:], []))
        else:
            steps[-1][1].append(line.rstrip())
    return steps


def test_the_docs_example_prints_what_the_page_shows(gb: BrokerProcess) -> None:
    """docs/cli.md: a group that read the five example records, described and rewound."""
    base = ["--bootstrap-server", gb.bootstrap]
    subprocess.run([CHRONOLOG, "topics", "create", "events", "--partitions", "3",
                    "--config", "retention.ms=-1", *base], check=True, capture_output=True)
    subprocess.run([CHRONOLOG, "produce", "events", "--key-column", "1", "--timestamp-column", "2",
                    *base], input=EXAMPLE_INPUT, check=True, capture_output=True)
    c = Consumer({"bootstrap.servers": gb.bootstrap, "group.id": "billing", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50})
    try:
        c.subscribe(["events"])
        got: list[Any] = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < 5 and time.monotonic() < deadline:
            got += [m for m in c.consume(num_messages=5, timeout=0.5) if m.error() is None]
        assert len(got) == 5
        c.commit(asynchronous=False)
    finally:
        c.close()
    steps = docs_transcript()
    assert len(steps) >= 3
    for args, shown in steps:
        proc = subprocess.run([CHRONOLOG, *args, *base], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, (args, proc.stderr)
        assert [line.rstrip() for line in proc.stdout.splitlines()] == shown, args
    assert first_offsets_after_sentinels(gb, "billing", "events", subscribe=True) == {0: 0, 1: 1, 2: 0}
    # docs/client.md's example does the same reset through client.groups (the sentinels,
    # stamped now, are at or after 10:31: partition 1's answer is its sentinel, offset 1).
    example = (DOCS.parent / "client.md").read_text().split("## Consumer groups", 1)[1]
    code = example.split("```python\n", 1)[1].split("```", 1)[0]
    done = subprocess.run([sys.executable, "-c", code.replace("127.0.0.1:9092", gb.bootstrap)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[(0, 1), (1, 1), (2, 0)]"


def test_active_group_is_described_refused_and_deleted_once_empty(gb: BrokerProcess) -> None:
    """While a real consumer is a member: describe shows it with its decoded assignment,
    reset-offsets (dry run too) is refused with Kafka's message and writes nothing, delete
    is NON_EMPTY_GROUP. After it closes: Empty, deletable once, then GROUP_ID_NOT_FOUND."""
    topic = fill(gb, [[BASE_TS + 1, BASE_TS + 2]] * PARTITIONS, "active")
    group = topic_name("g-active")
    c = Consumer({"bootstrap.servers": gb.bootstrap, "group.id": group, "client.id": "the-member",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert len(c.assignment()) == PARTITIONS
        c.commit(offsets=[TopicPartition(topic, p, 1) for p in range(PARTITIONS)], asynchronous=False)
        desc = json.loads(groups(gb, "describe", group, "--format", "json").stdout)
        assert (desc["state"], desc["protocol_type"], len(desc["members"])) == ("Stable", "consumer", 1)
        member = desc["members"][0]
        assert (member["client_id"], member["assignment"]) == ("the-member", {topic: [0, 1, 2]})
        assert member["client_host"]
        # a classic group: DescribeGroups, so no KIP-848 epochs or target assignment
        assert (desc["group_epoch"], member["member_epoch"], member["target_assignment"]) == (None, None, None)
        assert [(p["partition"], p["committed"], p["log_end"], p["lag"], p["member_id"])
                for p in desc["partitions"]] == [(p, 1, 2, 1, member["member_id"]) for p in range(PARTITIONS)]
        for extra in ([], ["--dry-run"]):
            proc = groups(gb, "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", *extra,
                          check=False)
            assert proc.returncode == 1
            assert proc.stderr.strip() == (f"Error: Assignments can only be reset if the group '{group}' "
                                           "is inactive, but the current state is Stable.")
        assert committed(gb, group) == {(topic, p): 1 for p in range(PARTITIONS)}
        # Were a member to join between the check and the commit, the broker refuses it.
        with SyncClient(gb.bootstrap) as sc:
            admin = SyncGroupAdmin(sc)
            plan = admin.plan_reset(group, {topic: None}, to_earliest=True)
            with pytest.raises(KafkaError) as refused:
                admin.commit_plan(group, plan)
        assert refused.value.code == ErrorCode.UNKNOWN_MEMBER_ID
        assert committed(gb, group) == {(topic, p): 1 for p in range(PARTITIONS)}
        proc = groups(gb, "delete", group, check=False)
        assert proc.returncode == 1 and "NON_EMPTY_GROUP" in proc.stderr
        listed = json.loads(groups(gb, "list", "--format", "json").stdout)["groups"]
        assert {"group_id": group, "protocol_type": "consumer", "state": "Stable", "type": "classic"} in listed
        stable = groups(gb, "list", "--state", "Stable").stdout.split()
        assert group in stable and group not in groups(gb, "list", "--state", "Empty").stdout.split()
    finally:
        c.close()
    assert json.loads(groups(gb, "describe", group, "--format", "json").stdout)["state"] == "Empty"
    assert groups(gb, "delete", group).stdout.strip() == f"deleted group {group}"
    assert committed(gb, group) == {}
    listed = json.loads(groups(gb, "list", "--format", "json").stdout)["groups"]
    assert group not in [g["group_id"] for g in listed]
    proc = groups(gb, "delete", group, check=False)
    assert proc.returncode == 1 and "GROUP_ID_NOT_FOUND" in proc.stderr
    assert json.loads(groups(gb, "describe", group, "--format", "json").stdout)["state"] == "Dead"
