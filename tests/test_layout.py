"""The package's layout holds: no import circle (read from the code, lazy imports included), every module
imports, no module outside the Trainer reads its private state, the root holds at most ten files, and the training
path holds no module-level mutable state."""

import re
import subprocess
import sys
from pathlib import Path

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


OLD_PATHS = re.compile(r"\brlnb\.(forward|evaluate|scaling)\b|from rlnb import (forward|evaluate|scaling)\b")


def test_the_root_holds_at_most_ten_files_and_nothing_uses_the_old_shims():
    root = sorted(p.name for p in (ROOT / "rlnb").glob("*.py"))
    assert "loop.py" in root and len(root) <= 10, root
    assert not {"forward.py", "evaluate.py", "scaling.py"} & set(root)
    users = [f"{p.relative_to(ROOT)}:{i}" for folder in ("rlnb", "notebooks", "scripts", "docs", "tests")
             for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".ipynb", ".md") and p.name != "test_layout.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if OLD_PATHS.search(line)]
    assert users == []
    assert OLD_PATHS.search("import rlnb.forward") and not OLD_PATHS.search("import rlnb.models.forward")


# The training path: what a Trainer's step runs. Module-level containers there must be constants, registries filled
# at import, or one of these (module.name -> why it may change at run time).
TRAINING_PATH = ("rlnb.loop", "rlnb.batch", "rlnb.recipe", "rlnb.recipes", "rlnb.logprobs", "rlnb.core", "rlnb.stages",
                 "rlnb.models", "rlnb.kernels", "rlnb.algos", "rlnb.run", "rlnb.tasks", "rlnb.lab")
MAY_CHANGE = {
    "rlnb.logprobs._POOLS": "worker thread pools, made once per size: a resource cache, no setting",
    "rlnb.run.owner._OWNERS": "which lab holds which trainer (weak keys): the one owner registry, never read by a forward",
}


def training_path_containers() -> dict[str, object]:
    import collections
    import contextvars
    import importlib
    import weakref

    mutable = (dict, list, set, bytearray, collections.deque, weakref.WeakKeyDictionary, contextvars.ContextVar)
    out = {}
    for name in import_graph.modules():
        if name.startswith(TRAINING_PATH) and not name.endswith("__main__"):
            for k, v in vars(importlib.import_module(name)).items():
                if isinstance(v, mutable) and not k.startswith("__"):
                    out[f"{name}.{k}"] = v
    return out


def test_no_module_level_mutable_state_on_the_training_path():
    """Run steps with every forward option switched (explicitly and by ``with`` blocks): no module-level container
    on the training path changes, and the one context variable is back to its default."""
    from contextvars import ContextVar

    import rlnb
    from rlnb.core.forward_options import ForwardOptions, current
    from rlnb.models.buckets import padding

    found = training_path_containers()
    assert "rlnb.core.forward_options._CURRENT" in found and "rlnb.algos.ADVANTAGES" in found  # the scan sees them
    for old in ("rlnb.kernels._GLOBAL", "rlnb.models.buckets._MODE", "rlnb.models.forward._LM_HEAD"):
        assert old not in found
    before = {k: _copy(v) for k, v in found.items() if k not in MAY_CHANGE and not isinstance(v, ContextVar)}
    t = rlnb.Trainer.tiny("grpo", prompts_per_step=2, num_generations=2, max_new_tokens=6)
    t.step()
    t.set_forward_options(backend="torch", lm_head="reference", padding="padded")
    with padding("bucketed"):
        t.step()
    changed = [k for k, v in before.items() if found[k] != v]
    assert changed == []
    assert current() == ForwardOptions()


def _copy(v):
    import copy

    try:
        return copy.deepcopy(v)     # containers of numbers and strings: a change inside shows too
    except TypeError:
        return copy.copy(v)         # holds something uncopyable (a lock): compare its entries


def test_no_global_statement_on_the_training_path():
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in (ROOT / "rlnb").rglob("*.py")
            if p.relative_to(ROOT / "rlnb").parts[0] not in ("viz", "cli", "bench", "studies", "export")
            for i, line in enumerate(p.read_text().splitlines(), 1) if re.match(r"\s+global\s", line)]
    assert hits == []
