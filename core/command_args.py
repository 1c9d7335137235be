"""What a program's arguments make it do: the sed script, the awk program, inline code, the
files ``curl``/``wget``/``httpie`` send, the options of ``tar`` and ``git`` that run programs,
and shell globs as the shell would expand them.

Each inspector returns ``Effects`` (a level with its reason, the files written and read, the
network, command texts it runs); ``core.command_rules`` resolves the paths and judges the texts.
They only ever raise a grade: code is never decided to be harmless.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from core.command_tables import INLINE_CODE

SAFE, NORMAL, DANGEROUS, HARD = 0, 1, 2, 3
GLOB_LIMIT = 200  # matches of one pattern taken into account
_GLOB_BUDGET = 5000  # directory entries looked at for one pattern
_SCRIPT_LIMIT = 65536  # bytes of a sed/awk program file read to judge it


@dataclass(slots=True)
class Effects:
    level: int = SAFE
    reason: str = ""
    writes: list[str] = field(default_factory=list)  # words naming files, as the program sees them
    reads: list[str] = field(default_factory=list)
    network: bool = False
    runs: list[str] = field(default_factory=list)  # command lines it runs

    def flag(self, level: int, reason: str) -> None:
        if level > self.level:
            self.level, self.reason = level, reason


def scan(args: list[str], values: frozenset[str] | set[str], attached: frozenset[str] | set[str] = frozenset(), *, permute: bool = True) -> Iterator[tuple[str | None, str | None]]:
    """Options and operands the way getopt_long reads them: (option, value) and (None, operand).

    ``values`` take an argument (attached or the next word); ``attached`` take one only when it
    is attached (``-i.bak``, ``--in-place=.bak``). Without ``permute``, the first operand ends
    the options.
    """
    i, only_operands = 0, False
    while i < len(args):
        a = args[i]
        i += 1
        if only_operands or a == "-" or not a.startswith("-"):
            yield None, a
            only_operands = only_operands or not permute
            continue
        if a == "--":
            only_operands = True
            continue
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            if eq:
                yield name, value
            elif name in values and i < len(args):
                yield name, args[i]
                i += 1
            else:
                yield name, None
            continue
        for j in range(1, len(a)):
            option, rest = "-" + a[j], a[j + 1 :]
            if option in attached:
                yield option, rest or None
                break
            if option in values:
                if rest:
                    yield option, rest
                elif i < len(args):
                    yield option, args[i]
                    i += 1
                else:
                    yield option, None
                break
            yield option, None


def read_small(path: Path | None) -> str | None:
    """The text of a small program file, or None when it is missing, large or unreadable."""
    if path is None:
        return None
    try:
        if os.path.getsize(path) > _SCRIPT_LIMIT:
            return None
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


# --- globs -------------------------------------------------------------------------------


def expand_glob(pattern: str, cwd: Path, home: Path, limit: int = GLOB_LIMIT) -> tuple[list[Path], bool]:
    """The paths a shell glob names now (links resolved), and whether there were more than ``limit``.

    Hidden names count when the pattern's component starts with ``.`` or uses ``?`` or ``[``
    (stricter than a shell, which is the safe side for reads).
    """
    pattern = home_pattern(pattern, home)
    if "$" in pattern or "`" in pattern or pattern.startswith("~"):
        return [], False
    current = [Path("/") if pattern.startswith("/") else cwd]
    parts = [p for p in pattern.split("/") if p]
    seen, truncated = 0, False
    for k, comp in enumerate(parts):
        found: list[Path] = []
        if not any(ch in comp for ch in "*?["):
            found = [d / comp for d in current if k == len(parts) - 1 or os.path.isdir(d / comp)]
        else:
            hidden = comp.startswith(".") or "?" in comp or "[" in comp
            for directory in current:
                try:
                    names = sorted(os.listdir(directory))
                except OSError:
                    continue
                seen += len(names)
                found += [directory / n for n in names if (hidden or not n.startswith(".")) and fnmatch.fnmatchcase(n, comp)]
                if seen > _GLOB_BUDGET:
                    truncated = True
                    break
        if len(found) > limit:
            found, truncated = found[:limit], True
        current = found
    return [Path(os.path.realpath(p)) for p in current if os.path.lexists(p)], truncated


def home_pattern(word: str, home: Path) -> str:
    """``word`` with a leading ``~``, ``$HOME`` or ``${HOME}`` replaced by the home directory."""
    for var in ("$HOME", "${HOME}", "~"):
        if word == var or word.startswith(var + "/"):
            return str(home) + word[len(var) :]
    return word


def static_prefix(pattern: str) -> str:
    """The directory part of a pattern before its first glob character or substitution."""
    cut = min((i for i, ch in enumerate(pattern) if ch in "*?[$`"), default=len(pattern))
    head = pattern[:cut]
    return head if head.endswith("/") or cut == len(pattern) else os.path.dirname(head) or "."


# --- sed ---------------------------------------------------------------------------------


@dataclass(slots=True)
class SedScript:
    executes: bool = False
    writes: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    unparsed: bool = False


def parse_sed(s: str) -> SedScript:
    """The commands of a sed script that run programs (``e``, ``s///e``) or touch files (``w``, ``r``)."""
    out, i, n = SedScript(), 0, len(s)

    def to_eol(i: int) -> tuple[str, int]:
        j = s.find("\n", i)
        return (s[i:], n) if j < 0 else (s[i:j], j)

    def until(i: int, delim: str, regex: bool = True) -> int:
        while i < n:
            if s[i] == "\\":
                i += 2
            elif s[i] == delim:
                return i + 1
            elif s[i] == "[" and regex:  # a bracket expression may hold the delimiter
                j = i + 1 + (s[i + 1 : i + 2] == "^")
                j += s[j : j + 1] == "]"
                while j < n and s[j] != "]":
                    j = s.find(s[j + 1] + "]", j + 2) + 2 if s[j] == "[" and s[j + 1 : j + 2] in (":", ".", "=") and s.find(s[j + 1] + "]", j + 2) > 0 else j + 1
                if j >= n:
                    return -1
                i = j + 1
            else:
                i += 1
        return -1

    def address(i: int) -> int:
        if i < n and s[i] in "+~":
            i += 1
        if i < n and s[i].isdigit():
            while i < n and (s[i].isdigit() or s[i] == "~"):
                i += 1
        elif i < n and s[i] == "$":
            i += 1
        elif i < n and s[i] in "/\\":
            i = until(i + 2, s[i + 1]) if s[i] == "\\" and i + 1 < n else until(i + 1, "/")
            while 0 <= i < n and s[i] in "IM":
                i += 1
        return i

    while i < n:
        c = s[i]
        if c in " \t\n;":
            i += 1
            continue
        if c == "#":
            i = to_eol(i)[1]
            continue
        i = address(i)
        if i >= 0 and i < n and s[i] == ",":
            i = address(i + 1)
        if i < 0:
            out.unparsed = True
            return out
        while i < n and s[i] in " \t!":
            i += 1
        if i >= n:
            out.unparsed = True
            return out
        c, i = s[i], i + 1
        if c in "{}=dDgGhHnNpPxzF":
            continue
        if c in "lLqQ":
            while i < n and s[i] in " \t0123456789":
                i += 1
        elif c in ":btTv":
            while i < n and s[i] not in ";\n}":
                i += 1
        elif c in "aic":
            while i < n and s[i] != "\n":
                i += 2 if s[i] == "\\" else 1
        elif c in "rRwW":
            name, i = to_eol(i)
            (out.reads if c in "rR" else out.writes).append(name.strip())
        elif c == "e":
            out.executes = True
            i = to_eol(i)[1]
        elif c in "sy" and i < n and s[i] not in "\n\\":
            delim = s[i]
            i = until(i + 1, delim, c == "s")
            i = until(i, delim, False) if i >= 0 else -1
            if i < 0:
                out.unparsed = True
                return out
            while c == "s" and i < n and s[i] not in ";\n}":
                flag = s[i]
                if flag == "e":
                    out.executes = True
                elif flag == "w":
                    name, i = to_eol(i + 1)
                    out.writes.append(name.strip())
                    break
                elif flag not in "gpiImM0123456789 \t":
                    out.unparsed = True
                    return out
                i += 1
        else:
            out.unparsed = True
            return out
    return out


_SED_VALUES = frozenset({"-e", "--expression", "-f", "--file", "-l", "--line-length"})
_SED_ATTACHED = frozenset({"-i", "--in-place"})


def sed_effects(args: list[str], read: Callable[[str], str | None]) -> Effects:
    e = Effects()
    scripts: list[str] = []
    operands: list[str] = []
    from_file = in_place = sandbox = False
    for option, value in scan(args, _SED_VALUES, _SED_ATTACHED):
        if option is None:
            operands.append(value or "")
        elif option in ("-e", "--expression"):
            scripts.append(value or "")
        elif option in ("-f", "--file") and value:
            from_file = True
            e.flag(NORMAL, "it runs a sed script from a file")
            e.reads.append(value)
            if (text := read(value)) is not None:
                scripts.append(text)
        elif option in _SED_ATTACHED:
            in_place = True
        elif option == "--sandbox":
            sandbox = True
    if not scripts and not from_file and operands:
        scripts.append(operands.pop(0))
    e.reads += operands
    if in_place:
        e.flag(NORMAL, "sed -i changes files")
        e.writes += operands
    if sandbox:
        return e
    parsed = parse_sed("\n".join(scripts))
    if parsed.executes:
        e.flag(DANGEROUS, "sed runs a shell command (its e command)")
    for name in parsed.writes:
        if name not in ("/dev/stdout", "/dev/stderr"):
            e.flag(NORMAL, f"sed writes {name}")
            e.writes.append(name)
    e.reads += parsed.reads
    if parsed.unparsed:
        e.flag(NORMAL, "its sed script could not be checked")
    return e


# --- awk ---------------------------------------------------------------------------------

_AWK_VALUES = frozenset({"-F", "-v", "-f", "-e", "-i", "-l", "-E", "-W", "--field-separator", "--assign", "--file", "--source", "--include", "--load", "--exec"})
_AWK_ATTACHED = frozenset({"-o", "-p", "-d", "--pretty-print", "--profile", "--dump-variables"})
_AWK_OPS = ("|&", ">>", "||", "&&", "==", "!=", "<=", ">=", "!~", "++", "--", "+=", "-=", "*=", "/=", "%=", "^=", "**")
_REGEX_AFTER_WORDS = {"print", "printf", "return", "in", "getline", "case"}


def _awk_tokens(s: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c in " \t\r" or s.startswith("\\\n", i):
            i += 2 if c == "\\" else 1
        elif c == "\n":
            out.append(("nl", c))
            i += 1
        elif c == "#":
            i = s.find("\n", i) if "\n" in s[i:] else n
        elif c == '"':
            j, text = i + 1, []
            while j < n and s[j] != '"':
                text.append(s[j : j + 2] if s[j] == "\\" else s[j])
                j += 2 if s[j] == "\\" else 1
            out.append(("str", "".join(text)))
            i = j + 1
        elif c == "/" and (not out or out[-1][0] == "nl" or out[-1][0] == "op" and out[-1][1] not in (")", "]", "$", "++", "--") or out[-1] in (("word", w) for w in _REGEX_AFTER_WORDS)):
            j, bracket = i + 1, False
            while j < n and (bracket or s[j] != "/") and s[j] != "\n":
                bracket = (bracket or s[j] == "[") and s[j] != "]"
                j += 2 if s[j] == "\\" else 1
            out.append(("re", s[i + 1 : j]))
            i = j + 1
        elif c.isalnum() or c in "_@":
            j = i + 1
            while j < n and (s[j].isalnum() or s[j] in "_."):
                j += 1
            out.append(("word", s[i:j]))
            i = j
        else:
            op = next((o for o in _AWK_OPS if s.startswith(o, i)), c)
            out.append(("op", op))
            i += len(op)
    return out


def awk_program(text: str) -> Effects:
    """What an awk program does besides reading: system(), pipes, redirected prints, extensions."""
    e = Effects()
    toks = _awk_tokens(text)
    for k, (kind, value) in enumerate(toks):
        nxt = toks[k + 1] if k + 1 < len(toks) else ("", "")
        if kind == "word" and value == "system" and nxt == ("op", "("):
            e.flag(DANGEROUS, "awk runs a shell command (system)")
        elif kind == "op" and value in ("|", "|&"):
            e.flag(DANGEROUS, "awk runs a shell command through a pipe")
        elif kind == "word" and value == "@load":
            e.flag(DANGEROUS, "awk loads a compiled extension (@load)")
        elif kind == "word" and value == "@include":
            e.flag(NORMAL, "awk includes another program (@include)")
        elif kind == "str" and value.startswith("/inet"):
            e.network = True
            e.flag(NORMAL, "awk opens a network connection")
        elif kind == "word" and value in ("print", "printf"):
            depth = 0
            for j in range(k + 1, len(toks)):
                tk, tv = toks[j]
                if tk == "nl" or tk == "op" and tv in (";", "}", "{") and depth == 0:
                    break
                depth += (tv == "(") - (tv == ")") if tk == "op" else 0
                if depth == 0 and tk == "op" and tv in (">", ">>"):
                    target = toks[j + 1] if j + 1 < len(toks) else ("", "")
                    if target[0] == "str" and target[1].startswith("/inet"):
                        e.network = True
                    elif target[0] == "str":
                        if target[1] not in ("/dev/stdout", "/dev/stderr", "-"):
                            e.flag(NORMAL, f"awk writes {target[1]}")
                            e.writes.append(target[1])
                    else:
                        e.flag(NORMAL, "awk writes to a file named as it runs")
                    break
    return e


def awk_effects(args: list[str], read: Callable[[str], str | None]) -> Effects:
    e = Effects()
    programs: list[str] = []
    operands: list[str] = []
    given = sandbox = False
    for option, value in scan(args, _AWK_VALUES, _AWK_ATTACHED, permute=False):
        if option is None:
            operands.append(value or "")
        elif option in ("-f", "--file", "-E", "--exec") and value:
            given = True
            e.flag(NORMAL, "it runs an awk program from a file")
            e.reads.append(value)
            if (text := read(value)) is not None:
                programs.append(text)
        elif option in ("-e", "--source"):
            given = True
            programs.append(value or "")
        elif option in ("-i", "--include") and value:
            e.flag(NORMAL, "awk includes another program (-i)")
            e.reads.append(value)
        elif option in ("-l", "--load"):
            e.flag(DANGEROUS, "awk loads a compiled extension (-l)")
        elif option in ("-o", "--pretty-print", "-p", "--profile", "-d", "--dump-variables"):
            name = value or ("awkvars.out" if option in ("-d", "--dump-variables") else "awkprof.out")
            e.flag(NORMAL, f"awk writes {name}")
            e.writes.append(name)
        elif option in ("-S", "--sandbox"):
            sandbox = True
        elif option == "-W":
            e.flag(NORMAL, f"awk -W {value} may run or write things")
    if not given and operands:
        programs.append(operands.pop(0))
    e.reads += [o for o in operands if not re.match(r"^[A-Za-z_]\w*=", o)]
    if not sandbox:
        for text in programs:
            found = awk_program(text)
            e.flag(found.level, found.reason)
            e.writes += found.writes
            e.network |= found.network
    return e


# --- inline code -------------------------------------------------------------------------

_CODE_RULES = (
    ("starts other programs", re.compile(
        r"subprocess|\bos\s*\.\s*(system|popen\w*|exec\w*|spawn\w*|posix_spawn\w*|fork\w*|kill\w*|startfile)|\bpty\s*\.\s*spawn"
        r"|commands\.getoutput|child_process|\bexec(Sync|File\w*)?\s*\(|\bspawn(Sync)?\s*\(|shell_exec|passthru|proc_open|\bpopen"
        r"|pcntl_\w+|\bIO\s*\.\s*popen|Open3|%x[({\[<|!]|\bqx\s*[({\[<|/!'\"]|\bos\.execute|\bio\.popen|(?<![\w.])system2?\s*\("
        r"|\bKernel\s*\.|Runtime\.getRuntime|ProcessBuilder|Deno\s*\.\s*(run|Command)|Bun\s*\.\s*(spawn\w*|\$)|Start-Process"
        r"|Invoke-Expression|Invoke-Item|\biex\b|do\s+shell\s+script|\bkill\s*\(|multiprocessing|webbrowser|\bshell\s*\(", re.I)),
    ("deletes or moves files", re.compile(
        r"rmtree|remove_tree|\brm_rf?\b|\bunlink\w*|\brmdir\w*|removedirs|\bfs\s*\.\s*(rm|rmdir|unlink|truncate)\w*|\brmSync|rimraf"
        r"|\b(File|Dir|FileUtils)\s*\.\s*(delete|unlink|rm\w*|remove\w*|rmdir|mv|move)|\bfile\.remove|\bos\s*\.\s*(remove|rename|replace|truncate|chmod|chown)"
        r"|\bshutil\s*\.\s*(move|rmtree|chown)|Remove-Item|Move-Item|Clear-Content|Deno\s*\.\s*(remove|rename|truncate)|\brm\s+-\w|\btruncate\s*\(")),
    ("runs code it builds", re.compile(
        r"(?<![\w.])(exec|eval|execfile)\s*\(|__import__|import_module|importlib\s*\.\s*(util|machinery)|(?<![\w.])compile\s*\("
        r"|__builtins__|\bbuiltins\b|__dict__|__globals__|__subclasses__|__getattribute__|__code__|\bsys\s*\.\s*modules"
        r"|\bgetattr\s*\(\s*(os|posix|nt|shutil|subprocess|builtins|__builtins__|sys|pty|ctypes)\b|\bimport\s+(os|posix|nt|shutil|subprocess|pty|ctypes)\s+as\b"
        r"|\bfrom\s+(os|posix|nt|shutil)\s+import\s+[^;\n]*\b(system|popen|exec\w*|spawn\w*|remove|unlink|rmdir|removedirs|rename|replace|fork\w*|kill\w*|rmtree|move|\*)"
        r"|ctypes|cffi|\bmarshal\s*\.\s*loads?|\bpickle\s*\.\s*loads?|\bnew\s+Function|(?<![\w.])Function\s*\(|\bvm\s*\.\s*run"
        r"|process\s*\.\s*(binding|dlopen)|\bdlopen|(?<![\w.])load(string)?\s*\(|\bdofile\b|\b(instance|class|module)_eval"
        r"|\brequire\s*\(\s*[^'\"`\s)]|\bimport\s*\(\s*[^'\"`\s)]")),
)
# Languages whose calls need no parentheses (``system "cmd"``, backquotes run a shell).
_BARE_CALLS = re.compile(r"`|(?<![\w.$@%>:-])(system|exec|spawn|fork|unlink|rmdir|kill|syscall)\b")
_BARE_LANGUAGES = {"perl", "ruby", "php", "lua", "tcl", "PowerShell", "AppleScript", "R"}
_POWERSHELL = re.compile(r"(^|[\s;|(&{])(rm|del|erase|rd|ri|rmdir|mv|move|mi|iwr|irm|curl|wget|sc|set-content|out-file|&|\.)(\s|$)", re.I)
_CODE_NETWORK = re.compile(
    r"urllib|\brequests\s*\.|http\.client|httplib|\bhttpx\b|aiohttp|\bsocket\b|urlopen|(?<![\w.])fetch\s*\(|\bhttps?\s*\.\s*(get|request)"
    r"|\bnet\s*\.\s*(connect|createConnection|Socket)|XMLHttpRequest|WebSocket|Net::HTTP|open-uri|LWP|HTTP::Tiny|IO::Socket|curl_"
    r"|fsockopen|Invoke-WebRequest|Invoke-RestMethod|\biwr\b|\birm\b|download\.file|smtplib|ftplib|paramiko|Deno\s*\.\s*connect"
    r"|Bun\s*\.\s*connect|['\"`](https?|ftp|wss?)://", re.I)
_CODE_WRITES = (
    # open("p", "w") in python, ruby, lua (io.open), php (fopen)
    re.compile(r"""\b(?:open|fopen)\s*\(\s*[rbfu]*(['"])(?P<path>[^'"\n]+)\1\s*,\s*(?:mode\s*=\s*)?[rbfu]*(['"])(?P<mode>[^'"\n]*)\3"""),
    # Path("p").write_text(...)
    re.compile(r"""\bPath\s*\(\s*[rbfu]*(['"])(?P<path>[^'"\n]+)\1\s*\)\s*\.\s*(?P<mode>write_text|write_bytes|touch|mkdir|symlink_to|hardlink_to|chmod|open\s*\(\s*['"][wax+])"""),
    # writeFileSync("p", ...), File.write("p"), file_put_contents("p")
    re.compile(r"""\b(?P<mode>writeFile\w*|appendFile\w*|createWriteStream|copyFile\w*|mkdirSync|symlink\w*|cpSync|writeTextFile|Bun\.write|file_put_contents|File\.write|IO\.write|writeLines|saveRDS)\s*\(\s*(['"`])(?P<path>[^'"`\n]+)\2"""),
    # perl: open(my $f, '>', 'p') or open(F, ">p")
    re.compile(r"""\bopen\s*\(?\s*(?:my\s+)?[$\w]+\s*,\s*(['"])\s*(?P<mode>\+?>{1,2}|\+<)\s*(?P<path>[^'"\n]*)\1(?:\s*,\s*(['"])(?P<path3>[^'"\n]+)\4)?"""),
)


def code_writes(code: str) -> list[str]:
    """Files that inline code visibly opens for writing (string literals only)."""
    found = []
    for pattern in _CODE_WRITES:
        for m in pattern.finditer(code):
            mode = m.group("mode")
            if pattern is _CODE_WRITES[0] and not set(mode) & set("wax+"):
                continue
            path = m.group("path") or (m.groupdict().get("path3") or "")
            if path:
                found.append(path)
    return found


def inline_effects(lang: str, code: str) -> Effects:
    """Inline code is at least normal; what it visibly does can make it dangerous."""
    e = Effects()
    e.flag(NORMAL, f"it runs inline {lang} code")
    for what, pattern in _CODE_RULES:
        if pattern.search(code):
            e.flag(DANGEROUS, f"it runs inline {lang} code that {what}")
    if lang in _BARE_LANGUAGES and _BARE_CALLS.search(code):
        e.flag(DANGEROUS, f"it runs inline {lang} code that starts other programs or deletes files")
    if lang == "PowerShell" and _POWERSHELL.search(code):
        e.flag(DANGEROUS, "it runs inline PowerShell code that runs, deletes or writes things")
    e.network = bool(_CODE_NETWORK.search(code))
    e.writes = code_writes(code)
    return e


@dataclass(slots=True)
class Inline:
    lang: str
    codes: list[str] = field(default_factory=list)
    operands: list[str] = field(default_factory=list)  # script and its arguments, or files for -n/-p
    in_place: bool = False  # perl/ruby -i
    encoded: bool = False  # pwsh -EncodedCommand
    module: bool = False  # python -m


# Options of each interpreter that take a value as the next word (so it is not read as the script).
_SEPARATE_VALUES = {
    "python": {"-W", "-X", "--check-hash-based-pycs"},
    "ruby": {"-I", "-r", "-C", "-E", "--encoding"},
    "node": {"-r", "--require", "--import", "--loader", "-C", "--conditions", "--input-type", "--env-file", "--inspect-port"},
    "bun": {"-r", "--preload", "--cwd", "--env-file", "--tsconfig-override"},
    "perl": set(),
    "php": {"-c", "-d", "-z"},
    "R": {"--file"},
}
_ATTACHED_LETTERS = {"perl": "IMmlx0CdDV", "ruby": "IxCFEKW0T", "python": "WX"}


def find_inline(prog: str, args: list[str]) -> Inline:
    """The inline code an interpreter is given (``-c``, ``-e``, ``deno eval``) and what follows it."""
    lang, flags = INLINE_CODE[prog]
    found = Inline(lang)
    if prog == "deno":
        if args[:1] == ["eval"]:
            found.codes = [a for a in args[1:] if not a.startswith("-")][:1]
        return found
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--" or a == "-" or not a.startswith("-"):
            found.operands = args[i + (a == "--") :]
            break
        if lang == "PowerShell":
            name = a.lower()
            if name in flags:
                found.encoded = name.startswith(("-e", "-enc"))
                found.codes.append(" ".join(args[i + 1 :]))
                break
            i += 1
            continue
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            if name in flags:
                found.codes.append(value if eq else (args[i + 1] if i + 1 < len(args) else ""))
                i += 1 if eq else 2
            else:
                i += 1 if eq or name not in _SEPARATE_VALUES.get(lang, ()) else 2
            continue
        i += 1
        for j in range(1, len(a)):
            option, rest = "-" + a[j], a[j + 1 :]
            if option in flags:
                if rest:
                    found.codes.append(rest)
                elif i < len(args):
                    found.codes.append(args[i])
                    i += 1
                break
            if lang == "python" and option == "-m":
                found.module = True
                found.operands = [rest] if rest else []
                found.operands += args[i:]
                return found
            if lang in ("perl", "ruby") and a[j] == "i":
                found.in_place = True
                break
            if option in _SEPARATE_VALUES.get(lang, ()) and not rest:
                i += 1
                break
            if a[j] in _ATTACHED_LETTERS.get(lang, ""):
                break
        if found.codes and lang == "python":
            found.operands = args[i:]
            break
    return found


# --- network clients -----------------------------------------------------------------------

_CURL_VALUES = frozenset(
    "-A -b -c -C -d -D -e -E -F -H -K -m -o -P -Q -r -t -T -u -U -w -x -X -y -Y -z "
    "--data --data-ascii --data-binary --data-raw --data-urlencode --json --form --form-string --upload-file --config "
    "--cert --key --cacert --capath --netrc-file --cookie --cookie-jar --output --dump-header --trace --trace-ascii "
    "--stderr --libcurl --header --proxy-header --variable --url-query --proxy-cert --proxy-key --proxy-cacert "
    "--output-dir --etag-save --etag-compare --hsts --alt-svc --url --user --user-agent --referer --request --proxy "
    "--max-time --connect-timeout --retry --retry-delay --retry-max-time --write-out --range --resolve --connect-to "
    "--interface --limit-rate --max-filesize --ciphers --pinnedpubkey --crlfile --unix-socket --abstract-unix-socket "
    "--doh-url --oauth2-bearer --aws-sigv4 --mail-from --mail-rcpt --mail-auth --quote --speed-limit --speed-time "
    "--time-cond --tls-max --preproxy --proxy-user --socks4 --socks5 --socks5-hostname --noproxy --dns-servers "
    "--local-port --create-file-mode --ftp-port --cert-type --key-type --pass --proto --proto-redir --proto-default "
    "--expect100-timeout --keepalive-time --parallel-max --service-name --login-options --max-redirs".split()
)
_CURL_READS = {"-T", "--upload-file", "-K", "--config", "--key", "--cacert", "--capath", "--netrc-file", "--proxy-key", "--proxy-cacert", "--crlfile", "--etag-compare"}
_CURL_WRITES = {"-o", "--output", "-D", "--dump-header", "-c", "--cookie-jar", "--trace", "--trace-ascii", "--stderr", "--libcurl", "--etag-save", "--hsts", "--alt-svc", "--output-dir"}
_NAME_AT_FILE = re.compile(r"^%?([^=@]*)@(.+)$")


def curl_effects(args: list[str]) -> Effects:
    e = Effects(network=True)
    remote_name, urls = False, []
    for option, value in scan(args, _CURL_VALUES):
        if option is None:
            urls.append(value or "")
            if (value or "").startswith("file://"):
                e.reads.append(value[len("file://") :])
            continue
        if option in ("-O", "--remote-name"):
            remote_name = True
        if value is None:
            continue
        if option in ("-d", "--data", "--data-ascii", "--data-binary", "--json", "-H", "--header", "--proxy-header"):
            if value.startswith("@") and value != "@-":
                e.reads.append(value[1:])
        elif option in ("--data-urlencode", "--url-query", "--variable"):
            if (m := _NAME_AT_FILE.match(value)) and "=" not in m.group(1) and m.group(2) != "-":
                e.reads.append(m.group(2))
        elif option in ("-F", "--form"):
            _, eq, rest = value.partition("=")
            if eq and rest[:1] in ("@", "<") and rest[1:2] != "-":
                e.reads.append(rest[1:].split(";")[0].strip('"'))
        elif option in ("-E", "--cert", "--proxy-cert"):
            e.reads.append(value.split(":")[0])
        elif option in ("-b", "--cookie") and "=" not in value:
            e.reads.append(value)
        elif option in _CURL_READS and value not in ("-", "."):
            e.reads.append(value)
        elif option in _CURL_WRITES and value != "-":
            e.writes.append(value)
    if remote_name:
        e.writes += [os.path.basename(u.split("?")[0].rstrip("/")) for u in urls if "/" in u and os.path.basename(u.split("?")[0].rstrip("/"))]
    return e


_WGET_VALUES = frozenset(
    "-O -o -a -i -P -e -t -T -w -U -l -A -R -D -I -X -B -Q --output-document --output-file --append-output "
    "--input-file --directory-prefix --execute --post-file --body-file --post-data --body-data --load-cookies "
    "--save-cookies --certificate --private-key --ca-certificate --ca-directory --crl-file --config --user "
    "--password --header --method --user-agent --referer --warc-file --use-askpass --tries --timeout --wait "
    "--level --accept --reject --domains --base --quota --bind-address --limit-rate --rejected-log".split()
)


def wget_effects(args: list[str]) -> Effects:
    e = Effects(network=True)
    for option, value in scan(args, _WGET_VALUES):
        if option is None or value is None:
            continue
        if option in ("--post-file", "--body-file", "--load-cookies", "--certificate", "--private-key", "--ca-certificate", "--crl-file", "--config", "-i", "--input-file"):
            if value != "-":
                e.reads.append(value)
        elif option in ("-O", "--output-document", "-o", "--output-file", "-a", "--append-output", "--save-cookies", "--rejected-log", "-P", "--directory-prefix"):
            if value != "-":
                e.writes.append(value)
        elif option == "--warc-file":
            e.writes.append(value + ".warc.gz")
        elif option == "--use-askpass":
            e.flag(DANGEROUS, f"wget runs a program to ask for passwords ({value})")
        elif option in ("-e", "--execute"):
            e.flag(NORMAL, "wget runs configuration commands (-e)")
    return e


_HTTPIE_VALUES = frozenset(
    "-a --auth -A --auth-type --session --session-read-only -o --output --cert --cert-key --cert-key-pass --verify "
    "--proxy --pretty -s --style -p --print --timeout --max-redirects --format-options --response-charset "
    "--response-mime --boundary --raw --default-scheme --ssl --ciphers".split()
)
_HTTPIE_ITEM = re.compile(r"^((?:\\.|[^=:@\\])*)(:=@|==@|=@|:@|@)(.+)$")


def httpie_effects(args: list[str]) -> Effects:
    e = Effects(network=True)
    positional = []
    for option, value in scan(args, _HTTPIE_VALUES):
        if option is None:
            positional.append(value or "")
        elif value is None:
            continue
        elif option in ("--session", "--session-read-only") and ("/" in value or value.endswith(".json")):
            e.reads.append(value)
            if option == "--session":
                e.writes.append(value)
        elif option in ("-o", "--output"):
            e.writes.append(value)
        elif option in ("--cert", "--cert-key") or option == "--verify" and value.lower() not in ("yes", "no", "true", "false"):
            e.reads.append(value)
    if positional and re.fullmatch(r"[A-Z]+", positional[0]):
        positional = positional[1:]
    for item in positional[1:]:
        if item.startswith("@"):
            e.reads.append(item[1:])
        elif m := _HTTPIE_ITEM.match(item):
            e.reads.append(m.group(3).split(";type=")[0])
    return e


# --- archives ----------------------------------------------------------------------------

_TAR_VALUES = frozenset(
    "-f -C -I -F -T -X -g -K -N -b -H -L -V --file --directory --use-compress-program --info-script "
    "--new-volume-script --to-command --files-from --exclude-from --index-file --rsh-command --listed-incremental "
    "--format --label --owner --group --mode --mtime --exclude --transform --xform --checkpoint-action --warning "
    "--newer --suffix --starting-file --volno-file --rmt-command".split()
)
_TAR_RUNS = {"-I", "--use-compress-program", "-F", "--info-script", "--new-volume-script", "--to-command", "--rsh-command", "--rmt-command"}


def tar_effects(args: list[str]) -> Effects:
    """What tar does: list (reads), create (writes the archive) or extract (writes a directory)."""
    if args and not args[0].startswith("-"):
        args = ["-" + args[0], *args[1:]]  # old style: `tar xzf a.tgz`
    e = Effects()
    create = extract = listing = False
    archive, directory = None, "."
    for option, value in scan(args, _TAR_VALUES):
        if option in ("-c", "--create", "-r", "--append", "-u", "--update", "-A", "--catenate", "--concatenate", "--delete"):
            create = True
        elif option in ("-x", "--extract", "--get"):
            extract = True
        elif option in ("-t", "--list", "-d", "--diff", "--compare"):
            listing = True
        elif option in ("-f", "--file") and value:
            archive = value
            if ":" in value.split("/")[0] and "--force-local" not in args:
                e.network = True
        elif option in ("-C", "--directory") and value:
            directory = value
        elif option in _TAR_RUNS:
            e.flag(DANGEROUS, f"tar runs a program ({option} {value or ''})".replace(" )", ")"))
        elif option == "--checkpoint-action" and (value or "").startswith("exec"):
            e.flag(DANGEROUS, "tar runs a program at checkpoints (--checkpoint-action=exec)")
        elif option in ("-T", "--files-from", "-X", "--exclude-from") and value and value != "-":
            e.reads.append(value)
        elif option in ("--index-file", "-g", "--listed-incremental", "--volno-file") and value:
            e.writes.append(value)
    if create and archive and archive != "-":
        e.writes.append(archive)
    if extract:
        e.writes.append(directory)
    elif archive and archive != "-":
        e.reads.append(archive)
    if create or extract or not listing:
        e.flag(NORMAL, "tar writes files")
    return e


# --- git -----------------------------------------------------------------------------------

GIT_GLOBAL_VALUES = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix", "--attr-source", "--list-cmds"}


def git_globals(args: list[str]) -> tuple[list[tuple[str, str]], list[str], list[str], list[str]]:
    """Git's global options: (-c settings as (key, value), -C directories, --git-dir/--exec-path used, the rest)."""
    settings: list[tuple[str, str]] = []
    dirs: list[str] = []
    special: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-"):
        name, eq, value = args[i].partition("=")
        takes = name in GIT_GLOBAL_VALUES and not eq
        if takes:
            value = args[i + 1] if i + 1 < len(args) else ""
        i += 2 if takes else 1
        if name == "-c":
            key, _, val = value.partition("=")
            settings.append((key, val))
        elif name == "--config-env":
            key, _, env = value.partition("=")
            settings.append((key, "$" + env))
        elif name == "-C":
            dirs.append(value)
        elif name == "--git-dir" or name == "--exec-path" and eq:
            special.append(name)
    return settings, dirs, special, args[i:]


def git_config_file(start: Path) -> Path:
    """The configuration file of the repository ``start`` lies in (``.git/config``, worktrees followed)."""
    for directory in (start, *start.parents):
        dot = directory / ".git"
        if dot.is_dir():
            return Path(os.path.realpath(dot / "config"))
        if dot.is_file():
            text = read_small(dot) or ""
            gitdir = text.partition("gitdir:")[2].strip()
            if gitdir:
                gitdir_path = Path(os.path.realpath(directory / gitdir))
                common = (read_small(gitdir_path / "commondir") or "").strip()
                return Path(os.path.realpath(gitdir_path / common / "config")) if common else gitdir_path / "config"
    return start / ".git" / "config"
