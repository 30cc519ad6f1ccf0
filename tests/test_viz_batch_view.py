"""rlnb.viz.BatchView: the compact batch view notebook 00 shows after each stage."""

import pytest
import torch

import rlnb


def _batch():
    b = rlnb.Batch.from_rows({"prompt": ["1+2=", "3+4="], "answer": ["3", "7"]}, 3)       # P = 2, G = 3
    mask = torch.tensor([[1, 1, 0]] * 6, dtype=torch.float32)                              # (B, T)
    return b.replace(completion_ids=torch.ones(6, 3, dtype=torch.long), mask=mask,
                     completions=["3", "4", "3", "7", "8", "9"], old_logp=-0.5 * mask,
                     prompt_ids=torch.ones(6, 4, dtype=torch.long), prompt_mask=torch.ones(6, 4, dtype=torch.long),
                     truncated=torch.zeros(6, dtype=torch.bool))


def test_columns_appear_as_the_stages_fill_their_fields():
    b = rlnb.Batch.from_rows({"prompt": ["1+2="], "answer": ["3"]}, 2)
    assert rlnb.viz.BatchView(b).table()[0] == ["prompt"]
    s = _batch()
    head, rows = rlnb.viz.BatchView(s, rows=2).table()
    assert head == ["prompt", "completion", "tokens", "old log π"]
    assert rows == [["1+2=", "3", "2", "-1.00"], ["1+2=", "4", "2", "-1.00"]]
    r = s.replace(rewards=torch.tensor([1.0, 0, 1, 1, 0, 0]), correct=torch.tensor([1, 0, 1, 1, 0, 0]).bool())
    a = r.replace(adv=torch.tensor([0.5, -1.0, 0.5, 1.0, -0.5, -0.5]))
    head, rows = rlnb.viz.BatchView(a, rows=3).table()
    assert head[-3:] == ["reward", "correct", "A"] and rows[1][-3:] == ["0.00", "✗", "-1.00"]


def test_it_shows_only_the_first_rows_and_counts_the_rest():
    v = rlnb.viz.BatchView(_batch(), rows=4)
    assert len(v.table()[1]) == 4 and v.more() == "... 2 more rows"
    assert "P=2 prompts x G=3 = B=6 rows" in v._repr_html_() and "... 2 more rows" in str(v)
    assert rlnb.viz.BatchView(_batch(), rows=10).more() == ""


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="rows: expected an int >= 1"):
        rlnb.viz.BatchView(_batch(), rows=0)
    with pytest.raises(TypeError, match="batch: expected an rlnb.Batch"):
        rlnb.viz.BatchView({"prompts": []})
