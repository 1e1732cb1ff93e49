"""A recording TCP relay between a client and the broker: which API versions a real
client really sends.
"""

from __future__ import annotations

import socket
import struct
import threading

from tests.helpers.kafka_socket import recv_exact
from tests.helpers.listen import accept_until_stopped


class Relay:
    """A TCP relay to the broker that records (api key, version, client id) of every request."""

    def __init__(self, port: int, target: int) -> None:
        self.target = target
        self.requests: list[tuple[int, int, str | None]] = []
        self._lock = threading.Lock()
        self._sock = socket.create_server(("127.0.0.1", port))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        threading.Thread(target=accept_until_stopped, args=(self._sock, self._stop, self._relay),
                         daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.target))
        threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
        threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _requests(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                head = recv_exact(src, 4)
                frame = recv_exact(src, struct.unpack(">i", head)[0])
                key, version, _, n = struct.unpack_from(">hhih", frame)
                cid = None if n < 0 else frame[10:10 + n].decode()
                with self._lock:
                    self.requests.append((key, version, cid))
                dst.sendall(head + frame)
        except (OSError, ConnectionError, struct.error):
            pass
        finally:
            for s in (src, dst):
                s.close()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                s.close()

    def versions(self, key: int, client_id: str) -> set[int]:
        with self._lock:
            return {v for k, v, c in self.requests if k == key and c == client_id}

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
