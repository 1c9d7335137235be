"""Injection screening for text that enters the system prompt from files.

Context files, memory entries and skills are written by people (and agents) other than the
user at the keyboard: a cloned repository's AGENTS.md can carry instructions aimed at the
model. Every such text passes through :func:`screen` before it reaches a prompt. A flagged
passage is not dropped silently: it is replaced by a visible marker, and a :class:`Finding`
names the file and line so that the user can be told.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from dataclasses import dataclass

__all__ = ["Flagged", "Finding", "Screened", "looks_secret", "redact_secrets", "review_learned", "screen", "screen_learned"]


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
_SECRET_SOURCE = (
    r"(sk-(ant-)?[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|-----BEGIN [A-Z ]*PRIVATE KEY-----|\b\d{6,12}:[A-Za-z0-9_\-]{30,}\b"
    r"|\b(password|passwd|api[_-]?key|secret|token)\s*[:=]\s*\S{8,})"
)


@functools.cache
def _secret() -> re.Pattern[str]:
    """Compiled on first use, like the checks below: most runs never look for a credential."""
    return re.compile(_SECRET_SOURCE, re.IGNORECASE)


def looks_secret(text: str) -> bool:
    """Whether ``text`` seems to hold a credential (an API key, a private key, a password)."""
    return bool(_secret().search(text))


def redact_secrets(text: str) -> str:
    """``text`` with credential-shaped substrings replaced (for exports and summaries)."""
    return _secret().sub("[redacted]", text)


# --- what the agent learns ----------------------------------------------------------------
#
# Memory entries and skills reach every later session in every project, so a line there that
# fetches and runs code, sends data out, or loosens approvals is a command with a delay. These
# checks run on a folded view of the text (look-alike letters, case, quoting tricks, spacing)
# and on logical lines (backslash and pipe continuations joined), so layout does not hide them.

FETCH_RUN = "instructions to fetch and run code"
SEND_OUT = "instructions to send data somewhere"
LOOSEN = "instructions to change the agent's approvals or safety"


@dataclass(frozen=True, slots=True)
class Flagged:
    """A passage of learned text that a person must approve; ``digest`` remembers their yes."""

    finding: Finding
    digest: str


# Cyrillic and Greek letters that look like Latin ones; NFKC leaves them alone.
_LOOKALIKES = str.maketrans(
    "аеорсхуіјѕһԁԛԝӏвкмнтАЕОРСХУІЈЅНВКМТΑΒΕΖΗΙΚΜΝΟΡΤΥΧαεικνορτυχ",
    "aeopcxyijshdqwlbkmhtAEOPCXYIJSHBKMTABEZHIKMNOPTYXaeikvoptux",
)
_IN_WORD = re.compile(r"(?<=\w)(?:''|\"\"|[\\^'\"])(?=\w)")  # c''url, c\url, c^url, c"u"rl
_IFS = re.compile(r"\$\{?ifs\}?")
_LIST_MARK = re.compile(r"^(?:(?:[-*+>]|\d+[.)])\s+)+")
_SPACE = re.compile(r"\s+")

_FETCHER = (
    r"(?:curl|wget|aria2c|httpie|xh|fetch|iwr|irm|invoke-webrequest|invoke-restmethod|downloadstring"
    r"|net\.webclient|lwp-download|lwp-request|certutil)"
)
_RUNNER = (
    r"(?:sh|bash|zsh|dash|ksh|fish|csh|tcsh|ash|python[0-9.]*|py|perl|ruby|node|nodejs|deno|bun|php|lua|tclsh"
    r"|iex|invoke-expression|pwsh|powershell(?:\.exe)?|cmd(?:\.exe)?|source|eval|exec|xargs|busybox)"
)
_NOT_LOOPBACK = r"(?!localhost\b|127\.|0\.0\.0\.0\b|\[?::1\b)"
_SECRET_PATHS = (
    r"(?:\.ssh\b|\.aws\b|\.gnupg\b|\.netrc\b|\.git-credentials|\.env\b|_history\b|\.hermes-editor|state\.db"
    r"|memories/|\.kube/config|\.docker/config|/etc/passwd|/etc/shadow|id_rsa|id_ed25519)"
)
_DATA = (
    r"(?:files?|folders?|director(?:y|ies)|(?:the\s+)?repo(?:sitory)?|source(?:\s+code)?|codebase|env(?:ironment)?"
    r"(?:\s+var(?:iable)?s)?|\.env|(?:api[\s_-]?|private\s+|ssh\s+)?keys?|tokens?|secrets?|credentials?|passwords?"
    r"|ssh|(?:shell\s+|bash\s+|command\s+)?history|conversations?|chats?|transcripts?|sessions?|memor(?:y|ies)"
    r"|cookies|everything|home\s+(?:directory|folder)|dotfiles|~/\S*)"
)

# Compiled on first use (about 13 ms at import otherwise): most runs never check learned text.
_CHECK_PATTERNS: tuple[tuple[str, str], ...] = (
    # A download piped into an interpreter: curl … | sh, iwr … | iex, wget -O- … | sudo python3.
    (
        FETCH_RUN,
        rf"\b{_FETCHER}\b[^\n]*?\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+)?(?:\w+=\S*\s+)*[\"']?{_RUNNER}[\"']?(?=$|[\s;&)<>\"'-])(?!\s*\|)",
    ),
    # An interpreter fed from a download: bash <(curl …), sh -c "$(wget …)", eval `curl …`, . <(curl …).
    (FETCH_RUN, rf"(?:\b{_RUNNER}\b|(?:^|[\s;&|(])\.)[^\n]{{0,24}}?(?:<\(|\$\(|`)\s*{_FETCHER}\b"),
    (FETCH_RUN, rf"\b(?:iex|invoke-expression)\b[^\n]*(?:{_FETCHER}|https?://)"),
    # Backticks read as Markdown, so `eval \`curl …\`` is seen as "eval curl …".
    (FETCH_RUN, rf"\b(?:eval|exec|source|(?:{_RUNNER})\s+-c)\s+[\"'(]*\s*{_FETCHER}\b[^\n]*https?://"),
    # Packages from a URL or a git repository rather than the registry.
    (
        FETCH_RUN,
        r"\b(?:pip[0-9.]*|python[0-9.]*\s+-m\s+pip|uv\s+(?:pip|tool)|uvx|pipx|poetry|pdm|npm|pnpm|yarn|bun|npx|pnpx|bunx"
        r"|gem|cargo|composer|brew)\b[^\n]*?(?:\binstall\b|\badd\b|\bi\b|\brun\b|\bx\b|\bexec\b|--from\b|^|\s)[^\n]*?"
        r"(?:https?://|\bgit\+|\bgit@|\bgit://|\bgithub:|\bgitlab:|\bbitbucket:|--git\b|--(?:extra-)?index-url\b|\s-i\s+https?://)",
    ),
    # Decoding something and running it: base64 -d | sh, exec(b64decode(…)), iex ([Convert]::FromBase64String(…)).
    (
        FETCH_RUN,
        rf"(?:base64\s+(?:-d|--decode)\b|b64decode|frombase64string|atob\s*\(|xxd\s+-r|openssl\s+(?:enc\s+)?-?base64\s+-d)"
        rf"[^\n]*(?:\|\s*[\"']?{_RUNNER}\b|\b(?:exec|eval|iex|invoke-expression|system|popen|subprocess|spawn)\b)",
    ),
    (FETCH_RUN, r"\b(?:exec|eval|iex|invoke-expression)\s*\(?[^\n]{0,40}(?:b64decode|frombase64string|atob|base64\s+-d)"),
    (
        FETCH_RUN,
        r"\b(?:exec|eval|execfile|runpy\.\w+|function)\s*\([^\n]*(?:urlopen|urlretrieve|requests\.get|httpx\.get|urllib|http\.client|\bfetch\s*\(|https?://)"
        r"|\.then\(\s*eval\b|\bimport\s*\(\s*[\"'`]https?://",
    ),
    # The same in words.
    (
        FETCH_RUN,
        r"\b(?:download|fetch|grab|retrieve|pull|get)\s+(?:and|&|then)\s+(?:then\s+)?(?:run|execute|exec|install|source|eval)\b",
    ),
    (
        FETCH_RUN,
        r"\b(?:download|fetch|grab|retrieve|pull|get|curl|wget)\w*\b[^\n]{0,100}?\b(?:and|then|,)\s+(?:then\s+)?"
        r"(?:immediately\s+)?(?:run|execute|exec|launch|source|eval|pipe)\w*\s+(?:it|them|this|that|the\s+(?:script|installer|binary|file|payload|code|program|result|output))\b",
    ),
    (
        FETCH_RUN,
        r"\b(?:run|execute|exec|launch|source|eval)\w*\s+(?:\S+\s+){0,4}?(?:script|installer|binary|payload|code|program|executable|commands?)\s+"
        r"(?:(?:that\s+is\s+|which\s+is\s+)?(?:hosted|located|found|served|downloaded|fetched|published)\s+)?(?:at|from)\s+https?://",
    ),
    (
        FETCH_RUN,
        r"\b(?:follow|obey|execute|run|apply|carry\s+out)\w*\s+(?:whatever|all\s+|the\s+)?(?:instructions|commands|orders|tasks)?\s*"
        r"(?:(?:are|is|you\s+find|listed|posted|published|written)\s+)?(?:at|from|in)\s+https?://",
    ),
    # Files or command output sent out: curl -d @file, -F f=@file, -T file, wget --post-file, -InFile.
    (
        SEND_OUT,
        r"\bcurl\b[^\n]*?(?:\s(?:-d|--data(?:-binary|-raw|-urlencode|-ascii)?|-f|--form|--json)\s*[\"']?(?:[\w.\[\]-]+=)?@|\s(?:-t|--upload-file)\s)",
    ),
    (
        SEND_OUT,
        r"\bwget\b[^\n]*--(?:post|body)-(?:file|data)\b|\b(?:iwr|irm|invoke-webrequest|invoke-restmethod)\b[^\n]*-(?:infile|body)\b",
    ),
    (
        SEND_OUT,
        r"\b(?:curl|wget|iwr|irm|invoke-webrequest|invoke-restmethod|http|xh)\b[^\n]*(?:\$\(|`|<\()\s*"
        r"(?:env|printenv|set|cat|history|base64|tar|zip|gpg|ls|find|whoami|hostname|id|uname|git\s+\w+|get-content|gc|type)\b",
    ),
    (SEND_OUT, r"\|\s*(?:mail|mailx|sendmail|mutt|ssmtp|msmtp|nc|ncat|netcat|socat|telnet)\b"),
    (SEND_OUT, r"\b(?:mail|mailx|sendmail|mutt)\s+(?:-\S+\s+(?:\S+\s+)?)*[\w.+-]+@[\w-]+\.[\w.-]+"),
    (SEND_OUT, rf"\b(?:nc|ncat|netcat|telnet)\s+(?:-\S+(?:\s+[^\s-]\S*)?\s+)*{_NOT_LOOPBACK}[a-z0-9][\w.-]*\s+\d{{1,5}}\b"),
    (
        SEND_OUT,
        rf"/dev/(?:tcp|udp)/{_NOT_LOOPBACK}[^/\s]+/\d+|\bsocat\b[^\n]*\b(?:tcp|udp|openssl)[46]?(?:-connect)?:{_NOT_LOOPBACK}[\w.-]+:\d+",
    ),
    (SEND_OUT, rf"\b(?:scp|rsync|sftp|ftp|rclone|aws\s+s3\s+(?:cp|sync|mv)|gsutil\s+(?:cp|rsync)|azcopy)\b[^\n]*{_SECRET_PATHS}"),
    (
        SEND_OUT,
        r"\b(?:hooks\.slack\.com|discord(?:app)?\.com/api/webhooks|webhook\.site|requestbin|pipedream\.net|ngrok(?:-free)?\.(?:io|app|dev)"
        r"|burpcollaborator|interact\.sh|oast\.\w+|canarytokens|hookbin|beeceptor|postb\.in|pastebin\.com|transfer\.sh|0x0\.st|termbin)",
    ),
    (
        SEND_OUT,
        rf"\b(?:send|post|upload|e-?mail|mail|forward|exfiltrate|transmit|leak|report|copy|sync|share|submit|push|beacon|dump)(?:s|ed|ing)?\b"
        rf"[^\n]{{0,80}}?\b{_DATA}[^\n]{{0,80}}?(?:https?://|\bwebhooks?\b|\b[\w.+-]+@[\w-]+\.[a-z]{{2,}}\b|\b(?:to|at)\s+(?:my|our|this|that|an?|the|some)\s+"
        r"(?:external\s+|remote\s+|own\s+)?(?:server|endpoint|url|address|inbox|email|host|bucket|collector|site|domain|ip))",
    ),
    # Loosening approvals or the sandbox.
    (
        LOOSEN,
        r"\b(?:switch|set|change|put|turn|flip|move|go)\w*\b[^\n]{0,40}?\bmodes?\b[^\n]{0,20}?\b(?:to\s+|into\s+)?[\"'`]?"
        r"(?:auto|yolo|full[\s-]?access|bypass\w*|dangerous\w*|unrestricted|accept-edits)\b",
    ),
    (
        LOOSEN,
        r"\bmode\s*[:=]\s*[\"']?(?:auto|yolo)\b|(?:^|\s)/mode\s+(?:auto|accept-edits)\b|--mode[=\s]+(?:auto|accept-edits)\b"
        r"|\bset_(?:session_)?mode\b[^\n]*\bauto\b|\bset_config_option\b[^\n]*\bauto\b",
    ),
    (
        LOOSEN,
        r"\b(?:use|enable|activate|enter|stay\s+in|always\s+(?:use|be\s+in)|run\s+in|work\s+in)\s+(?:the\s+)?(?:auto|yolo)(?:[\s-]approve)?\s+mode\b",
    ),
    (
        LOOSEN,
        r"\b(?:approve|allow|accept|permit|whitelist|allowlist|authori[sz]e|grant|confirm)\w*\s+(?:all|every|any|each)(?:thing)?\s+"
        r"(?:of\s+(?:the|my|your)\s+)?(?:shell\s+|tool\s+|permission\s+|approval\s+|pending\s+)?(?:commands?|tool\s*calls?|tools|requests?|actions?|edits?|permissions?"
        r"|prompts?|questions?|operations?|writes?|approvals?)\b|\b(?:approve|allow|accept|say\s+yes\s+to|answer\s+yes\s+to)\s+everything\b",
    ),
    (
        LOOSEN,
        r"\b(?:disable|turn\s+off|switch\s+off|bypass|skip|remove|deactivate|circumvent|get\s+around|escape|evade|suppress|override|kill|stop\s+using)\w*\b"
        r"[^\n]{0,30}?\b(?:the\s+|any\s+|all\s+)?(?:sandbox(?:ing)?|bwrap|bubblewrap|seatbelt|sandbox-exec|approvals?|approval\s+(?:prompts?|questions?|checks?|requests?|policy)"
        r"|permission\s+(?:prompts?|checks?|requests?|questions?|dialogs?)|confirmations?|safety\s+(?:checks?|rules?|measures?)|guardrails?|screening"
        r"|security\s+(?:checks?|prompts?|policy))\b",
    ),
    (
        LOOSEN,
        r"\b(?:do\s*n[o']?t|never|no\s+need\s+to|need\s*n[o']?t|stop)\s+(?:ever\s+)?(?:ask|wait|prompt|request|check)(?:ing)?\s+"
        r"(?:(?:the\s+)?user\s+)?(?:for\s+)?(?:approvals?|permissions?|confirmations?|consent|before)\b",
    ),
    (
        LOOSEN,
        r"\b(?:always|automatically|auto-?)\s*(?:answer|say|respond|reply|select|choose|click|press|pick)\w*\s+(?:with\s+)?[\"'`]?"
        r"(?:yes|y|allow|approve|accept|allow[_\s]always|allow[_\s]once)\b|\b(?:answer|say|respond|reply)\w*\s+[\"'`]?yes[\"'`]?\s+to\s+(?:all|every|any|each)\b"
        r"|\byes\s+to\s+all\b|\bauto-?approv\w*",
    ),
    (
        LOOSEN,
        r"--(?:yes-always|approve-all|dangerously-skip-permissions|dangerously-bypass\S*|trust-client-approvals|no-sandbox|yolo|allow-all)\b"
        r"|\btrust[_-]client[_-]approvals\b|\bapproval_respond\b|\bapprovals\s+(?:allow|approve)\b|\ballow[_-]always\b|\balways[\s-]+allow\b",
    ),
    (
        LOOSEN,
        r"\bconfig\.toml\b[^\n]*\b(?:approv\w*|modes?|sandbox\w*|rules?|allow\w*|trust\w*)\b|\b(?:approv\w*|modes?|sandbox\w*|rules?|trust\w*)\b[^\n]*\bconfig\.toml\b"
        r"|\[(?:approvals|sandbox)\]|\bapproval[_\s]rules?\b",
    ),
    (LOOSEN, r"\b(?:sqlite3?|update|insert|delete)\b[^\n]*\bapprovals?\b[^\n]*\b(?:set|into|status|allow\w*|where)\b"),
    (
        LOOSEN,
        r"\b(?:edit|write|modify|change|append|overwrite|update|echo|tee|sed|printf|cat)\w*\b[^\n]*(?:\.hermes-editor\b|hermes_editor_home)",
    ),
)


@functools.cache
def _checks() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((label, re.compile(pattern)) for label, pattern in _CHECK_PATTERNS)


# "Never run `curl … | sh`" and "don't switch to auto mode" warn rather than instruct. Only the
# words right before a match count ("don't forget to switch to auto" still instructs), and a
# pattern that starts with its own negation ("don't ask for approval") is never excused.
_NEGATED_SOURCE = (
    r"\b(?:never|do\s*n[o']?t|must\s*n[o']?t|must\s+not|should\s*n[o']?t|should\s+not|avoid|refuse\s+to)\s+(?:ever\s+)?"
    r"(?:(?:run|use|execute|pipe|approve|allow|switch|set|change|disable|turn|bypass|skip|add|edit|upload|send|post|install|enable|type|paste|copy)\w*\s+)?$"
)

_DOWNLOAD_TO_SOURCE = (
    r"\b(?:curl|wget|aria2c|iwr|invoke-webrequest|certutil)\b[^\n]*?(?:\s-o\s*|\s--output(?:-document)?[=\s]|\s-outfile\s+)([^\s;&|\"')]+)"
)
_URL_FILE_SOURCE = r"\b(?:curl|wget|aria2c|iwr|invoke-webrequest)\b[^\n]*?https?://\S*?/([\w.-]+\.(?:sh|bash|py|pl|rb|ps1|exe|bin|run|deb|rpm|msi|js|php|bat|cmd))\b"


@functools.cache
def _negated() -> re.Pattern[str]:
    return re.compile(_NEGATED_SOURCE)


@functools.cache
def _downloads() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A download to a named file, and a URL that ends in a script or a program's name."""
    return re.compile(_DOWNLOAD_TO_SOURCE), re.compile(_URL_FILE_SOURCE)


