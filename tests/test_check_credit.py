"""The chapter-09 checkers: the solutions pass, and each common mistake gets its hint."""

import torch

import rlnb.check


def test_mc_value_accepts_the_solution_and_names_the_mistakes(capsys):
    def right(rewards, final, lengths):
        t = torch.arange(rewards.shape[1])
        return torch.where(t[None, :] >= lengths[:, None], final[:, None], rewards.float().mean(-1))

    assert rlnb.check.mc_value(right)
    assert not rlnb.check.mc_value(lambda r, f, n: r.float().mean(-1), strict=False)
    assert "its value is its own reward" in capsys.readouterr().out
    off = lambda r, f, n: torch.where(torch.arange(r.shape[1])[None, :] > n[:, None], f[:, None], r.float().mean(-1))  # noqa: E731
    assert not rlnb.check.mc_value(off, strict=False)
    assert "off by one" in capsys.readouterr().out


def test_token_credit_accepts_the_solution_and_names_the_mistakes(capsys):
    assert rlnb.check.token_credit(lambda v, m: (v[:, 1:] - v[:, :-1]) * m)
    assert not rlnb.check.token_credit(lambda v, m: (v[:, :-1] - v[:, 1:]) * m, strict=False)
    assert "sign" in capsys.readouterr().out
    assert not rlnb.check.token_credit(lambda v, m: v[:, 1:] - v[:, :-1], strict=False)
    assert "mask" in capsys.readouterr().out
