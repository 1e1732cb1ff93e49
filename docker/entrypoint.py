"""Container entrypoint: run the broker with its settings taken from the environment.

Every ``CHRONOLOG_CFG_<NAME>=<value>`` variable becomes ``--override <setting>=<value>``,
and so does every ``KAFKA_CFG_<NAME>=<value>`` (the spelling of Bitnami's Kafka images,
so a compose file written for them keeps its settings; where both name one setting,
``CHRONOLOG_CFG_`` wins);
the setting is ``<NAME>`` lower-cased with, read left to right, ``___`` turned into
``-``, ``__`` into ``_`` and ``_`` into ``.`` (the rule Confluent's Kafka images use
for their ``KAFKA_*`` variables)::

    CHRONOLOG_CFG_LOG_RETENTION_MS=86400000   ->  log.retention.ms=86400000
    CHRONOLOG_CFG_MY__NAME=x                   ->  my_name=x
    CHRONOLOG_CFG_MY___NAME=x                  ->  my-name=x

So every name made of lower-case letters and digits joined by single ``.``, ``_`` or
``-`` has exactly one spelling. Values are passed as they are. A variable whose
name cannot be a setting (other characters, or nothing after the prefix) stops
the container with exit status 2 and a message, as an unknown setting does.

``CHRONOLOG_DATA_DIR`` (``/data``), ``CHRONOLOG_HOST`` (``0.0.0.0``),
``CHRONOLOG_PORT`` (``9092``), ``CHRONOLOG_LOG_FORMAT`` (``json``) and
``CHRONOLOG_LOG_LEVEL`` (``INFO``) give the command-line flags; arguments after
the image name are appended. The broker replaces this process (``exec``), so it
is PID 1 and receives ``docker stop``'s SIGTERM itself.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping

PREFIX = "CHRONOLOG_CFG_"
KAFKA_PREFIX = "KAFKA_CFG_"
PREFIXES = (KAFKA_PREFIX, PREFIX)  # in the order applied: the broker keeps the last value
_VALID = re.compile(r"[A-Za-z0-9]+(_{1,3}[A-Za-z0-9]+)*")
_SEPARATORS = {"___": "-", "__": "_", "_": "."}


def setting_name(variable: str) -> str:
    """The broker setting a ``CHRONOLOG_CFG_*`` (or ``KAFKA_CFG_*``) variable names;
    ValueError if none."""
    prefix = next((p for p in PREFIXES if variable.startswith(p)), "")
    suffix = variable[len(prefix):]
    if not _VALID.fullmatch(suffix):
        raise ValueError(
            f"{variable}: after {prefix or PREFIX} use letters and digits joined by "
            "_ (.), __ (_) or ___ (-)")
    return re.sub(r"_{1,3}", lambda m: _SEPARATORS[m.group(0)], suffix.lower())


def broker_args(environ: Mapping[str, str], extra: list[str]) -> list[str]:
    """The ``python -m broker`` arguments for this environment (overrides sorted by name)."""
    args = [
        "--data-dir", environ.get("CHRONOLOG_DATA_DIR", "/data"),
        "--host", environ.get("CHRONOLOG_HOST", "0.0.0.0"),
        "--port", environ.get("CHRONOLOG_PORT", "9092"),
        "--log-format", environ.get("CHRONOLOG_LOG_FORMAT", "json"),
        "--log-level", environ.get("CHRONOLOG_LOG_LEVEL", "INFO"),
    ]
    for prefix in PREFIXES:
        for variable in sorted(v for v in environ if v.startswith(prefix)):
            args += ["--override", f"{setting_name(variable)}={environ[variable]}"]
    return args + extra


def main(argv: list[str]) -> int:
    try:
        args = broker_args(os.environ, argv[1:])
    except ValueError as exc:
        print(f"chronolog entrypoint: {exc}", file=sys.stderr)
        return 2
    os.execv(sys.executable, [sys.executable, "-m", "broker", *args])
    return 1  # not reached: execv replaces the process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv))
