"""Wheels for the whole room, from one machine: the course's requirements resolved and downloaded per platform.

    python scripts/wheelhouse.py --resolve-only                       # can each platform install the course?
    python scripts/wheelhouse.py --platforms windows-x86_64 macos-arm64 --python 3.11 3.12

Each (platform, Python) gets its own folder, ``wheelhouse/<platform>-py<version>/``, named for the laptops it
serves. The requirements are resolved for the target itself (uv evaluates the environment markers of the target,
which ``pip download --platform`` does not: it would ask Triton for Windows), then every pinned wheel is
downloaded with pip for the registry's own platform tags, wheels only (a learner offline cannot build an sdist).
rlnb's own wheel is pure Python: built once, copied into each folder. On Linux the CPU build of torch comes from
``--torch-index`` (PyTorch's CPU index), and CUDA's packages, which only PyPI's CUDA build needs, are left out.
Learners install with the README's line, pointing at their platform's folder.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"  # the Makefile's TORCH_SPEC (tests/test_wheelhouse.py keeps them equal)
EXTRAS = ("triton", "trl", "peft")  # the Makefile's COURSE_EXTRAS
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CUDA_ONLY = ("nvidia-", "cuda-")  # what PyPI's Linux torch pulls in for CUDA; the CPU build needs none of it


@dataclass(frozen=True)
class Platform:
    name: str
    uv: str            # uv's --python-platform
    tags: tuple        # pip's --platform tags (pip adds the older compatible ones)
    env: tuple = ()    # extra environment for the resolve (macOS: the oldest macOS the wheels must run on)
    cpu_torch: bool = False


PLATFORMS = {p.name: p for p in (
    Platform("linux-x86_64", "x86_64-manylinux_2_28", ("manylinux_2_28_x86_64",), cpu_torch=True),
    Platform("linux-aarch64", "aarch64-manylinux_2_28", ("manylinux_2_28_aarch64",), cpu_torch=True),
    Platform("windows-x86_64", "x86_64-pc-windows-msvc", ("win_amd64",)),
    Platform("macos-arm64", "aarch64-apple-darwin", ("macosx_14_0_arm64",), (("MACOSX_DEPLOYMENT_TARGET", "14.0"),)),
    Platform("macos-x86_64", "x86_64-apple-darwin", ("macosx_13_0_x86_64",), (("MACOSX_DEPLOYMENT_TARGET", "13.0"),)),
)}


def uv() -> str:
    path = shutil.which("uv", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if path is None:
        raise SystemExit("wheelhouse: needs uv to resolve for other platforms: pip install uv")
    return path


def resolve(p: Platform, python: str) -> tuple[list[str], str]:
    """(the pinned requirements for platform ``p`` and Python ``python``, or [], uv's reason when none exists)."""
    with tempfile.TemporaryDirectory() as tmp:
        pin = Path(tmp) / "torch.txt"
        pin.write_text(TORCH + "\n")
        cmd = [uv(), "pip", "compile", str(REPO / "pyproject.toml"), str(pin), *(f"--extra={e}" for e in EXTRAS),
               "--python-platform", p.uv, "--python-version", python, "--only-binary", ":all:",
               "--no-header", "--no-annotate", "--quiet", "--no-emit-package", "rlnb"]
        out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **dict(p.env)})
    if out.returncode != 0:
        return [], " ".join(out.stderr.split())
    lines = [ln.strip() for ln in out.stdout.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if p.cpu_torch:
        lines = [ln for ln in lines if not ln.lower().startswith(CUDA_ONLY)]
    return lines, ""


def download(p: Platform, python: str, pins: list[str], into: Path, torch_index: str) -> None:
    into.mkdir(parents=True, exist_ok=True)
    tags = [f"--platform={t}" for t in p.tags]
    base = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", *tags,
            f"--python-version={python}", "--implementation=cp", "-d", str(into)]
    rest = pins
    if p.cpu_torch:  # the CPU build, from its own index, before the rest
        torch = [ln for ln in pins if ln.lower().startswith("torch==")]
        subprocess.run([*base, "--index-url", torch_index, *torch], check=True)
        rest = [ln for ln in pins if ln not in torch]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(rest) + "\n")
    try:
        subprocess.run([*base, "-r", f.name], check=True)
    finally:
        os.unlink(f.name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platforms", nargs="+", default=list(PLATFORMS), choices=list(PLATFORMS))
    ap.add_argument("--python", nargs="+", default=["3.11"], help="Python versions, e.g. 3.11 3.12")
    ap.add_argument("--out", default=str(REPO / "wheelhouse"))
    ap.add_argument("--torch-index", default=CPU_INDEX, help="where Linux's CPU torch comes from")
    ap.add_argument("--resolve-only", action="store_true", help="check each platform can install; download nothing")
    args = ap.parse_args(argv)
    own = None
    failed = []
    for name in args.platforms:
        for python in args.python:
            pins, why = resolve(PLATFORMS[name], python)
            if not pins:
                failed.append(name)
                print(f"{name} py{python}: cannot install the course: {why}")
                continue
            print(f"{name} py{python}: {len(pins)} wheels resolved")
            if args.resolve_only:
                continue
            into = Path(args.out) / f"{name}-py{python}"
            download(PLATFORMS[name], python, pins, into, args.torch_index)
            if own is None:  # rlnb's own wheel: pure Python, one for every folder
                own = Path(tempfile.mkdtemp())
                subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(own), str(REPO)],
                               check=True)
            for whl in own.glob("rlnb-*.whl"):
                shutil.copy2(whl, into)
            print(f"  -> {into}: {len(list(into.glob('*.whl')))} wheels")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
