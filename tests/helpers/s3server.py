"""A real S3-compatible server for tests and benches: s3proxy from Maven Central
(the default, installed by ``make test``), or SeaweedFS built from the Go proxy
(``CHRONOLOG_S3_SERVER=seaweedfs``, installed by ``make check-seaweedfs``: ~8 min).

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

A bucket of s3proxy's filesystem provider is a directory under the data directory,
and a SeaweedFS bucket a directory under the filer's /buckets, so ``create_bucket``
makes one (the S3 CreateBucket call would need a signing client, which the product
does not carry). SeaweedFS also gets a read-only identity (``readonly_options``),
which makes real 403 AccessDenied answers.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers.broker import free_port_number

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("CHRONOLOG_CACHE", REPO / ".cache"))
VERSION = "2.7.0"
JAR = CACHE / "s3proxy" / f"s3proxy-{VERSION}-jar-with-dependencies.jar"
MAVEN_REPO = CACHE / "maven"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
#: A JVM tuned to start, not to run long: C1 only, serial GC (1 s instead of 3-8 s
#: on a loaded 2-core machine), a small heap.
JVM_OPTS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Xmx512m"]


SEAWEEDFS_MODULE = "github.com/seaweedfs/seaweedfs"
SEAWEEDFS_VERSION = "v0.0.0-20261109003541-7506e5f91cd6"  # weed 4.53
WEED = CACHE / "seaweedfs" / "weed"


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


def install_seaweedfs() -> Path:
    """The ``weed`` binary, built once from the Go proxy into .cache/seaweedfs.

    ``go install module/weed@version`` is refused (its go.mod has a replace
    directive), so the module is downloaded and built as the main module."""
    if WEED.exists():
        return WEED
    go = shutil.which("go")
    if not go:
        raise S3ServerError("building SeaweedFS needs Go >= 1.26 (make check-go)")
    env = {**os.environ, "GOMODCACHE": str(CACHE / "go" / "mod"),
           "GOFLAGS": "-modcacherw -trimpath -buildvcs=false"}
    steps = [([go, "mod", "download", "-json", f"{SEAWEEDFS_MODULE}@{SEAWEEDFS_VERSION}"], None)]
    src = CACHE / "go" / "mod" / f"{SEAWEEDFS_MODULE}@{SEAWEEDFS_VERSION}"
    steps.append(([go, "build", "-o", str(WEED), "./weed"], src))
    WEED.parent.mkdir(parents=True, exist_ok=True)
    for cmd, cwd in steps:
        proc = subprocess.run(cmd, cwd=cwd or WEED.parent, env=env, capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise S3ServerError(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n"
                                f"{proc.stderr[-3000:]}")
    return WEED


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
    #: S3 answers a PUT into a missing bucket with 404 NoSuchBucket; SeaweedFS makes it.
    creates_bucket_on_put: bool = False

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
            self.port = free_port_number()
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


    def readonly_options(self, bucket: str) -> dict[str, str] | None:
        """Settings of an identity that may only read (None: s3proxy has no policies)."""
        return None


@dataclass
class SeaweedServer(S3Server):
    """``weed mini`` (master, volume, filer and S3 in one process) on 127.0.0.1."""

    #: the filer's HTTP port, where buckets are made as directories under /buckets
    filer_port: int = 0
    readonly_key: str = "chronolog-readonly"
    creates_bucket_on_put: bool = True

    def start(self, timeout: float = 90.0) -> SeaweedServer:
        weed = install_seaweedfs()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "s3.json").write_text(json.dumps({"identities": [
            {"name": "tests", "actions": ["Admin", "Read", "List", "Tagging", "Write"],
             "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}]},
            {"name": "readonly", "actions": ["Read", "List"],
             "credentials": [{"accessKey": self.readonly_key, "secretKey": self.secret_key}]},
        ]}))
        names = ["master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
                 "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc",
                 "s3.port.iceberg", "s3.port.lance", "admin.port", "admin.port.grpc"]
        for attempt in range(3):
            ports = _free_ports(len(names))
            self.port, self.filer_port = ports[names.index("s3.port")], ports[4]
            log = self.workdir / "weed.log"
            started = time.monotonic()
            with log.open("wb") as out:
                self.proc = subprocess.Popen(
                    [str(weed), "mini", f"-dir={self.data_dir}", "-ip=127.0.0.1",
                     "-ip.bind=127.0.0.1", "-admin.ui=false", "-webdav=false",
                     "-admin.port.legacy=0", f"-s3.config={self.workdir / 's3.json'}",
                     *(f"-{n}={p}" for n, p in zip(names, ports, strict=True))],
                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            while time.monotonic() - started < timeout:
                if self.proc.poll() is not None:
                    break
                if b"S3           ready" in log.read_bytes() and _answers(self.port):
                    self.startup_seconds = time.monotonic() - started
                    return self
                time.sleep(0.05)
            output = log.read_text(errors="replace")[-4000:]
            self.stop()
            if "address already in use" in output and attempt < 2:
                continue
            raise S3ServerError(f"SeaweedFS did not start within {timeout:.0f} s:\n{output}")
        raise AssertionError("unreachable")

    def create_bucket(self, name: str | None = None) -> str:
        name = name or f"chronolog-{uuid.uuid4().hex[:12]}"
        req = urllib.request.Request(f"http://127.0.0.1:{self.filer_port}/buckets/{name}/",
                                     method="POST")
        urllib.request.urlopen(req, timeout=10).close()
        return name

    def readonly_options(self, bucket: str) -> dict[str, str] | None:
        return {**self.options(bucket), "s3.access.key.id": self.readonly_key}


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def _answers(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).close()
    except urllib.error.HTTPError:
        return True  # any S3 answer (403 without credentials) means it serves
    except OSError:
        return False
    return True


def server_class() -> type[S3Server]:
    """The server CHRONOLOG_S3_SERVER names: s3proxy (default) or seaweedfs."""
    kind = os.environ.get("CHRONOLOG_S3_SERVER", "s3proxy")
    if kind not in ("s3proxy", "seaweedfs"):
        raise S3ServerError(f"CHRONOLOG_S3_SERVER={kind!r}: expected s3proxy or seaweedfs")
    return SeaweedServer if kind == "seaweedfs" else S3Server


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
    """One real S3 server for the session; FAILS (never skips) if it cannot run."""
    workdir = Path(tempfile.mkdtemp(prefix="chronolog-s3-"))
    try:
        server = server_class()(workdir).start()
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
    if sys.argv[1:2] == ["install"]:
        t = time.monotonic()
        seaweed = sys.argv[2:] == ["seaweedfs"]
        try:
            path = install_seaweedfs() if seaweed else install(quiet=True)
        except S3ServerError as e:
            sys.exit(str(e))
        print(f"{'SeaweedFS' if seaweed else 's3proxy ' + VERSION}: {path} "
              f"({time.monotonic() - t:.1f} s)")
    elif sys.argv[1:] == ["serve"]:
        server = server_class()(Path(tempfile.mkdtemp(prefix="chronolog-s3-"))).start()
        print(f"{server.endpoint} key={server.access_key} secret={server.secret_key} "
              f"data={server.data_dir} (started in {server.startup_seconds:.2f} s; Ctrl-C stops)")
        try:
            server.proc.wait()  # type: ignore[union-attr]
        except KeyboardInterrupt:
            server.stop()
    else:
        sys.exit("usage: python -m tests.helpers.s3server install [seaweedfs] | serve")
