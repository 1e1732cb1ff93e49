"""AlterUserScramCredentials (key 51), v0 (KIP-554): add, replace and delete SCRAM users.

Invariants (Kafka's ``ScramControlManager.alterCredentials``), judged per user:
- an empty name -> UNACCEPTABLE_CREDENTIAL (93); an unknown mechanism ->
  UNSUPPORTED_SASL_MECHANISM (33); iterations outside 4096..16384 -> 93; an empty salt or
  salted password -> 93; deleting a credential that does not exist -> RESOURCE_NOT_FOUND
  (91); a user altered twice in one request (any mechanisms, deletions and upsertions
  alike) -> DUPLICATE_RESOURCE (92), as Kafka's KRaft controller answers (the Java admin's
  two upsertions of one user in one call are refused; one request per mechanism works).
- A user with any error changes nothing; the others' changes are persisted together.
- The broker derives StoredKey/ServerKey from the salted password and keeps only those.
"""

from __future__ import annotations

import logging
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
    users = list(dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions]))
    errors: dict[str, tuple[int, str]] = {}
    accepted: set[str] = set()  # users with one valid alteration so far

    # Kafka's order: deletions, then upsertions; a user's first error stands, and a second
    # alteration of a user whose first one was valid (any mechanism) is the duplicate.
    for alteration, problem in ([(d, _deletion_problem(d, store)) for d in body.deletions]
                                + [(u, _upsertion_problem(u)) for u in body.upsertions]):
        name = alteration.name
        if name in errors:
            continue
        if name in accepted:
            accepted.discard(name)
            problem = (ErrorCode.DUPLICATE_RESOURCE,
                       "A user credential cannot be altered twice in the same request")
        if problem is None:
            accepted.add(name)
        else:
            errors[name] = (int(problem[0]), problem[1])
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


Problem = tuple[ErrorCode, str] | None


def _deletion_problem(d: Any, store: Any) -> Problem:
    mech = MECHANISM_BY_CODE.get(d.mechanism)
    if not d.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mech is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if store.get(d.name, mech) is None:
        return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
    return None


def _upsertion_problem(u: Any) -> Problem:
    if not u.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if MECHANISM_BY_CODE.get(u.mechanism) is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if u.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if u.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not u.salt or not u.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None
