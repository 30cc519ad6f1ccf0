"""``Batch``: the one inspectable object that flows through Sampler -> Rewarder -> Advantager -> Updater.

Shapes: ``P`` prompts, ``G`` completions per prompt, ``B = P * G`` rows with each prompt's group
contiguous, ``Tp`` prompt tokens (left-padded), ``T`` completion tokens (right-padded).

The batch is frozen: each stage returns ``batch.replace(...)`` with only the fields it owns, so the
batches of earlier steps stay intact and widgets can scrub back through them.
"""

from __future__ import annotations

import dataclasses
import html
from dataclasses import dataclass, field

import torch

from rlnb.core.batch_checks import MADE_BY, check_batch


@dataclass(frozen=True, eq=False)
class Batch:
    # --- prompts (written when the batch is made) -----------------------------------------------
    prompts: list[str]                         # (B,) prompt text of each row, repeated G times
    answers: list[str]                         # (B,) reference answer of each row
    prompt_index: torch.Tensor                 # (B,) long: row's prompt in the training pool
    group_size: int                            # G
    # --- Sampler --------------------------------------------------------------------------------
    prompt_ids: torch.Tensor | None = None     # (B, Tp) long, left-padded
    prompt_mask: torch.Tensor | None = None    # (B, Tp) long, 1 on real prompt tokens
    completion_ids: torch.Tensor | None = None # (B, T) long, pad after EOS
    mask: torch.Tensor | None = None           # (B, T) float, 1 on generated tokens up to and incl. EOS
    truncated: torch.Tensor | None = None      # (B,) bool, True where no EOS within max_new_tokens
    completions: list[str] | None = None       # (B,) decoded completion text
    old_logp: torch.Tensor | None = None       # (B, T) fp32, log pi_old(o_t) at sampling time
    rollout_logp: torch.Tensor | None = None   # (B, T) fp32, log pi_old(o_t) as the sampling pass computed it
    ref_logp: torch.Tensor | None = None       # (B, T) fp32, log pi_ref(o_t); only when beta > 0
    old_values: torch.Tensor | None = None     # (B, T) fp32, critic's V(s_t) at sampling (PPO only)
    # --- Rewarder -------------------------------------------------------------------------------
    rewards: torch.Tensor | None = None        # (B,) fp32, weighted sum of the parts
    reward_parts: dict[str, torch.Tensor] | None = None  # name -> (B,) fp32, each reward function
    correct: torch.Tensor | None = None        # (B,) bool, the task verifier's verdict
    # --- Advantager -----------------------------------------------------------------------------
    adv: torch.Tensor | None = None            # (B,) or (B, T) fp32
    keep: torch.Tensor | None = None           # (B,) bool, rows that enter the loss (filters)
    returns: torch.Tensor | None = None        # (B, T) fp32, GAE returns: the critic's targets (PPO only)
    # --- anything a registry entry needs beyond the above (DPPO's top-K log-probs, ReMax's greedy
    # completions and their rewards): (B, ...) tensors, or lists of B strings ----------------------------
    extras: dict[str, torch.Tensor | list[str]] = field(default_factory=dict)

    def __post_init__(self):
        check_batch(self)  # construction, replace, select and concat all pass through here

    # ---------------------------------------------------------------------------------------------
    @classmethod
    def from_rows(cls, rows: dict, group_size: int, prompt_index=None) -> Batch:
        """A prompt-only batch: each of the P rows (``{"prompt": [...], "answer": [...]}``) G times."""
        if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size < 1:
            raise ValueError(f"group_size: expected a positive int (G), got {group_size!r}")
        try:
            prompts, answers = list(rows["prompt"]), [str(a) for a in rows["answer"]]
        except (KeyError, TypeError, IndexError) as e:
            raise KeyError(f"rows: expected a mapping with 'prompt' and 'answer' columns ({e!r})") from None
        if not all(isinstance(p, str) for p in prompts):
            raise TypeError("rows['prompt']: expected strings")
        if not prompts or len(prompts) != len(answers):
            raise ValueError(f"rows: expected as many answers as prompts (>0), got {len(prompts)} and {len(answers)}")
        idx = torch.arange(len(prompts)) if prompt_index is None else torch.as_tensor(prompt_index).long()
        if idx.shape != (len(prompts),):
            raise ValueError(f"prompt_index: expected {len(prompts)} indices (one per prompt), got shape {tuple(idx.shape)}")
        rep = lambda xs: [x for x in xs for _ in range(group_size)]  # noqa: E731
        return cls(rep(prompts), rep(answers), idx.repeat_interleave(group_size), group_size)

    def replace(self, **changes) -> Batch:
        """A new batch with ``changes``; the fields are checked for consistent shapes."""
        return dataclasses.replace(self, **changes)

    @property
    def B(self) -> int:
        return len(self.prompts)

    @property
    def P(self) -> int:
        return self.B // self.group_size

    @property
    def lengths(self) -> torch.Tensor:
        """(B,) number of completion tokens, EOS included."""
        return self.mask.sum(-1).long()

    def select(self, rows: torch.Tensor) -> Batch:
        """The sub-batch of ``rows`` (a (b,) long tensor); tensors and lists are indexed alike."""
        rows = torch.as_tensor(rows)
        if rows.dim() != 1 or rows.is_floating_point() or rows.dtype == torch.bool:
            raise TypeError(f"rows: expected a 1-D tensor or list of int row indices, got {tuple(rows.shape)} "
                            f"{rows.dtype}")
        rows = rows.long()
        if len(rows) and (int(rows.min()) < -self.B or int(rows.max()) >= self.B):
            raise ValueError(f"rows: expected indices in [0, {self.B}) (B = {self.B}), got "
                             f"{[r for r in rows.tolist() if not -self.B <= r < self.B][:5]}")
        pick = lambda v: v[rows] if isinstance(v, torch.Tensor) else [v[i] for i in rows.tolist()]  # noqa: E731
        changes = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, (torch.Tensor, list)):
                changes[f.name] = pick(v)
            elif isinstance(v, dict):
                changes[f.name] = {k: pick(x) for k, x in v.items()}
        return dataclasses.replace(self, **changes)

    def to(self, device) -> Batch:
        """The batch with every tensor on ``device`` (the Updater moves each mini-batch to the model's
        device; the batch itself stays on the CPU, where widgets and history read it)."""
        move = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
        changes = {f.name: move(getattr(self, f.name)) for f in dataclasses.fields(self)}
        changes["extras"] = {k: move(v) for k, v in self.extras.items()}
        if self.reward_parts is not None:
            changes["reward_parts"] = {k: move(v) for k, v in self.reward_parts.items()}
        return dataclasses.replace(self, **changes)

    @classmethod
    def concat(cls, batches: list[Batch]) -> Batch:
        """Stack batches row-wise (dynamic sampling's rounds): prompts re-padded on the left,
        completions on the right, so every row keeps its meaning."""
        if not batches or len({b.group_size for b in batches}) != 1:
            raise ValueError("batches: expected a non-empty list of batches with the same group_size")
        changes = {}
        for f in dataclasses.fields(cls):
            vals = [getattr(b, f.name) for b in batches]
            if len({v is None for v in vals}) > 1:  # e.g. a sampled batch and a prompt-only one
                raise ValueError(f"batches: field {f.name!r} is set in some batches and None in others; expected "
                                 "batches from the same stage (all sampled, or all rewarded, ...)")
            if f.name == "group_size" or vals[0] is None:
                continue
            if isinstance(vals[0], list):
                changes[f.name] = [x for v in vals for x in v]
            elif isinstance(vals[0], dict):  # extras: tensors, or lists of B strings (greedy completions)
                changes[f.name] = {k: [x for v in vals for x in v[k]] if isinstance(vals[0][k], list)
                                   else _pad_cat([v[k] for v in vals], f.name) for k in vals[0]}
            else:
                changes[f.name] = _pad_cat(vals, f.name)
        return dataclasses.replace(batches[0], **changes)

    def _cells(self, i: int) -> list[str]:
        """Row ``i`` as text: prompt, completion, reward, advantage (a per-token one: its mean), length."""
        comps = self.completions or [""] * self.B
        r = f"{float(self.rewards[i]):.2f}" if self.rewards is not None else ""
        a = self.adv[i] if self.adv is not None else None
        a = f"{float(a if a.dim() == 0 else a[self.mask[i].bool()].mean()):+.2f}" if a is not None else ""
        n = str(int(self.lengths[i])) if self.mask is not None else ""
        return [str(i), self.prompts[i], comps[i], r, a, n]

    def signal_group(self) -> int:
        """The first group with both a right and a wrong answer (0 when none has, or nothing is rewarded yet)."""
        if self.correct is None:
            return 0
        c = self.correct.view(-1, self.group_size)                          # (P, G)
        mixed = (c.any(1) & ~c.all(1)).nonzero()
        return int(mixed[0]) if len(mixed) else 0

    def table(self, group: int | None = None) -> str:
        """One group as plain text (for a terminal): prompt, completion, reward, advantage, length; by default
        the first group with both right and wrong answers (``signal_group``), where the advantages differ."""
        g = self.signal_group() if group is None else group
        if not 0 <= g < self.P:
            raise ValueError(f"group: expected 0..{self.P - 1}, got {g!r}")
        rows = [self._cells(i) for i in range(g * self.group_size, (g + 1) * self.group_size)]
        head = ["#", "prompt", "completion", "reward", "adv", "len"]
        width = [max(len(r[k]) for r in rows + [head]) for k in range(len(head))]
        line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, width)).rstrip()  # noqa: E731
        return "\n".join([f"group {g} of {self.P} (G = {self.group_size})", line(head)] + [line(r) for r in rows])

    def _repr_html_(self) -> str:
        """The first group as a table (at most 12 rows), the other rows folded under "N more rows"; right and
        wrong rows tinted with translucent colours that read in light and dark themes."""
        head = "<tr><th>#</th><th>prompt</th><th>completion</th><th>reward</th><th>adv</th><th>len</th></tr>"
        tint = {True: "rgba(0,158,115,0.18)", False: "rgba(213,94,0,0.18)"}

        def rows(idx) -> str:
            out = []
            for i in idx:
                c = [html.escape(x) for x in self._cells(i)]
                bg = "" if self.correct is None else f" style='background:{tint[bool(self.correct[i])]}'"
                out.append(f"<tr{bg}><td>{c[0]}</td><td><code>{c[1]}</code></td><td><code>{c[2]}</code></td>"
                           f"<td>{c[3]}</td><td>{c[4]}</td><td>{c[5]}</td></tr>")
            return "".join(out)

        shown = min(self.group_size, 12, self.B)
        rest = range(shown, self.B)
        more = (f"<details><summary>... {len(rest)} more rows</summary><table>{head}{rows(rest)}</table></details>"
                if len(rest) else "")
        return (f"<p><b>Batch</b> P={self.P} prompts x G={self.group_size} = B={self.B} rows</p>"
                f"<table>{head}{rows(range(shown))}</table>{more}")

    def __repr__(self) -> str:
        filled = [f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None]
        return f"Batch(P={self.P}, G={self.group_size}, B={self.B}, fields={filled})"


