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
  in :meth:`TlsSession.outgoing` (or sent already, after :meth:`TlsSession.attach`).
- No application bytes are decrypted before the handshake completes, and
  :attr:`TlsSession.closed` is set once the peer's close_notify is read.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
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
    close.

    A connection gives the session its socket's write with :meth:`attach`: from then on
    :meth:`start` and :meth:`receive` pass what the session produced on its own (alerts
    too, before they raise) straight to it, and :meth:`outgoing` is always empty."""

    __slots__ = ("_in", "_out", "_obj", "_read", "_write", "_send", "_partial", "handshaken",
                 "closed")

    def __init__(self, context: ssl.SSLContext, *, server_side: bool = True,
                 server_hostname: str | None = None) -> None:
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._in, self._out, server_side=server_side,
                                     server_hostname=server_hostname)
        # ssl.SSLObject's read and write are Python methods that only call these, the
        # C object's own: calling them directly saves a Python frame per record, twice
        # per request at each end.
        c_object = getattr(self._obj, "_sslobj", self._obj)
        self._read: Callable[[int], bytes] = c_object.read
        self._write: Callable[[bytes], int] = c_object.write
        self._send: Callable[[bytes], object] | None = None
        # OpenSSL may hold the start of a record it could not finish (after a
        # want-read): then that record's plaintext can be longer than what the memory
        # BIO still holds, and the next read asks for a whole record's worth.
        self._partial = True
        self.handshaken = False
        self.closed = False  # the peer sent close_notify

    def attach(self, send: Callable[[bytes], object]) -> Callable[[bytes], None]:
        """Send what the session produces on its own through ``send`` from now on, and
        return the function that encrypts data and sends its records: one Python call
        per write (a small answer's cost is mostly calls, OpenSSL's record work is
        about a microsecond)."""
        self._send = send
        obj_write = self._write
        out_read = self._out.read

        def write(data: bytes) -> None:
            obj_write(data)
            send(out_read())

        return write

    def start(self) -> bytes:
        """The bytes that open the handshake: the ClientHello on a client, ``b""`` on a
        server (which speaks only when spoken to); sent already if attached."""
        if self._obj.server_side:
            return b""
        try:
            self._obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        finally:
            self._flush()
        return self.outgoing()

    def receive(self, data: bytes) -> bytes:
        """Feed ciphertext; return the plaintext now complete (possibly ``b""``)."""
        incoming = self._in
        incoming.write(data)
        if not self.handshaken:
            try:
                self._obj.do_handshake()
            except ssl.SSLWantReadError:
                self._flush()
                return b""
            except ssl.SSLError:
                self._flush()  # the alert goes out before the caller closes
                raise
            self.handshaken = True
        # One read per whole record, asking for as many bytes as the BIO holds: a
        # record's plaintext is shorter than its ciphertext, so it all comes back and
        # nothing is left decrypted in the session (no SSLObject.pending() to ask, no
        # 16 KiB buffer, no want-read raised for the usual one-record chunk).
        read = self._read
        n = _RECORD if self._partial else incoming.pending
        chunks = []
        try:
            while n:
                chunk = read(n if n < _RECORD else _RECORD)
                if not chunk:
                    self.closed = True
                    break
                chunks.append(chunk)
                n = incoming.pending
            self._partial = False
        except ssl.SSLWantReadError:  # a record only partly received
            self._partial = True
        except ssl.SSLZeroReturnError:
            self.closed = True
        except ssl.SSLError:
            self._flush()
            raise
        self._flush()  # tickets, key updates
        if len(chunks) == 1:
            return chunks[0]
        return b"".join(chunks)

    def _flush(self) -> None:
        if self._send is not None and self._out.pending:
            self._send(self._out.read())

    def outgoing(self) -> bytes:
        """Ciphertext the session produced on its own (handshake, alerts, tickets) and
        has not sent through :meth:`attach`'s ``send``."""
        out = self._out
        return out.read() if out.pending else b""

    def encrypt(self, data: bytes) -> bytes:
        """``data`` as TLS records, plus anything else the session had to send first."""
        self._write(data)
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
