"""A synchronous face for :class:`client.Client`, for scripts, REPLs and Spark executors.

Every SyncClient in a process shares one event loop running in a daemon thread;
each call submits the coroutine to it and blocks for the result. That makes a
SyncClient usable from any thread (also from code that already runs an event
loop, e.g. Jupyter), and cheap to create per Spark task.

Invariants:
- The loop thread belongs to the process that started it. After ``fork``
  (Spark's Python workers are forked) the child sees a dead thread, so
  :func:`_loop` checks the pid and starts a fresh loop; a SyncClient created
  before the fork refuses to be used in the child instead of hanging.
- Iterators (:meth:`SyncClient.consume`, :meth:`SyncClient.read_time_range`)
  cross the thread boundary once per fetched chunk, not once per record, and
  close their async generator when abandoned.
- Exceptions are the same ``KafkaError``s the async client raises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import os
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterable, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar

import uvloop

from client.aio import Client, ProducerRecord, Record
from client.producer import Producer, RecordMetadata
from storage.planner import PlannedRange

__all__ = ["SyncClient", "SyncProducer"]

T = TypeVar("T")
P = ParamSpec("P")
F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.Lock()
_state: dict[str, Any] = {"pid": None, "loop": None, "thread": None}


def _after_fork_in_child() -> None:
    # The loop thread did not survive the fork, and _lock may have been held by a
    # thread that no longer exists: start from scratch in the child.
    global _lock
    _lock = threading.Lock()
    _state.update(pid=None, loop=None, thread=None)


os.register_at_fork(after_in_child=_after_fork_in_child)


def _new_loop() -> asyncio.AbstractEventLoop:
    return uvloop.new_event_loop()


def _loop() -> asyncio.AbstractEventLoop:
    """This process's background loop, started on first use (and again after fork)."""
    with _lock:
        loop = _state["loop"]
        if _state["pid"] == os.getpid() and loop is not None and _state["thread"].is_alive():
            return loop  # type: ignore[no-any-return]
        loop = _new_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=run, name="chronolog-client-loop", daemon=True)
        thread.start()
        ready.wait()
        _state.update(pid=os.getpid(), loop=loop, thread=thread)
        return loop


