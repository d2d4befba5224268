"""The built-in command-policy rules: hardline rules, cannot-prove-safe guards and the default tunable rules.

Each rule is a predicate over one analysed :class:`~aleph._floor._analysis.Command`. What a program
does with its arguments is read in :mod:`aleph._floor._targets`, the rules about running code are in
:mod:`aleph._floor._execution`; the tables here name every rule, and :mod:`aleph._floor._policy`
combines them.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import replace

from aleph._floor._analysis import Arg, Command, resolve
from aleph._floor._containers import CONTAINER_ENGINES, container_reaches_host
from aleph._floor._destinations import TREE_DESTINATION_PROGRAMS, tree_destination
from aleph._floor._execution import (
    _EXEC_OPTION_NAMES,
    _code_from_pipe,
    _code_in_variable,
    _dynamic_script,
    _exec_flag,
    _loader_variable,
    _pipe_to_shell,
    _privilege,
    _reverse_shell,
    _shell_eval_download,
    _state_change,
    _sudo_stdin,
    _unknown_program,
)
from aleph._floor._rule import Builtin, Env, Tier
from aleph._floor._targets import (
    _BLOCK_DEVICE,
    _MKFS,
    _SYSTEM_DIRS,
    _covers,
    _find_deletes,
    _flags,
    _is_block_device,
    _option_value,
    _paths,
    _rm_targets,
    _root_or_home,
    _system_path,
    _under,
    _write_targets,
)
from aleph._floor._wrappers import is_interpreter
from aleph._protected import HOST_EXECUTED_PATHS, ProtectedPaths

__all__ = ["DEFAULT_RULES", "GUARDS", "HARDLINE", "Builtin", "Env", "Tier"]


_RC_FILES = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".gitconfig",
    ".config/git/config",
    ".config/fish/config.fish",
    ".inputrc",
)


def _rm_rf_root(cmd: Command, env: Env) -> bool:
    return any(_root_or_home(a, cmd, env) for a in _rm_targets(cmd))


def _recursive_mode_root(cmd: Command, env: Env) -> bool:
    """``chmod -R``/``chown -R``/``chgrp -R``/``setfacl -R`` of /, home or /home (and what can be one of them)."""
    if not _flags(cmd.args) & {"-R", "--recursive"}:
        return False
    operands = _paths(cmd.args)[1:] if cmd.program != "setfacl" else _paths(cmd.args)
    return any(_root_or_home(a, cmd, env) for a in operands)


def _rm_no_preserve_root(cmd: Command, env: Env) -> bool:
    return any(a.text == "--no-preserve-root" for a in cmd.args)


def _rm_rf_system_path(cmd: Command, env: Env) -> bool:
    return any(_system_path(a, cmd) for a in _rm_targets(cmd))


def _dd_to_block_device(cmd: Command, env: Env) -> bool:
    return any(a.text.startswith("of=") and _is_block_device(Arg(a.text[3:], a.literal), cmd) for a in cmd.args)


def _mkfs_device(cmd: Command, env: Env) -> bool:
    if not _MKFS.fullmatch(cmd.program):
        return False
    return any(a.text.startswith("/dev/") or _is_block_device(a, cmd) for a in _paths(cmd.args))


_WIPE_TOOLS = frozenset({"wipefs", "blkdiscard", "shred", "sgdisk", "sfdisk", "badblocks", "fdisk", "gdisk", "cfdisk"})


_WIPE_TOOLS_SUB = {
    "hdparm": ("--security-erase", "--security-erase-enhanced", "--trim-sector-ranges", "--sanitize"),
    "nvme": ("format", "sanitize"),
    "cryptsetup": ("luksFormat", "erase", "luksErase", "format", "reencrypt"),
    "parted": ("mklabel", "mkpart", "rm", "resizepart", "mkpartfs"),
}


def _device_wipe(cmd: Command, env: Env) -> bool:
    if not any(_is_block_device(a, cmd) or _BLOCK_DEVICE.search(a.text) for a in cmd.args):
        return False
    texts = {a.text.split("=", 1)[0] for a in cmd.args}
    if cmd.program in _WIPE_TOOLS_SUB:
        return bool(texts & set(_WIPE_TOOLS_SUB[cmd.program]))
    if cmd.program in ("fdisk", "gdisk", "cfdisk", "sfdisk") and texts & {"-l", "--list", "-d", "--dump"}:
        return False
    if cmd.program == "badblocks":
        return bool(_flags(cmd.args) & {"-w", "-n"})
    return True


# Files a program on the host runs code from (git's config, hooks and pointers, .envrc, ...), anywhere:
# the same list transactions and the files family refuse (aleph._protected).
_HOST_EXECUTED = ProtectedPaths(HOST_EXECUTED_PATHS)


def _host_executed(path: str) -> bool:
    return _HOST_EXECUTED.hit(path.lstrip("/"), non_dir=True) is not None


def _protected(path: str, env: Env) -> bool:
    if any(_under(path, p) for p in env.protected):
        return True
    if _host_executed(path):
        return True
    if _under(path, f"{env.home}/.ssh"):
        return True
    return any(path == f"{env.home}/{rc}" for rc in _RC_FILES)


def _glob_hits_protected(pattern: str, env: Env) -> bool:
    """A glob target (``> ~/.bash*``, ``cp x ~/.ss?/``) that can name a protected file is judged as that file."""
    candidates = [*env.protected, *(f"{env.home}/{rc}" for rc in _RC_FILES), f"{env.home}/.ssh"]
    prefix = pattern.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0]
    return any(c.startswith(prefix) and fnmatch.fnmatchcase(c, pattern) for c in candidates) or (
        "/.git/" in pattern and fnmatch.fnmatchcase(pattern.replace("*", "config"), pattern)
    )


def _relative_protected(text: str) -> bool:
    return _host_executed(os.path.normpath(text))


def _find_writes_home(cmd: Command, env: Env) -> bool:
    """``find ~ -exec shred {} +``: every file under a start point that holds the home directory is written.

    find's ``{}`` stands for anything under the start point (its name filters are not modelled), so a
    write through it is judged by where it starts: at or above the home directory, start-up files and
    ``.ssh`` are among the files, and the command asks.
    """
    if "find" not in cmd.via:
        return False
    targets = [*_write_targets(cmd), *(_rm_targets(cmd) if cmd.program in ("rm", "mv") else ())]
    if is_interpreter(cmd.program):
        targets.extend(cmd.args)  # inline code handed find's files (`perl -e 'unlink @ARGV' {} +`): not readable
    for target in targets:
        path = resolve(target.text, cmd.cwd) if target.literal and target.glob else None
        if path is not None and path.endswith("/*") and _under(env.home, path[:-2] or "/"):
            return True
    return False


def _write_protected(cmd: Command, env: Env) -> bool:
    for target in _write_targets(cmd):
        if not target.literal:
            continue
        path = resolve(target.text, cmd.cwd)
        if target.glob and path is not None and "find" not in cmd.via and _glob_hits_protected(path, env):
            return True
        if path is not None and _protected(path, env):
            return True
        if path is None and _relative_protected(target.text):
            return True
    # Deleting (or moving away) a tree deletes every protected file inside it: `rm -rf .` covers aleph.toml.
    for target in _rm_targets(cmd) if cmd.program in ("rm", "mv", "cmake") else ():
        path = resolve(target.text, cmd.cwd) if target.literal and not _root_or_home(target, cmd, env) else None
        if path is not None and any(_under(p, path) for p in env.protected):
            return True
    return False


def _redirect_to_block_device(cmd: Command, env: Env) -> bool:
    targets = _write_targets(cmd)
    if cmd.program == "dd" or cmd.program in _WIPE_TOOLS:
        # their operands are judged by dd_to_block_device and device_wipe_tools
        targets = [t for _, _, t in cmd.redirects if t is not None]
    return any(_is_block_device(t, cmd) for t in targets if cmd.program not in ("chmod", "chown", "chgrp"))


_CHMOD_777 = re.compile(r"0?[0-7]?777|(?:a|ugo|o)?\+[rxX]{0,3}w[rwxX]{0,3}|a=rwx|ugo=rwx")


def _chmod_777_system(cmd: Command, env: Env) -> bool:
    args = [a for a in cmd.args if not (a.text.startswith("-") and not _CHMOD_777.fullmatch(a.text))]
    if not args or not _CHMOD_777.fullmatch(args[0].text):
        return False
    return any(a.literal and (resolve(a.text, cmd.cwd) == "/" or _system_path(a, cmd)) for a in args[1:])


def _write_sensitive_etc(cmd: Command, env: Env) -> bool:
    return any(
        t.literal and (resolve(t.text, cmd.cwd) or "").startswith("/etc/")
        for t in _write_targets(cmd)
        if cmd.program not in ("rm", "rmdir", "unlink")
    )


def _system_shutdown(cmd: Command, env: Env) -> bool:
    p = cmd.program
    texts = [a.text for a in cmd.args]
    if p in ("shutdown", "reboot", "halt", "poweroff"):
        return True
    if p in ("init", "telinit"):
        return bool(texts) and texts[0] in ("0", "6")
    if p in ("systemctl", "loginctl"):
        return any(t in ("poweroff", "reboot", "halt", "kexec", "suspend", "hibernate", "soft-reboot") for t in texts)
    if p in ("kill", "pkill"):
        return p == "kill" and ("-1" in texts[1:] or "1" in texts or texts[-2:] == ["--", "-1"])
    return False


def _authorized_keys(cmd: Command, env: Env) -> bool:
    return any("authorized_keys" in t.text for t in _write_targets(cmd))


_READERS = frozenset(
    {"cat", "less", "more", "head", "tail", "grep", "egrep", "fgrep", "rg", "ls", "stat", "wc", "file", "du"}
    | {"sha256sum", "sha1sum", "md5sum", "b2sum", "tree", "diff", "cmp", "jq", "xxd", "hexdump", "od", "strings"}
    | {"aleph", "test", "[", "realpath", "readlink", "dirname", "basename", "echo", "printf", "cd", "pushd"}
)


def _touches_aleph_files(cmd: Command, env: Env) -> bool:
    """Any other program handed one of Aleph's own files (``sqlite3 events.sqlite3 'delete ...'``)."""
    if not env.protected or cmd.program in _READERS or (cmd.program == "find" and not _find_deletes(cmd)):
        return False
    inside = cmd.cwd is not None and any(_under(cmd.cwd, p) for p in env.protected)
    for a in cmd.args:
        if not inside and not any(name in a.text for name in env.protected_names):
            continue
        text = a.text.split("=", 1)[1] if a.text.startswith("-") and "=" in a.text else a.text
        path = resolve(text, cmd.cwd) if a.literal and text and not text.startswith("-") else None
        if path is not None and any(_under(path, p) for p in env.protected):
            return True
    return False


