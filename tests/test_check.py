"""The notebook exercise checkers accept a correct solution written independently and reject wrong ones."""

import math
import re

import pytest
import torch

from rlnb import check


def _groups(r, G):
    return r.view(-1, G)


def grpo_solution(r, G):
    x = _groups(r, G)
    return ((x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True) + 1e-6)).flatten()


def rloo_solution(r, G):
    x = _groups(r, G)
    return (x - (x.sum(1, keepdim=True) - x) / (G - 1)).flatten()


def maxrl_solution(r, G):
    x = _groups(r, G)
    m = x.mean(1, keepdim=True)
    return ((x - m) / (m + 1e-6)).flatten()


def ppo_solution(ratio, adv):
    A = adv[:, None]
    return torch.maximum(-A * ratio, -A * ratio.clamp(0.8, 1.2))


def k3_solution(logp, ref):
    return torch.exp(ref - logp) + (logp - ref) - 1


def token_mean_solution(loss, mask):
    return (loss * mask).sum() / mask.sum()


def seq_mean_solution(loss, mask):
    return ((loss * mask).sum(1) / mask.sum(1)).mean()


def overlong_solution(n):
    n = n.float()
    return torch.where(n <= 12, 0.0, torch.where(n <= 16, (12 - n) / 4, -1.0))


def pass_at_k_solution(n, c, k):
    return 1 - math.comb(n - c, k) / math.comb(n, k)


def online_lse_solution(x, block):
    m = torch.full(x.shape[:1], -1e300, dtype=x.dtype)                 # finite: -inf - -inf would be nan
    s = torch.zeros(x.shape[:1], dtype=x.dtype)
    for j in range(0, x.shape[1], block):
        z = x[:, j:j + block]
        new = torch.maximum(m, z.max(1).values)
        s = s * torch.exp(m - new) + torch.exp(z - new[:, None]).sum(1)
        m = new
    return m + torch.log(s)


def online_lse_from_minus_inf(x, block):
    """Right except that it starts the running max at -inf: a block of all -inf gives nan."""
    m = torch.full(x.shape[:1], -math.inf, dtype=x.dtype)
    s = torch.zeros(x.shape[:1], dtype=x.dtype)
    for j in range(0, x.shape[1], block):
        z = x[:, j:j + block]
        new = torch.maximum(m, z.max(1).values)
        s = s * torch.exp(m - new) + torch.exp(z - new[:, None]).sum(1)
        m = new
    return m + torch.log(s)


def final_number_solution(text):
    part = text[text.rindex("####") + 4:] if "####" in text else text
    found = re.findall(r"-?[0-9][0-9,]*(?:\.[0-9]+)?", part)
    if not found:
        return None
    n = found[-1].replace(",", "")
    return n.rstrip("0").rstrip(".") if "." in n else n


def dynamic_keep_solution(correct, G):
    n = correct.view(-1, G).sum(1)
    return ((n > 0) & (n < G)).repeat_interleave(G)


def scalerl_solution(C, A, B, C_mid, R0):
    return R0 + (A - R0) / (1 + (C_mid / C) ** B)                     # C = 0: (C_mid / 0)^B = inf, R = R0


CASES = [
    (check.grpo_advantage, grpo_solution, lambda r, G: r - r.mean()),
    (check.rloo_advantage, rloo_solution, grpo_solution),
    (check.maxrl_advantage, maxrl_solution, grpo_solution),
    (check.ppo_clip_loss, ppo_solution, lambda ratio, adv: -adv[:, None] * ratio),
    (check.k3, k3_solution, lambda logp, ref: logp - ref),
    (check.token_mean, token_mean_solution, seq_mean_solution),
    (check.seq_mean_token_mean, seq_mean_solution, token_mean_solution),
    (check.overlong_penalty, overlong_solution, lambda n: torch.zeros(len(n))),
    (check.pass_at_k, pass_at_k_solution, lambda n, c, k: c / n),
    (check.online_logsumexp, online_lse_solution, lambda x, block: x.exp().sum(1).log()),  # overflows at 1000
    (check.online_logsumexp, online_lse_solution, online_lse_from_minus_inf),
    (check.final_number, final_number_solution, lambda t: (re.findall(r"\d+", t) or [None])[-1]),  # 1,200 -> 200
    (check.final_number, final_number_solution, lambda t: float(final_number_solution(t) or 0)),   # not a string
    (check.dynamic_sampling_keep, dynamic_keep_solution,                # keeps all-right groups too
     lambda correct, G: correct.view(-1, G).any(1).repeat_interleave(G)),
    (check.scalerl_curve, scalerl_solution, lambda C, A, B, C_mid, R0: R0 + (A - R0) * C / (C + C_mid)),  # B = 1
]


