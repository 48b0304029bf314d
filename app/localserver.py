"""Start ``kvplan serve`` on a free local port and wait until it accepts connections (for the
browser test and the load benchmark)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["free_port", "running_server"]

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(timeout: float = 30) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """(process, port) of a server that answers; stopped on exit."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"kvplan serve did not start on port {port}") from None
                time.sleep(0.2)
        yield proc, port
    finally:
        proc.terminate()
        proc.wait(timeout=10)
