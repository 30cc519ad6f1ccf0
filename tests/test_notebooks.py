"""Notebook hygiene: committed without outputs or widget state; no top-level functions or classes outside
``exercise`` cells (notebooks import the library, they never redefine it); every notebook uses rlnb."""

import ast
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def problems(nb: dict) -> list[str]:
    """Everything wrong with a notebook's committed form, as readable strings (empty list: clean)."""
    found = []
    if "widgets" in nb.get("metadata", {}):
        found.append("notebook metadata holds widget state")
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        if cell.get("outputs"):
            found.append(f"cell {i} has outputs")
        if cell.get("execution_count") is not None:
            found.append(f"cell {i} has an execution count")
        if "exercise" in cell.get("metadata", {}).get("tags", []):
            continue
        src = "".join(cell.get("source", []))
        lines = [ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))]  # magics aren't Python
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError as e:
            found.append(f"cell {i} is not valid Python: {e}")
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.append(f"cell {i} defines {node.name!r} outside an exercise cell")
    return found


def _nb(cells, metadata=None):
    return {"cells": cells, "metadata": metadata or {}}


def _code(src, outputs=(), tags=()):
    return {"cell_type": "code", "source": src, "outputs": list(outputs), "execution_count": None,
            "metadata": {"tags": list(tags)}}


def test_the_checker_catches_each_kind_of_problem():
    assert problems(_nb([_code("import rlnb\nx = 1")])) == []
    assert problems(_nb([_code("def f():\n    pass")])) == ["cell 0 defines 'f' outside an exercise cell"]
    assert problems(_nb([_code("class C: pass", tags=["exercise"])])) == []
    assert problems(_nb([_code("x = 1", outputs=[{"output_type": "stream"}])])) == ["cell 0 has outputs"]
    assert problems(_nb([], {"widgets": {}})) == ["notebook metadata holds widget state"]
    assert problems(_nb([_code("%matplotlib inline\nimport rlnb")])) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_clean(path):
    nb = json.loads(path.read_text())
    assert problems(nb) == []
    assert any("import rlnb" in "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


SOLUTION = re.compile(r"<details>.*?```python\n(.*?)```.*?</details>", re.S)
CHECK_CALL = re.compile(r"rlnb\.check\.(\w+)\((\w+)")


def exercises(nb: dict) -> list[tuple[str, str, str]]:
    """(checker name, function name, solution code) for each exercise cell followed by a solution."""
    cells, out = nb["cells"], []
    for i, cell in enumerate(cells):
        if "exercise" not in cell.get("metadata", {}).get("tags", []):
            continue
        call = CHECK_CALL.search("".join(cell["source"]))
        following = "".join("".join(c["source"]) for c in cells[i + 1 : i + 3] if c["cell_type"] == "markdown")
        sol = SOLUTION.search(following)
        assert call and sol, f"exercise cell {i} needs an rlnb.check call and a <details> solution after it"
        out.append((call.group(1), call.group(2), sol.group(1)))
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_collapsed_solution_passes_its_checker(path):
    import rlnb.check

    found = exercises(json.loads(path.read_text()))
    for checker, fn_name, code in found:
        namespace: dict = {}
        exec(compile(code, f"{path.name}:solution", "exec"), namespace)  # our own notebook text, not model output
        assert bool(getattr(rlnb.check, checker)(namespace[fn_name])) is True
