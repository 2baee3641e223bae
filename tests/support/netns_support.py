"""A worker host behind a link the test can cut: a network namespace joined to this host by a veth pair, and a TCP
forwarder on this host's end of it to PostgreSQL (which listens on 127.0.0.1 only here, and no nftables or iptables
tools are installed to forward with).

A cut does to both ends what a partition does. The veth link goes down: the worker's packets go nowhere and no
reset reaches it. And the forwarder's packets to and from PostgreSQL are dropped on the loopback (tc filters that
redirect them into the downed link), so the server hears nothing either: only its own keepalives can tell it that
the client is gone, as across a real cut link. They are dropped as they arrive, not as they leave: a packet
dropped on its way out is reported to the sender's TCP, which takes it for local congestion and never gives up.
A heal takes both back; connections that neither side gave up on carry on.

Needs root, `ip` and `tc`; `why_not()` says what is missing. Names are unique per run, and `Link.close()` removes
the namespace (and with it the veth pair) and the filters, whatever happened before.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import socket
import subprocess
import uuid
from pathlib import Path

COMMAND_TIMEOUT_S = 10.0


class Unavailable(Exception):
    """Namespaces cannot be made here; the message says why."""


def why_not() -> str | None:
    """Why this process cannot build namespaces, or None if it can try."""
    if os.geteuid() != 0:
        return "they need root (CI runs these as root)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"`{tool}` (iproute2) is not installed"
    return None


def run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    if check and done.returncode != 0:
        raise Unavailable(f"`{' '.join(command)}` failed: {done.stderr.strip() or done.returncode}")
    return done


class Link:
    """Namespace `namespace` holding `worker_if` (`worker_ip`), joined to `host_if` (`host_ip`) on this host."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:6]
        self.namespace = f"asw-part-{tag}"
        self.host_if, self.worker_if = f"aswh{tag}", f"aswn{tag}"  # interface names: at most 15 characters
        self.host_ip = self.worker_ip = ""
        self._filters: list[int] = []  # tc filter priorities on lo ingress, while cut
        self._own_clsact = False
        self._made = False

    def open(self) -> None:
        self.host_ip, self.worker_ip = self._free_addresses()
        run("ip", "netns", "add", self.namespace)
        self._made = True
        run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.worker_if, "netns", self.namespace)
        run("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
        run("ip", "link", "set", self.host_if, "up")
        run("ip", "-n", self.namespace, "addr", "add", f"{self.worker_ip}/30", "dev", self.worker_if)
        run("ip", "-n", self.namespace, "link", "set", self.worker_if, "up")

    @staticmethod
    def _free_addresses() -> tuple[str, str]:
        """Both ends of a 10.200.x.y/30 that no interface here uses (parallel runs each take their own)."""
        used = run("ip", "-4", "-o", "addr", "show").stdout
        for _ in range(100):
            prefix, last = f"10.200.{random.randrange(256)}.", random.randrange(0, 256, 4)
            if not any(f"inet {prefix}{last + offset}/" in used for offset in range(4)):
                return f"{prefix}{last + 1}", f"{prefix}{last + 2}"
        raise Unavailable("no free /30 in 10.200.0.0/16 for the veth pair")

    def worker_command(self, *argv: str) -> list[str]:
        """`argv` run inside the namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def cut(self, server_ports: list[int], server_port: int) -> None:
        """Take the link down, and drop the loopback packets between the forwarder's `server_ports` and the server."""
        run("ip", "link", "set", self.host_if, "down")
        if run("tc", "qdisc", "add", "dev", "lo", "clsact", check=False).returncode == 0:
            self._own_clsact = True
        for port in server_ports:
            for source, destination in ((port, server_port), (server_port, port)):
                priority = self._free_priority()
                run("tc", "filter", "add", "dev", "lo", "ingress", "pref", str(priority), "protocol", "ip", "u32",
                    "match", "ip", "sport", str(source), "0xffff", "match", "ip", "dport", str(destination), "0xffff",
                    "action", "mirred", "egress", "redirect", "dev", self.host_if)
                self._filters.append(priority)

    def _free_priority(self) -> int:
        shown = run("tc", "filter", "show", "dev", "lo", "ingress").stdout
        while True:
            priority = random.randrange(1000, 49000)
            if f"pref {priority} " not in shown and priority not in self._filters:
                return priority

    def heal(self) -> None:
        while self._filters:
            run("tc", "filter", "del", "dev", "lo", "ingress", "pref", str(self._filters.pop()), check=False)
        run("ip", "link", "set", self.host_if, "up")

    def close(self) -> None:
        """Remove everything `open` and `cut` made; never raises."""
        with contextlib.suppress(Exception):
            while self._filters:
                run("tc", "filter", "del", "dev", "lo", "ingress", "pref", str(self._filters.pop()), check=False)
        with contextlib.suppress(Exception):
            if self._own_clsact and not (run("tc", "filter", "show", "dev", "lo", "egress", check=False).stdout.strip()
                                         or run("tc", "filter", "show", "dev", "lo", "ingress",
                                                check=False).stdout.strip()):
                run("tc", "qdisc", "del", "dev", "lo", "clsact", check=False)
        if self._made:
            with contextlib.suppress(Exception):
                run("ip", "netns", "del", self.namespace, check=False)  # its veth end goes, and the pair with it
            with contextlib.suppress(Exception):
                run("ip", "link", "del", self.host_if, check=False)  # in case the pair outlived it


def _ports_above_the_ephemeral_range() -> range:
    """Ports that no outgoing connection is given by the kernel: a filter left behind by a run killed mid-cut can
    then never match another program's connection."""
    with contextlib.suppress(OSError, ValueError):
        high = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[1])
        if high < 65000:
            return range(high + 1, 65536)
    return range(0, 0)


class Forwarder:
    """Accepts on `listen_host` and forwards each connection to `target`, from a known local port."""

    def __init__(self, listen_host: str, target: tuple[str, int]) -> None:
        self.listen_host, self.target = listen_host, target
        self.port = 0
        self.server_ports: list[int] = []  # the local ports of the connections to the server, oldest first
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connected, self.listen_host, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _open_to_server(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ports = _ports_above_the_ephemeral_range()
        for _ in range(50 if ports else 0):
            with contextlib.suppress(OSError):
                sock.bind(("127.0.0.1", random.choice(ports)))
                break
        else:
            sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, self.target)
        except BaseException:
            sock.close()
            raise
        self.server_ports.append(sock.getsockname()[1])
        return await asyncio.open_connection(sock=sock)

    async def _connected(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self._writers.append(client_writer)
        try:
            server_reader, server_writer = await self._open_to_server()
        except OSError:
            client_writer.close()
            return
        self._writers.append(server_writer)
        pumps = [asyncio.create_task(_pump(client_reader, server_writer)),
                 asyncio.create_task(_pump(server_reader, client_writer))]
        self._tasks.update(pumps)
        await asyncio.gather(*pumps, return_exceptions=True)
        self._tasks.difference_update(pumps)

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            await self._server.wait_closed()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()
