"""DescribeUserScramCredentials (key 50), v0 (KIP-554): which SCRAM mechanisms each user has.

Invariants (Kafka's ``ScramControlManager.describeScramCredentials``): null or empty
Users = every user with a credential; a named user without one -> RESOURCE_NOT_FOUND
(91); a user named twice -> DUPLICATE_RESOURCE (92) for that user. Salts and keys
never leave the broker: only mechanism and iterations are described.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from broker.security.scram import MECHANISMS
from protocol import messages as m
from protocol.api import Request
from protocol.errors import ErrorCode

Result = m.DescribeUserScramCredentialsResponseResults


def _infos(creds: dict[str, Any]) -> list[m.DescribeUserScramCredentialsResponseResultsCredentialInfos]:
    return [m.DescribeUserScramCredentialsResponseResultsCredentialInfos(
        mechanism=MECHANISMS[mech][1], iterations=c.iterations) for mech, c in sorted(creds.items())]


async def handle(request: Request[m.DescribeUserScramCredentialsRequest], ctx: Any) -> m.DescribeUserScramCredentialsResponse:
    store = ctx.broker.credentials
    everyone = store.users()
    asked = [u.name for u in request.body.users or []]
    results = []
    if not asked:
        results = [Result(user=u, error_code=0, error_message=None, credential_infos=_infos(cs))
                   for u, cs in sorted(everyone.items())]
    else:
        counts = Counter(asked)
        seen: set[str] = set()
        for user in asked:
            if user in seen:
                continue
            seen.add(user)
            if counts[user] > 1:
                results.append(Result(user=user, error_code=int(ErrorCode.DUPLICATE_RESOURCE),
                                      error_message=f"Cannot describe SCRAM credentials for the "
                                      f"same user twice in a single request: {user}",
                                      credential_infos=[]))
            elif user not in everyone:
                results.append(Result(user=user, error_code=int(ErrorCode.RESOURCE_NOT_FOUND),
                                      error_message=f"Attempt to describe a user credential that "
                                      f"does not exist: {user}", credential_infos=[]))
            else:
                results.append(Result(user=user, error_code=0, error_message=None,
                                      credential_infos=_infos(everyone[user])))
    return m.DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                                  results=results)
