"""A chat-completions endpoint on 127.0.0.1 speaking real HTTP, for the demo and the tests: the
server's lifecycle once; each provider says how it answers a request (``answer``)."""

from __future__ import annotations

import sys
import threading
from abc import ABC, abstractmethod
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up before its answer is written (an SDK retry after its own timeout,
    a worker stopping) is ordinary for a provider: no traceback on the demo's console for it."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipeError, ConnectionResetError
            return
        super().handle_error(request, client_address)


class LoopbackProvider(ABC):
    """Serves POST requests on a loopback port (0: an ephemeral one) until closed;
    ``answer(path, body)`` gives each one's status and JSON body."""

    def __init__(self, port: int = 0) -> None:
        answer = self.answer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                status, content = answer(self.path, body)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = _QuietServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @abstractmethod
    def answer(self, path: str, body: bytes) -> tuple[int, bytes]:
        """The status and JSON body answering a POST to ``path`` with ``body``."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
