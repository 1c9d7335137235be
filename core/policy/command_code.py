"""Programs carried in arguments: sed scripts, awk programs, and inline code for interpreters
(``python -c``, ``perl -e``, ``node -e`` ...). Parsed or scanned for what they do besides
reading; a grade is only ever raised, code is never decided to be harmless.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from core.policy.command_args import DANGEROUS, NORMAL, Effects, scan
from core.policy.command_tables import INLINE_CODE

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
            elif s[i] == "[" and regex:  # a bracket expression may hold the delimiter: s/[/]/x/
                j = i + 1
                j += s[j : j + 1] == "^"
                j += s[j : j + 1] == "]"
                while j < n and s[j] != "]":
                    close = s.find(s[j + 1] + "]", j + 2) if s[j] == "[" and s[j + 1 : j + 2] in (":", ".", "=") else -1
                    j = close + 2 if close > 0 else j + 1  # [:space:] and the like
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
    e.programs = list(scripts)
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

_AWK_VALUES = frozenset(
    {"-F", "-v", "-f", "-e", "-i", "-l", "-E", "-W", "--field-separator", "--assign", "--file", "--source", "--include", "--load", "--exec"}
)
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
        elif c == "/" and (
            not out
            or out[-1][0] == "nl"
            or out[-1][0] == "op"
            and out[-1][1] not in (")", "]", "$", "++", "--")
            or out[-1] in (("word", w) for w in _REGEX_AFTER_WORDS)
        ):
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
        elif kind == "word" and value.startswith("@") and nxt == ("op", "("):
            e.flag(DANGEROUS, f"awk calls a function by name ({value}), which cannot be checked")
        elif kind == "str" and value.startswith("/inet"):
            e.network = True
            e.flag(NORMAL, "awk opens a network connection")
        elif kind == "str" and value and len(e.reads) < 50:
            e.reads.append(value)  # getline < "file": counted when such a file exists
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
    e.programs = list(programs)
    e.reads += [o for o in operands if not re.match(r"^[A-Za-z_]\w*=", o)]
    if not sandbox:
        for text in programs:
            found = awk_program(text)
            e.flag(found.level, found.reason)
            e.writes += found.writes
            e.reads += found.reads
            e.network |= found.network
    return e


# --- inline code -------------------------------------------------------------------------


def _source(pattern: str, flags: int = 0) -> tuple[str, int]:
    return pattern, flags


# The inline-code patterns are compiled on first use (several milliseconds at import otherwise):
# most sessions never grade inline code.
_CODE_RULE_SOURCES = (
    (
        "starts other programs",
        _source(
            r"subprocess|\bos\s*\.\s*(system|popen\w*|exec\w*|spawn\w*|posix_spawn\w*|fork\w*|kill\w*|startfile)|\bpty\s*\.\s*spawn"
            r"|commands\.getoutput|child_process|\bexec(Sync|File\w*)?\s*\(|\bspawn(Sync)?\s*\(|shell_exec|passthru|proc_open|\bpopen"
            r"|pcntl_\w+|\bIO\s*\.\s*popen|Open3|%x[({\[<|!]|\bqx\s*[({\[<|/!'\"]|\bos\.execute|\bio\.popen|(?<![\w.])system2?\s*\("
            r"|\bKernel\s*\.|Runtime\.getRuntime|ProcessBuilder|Deno\s*\.\s*(run|Command)|Bun\s*\.\s*(spawn\w*|\$)|Start-Process"
            r"|Invoke-Expression|Invoke-Item|\biex\b|do\s+shell\s+script|\bkill\s*\(|multiprocessing|webbrowser|\bshell\s*\(",
            re.I,
        ),
    ),
    (
        "deletes or moves files",
        _source(
            r"rmtree|remove_tree|\brm_rf?\b|\bunlink\w*|\brmdir\w*|removedirs|\bfs\s*\.\s*(rm|rmdir|unlink|truncate)\w*|\brmSync|rimraf"
            r"|\b(File|Dir|FileUtils)\s*\.\s*(delete|unlink|rm\w*|remove\w*|rmdir|mv|move)|\bfile\.remove|\bos\s*\.\s*(remove|rename|replace|truncate|chmod|chown)"
            r"|\bshutil\s*\.\s*(move|rmtree|chown)|Remove-Item|Move-Item|Clear-Content|Deno\s*\.\s*(remove|rename|truncate)|\brm\s+-\w|\btruncate\s*\("
        ),
    ),
    (
        "runs code it builds",
        _source(
            r"(?<![\w.])(exec|eval|execfile)\s*\(|__import__|import_module|importlib\s*\.\s*(util|machinery)|(?<![\w.])compile\s*\("
            r"|__builtins__|\bbuiltins\b|__dict__|__globals__|__subclasses__|__getattribute__|__code__|\bsys\s*\.\s*modules"
            r"|\bgetattr\s*\(\s*(os|posix|nt|shutil|subprocess|builtins|__builtins__|sys|pty|ctypes)\b|\bimport\s+(os|posix|nt|shutil|subprocess|pty|ctypes)\s+as\b"
            r"|\bfrom\s+(os|posix|nt|shutil)\s+import\s+[^;\n]*\b(system|popen|exec\w*|spawn\w*|remove|unlink|rmdir|removedirs|rename|replace|fork\w*|kill\w*|rmtree|move|\*)"
            r"|ctypes|cffi|\bmarshal\s*\.\s*loads?|\bpickle\s*\.\s*loads?|\bnew\s+Function|(?<![\w.])Function\s*\(|\bvm\s*\.\s*run"
            r"|process\s*\.\s*(binding|dlopen)|\bdlopen|(?<![\w.])load(string)?\s*\(|\bdofile\b|\b(instance|class|module)_eval"
            r"|\brequire\s*\(\s*[^'\"`\s)]|\bimport\s*\(\s*[^'\"`\s)]"
        ),
    ),
)
# Languages whose calls need no parentheses (``system "cmd"``, backquotes run a shell).
_BARE_CALLS = re.compile(r"`|(?<![\w.$@%>:-])(system|exec|spawn|fork|unlink|rmdir|kill|syscall)\b")
_BARE_LANGUAGES = {"perl", "ruby", "php", "lua", "tcl", "PowerShell", "AppleScript", "R"}
_POWERSHELL = re.compile(r"(^|[\s;|(&{])(rm|del|erase|rd|ri|rmdir|mv|move|mi|iwr|irm|curl|wget|sc|set-content|out-file|&)(\s|$)", re.I)
_CODE_NETWORK_SOURCE = _source(
    r"urllib|\brequests\s*\.|http\.client|httplib|\bhttpx\b|aiohttp|\bsocket\b|urlopen|(?<![\w.])fetch\s*\(|\bhttps?\s*\.\s*(get|request)"
    r"|\bnet\s*\.\s*(connect|createConnection|Socket)|XMLHttpRequest|WebSocket|Net::HTTP|open-uri|LWP|HTTP::Tiny|IO::Socket|curl_"
    r"|fsockopen|Invoke-WebRequest|Invoke-RestMethod|\biwr\b|\birm\b|download\.file|smtplib|ftplib|paramiko|Deno\s*\.\s*connect"
    r"|Bun\s*\.\s*connect|['\"`](https?|ftp|wss?)://",
    re.I,
)
_CODE_WRITE_SOURCES = (
    # open("p", "w") in python, ruby, lua (io.open), php (fopen)
    _source(r"""\b(?:open|fopen)\s*\(\s*[rbfu]*(['"])(?P<path>[^'"\n]+)\1\s*,\s*(?:mode\s*=\s*)?[rbfu]*(['"])(?P<mode>[^'"\n]*)\3"""),
    # Path("p").write_text(...)
    _source(
        r"""\bPath\s*\(\s*[rbfu]*(['"])(?P<path>[^'"\n]+)\1\s*\)\s*\.\s*(?P<mode>write_text|write_bytes|touch|mkdir|symlink_to|hardlink_to|chmod|open\s*\(\s*['"][wax+])"""
    ),
    # writeFileSync("p", ...), File.write("p"), file_put_contents("p")
    _source(
        r"""\b(?P<mode>writeFile\w*|appendFile\w*|createWriteStream|mkdirSync|writeTextFile|Bun\.write|file_put_contents|File\.write|IO\.write|writeLines|saveRDS)\s*\(\s*(['"`])(?P<path>[^'"`\n]+)\2"""
    ),
    # perl: open(my $f, '>', 'p') or open(F, ">p")
    _source(
        r"""\bopen\s*\(?\s*(?:my\s+)?[$\w]+\s*,\s*(['"])\s*(?P<mode>\+?>{1,2}|\+<)\s*(?P<path>[^'"\n]*)\1(?:\s*,\s*(['"])(?P<path3>[^'"\n]+)\4)?"""
    ),
)


@functools.cache
def _code_rules() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((what, re.compile(*source)) for what, source in _CODE_RULE_SOURCES)


@functools.cache
def _code_network() -> re.Pattern[str]:
    return re.compile(*_CODE_NETWORK_SOURCE)


@functools.cache
def _code_writes() -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(*source) for source in _CODE_WRITE_SOURCES)


_STRING = re.compile(r"""(['"])([^'"\s\\]{1,300})\1""")


def code_writes(code: str) -> list[str]:
    """Files that inline code visibly opens for writing (string literals only)."""
    found = []
    writes = _code_writes()
    for pattern in writes:
        for m in pattern.finditer(code):
            mode = m.group("mode")
            if pattern is writes[0] and not set(mode) & set("wax+"):
                continue
            path = m.group("path") or (m.groupdict().get("path3") or "")
            if path:
                found.append(path)
    return found


def inline_effects(lang: str, code: str) -> Effects:
    """Inline code is at least normal; what it visibly does can make it dangerous."""
    e = Effects()
    e.flag(NORMAL, f"it runs inline {lang} code")
    for what, pattern in _code_rules():
        if pattern.search(code):
            e.flag(DANGEROUS, f"it runs inline {lang} code that {what}")
    if lang in _BARE_LANGUAGES and _BARE_CALLS.search(code):
        e.flag(DANGEROUS, f"it runs inline {lang} code that starts other programs or deletes files")
    if lang == "PowerShell" and _POWERSHELL.search(code):
        e.flag(DANGEROUS, "it runs inline PowerShell code that runs, deletes or writes things")
    e.network = bool(_code_network().search(code))
    e.writes = code_writes(code)
    e.reads = [m.group(2) for m in _STRING.finditer(code) if "://" not in m.group(2)][:50]  # counted when they exist
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
_ATTACHED_LETTERS = {"perl": "IMmxCdDVF", "ruby": "IxCFEKW0T", "python": "WX"}


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
        j = 0
        while (j := j + 1) < len(a):
            option, rest = "-" + a[j], a[j + 1 :]
            if lang == "perl" and a[j] in "l0":  # -l and -0 take only digits (-0 also xHEX): -lane is -l -a -n -e
                number = re.match(r"x[0-9A-Fa-f]+|[0-7]*" if a[j] == "0" else r"[0-7]*", rest)
                j += len(number.group()) if number else 0
                continue
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
            if option in _SEPARATE_VALUES.get(lang, ()):
                i += not rest  # its value is the rest of the word, or the next word
                break
            if a[j] in _ATTACHED_LETTERS.get(lang, ""):
                break
        if found.codes and lang == "python":
            found.operands = args[i:]
            break
    return found
