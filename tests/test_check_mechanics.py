"""The chapter 05/06/08 checkers accept independent correct solutions, reject wrong ones, and name the mistake."""

import pytest
import torch

from rlnb import check


def clip_weight_solution(ratio, adv):
    A = adv[:, None].expand_as(ratio)
    keep = torch.where(A > 0, ratio <= 1.28, torch.where(A < 0, ratio >= 0.8, torch.ones_like(ratio, dtype=torch.bool)))
    return torch.where(keep, A * ratio, torch.zeros_like(ratio))


def per_token_weight_solution(lengths, normaliser, L):
    n = lengths.double()
    denom = {"token-mean": n.sum() * torch.ones_like(n), "seq-mean-token-mean": len(n) * n,
             "seq-mean-token-sum-norm": torch.full_like(n, len(n) * L)}[normaliser]
    return 1 / denom


def test_correct_solutions_pass():
    assert check.clip_weight(clip_weight_solution)
    assert check.k3_pull(lambda d: d.neg().exp() - 1)
    assert check.per_token_weight(per_token_weight_solution)


@pytest.mark.parametrize("wrong, hint", [
    (lambda r, a: a[:, None] * r * ((r >= 0.8) & (r <= 1.28)), "one-sided"),
    (lambda r, a: a[:, None] * r + 0 * r, "constant: weight 0"),
    (lambda r, a: clip_weight_solution(r, a) / r.clamp(min=1e-9), "carries the ratio"),
])
def test_clip_weight_names_the_mistake(wrong, hint, capsys):
    with pytest.raises(AssertionError, match="clip_weight: case"):
        check.clip_weight(wrong)
    assert hint in capsys.readouterr().out


def test_k3_pull_names_the_mistake(capsys):
    assert not check.k3_pull(lambda d: 1 - torch.exp(-d), strict=False)
    assert "wrong sign" in capsys.readouterr().out


def test_per_token_weight_names_the_mistake(capsys):
    assert not check.per_token_weight(lambda n, name, L: 1 / (len(n) * n.double()), strict=False)
    assert "seq-mean-token-mean for every normaliser" in capsys.readouterr().out


def test_online_logsumexp_and_final_number_name_the_mistake(capsys):
    def no_rescale(x, block):
        m, s = torch.full(x.shape[:1], -3.0e38, dtype=x.dtype), torch.zeros(x.shape[:1], dtype=x.dtype)
        for i in range(0, x.shape[1], block):
            z = x[:, i:i + block]
            m_new = torch.maximum(m, z.max(1).values)
            s = s + torch.exp(z - m_new[:, None]).sum(1)             # forgot to rescale by exp(m - m_new)
            m = m_new
        return m + torch.log(s)

    assert not check.online_logsumexp(no_rescale, strict=False)
    assert "rescaled" in capsys.readouterr().out
    import re

    from rlnb.tasks.gsm8k import final_number

    def first_number(text):                                           # the first number, otherwise done right
        found = re.findall(r"-?[0-9][0-9,]*(?:\.[0-9]+)?", text.rsplit("####", 1)[-1])
        return final_number(found[0]) if found else None

    assert not check.final_number(first_number, strict=False)
    assert "last number" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (lambda mu, mb, off: mu > 1 or off, "mini-batches reuse the batch"),
    (lambda mu, mb, off: mu > 1 or mb > 1, "another policy's log-probs"),
    (lambda mu, mb, off: mu > 1, "any update happens before the batch is scored again"),
])
def test_clip_can_fire_accepts_an_independent_solution_and_names_the_mistake(wrong, hint, capsys):
    assert check.clip_can_fire(lambda mu, mb, off: not (mu == 1 and mb == 1 and not off))
    assert not check.clip_can_fire(wrong, strict=False)
    assert hint in capsys.readouterr().out
