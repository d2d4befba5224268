"""Type stubs of the native row builder (``_rowfast.c``); the Python twins are in ``_speedups`` and ``_rowline``."""

from collections.abc import Callable

class MarkKey:
    def __init__(self, key: bytes, /) -> None: ...
    def mark(self, digest: bytes, /) -> str: ...

def row_line(
    agent_id: str,
    seq: int,
    prev: bytes | None,
    signer_fp: str,
    key: MarkKey,
    at_ms: int,
    action: str,
    target: str,
    outcome: str,
    detail: str,
    args_fp: str | None,
    principal: str | None,
    result_fp: str | None,
    rule: str | None,
    /,
) -> tuple[bytes, bytes] | None: ...

class Lease:
    held: int
    allowed: int
    fd: int
    seq: int
    size: int
    head: bytes | None
    def __init__(self, fd: int, want: object = None, /) -> None: ...
    def bind(self, agent_id: str, signer_fp: str, key: MarkKey, /) -> None: ...
    def append(
        self,
        action: str,
        target: str,
        outcome: str,
        detail: str,
        args_fp: str | None,
        principal: str | None,
        result_fp: str | None,
        rule: str | None,
        /,
    ) -> int: ...
    def append_call(
        self,
        tool: str,
        arguments: object,
        principal: str | None,
        secret_cache: dict[str, bool],
        is_secret_key: Callable[[str], bool],
        clean: Callable[[str], str],
        secret_json: str,
        limit: int,
        /,
    ) -> int: ...
    def release(self) -> None: ...
    def detach(self) -> None: ...
    def requests(self) -> int: ...

def call_print(
    tool: str,
    arguments: object,
    secret_cache: dict[str, bool],
    is_secret_key: Callable[[str], bool],
    clean: Callable[[str], str],
    secret_json: str,
    limit: int,
    /,
) -> tuple[str, str] | None: ...
