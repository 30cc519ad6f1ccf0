"""Tasks: deterministic datasets, verifiers on right/wrong/malformed/hostile completions, tokenizer round-trip."""

import json

import pytest

from rlnb import tasks
from rlnb.models import build_tokenizer
from rlnb.tasks.arithmetic import scratch_work
from rlnb.tasks.gsm8k import final_number
from rlnb.tasks.safe_math import parse_expr

HOSTILE = [
    "__import__('os').system('echo hi')", "1" * 5000, "(" * 500 + "1" + ")" * 500, "9" * 400 + ">9",
    "\x00\x01\x02", "1e999999", "lambda: 0", "exec('1')", "0+0=0;" * 2000 + ">0", "", " ", None, 12,
]


def test_names_and_lookup():
    assert {"add", "countdown", "gsm8k"} <= set(tasks.names())
    with pytest.raises(KeyError, match="did you mean 'add'"):
        tasks.get("ad")


@pytest.mark.parametrize("name", ["add", "countdown"])
def test_dataset_is_deterministic_per_seed(name):
    t = tasks.get(name)
    a, b, c = t.dataset(50, seed=1), t.dataset(50, seed=1), t.dataset(50, seed=2)
    assert a["prompt"] == b["prompt"] and a["answer"] == b["answer"]
    assert a["prompt"] != c["prompt"]


@pytest.mark.parametrize("name", ["add", "countdown", "gsm8k"])
def test_targets_are_correct_and_tokenizer_round_trips(name):
    t, tok = tasks.get(name), build_tokenizer()
    ds = t.dataset(40 if name != "gsm8k" else None, seed=0)
    for row in ds:
        assert t.reward(row["target"], row["answer"]).parts["correct"] == 1.0, row
        for text in (row["prompt"], row["answer"], row["target"]):
            ids = tok(text, add_special_tokens=False).input_ids
            assert tok.unk_token_id not in ids, text
            assert tok.decode(ids) == text


def test_addition_verifier_by_hand():
    add = tasks.get("add")
    assert scratch_work(750, 839) == "0+9=9;5+3=8;7+8=15"
    assert add.reward("1589", "1589").parts == {"correct": 1.0, "format": 1.0}
    assert add.reward("0+9=9;5+3=8;7+8=15>1589", "1589").reward == 1.0
    assert add.reward(" 1589 ", "1589").reward == 1.0                  # surrounding spaces are fine
    assert add.reward("0+9=9;5+3=8;7+8=15>1588", "1589").reward == 0.0  # wrong answer, right format
    assert add.reward("0+9=9;5+3=8;7+8=15>1588", "1589").parts["format"] == 1.0
    assert add.reward("15 89", "1589").parts == {"correct": 0.0, "format": 0.0}
    assert add.reward("0+9=9;5+3>1589", "1589").parts == {"correct": 1.0, "format": 0.0}


def test_countdown_verifier_by_hand():
    cd = tasks.get("countdown")
    ans = "3 7 25=46"
    assert cd.reward("25+3*7", ans).reward == 1.0
    assert cd.reward("3*7+25", ans).reward == 1.0
    assert cd.reward("(25+21)", ans).reward == 0.0                     # uses a number not given
    assert cd.reward("25+3*7+0", ans).reward == 0.0                    # extra number
    assert cd.reward("25*3+7", ans).reward == 0.0                      # wrong value
    assert cd.reward("(7-3)*25/2-4", "3 7 25=46").reward == 0.0
    assert cd.reward("50/(7-3-4)", "50 7 3 4=1").reward == 0.0         # division by zero is just wrong
    assert cd.reward("(2+4)/3*9", "2 4 3 9=18").reward == 1.0          # exact fractions


@pytest.mark.parametrize("name", ["add", "countdown", "gsm8k"])
@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_completions_score_zero_without_raising(name, text):
    r = tasks.get(name).reward(text, "5" if name != "countdown" else "1 2 3=6")
    assert r.reward == 0.0 and r.parts["correct"] == 0.0


def test_safe_math_bounds():
    assert parse_expr("2*(3+4)")[0] == 14
    assert parse_expr("((((((((((1))))))))))") is None                # deeper than MAX_DEPTH
    assert parse_expr("1" * 10 + "+1") is None                          # numbers longer than 9 digits
    assert parse_expr("2**10") is None and parse_expr("1//2") is None and parse_expr("abs(1)") is None


def test_gsm8k_sample_and_extractor(tmp_path):
    assert final_number("so it is 1,200 dollars") == "1200"
    assert final_number("#### 3.50") == "3.5" and final_number("x") is None
    t = tasks.get("gsm8k")
    ds = t.dataset(5, seed=0)
    assert len(ds) == 5 and all(r["prompt"].startswith("Q: ") for r in ds)
    assert t.reward("... so the answer is\n#### " + ds[0]["answer"], ds[0]["answer"]).reward == 1.0
    p = tmp_path / "mine.jsonl"
    p.write_text(json.dumps({"question": "1+1?", "answer": "1+1=2\n#### 2"}) + "\n")
    mine = tasks.get("gsm8k", source=p)
    assert mine.dataset(seed=0)[0]["answer"] == "2"
