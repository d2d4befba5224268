"""Content checks for what memory will feed back into prompts: invisible characters and injection phrases."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["redact_pii", "scan"]

_INJECTION = [
    (
        re.compile(
            r"\b(ignore|disregard|forget)\s+(all\s+|any\s+|the\s+)?(previous|prior|above|earlier)\s+"
            r"(instructions?|prompts?|rules|messages?)",
            re.I,
        ),
        "instruction override",
    ),
    (
        re.compile(r"\breveal\s+(the\s+|your\s+|all\s+)?(system\s+prompt|secrets?|api\s+keys?|passwords?)", re.I),
        "secret exfiltration",
    ),
    (re.compile(r"\byou\s+are\s+now\s+(in\s+)?(developer|dan|jailbreak|god)\s*mode", re.I), "role hijack"),
    (re.compile(r"</?\s*(system|assistant|developer)\s*>", re.I), "role tag"),
    (re.compile(r"\b(begin|end)\s+system\s+prompt\b", re.I), "role tag"),
]


def scan(text: str) -> str | None:
    """Why ``text`` must not be stored as memory (it is injected into prompts), or None when it is fine."""
    for ch in text:
        if ch in "\n\t":
            continue
        category = unicodedata.category(ch)
        if category == "Cf":
            return f"invisible formatting character U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed')})"
        if category == "Cc":
            return f"control character U+{ord(ch):04X}"
    folded = unicodedata.normalize("NFKC", text)
    for pattern, label in _INJECTION:
        found = pattern.search(folded)
        if found:
            return f"{label}: {found.group(0)!r}"
    return None


_PII = [
    (re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"), "[REDACTED:email]"),
    (re.compile(r"\b\d{3}-\d{2}-\d{4}\b"), "[REDACTED:ssn]"),
    (re.compile(r"\b(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)\b"), "[REDACTED:ip]"),
    (re.compile(r"(?<![\w.])\+?\d(?:[\s().-]?\d){6,14}(?![\w.])"), "[REDACTED:phone]"),
]


def redact_pii(text: str) -> str:
    """``text`` with e-mail addresses, SSN-shaped numbers, IPv4 addresses and phone numbers redacted."""
    for pattern, replacement in _PII:
        text = pattern.sub(replacement, text)
    return text
