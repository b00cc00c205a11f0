"""What the local broker, Connect worker and MirrorMaker 2 launchers share about their Java processes: free
loopback ports, the log4j2 config they all run with, tying a child to its parent, and stopping one."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
from pathlib import Path

LOG4J2 = Path(__file__).with_name("log4j2.xml")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def terminate(proc: subprocess.Popen, timeout_s: float) -> None:
    """SIGTERM, then SIGKILL if the process has not exited within ``timeout_s`` (brokers and MirrorMaker 2)."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def die_with_parent() -> None:
    # If the Python process that started a broker dies (even by SIGKILL), the broker gets SIGTERM and shuts
    # down cleanly instead of lingering on its ports. PR_SET_PDEATHSIG = 1.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass
    os.setsid()  # own process group: a terminal's Ctrl-C reaches us, and we stop brokers in order
