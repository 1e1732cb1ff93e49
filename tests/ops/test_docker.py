"""Docker artefacts: the compose file validates with docker-compose 1.29, the image's
entrypoint and health check work against a real broker, the Dockerfile copies what exists.

No Docker engine runs here, so the image is not built; what can run without one
does: docker-compose's own schema validation, and the exact entrypoint and
health-check scripts the image runs (against a broker subprocess).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_compose_file_validates_with_docker_compose() -> None:
    exe = shutil.which("docker-compose")
    assert exe is not None, "docker-compose is missing: run `make check-compose` (Debian's 1.29)"
    res = subprocess.run([exe, "-f", str(DOCKER / "docker-compose.yml"), "config"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert re.search(r"^  broker:$", out, re.M) and re.search(r"^  tests:$", out, re.M)
    # The runner reaches the broker by its service name, and the broker advertises that name.
    assert "CHRONOLOG_BOOTSTRAP: broker:9092" in out
    assert "CHRONOLOG_CFG_ADVERTISED_LISTENERS: PLAINTEXT://broker:9092" in out
    assert "condition: service_healthy" in out
    # tests/ops/test_integration.py sends tsv datagrams to the broker service.
    assert "CHRONOLOG_CFG_UDP_FORMAT: tsv" in out
    assert "tests/ops/test_integration.py" in out
    assert "target: test" in out and "target: broker" in out


def test_dockerfile_runs_as_non_root_with_data_volume_ports_and_healthcheck() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim AS base$", text, re.M)
    broker_stage = text.split("FROM base AS broker", 1)[1].split("FROM base AS test", 1)[0]
    assert re.search(r"^USER chronolog$", broker_stage, re.M)
    assert 'VOLUME ["/data"]' in broker_stage
    assert re.search(r"^EXPOSE 9092 9093/udp 9404$", broker_stage, re.M)
    assert "healthcheck.py" in broker_stage.split("HEALTHCHECK", 1)[1].splitlines()[1]
    # Every COPY source exists in the repository (the build context is the repo root).
    for line in text.splitlines():
        m = re.match(r"^COPY (?!--)(.+) (\S+)$", line)
        if m:
            for src in m.group(1).split():
                assert (ROOT / src).exists(), f"Dockerfile copies missing {src}"
    # The default target (last stage) is the broker image.
    assert text.rstrip().splitlines()[-1] == "FROM broker"


def test_entrypoint_maps_env_to_overrides_and_healthcheck_speaks_apiversions(
    tmp_path: Path,
) -> None:
    port, mport = _free_port(), _free_port()
    env = dict(os.environ)
    env.update({
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "CHRONOLOG_DATA_DIR": str(tmp_path / "data"),
        "CHRONOLOG_HOST": "127.0.0.1",
        "CHRONOLOG_PORT": str(port),
        "CHRONOLOG_CFG_METRICS_LISTENER": f"127.0.0.1:{mport}",
        "CHRONOLOG_CFG_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
    })
    log_path = tmp_path / "broker.log"
    check = [sys.executable, str(DOCKER / "healthcheck.py"), f"127.0.0.1:{port}"]
    # Before the broker runs, the check must fail.
    down = subprocess.run(check, capture_output=True, text=True, timeout=30)
    assert down.returncode == 1 and "unhealthy" in down.stderr
    with open(log_path, "wb") as log_fh:
        proc = subprocess.Popen(["sh", str(DOCKER / "entrypoint.sh")], env=env,
                                stdout=log_fh, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        res = None
        while time.monotonic() < deadline:
            assert proc.poll() is None, log_path.read_text()
            res = subprocess.run(check, capture_output=True, text=True, timeout=30)
            if res.returncode == 0:
                break
            time.sleep(0.2)
        assert res is not None and res.returncode == 0, (res and res.stderr, log_path.read_text())
        assert re.fullmatch(r"ok: \d+ APIs advertised\n", res.stdout)
        # CHRONOLOG_CFG_METRICS_LISTENER became --override metrics.listener=...
        body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/healthz", timeout=5).read()
        assert body == b"ok\n"
    finally:
        proc.terminate()
        proc.wait(30)
    # The image logs JSON lines by default.
    lines = [ln for ln in log_path.read_text().splitlines() if ln.startswith("{")]
    assert lines, log_path.read_text()
    first = json.loads(lines[0])
    assert {"ts", "level", "logger", "msg"} <= set(first)
