"""The import graph of the project's own modules (forensics/ and parsers/), built with `ast`:

- no cycle, counting module-level imports AND imports inside function bodies (a function-level
  import still ties the two modules together: the cycle only waits for the call). Imports under
  `if TYPE_CHECKING:` are not edges (they never run);
- a function-level import of a project module says why it is lazy, in a comment on its line or
  on the comment lines just above its block of imports (typically: a heavy dependency such as
  matplotlib or DuckDB loads only when needed, or the CLI's start-up stays fast);
- `parsers` imports nothing from `forensics` (DESIGN §1).

A failure names the cycle as module -> module (path:line) steps.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("forensics", "parsers")


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    path: str
    line: int
    lazy: bool  # inside a function body


def module_files(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    out = {}
    for pkg in packages:
        for p in sorted((root / pkg).rglob("*.py")):
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(body: list[ast.stmt], lazy: bool = False):  # noqa: ANN202 - yields (node, lazy)
    """Every import statement reachable when the module runs or its functions are called,
    except those under `if TYPE_CHECKING:`."""
    for node in body:
        if isinstance(node, ast.If) and _is_type_checking(node):
            yield from _imports(node.orelse, lazy)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, lazy
            continue
        inner = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            sub = getattr(node, field, None)
            if isinstance(sub, list):
                stmts = [s for s in sub if isinstance(s, ast.stmt)]
                stmts += [s for h in sub if isinstance(h, (ast.ExceptHandler, ast.match_case)) for s in h.body]
                yield from _imports(stmts, inner)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool, known: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = module.split(".") if is_pkg else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
        # `from pkg import name`: the submodule pkg.name if there is one, else pkg itself
        names = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
    out = []
    for n in names:
        while n and n not in known:  # `import a.b.c` of a name inside a module
            n = n.rpartition(".")[0]
        if n and n != module:
            out.append(n)
    return out


def import_edges(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[Edge]:
    mods = module_files(root, packages)
    known = set(mods)
    edges = []
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        rel = str(path.relative_to(root))
        for node, lazy in _imports(tree.body):
            for dst in dict.fromkeys(_targets(node, mod, path.name == "__init__.py", known)):
                edges.append(Edge(mod, dst, rel, node.lineno, lazy))
    return edges


def find_cycles(edges: list[Edge]) -> list[list[Edge]]:
    """One cycle (as its edges) per strongly connected component of more than one module."""
    graph: dict[str, dict[str, Edge]] = {}
    for e in sorted(edges, key=lambda e: (e.src, e.dst, e.lazy, e.line)):
        graph.setdefault(e.src, {}).setdefault(e.dst, e)
        graph.setdefault(e.dst, {})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan; the graph has a few dozen nodes
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for comp in comps:  # a shortest cycle through the component's first module (breadth first)
        members, start = set(comp), comp[0]
        prev: dict[str, Edge] = {}
        frontier = [start]
        while frontier and start not in prev:
            nxt = []
            for v in frontier:
                for w, e in sorted(graph[v].items()):
                    if w in members and w not in prev:
                        prev[w] = e
                        nxt.append(w)
            frontier = nxt
        path, v = [], start
        while True:
            e = prev[v]
            path.append(e)
            v = e.src
            if v == start:
                break
        cycles.append(path[::-1])
    return cycles


def describe(cycle: list[Edge]) -> str:
    return " -> ".join([cycle[0].src] + [f"{e.dst} ({e.path}:{e.line}{', in a function' if e.lazy else ''})"
                                         for e in cycle])


def _comment_lines(path: Path) -> set[int]:
    toks = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    return {t.start[0] for t in toks if t.type == tokenize.COMMENT}


def unexplained_lazy_imports(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """path:line of each function-level import of a project module with no comment saying why."""
    edges = [e for e in import_edges(root, packages) if e.lazy]
    out = []
    for rel in sorted({e.path for e in edges}):
        path = root / rel
        lines = path.read_text(encoding="utf-8").splitlines()
        comments = _comment_lines(path)
        import_lines: set[int] = set()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                import_lines |= set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        for line in sorted({e.line for e in edges if e.path == rel}):
            k, ok = line, line in comments
            while not ok and k > 1:  # the block of imports, comments and blank lines just above
                k -= 1
                if k in comments:
                    ok = True
                elif k not in import_lines and lines[k - 1].strip():
                    break
            if not ok:
                out.append(f"{rel}:{line}: {lines[line - 1].strip()}")
    return out


# ------------------------------------------------------------------------------------ tests


def test_no_import_cycle_among_the_projects_modules() -> None:
    cycles = find_cycles(import_edges(ROOT))
    assert not cycles, "import cycle(s):\n" + "\n".join(describe(c) for c in cycles)


def test_function_level_imports_of_project_modules_say_why() -> None:
    missing = unexplained_lazy_imports(ROOT)
    assert not missing, ("a function-level import of a project module needs a comment saying why it is lazy "
                         "(or move it to the top of the module):\n" + "\n".join(missing))


def test_parsers_import_nothing_from_forensics() -> None:
    bad = [f"{e.path}:{e.line} imports {e.dst}" for e in import_edges(ROOT)
           if e.src.split(".")[0] == "parsers" and e.dst.split(".")[0] == "forensics"]
    assert not bad, "\n".join(bad)


def test_the_graph_is_read_from_real_imports() -> None:
    """Known edges of this tree, of each form the builder reads (plain, from-submodule, lazy)."""
    got = {(e.src, e.dst, e.lazy) for e in import_edges(ROOT)}
    assert ("forensics.analysis", "forensics.ingest", False) in got
    assert ("forensics.ingest", "parsers.records", False) in got
    assert ("forensics.outputs", "forensics.plots", True) in got  # `from forensics import html_report, plots`
    assert ("forensics.analysis", "forensics.store", False) not in got  # only under TYPE_CHECKING


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def test_a_cycle_through_a_function_level_and_a_relative_import_is_found_and_named(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "def f():\n    from . import c  # lazy: only to show the form\n    return c\n",
        "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import b\nimport pkg.a\n",
        "pkg/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n",
    })
    cycles = find_cycles(import_edges(tmp_path, ("pkg",)))
    assert [describe(c) for c in cycles] == [
        "pkg.a -> pkg.b (pkg/a.py:1) -> pkg.c (pkg/b.py:2, in a function) -> pkg.a (pkg/c.py:4)"]
    assert unexplained_lazy_imports(tmp_path, ("pkg",)) == []


def test_a_lazy_import_without_a_comment_is_named(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "import json\n\n\ndef f():\n    x = 1\n    from pkg.b import g\n    return g(x)\n\n\n"
                    "def h():\n    # matplotlib loads only here\n    import os\n\n    from pkg import b\n    return b, os\n",
        "pkg/b.py": "def g(x):\n    return x\n",
    })
    assert find_cycles(import_edges(tmp_path, ("pkg",))) == []
    assert unexplained_lazy_imports(tmp_path, ("pkg",)) == ["pkg/a.py:6: from pkg.b import g"]
