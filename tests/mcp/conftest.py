"""Fixtures of the MCP tests: real servers written with the SDK (``servers/``),
started by the client (stdio) or by the test (streamable HTTP on 127.0.0.1), and
the settings that name them."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sagents_django.mcp import close_servers

SERVERS = Path(__file__).parent / "servers"
TOKEN = "s3cret-token-for-tests"


def stdio(
    script: str = "notes_server.py", *args: str, **options: Any
) -> dict[str, Any]:
    """The settings of a stdio server running ``servers/<script> <args>``."""
    return {"command": [sys.executable, str(SERVERS / script), *args], **options}


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    """Where the notes server writes what its hanging tools saw."""
    return tmp_path


@pytest.fixture
def use_servers(settings: Any, markers: Path) -> Callable[..., None]:
    """Name MCP servers in the settings: ``use_servers(docs=stdio(), ...)``."""

    def use(hosts: list[str] | None = None, **servers: dict[str, Any]) -> None:
        for options in servers.values():
            if "command" in options:
                options.setdefault("env", {})["MARKERS"] = str(markers)
        settings.SAGENTS = {
            **settings.SAGENTS,
            "MCP_SERVERS": servers,
            "MCP_ALLOWED_HOSTS": hosts if hosts is not None else ["127.0.0.1"],
        }

    return use


@pytest.fixture(autouse=True)
def closed_servers() -> Iterator[None]:
    """Each test starts with no connection (and stops the servers it started)."""
    yield
    close_servers()


class Counter(BaseHTTPRequestHandler):
    """Another host, which a redirect must never reach."""

    hits = 0

    def do_POST(self) -> None:
        type(self).hits += 1
        self.send_response(500)
        self.end_headers()

    do_GET = do_POST

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def elsewhere() -> Iterator[ThreadingHTTPServer]:
    Counter.hits = 0
    server = ThreadingHTTPServer(("localhost", 0), Counter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class HttpServer:
    """The notes server over streamable HTTP, in a process of its own."""

    def __init__(self, markers: Path, redirect_to: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(SERVERS / "notes_server.py"), "http"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={
                "PATH": "/usr/bin:/bin",
                "MARKERS": str(markers),
                "EXPECTED_TOKEN": TOKEN,
                "REDIRECT_TO": redirect_to,
            },
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def settings(self, **options: Any) -> dict[str, Any]:
        return {"url": self.url, "connect_timeout": 10, **options}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def http_server(markers: Path, elsewhere: ThreadingHTTPServer) -> Iterator[HttpServer]:
    server = HttpServer(
        markers, redirect_to=f"http://localhost:{elsewhere.server_port}/mcp"
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def chat_model(fake_llm: Any) -> Any:
    """A model on the fake provider, through the lean HTTP transport."""
    from tests.core.conftest import model_for

    return model_for(fake_llm, "openai")
