"""`rlnb doctor` on faked laptops: each broken fact (an old Python, a CUDA build of torch without a GPU, widgets
missing or too old, too many threads) ends in exit 1 with a line naming the problem and its fix; a healthy one
exits 0. Then the real checks on this machine, and the real timing at a size that takes seconds."""

import json

import pytest

from rlnb.cli import doctor, main

HEALTHY_TORCH = {"version": "2.13.0+cpu", "cuda": None, "gpu": False, "threads": 2}


@pytest.fixture
def healthy(monkeypatch, tmp_path):
    """Every probe replaced by a ready laptop's answer; a test then breaks one fact."""
    labext = tmp_path / "labextensions"
    for ext in doctor.LAB_EXTENSIONS.values():
        (labext / ext).mkdir(parents=True)
        (labext / ext / "package.json").write_text("{}")
    versions = {"ipywidgets": "8.1.9", "anywidget": "0.11.0", "plotly": "6.3.0", "jupyterlab": "4.4.0"}
    runtimes = {"00_start_here": {"seconds": 240.0, "machine": "2 cores, AMD EPYC"}}
    monkeypatch.setattr(doctor, "probe_python", lambda: (3, 11, 7))
    monkeypatch.setattr(doctor, "probe_torch", lambda: dict(HEALTHY_TORCH))
    monkeypatch.setattr(doctor, "probe_cpu", lambda: {"cores": 4, "load": 0.5, "wait_policy": ""})
    monkeypatch.setattr(doctor, "probe_version", versions.get)
    monkeypatch.setattr(doctor, "probe_lab_extensions", lambda: [tmp_path / "elsewhere", labext])
    monkeypatch.setattr(doctor, "probe_runtimes", lambda: runtimes)
    return versions


def doctor_says(capsys, *flags):
    code = main(["doctor", "--no-timing", *flags])
    return code, capsys.readouterr().out.splitlines()


def problems(lines):
    return [ln for ln in lines if ln.startswith("PROBLEM")]


def test_a_healthy_laptop_is_ready(healthy, capsys):
    code, lines = doctor_says(capsys)
    assert code == 0 and problems(lines) == [], lines
    assert lines[-1] == "ready for the workshop"
    assert "ok       chapter 00_start_here: about 4.0 min in full mode (as measured on 2 cores, AMD EPYC)" in lines


def test_a_cuda_build_on_a_machine_without_a_gpu_is_a_problem_with_the_cpu_wheel_as_fix(healthy, monkeypatch, capsys):
    monkeypatch.setattr(doctor, "probe_torch", lambda: dict(HEALTHY_TORCH, version="2.13.0+cu128", cuda="12.8"))
    code, lines = doctor_says(capsys)
    assert code == 1
    assert problems(lines) == ["PROBLEM  torch: 2.13.0+cu128 is a CUDA 12.8 build and this machine has no usable "
                               "GPU. Fix: pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"]
    assert lines[-1].startswith("1 problem(s)")


def test_a_cuda_build_with_a_gpu_is_fine(healthy, monkeypatch, capsys):
    monkeypatch.setattr(doctor, "probe_torch", lambda: dict(HEALTHY_TORCH, cuda="12.8", gpu=True))
    code, lines = doctor_says(capsys)
    assert code == 0 and "ok       torch: 2.13.0+cpu (CUDA 12.8 build, GPU usable)" in lines


def test_missing_widgets_are_named_with_their_fix(healthy, monkeypatch, capsys):
    healthy["ipywidgets"] = None  # the package is gone, and so are the extensions that draw widgets
    monkeypatch.setattr(doctor, "probe_lab_extensions", lambda: [])
    code, lines = doctor_says(capsys)
    assert code == 1
    assert problems(lines) == [
        'PROBLEM  ipywidgets: not installed. Fix: pip install "ipywidgets>=8.1"',
        "PROBLEM  lab extension @jupyter-widgets/jupyterlab-manager: not found, so JupyterLab shows widgets as text. "
        'Fix: pip install "ipywidgets>=8.1" into the environment JupyterLab runs from, then restart JupyterLab',
        "PROBLEM  lab extension anywidget: not found, so JupyterLab shows widgets as text. "
        'Fix: pip install "anywidget>=0.9" into the environment JupyterLab runs from, then restart JupyterLab']


