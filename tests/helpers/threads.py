"""Run one piece of work on several threads at once and collect what they raised."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_on_threads(work: Callable[[int], None], n: int) -> list[BaseException]:
    """work(0), ..., work(n - 1) each on its own thread, all started before any is joined;
    the exceptions they raised (a thread's exception would otherwise only be printed)."""
    raised: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as e:  # handed to the caller
            raised.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return raised
