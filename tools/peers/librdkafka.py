#!/usr/bin/env python3
"""librdkafka's own integration tests (its source tree's ``tests/``) against one Chronolog broker.

The source comes from a registry: the copy of librdkafka that npm's ``node-rdkafka``
package ships in ``deps/librdkafka`` (``npm pack``, no install). It is unpacked and
built (library + ``test-runner``) under ``.cache/librdkafka/`` inside the repo, once;
later runs reuse the build. ``run`` starts a Chronolog broker on a free 127.0.0.1 port
with the harness's usual broker settings (an authorizer with
``allow.everyone.if.no.acl.found=true``, ``super.users=User:admin``,
``num.partitions=4``), writes the harness's ``test.conf`` pointing at it, runs the
tests with ``TEST_KAFKA_VERSION=4.0.0`` and prints one line per test and a summary.

``--security`` picks one of the security set-ups of the harness's ``sasl_test.py``
suites: ``plaintext`` (the default), or the tests run over a SASL_PLAINTEXT listener as
its user ``myuser`` with ``sasl-plain`` (PLAIN, the user in the listener's JAAS config)
or ``sasl-scram`` (SCRAM-SHA-512, the user created offline with ``chronolog users
add``), test.conf carrying ``security.protocol``, ``sasl.mechanisms``,
``sasl.username`` and ``sasl.password`` as trivup writes them. Kafka's own tools,
which the tests call through KAFKA_PATH, keep a PLAINTEXT listener of the same broker.

Tests that cannot apply to one broker (a replication factor of 3, SSL/OIDC
set-ups, JMX, local-only and mock-cluster tests, which never reach a broker) are listed
in ``NOT_APPLICABLE`` with the reason, and in docs/compatibility.md. Any other test
that does not pass, including one that skips itself, counts as failed.

    python3 tools/peers/librdkafka.py build
    python3 tools/peers/librdkafka.py run [--tests 0012,0054] [--group-protocol consumer]
    python3 tools/peers/librdkafka.py run --security sasl-scram

``run`` needs the project's Python (``.venv/bin/python``) for the broker; Kafka's own
``kafka-topics`` tool (tests 0052, 0077 call it) comes from tools/kafka-ref.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = Path(os.environ.get("CHRONOLOG_CACHE", REPO / ".cache")) / "librdkafka"
NODE_RDKAFKA = "3.6.1"  # npm's node-rdkafka 3.6.1 ships librdkafka 2.12.0
LIBRDKAFKA = "2.12.0"
SOURCE = CACHE / f"librdkafka-{LIBRDKAFKA}"
TESTS_DIR = SOURCE / "tests"
RUNNER = TESTS_DIR / "test-runner"
BUILT_STAMP = SOURCE / ".chronolog-built"
# GSSAPI and OIDC (curl) need servers this harness does not have; SSL, zlib, zstd and
# the built-in LZ4 stay on so the compression tests cover every codec Kafka has.
CONFIGURE = ["--disable-gssapi", "--disable-curl", "--disable-lz4-ext"]
# Headers the build needs beyond gcc/g++/make: RapidJSON lets the C++ tests that parse
# statistics JSON (0053, 0098, 0101, 0110) run instead of skipping.
HEADERS = {
    "openssl/ssl.h": "libssl-dev",
    "zlib.h": "zlib1g-dev",
    "zstd.h": "libzstd-dev",
    "rapidjson/document.h": "rapidjson-dev",
}
KAFKA_VERSION = "4.0.0"
BROKER_SETTINGS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "super.users": "User:admin",
    "num.partitions": "4",
}
#: The harness's scenarios (tests/scenarios/*.json) that one broker can serve: the
#: broker settings each needs beside BROKER_SETTINGS.
SCENARIOS: dict[str, dict[str, str]] = {
    "default": {},
    "noautocreate": {"auto.create.topics.enable": "false"},
}

#: The harness's SASL user (sasl_test.py's ``sasl_users``: ``myuser=mypassword``).
SASL_USER = ("myuser", "mypassword")
#: --security -> the SASL mechanism of the clients' listener (None: PLAINTEXT).
SECURITY: dict[str, str | None] = {
    "plaintext": None,
    "sasl-plain": "PLAIN",
    "sasl-scram": "SCRAM-SHA-512",  # sasl_test.py's "SASL SCRAM" suite
}

_RF3 = "creates its topic with replication factor 3: one broker answers INVALID_REPLICATION_FACTOR, as Kafka does"
_SASL = "needs a SASL listener and credentials (the harness's SASL scenario), not the PLAINTEXT one"
#: Test name -> why it does not apply to one PLAINTEXT broker. Everything else must pass.
NOT_APPLICABLE: dict[str, str] = {
    "0098_consumer_txn": "needs the Java TransactionProducerCli from the harness's Kafka build "
    "(KAFKA_PATH/tests) to produce its transactional input",
    "0101_fetch_from_follower": "needs 3 brokers with racks (fetch from follower)",
    "0103_transactions": _RF3,
    "0107_topic_recreate": _RF3,
    "0111_delay_create_topics": _RF3,
    "0142_reauthentication": _RF3 + "; also " + _SASL,
    "0097_ssl_verify": "needs the SSL certificates and SSL_* variables trivup sets up",
    "0126_oauthbearer_oidc": "needs an OIDC token endpoint and SASL/OAUTHBEARER",
    "0092_mixed_msgver": "message format v1 was removed in Kafka 4.0; the test skips itself for 4.0",
    "0139_offset_validation_mock": "runs against librdkafka's built-in mock cluster only (not flagged local upstream)",
    "0150_telemetry_mock": "runs against librdkafka's built-in mock cluster only (not flagged local upstream)",
    "0077_compaction": "creates its topic with segment.bytes=10000, below Kafka 4.x's minimum of "
    "1 MiB (KIP-1030): Kafka's own kafka-topics refuses it before sending anything",
    "0028_long_topicnames": "flagged TEST_F_KNOWN_ISSUE upstream (librdkafka issue 529): "
    "the harness does not run it",
    "0047_partial_buf_tmout": "flagged TEST_F_KNOWN_ISSUE upstream: the harness does not run it",
}


#: Tests that use the harness's socket emulation (TEST_F_SOCKEM: sockem replaces close(2)
#: for the whole test-runner process and closes connections under the client). Beside
#: other tests it once closed another test's fresh socket: 0081_admin's consumer failed
#: "Failed to set socket non-blocking: Bad file descriptor (after 0ms in state CONNECT)"
#: in the very millisecond 0076_produce_retry's sockem dropped its connection. They run
#: in a pass of their own, one at a time, after the others.
SOCKEM_TESTS = ("0049", "0068", "0075", "0076", "0088", "0094")


#: Tests that apply only over a SASL listener (``--security sasl-*``).
NEEDS_SASL: dict[str, str] = {
    "0135_sasl_credentials": _SASL,
}

_ACLS_SASL = (
    "skips itself when the clients must authenticate: upstream does not pass security "
    "settings to kafka-acls.sh"
)
#: Tests that skip themselves over SASL (``test_needs_auth()``), as upstream wrote them.
NOT_APPLICABLE_WITH_SASL: dict[str, str] = {
    "0016_client_swname": 'skips itself with SASL or SSL ("Cannot run this test with SSL/SASL")',
    "0052_msg_timestamps": "skips itself when the clients must authenticate (it calls kafka-topics.sh)",
    "0049_consume_conn_close": 'skips itself with SASL ("KNOWN ISSUE: ApiVersionRequest+'
    'SaslHandshake will not play well with sudden disconnects")',
    "0068_produce_timeout": 'skips itself with SASL or SSL ("Mock cluster does not support SSL/SASL")',
    "0075_retry": "skips itself with SASL or SSL: the extra SASL round trips change its timing",
    "0115_producer_auth": _ACLS_SASL,
    "0119_consumer_auth": _ACLS_SASL,
}


#: Tests that skip themselves under one group protocol, as upstream wrote them.
NOT_APPLICABLE_WITH: dict[str, dict[str, str]] = {
    "classic": {
        "0153_memberid": "skips itself: the member id is made by the client only with the consumer protocol",
    },
    "consumer": {
        "0084_destroy_flags": "skips itself under the consumer protocol upstream "
        '("FIXME: fix the test with subscribe/unsubscribe PR")',
        "0045_subscribe_update_non_exist_and_partchange": "expects the classic protocol's "
        "eager revoke when partitions are added; the real Kafka 4.1.1 fails it the same way "
        "under the consumer protocol (an incremental assignment, no revoke)",
        "0045_subscribe_update_topic_remove": "expects the classic protocol's assignment steps; "
        "the real Kafka 4.1.1 fails it the same way under the consumer protocol",
        "0132_strategy_ordering": "skips itself: client-side assignors exist only with the classic protocol",
    },
}


class PeerError(RuntimeError):
    """The suite could not be fetched, built or started; the message says why."""


def _run(
    cmd: list[str], cwd: Path, log: Path, what: str, env: dict[str, str] | None = None
) -> None:
    with open(log, "ab") as out:
        proc = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-4000:]
        raise PeerError(f"{what} failed (exit {proc.returncode}, {' '.join(cmd)}):\n{tail}")


def fetch() -> Path:
    """Unpack librdkafka's source from npm's node-rdkafka tarball into the cache (once)."""
    if (SOURCE / "configure").exists():
        return SOURCE
    npm = shutil.which("npm")
    if npm is None:
        raise PeerError("npm not found: it fetches node-rdkafka (librdkafka's source) from npm")
    CACHE.mkdir(parents=True, exist_ok=True)
    tgz = CACHE / f"node-rdkafka-{NODE_RDKAFKA}.tgz"
    if not tgz.exists():
        _run(
            [npm, "pack", f"node-rdkafka@{NODE_RDKAFKA}", "--silent"],
            CACHE,
            CACHE / "npm.log",
            "npm pack node-rdkafka",
        )
    prefix = "package/deps/librdkafka/"
    staging = Path(tempfile.mkdtemp(dir=CACHE))
    with tarfile.open(tgz) as tar:
        members = []
        for m in tar.getmembers():
            if not m.name.startswith(prefix) or not (m.isfile() or m.isdir()):
                continue
            m.name = m.name[len(prefix) :]
            if not m.name or m.name.startswith("/") or ".." in Path(m.name).parts:
                continue
            members.append(m)
        tar.extractall(staging, members=members)
    header = (staging / "src" / "rdkafka.h").read_text()
    version = re.search(r"#define RD_KAFKA_VERSION\s+0x([0-9a-f]{8})", header)
    found = (
        ".".join(str(int(version.group(1)[i : i + 2], 16)) for i in (0, 2, 4)) if version else "?"
    )
    if found != LIBRDKAFKA:
        shutil.rmtree(staging)
        raise PeerError(
            f"node-rdkafka {NODE_RDKAFKA} ships librdkafka {found}, expected {LIBRDKAFKA}"
        )
    for script in ("configure", "lds-gen.py", "mklove/modules/configure.base"):
        p = staging / script
        if p.exists():
            p.chmod(0o755)
    staging.rename(SOURCE)
    return SOURCE


def _check_toolchain() -> None:
    missing = [t for t in ("gcc", "g++", "make") if shutil.which(t) is None]
    missing += [pkg for h, pkg in HEADERS.items() if not Path("/usr/include", h).exists()]
    if missing:
        raise PeerError(
            "the librdkafka build needs "
            + ", ".join(missing)
            + " (make test-peers-rdkafka installs them with apt-get)"
        )


def build(jobs: int | None = None) -> Path:
    """Configure and build librdkafka and its test-runner in the cache; a no-op once built.
    ``jobs`` is make's -j (default: one per CPU)."""
    fetch()
    stamp = " ".join(CONFIGURE)
    if RUNNER.exists() and BUILT_STAMP.exists() and BUILT_STAMP.read_text() == stamp:
        return RUNNER
    _check_toolchain()
    log = SOURCE / "chronolog-build.log"
    log.write_text("")
    parallel = f"-j{jobs or os.cpu_count() or 2}"
    _run(["./configure", *CONFIGURE], SOURCE, log, "librdkafka ./configure")
    _run(["make", parallel, "libs"], SOURCE, log, "make libs")
    _run(["make", parallel, "-C", "tests", "build"], SOURCE, log, "make -C tests build")
    BUILT_STAMP.write_text(stamp)
    return RUNNER


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Broker:
    """One Chronolog broker subprocess with the harness's settings; with a SASL
    ``mechanism`` it also has a SASL_PLAINTEXT listener where the harness's user logs in."""

    workdir: Path
    python: str = sys.executable
    settings: dict[str, str] = field(default_factory=dict)
    mechanism: str | None = None
    port: int = field(default_factory=free_port)
    sasl_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """The PLAINTEXT listener (Kafka's own tools use it)."""
        return f"127.0.0.1:{self.port}"

    @property
    def client_bootstrap(self) -> str:
        """Where the tests connect: the SASL listener when there is one."""
        return f"127.0.0.1:{self.sasl_port}" if self.mechanism else self.bootstrap

    def client_conf(self) -> dict[str, str]:
        """What test.conf adds for the tests to log in (as trivup writes it)."""
        if not self.mechanism:
            return {}
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": self.mechanism,
            "sasl.username": SASL_USER[0],
            "sasl.password": SASL_USER[1],
        }

    @property
    def log_path(self) -> Path:
        return self.workdir / "broker.log"

    def _sasl_settings(self) -> dict[str, str]:
        if not self.mechanism:
            return {}
        out = {
            "listeners": f"PLAINTEXT://{self.bootstrap},SASL_PLAINTEXT://{self.client_bootstrap}",
            "sasl.enabled.mechanisms": self.mechanism,
        }
        if self.mechanism == "PLAIN":
            out["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'user_{SASL_USER[0]}="{SASL_USER[1]}";'
            )
        else:  # SCRAM: the credential is stored before the broker starts
            data = self.workdir / "data"
            data.mkdir(parents=True, exist_ok=True)
            _run(
                [
                    self.python,
                    "-m",
                    "client.cli",
                    "users",
                    "add",
                    "--data-dir",
                    str(data),
                    "--user",
                    SASL_USER[0],
                    "--password",
                    SASL_USER[1],
                    "--mechanism",
                    self.mechanism,
                ],
                REPO,
                self.workdir / "users.log",
                "chronolog users add",
            )
        return out

    def start(self, timeout: float = 60.0) -> Broker:
        args = [
            self.python,
            "-m",
            "broker",
            "--data-dir",
            str(self.workdir / "data"),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        for name, value in {**BROKER_SETTINGS, **self.settings, **self._sasl_settings()}.items():
            args += ["--override", f"{name}={value}"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PeerError(f"Chronolog exited early:\n{self.log_path.read_text()[-4000:]}")
            if b"chronolog broker ready on" in self.log_path.read_bytes():
                return self
            time.sleep(0.1)
        self.stop()
        raise PeerError(
            f"Chronolog did not start in {timeout:.0f} s:\n{self.log_path.read_text()[-4000:]}"
        )

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code, self.proc = self.proc.returncode, None
        return code


#: The Kafka scripts tests call through KAFKA_PATH, and the main class each script runs.
KAFKA_SCRIPTS = {
    "kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",  # 0045, 0052, 0077
    "kafka-acls.sh": "org.apache.kafka.tools.AclCommand",  # 0109, 0115, 0119
}


def _kafka_path(workdir: Path) -> Path:
    """A KAFKA_PATH whose bin/ scripts run Kafka's own tools (tools/kafka-ref, Maven
    Central) as a Kafka distribution's scripts do."""
    bin_dir = workdir / "kafka" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    kafkaref = REPO / "tools" / "kafka-ref" / "kafkaref.py"
    for script, main in KAFKA_SCRIPTS.items():
        path = bin_dir / script
        path.write_text(f'#!/bin/sh\nexec {sys.executable} {kafkaref} java {main} "$@"\n')
        path.chmod(0o755)
    return workdir / "kafka"


_ANSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\(B")
_ROW = re.compile(
    r"^\|\s*(\S+)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING|NOT_STARTED)\s*\|\s*([\d.]+)s\s*\|\s*(.*)$"
)


@dataclass
class Outcome:
    name: str
    state: str  # passed | failed | not applicable
    seconds: float
    detail: str


def parse_summary(output: str) -> dict[str, tuple[str, float, str]]:
    """test-runner's closing table: name -> (state, seconds, reason or failure)."""
    rows: dict[str, tuple[str, float, str]] = {}
    for line in _ANSI.sub("", output).splitlines():
        m = _ROW.match(line.strip())
        if m and m.group(1) != "<MAIN>":
            rows[m.group(1)] = (m.group(2), float(m.group(3)), m.group(4).strip())
    return rows


LOCAL = "Filtered due to negative test flags"
SKIP_LISTED = "included in TESTS_SKIP list"


_FAILED_AT = re.compile(r'### Test "([^" ]+)[^"]*" failed at ([^\n]*?): ###\n([^\n]*)')


def parse_report(report: Path, output: str) -> dict[str, tuple[str, float, str]]:
    """Each test's state from the JSON report test-runner writes (TEST_REPORT), with the
    reason from its closing table or, when it aborted before printing one, from its
    "### Test ... failed at" lines; the table alone if there is no report."""
    rows = parse_summary(output)
    # A pass that ran no test (its tests all belong to the other scenario) closes
    # with a table of <MAIN> alone.
    has_table = any(
        (m := _ROW.match(line.strip())) and m.group(1) == "<MAIN>"
        for line in _ANSI.sub("", output).splitlines()
    )
    if not report.exists():
        if not has_table:
            rows["test-runner"] = ("FAILED", 0.0, "no report and no closing table in its output")
        return rows
    try:
        data = json.loads(report.read_text(errors="replace"))
    except ValueError as e:
        rows["test-runner"] = ("FAILED", 0.0, f"unreadable {report}: {e}")
        return rows
    failures: dict[str, str] = {}
    for m in _FAILED_AT.finditer(_ANSI.sub("", output)):
        failures.setdefault(m.group(1), f"{m.group(2)}: {m.group(3)}")
    merged: dict[str, tuple[str, float, str]] = {}
    for name, t in data.get("tests", {}).items():
        state = t.get("state", "?")
        if name == "<MAIN>" or (state == "SKIPPED" and name not in rows):
            continue  # silently filtered (another scenario, not in TESTS)
        detail = rows.get(name, ("", 0.0, ""))[2] or failures.get(name, "")
        merged[name] = (state, float(t.get("duration", 0.0)), detail)
    if not has_table:
        merged["test-runner"] = ("FAILED", 0.0, "no closing table: a self-skipped test could hide")
    return merged


def not_applicable(group_protocol: str, security: str = "plaintext") -> dict[str, str]:
    """Test name -> why it does not apply, for this group protocol and security set-up."""
    listed = {**NOT_APPLICABLE, **NOT_APPLICABLE_WITH.get(group_protocol, {})}
    listed.update(NEEDS_SASL if SECURITY[security] is None else NOT_APPLICABLE_WITH_SASL)
    return listed


def judge(
    rows: dict[str, tuple[str, float, str]],
    group_protocol: str = "classic",
    security: str = "plaintext",
) -> list[Outcome]:
    """Passed stays passed; a listed test is not applicable whatever it did, and so is a
    local or mock-cluster test (``-L`` filters them: they never reach a broker, and a
    local test whose number a not-applicable test shares is caught by TESTS_SKIP); any
    other state (failed, skipped, never finished) is a failure."""
    listed = not_applicable(group_protocol, security)
    out = []
    for name, (state, secs, detail) in sorted(rows.items()):
        if name in listed:
            out.append(Outcome(name, "not applicable", secs, listed[name]))
        elif state == "SKIPPED" and (
            detail.startswith(LOCAL)
            or (detail.startswith(SKIP_LISTED) and name.endswith(("_local", "_mock")))
        ):
            out.append(
                Outcome(name, "not applicable", secs, "local or mock-cluster test: needs no broker")
            )
        elif state == "PASSED":
            out.append(Outcome(name, "passed", secs, ""))
        else:
            out.append(Outcome(name, "failed", secs, f"{state}: {detail}"))
    return out


def _test_runner(
    scenario: str, parallel: int, cwd: Path, env: dict[str, str], timeout: float
) -> str:
    """One test-runner pass; its whole output (also when killed at ``timeout``)."""
    # -L: only tests that need a broker (local and mock-cluster tests never reach one).
    # stdbuf: test-runner aborts after a failure, which would lose a buffered summary.
    cmd = [str(RUNNER), "-L", f"-p{parallel}", "-s", scenario]
    if shutil.which("stdbuf"):
        cmd = ["stdbuf", "-oL", *cmd]
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, timeout=timeout)
        return proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        raw = (e.stdout or b"") + (e.stderr or b"")
        return raw.decode(errors="replace") + f"\n(test-runner killed after {timeout:.0f} s)\n"


def _run_scenario(
    scenario: str,
    tests: str | None,
    group_protocol: str,
    parallel: int,
    workdir: Path,
    python: str,
    timeout: float,
    security: str = "plaintext",
    timeout_multiplier: float = 2.0,
) -> tuple[dict[str, tuple[str, float, str]], str]:
    """One scenario: a fresh Chronolog with its settings, test-runner -L -s SCENARIO."""
    workdir.mkdir(parents=True, exist_ok=True)
    broker = Broker(
        workdir, python=python, settings=SCENARIOS[scenario], mechanism=SECURITY[security]
    ).start()
    try:
        conf = workdir / "test.conf"
        lines = {
            "bootstrap.servers": broker.client_bootstrap,
            "test.timeout.multiplier": f"{timeout_multiplier:g}",
            **broker.client_conf(),
        }
        conf.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        env = {k: v for k, v in os.environ.items() if not k.startswith("TEST")}
        env.update(
            {
                "LD_LIBRARY_PATH": f"{SOURCE / 'src'}:{SOURCE / 'src-cpp'}",
                "RDKAFKA_TEST_CONF": str(conf),
                "TEST_KAFKA_VERSION": KAFKA_VERSION,
                "TEST_CONSUMER_GROUP_PROTOCOL": group_protocol,
                "KAFKA_PATH": str(_kafka_path(workdir)),
                "BROKERS": broker.bootstrap,
            }
        )
        skip = {**NOT_APPLICABLE, **(NEEDS_SASL if SECURITY[security] is None else {})}
        skipped = {n.split("_")[0] for n in skip}
        wanted = tests.split(",") if tests else None
        # Tests open ../src/statistics_schema.json: run in workdir/tests beside a src link.
        cwd = workdir / "tests"
        cwd.mkdir(exist_ok=True)
        if not (workdir / "src").exists():
            (workdir / "src").symlink_to(SOURCE / "src")
        rows: dict[str, tuple[str, float, str]] = {}
        outputs = []
        sockem = [t for t in SOCKEM_TESTS if t not in skipped and (wanted is None or t in wanted)]
        # (label, -p, TESTS or None for all, TESTS_SKIP)
        passes: list[tuple[str, int, list[str] | None, list[str]]] = [
            ("main", parallel, None, sorted(skipped | set(SOCKEM_TESTS)))
        ]
        if wanted is not None:
            rest = [t for t in wanted if t not in SOCKEM_TESTS]
            passes = [("main", parallel, rest, [])] if rest else []
        if sockem:
            passes.append(("sockem", 1, sockem, []))
        for label, procs, only, skip_list in passes:
            pass_env = dict(env)
            if only is not None:
                pass_env["TESTS"] = ",".join(only)
            else:
                pass_env["TESTS_SKIP"] = ",".join(skip_list)
            report = workdir / f"test-report-{label}.json"
            pass_env["TEST_REPORT"] = str(report)
            output = _test_runner(scenario, procs, cwd, pass_env, timeout)
            outputs.append(output)
            for name, row in parse_report(report, output).items():
                if name not in rows or rows[name][0] == "SKIPPED":
                    rows[name] = row
    finally:
        code = broker.stop()
    output = "\n".join(outputs)
    (workdir / "test-runner.log").write_text(output)
    if code not in (0, None):
        rows["chronolog"] = ("FAILED", 0.0, f"the broker exited {code}: see {broker.log_path}")
    return rows, output


def run(
    tests: str | None,
    group_protocol: str,
    parallel: int,
    workdir: Path,
    python: str,
    timeout: float,
    scenarios: tuple[str, ...] = tuple(SCENARIOS),
    security: str = "plaintext",
    timeout_multiplier: float = 2.0,
) -> tuple[list[Outcome], str]:
    """Build if needed, then each scenario against its own fresh Chronolog; the outcomes
    and test-runner's whole output."""
    build()
    rows: dict[str, tuple[str, float, str]] = {}
    outputs = []
    for scenario in scenarios:
        got, output = _run_scenario(
            scenario,
            tests,
            group_protocol,
            parallel,
            workdir / scenario,
            python,
            timeout,
            security,
            timeout_multiplier,
        )
        outputs.append(f"===== scenario {scenario} =====\n{output}")
        for name, row in got.items():
            # A test runs in one scenario; the others list it as skipped, if at all.
            if name not in rows or rows[name][0] == "SKIPPED":
                rows[name] = row
    return judge(rows, group_protocol, security), "\n".join(outputs)


def summary(outcomes: list[Outcome], group_protocol: str, security: str = "plaintext") -> str:
    lines = [
        f"librdkafka {LIBRDKAFKA} tests against Chronolog "
        f"(group protocol {group_protocol}, {security}):"
    ]
    for o in outcomes:
        lines.append(f"  {o.name:45s} {o.state:15s} {o.seconds:8.1f}s {o.detail}".rstrip())
    n = {s: sum(o.state == s for o in outcomes) for s in ("passed", "failed", "not applicable")}
    lines.append(
        f"{n['passed']} passed, {n['failed']} failed, {n['not applicable']} not applicable"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="unpack librdkafka's source from npm's node-rdkafka into .cache")
    b = sub.add_parser("build", help="build librdkafka and its test-runner (once)")
    b.add_argument("--jobs", type=int, help="make's -j (default: one per CPU)")
    r = sub.add_parser("run", help="run the tests against a fresh Chronolog broker")
    r.add_argument("--tests", help="test numbers, comma-separated (default: every non-local test)")
    r.add_argument(
        "--scenario",
        action="append",
        choices=tuple(SCENARIOS),
        help="harness scenario(s) to run (default: all)",
    )
    r.add_argument("--group-protocol", default="classic", choices=("classic", "consumer"))
    r.add_argument(
        "--security",
        default="plaintext",
        choices=tuple(SECURITY),
        help="the clients' listener: PLAINTEXT, or SASL_PLAINTEXT with PLAIN or SCRAM-SHA-512",
    )
    r.add_argument("--parallel", type=int, default=2, help="tests run at once (test-runner -p)")
    r.add_argument(
        "--workdir", type=Path, help="where the broker's data and logs go (default: a temp dir)"
    )
    r.add_argument("--python", default=sys.executable, help="the Python that runs the broker")
    r.add_argument(
        "--timeout",
        type=float,
        default=3600.0,
        help="seconds per scenario before test-runner is killed",
    )
    r.add_argument(
        "--timeout-multiplier",
        type=float,
        default=2.0,
        help="test.conf's test.timeout.multiplier: scales every test's own timeouts (test-runner "
        "adds parallel/3 to it); raise it on a loaded machine",
    )
    args = ap.parse_args(argv)
    try:
        if args.cmd == "fetch":
            print(fetch())
        elif args.cmd == "build":
            t0 = time.monotonic()
            print(build(args.jobs), f"({time.monotonic() - t0:.0f} s)")
        else:
            workdir = args.workdir or Path(tempfile.mkdtemp(prefix="chronolog-rdkafka-"))
            outcomes, _ = run(
                args.tests,
                args.group_protocol,
                args.parallel,
                workdir,
                args.python,
                args.timeout,
                tuple(args.scenario or SCENARIOS),
                args.security,
                args.timeout_multiplier,
            )
            print(summary(outcomes, args.group_protocol, args.security))
            print(f"(logs: {workdir})")
            return 1 if any(o.state == "failed" for o in outcomes) else 0
    except PeerError as e:
        print(f"librdkafka suite: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