def test_ipywidgets_7_does_not_render_the_course_widgets(healthy, capsys):
    healthy["ipywidgets"] = "7.8.1"
    code, lines = doctor_says(capsys)
    assert code == 1 and problems(lines) == [
        'PROBLEM  ipywidgets: 7.8.1 is older than 8.1: its widgets do not render. Fix: pip install -U "ipywidgets>=8.1"']


def test_an_old_python_is_a_problem(healthy, monkeypatch, capsys):
    monkeypatch.setattr(doctor, "probe_python", lambda: (3, 9, 18))
    code, lines = doctor_says(capsys)
    assert code == 1 and len(problems(lines)) == 1
    assert problems(lines)[0].startswith("PROBLEM  python: 3.9.18 is older than 3.10, which rlnb needs. Fix: install")


def test_torch_missing_is_a_problem_and_skips_the_timing(healthy, monkeypatch, capsys):
    monkeypatch.setattr(doctor, "probe_torch", lambda: None)
    monkeypatch.setattr(doctor, "step_seconds", lambda *a, **k: pytest.fail("timed without torch"))
    code = main(["doctor", "--steps", "1"])
    out = capsys.readouterr().out
    assert code == 1 and "PROBLEM  torch: torch does not import. Fix: pip install torch==2.13.0" in out


def test_more_threads_than_cores_is_a_problem_and_a_busy_machine_a_note(healthy, monkeypatch, capsys):
    monkeypatch.setattr(doctor, "probe_torch", lambda: dict(HEALTHY_TORCH, threads=8))
    code, lines = doctor_says(capsys)
    assert code == 1 and problems(lines) == [
        "PROBLEM  threads: torch uses 8 threads on 4 cores (they compete). Fix: export OMP_NUM_THREADS=4 before "
        "starting JupyterLab"]
    monkeypatch.setattr(doctor, "probe_torch", lambda: dict(HEALTHY_TORCH))
    monkeypatch.setattr(doctor, "probe_cpu", lambda: {"cores": 2, "load": 9.0, "wait_policy": ""})
    code, lines = doctor_says(capsys)
    busy = [ln for ln in lines if ln.startswith("note     threads")]
    assert code == 0 and len(busy) == 1 and "load average 9.0, busy" in busy[0]
    assert "OMP_WAIT_POLICY=PASSIVE" in busy[0]
    # with the passive wait policy already set, the advice is only to close other programs
    assert "OMP_WAIT_POLICY" not in doctor.check_threads(2, {"cores": 2, "load": 9.0, "wait_policy": "passive"}).fix


def test_spinning_waits_are_named_and_advised_against_when_busy():
    spin = {"cores": 2, "load": 0.5, "wait_policy": "PASSIVE", "spin": "10000"}
    cpu = doctor.check_cpu(spin)
    assert cpu.status == "note" and "GOMP_SPINCOUNT=10000" in cpu.what and "unset GOMP_SPINCOUNT" in cpu.fix
    assert doctor.check_cpu({**spin, "spin": ""}).status == "ok"
    assert doctor.check_cpu({**spin, "spin": "0"}).status == "ok"                  # a spin count of 0 never spins
    busy = doctor.check_threads(2, {**spin, "load": 9.0})
    assert busy.status == "note" and "without GOMP_SPINCOUNT" in busy.fix          # PASSIVE alone does not stop it
    assert "GOMP_SPINCOUNT" not in doctor.check_threads(1, {**spin, "load": 9.0}).fix  # one thread never waits


