"""The package's import graph, read from the code: every ``rlnb`` import in every module, at module level or
inside a function, as an arrow from the importing module to the module it names. Prints the circles (strongly
connected groups of modules) and the imports that sit inside functions; exits 1 if there is a circle.

    python scripts/import_graph.py            # circles, then a count of function-level imports
    python scripts/import_graph.py --edges    # every arrow, one per line

``from rlnb.x import y`` is an arrow to ``rlnb.x.y`` when ``y`` is a module, else to ``rlnb.x``. Importing a
submodule also runs its package's ``__init__``; that implicit step is not an arrow (as in every import linter).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "rlnb"


def modules() -> dict[str, Path]:
    """``{dotted name: file}`` of every module of the package."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _target(name: str, known: dict) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(name: str, path: Path, known: dict) -> list[tuple[str, int, bool]]:
    """``(imported module, line, inside a function)`` for each rlnb import of module ``name``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nested = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f) if n is not f}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            if t == "rlnb" or t.startswith("rlnb."):
                mod = _target(t, known)
                if mod and mod != name:
                    found.append((mod, node.lineno, id(node) in nested))
    return found


def graph() -> tuple[dict[str, set[str]], list[tuple[str, str, int]]]:
    known = modules()
    edges, lazy = {m: set() for m in known}, []
    for name, path in known.items():
        for mod, line, inside in imports(name, path, known):
            edges[name].add(mod)
            if inside:
                lazy.append((name, mod, line))
    return edges, lazy


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), and modules that import themselves."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main(argv: list[str]) -> int:
    edges, lazy = graph()
    if "--edges" in argv:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"{a} -> {b}")
    found = circles(edges)
    for group in found:
        print(f"circle of {len(group)}: " + ", ".join(group))
    print(f"{sum(map(len, edges.values()))} imports between {len(edges)} modules; {len(found)} circles; "
          f"{len(lazy)} rlnb imports inside functions")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
