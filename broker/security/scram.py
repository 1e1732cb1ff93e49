"""SCRAM lives in ``protocol/scram.py`` (sans-I/O, shared with the client). This name
remains only for the SCRAM admin handlers' imports until they import it from there."""

from protocol.scram import (
    MAX_ITERATIONS,
    MECHANISM_BY_CODE,
    MECHANISMS,
    MIN_ITERATIONS,
    credential_from_salted,
)

__all__ = ["MAX_ITERATIONS", "MECHANISMS", "MECHANISM_BY_CODE", "MIN_ITERATIONS",
           "credential_from_salted"]
