"""client.partitioner agrees with kafka-python's murmur2 (a port of the Java client's)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from client.partitioner import StickyPartitioner, murmur2, partition_for_key


@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(key: bytes) -> None:
    assert murmur2(key) == kafka_python_murmur2(key)


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_partition_matches_java_default_partitioner(key: bytes, n: int) -> None:
    assert partition_for_key(key, n) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % n


def test_known_java_values() -> None:
    # Values from the Java client's UtilsTest.testMurmur2 (signed ints there).
    cases = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829,
             b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
             bytes([ord("a"), ord("b"), ord("c")]): 479470107}
    for key, signed in cases.items():
        assert murmur2(key) == signed & 0xFFFFFFFF


def test_sticky_partitioner_stays_then_rotates() -> None:
    sp = StickyPartitioner(seed=7)
    first = sp.partition("t", 5)
    assert all(sp.partition("t", 5) == first for _ in range(10))
    seen = {first}
    for _ in range(4):
        sp.batch_closed("t", 5)
        seen.add(sp.partition("t", 5))
    assert seen == set(range(5))