_UNKNOWN_CWD = "/\x00unknown-cwd"


def _dynamic_delete(cmd: Command, env: Env) -> bool:
    targets = _rm_targets(cmd)
    if any(not a.literal for a in targets):
        return True
    if cmd.cwd is not None or not targets or cmd.program == "find":
        return False  # find's filters are left to the transaction, as where the directory is known
    # where the working directory is only known at run time (`cd "$d" && rm -rf *`), a delete of all of it
    # or above it may be of / or the home directory
    somewhere = replace(cmd, cwd=_UNKNOWN_CWD)
    return any(_under(_UNKNOWN_CWD, path) for a in targets for path in _covers(a, somewhere))


_TREE_WRITERS = frozenset({"tar", "bsdtar", "gtar", "unzip", "7z", "cpio", "bsdcpio", "cp", "rsync", "scp"})


def _tree_into_wide_dir(cmd: Command, env: Env) -> bool:
    """A tree of unknown file names (an archive, a recursive copy) written into /, home or a system directory.

    It may hold a protected file (``~/.bashrc``, ``~/.ssh/...``), so it cannot be proven safe.
    """
    p = cmd.program
    if p not in _TREE_WRITERS and p not in TREE_DESTINATION_PROGRAMS:
        return False
    texts = [a.text for a in cmd.args]
    dest: Arg | None = tree_destination(cmd)
    if p in ("tar", "bsdtar", "gtar"):
        extracting = any(
            t in ("-x", "--extract", "--get") or re.fullmatch(r"-?[a-wyzA-Z]*x[A-Za-z]*", t) for t in texts[:3]
        )
        if not extracting:
            return False
        dest = _option_value(cmd.args, ("-C", "--directory")) or Arg(".")
    elif p == "7z":
        dest = _option_value(cmd.args, ("-o",)) or Arg(".")
    elif p in ("cp", "rsync", "scp") and (
        _flags(cmd.args) & {"-r", "-R", "-a", "--recursive", "--archive"} or p == "rsync"
    ):
        operands = _paths(cmd.args)
        dest = _option_value(cmd.args, ("-t", "--target-directory")) or (operands[-1] if len(operands) >= 2 else None)
    if dest is None:
        return False
    wide = ("/", "/home", env.home, *_SYSTEM_DIRS)
    return any(path in wide or _holds_protected(path, cmd, env) for path in _covers(dest, cmd))