@pytest.mark.parametrize("checker, right, wrong", CASES, ids=[c[0].__name__ for c in CASES])
def test_checker_accepts_right_and_rejects_wrong(checker, right, wrong, capsys):
    assert checker(right)
    assert "match" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="differs|raised"):
        checker(wrong)


def test_non_strict_mode_reports_instead_of_raising(capsys):
    assert not check.grpo_advantage(lambda r, G: r * 0, strict=False)
    assert "Not yet" in capsys.readouterr().out


def test_hack_share_and_crash_step_accept_the_right_answer_and_name_the_mistake(capsys):
    import torch as _t

    import rlnb.check as ck
    from rlnb.check.runs import _hack_share

    assert ck.hack_share(lambda r, c: float(((r > 0) & ~c).float().mean()))
    assert not ck.hack_share(lambda r, c: float((~c).float().mean()), strict=False)
    assert "wrong *and* paid" in capsys.readouterr().out
    assert ck.crash_step(lambda r, d: next((i for i, x in enumerate(r) if x < max(r[: i + 1]) - d), None))
    assert not ck.crash_step(lambda r, d: next((i for i, x in enumerate(r) if x < r[0] - d), None), strict=False)
    out = capsys.readouterr().out
    assert "running max" in out and "Not yet" in out
    assert _hack_share(_t.tensor([1.0, 0.0]), _t.tensor([False, False])) == 0.5  # by hand: 1 of 2 paid, 0 right


def test_gae_by_hand_and_value_clip_accept_the_right_answer_and_name_the_mistake(capsys):
    import torch as _t

    import rlnb.check as ck
    from rlnb.check.credit import _gae_one

    def gae_ok(r, v, gamma, lam):
        adv, nxt_a, nxt_v = _t.zeros_like(v), 0.0, 0.0
        for t in reversed(range(len(r))):
            nxt_a = r[t] + gamma * nxt_v - v[t] + gamma * lam * nxt_a
            nxt_v = v[t]
            adv[t] = nxt_a
        return adv

    assert ck.gae_by_hand(gae_ok)
    # by hand: r = (0, 0, 1), V = (.5, .25, .75), gamma = lam = 1 -> A_t = 1 - V_t
    assert _gae_one(_t.tensor([0.0, 0.0, 1.0]), _t.tensor([0.5, 0.25, 0.75]), 1.0, 1.0).tolist() == [0.5, 0.75, 0.25]
    assert not ck.gae_by_hand(lambda r, v, g, lam: gae_ok(r, v, g, lam) + v, strict=False)
    assert "return minus V_t" in capsys.readouterr().out
    assert not ck.gae_by_hand(lambda r, v, g, lam: gae_ok(r, v, g, 1.0), strict=False)
    assert "lambda multiplies" in capsys.readouterr().out

    def clip_ok(v, o, R, e):
        return 0.5 * _t.maximum((v - R) ** 2, (o + (v - o).clamp(-e, e) - R) ** 2)

    assert ck.value_clip(clip_ok)
    assert not ck.value_clip(lambda v, o, R, e: 0.5 * _t.minimum((v - R) ** 2, (o + (v - o).clamp(-e, e) - R) ** 2),
                             strict=False)
    assert "max, not min" in capsys.readouterr().out
    assert not ck.value_clip(lambda v, o, R, e: 0.5 * (v - R) ** 2, strict=False)  # forgot the clip: no hint fits
    assert "Not yet" in capsys.readouterr().out
