"""A host process that stores turns and is killed before its vector worker writes any vector.

Its embedder blocks until the process dies, as a model still busy with a batch would; the parent
waits for "stored" on stdout (the items are committed) and then kills it with SIGKILL.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from aleph_memory import MemoryStore, NewItem


class Stuck:
    """Named like the tests' trigram embedder; never returns."""

    name = "trigram"
    dim = 64

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        threading.Event().wait()
        raise AssertionError("unreachable")


def main(path: Path, count: int) -> None:
    store = MemoryStore(path, embedder=Stuck())
    turns = [
        NewItem(
            f"Turn {i} about the kittenish twins" if i == 7 else f"Turn {i} of plain chatter",
            "turn",
            speaker="Ann",
            session="s1",
            seq=i,
            ref=f"s1:{i}",
        )
        for i in range(count)
    ]
    store.ingest("alice", turns)
    print("stored", flush=True)
    sys.stdin.read()  # the parent kills this process; it never returns on its own


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
