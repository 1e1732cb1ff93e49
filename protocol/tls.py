"""TLS's record layer without a socket, for both ends: the broker's TLS listeners and the
bundled client's TLS connections run the same session.

Invariants:
- A :class:`TlsSession` is a pure function of bytes (``ssl.SSLObject`` over two
  ``MemoryBIO``\\ s): ciphertext in, plaintext out, in the caller's own loop pass. Every
  :meth:`TlsSession.receive` leaves nothing decrypted behind in the session, so the
  caller's back-pressure (not the session's) decides when a connection is read.
- The handshake is whatever the ``ssl.SSLContext`` says: a client session verifies the
  peer's chain and (with ``check_hostname``) its name against ``server_hostname``; a
  failure raises ``ssl.SSLError`` (``SSLCertVerificationError`` for a bad certificate or
  a name mismatch) from the call that fed the bytes, with the alert for the peer waiting
  in :meth:`TlsSession.outgoing`.
- No application bytes are decrypted before the handshake completes, and
  :attr:`TlsSession.closed` is set once the peer's close_notify is read.
"""

from __future__ import annotations

import ssl
from typing import Any

__all__ = ["TlsSession"]

# The most plaintext one TLS record holds: what one SSLObject.read can return.
_RECORD = 16384


class TlsSession:
    """One TLS connection as a pure function of bytes: :meth:`start` is the first flight
    (a client's hello), :meth:`receive` takes what the socket read and returns the
    plaintext it held; :meth:`outgoing` is what must be written back (handshake messages,
    alerts, session tickets, key updates); :meth:`encrypt` turns data into records. An
    ``ssl.SSLError`` from :meth:`start` or :meth:`receive` means the peer failed the
    handshake or broke the record layer: send :meth:`outgoing` (an alert, if any) and
    close."""

    __slots__ = ("_in", "_out", "_obj", "handshaken", "closed")

    def __init__(self, context: ssl.SSLContext, *, server_side: bool = True,
                 server_hostname: str | None = None) -> None:
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._in, self._out, server_side=server_side,
                                     server_hostname=server_hostname)
        self.handshaken = False
        self.closed = False  # the peer sent close_notify

    def start(self) -> bytes:
        """The bytes that open the handshake: the ClientHello on a client, ``b""`` on a
        server (which speaks only when spoken to)."""
        if self._obj.server_side:
            return b""
        try:
            self._obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        return self.outgoing()

    def receive(self, data: bytes) -> bytes:
        """Feed ciphertext; return the plaintext now complete (possibly ``b""``)."""
        incoming = self._in
        incoming.write(data)
        obj = self._obj
        if not self.handshaken:
            try:
                obj.do_handshake()
            except ssl.SSLWantReadError:
                return b""
            self.handshaken = True
        chunks = []
        # Reading only while ciphertext or decrypted bytes are pending spares the
        # SSLWantReadError that a read past the end raises (costly, and per request); a
        # record's plaintext is shorter than its ciphertext, so asking for what is pending
        # reads a whole record without a 16 KiB buffer. One lookup of each per record.
        pending = incoming.pending or obj.pending()
        try:
            while pending:
                chunk = obj.read(pending if pending < _RECORD else _RECORD)
                if not chunk:
                    self.closed = True
                    break
                chunks.append(chunk)
                pending = incoming.pending or obj.pending()
        except ssl.SSLWantReadError:  # a record only partly received
            pass
        except ssl.SSLZeroReturnError:
            self.closed = True
        if len(chunks) == 1:
            return chunks[0]
        return b"".join(chunks)

    def outgoing(self) -> bytes:
        """Ciphertext the session produced on its own (handshake, alerts, tickets)."""
        out = self._out
        return out.read() if out.pending else b""

    def encrypt(self, data: bytes) -> bytes:
        """``data`` as TLS records, plus anything else the session had to send first."""
        self._obj.write(data)
        return self._out.read()

    def close_notify(self) -> bytes:
        """The close_notify alert to send before closing (``b""`` before the handshake);
        never raises: a session that cannot say goodbye is closed all the same."""
        if not self.handshaken:
            return b""
        try:
            self._obj.unwrap()
        except ssl.SSLError:  # want-read: we do not wait for the peer's close_notify
            pass
        return self._out.read()

    def peercert(self) -> Any:
        return self._obj.getpeercert()

    @property
    def version(self) -> str | None:
        return self._obj.version()
