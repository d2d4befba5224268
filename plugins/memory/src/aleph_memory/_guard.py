"""Content checks for what memory will feed back into prompts: hidden characters, markup and injection phrases.

Text is judged on what a model would read, not on how it is spelled. :func:`scan` first refuses
characters that hide or reorder text (bidi overrides, zero-width characters between Latin letters,
tag characters, invisible fillers), then folds the text into two comparable forms:

- the *markup form*: NFKC, combining marks stripped, zero-width and joiner characters removed, and every
  character that looks like an ASCII one (Unicode's confusables, e.g. Cyrillic ``о``, Greek ``Ι``,
  ``‹``) replaced by it, then case-folded. Role and tool-call markup of the common chat formats
  (ChatML, Llama, Mistral, Gemma, Phi, Anthropic, OpenAI's JSON messages, ...) is matched here;
- the *phrase form*: the markup form with the letters and digits that stand in for each other
  (``I``/``l``/``1``/``|``, ``0``/``o``, leetspeak digits) collapsed, so an instruction override is
  found however it is spelled.

Text in any script passes: folding only decides what to look for, the stored text is never changed.
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["markup_form", "phrase_form", "redact_pii", "scan"]

# -- characters that hide text ---------------------------------------------------------------------

_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Joiners and direction marks have real uses inside Arabic, Persian, Indic scripts and emoji sequences;
# between two ASCII characters they only split a word for a matcher.
_JOINERS = frozenset("\u200c\u200d\u200e\u200f\u061c")
_INVISIBLE_LETTERS = frozenset("\u3164\uffa0\u2800")  # Hangul fillers and the blank Braille pattern
_FLAG_TAGS = re.compile("\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,8}\U000e007f")
_MAX_MARKS_PER_LETTER = 4


def _hidden(text: str) -> str | None:
    """Why ``text`` hides or reorders what a reader sees, or None."""
    text = _FLAG_TAGS.sub("\U0001f3f4", text)  # subdivision flags are the one legitimate use of tag characters
    marks = 0
    selectors = 0
    for i, ch in enumerate(text):
        if ch in "\n\t":
            marks = selectors = 0
            continue
        code = ord(ch)
        category = unicodedata.category(ch)
        if ch in _BIDI_CONTROLS:
            return f"bidirectional override U+{code:04X} ({unicodedata.name(ch, 'unnamed')})"
        if 0xE0000 <= code <= 0xE007F:
            return f"invisible tag character U+{code:04X}"
        if ch in _INVISIBLE_LETTERS:
            return f"invisible filler character U+{code:04X} ({unicodedata.name(ch, 'unnamed')})"
        if ch in _JOINERS:
            before = text[i - 1] if i else " "
            after = text[i + 1] if i + 1 < len(text) else " "
            if before.isascii() and after.isascii():
                return f"invisible formatting character U+{code:04X} ({unicodedata.name(ch, 'unnamed')}) inside a word"
            continue
        if category == "Cf":
            return f"invisible formatting character U+{code:04X} ({unicodedata.name(ch, 'unnamed')})"
        if category == "Cc":
            return f"control character U+{code:04X}"
        if 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:
            selectors += 1
            if selectors > 1 or 0xE0100 <= code:
                return f"variation selectors used to carry hidden data (U+{code:04X})"
            continue
        selectors = 0
        if category in ("Mn", "Me"):
            marks += 1
            if marks > _MAX_MARKS_PER_LETTER:
                return f"more than {_MAX_MARKS_PER_LETTER} combining marks stacked on one character"
        else:
            marks = 0
    return None


# -- folding ---------------------------------------------------------------------------------------


@functools.cache
def _ascii_lookalikes() -> dict[int, str]:
    """Every non-ASCII character Unicode lists as confusable with one printable ASCII character."""
    from confusable_homoglyphs.confusables import confusables_data

    table: dict[int, str] = {}

    def put(source: str, target: str) -> None:
        source = source.strip("\u200e\u200f")
        if len(source) == 1 and not source.isascii() and ord(source) not in table:
            table[ord(source)] = target

    for key, homoglyphs in confusables_data.items():
        if len(key) == 1 and key.isascii() and key.isprintable():
            for entry in homoglyphs:
                put(entry["c"], key)
    for key, homoglyphs in confusables_data.items():
        targets = [e["c"] for e in homoglyphs if len(e["c"]) == 1 and e["c"].isascii() and e["c"].isprintable()]
        if targets:
            put(key, sorted(targets, key=lambda t: (not t.isalpha(), t))[0])
    return table


_DROP = {ord(c): None for c in _JOINERS | {"\u00ad", "\u034f", "\u180e"}}


def markup_form(text: str) -> str:
    """``text`` as markup is matched: NFKC, marks and joiners gone, ASCII look-alikes made ASCII, case-folded."""
    text = unicodedata.normalize("NFKC", text).translate(_DROP)
    text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) not in ("Mn", "Me"))
    text = unicodedata.normalize("NFKC", text.translate(_ascii_lookalikes()))
    return text.casefold()


_STAND_INS = str.maketrans({"i": "l", "1": "l", "|": "l", "!": "l", "0": "o", "3": "e", "4": "a", "@": "a",
                            "5": "s", "$": "s", "7": "t"})  # fmt: skip


def phrase_form(text: str) -> str:
    """:func:`markup_form` with stand-in letters and digits collapsed (``I``/``l``/``1``, ``0``/``o``, ...)."""
    return markup_form(text).translate(_STAND_INS)


# -- what is refused -------------------------------------------------------------------------------

# Names that only ever mean a role or a tool call (not ``user`` or ``root``, common in XML and markdown).
_ROLES = r"system|developer|assistant|human"
_TOOLISH = (
    r"tool_?calls?|tool_?use|tool_?results?|tool_?response|tool_?outputs?|function_?calls|function_?results?"
    r"|invoke|antml:[a-z_]+|system[-_]reminder|im_start|im_end|start_of_turn|end_of_turn"
    r"|available_tools|system_prompt|inst|sys"
)

_MARKUP: list[tuple[re.Pattern[str], str]] = [
    # ChatML, Phi, Llama 3, gpt-oss, DeepSeek: special tokens between <| and |>.
    (re.compile(r"<\|[^|<>\n]{1,40}\|>"), "chat special token"),
    (re.compile(r"<\s*/?\s*(?:s|/s|unk|pad|bos|eos)\s*>\s*(?:\[\s*/?\s*inst\b|<<\s*sys)"), "chat special token"),
    # Llama 2 / Mistral: [INST] ... [/INST], <<SYS>>, [TOOL_CALLS], [SYSTEM_PROMPT]; and bracketed roles [SYSTEM].
    (re.compile(rf"\[\s*/?\s*(?:{_ROLES}|{_TOOLISH}|admin)\s*\](?!\()"), "role marker"),
    (re.compile(r"<<\s*/?\s*sys\s*>>"), "role marker"),
    # Gemma's <start_of_turn>user, and XML-ish role / tool tags: <system>, </tool_result>, <tool_call>.
    (re.compile(rf"<\s*/?\s*(?:{_ROLES}|{_TOOLISH})(?![\w/.-])[^<>\n]{{0,80}}>"), "role or tool-call tag"),
    # Anthropic's turn markers, Alpaca / Vicuna headers: a line that opens a turn.
    (re.compile(r"(?:^|\n)[ \t>*_]*(?:human|assistant)\s*:", re.MULTILINE), "turn marker"),
    (
        re.compile(rf"(?:^|\n)\s*#{{1,6}}\s*(?:{_ROLES}|user|instructions?|response|input)\s*:", re.MULTILINE),
        "turn marker",
    ),
    # OpenAI / Anthropic messages and tool calls as JSON.
    (re.compile(r"[\"']role[\"']\s*:\s*[\"'](?:system|developer|assistant|tool|function)[\"']"), "chat message JSON"),
    (
        re.compile(
            r"[\"']type[\"']\s*:\s*[\"'](?:tool_use|tool_result|function_call|function_call_output|server_tool_use)[\"']"
        ),
        "tool-call JSON",
    ),
    (re.compile(r"[\"'](?:tool_calls|function_call)[\"']\s*:\s*[\[{]"), "tool-call JSON"),
    (re.compile(r"\b(?:begin|end)\s+(?:of\s+)?system\s+(?:prompt|message)\b"), "role marker"),
]

_W = r"[\W_]+"  # any run of spaces, punctuation or underscores between words
_PHRASES: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            rf"\b(?:ignore|disregard|forget)(?:{_W}(?:all|any|every|the|your|my|of|these|those))*"
            rf"{_W}(?:previous|prior|above|earlier|preceding|foregoing|former|system)"
            rf"{_W}(?:instructions?|prompts?|rules|messages?|directives?|directions|guidelines|context|commands?)"
        ),
        "instruction override",
    ),
    (
        re.compile(
            rf"\b(?:ignore|disregard|forget){_W}(?:everything|all){_W}"
            rf"(?:above|before|you{_W}(?:were|have{_W}been){_W}told)"
        ),
        "instruction override",
    ),
    (
        re.compile(
            rf"\b(?:reveal|print|show|leak|output|repeat|dump){_W}(?:the{_W}|your{_W}|all{_W}|me{_W})*"
            rf"(?:system{_W}prompt|secrets?|api{_W}keys?|passwords?|credentials|hidden{_W}instructions)"
        ),
        "secret exfiltration",
    ),
    (
        re.compile(rf"\byou{_W}are{_W}now{_W}(?:in{_W})?(?:developer|dan|jailbreak|god|unrestricted|admin){_W}mode"),
        "role hijack",
    ),
    (re.compile(rf"\b(?:new|updated|real){_W}(?:system{_W})?instructions?\s*:"), "instruction override"),
    (
        re.compile(rf"\bdo{_W}not{_W}(?:tell|inform|alert|mention{_W}(?:this{_W})?to){_W}(?:the{_W})?(?:user|human)"),
        "conceal from user",
    ),
]
# Written in plain words; compiled over the phrase form, whose letters are folded the same way.
_PHRASES = [(re.compile(p.pattern.translate(str.maketrans({"i": "l"}))), label) for p, label in _PHRASES]


def scan(text: str, *, transcript: bool = False) -> str | None:
    """Why ``text`` must not be stored as memory (it is injected into prompts), or None when it is fine.

    ``transcript``: the text is Aleph's own record of a conversation (a dialog turn, a compacted chunk),
    whose lines carry the speaker's role as ``assistant: ...`` by design; those labels are not refused,
    everything else is.
    """
    hidden = _hidden(text)
    if hidden is not None:
        return hidden
    markup = markup_form(text)
    for pattern, label in _MARKUP:
        if transcript and label == "turn marker":
            continue
        found = pattern.search(markup)
        if found:
            return f"{label}: {found.group(0).strip()!r}"
    phrases = phrase_form(text)
    for pattern, label in _PHRASES:
        found = pattern.search(phrases)
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
