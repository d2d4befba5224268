"""Public API hygiene: a curated, sorted, complete ``__all__`` with docstrings."""

from __future__ import annotations

import inspect

import aleph


def test_all_is_sorted_and_complete() -> None:
    assert list(aleph.__all__) == sorted(aleph.__all__)
    public = {n for n in vars(aleph) if not n.startswith("_") and n not in ("annotations",)}
    modules = {n for n in public if inspect.ismodule(getattr(aleph, n))}
    assert public - modules - {"__version__"} == set(aleph.__all__)


def test_every_exported_name_has_a_docstring() -> None:
    for name in aleph.__all__:
        obj = getattr(aleph, name)
        if callable(obj):
            assert inspect.getdoc(obj), f"aleph.{name} has no docstring"


def test_error_tree_is_documented_in_the_errors_module() -> None:
    from aleph import _errors

    doc = _errors.__doc__ or ""
    for name in _errors.__all__:
        assert name in doc, f"{name} missing from the error tree in aleph._errors"


def test_every_hook_is_documented() -> None:
    from aleph._plugins import _hookspec

    hooks = [n for n in vars(_hookspec) if n.startswith("aleph_")]
    assert hooks
    for name in hooks:
        doc = inspect.getdoc(getattr(_hookspec, name)) or ""
        assert "Called" in doc, f"hook {name} must say when it is called"
