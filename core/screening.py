"""Injection screening for text that enters the system prompt from files.

Context files, memory entries and skills are written by people (and agents) other than the
user at the keyboard: a cloned repository's AGENTS.md can carry instructions aimed at the
model. Every such text passes through :func:`screen` before it reaches a prompt. A flagged
passage is not dropped silently: it is replaced by a visible marker, and a :class:`Finding`
names the file and line so that the user can be told.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = ["Finding", "Screened", "looks_secret", "redact_secrets", "screen"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One neutralised passage: where it was and why it was flagged."""

    source: str
    line: int
    reason: str

    def describe(self) -> str:
        return f"{self.source}:{self.line}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Screened:
    text: str
    findings: tuple[Finding, ...]


# Zero-width, bidi controls and tag characters: invisible to a reviewer, read by the model.
_INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# Phrases that only make sense as an attempt to take over the model, not as project guidance.
_OVERRIDE = re.compile(
    r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(previous|prior|above|earlier|all|system|your)\b"
    r"[^.\n]{0,20}\b(instructions?|prompts?|rules|guidelines|messages?)\b"
    r"|\byou are no longer\b|\bnew system prompt\b|\bdo not (tell|inform) the user\b"
    r"|\bwithout (telling|asking|informing) the user\b",
    re.IGNORECASE,
)
# Sending local secrets somewhere: a fetch/upload command next to a secret-looking name.
_EXFIL = re.compile(
    r"\b(curl|wget|nc|scp|Invoke-WebRequest|fetch)\b[^\n]{0,200}"
    r"(\$\{?[A-Z_]*(KEY|TOKEN|SECRET|PASSWORD)[A-Z_]*\}?|\.ssh/|\.env\b|id_rsa|\.aws/credentials|/etc/passwd)"
    r"|\b(send|post|upload|exfiltrate)\b[^\n]{0,60}\b(api[_ ]?keys?|tokens?|secrets?|credentials|passwords?)\b[^\n]{0,40}\b(to|at)\b\s*https?://",
    re.IGNORECASE,
)


def screen(text: str, source: str) -> Screened:
    """``text`` with suspicious passages neutralised, and what was found (file and line)."""
    findings: list[Finding] = []

    def line_of(pos: int, in_text: str) -> int:
        return in_text.count("\n", 0, pos) + 1

    # Hidden comments first, on the original text, so their line numbers are the file's.
    def drop_comment(match: re.Match[str]) -> str:
        body = match.group(0)
        if _OVERRIDE.search(body) or _EXFIL.search(body) or _INVISIBLE.search(body):
            findings.append(Finding(source, line_of(match.start(), text), "hidden HTML comment with instructions"))
            return "[hidden comment removed by screening]"
        return body

    out = _HTML_COMMENT.sub(drop_comment, text)
    lines = out.split("\n")
    for index, line in enumerate(lines):
        number = index + 1
        if _INVISIBLE.search(line):
            findings.append(Finding(source, number, "invisible Unicode characters"))
            line = _INVISIBLE.sub("", line)
        # NFKC folds look-alike letters (fullwidth, ligatures) that would dodge the patterns.
        folded = unicodedata.normalize("NFKC", line)
        if _OVERRIDE.search(folded):
            findings.append(Finding(source, number, "text that tries to override instructions"))
            line = "[line removed by screening: it tried to override instructions]"
        elif _EXFIL.search(folded):
            findings.append(Finding(source, number, "text that looks like sending secrets out"))
            line = "[line removed by screening: it looked like sending secrets out]"
        lines[index] = line
    return Screened("\n".join(lines), tuple(findings))


# Credential shapes that must never be written into memory, skills or exports.
_SECRET = re.compile(
    r"(sk-(ant-)?[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|-----BEGIN [A-Z ]*PRIVATE KEY-----|\b\d{6,12}:[A-Za-z0-9_\-]{30,}\b"
    r"|\b(password|passwd|api[_-]?key|secret|token)\s*[:=]\s*\S{8,})",
    re.IGNORECASE,
)


def looks_secret(text: str) -> bool:
    """Whether ``text`` seems to hold a credential (an API key, a private key, a password)."""
    return bool(_SECRET.search(text))


def redact_secrets(text: str) -> str:
    """``text`` with credential-shaped substrings replaced (for exports and summaries)."""
    return _SECRET.sub("[redacted]", text)
