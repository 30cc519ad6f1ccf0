"""A compact view of a ``Batch``: which fields the stages have written so far, and its first rows.

Notebook 00 shows the batch after each stage; the full ``Batch`` table (up to 64 rows) is too long for that.
``BatchView(batch)`` shows the first ``rows`` rows (one group, by default) and "... N more", with only the
columns the batch already has, so each stage's new column is the one that appears.
"""

from __future__ import annotations

import dataclasses
import html

# (column, the Batch field it needs): a column appears once a stage has written its field.
COLUMNS = (("prompt", "prompts"), ("completion", "completions"), ("tokens", "mask"), ("old log π", "old_logp"),
           ("reward", "rewards"), ("correct", "correct"), ("A", "adv"))


class BatchView:
    """``BatchView(batch, rows=8)``: the fields filled so far and the first ``rows`` rows, as an HTML table.

    ``str(view)`` is the same as plain text (for terminals and tests).
    """

    def __init__(self, batch, rows: int = 8):
        if not isinstance(rows, int) or isinstance(rows, bool) or rows < 1:
            raise ValueError(f"rows: expected an int >= 1, got {rows!r}")
        if not dataclasses.is_dataclass(batch) or not hasattr(batch, "prompts"):
            raise TypeError(f"batch: expected an rlnb.Batch, got {type(batch).__name__}")
        self.batch, self.rows = batch, rows

    def filled(self) -> list[str]:
        """The names of the Batch fields that are set (not None, not empty)."""
        return [f.name for f in dataclasses.fields(self.batch) if getattr(self.batch, f.name) not in (None, [], {})]

    def table(self) -> tuple[list[str], list[list[str]]]:
        """(header, rows of cells) for the first ``rows`` rows, only the columns the batch already has."""
        b, have = self.batch, set(self.filled())
        cols = [(name, field) for name, field in COLUMNS if field in have]
        out = []
        for i in range(min(self.rows, b.B)):
            out.append([self._cell(field, i) for _, field in cols])
        return [name for name, _ in cols], out

    def _cell(self, field: str, i: int) -> str:
        b = self.batch
        if field in ("prompts", "completions"):
            return getattr(b, field)[i]
        if field == "mask":
            return str(int(b.mask[i].sum()))
        if field == "old_logp":
            return f"{float(b.old_logp[i].sum()):.2f}"                      # log π of the whole completion
        if field == "rewards":
            return f"{float(b.rewards[i]):.2f}"
        if field == "correct":
            return "✓" if bool(b.correct[i]) else "✗"
        a = b.adv[i]
        a = a[b.mask[i].bool()].mean() if a.dim() else a                    # per-token advantages: their mean
        return f"{float(a):+.2f}"

    def summary(self) -> str:
        b = self.batch
        return f"Batch: P={b.P} prompts x G={b.group_size} = B={b.B} rows; fields set: {', '.join(self.filled())}"

    def more(self) -> str:
        n = self.batch.B - min(self.rows, self.batch.B)
        return f"... {n} more rows" if n else ""

    def _repr_html_(self) -> str:
        head, rows = self.table()
        th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
        body = "".join("<tr>" + "".join(f"<td><code>{html.escape(c)}</code></td>" for c in r) + "</tr>" for r in rows)
        more = f"<p>{self.more()}</p>" if self.more() else ""
        return f"<p><b>{html.escape(self.summary())}</b></p><table><tr>{th}</tr>{body}</table>{more}"

    def __str__(self) -> str:
        head, rows = self.table()
        lines = [self.summary(), " | ".join(head)] + [" | ".join(r) for r in rows]
        return "\n".join(lines + ([self.more()] if self.more() else []))

    __repr__ = __str__
