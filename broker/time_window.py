"""What the two event-time APIs (PlanTimeWindow 10000, CountTimeWindows 10001) share:
the walk over the topics and partitions a request names.

Invariants:
- A topic the principal may not DESCRIBE (READ implies it) answers
  TOPIC_AUTHORIZATION_FAILED (29) in every partition asked, before anything else is
  looked at; a request the handler found invalid answers INVALID_REQUEST (42) in every
  partition of every authorized topic.
- Otherwise each partition's event-time indexes are made ready first (in slices, the
  event loop free between them: ``PartitionManager.event_time_ready``), then it is
  served from its log and last stable offset; an unknown partition answers its
  KafkaError's code (UNKNOWN_TOPIC_OR_PARTITION), and a failure while serving it is
  logged and answered with its code (``broker.errors.partition_error``). One partition's
  error never touches another's answer.
- With the remote tier on, a partition's remote zone maps are fetched in the tier's
  threads before it is served (a store failure, or a tier not attached yet, answers
  KAFKA_STORAGE_ERROR); with ``remote_in_thread`` a partition holding remote data is
  served in the tier's threads too (it may read remote ``.log`` bytes), never on the loop.
- Topics and partitions answer in the order asked.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

from broker.acl.authorizer import DESCRIBE, TOPIC
from broker.acl.check import allowed
from broker.dispatch import RequestContext
from broker.errors import partition_error
from protocol.errors import ErrorCode, KafkaError
from storage.log import Log

READ_COMMITTED = 1

P = TypeVar("P")


class _AskedTopic(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> list[int]: ...


def failed_topics(topics: Iterable[_AskedTopic], answer: Callable[[int, int], P],
                  code: int) -> list[tuple[str, list[P]]]:
    """Every partition asked, answered with ``code`` (``answer(index, code)``)."""
    return [(t.name, [answer(p, code) for p in t.partitions]) for t in topics]


async def serve_topics(ctx: RequestContext, topics: Iterable[_AskedTopic],
                       answer: Callable[[int, int], P], serve: Callable[[str, int, Log, int], P],
                       what: str, *, sorted_index: bool, remote_in_thread: bool,
                       valid: bool = True) -> list[tuple[str, list[P]]]:
    """(topic name, partition answers) for each topic asked. ``serve(name, index, log, lso)``
    answers one partition from its log and last stable offset; ``answer(index, code)`` is a partition's error answer."""
    authz = ctx.broker.authorizer
    pm = ctx.partitions
    out: list[tuple[str, list[P]]] = []
    for topic in topics:
        name = topic.name
        if authz is not None and not allowed(ctx, DESCRIBE, TOPIC, name):
            out.append((name, [answer(p, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                               for p in topic.partitions]))
            continue
        if not valid:
            out.append((name, [answer(p, int(ErrorCode.INVALID_REQUEST))
                               for p in topic.partitions]))
            continue
        answers: list[P] = []
        for p in topic.partitions:
            await pm.event_time_ready(name, p, sorted_index=sorted_index)
            tier = ctx.broker.tier
            if tier is None:
                answers.append(_partition(ctx, name, p, answer, serve, what))
                continue
            err = await tier.event_time_ready(name, p)
            if err is not None:
                answers.append(answer(p, int(partition_error(err, f"{what} {name}-{p}").code)))
            elif remote_in_thread and tier.has_remote_data(name, p):
                answers.append(await tier.call(
                    functools.partial(_partition, ctx, name, p, answer, serve, what)))
            else:
                answers.append(_partition(ctx, name, p, answer, serve, what))
        out.append((name, answers))
    return out


def _partition(ctx: RequestContext, name: str, index: int, answer: Callable[[int, int], P],
               serve: Callable[[str, int, Log, int], P], what: str) -> P:
    pm = ctx.partitions
    try:
        plog = pm.get_log(name, index)
    except KafkaError as exc:
        return answer(index, int(exc.code))
    try:
        return serve(name, index, plog, pm.last_stable_offset(name, index, plog))
    except Exception as exc:
        return answer(index, int(partition_error(exc, f"{what} {name}-{index}").code))
