"""The generated configuration reference is current; structured logs are one JSON object per line."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.logs import setup_logging
from client.cli import main as cli_main
from client.cli.config_docs import DEFAULT_OUTPUT, render


def test_committed_configuration_reference_is_what_the_config_class_generates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli_main(["config-docs", "--check"]) == 0, capsys.readouterr().err
    assert DEFAULT_OUTPUT.read_text() == render()


def test_configuration_reference_lists_every_setting_with_its_default() -> None:
    text = render()
    defaults = BrokerConfig()
    for name, f in BrokerConfig.settings().items():
        row = next((ln for ln in text.splitlines() if ln.startswith(f"| `{name}` |")), None)
        assert row is not None, name
        value = getattr(defaults, f.name)
        if isinstance(value, bool):
            assert f"`{str(value).lower()}`" in row
        elif isinstance(value, int) and value not in ((1 << 63) - 1, (1 << 31) - 1):
            assert f"`{value}`" in row


def test_config_docs_check_fails_on_a_stale_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text(render().replace("udp.listeners", "udp.listener"))
    assert cli_main(["config-docs", "--check", "--output", str(stale)]) == 1
    assert cli_main(["config-docs", "--output", str(stale)]) == 0
    assert cli_main(["config-docs", "--check", "--output", str(stale)]) == 0


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)


def test_json_logs_are_one_object_per_line_with_extras_and_tracebacks(
    restore_logging: None,
) -> None:
    out = io.StringIO()
    setup_logging("json", "DEBUG", stream=out)
    log = logging.getLogger("chronolog.test")
    log.info("appended %d records", 3, extra={"topic": "t", "partition": 0, "blob": b"\x00"})
    try:
        raise ValueError("multi\nline")
    except ValueError:
        log.exception("failed\nbadly")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(ln) for ln in lines)
    assert first["msg"] == "appended 3 records" and first["level"] == "INFO"
    assert first["logger"] == "chronolog.test" and first["ts"].endswith("+00:00")
    assert (first["topic"], first["partition"], first["blob"]) == ("t", 0, "b'\\x00'")
    assert second["msg"] == "failed\nbadly" and "ValueError: multi\nline" in second["exc"]


def test_setting_up_logging_twice_does_not_duplicate_lines(restore_logging: None) -> None:
    out = io.StringIO()
    setup_logging("text", stream=out)
    setup_logging("text", stream=out)
    logging.getLogger("x").warning("once", extra={"k": "a b"})
    assert out.getvalue().count("once") == 1
    assert "WARNING x: once k='a b'" in out.getvalue()
    with pytest.raises(ValueError):
        setup_logging("xml")


def test_configuration_reference_lists_every_topic_and_remote_storage_setting() -> None:
    """The oracle is storage's own list of Kafka topic config names (every typed
    setting ``LogConfig.to_kafka`` can emit, the remote tier's included) and the object
    store's options, not the generator's."""
    import storage.config as sc
    from storage.remote.store import RETRY_DEFAULTS

    tiered = {**{n: "true" for n in sc._TIERED_BOOLS}, **{n: "-2" for n in sc._TIERED_LONGS}}
    names = set(sc.LogConfig.from_kafka(tiered).to_kafka())
    assert set(tiered) <= names
    rows = {ln.split("`")[1] for ln in render().splitlines() if ln.startswith("| `")}
    assert names <= rows, sorted(names - rows)
    store_options = {"url", "s3.endpoint", "s3.region", "s3.access.key.id",
                     "s3.secret.access.key", *RETRY_DEFAULTS}
    assert {f"rsm.config.{n}" for n in store_options} <= rows
