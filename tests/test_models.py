"""The embedded default model: it loads, generates, reaches its recorded warm start; the rebuild script runs."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

import rlnb
from rlnb.models import DEFAULT_DIR, build_tokenizer
from rlnb.run.evaluate import evaluate

ROOT = Path(__file__).resolve().parents[1]


def test_default_model_files_and_size(default_model):
    model, tok = default_model
    assert {"config.json", "tokenizer.json", "model.safetensors", "warmstart.json"} <= {p.name for p in DEFAULT_DIR.iterdir()}
    assert not list(DEFAULT_DIR.glob("*.bin")) and not list(DEFAULT_DIR.glob("*.pt"))   # safetensors only
    n = sum(p.numel() for p in model.parameters())
    assert 0.9e6 < n < 1.2e6, n
    assert len(tok) == model.get_input_embeddings().weight.shape[0]
    assert (DEFAULT_DIR / "model.safetensors").stat().st_size < 6_000_000


def test_default_generates_text_for_a_task_prompt(default_model):
    model, tok = default_model
    from rlnb.run.evaluate import completions_for

    [[text]] = completions_for(model, tok, ["123+456="], max_new_tokens=32)
    assert text and set(text) <= set("0123456789+=;>")                  # it answers in the task's alphabet


@pytest.mark.parametrize("task", ["add", "countdown"])
def test_shipped_weights_reach_the_recorded_warm_start(default_model, task):
    recorded = json.loads((DEFAULT_DIR / "warmstart.json").read_text())["eval"][task]["greedy_pass@1"]
    model, tok = default_model
    got = evaluate(model, tok, rlnb.tasks.get(task), n=500, greedy=True)["pass@1"]
    assert abs(got - recorded) <= 0.03, (got, recorded)
    assert 0.15 <= got <= 0.45                                          # headroom for RL


def test_rebuild_script_smoke(tmp_path):
    spec = importlib.util.spec_from_file_location("build_default", ROOT / "scripts" / "build_default.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    summary = mod.main(["--smoke", "--out", str(tmp_path)])
    assert summary["steps"] >= 1 and set(summary["eval"]) == {"add", "countdown"}
    model, tok = rlnb.load(tmp_path)
    assert type(model).__name__ == "LlamaForCausalLM" and len(tok) == len(build_tokenizer())
    again = mod.main(["--smoke", "--out", str(tmp_path / "again")])    # deterministic: same weights
    a = AutoModelForCausalLM.from_pretrained(tmp_path).state_dict()
    b = AutoModelForCausalLM.from_pretrained(tmp_path / "again").state_dict()
    untimed = lambda log: [{k: v for k, v in row.items() if k != "time_s"} for row in log]  # noqa: E731
    assert untimed(again["log"]) == untimed(summary["log"]) and all(torch.equal(a[k], b[k]) for k in a)


def test_any_causal_lm_folder_loads_the_same_way(tmp_path):
    tok = build_tokenizer()
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128)
    Qwen2ForCausalLM(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    model, tok2 = rlnb.load(tmp_path)
    assert type(model).__name__ == "Qwen2ForCausalLM" and tok2.padding_side == "left"


def test_import_rlnb_needs_no_widget_stack():
    """A GPU server running only the loop and kernels may lack ipywidgets/plotly: `import rlnb` must not
    load them; `rlnb.viz` (as notebooks write it, with no `import rlnb.viz`) and `rlnb.show_source` still
    resolve, lazily, where they are installed."""
    import subprocess
    import sys

    code = ("import sys, rlnb; loaded = [m for m in ('rlnb.viz', 'ipywidgets', 'plotly') if m in sys.modules]; "
            "assert not loaded, loaded; assert rlnb.viz.ClipExplorer and 'ipywidgets' in sys.modules; "
            "assert rlnb.show_source is rlnb.viz.show_source; "
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
