"""What TLS and SASL cost: the same broker, the same client, PLAINTEXT next to SASL_SSL.

- produce and consume throughput with confluent-kafka (librdkafka), 100-byte records,
  SASL_SSL with SCRAM-SHA-256 against PLAINTEXT on two listeners of one broker
  (target: TLS >= 60 % of plaintext);
- ListOffsets by timestamp, one request in flight, p50 / p99, from the bundled client
  over an authenticated SASL_SSL connection and a plaintext one (target: p50 within
  +30 µs). The two connections take turns request by request (the order flipping every
  step), so both series see the same load on this shared machine; run one after the
  other, the gap swung from +6 to +77 µs between identical runs. Two more pairs follow,
  each taking turns within itself: the bundled client with idle polling off
  (``idle_poll_us=0``: its thread sleeps while the broker answers, then decrypts the
  answer cold), and a blocking client on the ``ssl`` module (no event loop, nothing but
  the record layer around the socket; it sleeps in ``recv`` too), the gap of the least
  client there is. The pairs do not share turns: a blocking client's sleep between two of
  the bundled client's lookups would idle that client's thread as well.
Rows are ratios within one run: the machine is shared, so absolute numbers drift.
"""

from __future__ import annotations

import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from bench.harness import SCALE, free_port, start_broker, stop_broker
from bench.report import Report
from client.connection import BrokerConnection
from client.security import ClientSecurity, open_connection
from protocol import api
from protocol.scram import ScramClient

N_RECORDS = int(300_000 * SCALE)
N_LOOKUPS = 3000
T0 = 1_700_000_000_000
SECTION = "security"
USER = ("bench", "bench-password")


def _pki(d: Path) -> tuple[str, str]:
    """A CA and a broker key store for localhost (openssl CLI); returns (ca, keystore)."""
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=bench-ca")
    run("req", *ec, "-keyout", "broker.key", "-out", "broker.csr", "-subj", "/CN=localhost")
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "broker.pem", "-days", "1", "-extfile", "san.ext")
    ks = d / "keystore.pem"
    ks.write_text((d / "broker.key").read_text() + (d / "broker.pem").read_text())
    return str(d / "ca.pem"), str(ks)


def _conf(kind: str, ports: dict[str, int], ca: str) -> dict[str, Any]:
    if kind == "PLAINTEXT":
        return {"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"}
    return {"bootstrap.servers": f"localhost:{ports['SASL_SSL']}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": ca, "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": USER[0], "sasl.password": USER[1]}


def produce(conf: dict[str, Any], topic: str) -> float:
    from confluent_kafka import Producer

    p = Producer({**conf, "linger.ms": 5, "batch.size": 262144, "acks": 1,
                  "queue.buffering.max.messages": 1_000_000})
    value = b"x" * 100
    started = time.perf_counter()
    for i in range(N_RECORDS):
        while True:
            try:
                p.produce(topic, value, timestamp=T0 + i)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    return N_RECORDS * 100 / (time.perf_counter() - started) / 1e6


def consume(conf: dict[str, Any], topic: str) -> float:
    from confluent_kafka import Consumer, TopicPartition

    # A deep local queue, as in bench_broker: below queued.min.messages librdkafka backs
    # off fetching for fetch.queue.backoff.ms (1 s), which made one of the two listeners'
    # rows 5x slower in about half the runs, whichever listener it happened to hit.
    c = Consumer({**conf, "group.id": f"bench-{topic}-{time.time()}", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
                  "queued.max.messages.kbytes": 1048576, "queued.min.messages": 1_000_000})
    c.assign([TopicPartition(topic, 0, 0)])
    n = 0
    started = time.perf_counter()
    while n < N_RECORDS:
        msgs = c.consume(10000, 1.0)
        n += sum(1 for m in msgs if not m.error())
    elapsed = time.perf_counter() - started
    c.close()
    return N_RECORDS * 100 / elapsed / 1e6


