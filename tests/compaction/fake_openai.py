"""A fake OpenAI-compatible server: a real HTTP server on 127.0.0.1 streaming scripted SSE answers."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: an HTTP error status, or an SSE stream of chunks."""

    status: int = 200
    chunks: list[Any] = field(default_factory=list)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before each chunk
    done: bool = True


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: Any


class FakeServer:
    """A ThreadingHTTPServer on 127.0.0.1 answering POSTs from a script, recording each request."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.received: list[Received] = []
        self.got_request = threading.Event()
        self.client_gone = threading.Event()
        self.stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                headers = {k.lower(): v for k, v in self.headers.items()}
                server.received.append(Received(self.path, headers, body))
                server.got_request.set()
                reply = server.replies.pop(0)
                try:
                    server.answer(self, reply)
                except (BrokenPipeError, ConnectionResetError):
                    server.client_gone.set()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.status != 200:
            payload = json.dumps(reply.body).encode()
            handler.send_response(reply.status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            for key, value in reply.headers.items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(payload)
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        handler.wfile.flush()
        for chunk in reply.chunks:
            if reply.delay and self.stop.wait(reply.delay):
                return
            line = chunk if isinstance(chunk, str) else json.dumps(chunk)
            handler.wfile.write(f"data: {line}\n\n".encode())
            handler.wfile.flush()
        if reply.done:
            handler.wfile.write(b"data: [DONE]\n\n")
            handler.wfile.flush()


def delta(content: str | None = None, *, reasoning: str | None = None, finish: str | None = None) -> Any:
    piece: dict[str, Any] = {}
    if content is not None:
        piece["content"] = content
    if reasoning is not None:
        piece["reasoning_content"] = reasoning
    return {"id": "x", "object": "chat.completion.chunk", "model": "served-model",
            "choices": [{"index": 0, "delta": piece, "finish_reason": finish}]}


def stream_of(summary: str, *, finish: str = "stop", usage: Any = None,
              reasoning: str | None = None) -> Reply:
    chunks: list[Any] = [delta(reasoning=reasoning)] if reasoning else []
    third = max(1, len(summary) // 3)
    chunks += [delta(summary[i:i + third]) for i in range(0, len(summary), third)]
    chunks.append(delta(finish=finish))
    if usage is not None:
        chunks.append({"id": "x", "object": "chat.completion.chunk", "choices": [], "usage": usage})
    return Reply(chunks=chunks)
