"""The one port picker every launcher and rig uses (mirrorwatch/localkafka/process.py: free_port)."""

from __future__ import annotations

import socket

import pytest

from mirrorwatch.localkafka import process


@pytest.mark.parametrize(("worker", "slice_index"), [(None, 0), ("gw0", 0), ("gw3", 3), ("gw9", 1), ("master", 0)])
def test_ports_come_from_the_workers_slice_below_the_ephemeral_range(monkeypatch, worker, slice_index):
    if worker is None:
        monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    else:
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    monkeypatch.setattr(process, "_ephemeral_low", lambda: 32_768)
    width = (32_768 - process.PORTS_FROM) // process.PORT_SLICES
    start = process.PORTS_FROM + slice_index * width
    ports = [process.free_port() for _ in range(50)]
    assert all(start <= port < start + width for port in ports), ports


def test_a_port_is_never_given_twice_nor_while_taken(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        picks = iter(range(10**6))
        real = process.random.randrange
        # every third pick is the taken port: it must be passed over, as must every port already given
        monkeypatch.setattr(process.random, "randrange", lambda a, b: taken if next(picks) % 3 == 0 else real(a, b))
        ports = [process.free_port() for _ in range(300)]
    assert taken not in ports and len(set(ports)) == len(ports)
