"""Local networking helpers shared by the launcher and the adapters."""

from __future__ import annotations

import random
import socket

#: Where free_port looks first: below the local ports of outgoing connections (see free_port).
_LOWEST_PORT = 20000
#: Linux's range for those local ports (net.ipv4.ip_local_port_range).
_EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"


def free_port() -> int:
    """A TCP port free now on every IPv4 address of this host (free until someone binds it).

    Taken below the range the OS draws the local ports of outgoing connections from, where it
    can tell that range (Linux): a job's server binds its port seconds after the launcher chose
    it (MindSpore's scheduler, once rank 0 has imported MindSpore), and a port from that range
    can meanwhile become any connection's local port. Elsewhere, or where no port below the
    range is free after a few tries, the OS's choice."""
    try:
        with open(_EPHEMERAL_RANGE) as text:
            ephemeral = int(text.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 0
    if ephemeral > _LOWEST_PORT:
        for _ in range(20):
            port = random.randrange(_LOWEST_PORT, ephemeral)
            if _bindable(port):
                return port
    with socket.socket() as sock:
        sock.bind(("", 0))
        chosen: int = sock.getsockname()[1]
        return chosen


def _bindable(port: int) -> bool:
    # Without SO_REUSEADDR, unlike the MindSpore adapter's check of a port already chosen: a
    # port a closed connection still holds (TIME_WAIT) is passed over here, where another will do.
    # On every address, as the rendezvous servers bind it: a port another process holds on any
    # one interface is passed over too.
    with socket.socket() as sock:
        try:
            sock.bind(("", port))
        except OSError:
            return False
        return True


def listening_socket() -> socket.socket:
    """A TCP socket bound to a port the OS chose on localhost and listening: the port stays
    this process's until the socket is closed (torch elastic's ``get_socket_with_port``)."""
    failures: list[OSError] = []
    for family, kind, proto, _, _ in socket.getaddrinfo("localhost", None, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.bind(("localhost", 0))
            sock.listen(0)
            return sock
        except OSError as error:
            sock.close()
            failures.append(error)
    raise RuntimeError(f"no TCP socket could be bound on localhost: {failures}")
