"""The last edge inputs, tried as a hostile user would: each gets an error at the door that starts with the
argument's name and says what was expected (no traceback from deep inside, no silent wrong result)."""

import functools

import pytest
import torch

import rlnb
from rlnb import Batch, Trainer
from rlnb.run.evaluate import evaluate
from rlnb.stages import Sampler, Updater


@functools.cache
def ctx():
    t = Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, max_new_tokens=8)
    return t, t.rollout()


class NotLM(torch.nn.Module):
    def forward(self, x):
        return x


def model_folder(tmp_path, *, tokenizer=True, corrupt=False):
    model, tok = rlnb.load_default()
    model.save_pretrained(tmp_path)
    if tokenizer:
        tok.save_pretrained(tmp_path)
    if corrupt:
        (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    return str(tmp_path)


def saved(tmp_path):
    t, _ = ctx()
    return t.save(tmp_path / "ckpt")


CASES = {  # name: (call(tmp_path), error type, start of the message)
    "evaluate past the context": (lambda p: evaluate(*rlnb.load_default(), rlnb.tasks.get("add"), n=2,
                                                     max_new_tokens=300), ValueError, "prompts: row 0 has"),
    "fp16 weights on the CPU": (lambda p: Trainer(rlnb.load_default()[0].half(), rlnb.load_default()[1], "add"),
                                ValueError, "model: float16 weights on the CPU"),
    "ref_model not a causal LM": (lambda p: Trainer(*rlnb.load_default(), "add", ref_model=NotLM(), beta=0.1),
                                  TypeError, "ref_model: expected a causal LM"),
    "a device that does not exist": (lambda p: Trainer.load(saved(p), device="tpu:3"), (ValueError, RuntimeError),
                                     "device:"),
    "Batch.select past B": (lambda p: ctx()[1].select(torch.tensor([0, 100])), ValueError,
                            "rows: expected indices in [0, 8)"),
    "Batch.select with floats": (lambda p: ctx()[1].select(torch.tensor([0.0, 1.0])), TypeError,
                                 "rows: expected a 1-D tensor or list of int"),
    "Batch.concat of a sampled and a prompt-only batch": (lambda p: Batch.concat([ctx()[1], ctx()[0].next_prompts()]),
                                                          ValueError, "batches: field"),
    "Sampler(model=None)": (lambda p: Sampler(None, ctx()[0].tokenizer), TypeError, "model: expected a causal LM"),
    "Updater(optimizer=None)": (lambda p: Updater(ctx()[0].model, None, loss_fn=len, agg_fn=len), TypeError,
                                "optimizer: expected a torch.optim.Optimizer"),
    "a model folder without tokenizer files": (lambda p: Trainer.from_pretrained(model_folder(p, tokenizer=False)),
                                               OSError, "tokenizer: cannot load a tokenizer from"),
    "a corrupt model.safetensors": (lambda p: Trainer.from_pretrained(model_folder(p, corrupt=True)), OSError,
                                    "model: cannot load '"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_an_edge_input_is_refused_by_name(name, tmp_path):
    call, kind, start = CASES[name]
    with pytest.raises(kind) as err:
        call(tmp_path)
    assert str(err.value).startswith(start), str(err.value)


def test_a_refused_select_leaves_the_batch_usable():
    t, batch = ctx()
    with pytest.raises(ValueError):
        batch.select([0, 99])
    assert batch.select([4, 5, 6, -1]).B == 4 and batch.B == 8
