"""The runtime results file is the one source of the notebooks' runtimes: the README's curriculum table is
rewritten from it by scripts/measure_runtimes.py, and this test fails when the two disagree."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("measure_runtimes", ROOT / "scripts" / "measure_runtimes.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_table_agrees_with_the_runtime_results():
    mod = _script()
    results = json.loads(mod.OUT.read_text())
    readme = mod.README.read_text()
    assert mod.readme_table(results, readme) == readme, "run `python scripts/measure_runtimes.py --readme`"


def test_a_busy_measurement_shows_its_load_and_a_quiet_one_does_not():
    mod = _script()
    quiet = {"seconds": 94.2, "load": 2.5, "niced_share": 0.1, "date": "d", "machine": "m"}
    busy = {"seconds": 416.0, "load": 8.3, "date": "d", "machine": "m"}  # older entries: no niced_share
    assert mod.cell(quiet) == "94 s"
    assert mod.cell(busy) == "416 s (load 8)"
    assert mod.cell(None) == "not measured"


def test_the_table_rewrite_touches_only_the_runtime_column():
    mod = _script()
    text = ("intro\n<!-- notebooks:start -->\n| notebook | topic | full mode | what |\n|---|---|---|---|\n"
            "| [00_a](notebooks/00_a.ipynb) | t | 1 s | w |\nFull mode measured old text\n<!-- notebooks:end -->\nrest\n")
    out = mod.readme_table({"00_a": {"seconds": 50.4, "load": 1.0, "date": "2026-12-03", "machine": "2 cores"}}, text)
    assert "| [00_a](notebooks/00_a.ipynb) | t | 50 s | w |" in out
    assert "old text" not in out and out.startswith("intro\n") and out.endswith("<!-- notebooks:end -->\nrest\n")


def test_the_step_timing_goes_only_into_entries_measured_on_this_machine(monkeypatch):
    mod = _script()
    import rlnb.cli.doctor as doctor

    timings = iter([2.5, 1.23456, 3.0])  # a busy moment only slows a step: the fastest is kept
    monkeypatch.setattr(doctor, "step_seconds", lambda steps: next(timings) if steps == 5 else -1.0)
    results = {"00_a": {"seconds": 9.0, "machine": "here"}, "01_b": {"seconds": 9.0, "machine": "elsewhere"}}
    assert mod.record_step_seconds(results, "here", repeats=3) == ["00_a"]
    assert results["00_a"]["step_seconds"] == 1.235 and results["00_a"]["step_load"] >= 0
    assert "step_seconds" not in results["01_b"]  # another machine's runtime cannot be scaled by this one's step


def test_every_shipped_runtime_has_the_step_time_rlnb_doctor_scales_by():
    results = json.loads(_script().OUT.read_text())
    missing = [n for n, e in results.items() if not e.get("step_seconds", 0) > 0]
    assert not missing, f"run `python scripts/measure_runtimes.py --step-seconds` on the measuring machine: {missing}"
