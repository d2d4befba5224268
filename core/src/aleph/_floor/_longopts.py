"""GNU long options as the program reads them: ``--recur`` is ``--recursive`` when no other option starts so.

``getopt_long`` (coreutils, findutils' xargs, tar, sed, sudo, wget, util-linux...) accepts any unique
prefix of a long option, so ``rm --recur --forc ~`` deletes the home directory. The rules match full
option names; :func:`canonical_options` rewrites each unique prefix to the full name first, for the
programs listed here, before wrappers are unwrapped and before any rule reads the arguments. An exact
name wins over longer ones (``--preserve`` is ``cp --preserve``, not ``--preserve-root``); an ambiguous
prefix is left alone (the program refuses it and runs nothing).

Wrappers parse their options only up to the command they run (``+`` in their option string): past the
first operand the words are the inner command's, canonicalised again when that command is analysed.
"""

from __future__ import annotations

from dataclasses import replace

from aleph._floor._words import Arg

__all__ = ["LONG_OPTIONS", "canonical_options"]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_COMMON = "help version"

LONG_OPTIONS: dict[str, frozenset[str]] = {
    "rm": _names(f"force interactive one-file-system no-preserve-root preserve-root recursive dir verbose {_COMMON}"),
    "cp": _names(
        "archive attributes-only backup copy-contents debug dereference force interactive link no-dereference "
        "no-clobber preserve no-preserve parents recursive reflink remove-destination sparse "
        "strip-trailing-slashes suffix symbolic-link target-directory no-target-directory update verbose "
        f"one-file-system context keep-directory-symlink {_COMMON}"
    ),
    "mv": _names(
        "backup debug exchange force interactive no-clobber no-copy strip-trailing-slashes suffix "
        f"target-directory no-target-directory update verbose context {_COMMON}"
    ),
    "chmod": _names(f"changes no-preserve-root preserve-root quiet silent reference recursive verbose {_COMMON}"),
    "chown": _names(
        f"changes dereference no-dereference from no-preserve-root preserve-root quiet silent reference "
        f"recursive verbose {_COMMON}"
    ),
    "chgrp": _names(
        f"changes dereference no-dereference no-preserve-root preserve-root quiet silent reference recursive "
        f"verbose {_COMMON}"
    ),
    "ln": _names(
        "backup directory force interactive logical no-dereference physical relative symbolic suffix "
        f"target-directory no-target-directory verbose {_COMMON}"
    ),
    "install": _names(
        "backup compare directory group mode owner preserve-timestamps strip strip-program suffix "
        f"target-directory no-target-directory verbose preserve-context context debug {_COMMON}"
    ),
    "tee": _names(f"append ignore-interrupts output-error {_COMMON}"),
    "sort": _names(
        "ignore-leading-blanks dictionary-order ignore-case general-numeric-sort ignore-nonprinting month-sort "
        "human-numeric-sort numeric-sort random-sort random-source reverse sort version-sort batch-size check "
        "compress-program debug files0-from field-separator key merge output stable buffer-size "
        f"temporary-directory parallel unique zero-terminated {_COMMON}"
    ),
    "sed": _names(
        "quiet silent debug expression file follow-symlinks in-place line-length posix regexp-extended "
        f"separate sandbox unbuffered null-data zero-terminated {_COMMON}"
    ),
    "shred": _names(f"force iterations random-source size remove verbose exact zero {_COMMON}"),
    "truncate": _names(f"no-create io-blocks reference size {_COMMON}"),
    "split": _names(
        "suffix-length additional-suffix bytes line-bytes lines number numeric-suffixes hex-suffixes "
        f"elide-empty-files filter separator unbuffered verbose {_COMMON}"
    ),
    "tar": _names(
        "append catenate concatenate create delete diff compare extract get list update test-label "
        "directory file files-from exclude exclude-from exclude-vcs transform xform to-command "
        "checkpoint checkpoint-action use-compress-program rsh-command info-script new-volume-script "
        "remove-files keep-old-files overwrite overwrite-dir unlink-first recursive-unlink absolute-names "
        "gzip gunzip bzip2 xz zstd lzma compress auto-compress verbose wildcards no-wildcards strip-components "
        "preserve-permissions same-permissions same-owner no-same-owner numeric-owner owner group mode mtime "
        f"one-file-system null no-recursion recursion to-stdout {_COMMON}"
    ),
    "wget": _names(
        "output-document output-file append-output directory-prefix input-file execute post-file body-file "
        "quiet verbose no-verbose recursive level mirror page-requisites continue timestamping no-clobber "
        f"header user password tries timeout {_COMMON}"
    ),
    "nano": _names(f"speller rcfile ignorercfiles syntax operatingdir {_COMMON}"),
    "sdiff": _names(f"diff-program output ignore-case expand-tabs width {_COMMON}"),
    "diff3": _names(f"diff-program easy-only ed merge overlap-only show-all text {_COMMON}"),
    # Wrappers: only their own options, up to the command they run.
    "env": _names(
        "ignore-environment null unset chdir split-string argv0 default-signal ignore-signal block-signal "
        f"list-signal-handling debug {_COMMON}"
    ),
    "timeout": _names(f"preserve-status foreground kill-after signal verbose {_COMMON}"),
    "nice": _names(f"adjustment {_COMMON}"),
    "nohup": _names(_COMMON),
    "setsid": _names(f"ctty fork wait {_COMMON}"),
    "stdbuf": _names(f"input output error {_COMMON}"),
    "chroot": _names(f"userspec groups skip-chdir {_COMMON}"),
    "xargs": _names(
        "null arg-file delimiter eof replace max-lines max-args interactive no-run-if-empty max-chars "
        f"show-limits max-procs process-slot-var open-tty verbose exit {_COMMON}"
    ),
    "sudo": _names(
        "askpass background bell close-from chdir preserve-env edit group set-home host login remove-timestamp "
        "reset-timestamp list non-interactive preserve-groups prompt chroot role stdin shell type "
        f"command-timeout other-user user validate {_COMMON}"
    ),
    "runuser": _names(f"user group supp-group login command session-command fast preserve-environment shell {_COMMON}"),
    "flock": _names(f"shared exclusive unlock nonblock nb timeout wait conflict-exit-code close command {_COMMON}"),
    "unshare": _names(
        "mount uts ipc net pid user cgroup time fork kill-child mount-proc map-root-user map-current-user "
        f"map-user map-group propagation setgroups root wd setuid setgid {_COMMON}"
    ),
    "ionice": _names(f"class classdata pid pgid ignore uid {_COMMON}"),
}
"""Each program's long options, without the leading ``--``."""

