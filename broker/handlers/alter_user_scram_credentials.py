"""AlterUserScramCredentials (key 51), v0 (KIP-554): add, replace and delete SCRAM users.

Invariants (Kafka's ``ScramControlManager.alterCredentials``), judged per user:
- an empty name -> UNACCEPTABLE_CREDENTIAL (93); an unknown mechanism ->
  UNSUPPORTED_SASL_MECHANISM (33); iterations outside 4096..16384 -> 93; an empty salt or
  salted password -> 93; deleting a credential that does not exist -> RESOURCE_NOT_FOUND
  (91); the same (user, mechanism) twice in the request -> DUPLICATE_RESOURCE (92).
- A user with any error changes nothing; the others' changes are persisted together.
- The broker derives StoredKey/ServerKey from the salted password and keeps only those.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_BY_CODE,
    MIN_ITERATIONS,
    credential_from_salted,
)
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode

log = logging.getLogger("chronolog.broker")


async def handle(request: Request[m.AlterUserScramCredentialsRequest], ctx: Any) -> m.AlterUserScramCredentialsResponse:
    body = request.body
    store = ctx.broker.credentials
    pairs = Counter([(d.name, d.mechanism) for d in body.deletions]
                    + [(u.name, u.mechanism) for u in body.upsertions])
    users = list(dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions]))
    errors: dict[str, tuple[int, str]] = {}

    def fail(user: str, code: ErrorCode, message: str) -> None:
        errors.setdefault(user, (int(code), message))

    for d in body.deletions:
        mech = MECHANISM_BY_CODE.get(d.mechanism)
        if not d.name:
            fail(d.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech is None:
            fail(d.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif pairs[(d.name, d.mechanism)] > 1:
            fail(d.name, ErrorCode.DUPLICATE_RESOURCE,
                 "A user credential cannot be altered twice in the same request")
        elif store.get(d.name, mech) is None:
            fail(d.name, ErrorCode.RESOURCE_NOT_FOUND,
                 "Attempt to delete a user credential that does not exist")
    for u in body.upsertions:
        if not u.name:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif MECHANISM_BY_CODE.get(u.mechanism) is None:
            fail(u.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif pairs[(u.name, u.mechanism)] > 1:
            fail(u.name, ErrorCode.DUPLICATE_RESOURCE,
                 "A user credential cannot be altered twice in the same request")
        elif not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL,
                 f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
        elif not u.salt or not u.salted_password:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    deletions = [(d.name, MECHANISM_BY_CODE[d.mechanism]) for d in body.deletions
                 if d.name not in errors]
    upserts = []
    for u in body.upsertions:
        if u.name in errors:
            continue
        mech = MECHANISM_BY_CODE[u.mechanism]
        upserts.append((u.name, mech, credential_from_salted(
            mech, bytes(u.salted_password), bytes(u.salt), u.iterations)))
    if deletions or upserts:
        store.apply(upserts, deletions)
        log.info("SCRAM credentials changed by %s: %d upserted, %d deleted",
                 getattr(ctx, "principal", "?"), len(upserts), len(deletions))
    return m.AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
        m.AlterUserScramCredentialsResponseResults(
            user=u, error_code=errors.get(u, (0, None))[0], error_message=errors.get(u, (0, None))[1])
        for u in users])