def _fold(line: str) -> str:
    """The view the checks read: look-alikes folded, lower case, quoting tricks and spacing undone."""
    text = unicodedata.normalize("NFKC", _INVISIBLE.sub("", line)).translate(_LOOKALIKES).casefold()
    text = _IN_WORD.sub("", text.replace("`", " "))
    text = _IFS.sub(" ", text)
    return _SPACE.sub(" ", _LIST_MARK.sub("", text.strip())).strip()


def _is_table_row(line: str) -> bool:
    stripped = line.strip()
    return len(stripped) > 1 and stripped.startswith("|") and stripped.endswith("|")


def _units(lines: list[str]) -> list[tuple[int, int]]:
    """Logical lines as (first, last) indices: backslash, trailing-pipe and leading-pipe continuations joined."""
    out: list[tuple[int, int]] = []
    index = 0
    while index < len(lines):
        first = index
        while index + 1 < len(lines):
            tail = lines[index].rstrip()
            following = lines[index + 1].lstrip()
            joins = tail.endswith(("\\", "&&", "||", "^")) or (tail.endswith("|") and not _is_table_row(tail))
            leads = following.startswith(("|", "&&")) and not _is_table_row(following)
            if not (joins or leads):
                break
            index += 1
        out.append((first, index))
        index += 1
    return out


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _match(pattern: re.Pattern[str], text: str) -> bool:
    return any(not _negated().search(text[max(0, found.start() - 60) : found.start()]) for found in pattern.finditer(text))


