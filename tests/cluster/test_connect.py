"""Local Ray is reachable from this machine only."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from gapstop.cluster.connect import connect  # noqa: E402

pytestmark = [pytest.mark.ray,
              pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="sockets are read from /proc")]

LISTEN = "0A"  # TCP state LISTEN in /proc/net/tcp*


def _descendants(root: int) -> set[int]:
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            parent[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, todo = set(), [root]
    while todo:
        p = todo.pop()
        tree.add(p)
        todo += [c for c, pp in parent.items() if pp == p and c not in tree]
    return tree


def _socket_inodes(pid: int) -> set[int]:
    out = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def _address(hex_addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp{,6} prints it (32-bit words in host byte order)."""
    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


def _listening(inodes: set[int]) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == LISTEN and int(f[9]) in inodes:
                found.append(_address(f[1].split(":")[0]))
    return found


def _is_loopback(a: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    mapped = getattr(a, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is 127.0.0.1
    return (mapped or a).is_loopback


def test_address_decoding_matches_hand_computed_values() -> None:
    assert str(_address("0100007F")) == "127.0.0.1"
    assert str(_address("020200C0")) == "192.0.2.2"
    assert _address("0000000000000000FFFF00000100007F") == ipaddress.ip_address("::ffff:127.0.0.1")
    assert str(_address("00000000000000000000000001000000")) == "::1"
    assert not _is_loopback(_address("00000000000000000000000000000000"))  # "::": every interface
    assert _is_loopback(_address("0000000000000000FFFF00000100007F"))


@pytest.mark.cluster  # its own instance: the sockets checked are those of the processes it starts
def test_local_ray_listens_on_loopback_only() -> None:
    before = _descendants(os.getpid()) - {os.getpid()}  # left over by earlier tests: not this Ray's
    try:
        connect(None, 1, namespace="loopback-test")

        @ray.remote(num_cpus=0)
        def ping() -> int:
            return os.getpid()

        ray.get(ping.remote())  # a worker process, with its own servers, is up as well
        addrs = _listening(set().union(*(_socket_inodes(p) for p in _descendants(os.getpid()) - before)))
    finally:
        ray.shutdown()
    assert len(addrs) >= 3, addrs  # GCS, raylet, a worker at least: the check saw Ray's processes
    assert [str(a) for a in addrs if not _is_loopback(a)] == []
