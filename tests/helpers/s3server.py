"""A real S3-compatible server for tests and benches: s3proxy from Maven Central.

s3proxy (org.gaul:s3proxy, Apache-2.0) serves the S3 API (SigV2/SigV4 auth, multipart
uploads, ranged GET, ListObjectsV2, DeleteObjects) over a directory through jclouds'
filesystem provider. docs/storage.md ("S3 server for tests") says why it was chosen
over SeaweedFS and what installing and starting it cost.

- ``python -m tests.helpers.s3server install`` (``make check-s3server``, part of
  ``make test``) resolves the shaded jar into ``.cache/s3proxy`` with Maven (the local
  repository is ``.cache/maven``, shared with tools/kafka-ref); a second run is a no-op.
- ``S3Server(workdir).start()`` runs it on a free 127.0.0.1 port with one access key,
  a data directory of its own, and a tuned JVM start (~1-2 s); ``stop()`` ends it.
- The fixtures ``s3_server`` (one per session) and ``s3_bucket`` (a fresh bucket per
  test, with the ``rsm.config.*`` options that reach it) are registered in
  tests/conftest.py. If the server cannot be installed or started, they FAIL with why.

A bucket of the filesystem provider is a directory under the data directory, so
``create_bucket`` makes one (the S3 CreateBucket call would need a signing client,
which the product does not carry).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("CHRONOLOG_CACHE", REPO / ".cache"))
VERSION = "2.7.0"
JAR = CACHE / "s3proxy" / f"s3proxy-{VERSION}-jar-with-dependencies.jar"
MAVEN_REPO = CACHE / "maven"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
#: A JVM tuned to start, not to run long: C1 only, serial GC (1 s instead of 3-8 s
#: on a loaded 2-core machine), a small heap.
JVM_OPTS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Xmx512m"]


class S3ServerError(RuntimeError):
    """The S3 server could not be installed or started (the message says why)."""


def install(quiet: bool = True) -> Path:
    """The s3proxy jar, fetched from Maven Central into .cache on first use."""
    if JAR.exists():
        return JAR
    mvn, java = shutil.which("mvn"), shutil.which("java")
    if not mvn or not java:
        raise S3ServerError(
            "s3proxy needs Java 17+ and Maven (make check-maven installs Debian's "
            f"openjdk-17-jdk-headless and maven); found java={java} mvn={mvn}")
    JAR.parent.mkdir(parents=True, exist_ok=True)
    cmd = [mvn, "-B", *(["-q"] if quiet else []), f"-Dmaven.repo.local={MAVEN_REPO}",
           f"{DEPENDENCY_PLUGIN}:copy",
           f"-Dartifact=org.gaul:s3proxy:{VERSION}:jar:jar-with-dependencies",
           f"-DoutputDirectory={JAR.parent}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not JAR.exists():
        raise S3ServerError(f"Maven could not fetch s3proxy {VERSION} ({' '.join(cmd)}):\n"
                            f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return JAR


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class S3Server:
    """One s3proxy process serving ``workdir/data`` on 127.0.0.1."""

    workdir: Path
    access_key: str = "chronolog-test-key"
    secret_key: str = field(default_factory=lambda: uuid.uuid4().hex)
    region: str = "us-east-1"
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    startup_seconds: float = 0.0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    def start(self, timeout: float = 60.0) -> S3Server:
        jar = install()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):
            self.port = _free_port()
            conf = self.workdir / "s3proxy.conf"
            conf.write_text("\n".join([
                f"s3proxy.endpoint={self.endpoint}",
                "s3proxy.authorization=aws-v2-or-v4",
                f"s3proxy.identity={self.access_key}",
                f"s3proxy.credential={self.secret_key}",
                # obstore's DeleteObjects carries x-amz-checksum-sha256, which s3proxy
                # 2.7 answers with 501 NotImplemented unless told to ignore such headers.
                "s3proxy.ignore-unknown-headers=true",
                # filesystem-nio2, not filesystem: the older provider lists directories
                # as objects (key "topic-0", 4096 bytes), which S3 never does.
                "jclouds.provider=filesystem-nio2",
                "jclouds.identity=local",
                "jclouds.credential=local",
                f"jclouds.filesystem.basedir={self.data_dir}",
                "",
            ]))
            log = self.workdir / "s3proxy.log"
            started = time.monotonic()
            with log.open("wb") as out:
                self.proc = subprocess.Popen(
                    ["java", *JVM_OPTS, "-jar", str(jar), "--properties", str(conf)],
                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            while time.monotonic() - started < timeout:
                if self.proc.poll() is not None:
                    break
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                    self.startup_seconds = time.monotonic() - started
                    return self
                except OSError:
                    time.sleep(0.05)
            output = log.read_text(errors="replace")[-4000:]
            self.stop()
            if "Address already in use" in output and attempt < 2:
                continue
            raise S3ServerError(f"s3proxy did not start within {timeout:.0f} s on "
                                f"{self.endpoint}:\n{output}")
        raise AssertionError("unreachable")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def create_bucket(self, name: str | None = None) -> str:
        """A new empty bucket (a directory of the filesystem provider); its name."""
        name = name or f"chronolog-{uuid.uuid4().hex[:12]}"
        (self.data_dir / name).mkdir()
        return name

    def options(self, bucket: str, prefix: str = "tier") -> dict[str, str]:
        """``rsm.config.*`` settings (without the prefix) for ``s3://bucket/prefix``."""
        return {"url": f"s3://{bucket}/{prefix}", "s3.endpoint": self.endpoint,
                "s3.region": self.region, "s3.access.key.id": self.access_key,
                "s3.secret.access.key": self.secret_key}


@dataclass
class S3Bucket:
    """A fresh bucket on the session's server and the settings that reach it."""

    server: S3Server
    name: str
    options: dict[str, str]

    @property
    def url(self) -> str:
        return self.options["url"]


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One real s3proxy for the session; FAILS (never skips) if it cannot run."""
    workdir = Path(tempfile.mkdtemp(prefix="chronolog-s3-"))
    try:
        server = S3Server(workdir).start()
    except S3ServerError as e:
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.fail(f"the S3 server for the tests could not run: {e}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> S3Bucket:
    """A new empty bucket for one test, with its ``rsm.config.*`` options."""
    name = s3_server.create_bucket()
    return S3Bucket(s3_server, name, s3_server.options(name))


if __name__ == "__main__":
    if sys.argv[1:] == ["install"]:
        t = time.monotonic()
        try:
            print(f"s3proxy {VERSION}: {install(quiet=True)} ({time.monotonic() - t:.1f} s)")
        except S3ServerError as e:
            sys.exit(str(e))
    elif sys.argv[1:] == ["serve"]:
        server = S3Server(Path(tempfile.mkdtemp(prefix="chronolog-s3-"))).start()
        print(f"{server.endpoint} key={server.access_key} secret={server.secret_key} "
              f"data={server.data_dir} (started in {server.startup_seconds:.2f} s; Ctrl-C stops)")
        try:
            server.proc.wait()  # type: ignore[union-attr]
        except KeyboardInterrupt:
            server.stop()
    else:
        sys.exit("usage: python -m tests.helpers.s3server install|serve")