_WRAPPERS = frozenset({"env", "timeout", "nice", "nohup", "setsid", "stdbuf", "chroot", "xargs", "sudo"})
_WRAPPERS |= frozenset({"runuser", "flock", "unshare", "ionice"})
_VALUED = frozenset(
    {"signal", "kill-after", "adjustment", "input", "output", "error", "userspec", "groups", "unset", "chdir"}
    | {"argv0", "arg-file", "delimiter", "eof", "replace", "max-lines", "max-args", "max-chars", "max-procs"}
    | {"process-slot-var", "user", "group", "host", "prompt", "chroot", "role", "type", "close-from"}
    | {"other-user", "command-timeout", "supp-group", "shell", "command", "timeout", "conflict-exit-code"}
    | {"class", "classdata", "pid", "pgid", "uid", "root", "wd", "setuid", "setgid", "map-user", "map-group"}
    | {"propagation", "setgroups", "session-command"}
)
"""Wrapper long options whose value is the next word (so that word is not the command)."""


def _canonical(text: str, names: frozenset[str]) -> str:
    name, eq, value = text[2:].partition("=")
    if not name or name in names:
        return text
    hits = [n for n in names if n.startswith(name)]
    return f"--{hits[0]}{eq}{value}" if len(hits) == 1 else text


def canonical_options(program: str, args: list[Arg]) -> list[Arg]:
    """``args`` with every unique prefix of one of ``program``'s long options spelled out in full."""
    names = LONG_OPTIONS.get(program)
    if names is None:
        return args
    wrapper = program in _WRAPPERS
    out: list[Arg] = []
    i = 0
    while i < len(args):
        a = args[i]
        t = a.text
        if not a.literal or t == "--":
            return [*out, *args[i:]]
        if t.startswith("--"):
            full = _canonical(t, names)
            out.append(a if full == t else replace(a, text=full))
            if wrapper and "=" not in full and full[2:] in _VALUED and i + 1 < len(args):
                out.append(args[i + 1])
                i += 1
        elif wrapper and not t.startswith("-"):
            return [*out, *args[i:]]  # the command a wrapper runs, and its own arguments
        else:
            out.append(a)
        i += 1
    return out
