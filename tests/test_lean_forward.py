"""The update's plain-torch forward (rlnb.models.lean_forward) against the model's own modules
(shared_prompt.shared_hidden) and the padded reference: hidden states, log-probs and every parameter's gradient on
fixed batches, on the embedded default and on a GQA model with biases; where it steps aside; and that the default
update takes it."""

import pytest
import torch
import transformers as tf

import rlnb
from rlnb.core.forward_options import ForwardOptions
from rlnb.models import forward as F_
from rlnb.models import lean_forward, precision
from rlnb.models import shared_prompt as SP


def gqa_qwen2(tok):
    cfg = tf.Qwen2Config(vocab_size=len(tok), hidden_size=96, intermediate_size=160, num_hidden_layers=2,
                         num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    return tf.Qwen2ForCausalLM(cfg)                                      # q, k, v with biases


class Rows:
    """A GRPO-shaped batch: 4 left-padded prompts x 4 completions of random tokens and lengths (right-padded)."""

    def __init__(self, tok):
        g = torch.Generator().manual_seed(0)
        prompts = [p for p in ("1+2=", "31+456=", "7+8=", "123+4567=") for _ in range(4)]
        self.prompt_ids, self.prompt_mask = tok(prompts, padding=True, return_tensors="pt").values()
        B, T = len(prompts), 10
        lengths = torch.randint(1, T + 1, (B,), generator=g)
        self.mask = (torch.arange(T)[None] < lengths[:, None]).long()   # (B, T)
        ids = torch.randint(3, len(tok), (B, T), generator=g)
        self.completion_ids = ids.masked_fill(self.mask == 0, tok.pad_token_id)
        assert (self.prompt_mask == 0).any() and (self.mask == 0).any()  # left and right padding


@pytest.fixture(scope="module")
def batch():
    model, tok = rlnb.load_default()
    t = type("T", (), {"model": model, "tokenizer": tok})
    return t, Rows(tok)


def _args(b):
    return b.prompt_ids, b.prompt_mask, b.completion_ids, b.mask


def _grads(model, hidden, sel, probe):
    params = [p for p in model.parameters() if p.requires_grad]
    loss = (hidden[sel] * probe).sum()
    return torch.autograd.grad(loss, params, allow_unused=True)


@pytest.mark.parametrize("which", ["default", "qwen2"])
def test_hidden_states_and_gradients_are_the_model_modules(batch, which):
    t, b = batch
    model = (t.model if which == "default" else gqa_qwen2(t.tokenizer)).train()
    assert lean_forward.applies(model)
    sel = b.mask.bool()
    got = lean_forward.shared_hidden(model, *_args(b))
    want = SP.shared_hidden(model.get_decoder(), *_args(b))
    torch.testing.assert_close(got[sel], want[sel], rtol=0, atol=2e-5)
    assert torch.isfinite(got).all()                                     # padding and cut positions too
    probe = torch.randn(got[sel].shape, generator=torch.Generator().manual_seed(0))
    g_got, g_want = _grads(model, got, sel, probe), _grads(model, want, sel, probe)
    assert sum(g is not None for g in g_want) >= 10                      # the weights the loss reaches
    for g1, g0 in zip(g_got, g_want):
        assert (g1 is None) == (g0 is None)
        if g0 is not None:
            torch.testing.assert_close(g1, g0, rtol=0, atol=2e-5 * max(1.0, g0.abs().max().item()))


def test_log_probs_are_the_padded_reference(batch):
    t, b = batch
    model = t.model.train()
    with rlnb.models.buckets.padding("padded"):
        ref = F_.completion_logprobs(model, *_args(b), entropy=True)
    calls = []
    real = lean_forward.shared_hidden

    def spy(*a, **k):
        calls.append(real(*a, **k))
        return calls[-1]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lean_forward, "shared_hidden", spy)
        got = F_.completion_logprobs(model, *_args(b), entropy=True)     # the default: shared
    assert calls and calls[0] is not None                                # it took the lean forward
    torch.testing.assert_close(got.logp, ref.logp, rtol=0, atol=5e-5)
    torch.testing.assert_close(got.entropy, ref.entropy, rtol=0, atol=5e-5)
    calls.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lean_forward, "shared_hidden", spy)
        modules = F_.completion_logprobs(model, *_args(b), options=ForwardOptions(layers="modules"))
    assert not calls                                                     # the model's modules, as asked
    torch.testing.assert_close(modules.logp, ref.logp, rtol=0, atol=5e-5)
    with pytest.raises(ValueError, match="layers"):
        ForwardOptions(layers="fast")


def test_it_steps_aside_where_it_would_compute_otherwise(batch):
    t, b = batch
    model = t.model.train()
    one = torch.tensor([0, 4, 8, 12])                                    # one row per prompt: nothing shared
    assert lean_forward.shared_hidden(model, *(x[one] for x in _args(b))) is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not lean_forward.applies(model)
    dec = model.get_decoder()
    dec.gradient_checkpointing = True
    try:
        assert not lean_forward.applies(model)                           # training keeps no activations then
        assert lean_forward.applies(model.eval())                        # nothing is checkpointed in eval
    finally:
        dec.gradient_checkpointing = False
        model.train()
    model.config.attention_dropout = 0.1
    try:
        assert not lean_forward.applies(model) and lean_forward.applies(model.eval())
    finally:
        model.config.attention_dropout = 0.0
        model.train()
    for register in (dec.layers[0].mlp.register_forward_hook, dec.layers[1].self_attn.o_proj.register_full_backward_hook,
                     dec.layers[0].mlp.act_fn.register_forward_pre_hook):
        handle = register(lambda *a: None)
        try:
            assert not lean_forward.applies(model)                       # the hook would never run
        finally:
            handle.remove()
    assert lean_forward.applies(model)


def test_it_steps_aside_for_half_weights_and_rlnbs_autocast(batch):
    t, _ = batch
    half = gqa_qwen2(t.tokenizer).to(torch.bfloat16)
    assert not lean_forward.applies(half)
    model = gqa_qwen2(t.tokenizer)
    precision.enable_autocast(model, torch.bfloat16)
    assert precision.autocast_dtype(model) is not None and not lean_forward.applies(model)
