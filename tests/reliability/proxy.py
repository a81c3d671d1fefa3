"""A loopback TCP proxy between the ledger and PostgreSQL that cuts a connection at a chosen
moment of a write transaction.

It reads the PostgreSQL wire protocol only as far as it must: a connection that has sent an
INSERT or UPDATE since its last COMMIT/ROLLBACK is in a write transaction; when armed, the proxy
cuts that connection either just before the COMMIT reaches the server ("before_commit") or just
after the server answered it, before the answer reaches the ledger ("after_commit").
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field
from typing import Literal

Mode = Literal["before_commit", "after_commit"]
WRITES = (b"INSERT", b"UPDATE", b"DELETE")
ENDS = (b"COMMIT", b"ROLLBACK")


@dataclass
class _Pair:
    client: socket.socket
    server: socket.socket
    writing: bool = False
    drop_reply: bool = False

    def cut(self) -> None:
        for end in (self.client, self.server):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()


@dataclass
class CuttingProxy:
    upstream: tuple[str, int] = ("127.0.0.1", 5432)
    cuts: dict[str, int] = field(default_factory=lambda: {"before_commit": 0, "after_commit": 0})
    _armed: Mode | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _listener: socket.socket = field(init=False)
    _closed: bool = False
    _pairs: list[_Pair] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def arm(self, mode: Mode | None) -> None:
        """Cut the next write transaction's connection at ``mode`` (None: pass everything)."""
        with self._lock:
            self._armed = mode

    @property
    def armed(self) -> Mode | None:
        return self._armed

    def cut_all(self) -> None:
        """Cut every connection now, as a PostgreSQL restart would (idle ones included)."""
        for pair in list(self._pairs):
            pair.cut()
        self._pairs.clear()

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            pair = _Pair(client, server)
            self._pairs.append(pair)
            threading.Thread(target=self._to_server, args=(pair,), daemon=True).start()
            threading.Thread(target=self._to_client, args=(pair,), daemon=True).start()

    def _take(self, mode: Mode) -> bool:
        with self._lock:
            if self._armed != mode:
                return False
            self._armed = None
            self.cuts[mode] += 1
            return True

    def _to_server(self, pair: _Pair) -> None:
        try:
            while chunk := pair.client.recv(65536):
                if any(word in chunk for word in WRITES):
                    pair.writing = True
                if pair.writing and b"COMMIT" in chunk:
                    if self._take("before_commit"):
                        pair.cut()
                        return
                    if self._take("after_commit"):
                        pair.drop_reply = True
                if any(word in chunk for word in ENDS):
                    pair.writing = False
                pair.server.sendall(chunk)
        except OSError:
            pass
        pair.cut()

    def _to_client(self, pair: _Pair) -> None:
        try:
            while chunk := pair.server.recv(65536):
                if pair.drop_reply:
                    pair.cut()
                    return
                pair.client.sendall(chunk)
        except OSError:
            pass
        pair.cut()
