"""Protocol codec cost per message, this tree against a base commit (default ``main``), in one run.

Both sides are measured in fresh interpreters through the public entry points of
``protocol.api`` (``decode_request``, ``encode_response``, ``encode_request``,
``decode_response``), on the messages every produce, fetch and timestamp lookup
pays for, plus Metadata (no hand-written path before the generated codecs).
Bodies are dicts on both sides (what the client and tests pass); where this tree
also takes typed messages (what its handlers return), a "typed" row is added.
``CHRONOLOG_BENCH_PROTOCOL_BASE`` names another base commit.

Run as a script (``python bench/bench_protocol.py --measure``) it prints the
measurements of whatever ``protocol`` is first on ``sys.path`` as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

SECTION = "protocol"
N = 5000
REPO = Path(__file__).resolve().parent.parent
BASE = os.environ.get("CHRONOLOG_BENCH_PROTOCOL_BASE", "main")


def measure() -> dict[str, float]:
    """µs per call (median) of each case, for the ``protocol`` package on ``sys.path``."""
    from bench.report import median, time_calls
    from protocol import api

    typed: Callable[[int, Any, bool], Any] | None = None
    if hasattr(api, "CLASSES"):  # a tree with generated message classes
        from protocol.codegen import from_mapping

        def typed(key: int, body: Any, response: bool) -> Any:
            return from_mapping(api.CLASSES[api.ApiKey(key)][1 if response else 0], body)

    out: dict[str, float] = {}

    def us(name: str, fn: Callable[[], object], n: int = N) -> None:
        for _ in range(200):
            fn()
        out[name] = median(time_calls(fn, n))

    def response(name: str, key: int, version: int, body: dict[str, Any], n: int = N) -> None:
        us(f"{name} (dict)", partial(api.encode_response, key, version, 1, body), n)
        if typed is not None:
            us(f"{name} (typed)", partial(api.encode_response, key, version, 1, typed(key, body, True)), n)

    def request(name: str, key: int, version: int, body: dict[str, Any], parts: bool = False) -> None:
        encode = api.encode_request_parts if parts else api.encode_request
        us(f"{name} (dict)", partial(encode, key, version, 1, "bench", body))
        if typed is not None:
            us(f"{name} (typed)", partial(encode, key, version, 1, "bench", typed(key, body, False)))

    key = api.ApiKey
    lo_body = {"replica_id": -1, "isolation_level": 1, "topics": [
        {"name": "events", "partitions": [{"partition_index": 0, "timestamp": 1_700_000_000_000}]}]}
    lo_resp = {"topics": [{"name": "events", "partitions": [
        {"partition_index": 0, "error_code": 0, "timestamp": 1_700_000_000_000, "offset": 123_456,
         "leader_epoch": 0}]}]}
    for v in (1, 7, 10):
        frame = api.encode_request(key.LIST_OFFSETS, v, 1, "rdkafka", lo_body)[4:]
        us(f"ListOffsets v{v} request decode", partial(api.decode_request, frame))
        response(f"ListOffsets v{v} response encode", key.LIST_OFFSETS, v, lo_resp)
    av_req = {"client_software_name": "librdkafka", "client_software_version": "2.16.0"}
    av_resp = {"api_keys": api.advertised_api_keys()}
    for v in (0, 3):
        frame = api.encode_request(key.API_VERSIONS, v, 1, "rdkafka", av_req)[4:]
        us(f"ApiVersions v{v} request decode", partial(api.decode_request, frame))
        response(f"ApiVersions v{v} response encode", key.API_VERSIONS, v, av_resp)

    lo_frame = api.encode_response(key.LIST_OFFSETS, 7, 1, lo_resp)[4:]
    av_frame = api.encode_response(key.API_VERSIONS, 3, 1, av_resp)[4:]
    request("client: ListOffsets v7 request encode", key.LIST_OFFSETS, 7, lo_body)
    us("client: ListOffsets v7 response decode", partial(api.decode_response, key.LIST_OFFSETS, 7, lo_frame))
    request("client: ApiVersions v3 request encode", key.API_VERSIONS, 3, av_req)
    us("client: ApiVersions v3 response decode", partial(api.decode_response, key.API_VERSIONS, 3, av_frame))

    batch = b"r" * 16_384
    produce = {"acks": -1, "timeout_ms": 30_000, "topic_data": [
        {"name": "events", "partition_data": [{"index": p, "records": batch} for p in range(4)]}]}
    for v in (7, 9, 11):
        frame = api.encode_request(key.PRODUCE, v, 1, "rdkafka", produce)[4:]
        us(f"Produce v{v} request decode (4 x 16 KiB)", partial(api.decode_request, frame))
    request("client: Produce v9 request encode in parts (4 x 16 KiB)", key.PRODUCE, 9, produce, parts=True)
    produce_resp = {"responses": [{"name": "events", "partition_responses": [
        {"index": p, "base_offset": 1000 * p} for p in range(4)]}]}
    response("Produce v9 response encode (4 partitions)", key.PRODUCE, 9, produce_resp)

    blob = memoryview(b"f" * (1 << 20))
    fetch_resp = {"responses": [{"topic": "events", "partitions": [
        {"partition_index": 0, "high_watermark": 10, "last_stable_offset": 10, "log_start_offset": 0,
         "aborted_transactions": None, "records": blob}]}]}
    for v in (4, 11, 12):
        response(f"Fetch v{v} response encode (1 MiB records)", key.FETCH, v, fetch_resp, n=500)
    fetch_req = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "topics": [
        {"topic": "events", "partitions": [{"partition": p, "fetch_offset": 10 * p, "partition_max_bytes": 1 << 20}
                                           for p in range(4)]}]}
    frame = api.encode_request(key.FETCH, 12, 1, "rdkafka", fetch_req)[4:]
    us("Fetch v12 request decode (4 partitions)", partial(api.decode_request, frame))

    md_req = {"topics": [{"name": "events"}], "allow_auto_topic_creation": False}
    frame = api.encode_request(key.METADATA, 12, 1, "rdkafka", md_req)[4:]
    us("Metadata v12 request decode", partial(api.decode_request, frame))
    md_resp = {"brokers": [{"node_id": 0, "host": "127.0.0.1", "port": 9092}], "cluster_id": "c",
               "controller_id": 0, "topics": [{"name": "events", "topic_id": bytes(16), "partitions": [
                   {"partition_index": p, "leader_id": 0, "replica_nodes": [0], "isr_nodes": [0]}
                   for p in range(8)]}]}
    response("Metadata v12 response encode (8 partitions)", key.METADATA, 12, md_resp)
    return out


def _side(tree: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    result = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--measure"], env=env,
                            cwd=str(tree), check=True, capture_output=True, text=True)
    parsed: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return parsed


def run(report: Any, scratch: str) -> None:
    base_tree = Path(scratch) / "base-tree"
    base_tree.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", BASE], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(base_tree)], input=archive, check=True)
    base = _side(base_tree)
    head = _side(REPO)
    for name, value in head.items():
        before = base.get(name) if not name.endswith("(typed)") else base.get(name.replace("(typed)", "(dict)"))
        note = "" if before is None else f"{BASE}: {before:.2f} µs, {before / value:.2f}x"
        report.add(SECTION, name, value, "µs", note=note)


if __name__ == "__main__" and sys.argv[1:] == ["--measure"]:
    print(json.dumps(measure()))
