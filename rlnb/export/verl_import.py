"""Import verl 0.9.1's pure parts (its config files, ``core_algos``, its config dataclasses) without its stack.

verl's modules import ray, tensordict, vllm, ... at the top although the loss, advantage and config code never
calls them. ``import_verl`` serves each such package that cannot be imported here with an empty stand-in while
verl's modules load, then takes the stand-ins away again (so that ``find_spec("wandb")`` elsewhere still says
"absent"). Used by ``scripts/compare_verl.py`` and ``tests/test_export_verl*.py``; a full verl install
(``pip install 'rlnb[verl]'``) needs none of it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from unittest import mock

# verl's third-party imports that the functions we call never use
STUBBED = ("ray", "tensordict", "codetiming", "hydra", "wandb", "peft", "liger_kernel", "flash_attn", "vllm",
           "sglang", "torchdata", "pylatexenc", "mathruler", "qwen_vl_utils", "pybind11", "dill", "accelerate",
           "datasets", "pyarrow", "omegaconf", "orjson")
MODULES = ("verl.trainer.ppo.core_algos", "verl.trainer.config", "verl.workers.config", "verl.utils.config")


class _Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, name, path, target=None):
        return importlib.machinery.ModuleSpec(name, self, is_package=True) if name.split(".")[0] in self.names else None

    def create_module(self, spec):
        m = mock.MagicMock()
        m.__path__, m.__spec__, m.__name__ = [], spec, spec.name
        return m

    def exec_module(self, module):
        pass


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def import_verl(verl_src: str | Path | None = None, *, stub: str = "missing", modules=MODULES) -> dict:
    """``{module name: module}`` for ``modules`` of verl (from ``verl_src``, an unpacked wheel, else the installed
    one). ``stub="missing"`` stands in for the packages of ``STUBBED`` that are not installed (the real
    omegaconf and hydra then load: the config code needs them); ``stub="all"`` for every one (the tensor
    functions alone, nothing else needed). Raises ImportError when verl itself is not found."""
    if stub not in ("missing", "all"):
        raise ValueError(f"stub: expected 'missing' or 'all', got {stub!r}")
    if verl_src is not None:
        sys.path.insert(0, str(verl_src))
    if not _importable("verl"):
        raise ImportError("verl is not importable: pip install --no-deps verl==0.9.1 (make install does), or pass "
                          "its unpacked wheel")
    names = [n for n in STUBBED if stub == "all" or not _importable(n)]
    finder = _Stubs(names)
    sys.meta_path.insert(0, finder)
    try:
        return {m: importlib.import_module(m) for m in modules}
    finally:
        sys.meta_path.remove(finder)
        for key in [k for k in sys.modules if k.split(".")[0] in finder.names]:
            if isinstance(sys.modules[key], mock.MagicMock):
                del sys.modules[key]  # verl keeps its references; nobody else sees a stand-in


def verl_config_dir() -> Path:
    """verl's Hydra config folder (``verl/trainer/config``, ppo_trainer.yaml and its defaults)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("verl is not importable: pip install --no-deps verl==0.9.1")
    return Path(next(iter(spec.submodule_search_locations))) / "trainer" / "config"
