"""The shape of the code at a git revision, side by side with another: modules, their sizes, the
loop, import cycles, type-checker escapes and fixed sleeps in tests.

    .venv/bin/python benchmarks/code_shape.py [BEFORE_REV] [AFTER_REV]

Defaults: the revision before the core was split into rooms, and HEAD. The table goes to stderr,
the figures as JSON to stdout. Each revision is read
from git (``git archive``), never from the working tree, so the figures are reproducible.
"""

from __future__ import annotations

import ast
import io
import json
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "toolsets", "surface_support", "hermes_acp", "hermes_mcp", "hermes_gateway", "hermes_cli")
LOOP_METHODS = {"run_turn", "_turn", "_run", "_step", "_execute", "_request", "step", "request", "execute", "run"}
FIXED_SLEEP = re.compile(r"(?:time|asyncio)\.sleep\(\s*[0-9][0-9_.]*\s*\)")
DEFAULT_BEFORE = "b346977"


def extract(rev: str, into: Path) -> None:
    data = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")


def modules(tree: Path) -> list[Path]:
    return sorted(p for pkg in PACKAGES if (tree / pkg).is_dir() for p in (tree / pkg).rglob("*.py"))


def loop_lines(tree: Path) -> int:
    for candidate in (tree / "core/agent/loop.py", tree / "core/agent.py"):
        if candidate.is_file():
            parsed = ast.parse(candidate.read_text())
            for node in parsed.body:
                if isinstance(node, ast.ClassDef) and node.name == "Agent":
                    return sum(
                        (item.end_lineno or item.lineno) - item.lineno + 1
                        for item in node.body
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name in LOOP_METHODS
                    )
    return 0


def import_cycles(tree: Path) -> list[list[str]]:
    """Groups of modules that import each other (TYPE_CHECKING imports included), largest first."""
    names = {}
    for path in modules(tree):
        parts = list(path.relative_to(tree).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    edges: dict[str, set[str]] = {name: set() for name in names}
    for name, path in names.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # ``from pkg import mod`` depends on pkg.mod; ``from pkg import name`` on pkg.
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in names else node.module for a in node.names]
            for target in targets:
                while target and target not in names:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    return _strongly_connected(edges)


def _strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))

    for name in sorted(edges):
        if name not in index:
            visit(name)
    return sorted(found, key=len, reverse=True)


def bare_sleeps(source: str) -> int:
    """Sleeps of a fixed length that no loop repeats: a wait on time, not on a fact."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return 0
    count = 0

    def visit(node: ast.AST, in_loop: bool) -> None:
        nonlocal count
        if isinstance(node, ast.Call) and not in_loop and FIXED_SLEEP.fullmatch(ast.unparse(node)):
            count += 1
        looping = in_loop or isinstance(node, ast.While | ast.For | ast.AsyncFor)
        for child in ast.iter_child_nodes(node):
            visit(child, looping)

    visit(tree, False)
    return count


def shape(rev: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        extract(rev, tree)
        files = modules(tree)
        sizes = sorted(len(p.read_text().splitlines()) for p in files)
        core_files = [p for p in files if p.relative_to(tree).parts[0] == "core"]
        ignores = sum(p.read_text().count("type: ignore") for p in files)
        tests = sorted((tree / "tests").rglob("*.py"))
        sleeps = sum(len(FIXED_SLEEP.findall(p.read_text())) for p in tests)
        bare = sum(bare_sleeps(p.read_text()) for p in tests)
        cycles = import_cycles(tree)
        return {
            "modules": len(files),
            "core modules": len(core_files),
            "core modules at top level": sum(1 for p in core_files if p.parent == tree / "core"),
            "median lines": statistics.median(sizes),
            "max lines": sizes[-1],
            "modules over 500 lines": sum(1 for s in sizes if s > 500),
            "loop lines (Agent's turn methods)": loop_lines(tree),
            "import cycles (module groups)": len(cycles),
            "modules in cycles": sum(len(c) for c in cycles),
            "# type: ignore": ignores,
            "fixed sleeps in tests": sleeps,
            "  of them outside a polling loop": bare,
        }


def main() -> None:
    before = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_BEFORE
    after = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    a, b = shape(before), shape(after)
    width = max(map(len, a))
    print(f"{'':{width}}  {before:>10}  {after:>10}", file=sys.stderr)
    for key in a:
        print(f"{key:{width}}  {a[key]!s:>10}  {b[key]!s:>10}", file=sys.stderr)
    print(json.dumps({"before": {"rev": before, **a}, "after": {"rev": after, **b}}))


if __name__ == "__main__":
    main()
