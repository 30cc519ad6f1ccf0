"""Each distinct prompt computed once: the plan by hand, when the shared path steps aside, and the shared prefill.

The loss, per-token tensors and gradients of the shared-prompt forward against the padded reference are in
``tests/test_buckets.py``.
"""

import pytest
import torch

import rlnb
from rlnb.models import shared_prompt as SP
from rlnb.models.generate import distinct_prompts, sample


def test_distinct_prompts_ignore_padding_ids_and_keep_first_seen_order():
    ids = torch.tensor([[9, 5, 6], [0, 5, 6], [0, 7, 7], [3, 5, 6]])
    mask = torch.tensor([[0, 1, 1], [0, 1, 1], [0, 1, 1], [1, 1, 1]])   # row 0's 9 is padding: same as row 1
    first, inv = distinct_prompts(ids, mask)
    assert first.tolist() == [0, 2, 3] and inv.tolist() == [0, 0, 1, 2]
    empty = distinct_prompts(ids[:0], mask[:0])
    assert [len(x) for x in empty] == [0, 0]


def test_plan_by_hand():
    ids = torch.tensor([[0, 4, 5], [0, 4, 5], [6, 7, 8], [6, 7, 8]])
    prompt_mask = torch.tensor([[0, 1, 1], [0, 1, 1], [1, 1, 1], [1, 1, 1]])
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
    p = SP.plan(ids, prompt_mask, mask)
    # 2 distinct prompts x 3 columns, then one bucket (4 rows < MIN_ROWS) fed 4 - 1 completion tokens
    assert p["computed"] == 2 * 3 + 4 * 3
    assert p["real"] == (2 + 3) + (1 + 2 + 0 + 3)
    assert p["distinct_prompts"] == 2


@pytest.fixture(scope="module")
def trainer_batch():
    t = rlnb.Trainer.tiny(seed=2, prompts_per_step=4, num_generations=4, max_new_tokens=10)
    return t, t.rollout()


def test_the_shared_path_steps_aside_for_distinct_prompts_and_checkpointing(trainer_batch):
    t, b = trainer_batch
    dec = t.model.get_decoder()
    args = (b.prompt_ids, b.prompt_mask, b.completion_ids, b.mask)
    assert SP.shared_hidden(dec, *args) is not None
    one = torch.tensor([0, 4, 8, 12])                                       # one row per prompt: nothing shared
    assert SP.shared_hidden(dec, *(x[one] for x in args)) is None
    dec.gradient_checkpointing = True                                       # turns the cache off in training
    try:
        assert SP.shared_hidden(dec.train(), *args) is None
    finally:
        dec.gradient_checkpointing = False


def test_caches_other_than_plain_growing_keys_are_not_shared():
    from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer
    k = torch.zeros(2, 1, 3, 4)
    plain = DynamicCache(ddp_cache_data=[(k, k)])
    assert isinstance(plain.layers[0], DynamicLayer) and SP.plain_kv(plain) is not None
    sliding = DynamicCache()
    sliding.layers = [DynamicSlidingWindowLayer(sliding_window=2)]
    sliding.update(k, k, 0)
    assert SP.plain_kv(sliding) is None and SP.plain_kv(None) is None


def test_shared_prefill_gives_the_unshared_rows(trainer_batch):
    """Greedy decoding of 4 prompts x 4 copies (prefilled once each) equals decoding each prompt alone."""
    t, b = trainer_batch
    tok = t.tokenizer
    kw = dict(max_new_tokens=10, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, greedy=True,
              return_logp=True)
    first, inv = distinct_prompts(b.prompt_ids, b.prompt_mask)
    assert len(first) * 2 <= b.B                                            # the shared prefill runs
    ids, mask, _, logp = sample(t.model, b.prompt_ids, b.prompt_mask, **kw)
    for u, row in enumerate(first.tolist()):
        one_ids, one_mask, _, one_logp = sample(t.model, b.prompt_ids[row:row + 1], b.prompt_mask[row:row + 1], **kw)
        n = one_ids.shape[1]
        for r in torch.nonzero(inv == u).flatten().tolist():
            assert torch.equal(ids[r, :n], one_ids[0]) and mask[r, n:].sum() == 0
            torch.testing.assert_close(logp[r, :n], one_logp[0], rtol=1e-5, atol=1e-5)


def test_bench_padding_runs_every_variant_to_the_same_result(capsys):
    """The side-by-side benchmark's variants compute the same thing (its timings are not asserted)."""
    import rlnb.bench.padding as mod  # scripts/bench_padding.py is its entry point

    mod.main(["--rounds", "1", "--warm-steps", "0", "--threads", str(torch.get_num_threads())])
    out = capsys.readouterr().out
    assert out.count("same result") == 7 and "DIFFERENT" not in out, out
