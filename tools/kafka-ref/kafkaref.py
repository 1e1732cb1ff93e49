#!/usr/bin/env python3
"""The reference Apache Kafka broker and its tools, from Maven Central, as a test peer.

``fetch`` resolves kafka_2.13 + kafka-tools + a log4j2 binding (pom.xml beside this
file) into ``.cache/maven`` inside the repo and writes the classpath to
``.cache/kafka-ref/<version>.classpath``; a second run reuses both. ``start``
formats KRaft storage and runs one combined-mode node (broker + controller) on
127.0.0.1 with free ports, and returns once the node says it started; ``stop``
ends it. ``spark-kafka`` resolves Spark's own Kafka connector (spark-kafka/pom.xml) the
same way and prints its four jars for ``spark.jars``. Standard library only, so the Makefile can run it before any venv exists.

    python3 tools/kafka-ref/kafkaref.py fetch
    python3 tools/kafka-ref/kafkaref.py start --dir /tmp/k   # prints the bootstrap address
    python3 tools/kafka-ref/kafkaref.py stop --dir /tmp/k
    python3 tools/kafka-ref/kafkaref.py java org.apache.kafka.tools.TopicCommand --help
    python3 tools/kafka-ref/kafkaref.py spark-kafka   # Spark's Kafka connector, for spark.jars
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
POM = HERE / "pom.xml"
SPARK_KAFKA_POM = HERE / "spark-kafka" / "pom.xml"
LOG4J2 = HERE / "log4j2.properties"
CACHE = Path(os.environ.get("CHRONOLOG_CACHE", REPO / ".cache"))
MAVEN_REPO = CACHE / "maven"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
READY_LINE = "Kafka Server started"
# Small, quick-starting JVMs: the machine is shared, and a test node holds little data.
JVM_OPTS = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true"]
TOOL_JVM_OPTS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-Djava.awt.headless=true"]


class KafkaRefError(RuntimeError):
    """The reference Kafka could not be fetched, formatted or started; the message says why."""


def kafka_version() -> str:
    m = re.search(r"<kafka.version>([^<]+)</kafka.version>", POM.read_text())
    if not m:
        raise KafkaRefError(f"no <kafka.version> in {POM}")
    return m.group(1)


def classpath_file() -> Path:
    return CACHE / "kafka-ref" / f"{kafka_version()}.classpath"


def _require(tool: str, hint: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise KafkaRefError(f"{tool} not found on PATH: {hint} (make ecosystem installs it)")
    return path


def fetch(quiet: bool = True) -> str:
    """Resolve the jars (once) and return the classpath string."""
    return _resolve(POM, classpath_file(), f"Kafka {kafka_version()}", quiet)


def spark_kafka_version() -> str:
    m = re.search(r"<spark.kafka.version>([^<]+)</spark.kafka.version>", SPARK_KAFKA_POM.read_text())
    if not m:
        raise KafkaRefError(f"no <spark.kafka.version> in {SPARK_KAFKA_POM}")
    return m.group(1)


def fetch_spark_kafka(quiet: bool = True) -> list[str]:
    """Spark's Kafka connector and its compile-scope jars (spark-kafka/pom.xml), resolved
    once; the paths, for ``spark.jars``."""
    out = CACHE / "kafka-ref" / f"spark-kafka-{spark_kafka_version()}.classpath"
    cp = _resolve(SPARK_KAFKA_POM, out, f"spark-sql-kafka-0-10 {spark_kafka_version()}", quiet)
    return cp.split(os.pathsep)


def _resolve(pom: Path, cp_file: Path, what: str, quiet: bool) -> str:
    """Maven's runtime classpath of ``pom``, cached in ``cp_file`` while every jar exists."""
    if cp_file.exists():
        cp = cp_file.read_text().strip()
        if cp and all(Path(p).exists() for p in cp.split(os.pathsep)):
            return cp
    mvn = _require("mvn", f"Maven resolves {what} from Maven Central")
    cp_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = cp_file.with_suffix(".tmp")
    cmd = [mvn, "-B", *(["-q"] if quiet else []), "-f", str(pom),
           f"-Dmaven.repo.local={MAVEN_REPO}",
           f"{DEPENDENCY_PLUGIN}:build-classpath",
           f"-Dmdep.outputFile={tmp}", "-Dmdep.includeScope=runtime"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not tmp.exists():
        raise KafkaRefError(
            f"Maven could not resolve {what} ({' '.join(cmd)}):\n"
            f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    tmp.replace(cp_file)
    return cp_file.read_text().strip()


def java_cmd(main: str, *args: str, jvm_opts: list[str] | None = None) -> list[str]:
    """The command line that runs one of Kafka's main classes (or a JEP 330 source file)."""
    java = _require("java", "Kafka 4.x needs Java 17+")
    return [java, *(TOOL_JVM_OPTS if jvm_opts is None else jvm_opts),
            f"-Dlog4j2.configurationFile=file:{LOG4J2}", "-cp", fetch(), main, *args]


def run_java(main: str, *args: str, timeout: float = 120.0,
             check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(java_cmd(main, *args), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise KafkaRefError(f"{main} {' '.join(args)} exited {proc.returncode}:\n"
                            f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class KafkaNode:
    """One KRaft combined-mode Kafka node whose files all live under ``workdir``."""

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None,
                 jvm_opts: list[str] | None = None) -> None:
        self.workdir = Path(workdir)
        self.overrides = dict(overrides or {})
        self.jvm_opts = JVM_OPTS if jvm_opts is None else jvm_opts  # the bench uses Kafka's own
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.controller_port = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "kafka.out"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    def properties(self) -> dict[str, str]:
        p, c = self.port, self.controller_port
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{c}",
            "listeners": f"PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{p}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.overrides)
        return props

    def start(self, timeout: float = 90.0) -> KafkaNode:
        """Format (first start only) and start the node; return once it serves."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        saved = self.workdir / "ports"
        if saved.exists():  # a restart keeps its ports: the quorum voters are in the metadata
            self.port, self.controller_port = map(int, saved.read_text().split())
        else:
            self.port, self.controller_port = free_port(), free_port()
            while self.controller_port == self.port:
                self.controller_port = free_port()
            saved.write_text(f"{self.port} {self.controller_port}\n")
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        if not (self.data_dir / "meta.properties").exists():
            cluster_id = run_java("kafka.tools.StorageTool", "random-uuid").stdout.strip()
            run_java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config))
        log = open(self.log_path, "ab")
        since = log.tell()
        cmd = java_cmd("kafka.Kafka", str(config), jvm_opts=self.jvm_opts)
        cmd.insert(1, f"-Dkafka.logs.dir={self.workdir / 'logs'}")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        (self.workdir / "kafka.pid").write_text(f"{self.proc.pid}\n")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise KafkaRefError(f"Kafka exited with {self.proc.returncode} before it "
                                    f"started:\n{self.log(since)[-6000:]}")
            if READY_LINE in self.log(since):
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                        return self
                except OSError:
                    pass
            time.sleep(0.2)
        self.stop()
        raise KafkaRefError(f"Kafka did not start within {timeout:.0f}s:\n"
                            f"{self.log(since)[-6000:]}")

    def log(self, since: int = 0) -> str:
        if not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as f:
            f.seek(since)
            return f.read().decode(errors="replace")

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (a clean shutdown), then SIGKILL if it hangs. Returns the exit code."""
        pid_file = self.workdir / "kafka.pid"
        if self.proc is None:
            if not pid_file.exists():
                return None
            return _stop_pid(int(pid_file.read_text()), timeout)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self.proc = None
        pid_file.unlink(missing_ok=True)
        return code


def _stop_pid(pid: int, timeout: float) -> None:
    """Stop a node started by another process (the CLI's ``stop``)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="resolve the jars into .cache and print the classpath file")
    sub.add_parser("classpath", help="print the classpath (fetching first if needed)")
    sub.add_parser("spark-kafka", help="resolve Spark's Kafka connector; print its jars for "
                   "spark.jars (comma-separated)")
    for name in ("start", "stop"):
        p = sub.add_parser(name, help=f"{name} one KRaft node whose files live in --dir")
        p.add_argument("--dir", required=True, type=Path)
    p = sub.add_parser("java", help="run a Kafka main class with the classpath")
    p.add_argument("main")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "fetch":
            fetch(quiet=False)
            print(classpath_file())
        elif a.cmd == "classpath":
            print(fetch())
        elif a.cmd == "spark-kafka":
            print(",".join(fetch_spark_kafka(quiet=False)))
        elif a.cmd == "start":
            node = KafkaNode(a.dir).start()
            node.proc = None  # leave it running after this process exits
            print(node.bootstrap)
        elif a.cmd == "stop":
            KafkaNode(a.dir).stop()
        else:
            return subprocess.call(java_cmd(a.main, *a.args))
    except KafkaRefError as e:
        print(f"kafkaref: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