def _privilege_or_host_container(cmd: Command, env: Env) -> bool:
    if cmd.program not in CONTAINER_ENGINES:
        return _privilege(cmd, env)
    wide = ("/", "/home", env.home, *_SYSTEM_DIRS)
    return container_reaches_host(
        cmd, lambda a: any(p in wide or _holds_protected(p, cmd, env) for p in _covers(a, cmd))
    )


def _holds_protected(path: str, cmd: Command, env: Env) -> bool:
    """A directory in a protected path (``~/.ssh``, ``.git/hooks``) or holding one outside the working directory.

    ``~/.config`` holds ``git/config``: unknown names written there may be that file.
    """
    if _protected(path, env):
        return True
    if cmd.cwd is not None and _under(path, cmd.cwd):
        return False  # the workspace's own protected files are the transaction's to refuse
    candidates = [*env.protected, *(f"{env.home}/{rc}" for rc in _RC_FILES), f"{env.home}/.ssh"]
    return any(_under(c, path) for c in candidates)


def _dynamic_write(cmd: Command, env: Env) -> bool:
    if _MKFS.fullmatch(cmd.program) or cmd.program in _WIPE_TOOLS or cmd.program in _WIPE_TOOLS_SUB:
        return any(not a.literal for a in _paths(cmd.args))
    if _tree_into_wide_dir(cmd, env):
        return True
    if cmd.program in ("rm", "rmdir", "unlink", "chmod", "chown", "chgrp"):
        return False
    targets = _write_targets(cmd)
    if cmd.program == "mv":  # a computed source is only moved; the destination is what gets written
        moved = {id(a) for a in _rm_targets(cmd)}
        targets = [t for t in targets if id(t) not in moved]
    return any(not t.literal for t in targets)


