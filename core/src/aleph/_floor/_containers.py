"""Containers that reach the host: ``docker run -v /:/host``, ``--privileged``, the engine's own socket.

A container engine runs its containers as a daemon's user (often root). One started with the host's
root, home or a system directory bound in, with the engine's socket, or with host namespaces and
capabilities can change the host as that user: ``docker run -v ~:/h alpine rm -rf /h`` deletes the home
directory while its command names only ``/h``. So such a ``run``/``create`` is a privilege escalation
(asked, like ``sudo``); a container with the project bound in (``-v "$PWD":/src``) is not.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from aleph._floor._command import Command
from aleph._floor._words import Arg

__all__ = ["CONTAINER_ENGINES", "container_reaches_host"]

CONTAINER_ENGINES = frozenset({"docker", "podman", "nerdctl"})

_GLOBAL_VALUED = frozenset(
    {"-H", "--host", "-c", "--context", "--config", "-l", "--log-level", "--url", "--connection"}
)
_HOST_FLAGS = re.compile(
    r"--privileged(=true)?$|--(pid|ipc|userns|uts|cgroupns)(=|$)|--cap-add(=|$)|--device(=|$)|--security-opt(=|$)"
)
_BIND_SOURCE = re.compile(r"(?:^|,)(?:source|src)=([^,]+)")
_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock", "/run/containerd")


def _mount_sources(args: list[Arg]) -> list[Arg]:
    out: list[Arg] = []
    for i, a in enumerate(args):
        t = a.text
        value: str | None = None
        if t in ("-v", "--volume", "--mount") and i + 1 < len(args):
            value, t = args[i + 1].text, t
            literal = args[i + 1].literal
        elif t.startswith(("--volume=", "--mount=")):
            value, literal = t.split("=", 1)[1], a.literal
        elif t.startswith("-v") and len(t) > 2:
            value, literal = t[2:], a.literal
        if value is None:
            continue
        if t.startswith("--mount"):
            m = _BIND_SOURCE.search(value)
            if m:
                out.append(Arg(m.group(1), literal))
        elif value.startswith(("/", "~", ".", "$")) or not literal:
            out.append(Arg(value.split(":", 1)[0], literal))
    return out


def container_reaches_host(cmd: Command, wide: Callable[[Arg], bool]) -> bool:
    """``cmd`` starts a container that can change the host (``wide``: a bind source that is too much)."""
    args = list(cmd.args)
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        i += 2 if args[i].text in _GLOBAL_VALUED else 1
    rest = args[i:]
    if rest and rest[0].text == "container":
        rest = rest[1:]
    if not rest or rest[0].text not in ("run", "create"):
        return False
    opts = rest[1:]
    if any(_HOST_FLAGS.match(a.text) for a in opts):
        return True
    for source in _mount_sources(opts):
        text = source.text
        if not source.literal and cmd.cwd is not None:
            text = re.sub(r"\$\{PWD\}|\$PWD(?![A-Za-z0-9_])|\$\(pwd\)|`pwd`", lambda _: cmd.cwd or "", text)
        if "$" in text or "`" in text or text.startswith(_SOCKETS) or wide(Arg(text)):
            return True  # a source only known at run time may be any of them
    return False