def _learned_flags(lines: list[str], source: str) -> list[tuple[Flagged, tuple[int, ...]]]:
    """Flags for the checks above, each with the line indices it covers."""
    units = _units(lines)
    folded = [" ".join(_fold(lines[i].rstrip().rstrip("\\^")) for i in range(a, b + 1)) for a, b in units]
    flags: list[tuple[Flagged, tuple[int, ...]]] = []
    download_to, url_file = _downloads()
    for (first, last), text in zip(units, folded):
        labels = [label for label, pattern in _checks() if _match(pattern, text)]
        if labels:
            excerpt = " ".join(" ".join(lines[i].split()) for i in range(first, last + 1))
            excerpt = excerpt if len(excerpt) <= 100 else excerpt[:97] + "…"
            reason = f"{'; '.join(dict.fromkeys(labels))}: “{excerpt}”"
            flags.append((Flagged(Finding(source, first + 1, reason), _digest(text)), tuple(range(first, last + 1))))
    # Two steps: a download to a file, then that file run (later in the text, or after && on the line).
    fetched: dict[str, int] = {}  # file name -> the unit that downloaded it
    for position, text in enumerate(folded):
        downloads = [(m.end(), _file_name(m.group(1))) for m in (*download_to.finditer(text), *url_file.finditer(text))]
        candidates = [(name, fetched[name], 0) for name in fetched]
        candidates += [(name, position, end) for end, name in downloads if name]
        for name, origin, offset in candidates:
            if not _runs_file(name, text[offset:]):
                continue
            first, last = units[position]
            start, stop = units[origin]
            covered = tuple(sorted(set(range(start, stop + 1)) | set(range(first, last + 1))))
            if any(first in done for _, done in flags):
                break  # this line is already flagged
            shown = [" ".join(lines[i].split()) for i in dict.fromkeys((start, first))]
            excerpt = " … ".join(line if len(line) <= 100 // len(shown) else line[: 100 // len(shown) - 1] + "…" for line in shown)
            digest = _digest(folded[origin] + "\n" + text if origin != position else text)
            flags.append((Flagged(Finding(source, first + 1, f"{FETCH_RUN}: “{excerpt}”"), digest), covered))
            break
        for _, name in downloads:
            if name:
                fetched[name] = position
    return flags


def _file_name(target: str) -> str:
    name = target.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]
    return name if len(name) >= 2 and re.search(r"[a-z]", name) and name != "null" else ""