def _unknown_cwd_write(cmd: Command, env: Env) -> bool:
    if cmd.cwd is not None:
        return False
    names = {rc.rsplit("/", 1)[-1] for rc in _RC_FILES} | {"authorized_keys", "config"}
    for t in _write_targets(cmd):
        if t.literal and not t.text.startswith("/") and (t.text.rsplit("/", 1)[-1] in names or ".ssh" in t.text):
            return True
    return False


_DELETERS = frozenset({"rm", "find", "mv", "tar", "bsdtar", "gtar", "rsync", "cmake"})


HARDLINE = (
    Builtin(
        "rm_no_preserve_root",
        "hardline",
        "block",
        "rm --no-preserve-root can delete the whole filesystem",
        _rm_no_preserve_root,
        frozenset({"rm"}),
    ),
    Builtin(
        "rm_rf_root",
        "hardline",
        "block",
        "recursive delete of /, the home directory or /home",
        _rm_rf_root,
        _DELETERS,
    ),
    Builtin(
        "recursive_mode_root",
        "hardline",
        "block",
        "recursive permission or owner change of /, the home directory or /home",
        _recursive_mode_root,
        frozenset({"chmod", "chown", "chgrp", "setfacl"}),
    ),
    Builtin(
        "dd_to_block_device",
        "hardline",
        "block",
        "dd writing to a block device",
        _dd_to_block_device,
        frozenset({"dd"}),
    ),
    Builtin(
        "mkfs_device",
        "hardline",
        "block",
        "creating a filesystem on a device",
        _mkfs_device,
        None,
    ),
    Builtin(
        "redirect_to_block_device",
        "hardline",
        "block",
        "writing to a block device",
        _redirect_to_block_device,
    ),
    Builtin(
        "device_wipe_tools",
        "hardline",
        "block",
        "wiping or repartitioning a block device",
        _device_wipe,
        _WIPE_TOOLS | frozenset(_WIPE_TOOLS_SUB),
    ),
    Builtin(
        "write_protected_path",
        "hardline",
        "block",
        "writing a protected file (Aleph's own files, git config, hooks and pointers and other files host "
        "programs run code from, ~/.ssh, shell start-up files)",
        _write_protected,
    ),
)


