"""The package's layout holds: no import circle (read from the code, lazy imports included), every module
imports, no module outside the Trainer reads its private state, and the old import paths still work with a
warning that names the new one."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import import_graph  # noqa: E402


def test_the_graph_walker_finds_a_planted_circle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_graph.circles(edges) == [["a", "b", "c"]]
    assert import_graph.circles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_circle():
    edges, lazy = import_graph.graph()
    assert len(edges) > 80                                   # it read the package
    assert import_graph.circles(edges) == []


def test_core_is_a_leaf():
    edges, _ = import_graph.graph()
    for mod, targets in edges.items():
        if mod.startswith("rlnb.core"):
            assert {t for t in targets if not t.startswith("rlnb.core")} == set(), mod


def test_every_module_imports_in_a_fresh_interpreter():
    names = [m for m in import_graph.modules() if not m.endswith("__main__")]
    code = ("import importlib, warnings\nwarnings.simplefilter('ignore')\n"
            f"for m in {names!r}:\n    importlib.import_module(m)\nprint('ok', len({names!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr[-2000:]


PRIVATE = re.compile(r"\b(t|trainer|self\.trainer)\._[a-z]")


def test_no_module_outside_the_trainer_reads_its_private_state():
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
            for folder in ("run", "viz", "cli") for p in (ROOT / "rlnb" / folder).rglob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if PRIVATE.search(line)]
    assert hits == []
    assert PRIVATE.search("t._start_weights") and not PRIVATE.search("t.state()")


@pytest.mark.parametrize("old, new", [("rlnb.forward", "rlnb.models.forward"), ("rlnb.evaluate", "rlnb.run.evaluate"),
                                      ("rlnb.scaling", "rlnb.studies.scaling")])
def test_old_import_paths_work_for_one_release_and_say_where_to_go(old, new):
    code = (f"import warnings\nwith warnings.catch_warnings(record=True) as w:\n    warnings.simplefilter('always')\n"
            f"    import {old} as m\nimport {new} as n\nassert m is n\nprint(w[0].message)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-1500:]
    assert new in out.stdout and "moved" in out.stdout
