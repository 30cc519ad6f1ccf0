"""Stage 1, the Sampler: G completions per prompt, and their log-probs under the sampling policy."""

from __future__ import annotations

import contextlib

import torch

from rlnb.algos import sum_pi_squared
from rlnb.batch import Batch, require
from rlnb.core.checks import check_causal_lm, check_context, context_length
from rlnb.models.forward import PolicyOut, completion_logits, completion_logprobs
from rlnb.models.generate import encode_prompts
from rlnb.models.lean_decode import sample  # the lean loop; generate.sample where it cannot run exactly
from rlnb.recipe import check_fields


class Sampler:
    """Generate ``num_generations`` completions per prompt with the model's KV cache.

    Reads: ``prompts`` (a prompt-only ``Batch`` from ``Batch.from_rows``).
    Writes: ``prompt_ids``, ``prompt_mask``, ``completion_ids``, ``mask``, ``truncated``,
    ``completions``, ``old_logp``, ``rollout_logp``; ``ref_logp`` when a reference model is given; ``old_values`` with a
    value head (PPO's critic); ``extras["topk_ids"]``/``extras["old_topk_logp"]`` when ``topk`` > 0;
    ``extras["greedy_completions"]`` (B strings: each row's prompt's greedy completion) with ``greedy=True``,
    for estimators whose baseline is a greedy rollout (ReMax's ``greedy_rewards``, scored by the Rewarder);
    ``extras["sum_pi_squared"]`` (B, T), sum_v pi_old(v)^2 at each completion position, with
    ``record_sum_pi_squared=True`` (the optimal token baseline's path weights read it).

    ``old_logp`` is recomputed with one full forward pass through ``rlnb.models.forward.completion_logprobs``
    (the Updater's own function) rather than taken from the incremental sampling pass, so that before
    any optimizer step the ratio pi / pi_old is exactly 1. ``rollout_logp`` is what the sampling pass
    itself computed: the same policy through another code path (incremental KV cache, other shapes), so it
    differs from ``old_logp`` by rounding. That gap is the train/rollout mismatch of real systems (vLLM
    samples, the trainer scores), which ScaleRL's FP32 LM head is about. ``rollout_temperature`` (sample at
    another temperature than the trainer scores at) and ``rollout_bf16`` (sample under bf16 autocast) make
    the sampler a different policy on purpose, the way an inference engine is: ``rollout_logp`` is then mu,
    the sampler's own distribution, and ``rlnb.algos.rollout_correction`` corrects for the gap.

    ``recompute_old_logp=False`` skips that forward (``old_logp`` stays None): an on-policy Updater then
    takes pi_old from its own forward, detached, which is the same number. ``Trainer.step`` does this when
    nothing reads ``old_logp`` before the update; a stage run by hand always recomputes.
    """

    def __init__(self, model, tokenizer, *, temperature: float = 1.0, top_p: float = 1.0,
                 max_new_tokens: int = 32, ref_model=None, fp32_lm_head: bool = False, value_head=None,
                 topk: int = 0, greedy: bool = False, generator: torch.Generator | None = None,
                 recompute_old_logp: bool = True, record_sum_pi_squared: bool = False,
                 rollout_temperature: float | None = None, rollout_bf16: bool = False):
        check_fields({"topk": "topk_logprobs"}, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                     fp32_lm_head=fp32_lm_head, topk=topk, rollout_temperature=rollout_temperature,
                     rollout_bf16=rollout_bf16)
        check_causal_lm("model", model)
        ctx = context_length(model)
        if ctx is not None and max_new_tokens >= ctx:
            raise ValueError(f"max_new_tokens: expected fewer than the model's context of {ctx} tokens "
                             f"(the prompt needs room too), got {max_new_tokens}")
        self.model, self.tokenizer, self.ref_model = model, tokenizer, ref_model
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.fp32_lm_head, self.value_head, self.topk, self.greedy = fp32_lm_head, value_head, topk, greedy
        self.generator = generator if generator is not None else torch.Generator(device=self.device).manual_seed(0)
        self.recompute_old_logp, self.record_sum_pi_squared = recompute_old_logp, bool(record_sum_pi_squared)
        # a mismatched sampler (another temperature, lower precision): mu differs from the trainer's pi_old
        self.rollout_temperature, self.rollout_bf16 = rollout_temperature, bool(rollout_bf16)

    def check_context(self, prompt_mask: torch.Tensor) -> None:
        """Prompt plus ``max_new_tokens`` must fit in the model's context window (when its config says)."""
        check_context(self.model, prompt_mask.sum(-1).tolist(), self.max_new_tokens)

    @property
    def device(self):
        return next(self.model.parameters()).device

    def step(self, batch: Batch) -> Batch:
        require(batch, [], "Sampler")
        prompt_ids, prompt_mask = encode_prompts(self.tokenizer, batch.prompts, self.device)  # (B, Tp)
        self.check_context(prompt_mask)
        was_training = self.model.training
        self.model.eval()  # no dropout while sampling; the Updater switches back to train()
        try:
            with self._rollout_precision():
                completion_ids, mask, truncated, rollout = sample(
                    self.model, prompt_ids, prompt_mask, max_new_tokens=self.max_new_tokens,
                    temperature=self.rollout_temperature or self.temperature, top_p=self.top_p,
                    generator=self.generator, eos_token_id=self.tokenizer.eos_token_id,
                    pad_token_id=self.tokenizer.pad_token_id, return_logp=True,
                )
            inputs = (prompt_ids, prompt_mask, completion_ids, mask)
            with torch.no_grad():
                old = PolicyOut(None, None, None, None, None)
                if self.recompute_old_logp or self.value_head is not None or self.topk:
                    old = completion_logprobs(self.model, *inputs, temperature=self.temperature,
                                              fp32_lm_head=self.fp32_lm_head, value_head=self.value_head,
                                              topk=self.topk)
                ref = None
                if self.ref_model is not None:
                    ref = completion_logprobs(self.ref_model, *inputs, temperature=self.temperature,
                                              fp32_lm_head=self.fp32_lm_head)
                pi2 = self._sum_pi_squared(inputs) if self.record_sum_pi_squared else None
            greedy = self._greedy(prompt_ids, prompt_mask, batch.group_size) if self.greedy else None
        finally:
            self.model.train(was_training)
        extras = dict(batch.extras)
        if self.topk:
            extras.update(topk_ids=old.topk_ids.cpu(), old_topk_logp=old.topk_logp.cpu())
        if greedy is not None:
            extras["greedy_completions"] = greedy
        if pi2 is not None:
            extras["sum_pi_squared"] = pi2.cpu()
        cpu = lambda t: None if t is None else t.cpu()  # noqa: E731  the Batch lives on the CPU
        return batch.replace(
            prompt_ids=cpu(prompt_ids), prompt_mask=cpu(prompt_mask), completion_ids=cpu(completion_ids),
            mask=cpu(mask), truncated=cpu(truncated),
            completions=self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True),
            old_logp=cpu(old.logp), rollout_logp=cpu(rollout), ref_logp=None if ref is None else cpu(ref.logp), old_values=cpu(old.values),
            extras=extras,
        )

    def _rollout_precision(self):
        """bf16 autocast around sampling when ``rollout_bf16`` (an inference engine in lower precision: mu's
        logits are rounded where the trainer's are not), else nothing."""
        if not self.rollout_bf16:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    def _sum_pi_squared(self, inputs) -> torch.Tensor:
        """(B, T) sum_v pi_old(v)^2 at the sampling temperature: one forward that keeps the full logits."""
        logits, _ = completion_logits(self.model, *inputs, fp32_lm_head=self.fp32_lm_head)  # (B, T, V)
        return sum_pi_squared(logits, inputs[3], temperature=self.temperature)

    def _greedy(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, G: int) -> list[str]:
        """One argmax completion per prompt (the first row of each group), decoded and repeated over the
        group. Argmax draws nothing from ``self.generator``, so the sampled completions of this step and
        the next are what they would be without it."""
        ids, _, _ = sample(self.model, prompt_ids[::G], prompt_mask[::G], max_new_tokens=self.max_new_tokens,
                           greedy=True, eos_token_id=self.tokenizer.eos_token_id,
                           pad_token_id=self.tokenizer.pad_token_id)
        return [text for text in self.tokenizer.batch_decode(ids, skip_special_tokens=True) for _ in range(G)]
