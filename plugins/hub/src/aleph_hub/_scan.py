"""What a skill contains, for the human who approves installing it.

That is its files, scripts, the tools and programs its instructions name, and content findings.

Findings are ``dangerous`` (a skill carrying one is refused outright: reverse shells, piping a
download into a shell, wiping a home directory, reading credentials to send them away) or
``caution`` (shown to the human, who decides). Patterns are judged on the text of every file,
scripts included; nothing here runs any of it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aleph_hub._skills import parse_skill_md, skill_files

__all__ = ["Finding", "disclose_skill", "scan_text"]

_SCAN_BYTES = 1024 * 1024  # per file: enough for any instruction or script; bounded for huge assets
_SCRIPT_SUFFIXES = {".sh", ".bash", ".zsh", ".py", ".js", ".mjs", ".ts", ".rb", ".pl", ".ps1", ".bat", ".cmd"}


@dataclass(frozen=True, slots=True)
class Finding:
    """One flagged construct: its level, a stable id, the file and line, and the matched text."""

    level: str
    id: str
    file: str
    line: int
    excerpt: str

    def to_json(self) -> dict[str, Any]:
        """JSON form shown in a disclosure."""
        return {"level": self.level, "id": self.id, "file": self.file, "line": self.line, "excerpt": self.excerpt}


_RULES: list[tuple[str, str, re.Pattern[str]]] = [
    (level, rule_id, re.compile(pattern, re.IGNORECASE))
    for level, rule_id, pattern in (
        ("dangerous", "reverse-shell", r"/dev/tcp/|\bnc(at)?\b[^\n]*\s-e\s|\bsocat\b[^\n]*exec:|bash\s+-i\s*>&"),
        (
            "dangerous",
            "download-piped-to-shell",
            r"\b(curl|wget|fetch)\b[^\n|]*\|\s*(sudo\s+)?(ba|z|da)?sh\b|\b(curl|wget)\b[^\n|]*\|\s*python",
        ),
        ("dangerous", "decode-and-execute", r"base64\s+(-d|--decode)[^\n]*\|\s*(ba|z)?sh\b|eval\s*\(\s*atob\("),
        (
            "dangerous",
            "destroy-home-or-root",
            r"\brm\s+-[a-z]*r[a-z]*f?[a-z]*\s+(--no-preserve-root\s+)?(/|~|\$HOME)(\s|$)",
        ),
        (
            "dangerous",
            "credential-exfiltration",
            r"(~|\$HOME)/\.(ssh|aws|gnupg|netrc|docker/config\.json)[^\n]{0,80}\b(curl|wget|nc|scp|http)",
        ),
        ("dangerous", "crypto-miner", r"\b(xmrig|minerd|cpuminer|stratum\+tcp)\b"),
        (
            "caution",
            "ignore-previous-instructions",
            r"ignore (all |any )?(previous|prior|above) (instructions|prompts)",
        ),
        ("caution", "conceal-from-user", r"do not (tell|inform|mention)[^\n]{0,40}(user|human)"),
        ("caution", "fake-system-tag", r"<\s*/?\s*(system|system-reminder)\s*>"),
        ("caution", "invisible-characters", "[\u200b-\u200f\u202a-\u202e\u2066-\u2069]"),
        ("caution", "privilege-escalation", r"\bsudo\b|\bchmod\s+[0-7]*[67][0-7]{2}\b|\bsetuid\b"),
        ("caution", "persistence", r"\bcrontab\b|>>?\s*~/\.(bashrc|profile|zshrc)|systemctl\s+enable"),
        ("caution", "reads-secrets", r"(~|\$HOME)/\.(ssh|aws|gnupg|netrc)|\bid_rsa\b|\.env\b"),
        ("caution", "network-download", r"\b(curl|wget)\s+\S*https?://"),
        ("caution", "dynamic-code", r"\beval\s*\(|\bexec\s*\(|subprocess\.[a-z_]+\([^\n]*shell\s*=\s*True"),
    )
]

_PROGRAMS = re.compile(
    r"(?<![\w./-])(bash|sh|zsh|python3?|node|npm|npx|pip|uv|git|curl|wget|ssh|scp|docker|kubectl|make|sudo|rm)\b"
)
_TOOL_WORD = re.compile(r"`?\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+|bash|search)\b`?")


def scan_text(text: str, file: str) -> list[Finding]:
    """Every rule that matches ``text``, with the first matching line of each."""
    findings = []
    for level, rule_id, pattern in _RULES:
        match = pattern.search(text)
        if match is None:
            continue
        line = text.count("\n", 0, match.start()) + 1
        excerpt = text.splitlines()[line - 1].strip()[:160] if text else ""
        findings.append(Finding(level, rule_id, file, line, excerpt))
    return findings


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def disclose_skill(folder: Path, known_tools: Iterable[str] = ()) -> dict[str, Any]:
    """What installing the skill in ``folder`` adds.

    Name, description, files (size, SHA-256), scripts, the tools its instructions name (``allowed-tools``
    plus registered tool names in its text), the programs it mentions, findings, and the verdict
    (``clean`` | ``caution`` | ``dangerous``).
    """
    meta, body = parse_skill_md((folder / "SKILL.md").read_text(encoding="utf-8"))
    known = set(known_tools)
    files = []
    scripts = []
    findings: list[Finding] = []
    tools: set[str] = set()
    programs: set[str] = set()
    for rel in ["SKILL.md", *skill_files(folder)]:
        path = folder / rel
        size = path.stat().st_size
        files.append({"path": rel, "size": size, "sha256": _sha256(path)})
        is_script = rel.startswith("scripts/") or path.suffix in _SCRIPT_SUFFIXES or _shebang(path)
        if is_script:
            scripts.append(rel)
        with path.open("rb") as fh:
            raw = fh.read(_SCAN_BYTES)
        if b"\0" in raw[:8192] and not is_script:
            continue  # a binary asset: nothing to read as instructions
        text = raw.decode("utf-8", errors="replace")
        findings.extend(scan_text(text, rel))
        programs.update(m.group(1) for m in _PROGRAMS.finditer(text))
        if rel == "SKILL.md" or rel.endswith(".md"):
            tools.update(w for w in (m.group(1) for m in _TOOL_WORD.finditer(text)) if w in known)
    allowed = meta.get("allowed-tools")
    if isinstance(allowed, str):
        tools.update(allowed.replace(",", " ").split())
    elif isinstance(allowed, list):
        tools.update(str(t) for t in allowed)
    levels = {f.level for f in findings}
    verdict = "dangerous" if "dangerous" in levels else "caution" if levels else "clean"
    return {
        "name": str(meta["name"]),
        "description": str(meta["description"]),
        "body_chars": len(body),
        "files": files,
        "scripts": sorted(scripts),
        "tools_named": sorted(tools),
        "programs_named": sorted(programs),
        "findings": [f.to_json() for f in findings],
        "verdict": verdict,
    }


def _shebang(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(2) == b"#!"
    except OSError:
        return False
