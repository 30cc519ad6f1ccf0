"""Stage 4, the Updater: per-token log-probs under the current policy, the loss, and optimizer steps."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import torch

from rlnb.algos.entropy import entropy_bonus, pushed_token_mean, top_entropy_mask
from rlnb.algos.losses import extra_inputs
from rlnb.algos.rollout_correction import compose, correction_metrics, importance_corrected_kl
from rlnb.batch import Batch, require
from rlnb.core import forward_options
from rlnb.core.checks import check_causal_lm
from rlnb.core.display import Readable
from rlnb.models import row_split
from rlnb.models.forward import POLICY_INPUTS, PolicyOut, completion_logprobs
from rlnb.recipe import check_fields
from rlnb.stages import live_rows
from rlnb.stages.optim import make_optimizer, set_schedule, warmup  # noqa: F401  re-exported: their old home


@dataclass
class UpdateStats:
    """Scalar metrics (averaged over the optimizer steps of one batch) and per-token tensors.

    The per-token tensors are those of the last epoch: each row's values when its mini-batch was used.
    """

    loss: float = 0.0            # total loss: policy + beta * KL - entropy_coef * H
    pg_loss: float = 0.0         # the aggregated policy term alone
    kl: float = 0.0              # token-mean KL estimate to the reference (0 when beta = 0)
    entropy: float = 0.0         # token-mean entropy of the current policy
    clip_low: float = 0.0        # share of tokens with rho < 1 - eps_low and A < 0
    clip_high: float = 0.0       # share of tokens with rho > 1 + eps_high and A > 0
    clip_region: float = 0.0     # share of tokens clipped either way
    grad_norm: float = 0.0       # global gradient norm before clipping
    lr: float = 0.0
    num_updates: int = 0         # optimizer steps taken on this batch
    ratio: torch.Tensor | None = None         # (B, T) rho = pi / pi_old
    clipped_low: torch.Tensor | None = None   # (B, T) bool
    clipped_high: torch.Tensor | None = None  # (B, T) bool
    token_entropy: torch.Tensor | None = None # (B, T)
    token_kl: torch.Tensor | None = None      # (B, T), None when beta = 0
    weight: torch.Tensor | None = None        # (B, T) per-token weight on grad logp
    old_logp: torch.Tensor | None = None      # (B, T) pi_old taken from the update's own forward (on-policy)
    extra: dict = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        """Scalars under TRL's metric names (shown at 3 significant digits, kept exact)."""
        return Readable({
            "loss": self.loss, "pg_loss": self.pg_loss, "kl": self.kl, "entropy": self.entropy,
            "clip_ratio/low_mean": self.clip_low, "clip_ratio/high_mean": self.clip_high,
            "clip_ratio/region_mean": self.clip_region, "grad_norm": self.grad_norm,
            "learning_rate": self.lr, "num_updates": self.num_updates, **self.extra,
        })


class MiniBatchLoss(NamedTuple):
    """One mini-batch's loss and what the stats and widgets read from it."""

    total: torch.Tensor                  # () the scalar that is differentiated
    terms: dict                          # name -> () each term of total: "pg", "kl", "entropy"[, "value"]
    out: object                          # the policy loss's per-token LossOut (ratio, clipped tokens, weight)
    entropy: torch.Tensor                # (b, T) per-token entropy, detached
    kl: torch.Tensor | None              # (b, T) per-token KL to the reference, masked (None: no reference)
    mask: torch.Tensor                   # (b, T) tokens in the loss
    old_logp: torch.Tensor               # (b, T) pi_old: the rollout's, or the update's own (on-policy)
    correction: object = None            # the rollout correction's Correction (is_weight, gate, keep), (b, T) each
    parts: list | None = None            # each row part's PolicyOut when the forward ran split (rlnb.models.row_split)


