"""A network namespace per run (network ``proxied``), made ahead by a thread of the zygote.

Part of the zygote (:mod:`aleph_exec._zygote`): standard library only, loaded from beside it.

Every run of a ``proxied`` sandbox starts in a network namespace of its own: a loopback and, on
``127.0.0.1:<port>``, the egress proxy's listening socket for that run alone, which goes to the host
with the run. A connection the host accepts on it came from that run's namespace, whatever credential
it carries; a command cannot address another run's listener (it is in another namespace), so another
run's credential, read from ``/proc/<pid>/environ``, opens nothing.

Making a network namespace takes about a millisecond (mostly waiting in the kernel, not CPU), so a
thread makes the next one while the server serves: ``unshare(CLONE_NEWNET)`` moves only that thread.
The server enters the namespace (``setns``) for the spawn, which puts the command there, and goes back.
Every namespace is fresh, so the listener always takes the same port, the one the first got: a run's
proxy URL is known before the run starts.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import threading

from _zygote_kernel import check, libc

CLONE_NEWNET = 0x40000000
CLONE_FS = 0x200
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
TAKE_S = 10.0  # the longest a run waits for its namespace (made in about a millisecond)


def netns_fd() -> int:
    return os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)


def enter(fd: int) -> None:
    check(libc.setns(fd, CLONE_NEWNET), "setns(CLONE_NEWNET)")


def loopback_up() -> None:
    """Bring ``lo`` up (a new network namespace starts with it down): needs ``CAP_NET_ADMIN`` there."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        flags = struct.unpack_from("16sH", fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack("16sH14x", b"lo", 0)))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def make(port: int, fds_lock: threading.Lock) -> tuple[int, socket.socket]:
    """In the calling thread: a fresh network namespace, its loopback up, a listener on 127.0.0.1:``port``.

    The descriptors are opened under ``fds_lock``, which the server holds while its open-file limit is
    lowered for a spawn (see ``Spawner.spawn``).
    """
    check(libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
    with fds_lock:
        loopback_up()
        listener = socket.create_server(("127.0.0.1", port), backlog=128)
        try:
            return netns_fd(), listener
        except OSError:
            listener.close()
            raise


class NetMaker:
    """Keeps one run's network namespace ready: its fd and its listener."""

    def __init__(self) -> None:
        self.home = netns_fd()  # where the server goes back to after a spawn
        self.port = 0
        self.ready: tuple[int, socket.socket] | None = None
        self.error = ""  # the last make failed (the next take tries again)
        self.broken = ""  # the thread could not start: no namespace will come
        self.cond = threading.Condition()
        self.fds_lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        """Make the first namespace (its listener's port is every run's); OSError if it cannot be made."""
        self.thread = threading.Thread(target=self._loop, name="aleph-netns", daemon=True)
        self.thread.start()
        ns, listener = self.take()  # the thread has set the port from it
        os.close(ns)
        listener.close()

    def _loop(self) -> None:
        try:
            # Our own cwd and root: the server's then stay unshared, as its setns into a mount namespace needs.
            check(libc.unshare(CLONE_FS), "unshare(CLONE_FS)")
        except OSError as exc:
            with self.cond:
                self.broken = f"the run's network namespace cannot be made: {exc}"
                self.cond.notify_all()
            return
        while True:
            with self.cond:
                while self.ready is not None or self.error:
                    self.cond.wait()
            try:
                made: tuple[int, socket.socket] | None = make(self.port, self.fds_lock)
                error = ""
            except OSError as exc:
                made, error = None, f"the run's network namespace could not be made: {exc}"
            with self.cond:
                if made is not None and not self.port:
                    self.port = made[1].getsockname()[1]  # the first: every later listener takes its port
                self.ready, self.error = made, error
                self.cond.notify_all()

    def take_ready(self) -> tuple[int, socket.socket] | None:
        """The next run's namespace and listener if one is made already (never waits), else None."""
        with self.cond:
            made, self.ready = self.ready, None
            if made is not None:
                self.cond.notify_all()  # the thread makes the next one
        return made

    def take(self) -> tuple[int, socket.socket]:
        """The next run's namespace (fd) and listener, waiting for it if need be; OSError when it failed."""
        with self.cond:
            if not self.cond.wait_for(lambda: self.ready is not None or self.error or self.broken, TAKE_S):
                raise OSError("the run's network namespace did not come")
            if self.broken:
                raise OSError(self.broken)
            made, self.ready = self.ready, None
            error, self.error = self.error, ""  # the next take tries again
            self.cond.notify_all()
        if made is None:
            raise OSError(error)
        return made


def early_door(net: NetMaker | None, run_sock: int) -> list[int]:
    """A kit's network namespace, when one is made already: its door goes on the kit's run socket now.

    The host finds the door there when it starts the run that takes the kit, instead of being woken
    for it during the run. Returns ``[namespace fd]`` (the run is born there), or ``[]``: the run takes
    one when it starts, and its door goes then.
    """
    made = net.take_ready() if net is not None else None
    if made is None:
        return []
    ns, listener = made
    send_door(run_sock, listener)
    return [ns]


def send_door(run_sock: int, listener: socket.socket) -> None:
    """Send a run's listener to the host on its run socket (``{"net": 1}``), then close ours."""
    carrier = socket.socket(fileno=run_sock)
    try:
        socket.send_fds(carrier, [b'{"net": 1}\n'], [listener.fileno()])
    except OSError:
        pass  # the host is gone; the run ends when its socket is read as closed
    finally:
        carrier.detach()
        listener.close()
