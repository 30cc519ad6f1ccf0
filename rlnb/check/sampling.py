"""Exercise checkers on generation, answers and evaluation: top-p (01), pass@k (00), the final number of an
answer (15), and the kernel's online logsumexp (14). Reached as ``rlnb.check.<name>``."""

from __future__ import annotations

import torch

from rlnb.check.base import Verdict, compare, with_hints
from rlnb.models.generate import top_p_filter as _top_p_filter
from rlnb.run.evaluate import pass_at_k as _pass_at_k
from rlnb.tasks.gsm8k import final_number as _final_number


def top_p_filter(fn, *, strict: bool = True) -> Verdict:
    """``fn(logits (B, V), top_p) -> logits`` with -inf outside the nucleus."""
    g = torch.Generator().manual_seed(0)
    cases = [(torch.log(torch.tensor([[0.5, 0.3, 0.2]])), 0.7), (torch.randn(4, 9, generator=g), 0.9),
             (torch.randn(2, 5, generator=g), 1.0)]
    return compare("top_p_filter", fn, _top_p_filter, cases, strict=strict)


def pass_at_k(fn, *, strict: bool = True) -> Verdict:
    """``fn(n, c, k) -> float``: unbiased pass@k from n samples with c correct."""
    cases = [(4, 1, 1), (4, 1, 2), (8, 0, 3), (8, 8, 1), (10, 3, 5), (16, 2, 8)]
    hints = [(lambda n, c, k: c / n, "that is pass@1 whatever k is: use 1 - C(n - c, k) / C(n, k)"),
             (lambda n, c, k: 1 - (1 - c / n) ** k, "1 - (1 - c/n)^k samples with replacement and is biased; "
                                                    "count draws without replacement: 1 - C(n - c, k) / C(n, k)")]
    return with_hints("pass_at_k", fn, _pass_at_k, cases, hints, strict)


def final_number(fn, *, strict: bool = True) -> Verdict:
    """``fn(text) -> str | None``: GSM8K's answer: the last number after ``####`` (else in the whole text),
    commas removed, trailing decimal zeros dropped (``3.50`` -> ``3.5``, ``100.00`` -> ``100``); None if
    there is no number. Compared with ``rlnb.tasks.gsm8k.final_number``."""
    texts = ["Mia has 4 * 12 = 48 pencils, gives 9 away: 48 - 9 = 39.\n#### 39", "so 1,200 in total",
             "I do not know.", "", "It costs $1,234.50 in all.", "The answer is 7.", "x = 10. y = 20.5.",
             "It dropped to -3 degrees", "#### 100.00", "5 - 3 = 2, so #### 2", "He pays 0.50 each."]
    import re

    nums = lambda t: re.findall(r"-?[0-9][0-9,]*(?:\.[0-9]+)?", t.rsplit("####", 1)[-1])  # noqa: E731
    hints = [(lambda t: (_final_number(nums(t)[0]) if nums(t) else None),
              "take the last number (the answer comes at the end of the reasoning), not the first"),
             (lambda t: (nums(t)[-1].rstrip("0").rstrip(".") if "." in nums(t)[-1] else nums(t)[-1]) if nums(t) else None,
              "remove the thousands separators: '1,200' is the number 1200"),
             (lambda t: nums(t)[-1].replace(",", "") if nums(t) else None,
              "drop trailing decimal zeros ('3.50' -> '3.5', '100.00' -> '100'): the reference answer is written that way")]
    return with_hints("final_number", fn, _final_number, [(t,) for t in texts], hints, strict)


def online_logsumexp(fn, *, strict: bool = True) -> Verdict:
    """``fn(x (N, V), block) -> (N,)``: log sum_j exp(x_j) per row, reading ``block`` columns at a time.

    Keep a running max m and a running sum s = sum exp(x - m); when a block raises the max to m', rescale
    s by exp(m - m') (the forward of ``rlnb/kernels/token_loss.py``). Cases include logits near 1000
    (exp overflows unless you subtract the max), a ragged last block, a block wider than V, and a row
    whose first block is all -inf (a masked vocabulary: -inf - (-inf) is nan, so start m finite).
    """
    g = torch.Generator().manual_seed(0)
    inf = float("inf")
    cases = [(torch.tensor([[1.0, 3.0, 2.0, 5.0, 0.0, 4.0]], dtype=torch.float64), 2),
             (torch.tensor([[1000.0, 1001.0, 999.0], [-1000.0, -1001.0, -999.0]], dtype=torch.float64), 2),
             (torch.randn(5, 37, generator=g, dtype=torch.float64) * 4, 8),
             (torch.randn(3, 10, generator=g, dtype=torch.float64), 64),
             (torch.tensor([[-inf, -inf, 0.0, 1.0, -inf], [2.0, -inf, -inf, -inf, 1.0]], dtype=torch.float64), 2)]
    hints = [(lambda x, b: torch.stack([x[:, i:i + b].exp().sum(-1) for i in range(0, x.shape[1], b)]).sum(0).log(),
              "exp of a raw logit overflows near 89 in fp32 and 710 in fp64: subtract the running max first"),
             (lambda x, b: _online_lse(x, b, start=-float("inf")),
              "a first block of all -inf gives -inf - (-inf) = nan: start the running max at a finite -3e38"),
             (lambda x, b: _online_lse(x, b, rescale=False),
              "when a block raises the max from m to m', the sum so far must be rescaled by exp(m - m')")]
    return with_hints("online_logsumexp", fn, lambda x, block: torch.logsumexp(x, -1), cases, hints, strict)


def _online_lse(x, block, *, start=-3.0e38, rescale=True):
    """The online logsumexp with one step optionally wrong (the hints' model of a mistake)."""
    m, s = torch.full(x.shape[:1], start, dtype=x.dtype), torch.zeros(x.shape[:1], dtype=x.dtype)
    for i in range(0, x.shape[1], block):
        z = x[:, i:i + block]
        m_new = torch.maximum(m, z.max(1).values)
        s = s * (torch.exp(m - m_new) if rescale else 1) + torch.exp(z - m_new[:, None]).sum(1)
        m = m_new
    return m + torch.log(s)