def _run(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    if threading.current_thread() is _state["thread"]:
        coro.close()
        raise RuntimeError("SyncClient called from its own loop thread; use client.Client there")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


def _blocking(
    fn: Callable[Concatenate[Client, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[SyncClient, P], T]:
    """The blocking twin of a :class:`client.Client` coroutine method: its parameters and
    docstring, run on the loop thread with the caller blocked for the result."""
    name = fn.__name__

    @functools.wraps(fn)
    def method(self: SyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._call(getattr(self._client, name)(*args, **kwargs))

    return _named(method)


def _iterating(
    fn: Callable[Concatenate[Client, P], AsyncIterator[T]],
) -> Callable[Concatenate[SyncClient, P], Generator[T, None, None]]:
    """The blocking twin of a :class:`client.Client` method that yields chunks: an
    iterator crossing to the loop thread once per chunk (see ``_iterate_chunks``)."""
    name = fn.__name__

    @functools.wraps(fn)
    def method(self: SyncClient, /, *args: P.args,
               **kwargs: P.kwargs) -> Generator[T, None, None]:
        return self._iterate_chunks(getattr(self._client, name)(*args, **kwargs))

    return _named(method)


def _flattening(
    fn: Callable[Concatenate[Client, P], AsyncIterator[T]],
    chunks: Callable[..., AsyncIterator[Iterable[T]]],
) -> Callable[Concatenate[SyncClient, P], Generator[T, None, None]]:
    """The blocking twin of a :class:`client.Client` method that yields records one by one
    (``fn``, whose parameters and docstring it takes), made from ``chunks``, the Client
    method that yields the same records a list per Fetch: one thread hop per list."""
    name = chunks.__name__

    @functools.wraps(fn)
    def method(self: SyncClient, /, *args: P.args,
               **kwargs: P.kwargs) -> Generator[T, None, None]:
        for chunk in self._iterate_chunks(getattr(self._client, name)(*args, **kwargs)):
            yield from chunk

    return _named(method)


def _listing_records(
    fn: Callable[Concatenate[Client, str, Iterable[ProducerRecord], P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[SyncClient, str, Iterable[ProducerRecord], P], T]:
    """:func:`_blocking` for a method taking (topic, records, ...): the records iterable
    is drained on the caller's thread, so a user's generator never runs on the loop."""
    name = fn.__name__

    @functools.wraps(fn)
    def method(self: SyncClient, topic: str, records: Iterable[ProducerRecord], /,
               *args: P.args, **kwargs: P.kwargs) -> T:
        return self._call(getattr(self._client, name)(topic, list(records), *args, **kwargs))

    return _named(method)


def _connecting(
    connect: Callable[P, Coroutine[Any, Any, Client]],
) -> Callable[Concatenate[SyncClient, P], None]:
    """SyncClient's ``__init__`` with the parameters of ``Client.connect``: connect on the
    loop thread, blocking until the client is ready."""

    def __init__(self: SyncClient, /, *args: P.args, **kwargs: P.kwargs) -> None:
        self._pid = os.getpid()
        self._loop = _loop()
        self._last_write = None
        self._client = _run(self._loop, connect(*args, **kwargs))

    return _signed_like(__init__, connect, "self", "Connect at once; see "
                        ":meth:`client.Client.connect`.")


def _constructor(
    connect: Callable[P, Coroutine[Any, Any, Client]],
) -> Callable[Concatenate[type[SyncClient], P], SyncClient]:
    """``SyncClient.connect``: the constructor under Client's name for it."""

    def connect_(cls: type[SyncClient], /, *args: P.args, **kwargs: P.kwargs) -> SyncClient:
        return cls(*args, **kwargs)

    connect_.__name__ = "connect"
    return _signed_like(connect_, connect, "cls", "``SyncClient(...)``, under Client's name.")


def _signed_like(fn: F, bound: Callable[..., Any], first: str, doc: str) -> F:
    """``fn`` showing ``bound``'s parameters (a bound classmethod's, so without its
    ``cls``) after ``first`` to ``inspect.signature`` and ``help``."""
    sig = inspect.signature(bound)
    head = inspect.Parameter(first, inspect.Parameter.POSITIONAL_ONLY)
    fn.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[head, *sig.parameters.values()],
        return_annotation=inspect.Signature.empty)
    fn.__doc__ = doc
    return _named(fn)


def _named(method: F) -> F:
    """``method`` as SyncClient's own in reprs and tracebacks (``functools.wraps`` gave it
    Client's qualified name and module)."""
    method.__module__ = __name__
    method.__qualname__ = f"SyncClient.{method.__name__}"
    return method


class SyncClient:
    """Blocking twin of :class:`client.Client`; same methods, same arguments, same errors.

    The constructor, the plain calls and the iterators are made from Client's own
    methods (``_connecting``, ``_blocking``, ``_listing_records``, ``_iterating``,
    ``_flattening``), so their parameters and documentation are Client's and cannot
    drift from them; only ``send_batches``, ``read_planned_range`` (records, where
    Client yields lists) and the version queries are written here.

    ``SyncClient("127.0.0.1:9092")`` connects at once; use it as a context manager
    or call :meth:`close`.
    """

    _pid: int
    _loop: asyncio.AbstractEventLoop
    _last_write: concurrent.futures.Future[None] | None
    _client: Client

    __init__ = _connecting(Client.connect)

    connect = classmethod(_constructor(Client.connect))

    @property
    def aio(self) -> Client:
        """The underlying async client (use only from the loop thread)."""
        return self._client

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if os.getpid() != self._pid:
            coro.close()
            raise RuntimeError(
                "this SyncClient was created in another process (before fork); create a new one"
            )
        return _run(self._loop, coro)

    def close(self) -> None:
        if os.getpid() == self._pid:
            self._call(self._client.close())

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ admin and metadata

    create_topic = _blocking(Client.create_topic)
    delete_topic = _blocking(Client.delete_topic)
    list_topics = _blocking(Client.list_topics)
    partitions_for = _blocking(Client.partitions_for)
    describe_configs = _blocking(Client.describe_configs)
    describe_config_entries = _blocking(Client.describe_config_entries)

    def api_version(self, api_key: int) -> int:
        return self._client.api_version(api_key)

    def supports(self, api_key: int) -> bool:
        return self._client.supports(api_key)

    # ------------------------------------------------------------ produce

    produce = _listing_records(Client.produce)

    def send_batches(
        self, topic: str, batches: Mapping[int, bytes], *, acks: int = 1
    ) -> concurrent.futures.Future[dict[int, int]]:
        """Send pre-built batches (one per partition) in one Produce request per leader,
        without waiting: the future resolves to the base offset per partition (-1 for
        acks=0) or raises the request's KafkaError.

        Requests from successive calls are written in call order (each waits for the
        previous one to be on the wire, not answered), so a caller keeps several in
        flight and a partition's batches are still appended in call order.
        """
        if os.getpid() != self._pid:
            raise RuntimeError("this SyncClient was created in another process; create a new one")
        prev = self._last_write
        written: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._last_write = written
        aio = self._client

        async def run() -> dict[int, int]:
            try:
                if prev is not None:
                    await asyncio.wrap_future(prev)
                sent = await aio.send_produce(topic, batches, acks)
            finally:
                written.set_result(None)
            return await aio.wait_produce(topic, batches, sent)

        return asyncio.run_coroutine_threadsafe(run(), self._loop)

    produce_arrow = _blocking(Client.produce_arrow)
    produce_columns = _blocking(Client.produce_columns)
    init_producer_id = _blocking(Client.init_producer_id)
    produce_batch = _blocking(Client.produce_batch)

    def producer(self, **kwargs: Any) -> SyncProducer:
        """A batching producer (same options as :class:`client.producer.Producer`)."""
        return SyncProducer(self, **kwargs)

    # ------------------------------------------------------------ offsets

    list_offsets = _blocking(Client.list_offsets)
    offsets_for_times = _blocking(Client.offsets_for_times)
    earliest = _blocking(Client.earliest)
    latest = _blocking(Client.latest)
    earliest_local = _blocking(Client.earliest_local)
    latest_tiered = _blocking(Client.latest_tiered)
    max_timestamp = _blocking(Client.max_timestamp)
    time_range_offsets = _blocking(Client.time_range_offsets)
    plan_time_window = _blocking(Client.plan_time_window)
    count_time_windows = _blocking(Client.count_time_windows)
    disorder_stats = _blocking(Client.disorder_stats)

    # ------------------------------------------------------------ fetch

    fetch_raw = _blocking(Client.fetch_raw)
    fetch = _blocking(Client.fetch)
    # One thread hop per Fetch's list or Arrow batch, not per record.
    consume_chunks = _iterating(Client.consume_chunks)
    consume_arrow = _iterating(Client.consume_arrow)
    read_planned_range_arrow = _iterating(Client.read_planned_range_arrow)
    read_time_range_arrow = _iterating(Client.read_time_range_arrow)

    consume = _flattening(Client.consume, Client.consume_chunks)
    read_time_range = _flattening(Client.read_time_range, Client._time_range_chunks)

    def _iterate_chunks(self, chunks: Any) -> Generator[Any, None, None]:
        try:
            while True:
                try:
                    chunk = self._call(chunks.__anext__())
                except StopAsyncIteration:
                    return
                yield chunk
        finally:
            if os.getpid() == self._pid:
                self._call(chunks.aclose())

    def read_planned_range(
        self, topic: str, partition: int, rng: PlannedRange, start_ms: int, end_ms: int,
        *, isolation_level: int = 0,
    ) -> Generator[Record, None, None]:
        """One planned range's records in the window; see
        :meth:`client.Client.read_planned_range` (one thread hop per Fetch)."""
        for chunk in self._iterate_chunks(self._client.read_planned_range(
                topic, partition, rng, start_ms, end_ms, isolation_level=isolation_level)):
            yield from chunk


class SyncProducer:
    """Blocking-friendly batching producer: ``send`` returns a ``concurrent.futures.Future``.

    Records are handed to the loop thread through one queue, so they reach the
    async :class:`Producer` in ``send`` order (per-partition order is kept).
    """

    def __init__(self, client: SyncClient, **kwargs: Any) -> None:
        self._sync = client
        self._queue: asyncio.Queue[Any] | None = None
        self._producer: Producer | None = None
        self._worker: asyncio.Task[None] | None = None
        self._sync._call(self._start(kwargs))

    async def _start(self, kwargs: dict[str, Any]) -> None:
        self._queue = asyncio.Queue()
        self._producer = Producer(self._sync.aio, **kwargs)
        self._worker = asyncio.get_running_loop().create_task(self._work())

    async def _work(self) -> None:
        assert self._queue is not None and self._producer is not None
        while True:
            item = await self._queue.get()
            try:
                if item is None:
                    continue
                topic, record, partition, cf = item
                try:
                    fut = await self._producer.send(topic, record, partition=partition)
                except Exception as e:  # a bad record fails its own future only
                    cf.set_exception(e)
                    continue
                fut.add_done_callback(functools.partial(_chain, dst=cf))
            finally:
                self._queue.task_done()

    def send(
        self, topic: str, record: ProducerRecord, *, partition: int | None = None
    ) -> concurrent.futures.Future[RecordMetadata]:
        cf: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()
        assert self._queue is not None
        self._sync._loop.call_soon_threadsafe(
            self._queue.put_nowait, (topic, record, partition, cf)
        )
        return cf

    async def _flush(self) -> None:
        assert self._queue is not None and self._producer is not None
        await self._queue.join()
        await self._producer.flush()

    def flush(self) -> None:
        """Block until everything sent so far is acknowledged; raise the first error."""
        self._sync._call(self._flush())

    async def _close(self) -> None:
        try:
            await self._flush()
        finally:
            if self._worker is not None:
                self._worker.cancel()

    def close(self) -> None:
        self._sync._call(self._close())

    def __enter__(self) -> SyncProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _chain(src: asyncio.Future[RecordMetadata], dst: concurrent.futures.Future[RecordMetadata]) -> None:
    if src.cancelled():
        dst.cancel()
    elif (exc := src.exception()) is not None:
        dst.set_exception(exc)
    else:
        dst.set_result(src.result())