class Updater:
    """Several epochs over the batch, each split into mini-batches of whole groups; one optimizer step each.

    Reads: ``prompt_ids``, ``prompt_mask``, ``completion_ids``, ``mask``, ``old_logp``, ``ref_logp``,
    ``adv``, ``keep``; with a critic ``old_values`` and ``returns``; ``extras`` a loss asks for.
    Writes: nothing on the batch; changes the model's weights; returns ``UpdateStats``.

    ``loss_fn``, ``agg_fn`` and ``kl_fn`` are bound registry functions; ``token_mask(entropy, mask)`` picks the
    tokens the policy gradient reaches (bound ``top_entropy_mask``: all of them unless top_entropy_quantile < 1);
    ``entropy_rule`` (an ``ENTROPY_BONUSES`` entry) how the entropy bonus averages H over them. With ``num_iterations=1`` and
    ``num_mini_batches=1`` the policy that is differentiated is the one that sampled, so the ratio is
    exactly 1 and nothing is clipped; more steps per batch let the ratio move so clipping can fire.
    """

    def __init__(self, model, optimizer, scheduler=None, *, loss_fn: Callable, agg_fn: Callable,
                 kl_fn: Callable | None = None, beta: float = 0.0, entropy_coef: float = 0.0,
                 temperature: float = 1.0, num_iterations: int = 1, num_mini_batches: int = 1,
                 max_grad_norm: float = 1.0, fp32_lm_head: bool = False, value_head=None,
                 value_loss_fn: Callable | None = None, vf_coef: float = 0.5, token_mask: Callable | None = None,
                 entropy_rule: Callable = pushed_token_mean, corrections: tuple = (), bypass_mode: bool = False,
                 use_bias_correction_kl: bool = False, generator: torch.Generator | None = None):
        check_fields(beta=beta, entropy_coef=entropy_coef, temperature=temperature, num_iterations=num_iterations,
                     num_mini_batches=num_mini_batches, max_grad_norm=max_grad_norm, fp32_lm_head=fp32_lm_head,
                     vf_coef=vf_coef)
        check_causal_lm("model", model)
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer: expected a torch.optim.Optimizer (see make_optimizer), got "
                            f"{type(optimizer).__name__}")
        for name, fn in (("loss_fn", loss_fn), ("agg_fn", agg_fn)):
            if not callable(fn):
                raise TypeError(f"{name}: expected a callable (a bound registry entry), got {fn!r}")
        if beta > 0 and kl_fn is None:
            raise ValueError("kl_fn: expected a KL estimator when beta > 0, got None")
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.loss_fn, self.agg_fn, self.kl_fn = loss_fn, agg_fn, kl_fn
        self.beta, self.entropy_coef, self.temperature = beta, entropy_coef, temperature
        self.num_iterations, self.num_mini_batches = num_iterations, num_mini_batches
        self.max_grad_norm, self.fp32_lm_head = max_grad_norm, fp32_lm_head
        self.value_head, self.value_loss_fn, self.vf_coef = value_head, value_loss_fn, vf_coef
        self.entropy_rule = entropy_rule                                  # an ENTROPY_BONUSES entry (TRL's by default)
        # the train/rollout mismatch: bound ROLLOUT_CORRECTIONS entries; pi_old := mu (verl's bypass mode)
        self.corrections, self.bypass_mode = tuple(corrections), bool(bypass_mode)
        self.use_bias_correction_kl = bool(use_bias_correction_kl)        # KL x pi / pi_old (TRL's default)
        self.loss_inputs = extra_inputs(loss_fn)                          # e.g. DPPO top-K's tensors
        # which tokens the policy gradient reaches (TRL's top_entropy_quantile); every valid token by default
        self.token_mask = token_mask if token_mask is not None else partial(top_entropy_mask, top_entropy_quantile=1.0)
        self.generator = generator if generator is not None else torch.Generator().manual_seed(0)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def mini_batches(self, batch: Batch) -> list[torch.Tensor]:
        """Row indices of each mini-batch: whole groups, shuffled (prompt-level losses need whole groups). A batch
        with fewer groups than ``num_mini_batches`` (dynamic sampling may refill only a few) gets one group per
        mini-batch."""
        groups = torch.randperm(batch.P, generator=self.generator)        # (P,)
        rows = groups[:, None] * batch.group_size + torch.arange(batch.group_size)  # (P, G)
        return [r.flatten() for r in torch.tensor_split(rows, min(self.num_mini_batches, batch.P))]

    def step(self, batch: Batch) -> UpdateStats:
        own_old = (batch.old_logp is None and self.on_policy) or self.bypass_mode  # pi_old not from the Sampler
        mu = ["rollout_logp"] if self.corrections or self.bypass_mode else []   # the sampler's own log-probs
        require(batch, ["adv", "mask", "prompt_ids", "completion_ids"] + mu + ([] if own_old else ["old_logp"])
                + (["old_values", "returns"]
                if self.value_head is not None else []), "Updater",
                extras=[POLICY_INPUTS.get(n, n) for n in self.loss_inputs])  # top-K log-probs come from topk_ids
        empty = ~batch.mask.bool().any(-1)                                  # (B,)
        if empty.any():  # the Sampler always writes EOS or a token; to drop a row, set keep=False
            raise ValueError(f"batch.mask: expected at least one completion token per row (EOS counts), got "
                             f"all-masked rows {torch.nonzero(empty).flatten()[:10].tolist()}; use keep=False to drop rows")
        if self.beta > 0 and batch.ref_logp is None:
            raise ValueError("batch.ref_logp: expected reference log-probs when beta > 0 (give the Sampler a ref_model)")
        self.model.train()
        sums, n, last = {}, 0, {}
        for _ in range(self.num_iterations):
            last = {}
            for rows in self.mini_batches(batch):
                out = self._one_step(batch.select(rows).to(self.device), rows)
                for k, v in out["scalars"].items():
                    sums[k] = sums.get(k, 0.0) + v
                n += 1
                last[rows] = out["tokens"]
        self.optimizer.zero_grad(set_to_none=True)  # gradients are not state: free them between steps
        means = {k: v / n for k, v in sums.items()}
        extra = {key: means.pop(key) for key in list(means) if "/" in key}  # TRL-named metrics (sampling/...)
        stats = self._stats(batch, means, n, last)
        stats.extra.update(extra)
        return stats

    @property
    def on_policy(self) -> bool:
        """One optimizer step per batch: the policy differentiated is the one that sampled, so pi_old can
        come from the update's own forward (``logp.detach()``) and the ratio is exactly 1."""
        return self.num_iterations == 1 and self.num_mini_batches == 1

    def loss(self, mb: Batch, rows: torch.Tensor | None = None) -> MiniBatchLoss:
        """The loss of one mini-batch as named zoo terms:
        total = agg(pg) + beta * agg(kl) - entropy_coef * H_bar [+ vf_coef * agg(value)], H_bar the
        ``entropy_rule``'s average (TRL's token mean over the pushed tokens by default)."""
        rows = torch.arange(mb.B) if rows is None else rows               # mini-batch row -> batch row
        fw, parts = self._policy_parts(mb)                                # logp, entropy (b, T)
        _finite("logits", fw.logp, rows, "the current policy's log-probs")
        old = self.old_logp(mb, fw.logp)                                  # (b, T) see on_policy, bypass_mode
        c = compose(self.corrections, fw.logp, fw.logp.detach() if self.bypass_mode else old, mb.rollout_logp,
                    mb.adv, loss_mask(mb))                                # rollout IS weight, gate, keep (b, T)
        m = loss_mask(mb) * c.keep                                        # (b, T) tokens in the loss
        agg = partial(self.agg_fn, group_size=mb.group_size)              # (b, T), (b, T) -> scalar
        out, weight = self._policy_loss(fw, mb, old, m, c)                # LossOut, (b, T) the correction on it
        pushed = self.token_mask(fw.entropy, m).to(m.dtype)              # (b, T) tokens the gradient reaches
        measured = mb.ref_logp is not None and self.kl_fn is not None     # KL is logged whenever it can be
        kl_t = self.kl_fn(fw.logp, mb.ref_logp) * m if measured else None  # (b, T)
        if measured and self.use_bias_correction_kl:
            kl_t = importance_corrected_kl(kl_t, fw.logp, old)
        terms = {
            "pg": agg(out.loss * pushed * weight, m),  # the denominator still counts every token (TRL's rule)
            "kl": self.beta * agg(kl_t, m) if self.beta else _zero(fw.logp),
            "entropy": entropy_bonus(fw.entropy, m, agg, pushed, entropy_coef=self.entropy_coef, rule=self.entropy_rule),
        }
        if self.value_head is not None:  # PPO's critic, trained on the same hidden states
            terms["value"] = self.vf_coef * agg(self.value_loss_fn(fw.values, mb.old_values, mb.returns, m).loss, m)
        return MiniBatchLoss(sum(terms.values()), terms, out, fw.entropy.detach(), kl_t, m, old, c, parts)

    def _policy_loss(self, fw, mb: Batch, old: torch.Tensor, m: torch.Tensor, c) -> tuple:
        """The per-token LossOut and the rollout correction's (b, T) factor on it: gate x IS weight, or the gate
        alone for a loss that folds the IS weights into itself (VESPO, ``folds_is_weight``: TRL's rule)."""
        folds = getattr(getattr(self.loss_fn, "func", self.loss_fn), "folds_is_weight", False)
        given = {"is_weight": c.is_weight} if folds else {}
        out = self.loss_fn(fw.logp, old, mb.adv, m, **self._inputs(fw, mb), **given)
        return out, c.gate * (1.0 if folds else c.is_weight)

    def old_logp(self, mb: Batch, logp: torch.Tensor) -> torch.Tensor:
        """(b, T) pi_old: the sampler's mu in bypass mode, else the Sampler's recompute, else (on-policy) the
        update's own log-probs, detached."""
        if self.bypass_mode:
            return mb.rollout_logp
        return mb.old_logp if mb.old_logp is not None else logp.detach()

    def policy(self, mb: Batch) -> PolicyOut:
        """The current policy's per-token log-probs and entropy (and values, and the log-probs of the
        rollout's top-K tokens when the loss reads them) on the mini-batch's completions."""
        return self._policy_parts(mb)[0]

    def _policy_parts(self, mb: Batch) -> tuple[PolicyOut, list | None]:
        """``policy(mb)`` and, when it ran as row parts on parallel threads (``rlnb.models.row_split``), each
        part's output (None: one call)."""
        given = {arg: mb.extras[arg] for out, arg in POLICY_INPUTS.items() if out in self.loss_inputs}
        opts = forward_options.current()             # a pool thread does not inherit this thread's options

        def forward(r):
            return completion_logprobs(
                self.model, mb.prompt_ids[r], mb.prompt_mask[r], mb.completion_ids[r], mb.mask[r],
                temperature=self.temperature, entropy=True, fp32_lm_head=self.fp32_lm_head,
                value_head=self.value_head, options=opts, **{k: v[r] for k, v in given.items()})

        # rows whose gradient is exactly zero (advantage 0 everywhere) run without a graph (rlnb.stages.live_rows)
        return live_rows.run(forward, self.model, mb, live_rows.live(self, mb, loss_mask(mb)), opts.rows)

    def _inputs(self, fw, mb: Batch) -> dict:
        """The extra tensors the loss reads: the current policy's output of that name, else the batch's."""
        return {n: getattr(fw, n) if getattr(fw, n, None) is not None else mb.extras[n] for n in self.loss_inputs}

    def _one_step(self, mb: Batch, rows: torch.Tensor) -> dict:
        res = self.loss(mb, rows)
        total, terms, out, ent, kl_t, m, old, corr = res[:8]
        tokens = m.sum().clamp(min=1)
        grad_norm = 0.0
        if m.sum() > 0:  # a mini-batch whose rows were all filtered out contributes no step
            if not torch.isfinite(total):
                _finite("loss", out.loss * m, rows, "the per-token policy loss")
                raise ValueError(f"loss: expected a finite loss, got {total.item()} (from the KL, entropy or "
                                 "value terms; the per-token policy loss is finite)")
            self.optimizer.zero_grad(set_to_none=True)
            params = [p for group in self.optimizer.param_groups for p in group["params"] if p.requires_grad]
            if res.parts is None:
                total.backward()
            else:                                                        # each part's backward on its own thread
                row_split.backward(total, res.parts, params)
            params = [p for p in params if p.grad is not None]
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm or float("inf")))
            if not math.isfinite(grad_norm):  # stepping would write NaN into every weight
                raise ValueError(f"grad_norm: expected a finite gradient norm, got {grad_norm} (rows {rows.tolist()[:10]})")
            self.optimizer.step()
            if self.scheduler is not None:
                self.scheduler.step()
        mean = lambda x: float((x.float() * m).sum() / tokens)  # noqa: E731  token-mean over the loss mask
        scalars = {
            "loss": total.item(), "pg_loss": terms["pg"].item(), "entropy": mean(ent),
            "kl": mean(kl_t.detach()) if kl_t is not None else 0.0, "clip_low": mean(out.clipped_low),
            "clip_high": mean(out.clipped_high), "clip_region": mean(out.clipped_low | out.clipped_high),
            "grad_norm": grad_norm,
        }
        if mb.rollout_logp is not None:  # train/rollout mismatch: |trainer's pi_old - sampler's| per token
            diff = ((old - mb.rollout_logp).abs() * m)
            scalars.update({MISMATCH["logp_diff_mean"]: mean(diff),
                            MISMATCH["logp_diff_max"]: float(diff.max()) if m.sum() > 0 else 0.0})
        if self.corrections:
            scalars.update(correction_metrics(corr, loss_mask(mb)))  # shares of the tokens before rejection
        per_token = {"old_logp": old if mb.old_logp is None else None, "ratio": out.ratio, "clipped_low": out.clipped_low, "clipped_high": out.clipped_high,
                     "token_entropy": ent, "token_kl": None if kl_t is None else kl_t.detach(), "weight": out.weight}
        return {"scalars": scalars, "tokens": per_token}

    def _stats(self, batch: Batch, means: dict, n: int, last: dict) -> UpdateStats:
        full = {}
        for rows, toks in last.items():
            for k, v in toks.items():
                if v is None:
                    continue
                if k not in full:
                    full[k] = torch.zeros((batch.B,) + tuple(v.shape[1:]), dtype=v.dtype)
                full[k][rows] = v.detach().cpu()
        lr = self.optimizer.param_groups[0]["lr"]
        return UpdateStats(**means, lr=lr, num_updates=n, **full)


# the train/rollout mismatch under TRL's names (TRL logs them when it corrects for vLLM's sampling)
MISMATCH = {"logp_diff_mean": "sampling/sampling_logp_difference/mean",
            "logp_diff_max": "sampling/sampling_logp_difference/max"}


def loss_mask(batch: Batch) -> torch.Tensor:
    """(B, T) float: completion tokens of the rows the filters keep (dropped rows are all zero)."""
    keep = batch.keep if batch.keep is not None else torch.ones(batch.B, dtype=torch.bool, device=batch.mask.device)
    return batch.mask * keep[:, None].to(batch.mask.dtype)


def _zero(like: torch.Tensor) -> torch.Tensor:
    return like.new_zeros(())


def _finite(arg: str, x: torch.Tensor, rows: torch.Tensor, what: str) -> None:
    """Raise naming the batch rows (``rows`` maps mini-batch rows to batch rows) where ``x`` is not finite."""
    bad = ~torch.isfinite(x).reshape(x.shape[0], -1).all(-1)            # (b,)
    if bad.any():
        raise ValueError(f"{arg}: {what} hold NaN or inf in batch rows {rows[bad.cpu()].tolist()[:10]}")
