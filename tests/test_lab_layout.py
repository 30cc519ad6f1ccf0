"""The lab's room: ``rlnb/lab`` imports no widget library, no class inherits from a mixin, who drives a trainer is
recorded in one registry, and run state is written only by the Trainer and the run driver."""

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import import_graph  # noqa: E402

WIDGETS = ("ipywidgets", "plotly", "anywidget", "rlnb.viz")


def sources(folder: str = "") -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "rlnb" / folder).rglob("*.py")}


def test_the_lab_engine_imports_no_widget_library():
    edges, _ = import_graph.graph()
    lab = {m: t for m, t in edges.items() if m.startswith("rlnb.lab")}
    assert "rlnb.lab.loop" in lab and "rlnb.lab.fork" in lab["rlnb.lab.loop"]       # the graph read the package
    assert {m: sorted(t for t in ts if t.startswith(WIDGETS)) for m, ts in lab.items()} == {m: [] for m in lab}
    third_party = [f"{path}: {name}" for path, text in sources("lab").items()
                   for node in ast.walk(ast.parse(text)) if isinstance(node, (ast.Import, ast.ImportFrom))
                   for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])
                   if name.split(".")[0] in ("ipywidgets", "plotly", "anywidget")]
    assert third_party == []


def test_no_class_in_rlnb_inherits_from_a_mixin_or_a_lab_part():
    """Composition: the lab holds its parts (``Timeline``, ``Forks``, ``StagedStep``) instead of inheriting them."""
    parts = {"Timeline", "Forks", "StagedStep", "LabLoop", "BranchControls", "Lab"}
    found = []
    for path, text in sources().items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                found += [f"{path}: {node.name}({b})" for b in bases if b in parts or "Mixin" in b
                          or b.startswith("Lab")]
    assert found == []


def test_one_registry_says_who_drives_a_trainer():
    registries = [f"{path}: {line.strip()}" for path, text in sources().items() for line in text.splitlines()
                  if re.match(r"^_?[A-Z_]+\s*(:[^=]*)?=\s*weakref\.WeakKeyDictionary", line)]
    assert registries == ["rlnb/run/owner.py: _OWNERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()"
                          "  # trainer -> Claim"]


# a write of run state: an assignment to one of the trainer's RunState attributes, or a change of its history
RUN_STATE_WRITE = re.compile(r"\b(t|trainer|self\.trainer|loop\.trainer)\.(step_count|run_target|logged_knobs|"
                             r"_start_weights|history|prompts\.drawn)(\[:\])?\s*(=|\+=)[^=]"
                             r"|\b(t|trainer|self\.trainer)\.history\.(append|extend|clear|pop)")
WRITERS = {"rlnb/loop.py", "rlnb/run/driver.py"}  # the Trainer itself, and run()'s target


def test_run_state_is_written_only_by_the_trainer_and_the_run_driver():
    hits = [f"{path}:{i}: {line.strip()}" for path, text in sources().items() if path not in WRITERS
            for i, line in enumerate(text.splitlines(), 1) if RUN_STATE_WRITE.search(line)]
    assert hits == []
    assert RUN_STATE_WRITE.search("    trainer.run_target = None") and RUN_STATE_WRITE.search("t.logged_knobs = ()")
    assert not RUN_STATE_WRITE.search("trainer.run_target == None")


def private_imports(path: str, text: str) -> set[str]:
    """``path: module.name`` for each ``from rlnb... import _name`` in ``text``."""
    return {f"{path}: {node.module}.{a.name}" for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rlnb")
            for a in node.names if a.name.startswith("_") and not a.name.startswith("__")}


def test_no_module_imports_another_files_private_helper():
    assert private_imports("x.py", "from rlnb.viz.backend import LiveFigure, _helper\n") == {
        "x.py: rlnb.viz.backend._helper"}                      # the scan sees a private import where there is one
    found = set().union(*(private_imports(path, text) for path, text in sources().items()))
    assert found == set()
