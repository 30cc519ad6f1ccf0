"""The README's first code block, run as written in a fresh interpreter: it prints a score, one group as a small
table with right and wrong answers, and a higher score after training (what a newcomer reads as "it works")."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def first_block() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## First lines", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow
def test_the_first_lines_print_a_group_and_a_gain():
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", first_block()], capture_output=True, text=True, timeout=600,
                         cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    before = float(lines[0].removeprefix("greedy pass@1 before: "))
    after = float(re.fullmatch(r"greedy pass@1 after (\d+) steps: ([\d.]+)", lines[-1]).group(2))
    table = lines[1:-1]
    assert re.fullmatch(r"group \d+ of \d+ \(G = 8\)", table[0]) and table[1].split() == [
        "#", "prompt", "completion", "reward", "adv", "len"]
    rows = [ln.split() for ln in table[2:]]
    assert len(rows) == 8
    rewards, adv = [float(r[-3]) for r in rows], [float(r[-2]) for r in rows]
    assert max(rewards) > min(rewards), "the group shown has right and wrong answers"
    assert all((a > 0) == (r == max(rewards)) for r, a in zip(rewards, adv)), "right answers get positive advantages"
    assert all(len(x.split(".")[-1]) <= 2 for x in [*(r[-3] for r in rows), *(r[-2] for r in rows)])  # 2 decimals
    assert after >= before + 0.03, f"40 steps should lift greedy pass@1 (a broken update stays put): {before} -> {after}"