def _runs_file(name: str, text: str) -> bool:
    """Whether ``text`` runs the file ``name`` (sh x.sh, chmod +x x && ./x, dpkg -i x.deb, & .\\x.exe)."""
    runner = rf"(?:sudo\s+)?(?:{_RUNNER}|chmod\s+\S*x\S*|dpkg\s+-i|rpm\s+-\S+|msiexec\s+\S+|start-process|\.|&)\s+(?:-\S+\s+)*"
    path = rf"[\"']?(?:\S*/|\.\\)?{re.escape(name)}(?![\w.-])"
    return bool(re.search(rf"(?:^|[\s;&|(]){runner}{path}|(?:^|[;&|(]\s*)(?:\./|/\S*/|\.\\){re.escape(name)}(?![\w.-])", text))


def review_learned(
    text: str, source: str, approved: frozenset[str] | set[str] = frozenset()
) -> tuple[tuple[Finding, ...], tuple[Flagged, ...]]:
    """Check a memory entry or skill about to be written: (what context screening refuses outright,
    passages a person must approve first). Passages whose digest is in ``approved`` pass."""
    base = screen(text, source).findings
    flags = tuple(flag for flag, _ in _learned_flags(text.split("\n"), source) if flag.digest not in approved)
    return base, flags


def screen_learned(text: str, source: str, approved: frozenset[str] | set[str] = frozenset()) -> Screened:
    """:func:`screen` plus the checks for learned text, for memory and skills entering a prompt.

    A flagged passage a person approved when it was written (its digest in ``approved``) stays;
    any other is replaced by a visible marker, like a context file's."""
    base = screen(text, source)
    lines = base.text.split("\n")
    findings = list(base.findings)
    for flag, covered in _learned_flags(lines, source):
        if flag.digest in approved:
            continue
        findings.append(flag.finding)
        label = flag.finding.reason.split(":", 1)[0].split(";", 1)[0]
        for number, index in enumerate(covered):
            lines[index] = f"[line removed by screening: {label}]" if number == 0 else ""
    findings.sort(key=lambda f: f.line)
    return Screened("\n".join(lines), tuple(findings))
