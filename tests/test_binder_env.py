"""binder/ and environment.yml resolve to what pyproject.toml declares: the same torch pin as the Makefile's
TORCH_SPEC, no lower bound below pyproject's, every runtime dependency present in binder/requirements.txt (Binder
installs rlnb itself with --no-deps, so a dependency missing there is missing on Binder), and rlnb installed."""

import re
from pathlib import Path

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
LOWER = (">=", "==", "~=", "===", ">")
# mybinder.org: Linux x86_64 with binder/runtime.txt's Python (markers are evaluated there, not on this machine)
BINDER_PLATFORM = {"platform_system": "Linux", "platform_machine": "x86_64", "sys_platform": "linux"}


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def torch_spec() -> SpecifierSet:
    m = re.search(r"^TORCH_SPEC\s*\?=\s*torch(\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert m, "Makefile: expected a line 'TORCH_SPEC ?= torch==<version>'"
    return SpecifierSet(m.group(1))


def lower_bound(spec: SpecifierSet) -> Version | None:
    """The highest version a specifier's lower-bounding clauses name (None when nothing bounds it below)."""
    bounds = [Version(s.version.removesuffix(".*")) for s in spec if s.operator in LOWER]
    return max(bounds, default=None)


def requirements(lines: list[str], where: str) -> list[Requirement]:
    """The requirements in pip-style ``lines``: comments, blank lines and pip options (-e, --extra-index-url)
    skipped; an unparsable line is an error naming ``where``."""
    out = []
    for i, line in enumerate(lines, 1):
        text = line.split(" #", 1)[0].strip()
        if not text or text.startswith(("#", "-")):
            continue
        try:
            out.append(Requirement(text))
        except InvalidRequirement as e:
            raise ValueError(f"{where}:{i}: expected a requirement, got {text!r} ({e})") from None
    return out


def inconsistencies(lines: list[str], where: str, declared: list[str], torch: SpecifierSet,
                    complete: bool, env: dict) -> list[str]:
    """What in ``lines`` disagrees with pyproject's ``declared`` dependencies and the ``torch`` pin; with
    ``complete``, also each declared dependency (whose marker holds in ``env``) that ``lines`` leave out."""
    wanted = {canonicalize_name(r.name): r for r in map(Requirement, declared)}
    found, out = {}, []
    for req in requirements(lines, where):
        name = canonicalize_name(req.name)
        found[name] = req
        if name == "torch":
            if req.specifier != torch:
                out.append(f"{where}: torch{req.specifier} differs from the Makefile's TORCH_SPEC torch{torch}")
            continue
        if name not in wanted:
            out.append(f"{where}: {req.name} is not a dependency in pyproject.toml")
            continue
        mine, theirs = lower_bound(req.specifier), lower_bound(wanted[name].specifier)
        if theirs is not None and (mine is None or mine < theirs):
            out.append(f"{where}: {req.name}{req.specifier} allows versions below pyproject's {wanted[name]}")
    if complete:
        out += [f"{where}: {r} from pyproject.toml is missing" for name, r in wanted.items()
                if name not in found and (r.marker is None or r.marker.evaluate(env))]
    return out


def binder_env() -> dict:
    version = (ROOT / "binder" / "runtime.txt").read_text().strip().removeprefix("python-")
    return {**default_environment(), **BINDER_PLATFORM, "python_version": version, "python_full_version": version + ".0"}


def test_the_checker_finds_a_wrong_pin_a_low_bound_a_stranger_and_a_missing_dependency():
    bad = ["# a comment", "--extra-index-url https://example.invalid", "torch==2.12.0", "numpy>=1.20",
           "plotly", "requests>=2", "triton>=3.0; platform_system == 'Linux'"]
    declared = ["torch>=2.4", "numpy>=1.24", "plotly>=5.22", "tqdm>=4.66", "triton>=3.0; platform_system == 'Linux'",
                "pywin32>=300; platform_system == 'Windows'"]
    assert inconsistencies(bad, "bad.txt", declared, SpecifierSet("==2.13.0"), True, binder_env()) == [
        "bad.txt: torch==2.12.0 differs from the Makefile's TORCH_SPEC torch==2.13.0",
        "bad.txt: numpy>=1.20 allows versions below pyproject's numpy>=1.24",
        "bad.txt: plotly allows versions below pyproject's plotly>=5.22",
        "bad.txt: requests is not a dependency in pyproject.toml",
        "bad.txt: tqdm>=4.66 from pyproject.toml is missing"]  # pywin32's marker does not hold on Binder
    with pytest.raises(ValueError, match=r"bad\.txt:1: expected a requirement, got 'torch =='"):
        requirements(["torch =="], "bad.txt")


def test_binder_requirements_agree_with_pyproject_and_the_makefile():
    lines = (ROOT / "binder" / "requirements.txt").read_text().splitlines()
    declared = pyproject()["project"]["dependencies"]
    assert inconsistencies(lines, "binder/requirements.txt", declared, torch_spec(), True, binder_env()) == []
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines, "binder: expected the CPU torch index"


def test_environment_yml_agrees_with_pyproject_and_installs_rlnb():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    (pip,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    declared = pyproject()["project"]["dependencies"]
    assert inconsistencies(pip, "environment.yml", declared, torch_spec(), False, binder_env()) == []
    assert any(re.fullmatch(r"-e \.(\[[\w,]+\])?", line) for line in pip), "environment.yml: expected '-e .[...]'"
    python = next(d for d in conda if d.startswith("python="))
    assert SpecifierSet(pyproject()["project"]["requires-python"]).contains(python.removeprefix("python=") + ".0")


def test_binder_python_satisfies_requires_python_and_postbuild_installs_rlnb():
    version = binder_env()["python_full_version"]
    assert SpecifierSet(pyproject()["project"]["requires-python"]).contains(version), version
    lines = [ln.strip() for ln in (ROOT / "binder" / "postBuild").read_text().splitlines()]
    installs = [ln for ln in lines if re.fullmatch(r"pip install( --no-deps)? (-e )?\.(\[[\w,]+\])?", ln)]
    assert installs, "binder/postBuild: expected a line 'pip install --no-deps -e .'"


def test_the_doctor_recommends_the_pinned_torch():
    from rlnb.cli.doctor import TORCH_PIN

    assert torch_spec() == SpecifierSet(f"=={TORCH_PIN}"), "rlnb/cli/doctor.py: TORCH_PIN differs from TORCH_SPEC"


@pytest.mark.parametrize("source", ["binder/requirements.txt", "environment.yml"])
def test_pip_resolves_the_pins_together_with_this_environment(source, tmp_path):
    """Beyond comparing pins line by line: pip's resolver, with no index, finds one set of versions that satisfies
    every line at once (and their own dependencies) among what this environment, the one the tests pass in, holds."""
    import subprocess
    import sys

    if source.endswith(".yml"):
        (pip,) = [d["pip"] for d in yaml.safe_load((ROOT / source).read_text())["dependencies"] if isinstance(d, dict)]
        lines = [ln for ln in pip if not ln.startswith(("-e ", "--"))]  # rlnb itself: this working tree
    else:
        lines = [ln for ln in (ROOT / source).read_text().splitlines() if not ln.startswith("--")]
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "-r", str(reqs)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, f"{source}: pip cannot resolve it here:\n{out.stderr[-2000:]}"
    assert "Would install" not in out.stdout, f"{source}: needs versions this environment lacks:\n{out.stdout[-800:]}"
