"""Free loopback ports, and waiting for a child process to listen on one."""

from __future__ import annotations

import socket
import subprocess
import time


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick: parallel test
    processes never get the same one while it is bound)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(
    port: int, process: subprocess.Popen[bytes], timeout: float = 60
) -> None:
    """Return once ``process`` accepts connections on ``port``; fail at once if it
    exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"{process.args!r} exited at start-up"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"{process.args!r} did not listen on {port}")
