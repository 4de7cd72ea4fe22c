"""A TCP proxy between a worker and its PostgreSQL server that cuts a connection at a COMMIT.

    with CommitCutter(server_port) as cutter:
        url = f"postgresql://harness@127.0.0.1:{cutter.port}/db"
        cutter.arm(Cut.AFTER_COMMIT)   # the next COMMIT commits; its reply never arrives

It reads the protocol's messages from the client (the startup, then a type byte and
a length each), and at the first ``COMMIT`` sent as a simple query after ``arm`` it
cuts both sides of that connection: ``BEFORE_COMMIT`` without passing the COMMIT on
(the server rolls the transaction back), ``DURING_COMMIT`` as soon as it is passed
on (the server commits it or not, and nobody hears which), ``AFTER_COMMIT`` once
the server has answered it (the transaction is committed, the client never hears
so). ``arm(cut, within=b'...')`` waits for a COMMIT of a transaction that sent
those bytes (``b'"kind":"intent"'``: a journal write of an intent). ``refuse``
makes it close every new connection at once, as a database that cannot be reached.
"""

from __future__ import annotations

import contextlib
import enum
import socket
import struct
import threading
from types import TracebackType

__all__ = ["CommitCutter", "Cut"]

_COMMIT = b"Q" + struct.pack(">I", 4 + len(b"COMMIT\x00")) + b"COMMIT\x00"
_STARTUP_CODES = (80877103, 80877104)  # SSLRequest, GSSENCRequest: a startup follows


class Cut(enum.Enum):
    BEFORE_COMMIT = "before commit"
    DURING_COMMIT = "during commit"
    AFTER_COMMIT = "after commit"


class CommitCutter:
    """The proxy (see the module docstring); ``cuts`` counts the connections it cut."""

    def __init__(self, server_port: int, *, host: str = "127.0.0.1") -> None:
        self._server = (host, server_port)
        self._listener = socket.create_server((host, 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._armed: Cut | None = None
        self._within = b""
        self._refusing = False
        self._open: set[socket.socket] = set()
        self.cuts = 0
        self._closed = False
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def arm(self, cut: Cut | None, *, within: bytes = b"") -> None:
        """Cut the connection that sends the next COMMIT, as ``cut`` says (None: disarm);
        with ``within``, the next COMMIT of a transaction that sent those bytes."""
        with self._lock:
            self._armed = cut
            self._within = within

    def refuse(self, refusing: bool = True) -> None:
        """Close every new connection at once (or, with False, pass them on again)."""
        with self._lock:
            self._refusing = refusing

    def close(self) -> None:
        self._closed = True
        _shut(self._listener)  # wakes the accept under way
        with self._lock:
            for sock in list(self._open):
                _shut(sock)
        self._accepting.join(timeout=5)

    def __enter__(self) -> CommitCutter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refusing = self._refusing
            if refusing:
                _shut(client)
                continue
            try:
                server = socket.create_connection(self._server, timeout=10)
            except OSError:
                _shut(client)
                continue
            server.settimeout(None)
            with self._lock:
                self._open |= {client, server}
            threading.Thread(target=self._client_side, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()

    def _client_side(self, client: socket.socket, server: socket.socket) -> None:
        """Pass the client's messages on one by one, cutting at an armed COMMIT."""
        try:
            while True:
                head = _read(client, 4)
                length = struct.unpack(">I", head)[0]
                body = _read(client, length - 4)
                server.sendall(head + body)
                if length != 8 or struct.unpack(">I", body)[0] not in _STARTUP_CODES:
                    break  # the startup message: typed messages follow
            sent = False  # whether this transaction sent the bytes armed ``within``
            while True:
                kind = _read(client, 1)
                head = _read(client, 4)
                message = kind + head + _read(client, struct.unpack(">I", head)[0] - 4)
                with self._lock:
                    sent = sent or (self._within != b"" and self._within in message)
                    cut = None
                    if message == _COMMIT:
                        cut = self._armed if sent or not self._within else None
                        sent = False
                    if cut is not None:
                        self._armed = None
                        self.cuts += 1
                if cut is Cut.BEFORE_COMMIT:
                    break
                if cut is Cut.DURING_COMMIT:
                    with self._lock:
                        self._open.discard(server)
                    server.sendall(message)
                    break
                if cut is Cut.AFTER_COMMIT:
                    with self._lock:
                        self._open.discard(server)  # the other thread no longer relays
                    server.sendall(message)
                    _read(server, 1)  # the server's answer begins: the COMMIT is done
                    break
                server.sendall(message)
        except OSError:
            pass
        finally:
            self._forget(client, server)

    def _pipe(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while True:
                with self._lock:
                    if source not in self._open:
                        return
                data = source.recv(65536)
                if not data:
                    return
                with self._lock:
                    if source not in self._open:
                        return
                target.sendall(data)
        except OSError:
            pass
        finally:
            self._forget(source, target)

    def _forget(self, *sockets: socket.socket) -> None:
        with self._lock:
            for sock in sockets:
                self._open.discard(sock)
        for sock in sockets:
            _shut(sock)


def _read(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
