"""The room's wheelhouse: the course's requirements resolve for each platform learners bring (scripts/wheelhouse.py).

Resolving asks the package registry (as `make install` does); without it these tests skip, saying so. What each
platform needs is checked on the resolved pins: the pinned CPU torch, no Triton where Triton has no wheels, no CUDA
packages on Linux (the CPU build needs none), and Intel Macs refused with PyTorch's own reason.
"""

import importlib.util
import re
import shutil
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("wheelhouse", ROOT / "scripts" / "wheelhouse.py")
wheelhouse = importlib.util.module_from_spec(spec)
sys.modules["wheelhouse"] = wheelhouse  # its dataclasses look their module up
spec.loader.exec_module(wheelhouse)


def registry_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


needs_registry = pytest.mark.skipif(
    shutil.which("uv", path=str(Path(sys.executable).parent)) is None and shutil.which("uv") is None
    or not registry_reachable(), reason="needs uv (the dev extra) and the package registry")


def names(pins: list[str]) -> dict[str, str]:
    return {ln.split("==")[0].lower(): ln.split("==")[1].split(";")[0].strip() for ln in pins if "==" in ln}


@needs_registry
@pytest.mark.parametrize("platform", ["linux-x86_64", "windows-x86_64", "macos-arm64"])
def test_the_course_resolves_for_each_platform_with_its_own_wheels(platform):
    pins, why = wheelhouse.resolve(wheelhouse.PLATFORMS[platform], "3.11")
    assert pins, f"{platform}: {why}"
    got = names(pins)
    assert got["torch"] == wheelhouse.TORCH.split("==")[1]
    for package in ("transformers", "ipywidgets", "anywidget", "plotly", "jupyterlab", "trl", "peft"):
        assert package in got, f"{platform}: {package} missing from the resolve"
    assert ("triton" in got) == (platform == "linux-x86_64")  # Triton ships Linux wheels only
    assert not [n for n in got if n.startswith(wheelhouse.CUDA_ONLY)], f"{platform}: CUDA packages in a CPU course"


@needs_registry
def test_intel_macs_are_refused_with_the_reason():
    pins, why = wheelhouse.resolve(wheelhouse.PLATFORMS["macos-x86_64"], "3.11")
    assert pins == [] and "torch" in why and "macosx" in why


def test_the_pins_agree_with_the_makefile():
    make = (ROOT / "Makefile").read_text()
    assert re.search(rf"^TORCH_SPEC\s*\?=\s*{re.escape(wheelhouse.TORCH)}$", make, re.M)
    assert re.search(rf"^COURSE_EXTRAS\s*\?=\s*{','.join(wheelhouse.EXTRAS)}$", make, re.M)
