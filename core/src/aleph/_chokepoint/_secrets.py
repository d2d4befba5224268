"""Secret handles: a value put into a call after it was judged and approved, and scrubbed from what it leaves.

A tool argument may hold a handle such as ``{{vault:github_token}}`` (the whole string or part of
one). Every gate (rules, votes, approval prompts, the ledger, the event log) sees the handle only.
After the verdict and any approval, and just before the tool runs, the chokepoint asks the resolver
registered for the handle's scheme for the value, for this tool, this argument field and this
principal; the resolver refuses (:class:`~aleph.PermissionDenied`) whatever the secret's own rule
does not allow. The tool runs on a copy of the input with the values put in; its result, its error
text and its progress chunks are scrubbed of every value it was given (replaced by the handle).

A family provides a scheme with :meth:`aleph.PluginContext.add_secret_resolver`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from aleph._principal import Principal

__all__ = ["HANDLE", "SecretResolver", "SecretResolvers", "Substitution"]

HANDLE = re.compile(r"\{\{([a-z][a-z0-9_]{0,31}):([A-Za-z0-9_.-]{1,128})\}\}")
"""A handle: ``{{<scheme>:<name>}}``."""

_MAX_HANDLES = 64  # per call: an input cannot make the chokepoint resolve without bound


@runtime_checkable
class SecretResolver(Protocol):
    """Gives the value behind a handle of one scheme, or refuses."""

    def resolve_secret(
        self, name: str, *, tool: str, field: tuple[str | int, ...], arguments: Mapping[str, Any], principal: Principal
    ) -> str:
        """The value of secret ``name`` for ``tool``'s argument at ``field`` (a path into the input).

        ``arguments`` is the judged input (handles in place), e.g. to check a URL's domain. Raise
        :class:`~aleph.PermissionDenied` when the principal does not own such a secret or its rule does
        not allow this tool or field (a foreign secret answers like a missing one).
        """
        ...


@dataclass
class Substitution:
    """The input a tool runs on, and the values to scrub from what it returns."""

    raw: dict[str, Any]
    secrets: dict[str, str] = field(default_factory=dict)
    """value → handle."""

    def scrub(self, text: str) -> str:
        """``text`` with every value replaced by its handle (longest first, so no part of one survives)."""
        for value in sorted(self.secrets, key=len, reverse=True):
            if value in text:
                text = text.replace(value, self.secrets[value])
        return text

    def scrub_value(self, value: Any) -> Any:
        """A JSON-like value with every string scrubbed."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, Mapping):
            return {self.scrub(str(k)): self.scrub_value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub_value(v) for v in value]
        return value


class SecretResolvers:
    """The runtime's resolvers by scheme."""

    def __init__(self) -> None:
        self._by_scheme: dict[str, SecretResolver] = {}
        self.active = False
        """Whether any resolver is registered (read on every call: an attribute, not ``__bool__``)."""

    def __bool__(self) -> bool:
        return self.active

    def add(self, scheme: str, resolver: SecretResolver) -> None:
        """Register ``resolver`` for ``{{scheme:...}}``; a second resolver for a scheme is an error."""
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", scheme):
            raise ValueError(f"secret scheme {scheme!r}: use lowercase letters, digits and _")
        if scheme in self._by_scheme:
            raise ValueError(f"secret scheme {scheme!r} already has a resolver")
        self._by_scheme[scheme] = resolver
        self.active = True

    def substitute(
        self, tool: str, raw: Mapping[str, Any], arguments: Mapping[str, Any], principal: Principal
    ) -> Substitution | None:
        """The input with every known handle replaced, or None when it holds none."""
        found: list[int] = [0]
        out = self._walk(raw, (), tool, arguments, principal, {}, found)
        if not found[0]:
            return None
        secrets: dict[str, str] = out[1]
        return Substitution(out[0], secrets)

    def _walk(
        self,
        value: Any,
        path: tuple[str | int, ...],
        tool: str,
        arguments: Mapping[str, Any],
        principal: Principal,
        secrets: dict[str, str],
        found: list[int],
    ) -> tuple[Any, dict[str, str]]:
        if isinstance(value, str):
            if "{{" not in value:
                return value, secrets

            def put(match: re.Match[str]) -> str:
                resolver = self._by_scheme.get(match.group(1))
                if resolver is None:
                    return match.group(0)
                found[0] += 1
                if found[0] > _MAX_HANDLES:
                    raise ValueError(f"more than {_MAX_HANDLES} secret handles in one call")
                secret = resolver.resolve_secret(
                    match.group(2), tool=tool, field=path, arguments=arguments, principal=principal
                )
                if secret:
                    secrets[secret] = match.group(0)
                return secret

            return HANDLE.sub(put, value), secrets
        if isinstance(value, Mapping):
            return {
                k: self._walk(v, (*path, k), tool, arguments, principal, secrets, found)[0] for k, v in value.items()
            }, secrets
        if isinstance(value, list):
            return [
                self._walk(v, (*path, i), tool, arguments, principal, secrets, found)[0] for i, v in enumerate(value)
            ], secrets
        return value, secrets
