"""``python -m benchmarks.live_feeds``: many clients of ``/live/<id>?from=0`` on one long session.

Starts ``agentlog serve`` as a process over a JSONL store holding one session of about
``--events`` events (the standard workload, 181 events a turn), measures the server's idle RSS,
connects ``--clients`` clients that each catch up from seq 0 and stay connected, then measures
the server's RSS and how long ``/`` takes to answer while they are connected. Bounded: the
server is killed when its RSS passes ``--rss-limit-mb`` or the run passes ``--seconds``.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentlog import SessionHeader, open_store
from benchmarks.workload import record_workload

__all__ = ["build_session", "run"]

SESSION_ID = "live-feed"
_SEQ = re.compile(rb'"seq":(\d+)')


def build_session(url: str, events: int) -> int:
    """Record the workload session once (about ``events`` events); return its stored length."""
    with open_store(url) as store:
        if SESSION_ID not in {snap.header.id for snap in store.listing().snapshots}:
            with store.start(SessionHeader(id=SESSION_ID, cwd="/bench")) as live:
                record_workload(live.session, max(1, round(events / 181)))
        return len(store.inspect(SESSION_ID).events)


def _rss_mb(pid: int, field_name: str = "VmRSS") -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class _Client:
    """One ``/live`` connection read on a thread: the highest seq seen and the bytes read."""

    port: int
    last_seq: int = -1
    received: int = 0
    error: str | None = None

    def run(self, stop: threading.Event) -> None:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                sock.sendall(f"GET /live/{SESSION_ID}?from=0 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
                sock.settimeout(0.5)
                tail = b""
                while not stop.is_set():
                    try:
                        data = sock.recv(1 << 16)
                    except TimeoutError:
                        continue
                    if not data:
                        return
                    self.received += len(data)
                    found = _SEQ.findall(tail + data)
                    if found:
                        self.last_seq = max(self.last_seq, int(found[-1]))
                    tail = data[-32:]
        except OSError as exc:
            self.error = f"{type(exc).__name__}: {exc}"


def _get_seconds(port: int, path: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=120) as response:
        response.read()
    return time.perf_counter() - started


def _wait_for(server: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            _get_seconds(port, "/")
            return
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the server did not start") from None
            time.sleep(0.2)


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.stderr is not None:
        server.stderr.close()
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _probe(port: int, into: list[float]) -> None:
    """Time ``/`` once, half a second into the catch-up."""
    time.sleep(0.5)
    into.append(_get_seconds(port, "/"))


def _catch_up(server: subprocess.Popen[bytes], readers: list[_Client], stored: int, end: float,
              rss_limit_mb: float) -> tuple[float, bool]:
    """Wait until every reader has the last event (or ``end``); ``(peak RSS, killed at the limit)``."""
    peak = 0.0
    while time.monotonic() < end:
        peak = max(peak, _rss_mb(server.pid))
        if peak > rss_limit_mb:
            server.kill()
            return peak, True
        if all(reader.last_seq >= stored - 1 for reader in readers):
            break
        time.sleep(0.25)
    return peak, False


def run(root: str, events: int, clients: int, seconds: float, rss_limit_mb: float) -> dict[str, Any]:
    """The measurement (see the module docstring)."""
    url = f"jsonl://{root}"
    stored = build_session(url, events)
    port = _free_port()
    command = [sys.executable, "-m", "agentlog.cli", "--store", url, "serve", "--port", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    result: dict[str, Any] = {"events": stored, "clients": clients}
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        _wait_for(server, port)
        _get_seconds(port, f"/s/{SESSION_ID}")  # the session read once, as a visitor would
        time.sleep(1)
        result["idle_rss_mb"] = round(_rss_mb(server.pid), 1)
        readers = [_Client(port) for _ in range(clients)]
        threads += [threading.Thread(target=reader.run, args=(stop,), daemon=True) for reader in readers]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        during: list[float] = []
        probe = threading.Thread(target=_probe, args=(port, during), daemon=True)
        probe.start()
        peak, killed = _catch_up(server, readers, stored, started + seconds, rss_limit_mb)
        probe.join(timeout=120)
        result["index_s_during_catch_up"] = [round(value, 3) for value in during]
        result["caught_up"] = sum(reader.last_seq >= stored - 1 for reader in readers)
        result["catch_up_s"] = round(time.monotonic() - started, 2)
        result["killed_at_rss_limit"] = killed
        if not killed:
            result["index_s_while_connected"] = [round(_get_seconds(port, "/"), 3) for _ in range(5)]
            time.sleep(1)
            result["rss_connected_mb"] = round(_rss_mb(server.pid), 1)
            peak = max(peak, result["rss_connected_mb"])
            result["peak_rss_mb"] = round(max(peak, _rss_mb(server.pid, "VmHWM")), 1)
        else:
            result["peak_rss_mb"] = round(peak, 1)
        result["client_errors"] = sorted({reader.error for reader in readers if reader.error})
        result["rss_ratio"] = round(result["peak_rss_mb"] / result["idle_rss_mb"], 2)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=5)
        _stop(server)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.live_feeds",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=150)
    parser.add_argument("--seconds", type=float, default=180.0, help="bound on the catch-up phase")
    parser.add_argument("--rss-limit-mb", type=float, default=3000.0, help="kill the server past this RSS")
    parser.add_argument("--store", help="a JSONL store directory to keep the session in (default: temp)")
    args = parser.parse_args()
    if args.store:
        os.makedirs(args.store, exist_ok=True)
        print(json.dumps(run(args.store, args.events, args.clients, args.seconds, args.rss_limit_mb)))
        return
    with tempfile.TemporaryDirectory(prefix="agentlog-live-") as root:
        print(json.dumps(run(str(Path(root) / "store"), args.events, args.clients, args.seconds,
                             args.rss_limit_mb)))


if __name__ == "__main__":
    main()
