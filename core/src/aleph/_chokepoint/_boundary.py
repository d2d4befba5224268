"""The input boundary: every call's input becomes plain JSON data before any gate sees it.

What crosses the boundary is a fresh copy made of ``dict``/``list``/``str``/``int``/``float``/``bool``/``None``
only: string keys, text that encodes as UTF-8 (no lone surrogates), finite numbers, bounded depth and size.
Anything else (bytes, sets, objects, NaN, a surrogate half) is refused with an error naming the field. The
judge, the plugins' votes, the approval prompt, the ledger and the tool then all see the same value, and no
caller can change it after it was judged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_INPUT_DEPTH", "InputProblem", "json_input", "path_label"]

MAX_INPUT_DEPTH = 64

_SCALARS = (str, int, float, bool, type(None))


class InputProblem(ValueError):
    """The input is not plain JSON data; ``field`` names where (``steps[2].text``), ``str()`` says what."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


def path_label(path: tuple[str | int, ...]) -> str:
    """``("steps", 2, "text")`` → ``steps[2].text``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _text_problem(text: str) -> str | None:
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"text holds a lone surrogate (\\u{ord(text[exc.start]):04x} at {exc.start}); send valid Unicode"
    return None


def _scalar_problem(value: Any) -> str | None:
    kind = type(value)
    if kind is str:
        return _text_problem(value)
    if kind is float and not math.isfinite(value):
        return f"{value} is not a JSON number"
    if kind in _SCALARS:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return "bytes are not JSON text; send a string"
    return f"a {kind.__name__} is not JSON data"


def _plain(value: Any, path: tuple[str | int, ...]) -> Any:
    """``value`` as a plain JSON scalar (a ``str``/``int``/``float`` subclass becomes the base type)."""
    problem = _scalar_problem(value)
    if problem is None:
        return value
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        base = str if isinstance(value, str) else int if isinstance(value, int) else float
        plain = base(value)
        if _scalar_problem(plain) is None:
            return plain
    raise InputProblem(path_label(path), problem)


def json_input(value: Any, *, max_bytes: int = 1_000_000, max_depth: int = MAX_INPUT_DEPTH) -> dict[str, Any]:
    """A checked, independent JSON copy of a call's input object; raises :class:`InputProblem`.

    Iterative (no recursion limit). Strings count by length toward ``max_bytes``, keys included, other
    scalars as 8. ``bool``/``int``/``str`` subclasses become the plain type (a judge compares by type).
    """
    if type(value) is not dict and not isinstance(value, Mapping):
        raise InputProblem("", f"input must be a JSON object, got {type(value).__name__}")
    if type(value) is dict and len(value) <= 64:  # the common flat call: one pass, no stack
        size = 0
        for key, child in value.items():
            kind = type(child)
            if type(key) is not str or not key.isascii():
                break
            if kind is str:
                if not child.isascii() and _text_problem(child):
                    break
                size += len(key) + len(child)
            elif kind is int or kind is bool or child is None or (kind is float and math.isfinite(child)):
                size += len(key) + 8
            else:
                break
        else:  # every value a plain scalar: the copy is the dict's own
            if size > max_bytes:
                raise InputProblem("", f"input is larger than {max_bytes} bytes")
            return dict(value)
    root: dict[str, Any] = {}
    size = 0
    stack: list[tuple[Any, Any, tuple[str | int, ...]]] = [(value, root, ())]
    while stack:
        node, out, path = stack.pop()
        if len(path) >= max_depth:
            raise InputProblem(path_label(path), f"input nests deeper than {max_depth} levels")
        items = node.items() if isinstance(node, Mapping) else enumerate(node)
        for key, child in items:
            if isinstance(node, Mapping):
                if not isinstance(key, str):
                    raise InputProblem(path_label(path), f"object keys must be strings, got {type(key).__name__}")
                problem = _text_problem(key)
                if problem is not None:
                    raise InputProblem(path_label((*path, key)), f"key {problem}")
                key = str(key)
                size += len(key)
            here = (*path, key)
            if isinstance(child, Mapping):
                copy: Any = {}
                stack.append((child, copy, here))
            elif isinstance(child, list | tuple):
                copy = []
                stack.append((child, copy, here))
            else:
                child = _plain(child, here)
                copy = child
                size += len(child) if type(child) is str else 8
            if isinstance(out, dict):
                out[key] = copy
            else:
                out.append(copy)
        if size > max_bytes:
            raise InputProblem("", f"input is larger than {max_bytes} bytes")
    return root