class BlockingConnection:
    """The least client there is: a blocking socket, wrapped by ``ssl`` for TLS, SCRAM done
    inline. What it adds to a TLS round trip is the record layer alone."""

    def __init__(self, host: str, port: int, sec: ClientSecurity) -> None:
        sock = socket.create_connection((host, port), timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ctx = sec.ssl_context()
        self.sock: socket.socket = (sock if ctx is None
                                    else ctx.wrap_socket(sock, server_hostname=host))
        self.cid = 0
        if sec.protocol == "SASL_SSL":
            self.request(17, 1, {"mechanism": sec.mechanism})
            scram = ScramClient(sec.mechanism, sec.username, sec.password)
            first = self.request(36, 1, {"auth_bytes": scram.first()})
            final = self.request(36, 1, {"auth_bytes": scram.final(bytes(first.auth_bytes))})
            scram.verify(bytes(final.auth_bytes))

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return data

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.cid += 1
        self.sock.sendall(api.encode_request(api_key, version, self.cid, "bench", body))
        size = struct.unpack(">i", self._read(4))[0]
        return api.decode_response(api_key, version, self._read(size))[1]

    def close(self) -> None:
        self.sock.close()


async def lookups(conns: dict[str, BrokerConnection | BlockingConnection],
                  topic: str) -> dict[str, list[float]]:
    """Time lookups over every connection in turn (the order reversed every other step)."""
    out: dict[str, list[float]] = {kind: [] for kind in conns}
    order = list(conns)
    for i in range(-N_LOOKUPS // 10, N_LOOKUPS):  # the first tenth warms up, unmeasured
        ts = T0 + (abs(i) * 7919) % N_RECORDS
        body = {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": ts}]}]}
        for kind in (order if i % 2 else reversed(order)):
            conn = conns[kind]
            started = time.perf_counter()
            if isinstance(conn, BlockingConnection):
                conn.request(2, 7, body)
            else:
                await conn.request(2, 7, body)
            if i >= 0:
                out[kind].append(time.perf_counter() - started)
    return out


# The connection pairs, each measured taking turns within itself: the bundled client as
# it comes, the bundled client with idle polling off, a blocking ``ssl``-module client.
PAIRS = ("", " idle_poll_us=0", " blocking")


async def measure_lookups(ports: dict[str, int], ca: str, topic: str) -> dict[str, list[float]]:
    secs = {"PLAINTEXT": ClientSecurity(),
            "SASL_SSL": ClientSecurity(protocol="SASL_SSL", mechanism="SCRAM-SHA-256",
                                       username=USER[0], password=USER[1], ca_location=ca)}
    conns: dict[str, BrokerConnection | BlockingConnection] = {}
    try:
        for kind, sec in secs.items():
            host = "127.0.0.1" if kind == "PLAINTEXT" else "localhost"
            conns[kind] = await open_connection(host, ports[kind], sec, client_id="bench",
                                                request_timeout=30)
            conns[f"{kind} idle_poll_us=0"] = await open_connection(
                host, ports[kind], sec, client_id="bench", request_timeout=30, idle_poll_us=0)
            conns[f"{kind} blocking"] = BlockingConnection(host, ports[kind], sec)
        samples: dict[str, list[float]] = {}
        for pair in PAIRS:
            samples.update(await lookups({k + pair: conns[k + pair] for k in secs}, topic))
        return samples
    finally:
        for conn in conns.values():
            if isinstance(conn, BlockingConnection):
                conn.close()
            else:
                await conn.close()


def run(report: Report, scratch: str) -> None:
    root = Path(scratch)
    ca, keystore = _pki(root)
    data = root / "data"
    data.mkdir()
    subprocess.run([sys.executable, "-m", "client.cli", "users", "add", "--data-dir", str(data),
                    "--user", USER[0], "--password", USER[1], "--mechanism", "SCRAM-SHA-256"],
                   check=True, capture_output=True)
    ports = {"PLAINTEXT": free_port(), "SASL_SSL": free_port()}
    proc, _ = start_broker(root, data, {
        "listeners": f"PLAINTEXT://127.0.0.1:{ports['PLAINTEXT']},SASL_SSL://localhost:{ports['SASL_SSL']}",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": keystore,
        "sasl.enabled.mechanisms": "SCRAM-SHA-256", "log.retention.ms": "-1",
    }, port=ports["PLAINTEXT"], timeout=60)
    try:
        rates: dict[str, tuple[float, float]] = {}
        for kind in ("PLAINTEXT", "SASL_SSL"):
            conf = _conf(kind, ports, ca)
            topic = f"sec-{kind.lower()}"
            rates[kind] = (produce(conf, topic), consume(conf, topic))
        # Consume again in the other order, best of two: the first read of a topic pays
        # for page cache and summaries, which is not what this row compares.
        for kind in ("SASL_SSL", "PLAINTEXT"):
            again = consume(_conf(kind, ports, ca), f"sec-{kind.lower()}")
            rates[kind] = (rates[kind][0], max(rates[kind][1], again))
        for i, what in enumerate(("produce", "consume")):
            plain, tls = rates["PLAINTEXT"][i], rates["SASL_SSL"][i]
            report.add(SECTION, f"{what} throughput PLAINTEXT (confluent-kafka)", plain, "MB/s",
                       note=f"{N_RECORDS} records of 100 B")
            report.add(SECTION, f"{what} throughput SASL_SSL SCRAM-SHA-256", tls, "MB/s",
                       note=f"{tls / plain * 100:.0f} % of plaintext (target >= 60 %)")
        samples = uvloop.run(measure_lookups(ports, ca, "sec-plaintext"))
        p50s = {kind: statistics.median(s) * 1e6 for kind, s in samples.items()}
        for kind in ("PLAINTEXT", "SASL_SSL"):
            p99 = statistics.quantiles(samples[kind], n=100)[98] * 1e6
            note = f"bundled client, {N_LOOKUPS} lookups, one in flight, turns with SASL_SSL"
            if kind == "SASL_SSL":
                note = f"{p50s[kind] - p50s['PLAINTEXT']:+.0f} µs p50 over plaintext (target <= +30)"
            report.add(SECTION, f"ListOffsets by time p50 over {kind}", p50s[kind], "µs", note=note)
            report.add(SECTION, f"ListOffsets by time p99 over {kind}", p99, "µs")
        for pair, what in ((" idle_poll_us=0", "bundled client, idle_poll_us=0"),
                           (" blocking", "blocking ssl-module client")):
            plain, tls = p50s["PLAINTEXT" + pair], p50s["SASL_SSL" + pair]
            report.add(SECTION, f"ListOffsets p50 TLS gap, {what}", tls - plain, "µs",
                       note=f"p50 {plain:.0f} µs PLAINTEXT, {tls:.0f} µs SASL_SSL, taking turns")
    finally:
        stop_broker(proc, 60)


if __name__ == "__main__":
    r = Report()
    with tempfile.TemporaryDirectory() as tmp:
        run(r, tmp)
    print(r.table())
