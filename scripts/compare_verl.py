"""rlnb's entries against verl 0.9.1's own functions, on random inputs: the largest difference per entry.

verl is not a dependency: fetch its wheel and unpack it, then point this script at it.

    python -m pip download verl==0.9.1 --no-deps -d /tmp/verl
    unzip -q /tmp/verl/verl-0.9.1-py3-none-any.whl -d /tmp/verl/src
    PYTHONPATH=. python scripts/compare_verl.py /tmp/verl/src

verl's heavy imports (ray, omegaconf, tensordict, ...) are replaced by empty stand-ins (``rlnb.export.verl_import``):
only the pure tensor functions of ``verl/trainer/ppo/core_algos.py`` run. Covers the entries of issue 32 (gdpo,
gpg, the optimal token baselines, dro, k1+, abs+); "expected" rows are conventions rlnb documents.
"""

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from rlnb.export.verl_import import import_verl  # noqa: E402


def main(verl_src: str) -> dict:
    V = import_verl(verl_src, stub="all", modules=("verl.trainer.ppo.core_algos",))["verl.trainer.ppo.core_algos"]

    from rlnb.algos import ADVANTAGES, KL_ESTIMATORS, POLICY_LOSSES

    g = torch.Generator().manual_seed(0)
    P, G, T = 6, 4, 7
    B = P * G
    index = np.repeat(np.arange(P), G)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T) < lengths[:, None]).float()
    last = lambda r, L: torch.zeros(B, T).index_put_((torch.arange(B), L - 1), r)  # noqa: E731  outcome reward
    out = {}
    correct, fmt = torch.randint(0, 2, (B,), generator=g).float(), torch.randint(0, 2, (B,), generator=g).float()
    total = correct + 0.5 * fmt
    batch = {"prompts": torch.zeros(B, 3), "attention_mask": torch.cat([torch.ones(B, 3), mask], 1).long()}
    va, _ = V.compute_gdpo_outcome_advantage(last(total, lengths), mask, index,
                                             config={"gdpo_reward_keys": ["c", "f"], "gdpo_reward_weights": [1.0, 0.5]},
                                             non_tensor_batch={"c": correct.numpy(), "f": fmt.numpy()}, batch=batch)
    ra = ADVANTAGES["gdpo"](total, G, {"correct": correct, "format": fmt}, torch.tensor([1.0, 0.5]), mask)
    out["gdpo"] = (va - ra[:, None] * mask).abs().max()
    r = torch.tensor([1., 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 0])  # 2 groups saturated:
    # 11 nonzero rewards (verl's count) against B - M = 16 informative rows (the paper's)
    va, _ = V.compute_gpg_outcome_advantage(last(r, lengths), mask, index)
    out["gpg (gpg_alpha_nonzero=True)"] = (va - ADVANTAGES["gpg"](r, G, gpg_alpha_nonzero=True)[:, None] * mask).abs().max()
    out["gpg (paper's alpha; expected to differ)"] = (va - ADVANTAGES["gpg"](r, G)[:, None] * mask).abs().max()
    lp = torch.log(torch.rand(B, T, generator=g).clamp(min=0.05)) * mask
    s2 = (torch.rand(B, T, generator=g) * 0.9 + 0.1) * mask
    r = torch.randn(B, generator=g)
    for name, fn in (("optimal_token_baseline", V.compute_optimal_token_baseline_advantage),
                     ("tir_optimal_token_baseline", V.compute_multi_turn_optimal_token_baseline_advantage)):
        for tail in (True, False):
            va, _ = fn(last(r, lengths), mask, index, lp, s2, handle_zero_tail=tail)
            out[f"{name} (handle_zero_tail={tail})"] = (va - ADVANTAGES[name](r, G, lp, s2, mask,
                                                                            handle_zero_tail=tail)).abs().max()
    holes = mask.clone()
    holes[::3, 1] = 0                                                  # tool-output tokens inside completions
    holes[:, 0] = 1
    ends = (holes * torch.arange(T)).argmax(-1) + 1
    va, _ = V.compute_multi_turn_optimal_token_baseline_advantage(last(r, ends), holes, index, lp * holes, s2 * holes)
    out["tir_optimal_token_baseline (masks with holes)"] = (va - ADVANTAGES["tir_optimal_token_baseline"](
        r, G, lp * holes, s2 * holes, holes)).abs().max()
    adv, old = torch.randn(B, generator=g), torch.log(torch.rand(B, T, generator=g).clamp(min=0.05))
    for beta in (0.1, 1.0):
        x1 = (old + 0.3 * torch.randn(B, T, generator=g)).requires_grad_()
        x2 = x1.detach().clone().requires_grad_()
        cfg = SimpleNamespace(policy_loss=SimpleNamespace(dro_beta=beta), global_batch_info={})
        lv, _ = V.compute_policy_loss_dro(old, x1, adv[:, None].expand(B, T), mask, "token-mean", cfg)
        lr = POLICY_LOSSES["dro"](x2, old, adv, mask, dro_beta=beta).loss.sum() / mask.sum()  # token-mean
        (lv + lr).backward()
        out[f"dro (dro_beta={beta}) loss"] = (lv - lr).abs().detach()
        out[f"dro (dro_beta={beta}) gradient"] = (x1.grad - x2.grad).abs().max()
    for name in ("k1+", "abs+"):
        x1 = torch.randn(B, T, generator=g).requires_grad_()
        x2 = x1.detach().clone().requires_grad_()
        ref = torch.randn(B, T, generator=g)
        kv, kr = V.kl_penalty(x1, ref, name), KL_ESTIMATORS[name](x2, ref)
        (kv.sum() + kr.sum()).backward()
        out[f"{name} value"], out[f"{name} gradient"] = (kv - kr).abs().max().detach(), (x1.grad - x2.grad).abs().max()
    return {k: float(v) for k, v in out.items()}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    for key, diff in main(sys.argv[1]).items():
        print(f"{key:50s} max |rlnb - verl| = {diff:.3g}")