def test_predictions_scale_by_step_time_and_flag_a_chapter_too_slow_for_a_workshop():
    runtimes = {"00_a": {"seconds": 300.0, "step_seconds": 2.0}, "01_b": {"seconds": 600.0, "step_seconds": 2.0}}
    a, b = doctor.predict(runtimes, 4.0)  # this laptop: twice the measured step time
    assert (a.status, a.what) == ("ok", "about 10.0 min in full mode (scaled by step time)")
    assert (b.status, b.what) == ("problem", "about 20.0 min in full mode (scaled by step time)")
    assert "RLNB_SMOKE=1" in b.fix
    # no recorded step time: the measured number, and a note that says so
    lines = doctor.chapter_results({"00_a": {"seconds": 300.0, "machine": "2 cores"}}, 4.0)
    assert lines[0].status == "note" and "no step time was recorded" in lines[0].what
    assert lines[1].what == "about 5.0 min in full mode (as measured on 2 cores)"


def test_no_runtime_results_is_a_note_not_a_problem():
    (note,) = doctor.chapter_results({}, None)
    assert note.status == "note" and "runtimes.json" in note.fix


def test_installed_from_a_wheel_the_doctor_reads_the_runtimes_of_the_course_folder_it_runs_in(monkeypatch, tmp_path):
    rel = "docs/results/only_in_the_copied_course.json"  # not beside the package: as after a wheelhouse install
    monkeypatch.setattr(doctor.notebook, "RUNTIMES", rel)
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")  # where JupyterLab runs the notebooks
    assert doctor.probe_runtimes() == {}
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / rel).write_text('{"00_a": {"seconds": 60.0, "step_seconds": 1.0}}')
    assert doctor.probe_runtimes() == {"00_a": {"seconds": 60.0, "step_seconds": 1.0}}


def test_the_shipped_runtime_results_have_what_the_predictions_read():
    runtimes = json.loads(doctor.RUNTIMES.read_text())
    assert runtimes and all(isinstance(e["seconds"], (int, float)) and e["seconds"] > 0 for e in runtimes.values())


def test_the_real_checks_pass_on_this_machine(capsys):
    code = main(["doctor", "--no-timing"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "ok       torch: 2.13.0" in out and "lab extension @jupyter-widgets/jupyterlab-manager" in out


def test_the_real_timing_runs_and_reports_a_step_time(monkeypatch):
    results = doctor.run_checks(timing_steps=1, prompts_per_step=2, num_generations=4)
    (step,) = [r for r in results if r.name == "step time"]
    seconds = float(step.what.split(" s per")[0])  # no bound on it: a busy CI machine is not a failure
    assert step.status in ("ok", "note") and seconds > 0 and step.what.endswith("(median of 1)")


def test_each_result_is_printed_as_it_is_known_and_a_line_comes_before_the_timing(healthy, monkeypatch):
    """A slow laptop sees the checks at once and what the doctor is doing before the timed steps (the issue: 12
    minutes with nothing printed)."""
    said = []

    def slow_steps(steps, **size):
        said.append("<timing ran here>")
        return 0.3

    monkeypatch.setattr(doctor, "step_seconds", slow_steps)
    results = doctor.run_checks(timing_steps=3, emit=said.append)
    timing = said.index("<timing ran here>")
    assert timing > 0 and said[timing - 1].startswith("timing 3 GRPO steps")
    assert said[0] == results[0].line()  # the first check printed before anything slow
    assert said.index("loading torch ...") == 2  # after python and cpu, before torch's check
    progress = ("<timing ran here>", "loading torch ...")
    assert [s for s in said if s not in progress and not s.startswith("timing ")] == [r.line() for r in results]


def test_rlnb_sets_passive_openmp_waits_before_torch_loads_unless_set(tmp_path):
    """The doctor's timing (and every rlnb run) uses the wait policy the runtimes were measured with."""
    import os
    import subprocess
    import sys

    code = "import os, rlnb, torch; print(os.environ['OMP_WAIT_POLICY'])"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "PASSIVE"
    out = subprocess.run([sys.executable, "-c", code], env={**env, "OMP_WAIT_POLICY": "ACTIVE"},
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ACTIVE"
