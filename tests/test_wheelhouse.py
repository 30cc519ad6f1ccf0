"""The offline install path: `make wheelhouse` collects CPU torch, every dependency and rlnb's own wheel; the README
shows the one command that installs from it. The mechanism is tested with the network closed: rlnb's wheel (built
here, from a copy of the sources) and one third-party wheel in a folder, installed into a fresh venv."""

import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# every request pip might make goes to a closed port, and pip is told not to use an index at all
OFFLINE = {"PIP_NO_INDEX": "1", "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
           "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def make_dry_run(*variables: str) -> list[str]:
    out = subprocess.run(["make", "-n", "wheelhouse", *variables], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def make_variable(name: str) -> str:
    m = re.search(rf"^{name}\s*\?=\s*(\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert m, f"Makefile: expected a line '{name} ?= ...'"
    return m.group(1)


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL", "PIP_FIND_LINKS")}
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env={**env, **OFFLINE}, **kw)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_wheelhouse_downloads_the_pinned_cpu_torch_and_builds_the_course():
    spec, extras = make_variable("TORCH_SPEC"), make_variable("COURSE_EXTRAS")
    lines = make_dry_run("TORCH_INDEX=https://download.pytorch.org/whl/cpu")
    download = [ln for ln in lines if " -m pip download " in ln]
    wheel = [ln for ln in lines if " -m pip wheel " in ln]
    assert len(download) == 1 and f'"{spec}"' in download[0] and "--index-url https://download.pytorch.org/whl/cpu" in download[0]
    assert len(wheel) == 1 and f'"{spec}" ".[{extras}]"' in wheel[0] and "--find-links wheelhouse" in wheel[0]
    assert "-d wheelhouse" in download[0] and "-w wheelhouse" in wheel[0]
    # without TORCH_INDEX, pip's own search path (as `make install` does)
    assert "--index-url" not in next(ln for ln in make_dry_run() if " -m pip download " in ln)


def test_the_wheelhouse_is_git_ignored_and_the_readme_command_installs_the_course_extras():
    out = subprocess.run(["git", "check-ignore", "-q", "wheelhouse/torch-2.13.0-cp311-none-any.whl"], cwd=ROOT)
    assert out.returncode == 0, ".gitignore: expected wheelhouse/ to be ignored"
    section = (ROOT / "README.md").read_text().split("## Offline workshop", 1)
    assert len(section) == 2, "README: expected a section '## Offline workshop'"
    command = f'pip install --no-index --find-links wheelhouse "rlnb[{make_variable("COURSE_EXTRAS")}]"'
    assert command in section[1].split("\n## ", 1)[0], f"README's offline section: expected `{command}`"


def build_rlnb_wheel(into: Path, tmp: Path) -> Path:
    """rlnb's wheel, built from a copy of its sources (the build writes build/ and *.egg-info next to them)."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "rlnb", src / "rlnb", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", into, src])
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = into.glob("rlnb-*.whl")
    return wheel


@pytest.mark.slow
def test_rlnb_installs_from_a_wheelhouse_into_a_fresh_venv_with_the_network_closed(tmp_path):
    house = tmp_path / "wheelhouse"
    house.mkdir()
    wheel = build_rlnb_wheel(house, tmp_path)
    # the third-party wheel of the subset: setuptools, the one wheel every CPython ships (ensurepip's bundle)
    import ensurepip

    bundled = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("setuptools-*.whl"))
    if bundled:
        shutil.copy(bundled[-1], house)
    venv.create(tmp_path / "venv", with_pip=True)
    py = tmp_path / "venv" / "bin" / "python"

    # with its dependencies, the subset cannot satisfy rlnb: pip says which is missing instead of downloading it
    out = run([py, "-m", "pip", "install", "--no-index", "--find-links", house, "rlnb"], timeout=300)
    assert out.returncode != 0 and "No matching distribution found for" in out.stderr, out.stderr[-2000:]

    wanted = ["rlnb"] + (["setuptools"] if bundled else [])
    out = run([py, "-m", "pip", "install", "--no-index", "--find-links", house, "--no-deps", *wanted], timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    show = run([py, "-m", "pip", "show", "-f", "rlnb"], timeout=120).stdout
    assert re.search(r"^Version: 0\.1\.0$", show, re.M) and "Requires: " in show and "torch" in show
    files = set(show.split("Files:", 1)[1].split())
    # the code, the console script and the package data (the embedded model) all come from the wheel
    assert {"rlnb/cli/doctor.py", "rlnb/models/default/model.safetensors", "../../../bin/rlnb"} <= files, sorted(files)[:20]
    probe = ("import importlib.metadata as m, pathlib; d = m.distribution('rlnb'); "
             "print(d.version, pathlib.Path(d.locate_file('rlnb/models/default/model.safetensors')).stat().st_size)")
    out = run([py, "-c", probe], timeout=120, cwd=tmp_path)
    version, size = out.stdout.split()
    assert out.returncode == 0 and version == "0.1.0" and int(size) > 1_000_000, out.stderr[-2000:]
    assert wheel.name.startswith("rlnb-0.1.0-py3-none-any")
    if bundled:
        assert run([py, "-m", "pip", "show", "setuptools"], timeout=120).returncode == 0
