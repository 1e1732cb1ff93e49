"""Docker artefacts: the image's entrypoint and health check against a real broker, the
environment-to-setting mapping against its inverse, the compose files validated by
docker-compose 1.29, the docs' examples, and the whole podman cycle (`make test-docker`).

The podman cycle builds the images and runs docker/itest inside the compose stack; it
runs wherever podman works (installing it as root if missing) and is a visible skip,
with the reason, elsewhere.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opshelp import free_port_number

from broker.config import BrokerConfig

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
OPERATIONS = ROOT / "docs" / "operations.md"

_spec = importlib.util.spec_from_file_location("chronolog_entrypoint", DOCKER / "entrypoint.py")
assert _spec is not None and _spec.loader is not None
entrypoint = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(entrypoint)


# ------------------------------------------------------- CHRONOLOG_CFG_* -> setting names

_word = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=6)
_names = st.builds(
    lambda first, rest: first + "".join(sep + w for sep, w in rest),
    _word, st.lists(st.tuples(st.sampled_from("._-"), _word), max_size=5))


def _variable_for(name: str) -> str:
    """The oracle: how a user spells a setting as a variable (the documented rule, inverted)."""
    return "CHRONOLOG_CFG_" + "".join(
        {".": "_", "_": "__", "-": "___"}.get(ch, ch.upper()) for ch in name)


@given(_names)
def test_every_dotted_underscored_or_dashed_name_has_one_variable_spelling(name: str) -> None:
    assert entrypoint.setting_name(_variable_for(name)) == name


@given(st.one_of(
    st.builds(lambda a, n, b: f"{a}{'_' * n}{b}", _word, st.integers(4, 8), _word),
    st.builds(lambda a: f"_{a}", _word),
    st.builds(lambda a: f"{a}_", _word),
    st.builds(lambda a, c, b: f"{a}{c}{b}", _word, st.sampled_from(".-:=/ "), _word),
    st.just(""),
))
def test_variables_that_cannot_name_a_setting_are_refused(suffix: str) -> None:
    with pytest.raises(ValueError):
        entrypoint.setting_name("CHRONOLOG_CFG_" + suffix.upper())


def test_every_broker_setting_round_trips_through_its_variable() -> None:
    for name in BrokerConfig.settings():
        assert entrypoint.setting_name(_variable_for(name)) == name


def test_docs_mapping_table_is_what_the_entrypoint_does() -> None:
    rows = re.findall(r"^\| `((?:CHRONOLOG|KAFKA)_CFG_\w+)=([^`]*)` \| `([^=`]+)=([^`]*)` \|$",
                      OPERATIONS.read_text(), re.M)
    assert len(rows) >= 6 and any(r[0].startswith("KAFKA_CFG_") for r in rows)
    for variable, value, setting, setting_value in rows:
        assert entrypoint.broker_args({variable: value}, [])[-2:] == [
            "--override", f"{setting}={setting_value}"]


# ------------------------------------------------- the entrypoint and health check, for real


def _entrypoint_env(tmp_path: Path, port: int, **cfg: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHRONOLOG_")}
    env.update({
        "CHRONOLOG_DATA_DIR": str(tmp_path / "data"),
        "CHRONOLOG_HOST": "127.0.0.1",
        "CHRONOLOG_PORT": str(port),
        **{f"CHRONOLOG_CFG_{k}": v for k, v in cfg.items()},
    })
    return env


def test_entrypoint_runs_the_broker_with_env_settings_and_sigterm_leaves_the_clean_marker(
    tmp_path: Path,
) -> None:
    port, mport = free_port_number(), free_port_number()
    env = _entrypoint_env(tmp_path, port, METRICS_LISTENER=f"127.0.0.1:{mport}",
                          ADVERTISED_LISTENERS=f"PLAINTEXT://127.0.0.1:{port}",
                          LOG_RETENTION_HOURS="72")
    # No argument: the check finds the port in CHRONOLOG_PORT, as in the image.
    check = [sys.executable, str(DOCKER / "healthcheck.py")]
    down = subprocess.run(check, env=env, capture_output=True, text=True, timeout=30)
    assert down.returncode == 1 and "unhealthy" in down.stderr
    log_path = tmp_path / "broker.log"
    with open(log_path, "wb") as log_fh:
        proc = subprocess.Popen([sys.executable, str(DOCKER / "entrypoint.py")], env=env,
                                stdout=log_fh, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log_path.read_text()
            res = subprocess.run(check, env=env, capture_output=True, text=True, timeout=30)
            if res.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert res.returncode == 0, (res.stderr, log_path.read_text())
        assert re.fullmatch(r"ok: \d+ APIs advertised\n", res.stdout)
        # CHRONOLOG_CFG_METRICS_LISTENER became --override metrics.listener=...
        body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/healthz", timeout=5).read()
        assert body == b"ok\n"
    finally:
        proc.send_signal(signal.SIGTERM)  # what `docker stop` sends
        code = proc.wait(30)
    assert code == 0
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    # The image logs JSON lines by default.
    lines = [ln for ln in log_path.read_text().splitlines() if ln.startswith("{")]
    assert lines, log_path.read_text()
    assert {"ts", "level", "logger", "msg"} <= set(json.loads(lines[0]))


def test_entrypoint_refuses_unmappable_variables_and_the_broker_unknown_settings(
    tmp_path: Path,
) -> None:
    cmd = [sys.executable, str(DOCKER / "entrypoint.py")]
    bad = subprocess.run(cmd, env=_entrypoint_env(tmp_path, free_port_number(), LOG____RETENTION="1"),
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "CHRONOLOG_CFG_LOG____RETENTION" in bad.stderr
    # The mapped name reaches the broker, whose own check names it.
    unknown = subprocess.run(cmd, env=_entrypoint_env(tmp_path, free_port_number(), NO_SUCH__SETTING="1"),
                             capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 2 and "'no.such_setting'" in unknown.stderr


# --------------------------------------------------------------- Dockerfile and compose


def _stage(text: str, header: str) -> str:
    return text.split(header, 1)[1].split("\nFROM ", 1)[0]


def test_dockerfile_runs_as_non_root_with_data_volume_ports_and_healthcheck() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim AS deps$", text, re.M)
    assert re.search(r"^FROM python:3\.11-slim AS slim-build$", text, re.M)
    # The slim broker image is one flattened layer of a pruned python:3.11-slim.
    assert "FROM scratch AS broker\nCOPY --from=slim-build / /\n" in text
    for header, expose in (("FROM scratch AS broker", "EXPOSE 9092 9404"),
                           ("FROM deps-spark AS full", "EXPOSE 9092 9093/udp 9404")):
        stage = _stage(text, header)
        assert re.search(r"^USER chronolog$", stage, re.M), header
        assert 'VOLUME ["/data"]' in stage, header
        assert re.search(rf"^{expose}$", stage, re.M), header
        assert "healthcheck.py" in stage.split("HEALTHCHECK", 1)[1].splitlines()[1], header
        assert 'ENTRYPOINT ["python", "/usr/local/bin/entrypoint.py"]' in stage, header
    # The slim image installs the base only: no extra, so no PyArrow, console or Spark.
    slim = _stage(text, "FROM python:3.11-slim AS slim-build")
    assert re.search(r"pip install \. && pip uninstall -y chronolog", slim), slim
    # Every COPY source exists in the repository (the build context is the repo root).
    for line in text.splitlines():
        m = re.match(r"^COPY (?!--)(.+) (\S+)$", line)
        if m:
            for src in m.group(1).split():
                assert (ROOT / src).exists(), f"Dockerfile copies missing {src}"
    # The default target (last stage) is the broker image.
    assert text.rstrip().splitlines()[-1] == "FROM broker"


def test_kafka_cfg_variables_are_settings_too_and_chronolog_cfg_wins() -> None:
    args = entrypoint.broker_args({"KAFKA_CFG_LOG_RETENTION_HOURS": "72",
                                   "KAFKA_CFG_AUTO_CREATE_TOPICS_ENABLE": "false",
                                   "CHRONOLOG_CFG_LOG_RETENTION_HOURS": "24"}, [])
    overrides = [args[i + 1] for i, a in enumerate(args) if a == "--override"]
    assert overrides == ["auto.create.topics.enable=false", "log.retention.hours=72",
                         "log.retention.hours=24"]
    # The broker keeps the last value of a setting given twice: CHRONOLOG_CFG_ wins.
    cfg = BrokerConfig.load(None, overrides)
    assert cfg.log_retention_hours == 24 and cfg.auto_create_topics_enable is False
    with pytest.raises(ValueError, match="KAFKA_CFG_"):
        entrypoint.setting_name("KAFKA_CFG_LOG____X")


def _compose_config(*files: str) -> str:
    exe = shutil.which("docker-compose")
    assert exe is not None, "docker-compose is missing: run `make check-compose` (Debian's 1.29)"
    args = [exe]
    for f in files:
        args += ["-f", str(DOCKER / f)]
    env = {**os.environ, "CHRONOLOG_CONTROL_DIR": "/tmp/control", "CHRONOLOG_HOST_PORT": "19092"}
    res = subprocess.run([*args, "config"], capture_output=True, text=True, timeout=120,
                         cwd=ROOT, env=env)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_compose_files_validate_with_docker_compose() -> None:
    out = _compose_config("docker-compose.yml")
    assert re.search(r"^  broker:$", out, re.M) and re.search(r"^  tests:$", out, re.M)
    # The runner reaches the broker by its service name, and the broker advertises that name.
    assert "CHRONOLOG_BOOTSTRAP: broker:9092" in out
    assert "CHRONOLOG_CFG_ADVERTISED_LISTENERS: PLAINTEXT://broker:9092" in out
    # Host ports: loopback only, chosen by CHRONOLOG_HOST_PORT (defaults where unset).
    assert "- 127.0.0.1:19092:9092/tcp" in out and "- 127.0.0.1:9093:9093/udp" in out
    # No depends_on: the runner stops and restarts the broker without compose ending the run.
    assert "depends_on" not in out
    assert "- chronolog-data:/data:rw" in out and "- chronolog-data:/broker-data:ro" in out
    assert "CHRONOLOG_CFG_UDP_FORMAT: tsv" in out  # test_integration.py sends tsv datagrams
    assert "- docker/itest" in out and "- tests/ops/test_integration.py" in out
    assert "target: test" in out and "target: full" in out  # UDP ingest needs the full image
    both = _compose_config("docker-compose.yml", "podman/compose.control.yml")
    assert "CHRONOLOG_CONTROL_DIR: /control" in both and "/tmp/control:/control:rw" in both


def test_docs_compose_example_is_the_broker_service_make_test_docker_runs() -> None:
    block = re.search(r"```yaml\n(.*?)```", OPERATIONS.read_text(), re.S)
    assert block is not None
    compose = (DOCKER / "docker-compose.yml").read_text()
    for chunk in block.group(1).split("\n\n"):
        assert chunk.strip() and chunk.strip() in compose, chunk


# ------------------------------------------------------------------- the podman cycle


@pytest.mark.timeout(1800)
def test_make_test_docker_runs_the_compose_suite_under_podman() -> None:
    """docker/podman/run_stack.py exits 77 after `SKIP: <reason>` when podman cannot work."""
    if os.environ.get("CHRONOLOG_SKIP_DOCKER"):
        pytest.skip("CHRONOLOG_SKIP_DOCKER is set")
    proc = subprocess.Popen([sys.executable, str(DOCKER / "podman" / "run_stack.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        output, _ = proc.communicate(timeout=1700)
    except subprocess.TimeoutExpired:
        proc.terminate()  # run_stack.py then takes the stack down before it exits
        output, _ = proc.communicate(timeout=300)
        pytest.fail(f"make test-docker took over 1700 s:\n{output[-6000:]}")
    if proc.returncode == 77:
        reason = re.search(r"^SKIP: (.*)$", output, re.M)
        pytest.skip(f"podman does not work here: {reason.group(1) if reason else output}")
    assert proc.returncode == 0, output[-6000:]
    assert re.search(r"^\d+ passed in ", output, re.M), output[-3000:]  # none skipped or failed
