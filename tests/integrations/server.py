"""A scripted provider on 127.0.0.1: replays hand-written SSE fixtures and records request bodies."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class Reply:
    """One scripted response: a status, headers and a body; ``cut`` closes after that many bytes."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    cut: int | None = None


def sse(name: str) -> Reply:
    """The fixture ``name`` (``fixtures/<name>.sse``) as a 200 event stream."""
    return Reply(body=(FIXTURES / f"{name}.sse").read_bytes(), headers={"content-type": "text/event-stream"})


def sse_cut(name: str, marker: bytes) -> Reply:
    """The fixture's stream cut off (connection closed) just before ``marker``."""
    reply = sse(name)
    reply.cut = reply.body.index(marker)
    return reply


def sse_ended(name: str, marker: bytes) -> Reply:
    """The fixture's stream ended early but cleanly (a complete HTTP body) just before ``marker``."""
    reply = sse(name)
    reply.body = reply.body[: reply.body.index(marker)]
    return reply


def error(status: int, name: str, headers: dict[str, str] | None = None) -> Reply:
    """A JSON error body from ``fixtures/<name>.json``."""
    return Reply(status=status, body=(FIXTURES / f"{name}.json").read_bytes(),
                 headers={"content-type": "application/json", **(headers or {})})


def json_reply(name: str) -> Reply:
    return Reply(body=(FIXTURES / f"{name}.json").read_bytes(), headers={"content-type": "application/json"})


class Provider:
    """The server's script (replies served in order) and the request bodies it received."""

    def __init__(self, port: int) -> None:
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self.script: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def queue(self, *replies: Reply) -> None:
        with self.lock:
            self.script.extend(replies)

    def next(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.requests.append(body)
            return self.script.pop(0) if self.script else Reply(status=500, body=b'{"error": "script empty"}')


def _handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            reply = provider.next(json.loads(self.rfile.read(length) or b"{}"))
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.send_header("content-length", str(len(reply.body)))
            self.send_header("connection", "close")  # no keep-alive: a dropped client leaks no socket
            self.end_headers()
            self.wfile.write(reply.body if reply.cut is None else reply.body[: reply.cut])
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def serve() -> Iterator[Provider]:
    """Run the provider on a free port until the generator is closed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(Provider(0)))
    provider = Provider(server.server_address[1])
    server.RequestHandlerClass = _handler(provider)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
