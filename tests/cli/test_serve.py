"""``agentlog serve``: option checks through CliRunner, and a real server process over the demo."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from agentlog.cli.main import cli
from agentlog.cli.serve import is_loopback
from tests.web.server import free_port

TOKEN = "cli-token-0123456789abcdef"


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("serve") / "store"
    env = {**os.environ, "AGENTLOG_STORE": f"jsonl://{store}"}
    done = subprocess.run([sys.executable, "-m", "agentlog.cli", "demo"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return store


def test_help_says_read_only_and_loopback() -> None:
    result = CliRunner().invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0
    assert "never writes" in result.output and "127.0.0.1" in result.output and "--token" in result.output


def test_a_public_address_without_a_token_is_refused(demo_store: Path) -> None:
    result = CliRunner().invoke(cli, ["--store", f"jsonl://{demo_store}", "serve", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "requires --token" in result.output


def test_a_weak_token_is_refused_in_one_line(demo_store: Path) -> None:
    result = CliRunner().invoke(cli, ["--store", f"jsonl://{demo_store}", "serve", "--token", "short"])
    assert result.exit_code == 1
    assert "at least 16 characters" in result.output and "Traceback" not in result.output


def test_a_missing_store_is_refused_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    result = CliRunner().invoke(cli, ["--store", f"jsonl://{missing}", "serve", "--port", "0"])
    assert result.exit_code == 1 and "no store at" in result.output
    assert not missing.exists()


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.5.0.1", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.4", False), ("example.com", False),
])
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def _wait(url: str, process: subprocess.Popen[str], **options: object) -> httpx.Response:
    deadline = time.monotonic() + 30
    while True:
        try:
            return httpx.get(url, timeout=5, **options)  # type: ignore[arg-type]
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.parametrize("token", [None, TOKEN])
def test_a_real_server_process_serves_the_demo(demo_store: Path, token: str | None) -> None:
    port = free_port()
    env = {**os.environ, "AGENTLOG_STORE": f"jsonl://{demo_store}"}
    command = [sys.executable, "-m", "agentlog.cli", "serve", "--port", str(port)]
    if token:
        command += ["--host", "0.0.0.0", "--token", token]
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        try:
            base = f"http://127.0.0.1:{port}"
            if token:
                assert _wait(base + "/", process).status_code == 401
                page = _wait(base + "/", process, headers={"authorization": f"Bearer {token}"})
            else:
                page = _wait(base + "/", process)
            assert page.status_code == 200
            assert len(re.findall(r'<tr class="session-row">', page.text)) == 2
            assert "script-src 'self'" in page.headers["content-security-policy"]
        finally:
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=30)
    assert f":{port}/" in out and "Traceback" not in err
    assert (f"?token={token}" in out) if token else "token" not in out


def test_ctrl_c_stops_the_viewer_in_one_line_with_status_130(demo_store: Path) -> None:
    port = free_port()
    env = {**os.environ, "AGENTLOG_STORE": f"jsonl://{demo_store}"}
    with subprocess.Popen([sys.executable, "-m", "agentlog.cli", "serve", "--port", str(port)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        try:
            assert _wait(f"http://127.0.0.1:{port}/", process).status_code == 200
        finally:
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=30)
    assert process.returncode == 130, (out, err)
    assert re.fullmatch(r"serve: viewer stopped after \d+ s, [1-9]\d* requests? \(Ctrl-C\)", err.strip()), err
    assert "Aborted" not in out + err


def test_a_busy_port_is_one_line_and_no_banner(demo_store: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        env = {**os.environ, "AGENTLOG_STORE": f"jsonl://{demo_store}"}
        done = subprocess.run([sys.executable, "-m", "agentlog.cli", "serve", "--port", str(port)], env=env,
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stdout == ""  # no banner for a server that never listened
    assert done.stderr.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "--port" in done.stderr and "Errno" not in done.stderr


def test_port_0_prints_the_port_it_got(demo_store: Path) -> None:
    env = {**os.environ, "AGENTLOG_STORE": f"jsonl://{demo_store}"}
    with subprocess.Popen([sys.executable, "-m", "agentlog.cli", "serve", "--port", "0"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            banner = process.stdout.readline()
            port = int(re.search(r"127\.0\.0\.1:(\d+)/", banner).group(1))  # type: ignore[union-attr]
            assert port != 0 and _wait(f"http://127.0.0.1:{port}/", process).status_code == 200
        finally:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=30)
