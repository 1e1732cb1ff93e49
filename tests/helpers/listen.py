"""The accept loop of the tests' small threaded TCP servers (the recording relay, the
protocol capture listener)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


def accept_until_stopped(sock: socket.socket, stop: threading.Event,
                         handle: Callable[[socket.socket], None]) -> None:
    """Hand every connection accepted on ``sock`` to ``handle`` until ``stop`` is set or
    the socket is closed. ``sock`` needs a short timeout, so the loop sees ``stop``."""
    while not stop.is_set():
        try:
            conn, _ = sock.accept()
        except TimeoutError:
            continue
        except OSError:
            return
        handle(conn)
