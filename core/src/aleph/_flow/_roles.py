"""Named roles: the user's request says which value to take from a source it names, and where it goes.

"Invite Dora. You can find her e-mail on her website: www.dora-website.com" names a source by its
identifier (the link) *and* the kind of value to take from it (an e-mail address). That request
vouches for exactly one thing: the one e-mail address on that page, in an argument whose role is an
e-mail address (``user_email``, ``to``), carried as the whole argument. It does not vouch for the
page's links, account numbers or text, nor for the address pasted into a message body, nor for a
page holding two addresses (its own and one an attacker added: a human chooses then).

This is narrower than ``[flow] named_sources`` (which lets a named source speak for every value of
it), so it is on by default (``[flow] named_roles``): the user's words, not the source, pick the
value's kind and its destination.
"""

from __future__ import annotations

import re

from aleph._flow._values import candidate_values

__all__ = ["ROLE_KINDS", "argument_fits", "requested_roles"]

_KIND_WORDS: dict[str, re.Pattern[str]] = {
    # "her e-mail", "Dora's email", "the e-mail address"; not "via e-mail" or "an email" (the medium, a message)
    "email": re.compile(
        r"\b(?:her|his|their|its|(?-i:[A-Z][\w-]*)'s)\s+e-?mails?\b|\be-?mail\s+address(?:es)?\b", re.IGNORECASE
    ),
    "iban": re.compile(r"\bibans?\b|\bbank\s+account(?:\s+numbers?)?\b", re.IGNORECASE),
    "number": re.compile(r"\b(?:phone|telephone|mobile|account)\s+numbers?\b|\bphone\b", re.IGNORECASE),
    "url": re.compile(r"\blinks?\b|\burls?\b", re.IGNORECASE),
}
"""Words by which a request asks for a value of a kind ("her e-mail", "the IBAN", "the link").

"website" or "page" is not among them: it names the source, not a value to take from it; nor is
"e-mail" alone ("send it via e-mail" names the medium, not an address to take from the file).
"""

ROLE_KINDS = frozenset(_KIND_WORDS)
"""The kinds a request can ask for by name."""

_ARGUMENT_ROLES: dict[str, re.Pattern[str]] = {
    "email": re.compile(r"e_?mail|^(?:to|cc|bcc|recipients?|address(?:es)?)$"),
    "iban": re.compile(r"iban|account|^(?:recipient|payee|beneficiary|to)$"),
    "number": re.compile(r"phone|number|account|^(?:recipient|to)$"),
    "url": re.compile(r"url|link|href|website|^(?:site|page)$"),
}
"""Argument names (lower case, the path's last name) whose role is a value of the kind."""

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_SOURCE_KINDS = ("path", "url", "email")


def requested_roles(text: str) -> dict[tuple[str, str], frozenset[str]]:
    """(kind, value) of each source ``text`` names → the kinds of value the same sentence asks for.

    ``"You can find her e-mail on her website: www.dora-website.com"`` → ``{("url",
    "dora-website.com"): {"email"}}``. A sentence that names a source but asks for no kind maps it to
    nothing (and is left out).
    """
    out: dict[tuple[str, str], frozenset[str]] = {}
    for sentence in _SENTENCE.split(text):
        kinds = frozenset(kind for kind, words in _KIND_WORDS.items() if words.search(sentence))
        if not kinds:
            continue
        for kind, value in candidate_values(sentence):
            if kind in _SOURCE_KINDS:
                out[kind, value] = out.get((kind, value), frozenset()) | kinds
    return out


def argument_fits(path: str, text: str, kind: str) -> bool:
    """Whether argument ``path`` holds ``text`` in the role of a value of ``kind``.

    The argument must be that one value and nothing else (``dora@gmail.com``, not a message that
    quotes it), and its name must say it holds such a value (``user_email`` for an address). A host
    is the host of an address or link in such an argument.
    """
    name = re.split(r"[.\[]", path)[-1].rstrip("]").lower() if path else ""
    if "[" in path and path.endswith("]"):  # a list item: the list's name says the role
        name = re.split(r"[.]", path.rsplit("[", 1)[0])[-1].lower()
    words = text.strip()
    if not words or any(c.isspace() for c in words):
        return False
    found = [(k, v) for k, v in candidate_values(words.removeprefix("mailto:")) if k != "host"]
    if len(found) != 1:
        return False
    sole = found[0][0]
    if kind != sole and not (kind == "host" and sole in ("email", "url")):
        return False
    role = _ARGUMENT_ROLES.get(sole)
    return role is not None and role.search(name) is not None
