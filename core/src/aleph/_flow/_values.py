"""Candidate values of a text: the identifiers a data flow is judged on, in one canonical spelling each.

A sink is dangerous when an identifier an attacker chose (an account, an address, a link, a host, a
file, a command line) reaches it. This module finds such identifiers in tool outputs and in a sink's
arguments and spells each one canonically, so a copy survives the ways a model or an attacker
re-spells it: case, spaces and dashes inside an IBAN or a phone number, percent-encoding in a URL,
``mailto:`` prefixes, trailing punctuation. Amounts and dates are not identifiers (they are computed
and shared by everyone) and are not extracted.

Each value is fingerprinted with a keyed hash (Python's SipHash over a random per-tracker salt and
the value): the tracker stores 64-bit fingerprints, never the values, and a fingerprint means
nothing outside the process that made it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from urllib.parse import unquote

__all__ = [
    "MAX_SCAN_CHARS",
    "Fingerprinter",
    "candidate_values",
    "canonical_text",
    "kind_label",
    "mentioned_values",
    "text_lines",
    "whole_value",
]

MAX_SCAN_CHARS = 200_000
"""How much of one text is scanned for values (the rest of a huge output is not tracked value by value)."""
MAX_LINE_CHARS = 2_000
_MIN_LINE_CHARS = 12

_URL = r"(?:https?|ftp)://[^\s<>\"'`)\]}]+"
_WWW = r"\bwww\.[a-z0-9-]+(?:\.[a-z0-9-]+)+(?:/[^\s<>\"'`)\]}]*)?"
_EMAIL = r"[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}"
# Compact (any case), or in groups of four that are upper case or digits (so a following word is not eaten).
_IBAN = r"\b[a-z]{2}\d{2}(?:[a-z0-9]{11,30}|(?-i:(?:[ -]?[A-Z0-9]{4}){2,7}(?:[ -]?[A-Z0-9]{1,3})?))\b"
_DATE = r"\b\d{4}-\d{2}-\d{2}(?:[ t]\d{2}:\d{2}(?::\d{2})?)?\b"  # matched first so it is not a number
# Not inside a hex id (a UUID's "4264-9878" groups, a hash): no word character or dash on either side.
_NUMBER = r"(?<![\w.-])\+?\(?\d(?:[ ()./-]{0,2}\d){7,}(?![\w-])"
_TLDS = "com|org|net|io|dev|app|ai|co|info|biz|me|xyz|ru|cn|uk|de|fr|ch|nl|eu|us|online|site|top"
_HOST = rf"\b(?:[a-z0-9](?:[a-z0-9-]{{0,62}}[a-z0-9])?\.)+(?:{_TLDS})\b"
_EXTENSIONS = "txt|pdf|docx?|xlsx?|csv|md|json|ya?ml|pptx?|sh|py|js|zip|tar|gz|exe|html?"
_PATH = rf"(?:~|\.{{1,2}})?(?:/[\w.@+-]+){{2,}}/?|\b[\w.+-]+\.(?:{_EXTENSIONS})\b"

_SCANNER = re.compile(
    "|".join(
        f"(?P<{kind}>{pattern})"
        for kind, pattern in (
            ("date", _DATE),
            ("url", _URL),
            ("www", _WWW),
            ("email", _EMAIL),
            ("iban", _IBAN),
            ("number", _NUMBER),
            ("path", _PATH),
            ("host", _HOST),
        )
    ),
    re.IGNORECASE,
)
# Text without ".", "@", "/" or "%" can only hold an IBAN or a number: a far smaller scanner.
_DIGITS_ONLY = re.compile(f"(?P<date>{_DATE})|(?P<iban>{_IBAN})|(?P<number>{_NUMBER})", re.IGNORECASE)
_EIGHT_DIGITS = re.compile(r"\d(?:\D{0,3}\d){7}")
_NON_DIGIT = re.compile(r"\D")
_TRAILING = ".,;:!?*_'\""
_MONTHS = {
    m: i
    for i, names in enumerate(
        (
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ),
        1,
    )
    for m in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_MONTH_DAY = rf"(?P<m1>{_MONTH})\.?\s+{_DAY.replace('(', '(?P<d1>', 1)}"
_DAY_MONTH = rf"{_DAY.replace('(', '(?P<d2>', 1)}\s+(?:of\s+)?(?P<m2>{_MONTH})"
_WORD_DATE = re.compile(rf"\b(?:{_MONTH_DAY}|{_DAY_MONTH})\b", re.IGNORECASE)
_ISO_DATE = re.compile(r"\b\d{4}-(\d{2})-(\d{2})\b")
_NAME = re.compile(r"\b[A-Z][\w'&-]+(?:\s+(?:of\s+|the\s+|de\s+|&\s+)?[A-Z][\w'&-]+)+")
_TOKEN = re.compile(r"(?<![\w.@/-])(?=[\w-]*[\d_])(?=[\w-]*[a-zA-Z])[\w-]{6,64}(?![\w@/-])")
# A quote opens after a non-word character and closes before one, so "I'm" and "Emma's" open nothing.
_QUOTED = re.compile(
    r"(?<!\w)'([^'\n]{1,80})'(?!\w)|(?<!\w)\"([^\"\n]{1,80})\"(?!\w)|‘([^’\n]{1,80})’|“([^”\n]{1,80})”"
)

_KIND_LABEL = {
    "url": "URL",
    "www": "URL",
    "email": "e-mail address",
    "iban": "IBAN",
    "number": "account or phone number",
    "path": "file path",
    "host": "host name",
    "text": "text",
    "date": "date",
    "name": "name",
    "token": "code or password",
    "quoted": "quoted value",
}


def kind_label(kind: str) -> str:
    """A human name for a value kind (``"IBAN"``, ``"e-mail address"``)."""
    return _KIND_LABEL.get(kind, kind)


def _canonical_url(raw: str) -> str:
    text = unquote(raw).strip().rstrip(_TRAILING).lower()
    for prefix in ("https://", "http://", "ftp://"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    if text.startswith("www."):
        text = text[4:]
    return text.rstrip("/")


def _canonical(kind: str, raw: str) -> str | None:
    if kind == "date":
        return None
    if kind in ("url", "www"):
        value = _canonical_url(raw)
        return value if "." in value else None
    if kind == "email":
        return raw.strip(_TRAILING).lower()
    if kind == "iban":
        value = "".join(raw.split()).replace("-", "").upper()
        return value if not value[4:].isalpha() else None
    if kind == "number":
        digits = _NON_DIGIT.sub("", raw)
        return digits if len(digits) >= 8 else None
    if kind == "host":
        return raw.lower().rstrip(".").removeprefix("www.")
    if kind == "path":
        return raw.rstrip(_TRAILING).lower() or None
    return None


def _scanner(text: str) -> re.Pattern[str] | None:
    """The scanner ``text`` needs: the full one, the digits-only one, or None (no identifier can be there)."""
    if "." in text or "@" in text or "/" in text or "%" in text:
        return _SCANNER
    if len(text) >= 8 and _EIGHT_DIGITS.search(text) is not None:
        return _DIGITS_ONLY
    return None


def candidate_values(text: str) -> Iterator[tuple[str, str]]:
    """(kind, canonical value) for every identifier in ``text`` (its first :data:`MAX_SCAN_CHARS` characters).

    A URL yields its host too (so a link to an attacker's domain and a bare mention of it meet), and
    percent-encoded text is scanned decoded as well, so ``fred%40evil.com`` is the address it spells.
    """
    scanner = _scanner(text)
    if scanner is None:
        return
    text = text[:MAX_SCAN_CHARS]
    for chunk in (text, unquote(text)) if "%" in text else (text,):
        for match in scanner.finditer(chunk):
            kind = match.lastgroup or ""
            value = _canonical(kind, match.group())
            if value is None:
                continue
            yield ("url" if kind == "www" else kind, value)
            if kind in ("url", "www"):
                host = value.split("/", 1)[0].split(":", 1)[0]
                if "." in host:
                    yield "host", host
            elif kind == "email":
                yield "host", value.rsplit("@", 1)[1]


def mentioned_values(text: str) -> Iterator[tuple[str, str]]:
    """Everything :func:`candidate_values` finds, plus what identifies an action without an identifier.

    Dates (month and day, whatever the spelling), proper names (``Riverside View Hotel``), code-like
    tokens (``new_password``, ``1j1l-2k3j``) and quoted values (``'13'``). They are too common to be
    judged by first appearance; a sink under a ``[flow.tainted]`` rule asks when an argument holds one
    that untrusted content mentioned and the user's request did not.
    """
    text = text[:MAX_SCAN_CHARS]
    yield from candidate_values(text)
    for match in _ISO_DATE.finditer(text):
        yield "date", f"{match.group(1)}-{match.group(2)}"
    for match in _WORD_DATE.finditer(text):
        month = _MONTHS[(match.group("m1") or match.group("m2")).lower()]
        day = int(match.group("d1") or match.group("d2"))
        if 1 <= day <= 31:
            yield "date", f"{month:02d}-{day:02d}"
    for match in _NAME.finditer(text):
        yield "name", canonical_text(match.group())
    for match in _TOKEN.finditer(text):
        yield "token", match.group().lower()
    for match in _QUOTED.finditer(text):
        quoted = next(g for g in match.groups() if g is not None)
        yield "quoted", canonical_text(quoted)


def whole_value(text: str) -> tuple[str, str] | None:
    """A short argument as one value of kind ``quoted`` (an id, a title), or None for long text."""
    canonical = canonical_text(text)
    return ("quoted", canonical) if 0 < len(canonical) <= 80 else None


def canonical_text(text: str) -> str:
    """A text as fingerprinted: case folded, every run of white space one space, trimmed."""
    return " ".join(text.split()).casefold()


def text_lines(text: str) -> Iterator[str]:
    """The canonical lines of ``text`` long enough to identify it (a copied line keeps its provenance)."""
    for line in text[:MAX_SCAN_CHARS].splitlines():
        canonical = canonical_text(line[:MAX_LINE_CHARS])
        if len(canonical) >= _MIN_LINE_CHARS:
            yield canonical


class Fingerprinter:
    """Keyed 64-bit fingerprints of values (SipHash, the interpreter's string hash, over a random salt).

    The salt keeps fingerprints unpredictable even where ``PYTHONHASHSEED`` pins the interpreter's key.
    At the default caps (10,000 values a session) the chance that two values collide is below 1e-11.
    """

    __slots__ = ("_salt",)

    def __init__(self, key: bytes | None = None) -> None:
        self._salt = (key if key is not None else os.urandom(16)).hex() + "\x1e"

    def __call__(self, kind: str, value: str) -> int:
        """The fingerprint of ``value`` of ``kind`` (the kind is part of what is hashed)."""
        return hash(f"{self._salt}{kind}\x1f{value}")
