"""``rlnb doctor``: a pre-flight check a teacher sends learners before a workshop.

Each check is a pure function of facts (``check_*``) that returns a :class:`Result`; the facts come from small
probe functions (``probe_*``) that tests replace to fake a laptop (an old Python, a CUDA build of torch without a
GPU, widgets missing). One line per check; exit code 0 when the laptop is ready, 1 when any check found a problem.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from rlnb import notebook
from rlnb.core.waits import spinning

TORCH_PIN = "2.13.0"  # the Makefile's TORCH_SPEC and binder's pin (tests/test_binder_env.py keeps them equal)
CPU_WHEEL = f"pip install torch=={TORCH_PIN} --index-url https://download.pytorch.org/whl/cpu"
# The minimum versions the course declares in pyproject.toml; a widget older than these does not render.
MINIMUM = {"ipywidgets": "8.1", "anywidget": "0.9", "plotly": "5.22", "jupyterlab": "4.2"}
# The JupyterLab extensions that draw the widgets: without them a widget cell prints its repr, not a slider.
LAB_EXTENSIONS = {"ipywidgets": "@jupyter-widgets/jupyterlab-manager", "anywidget": "anywidget"}
RUNTIMES = Path(__file__).resolve().parents[2] / notebook.RUNTIMES  # a clone's; probe_runtimes also looks in cwd
SLOW_CHAPTER_S = 15 * 60  # a chapter predicted to take longer than this will not fit a workshop slot


@dataclass(frozen=True)
class Result:
    """One line of the report. ``status``: "ok", "note" (worth knowing, does not fail) or "problem"."""

    name: str
    status: str
    what: str
    fix: str = ""

    def line(self) -> str:
        if self.status == "problem":
            return f"PROBLEM  {self.name}: {self.what}. Fix: {self.fix}"
        tail = f" ({self.fix})" if self.fix else ""
        return f"{self.status:7s}  {self.name}: {self.what}{tail}"


# --- probes: the only functions that look at the machine (tests replace them) ---------------------------
def probe_python() -> tuple[int, int, int]:
    return tuple(sys.version_info[:3])


def probe_torch() -> dict | None:
    """torch's version, the CUDA version it was built for (None for a CPU build), whether a GPU is usable and
    its intra-op thread count; None when torch does not import."""
    try:
        import torch
    except ImportError:
        return None
    return {"version": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.is_available(),
            "threads": torch.get_num_threads()}


def probe_cpu() -> dict:
    # os.getloadavg does not exist on Windows; a missing load average is reported as unknown, not as a problem
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"cores": os.cpu_count() or 1, "load": load, "wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
            "spin": os.environ.get("GOMP_SPINCOUNT", "")}


def probe_version(package: str) -> str | None:
    """The installed version of ``package``, None when it is missing or does not import."""
    if importlib.util.find_spec(package) is None:
        return None
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def probe_lab_extensions() -> list[Path]:
    """The folders JupyterLab loads prebuilt extensions from: the Jupyter data path and this environment's
    (``jupyter labextension list`` gives the same answer but starts a server-side app: seconds)."""
    folders = [Path(sys.prefix) / "share" / "jupyter" / "labextensions"]
    try:
        from jupyter_core.paths import jupyter_path

        folders += [Path(p) for p in jupyter_path("labextensions")]
    except ImportError:
        pass
    return list(dict.fromkeys(folders))


def probe_runtimes() -> dict:
    """docs/results/runtimes.json of the course folder: next to the package (a clone's editable install), else in the
    current folder (rlnb installed from a wheelhouse, the doctor run in the copied course folder); {} in neither."""
    path = notebook.course_path(notebook.RUNTIMES)
    return read_runtimes(path) if path.is_file() else {}


def read_runtimes(path: Path) -> dict:
    """``path``'s chapters, checked: ``{chapter: {"seconds": s >= 0, "step_seconds": s > 0 or absent, ...}}``.
    ``ValueError`` naming the file and what is wrong (a cut-short copy, another file's shape)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON ({getattr(e, 'msg', e)}); the file is cut short or corrupt") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds {type(data).__name__}, expected an object chapter -> measurement")
    for name, entry in data.items():
        if not isinstance(entry, dict) or not _seconds(entry.get("seconds")):
            raise ValueError(f"{path}: chapter {name!r} has {str(entry)[:80]}, expected an object with "
                             '"seconds" (a number >= 0)')
        if entry.get("step_seconds") is not None and not _seconds(entry["step_seconds"], positive=True):
            raise ValueError(f"{path}: chapter {name!r} has step_seconds={entry['step_seconds']!r}, expected a "
                             "number > 0 or none")
    return data


def _seconds(v, positive: bool = False) -> bool:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return ok and (v > 0 if positive else v >= 0)


def step_seconds(steps: int = 5, **size) -> float:
    """The median seconds of ``steps`` GRPO steps on the embedded default model and the add task, as the
    README's first lines and chapter 00 run it. The median, so the first step's one-off costs do not count."""
    from rlnb.core.runtime import median_step_seconds
    from rlnb.loop import Trainer

    return median_step_seconds(Trainer.tiny("grpo", task="add", seed=0, **size), steps)


# --- checks: pure functions of the probes' facts --------------------------------------------------------
def check_python(version: tuple[int, int, int]) -> Result:
    text = ".".join(map(str, version))
    if tuple(version[:2]) < (3, 10):
        return Result("python", "problem", f"{text} is older than 3.10, which rlnb needs",
                      "install Python 3.11 (python.org or your package manager) and make a new venv with it")
    return Result("python", "ok", text)


def check_torch(facts: dict | None) -> Result:
    if facts is None:
        return Result("torch", "problem", "torch does not import", CPU_WHEEL)
    build = f"CUDA {facts['cuda']} build" if facts["cuda"] else "CPU build"
    if facts["cuda"] and not facts["gpu"]:
        # A CUDA wheel works on a CPU, but it is gigabytes larger and slower to import; the course needs none.
        return Result("torch", "problem", f"{facts['version']} is a {build} and this machine has no usable GPU",
                      CPU_WHEEL)
    if not facts["version"].startswith(TORCH_PIN):
        return Result("torch", "note", f"{facts['version']} ({build}); the course is tested with {TORCH_PIN}",
                      f"to match it: {CPU_WHEEL}")
    return Result("torch", "ok", f"{facts['version']} ({build}{', GPU usable' if facts['gpu'] else ''})")


def check_cpu(cpu: dict) -> Result:
    """The cores and the OpenMP wait policy torch will start with (known before torch loads)."""
    policy = cpu["wait_policy"] or "unset"
    if spinning({"OMP_WAIT_POLICY": "", "GOMP_SPINCOUNT": cpu.get("spin", "")}):  # whatever the policy says
        return Result("cpu", "note", f"{cpu['cores']} cores; OMP_WAIT_POLICY={policy}, GOMP_SPINCOUNT={cpu['spin']}",
                      "spinning waits: faster when nothing else runs, slower beside a browser; unset GOMP_SPINCOUNT "
                      "on a laptop")
    return Result("cpu", "ok", f"{cpu['cores']} cores; OMP_WAIT_POLICY={policy}")


def check_threads(threads: int, cpu: dict) -> Result:
    cores, load = cpu["cores"], cpu["load"]
    if threads > cores:
        return Result("threads", "problem", f"torch uses {threads} threads on {cores} cores (they compete)",
                      f"export OMP_NUM_THREADS={cores} before starting JupyterLab")
    what = f"torch uses {threads} of {cores} cores; load average " + ("unknown" if load is None else f"{load:.1f}")
    if load is not None and load > cores:
        # Measured on a 2-core machine at load 9: a step took 40-50 s with spinning OpenMP threads, 5-7 s with
        # OMP_WAIT_POLICY=PASSIVE. A busy moment is not a broken laptop, so this is a note, not a problem.
        fix = "other programs are using the CPU: close them"
        if (cpu["wait_policy"].upper() != "PASSIVE" or cpu.get("spin")) and threads > 1:
            fix += ("; and export OMP_WAIT_POLICY=PASSIVE (make lab does) without GOMP_SPINCOUNT before starting "
                    "JupyterLab")
        return Result("threads", "note", what + ", busy: steps will be slower", fix)
    return Result("threads", "ok", what)


def _at_least(version: str | None, minimum: str) -> bool:
    try:
        return version is not None and Version(version) >= Version(minimum)
    except InvalidVersion:
        return False


def check_package(name: str, version: str | None) -> Result:
    minimum = MINIMUM[name]
    if version is None:
        return Result(name, "problem", "not installed", f'pip install "{name}>={minimum}"')
    if not _at_least(version, minimum):
        return Result(name, "problem", f"{version} is older than {minimum}: its widgets do not render",
                      f'pip install -U "{name}>={minimum}"')
    return Result(name, "ok", version)


def check_lab_extension(package: str, folders: list[Path]) -> Result:
    """The prebuilt JupyterLab extension of ``package`` in one of ``folders``."""
    ext = LAB_EXTENSIONS[package]
    found = [f / ext for f in folders if (f / ext / "package.json").is_file()]
    name = f"lab extension {ext}"
    if not found:
        return Result(name, "problem", "not found, so JupyterLab shows widgets as text",
                      f'pip install "{package}>={MINIMUM[package]}" into the environment JupyterLab runs from, '
                      "then restart JupyterLab")
    return Result(name, "ok", str(found[0]))


def check_step_time(seconds: float, steps: int) -> Result:
    return Result("step time", "ok", f"{seconds:.2f} s per GRPO step on the default model (median of {steps})")


def predict(runtimes: dict, seconds: float | None) -> list[Result]:
    """Each chapter's predicted full-mode runtime: the measured seconds scaled by this laptop's step time over
    the step time recorded with the measurement; where none was recorded, the measured seconds as they are."""
    out = []
    for name, entry in sorted(runtimes.items()):
        guess, basis = predicted_seconds(entry, seconds)
        status = "ok" if guess <= SLOW_CHAPTER_S else "problem"
        fix = "run it with RLNB_SMOKE=1 (seconds), or show it from the projector" if status == "problem" else ""
        out.append(Result(f"chapter {name}", status, f"about {guess / 60:.1f} min in full mode ({basis})", fix))
    return out


def predicted_seconds(entry: dict, seconds: float | None) -> tuple[float, str]:
    """(one chapter's predicted full-mode seconds, how it was found) from its runtimes.json ``entry``."""
    ref = entry.get("step_seconds")
    if seconds is not None and ref:
        return entry["seconds"] * seconds / ref, "scaled by step time"
    return entry["seconds"], f"as measured on {entry.get('machine', 'the measuring machine')}"


def chapter_results(runtimes: dict, seconds: float | None) -> list[Result]:
    if not runtimes:
        return [Result("chapters", "note", "no runtime results to predict from",
                       f"run rlnb doctor in the course folder (the one holding {notebook.RUNTIMES})")]
    out = predict(runtimes, seconds)
    if not any(e.get("step_seconds") for e in runtimes.values()):
        why = ("no step time was recorded with the measurements" if seconds is not None
               else "--no-timing: this laptop's step time is unknown")
        out.insert(0, Result("chapters", "note", f"{why}; the predictions assume a machine like the measured one"))
    return out


def run_checks(timing_steps: int | None = 5, emit=None, **size) -> list[Result]:
    """Every check, in the order a learner fixes them; ``timing_steps`` None skips the timing. ``emit`` (if given)
    gets each result as soon as it is known, and a line before the timing: a slow laptop shows progress at once."""
    results: list[Result] = []

    def add(*found: Result) -> None:
        for r in found:
            results.append(r)
            if emit is not None:
                emit(r.line())

    cpu = probe_cpu()
    add(check_python(probe_python()), check_cpu(cpu))
    if emit is not None:  # importing torch takes seconds (a minute on a busy laptop): say so first
        emit("loading torch ...")
    torch_facts = probe_torch()
    add(check_torch(torch_facts))
    if torch_facts is not None:
        add(check_threads(torch_facts["threads"], cpu))
    add(*(check_package(p, probe_version(p)) for p in MINIMUM))
    folders = probe_lab_extensions()
    add(*(check_lab_extension(p, folders) for p in LAB_EXTENSIONS))
    try:  # read before the timing: a broken results file is named at once, not after the steps
        runtimes, broken = probe_runtimes(), None
    except ValueError as e:
        runtimes, broken = {}, Result("chapters", "problem", str(e),
                                      f"restore {notebook.RUNTIMES} from the course folder (git checkout it)")
    seconds = None
    # a broken torch would make the timing fail with a traceback instead of the line that says how to fix it
    if timing_steps and torch_facts is not None:
        if emit is not None:
            emit(f"timing {timing_steps} GRPO steps on the default model (OMP_WAIT_POLICY="
                 f"{os.environ.get('OMP_WAIT_POLICY', 'unset')}, as the runtimes were measured) ...")
        seconds = step_seconds(timing_steps, **size)
        add(check_step_time(seconds, timing_steps))
    add(*([broken] if broken else chapter_results(runtimes, seconds)))
    return results


def report(results: list[Result], *, printed: bool = False) -> int:
    """Print one line per result (unless already ``printed``) and a verdict; 0 when nothing is a problem, else 1."""
    if not printed:
        for r in results:
            print(r.line())
    problems = sum(r.status == "problem" for r in results)
    print("ready for the workshop" if not problems else f"{problems} problem(s): fix them and run rlnb doctor again")
    return 1 if problems else 0


def cmd_doctor(args) -> int:
    say = lambda text: print(text, flush=True)  # noqa: E731
    return report(run_checks(None if args.no_timing else args.steps, emit=say), printed=True)