GUARDS = (
    Builtin(
        "find_writes_home",
        "guard",
        "ask",
        "find hands every file under the home directory (start-up files, .ssh) to a program that writes them",
        _find_writes_home,
    ),
    Builtin(
        "code_in_variable",
        "guard",
        "ask",
        "stores shell code in a variable where arithmetic would run it (x='a[$(cmd)]')",
        _code_in_variable,
    ),
    Builtin(
        "aleph_files",
        "guard",
        "ask",
        "hands one of Aleph's own files (configuration, ledger, keys) to a program that may change it",
        _touches_aleph_files,
    ),
    Builtin(
        "code_from_pipe",
        "guard",
        "ask",
        "a shell or interpreter runs code produced by another command",
        _code_from_pipe,
    ),
    Builtin(
        "dynamic_shell_code",
        "guard",
        "ask",
        "a shell runs a script whose name or content is only known at run time",
        _dynamic_script,
    ),
    Builtin(
        "dynamic_delete_target",
        "guard",
        "ask",
        "recursive delete of a path that is only known at run time",
        _dynamic_delete,
        frozenset({"rm", "find", "tar", "bsdtar", "gtar", "rsync"}),
    ),
    Builtin(
        "dynamic_write_target",
        "guard",
        "ask",
        "writes to a file whose name is only known at run time",
        _dynamic_write,
    ),
    Builtin(
        "unknown_cwd_write",
        "guard",
        "ask",
        "writes a file that may be protected, in a directory that is only known at run time",
        _unknown_cwd_write,
    ),
    Builtin(
        "loader_variable",
        "guard",
        "ask",
        "sets a loader or hook variable that makes programs run other code",
        _loader_variable,
    ),
    Builtin(
        "shell_state_change",
        "guard",
        "ask",
        "changes how later commands run (alias, trap, source, PATH, set/shopt options)",
        _state_change,
    ),
    Builtin(
        "unknown_program",
        "guard",
        "ask",
        "a program whose options the floor does not know, given arguments that name a program or a wide target "
        "(it may run them)",
        _unknown_program,
    ),
    Builtin(
        "exec_flag",
        "guard",
        "ask",
        "a flag or setting that makes this program run another command",
        _exec_flag,
        frozenset(
            {"git", "tar", "bsdtar", "gtar", "rsync", "ssh", "scp", "sftp", "autossh", "awk", "gawk", "mawk", "nawk"}
            | {"sed", "zip", "man", "crontab", "at", "batch", "make", "gmake", "gdb", "lldb", "vim", "vi", "nvim"}
            | {"ex", "view", "vimdiff", "gvim", "emacs", "ed", "less", "more", "cmake"}
            | frozenset(_EXEC_OPTION_NAMES)
        ),
    ),
)


# Code from the network run unseen, and a shell handed to the network, ask a person: stricter than the
# reference (which warns) because a warning is an allow to an agent (docs/command-policy.md).
DEFAULT_RULES = (
    Builtin(
        "rm_rf_system_path",
        "tunable",
        "warn",
        "recursive delete of a system path",
        _rm_rf_system_path,
        _DELETERS,
    ),
    Builtin(
        "pipe_to_shell",
        "tunable",
        "ask",
        "downloaded content piped into a shell or interpreter",
        _pipe_to_shell,
    ),
    Builtin(
        "shell_eval_download",
        "tunable",
        "ask",
        "a shell runs code straight from a download",
        _shell_eval_download,
    ),
    Builtin(
        "chmod_777_system",
        "tunable",
        "warn",
        "world-writable permissions on a system path",
        _chmod_777_system,
        frozenset({"chmod"}),
    ),
    Builtin("write_sensitive_etc", "tunable", "warn", "writing a file under /etc", _write_sensitive_etc),
    Builtin("reverse_shell_devtcp", "tunable", "ask", "network shell (/dev/tcp, nc -e, socat exec)", _reverse_shell),
    Builtin(
        "system_shutdown",
        "tunable",
        "warn",
        "shuts down or reboots the machine",
        _system_shutdown,
        frozenset({"shutdown", "reboot", "halt", "poweroff", "init", "telinit", "systemctl", "loginctl", "kill"}),
    ),
    Builtin(
        "sudo_privilege_stdin",
        "tunable",
        "warn",
        "sudo reading a password from standard input",
        _sudo_stdin,
        frozenset({"sudo"}),
    ),
    Builtin(
        "write_ssh_authorized_keys",
        "tunable",
        "warn",
        "writing an SSH authorized_keys file",
        _authorized_keys,
    ),
    Builtin(
        "privilege_escalation",
        "tunable",
        "ask",
        "runs a command as another user (sudo, doas, su, pkexec) or a container that reaches the host",
        _privilege_or_host_container,
        frozenset({"sudo", "doas", "su", "pkexec", "run0", "runuser", "sudoedit"}) | CONTAINER_ENGINES,
    ),
)
