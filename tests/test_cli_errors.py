"""The CLI is safe: every user error is one line on stderr with exit code 2 and no traceback, nothing is
written for a refused run, ``--resume`` refuses the flags that would make it another run, ``--out`` never
replaces another run without ``--overwrite``, no flag abbreviations; a real bug keeps its traceback."""

import json
import shutil
from pathlib import Path

import pytest

import rlnb.cli.train
from rlnb.cli import main

SMALL = ["--prompts-per-step", "2", "--num-generations", "2", "--max-new-tokens", "8", "--eval-n", "0",
         "--no-progress"]
BIG = "9" * 400


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    """A finished one-step run folder; each case works on its own copy."""
    out = tmp_path_factory.mktemp("runs") / "run"
    assert main(["train", "--out", str(out), "--steps", "1", "--save-every", "0", *SMALL]) == 0
    return out


def run_cli(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own refusals
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


# --- helpers that break a copy of the saved run -------------------------------------------------------
def truncate(path: Path, keep: float = 0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def corrupt(rel, how):
    def setup(run: Path):
        path = run / rel
        if how == "truncate":
            truncate(path)
        elif how == "delete":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        elif how == "garbage":
            path.write_bytes(b"\x00\xffnot what it should be" * 10)
        elif how == "empty":
            path.write_text("")
        else:
            path.write_text(how)
    return setup


def edit_meta(**changes):
    def setup(run: Path):
        path = run / "checkpoint" / "trainer.json"
        meta = json.loads(path.read_text())
        for key, value in changes.items():
            if isinstance(value, dict) and isinstance(meta.get(key), dict):
                meta[key] = {**meta[key], **value}
            else:
                meta[key] = value
        path.write_text(json.dumps(meta))
    return setup


def add_line(run: Path):
    with open(run / "checkpoint" / "history.jsonl", "a") as f:
        f.write('{"step": 2, "rew')


def drop_streams(run: Path):
    import torch

    state = torch.load(run / "checkpoint" / "state.pt", weights_only=True)
    del state["rng"]
    torch.save(state, run / "checkpoint" / "state.pt")


def symlinked_lock(run: Path):
    (run / "victim.txt").write_text("keep me")
    (run / ".lock").symlink_to(run / "victim.txt")


# (name, argv with {run} for a fresh copy of the saved run and {tmp} for an empty folder, setup, message part)
CASES = [
    # --- flags argparse refuses ------------------------------------------------------------------------
    ("abbreviated --steps", ["train", "--step", "30"], None, "unrecognized arguments: --step"),
    ("abbreviated recipe flag", ["train", "--num-gen", "4"], None, "unrecognized arguments: --num-gen"),
    ("abbreviated eval flag", ["eval", "--mod", "x"], None, "unrecognized arguments: --mod"),
    ("misspelt flag", ["train", "--stpes", "3"], None, "unrecognized arguments"),
    ("no command", [], None, "required: command"),
    ("unknown command", ["trian"], None, "invalid choice: 'trian'"),
    ("flag without its value", ["train", "--recipe"], None, "expected one argument"),
    ("negative steps", ["train", "--steps", "-1"], None, "--steps: expected an int >= 0"),
    ("steps as a word", ["train", "--steps", "ten"], None, "--steps: expected an int >= 0"),
    ("steps in exponent form", ["train", "--steps", "1e3"], None, "--steps: expected an int"),
    ("400-digit steps", ["train", "--steps", BIG], None, "--steps: expected an int in [0, 2147483647]"),
    ("5000-digit steps", ["train", "--steps", "9" * 5000], None, "--steps: expected an int"),
    ("negative seed", ["train", "--seed", "-1"], None, "--seed: expected an int >= 0"),
    ("400-digit seed", ["train", "--seed", BIG], None, "--seed: expected an int in [0, 9223372036854775807]"),
    ("negative save interval", ["train", "--save-every", "-2"], None, "--save-every: expected an int >= 0"),
    ("eval-n as a word", ["train", "--eval-n", "x"], None, "--eval-n: expected an int"),
    ("unknown reward policy", ["train", "--reward-on-error", "ignore"], None, "invalid choice: 'ignore'"),
    ("bool flag as a word", ["train", "--critic", "maybe"], None, "--critic: expected true or false"),
    ("float flag as a word", ["train", "--lr", "fast"], None, "--lr"),
    ("empty --out", ["train", "--out", ""], None, "--out: expected a folder path"),
    ("empty --resume", ["train", "--resume", " "], None, "--resume: expected a folder path"),
    ("zero eval prompts", ["eval", "--n", "0"], None, "--n: expected an int >= 1"),
    ("zero pass@k", ["eval", "--k", "0"], None, "--k: expected an int >= 1"),
    ("400-digit eval n", ["eval", "--n", BIG], None, "--n: expected an int in [1, 2147483647]"),
    ("zero eval tokens", ["eval", "--max-new-tokens", "0"], None, "--max-new-tokens: expected an int >= 1"),
    ("400-digit group size", ["train", "--num-generations", BIG], None, "num_generations: expected"),
    ("400-digit learning rate", ["train", "--lr", BIG], None, "lr: expected"),
    ("info unknown recipe", ["info", "--recipe", "grp"], None, "recipe: unknown recipe 'grp'"),
    ("info abbreviation", ["info", "--rec", "grpo"], None, "unrecognized arguments: --rec"),
    # --- a new run refused before anything is written --------------------------------------------------
    ("unknown recipe", ["train", "--recipe", "grp"], None, "recipe: unknown recipe 'grp'"),
    ("unknown task", ["train", "--task", "addd"], None, "task: unknown task 'addd'"),
    ("empty task name", ["train", "--task", ""], None, "task: unknown task ''"),
    ("NaN temperature", ["train", "--temperature", "nan"], None, "temperature: expected"),
    ("infinite lr", ["train", "--lr", "inf"], None, "lr: expected"),
    ("lr past float range", ["train", "--lr", "1e400"], None, "lr: expected"),
    ("zero prompts per step", ["train", "--prompts-per-step", "0"], None, "prompts_per_step: expected"),
    ("more mini-batches than prompts", ["train", "--num-mini-batches", "99"], None, "num_mini_batches"),
    ("unknown filter", ["train", "--filters", "zero-variance"], None, "filters[0]: unknown filter"),
    ("completions past the context", ["train", "--max-new-tokens", "300"], None, "max_new_tokens: expected fewer"),
    ("--out is a file", ["train", "--out", "{tmp}/file"], lambda tmp: (tmp / "file").write_text("x"), "is a file"),
    ("--out holds a run", ["train", "--out", "{run}"], None, "--out: "),
    ("--out holds half a run", ["train", "--out", "{tmp}/half"],
     lambda tmp: (tmp / "half").mkdir() or (tmp / "half" / "metrics.jsonl").write_text(""), "holds another run"),
    ("--dtype without --model", ["train", "--dtype", "bf16"], None, "--dtype: only with --model"),
    ("checkpointing without --model", ["train", "--gradient-checkpointing"], None, "--gradient-checkpointing: only"),
    ("chat template without --model", ["train", "--chat-template"], None, "--chat-template: only with --model"),
    ("missing model folder", ["train", "--model", "{tmp}/no/such/model"], None, "--model: the folder"),
    ("relative missing model", ["train", "--model", "./no-such-model"], None, "does not exist"),
    ("model path is a file", ["train", "--model", "{tmp}/file"], lambda tmp: (tmp / "file").write_text("x"),
     "--model: "),
    ("model folder without config", ["train", "--model", "{tmp}/empty"], lambda tmp: (tmp / "empty").mkdir(),
     "has no config.json"),
    ("hub name offline", ["train", "--model", "nobody/no-such-model-xyz"], None, "model"),
    ("unknown dtype", ["train", "--model", "{run}", "--dtype", "float8"], None, "dtype: expected one of"),
    # --- resume: flags that would make it another run ---------------------------------------------------
    ("resume with --recipe", ["train", "--resume", "{run}", "--recipe", "dapo"], None, "--recipe: not with --resume"),
    ("resume with --task", ["train", "--resume", "{run}", "--task", "countdown"], None, "--task: not with --resume"),
    ("resume with --seed", ["train", "--resume", "{run}", "--seed", "1"], None, "--seed: not with --resume"),
    ("resume with --seed 0", ["train", "--resume", "{run}", "--seed", "0"], None, "--seed: not with --resume"),
    ("resume with --model", ["train", "--resume", "{run}", "--model", "{run}"], None, "--model: not with --resume"),
    ("resume with --out", ["train", "--resume", "{run}", "--out", "{tmp}/x"], None, "--out: not with --resume"),
    ("resume with --overwrite", ["train", "--resume", "{run}", "--overwrite"], None, "--overwrite: not with"),
    ("resume with --dtype", ["train", "--resume", "{run}", "--dtype", "bf16"], None, "--dtype: not with --resume"),
    ("resume with a reward policy", ["train", "--resume", "{run}", "--reward-on-error", "zero"], None,
     "--reward-on-error: not with"),
    ("resume with --lr", ["train", "--resume", "{run}", "--lr", "0.1"], None, "--lr: not with --resume"),
    ("resume with --filters", ["train", "--resume", "{run}", "--filters", "overlong"], None, "--filters: not with"),
    ("resume with a knob set to none", ["train", "--resume", "{run}", "--kl-target", "none"], None,
     "--kl-target: not with --resume"),
    ("resume to fewer steps", ["train", "--resume", "{run}", "--steps", "0"], None, "--steps: the saved run has done 1"),
    # --- resume: broken folders and checkpoints ---------------------------------------------------------
    ("resume a missing folder", ["train", "--resume", "{tmp}/nothing"], None, "--resume: no such folder"),
    ("resume a file", ["train", "--resume", "{tmp}/file"], lambda tmp: (tmp / "file").write_text("x"), "is a file"),
    ("resume an empty folder", ["train", "--resume", "{tmp}/empty"], lambda tmp: (tmp / "empty").mkdir(),
     "--resume: no checkpoint"),
    ("truncated trainer.json", ["train", "--resume", "{run}"], corrupt("checkpoint/trainer.json", "truncate"),
     "trainer.json is not valid JSON"),
    ("empty trainer.json", ["train", "--resume", "{run}"], corrupt("checkpoint/trainer.json", "empty"),
     "not valid JSON"),
    ("trainer.json is a list", ["train", "--resume", "{run}"], corrupt("checkpoint/trainer.json", "[1, 2]"),
     "expected an object"),
    ("trainer.json lost its recipe", ["train", "--resume", "{run}"], edit_meta(recipe=None), "recipe=None"),
    ("trainer.json with a text step", ["train", "--resume", "{run}"], edit_meta(step_count="one"), "step_count"),
    ("trainer.json from the future", ["train", "--resume", "{run}"], edit_meta(format=99), "newer rlnb"),
    ("unknown recipe field saved", ["train", "--resume", "{run}"], edit_meta(recipe={"temprature": 1.0}),
     "temprature"),
    ("out-of-range recipe saved", ["train", "--resume", "{run}"], edit_meta(recipe={"temperature": -1.0}),
     "temperature: expected"),
    ("unknown task saved", ["train", "--resume", "{run}"], edit_meta(task={"name": "chess", "params": {}}),
     "task: unknown task 'chess'"),
    ("unknown task parameter saved", ["train", "--resume", "{run}"],
     edit_meta(task={"name": "add", "params": {"digts": 2}}), "digts: task 'add' has no parameter"),
    ("changed task parameter", ["train", "--resume", "{run}"],
     edit_meta(task={"name": "add", "params": {"digits": 2, "p_scratch": 0.5}}), "training prompts"),
    ("bad saved dtype", ["train", "--resume", "{run}"], edit_meta(model={"dtype": "int8"}), "dtype"),
    ("saved on a missing GPU", ["train", "--resume", "{run}"], edit_meta(model={"device": "cuda:7"}), "device:"),
    ("truncated weights", ["train", "--resume", "{run}"], corrupt("checkpoint/model/model.safetensors", "truncate"),
     "cannot read the model"),
    ("garbage weights", ["train", "--resume", "{run}"], corrupt("checkpoint/model/model.safetensors", "garbage"),
     "cannot read the model"),
    ("missing weights", ["train", "--resume", "{run}"], corrupt("checkpoint/model/model.safetensors", "delete"),
     "cannot read the model"),
    ("missing model config", ["train", "--resume", "{run}"], corrupt("checkpoint/model/config.json", "delete"),
     "has no model"),
    ("corrupt model config", ["train", "--resume", "{run}"], corrupt("checkpoint/model/config.json", "{"),
     "cannot read the model"),
    ("corrupt tokenizer", ["train", "--resume", "{run}"], corrupt("checkpoint/model/tokenizer.json", "truncate"),
     "cannot read the model"),
    ("truncated optimizer state", ["train", "--resume", "{run}"], corrupt("checkpoint/state.pt", "truncate"),
     "cannot read"),
    ("garbage optimizer state", ["train", "--resume", "{run}"], corrupt("checkpoint/state.pt", "garbage"),
     "cannot read"),
    ("missing optimizer state", ["train", "--resume", "{run}"], corrupt("checkpoint/state.pt", "delete"),
     "has no"),
    ("torn history line", ["train", "--resume", "{run}"], add_line, "history.jsonl line 2"),
    ("history shorter than the steps", ["train", "--resume", "{run}"], corrupt("checkpoint/history.jsonl", "empty"),
     "holds 0 steps"),
    ("missing history", ["train", "--resume", "{run}"], corrupt("checkpoint/history.jsonl", "delete"), "has no"),
    ("truncated summary", ["train", "--resume", "{run}"], corrupt("summary.json", "truncate"),
     "summary.json is not valid JSON"),
    ("summary is a list", ["train", "--resume", "{run}"], corrupt("summary.json", "[]"), "expected an object"),
    ("history line not an object", ["train", "--resume", "{run}"], corrupt("checkpoint/history.jsonl", "[1]\n"),
     "history.jsonl line 1 holds list"),
    ("negative prompt cursor", ["train", "--resume", "{run}"], edit_meta(prompts_drawn=-2), "prompts_drawn=-2"),
    ("text run_target", ["train", "--resume", "{run}"], edit_meta(run_target="5"), "run_target='5'"),
    ("unknown logged knob", ["train", "--resume", "{run}"], edit_meta(logged_knobs=["warp"]), "logged_knobs="),
    ("non-boolean training flag", ["train", "--resume", "{run}"], edit_meta(model={"training": 1}),
     "model.training=1"),
    ("state.pt without random streams", ["train", "--resume", "{run}"], drop_streams, "state.pt has rng=None"),
    ("a .lock that is a symlink", ["train", "--resume", "{run}"], symlinked_lock, ".lock is a symbolic link"),
    ("checkpoint is a file", ["train", "--resume", "{run}"],
     lambda run: shutil.rmtree(run / "checkpoint") or (run / "checkpoint").write_text("x"), "no checkpoint"),
    # --- eval -------------------------------------------------------------------------------------------
    ("eval unknown task", ["eval", "--task", "nosuch"], None, "task: unknown task 'nosuch'"),
    ("eval --json into a folder", ["eval", "--json", "{tmp}"], None, "--json: "),
    ("eval --json in a missing folder", ["eval", "--json", "{tmp}/no/such/x.json"], None, "does not exist"),
    ("eval missing model", ["eval", "--model", "/no/such/model"], None, "--model: the folder /no/such/model"),
]


def materialise(argv, setup, saved_run, tmp_path):
    run = tmp_path / "run"
    if any("{run}" in a for a in argv):
        shutil.copytree(saved_run, run)
        if setup is not None:
            setup(run)
    elif setup is not None:
        setup(tmp_path)
    return [a.format(run=run, tmp=tmp_path) for a in argv], run


@pytest.mark.parametrize("name, argv, setup, expected", CASES, ids=[c[0] for c in CASES])
def test_user_error_is_one_line_exit_2_and_writes_nothing(saved_run, tmp_path, capsys, monkeypatch, name, argv,
                                                          setup, expected):
    monkeypatch.chdir(tmp_path)                                       # a default runs/ folder would land here
    argv, run = materialise(argv, setup, saved_run, tmp_path)
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*")} if run.exists() else {}
    code, out, err = run_cli(argv, capsys)
    assert code == 2, err
    assert "Traceback" not in err and err.endswith("\n") and err.count("\n") == 1, err
    assert expected in err, err
    assert not (tmp_path / "runs").exists()                           # no run was started
    if run.exists():                                                  # a refused resume changes nothing
        assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == before


def test_the_table_covers_every_error_path(capsys):
    assert len(CASES) >= 90 and len({c[0] for c in CASES}) == len(CASES)


def test_overwrite_replaces_only_the_runs_own_files(saved_run, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(saved_run, out)
    (out / "notes.txt").write_text("mine")
    assert main(["train", "--out", str(out), "--overwrite", "--steps", "2", "--save-every", "0", *SMALL]) == 0
    assert (out / "notes.txt").read_text() == "mine"
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
    assert json.loads((out / "summary.json").read_text())["steps"] == 2


def test_resume_continues_to_the_total_and_a_finished_run_trains_nothing(saved_run, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(saved_run, out)
    assert main(["train", "--resume", str(out), "--no-progress", "--eval-n", "0"]) == 0   # target 1: done
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 1
    assert main(["train", "--resume", str(out), "--steps", "2", "--no-progress", "--eval-n", "0"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["steps_target"] == 2 and not summary["interrupted"]
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]


def test_eval_reads_a_run_folder_as_its_model(saved_run, tmp_path, capsys):
    out = tmp_path / "figures.json"
    assert main(["eval", "--model", str(saved_run), "--task", "add", "--n", "2", "--k", "2", "--json", str(out)]) == 0
    assert set(json.loads(out.read_text())["add"]) == {"greedy_pass@1", "sampled_pass@1", "pass@2"}


@pytest.mark.parametrize("bug", [ZeroDivisionError("division by zero"), KeyError("history"),
                                 ValueError("too many values to unpack"), TypeError("unsupported operand"),
                                 AttributeError("'NoneType' object has no attribute 'shape'")])
def test_a_real_bug_keeps_its_traceback(monkeypatch, tmp_path, bug):
    def broken(*args, **kwargs):
        raise bug

    monkeypatch.setattr(rlnb.cli.train, "_new", broken)
    with pytest.raises(type(bug)):
        main(["train", "--out", str(tmp_path / "run"), *SMALL])


def test_every_parser_refuses_abbreviations():
    from rlnb.bench.loss import parse
    from rlnb.cli import build_parser
    from rlnb.export.launch import build_parser as launch_parser

    parsers = [build_parser(), launch_parser()]
    parsers += [p for a in parsers[0]._actions if getattr(a, "choices", None) and isinstance(a.choices, dict)
                for p in a.choices.values()]
    assert len(parsers) == 9 and all(p.allow_abbrev is False for p in parsers)  # rlnb, launch, 7 subcommands
    with pytest.raises(SystemExit):
        parse(["--dev", "cpu"])                                      # rlnb bench loss: --device only in full
