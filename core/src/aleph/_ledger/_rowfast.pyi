"""Type stubs of the native row builder (``_rowfast.c``); the Python twins are in ``_speedups`` and ``_rowline``."""

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