def _pad_cat(tensors: list[torch.Tensor], name: str) -> torch.Tensor:
    """Concatenate along rows, zero-padding dim 1 (on the left for prompt fields, which are left-padded)."""
    if tensors[0].dim() < 2:
        return torch.cat(tensors)
    width = max(t.shape[1] for t in tensors)
    left = name.startswith("prompt_")
    padded = []
    for t in tensors:
        pad = [0, 0] * (t.dim() - 2) + ([width - t.shape[1], 0] if left else [0, width - t.shape[1]])
        padded.append(torch.nn.functional.pad(t, pad))
    return torch.cat(padded)


def require(batch, fields, stage: str, extras=()) -> None:
    """``stage`` reads ``fields`` (and ``extras`` entries): raise naming the first one missing and the stage
    that writes it."""
    if not isinstance(batch, Batch):
        raise TypeError(f"batch: {stage}.step expected a Batch, got {type(batch).__name__}")
    for name in fields:
        if getattr(batch, name, None) is None:
            raise ValueError(f"batch.{name}: {stage} needs it, got None (it is written by the "
                             f"{MADE_BY.get(name, 'stage before')}; run that stage first)")
    for name in extras:
        if name not in batch.extras:
            raise ValueError(f"batch.extras[{name!r}]: {stage} needs it for its loss, got none (the Sampler "
                             "writes the top-K entries when topk_logprobs > 0)")
