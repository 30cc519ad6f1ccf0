"""Interrupt windows of ``rlnb train``: a real Ctrl-C (SIGINT) delivered at a line of the step, of the
metrics write, of a checkpoint save or of the final writes leaves ``metrics.jsonl``, ``summary.json`` and
``checkpoint/`` describing the same steps, those steps are the uninterrupted run's, and ``--resume``
finishes the run with the uninterrupted run's metrics.

The signal is raised from a trace function at the N-th executed line of the run's own code (cli/train,
core/runtime, run/state, run/driver, run/checkpoint, loop, stages/runner): at the first line of every function the second step and the final writes
run, and at the middle and last lines of the metrics write, the checkpoint save and the final writes."""

import json
import signal
import sys
from pathlib import Path

import pytest

import rlnb
import rlnb.cli.train
from rlnb.cli import main

SMALL = ["--prompts-per-step", "2", "--num-generations", "2", "--max-new-tokens", "8", "--eval-n", "0",
         "--no-progress", "--save-every", "1"]
ROOT = Path(rlnb.__file__).parent
TRACED = {str(ROOT / f) for f in ("cli/train.py", "core/runtime.py", "run/state.py", "run/driver.py",
                                   "run/checkpoint.py", "loop.py", "stages/runner.py")}
WRITES = ("__call__", "_finish", "_atomic_write", "save")  # metrics line, checkpoint, final writes: more points


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """A background process (CI, nohup) may inherit SIGINT as ignored; install Python's handler."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


class Lines:
    """Counts executed lines of rlnb's run code (comprehensions skipped); at the lines in ``fire`` raises
    SIGINT, as a Ctrl-C arriving there would."""

    def __init__(self, fire=()):
        self.fire, self.n, self.seen = set(fire), 0, []

    def _global(self, frame, event, arg):
        code = frame.f_code
        return self._local if code.co_filename in TRACED and not code.co_name.startswith("<") else None

    def _local(self, frame, event, arg):
        if event == "line":
            self.n += 1
            self.seen.append((Path(frame.f_code.co_filename).name, frame.f_code.co_name, frame.f_lineno))
            if self.n in self.fire:
                signal.raise_signal(signal.SIGINT)
        return self._local

    def run(self, argv):
        sys.settrace(self._global)
        try:
            return main(argv)
        except KeyboardInterrupt:  # a Ctrl-C main() did not see (it never escapes train's shield)
            return "escaped"
        finally:
            sys.settrace(None)


def files(out: Path) -> dict:
    """What each of the three files says about the run."""
    lines = (out / "metrics.jsonl").read_text().splitlines() if (out / "metrics.jsonl").exists() else []
    ck = out / "checkpoint" / "trainer.json"
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    return {"metrics": [json.loads(x) for x in lines], "summary_steps": summary.get("steps"),
            "checkpoint_steps": json.loads(ck.read_text())["step_count"] if ck.exists() else None,
            "checkpoint_history": ((out / "checkpoint" / "history.jsonl").read_text().splitlines()
                                   if ck.exists() else None)}


def untimed(rows):
    return [{k: v for k, v in r.items() if not k.startswith("timing/")} for r in rows]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run's metrics and the lines its second step and final writes execute."""
    report = rlnb.cli.train._report
    rlnb.cli.train._report = lambda *a, **k: None  # the HTML report is no part of the agreement; skip its cost
    out = tmp_path_factory.mktemp("ref") / "run"
    lines = Lines()
    assert lines.run(["train", "--out", str(out), "--steps", "2", *SMALL]) == 0
    metrics = untimed(files(out)["metrics"])
    second = next(i for i, s in enumerate(lines.seen) if s[1] == "step" and s[0] == "loop.py"
                  and i > lines.seen.index(next(x for x in lines.seen if x[1] == "_commit")))
    lines_of = {}  # (file, function) -> the run's line numbers in it, from the second step on
    for i, where in enumerate(lines.seen[second:], start=second + 1):
        lines_of.setdefault(where[:2], []).append(i)
    picked = {at[0] for at in lines_of.values()}  # the first line of every function the window runs
    picked |= {at[len(at) // 2] for fn, at in lines_of.items() if fn[1] in WRITES}   # and inside the writes
    picked |= {at[-1] for fn, at in lines_of.items() if fn[1] in WRITES}
    picked = sorted(picked)
    yield metrics, picked, {i: lines.seen[i - 1] for i in picked}
    rlnb.cli.train._report = report


def test_the_points_cover_step_metrics_write_checkpoint_and_final_writes(reference):
    _, picked, where = reference
    functions = {w[1] for w in where.values()}
    assert len(picked) >= 30
    assert {"step", "_commit", "run_steps", "save", "_meta", "_finish", "_atomic_write", "__call__",
            "rollback_on_error", "deferred_interrupt"} <= functions


def test_ctrl_c_at_any_line_leaves_the_three_files_in_agreement(reference, tmp_path, capsys):
    metrics, picked, where = reference
    outcomes = {}
    for n in picked:
        out = tmp_path / f"at{n}"
        code = Lines(fire=[n]).run(["train", "--out", str(out), "--steps", "2", *SMALL])
        got = files(out)
        label = f"line {n} {where[n]}"
        assert code in (0, 130), label                                 # 0: it came after the last step's writes
        steps = len(got["metrics"])
        assert got["summary_steps"] == steps == got["checkpoint_steps"], (label, got)
        assert len(got["checkpoint_history"]) == steps, label
        assert untimed(got["metrics"]) == metrics[:steps], label         # the steps kept are the run's own
        outcomes[n] = (code, steps)
    assert {s for _, s in outcomes.values()} >= {1, 2}                  # some stopped after step 1, some after 2
    assert any(code == 130 for code, _ in outcomes.values())


def test_the_interrupted_runs_resume_to_the_uninterrupted_metrics(reference, tmp_path, capsys):
    metrics, picked, _ = reference
    for n in (picked[0], picked[len(picked) // 2], picked[-1]):
        out = tmp_path / f"at{n}"
        Lines(fire=[n]).run(["train", "--out", str(out), "--steps", "2", *SMALL])
        assert main(["train", "--resume", str(out), "--no-progress", "--eval-n", "0"]) == 0
        assert untimed(files(out)["metrics"]) == metrics
        assert files(out)["checkpoint_steps"] == 2 == json.loads((out / "summary.json").read_text())["steps"]


def test_a_second_ctrl_c_stops_the_step_at_once_and_the_files_still_agree(reference, tmp_path, capsys):
    """Two Ctrl-C inside step 2: the first asks to stop after it, the second stops it at once (the
    step is undone); metrics, summary and checkpoint say 1 step."""
    metrics, _, _ = reference
    lines = Lines()
    seen_step = []

    class Twice:
        def on_stage(self, trainer, stage, batch):
            if trainer.step_count == 1 and stage == "sample" and not seen_step:
                seen_step.append(1)
                signal.raise_signal(signal.SIGINT)
                signal.raise_signal(signal.SIGINT)

    run = rlnb.Trainer.run

    def run_with(self, steps=None, *, callbacks=(), progress=True):
        return run(self, steps, callbacks=[Twice(), *callbacks], progress=progress)

    out = tmp_path / "twice"
    rlnb.Trainer.run = run_with
    try:
        code = lines.run(["train", "--out", str(out), "--steps", "2", *SMALL])
    finally:
        rlnb.Trainer.run = run
    got = files(out)
    assert seen_step and code == 130
    assert len(got["metrics"]) == got["summary_steps"] == got["checkpoint_steps"] == 1
    assert untimed(got["metrics"]) == metrics[:1]
