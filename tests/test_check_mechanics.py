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
    assert check.clip_weight(clip_weight_solution) is True
    assert check.k3_pull(lambda d: d.neg().exp() - 1) is True
    assert check.per_token_weight(per_token_weight_solution) is True


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
    assert check.k3_pull(lambda d: 1 - torch.exp(-d), strict=False) is False
    assert "wrong sign" in capsys.readouterr().out


def test_per_token_weight_names_the_mistake(capsys):
    assert check.per_token_weight(lambda n, name, L: 1 / (len(n) * n.double()), strict=False) is False
    assert "seq-mean-token-mean for every normaliser" in capsys.readouterr().out
