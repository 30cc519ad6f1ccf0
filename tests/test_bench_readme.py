"""The README's measured numbers are generated from raw outputs: against TRL from docs/bench_vs_trl.txt, the OpenMP
waits sentence from docs/bench_waits.txt, the terminal run's table from docs/train_grpo_add.json. A stale README fails
here (run ``python scripts/regen_tables.py``), and the parsers read what the benchmarks print."""

import json
import re
from pathlib import Path

import pytest

from rlnb.bench.train_readme import train_markdown
from rlnb.bench.vs_trl_readme import block_markdown, parse, waits_markdown

ROOT = Path(__file__).resolve().parents[1]
SECTION = """== seed {seed}
 08:13:22 up  6:24,  0 user,  load average: 0.32, 0.56, {load}
CPU: AMD EPYC 9R14; torch 2.13.0
settings: GRPO, P=16 x G=8, max_new_tokens=32, one update per batch, CPU threads=2, 3 timed steps each (+1 warm-up), interleaved; wall 5 s
threads: TRL 2; rlnb 2, its decode 1 (rlnb.models.threads: one where the matmuls are small); OpenMP waits: OMP_WAIT_POLICY=PASSIVE, GOMP_SPINCOUNT=None (both sides)
TRL   s/step median 0.600   per stage (medians): generate 0.200  reward 0.001  rollout_other 0.005  loss_forward 0.150  backward_optim 0.240
rlnb  s/step median 0.300   per stage (medians): generate 0.100  sample_other 0.006  reward 0.002  advantage 0.000  update_forward 0.080  update_other 0.110
paired ratio TRL s/step / rlnb s/step: median {ratio} (quartiles 1.90-2.10); ratio of medians 2.00
fp32 matmul (5248x128 @ 128x512): median 190.0 GFLOP/s over the run (quartiles 183.0-199.1); utilisation TRL 0.29, rlnb 0.61
per stage, measured median seconds vs the seconds its FLOPs take at that matmul rate (...):
padding efficiency (real tokens / positions the training forward computes, median): TRL 0.81, rlnb 0.96
training-forward positions per step (median): TRL 5248, rlnb 3192 (rlnb's batch holds 4210 prompt and completion tokens; each prompt is computed once)
greedy pass@1 on 200 held-out prompts: start 0.200, after 4 steps TRL {trl}, rlnb 0.300
"""


def test_the_readme_block_is_generated_from_the_raw_output():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- bench:start -->\n(.*?)\n<!-- bench:end -->", text, re.S)
    assert block, "README.md: no bench markers"
    assert block.group(1) == block_markdown(ROOT / "docs" / "bench_vs_trl.txt"), \
        "README's numbers against TRL are stale: python scripts/regen_tables.py"


def test_the_parser_reads_every_number_the_block_prints(tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text(SECTION.format(seed=0, load=1.5, ratio=2.00, trl=0.350)
                   + SECTION.format(seed=1, load=2.5, ratio=1.80, trl=0.250))
    runs = parse(raw.read_text())
    assert [r["seed"] for r in runs] == [0, 1] and runs[0]["cpu"] == "AMD EPYC 9R14"
    assert runs[0]["trl"]["total"] == 0.6 and runs[0]["rlnb"]["update_other"] == 0.11
    assert runs[1]["ratio"] == 1.8 and runs[0]["util"] == (0.29, 0.61) and runs[0]["pass1"] == (0.2, 4, 0.35, 0.3)
    md = block_markdown(raw)
    assert "2.00 (seed 0), 1.80 (seed 1)" in md and "load average 0.3-2.5" in md and "AMD EPYC 9R14" in md
    assert "(+1 warm-up), rlnb's decode on 1 thread, OpenMP waits passive;" in md
    assert "| rlnb | 0.300 | 0.100 | 0.002 | 0.080 | 0.110 | 0.61 | 0.96 | 3192 | 0.300 |" in md
    assert "+0.000 [95 % CI -0.635, +0.635]" in md and "includes 0" in md   # differences 0.05, -0.05: t 12.71 x 0.05


def test_the_row_parts_line_is_read_and_said(tmp_path):
    line = ("threads: TRL 2; rlnb 2, decode and update as 2 row parts of 1 thread each (ForwardOptions rows='split': "
            "rlnb.models.row_split, split_decode); OpenMP waits: OMP_WAIT_POLICY=PASSIVE, GOMP_SPINCOUNT=None (both sides)")
    raw = tmp_path / "raw.txt"
    old = SECTION.format(seed=0, load=1.5, ratio=2.00, trl=0.350)
    raw.write_text(re.sub(r"^threads: .*$", line, old, flags=re.M))
    run = parse(raw.read_text())[0]
    assert run["row_parts"] == 2 and "decode_threads" not in run and run["waits"] == ("PASSIVE", "None")
    assert "(+1 warm-up), rlnb's decode and update as 2 row parts of one thread each, OpenMP waits passive;" in \
        block_markdown(raw)


def test_the_decode_worker_line_is_read_and_said(tmp_path):
    line = ("threads: TRL 2; rlnb 2, decode and update as 2 row parts of 1 thread each (ForwardOptions rows='split': "
            "rlnb.models.row_split, split_decode); OpenMP waits: OMP_WAIT_POLICY=PASSIVE, GOMP_SPINCOUNT=None (both sides)"
            "\nrlnb's decode worker process (rlnb.models.decode_worker): ready; it played the second row part in 200 "
            "of 203 decodes")
    raw = tmp_path / "raw.txt"
    old = SECTION.format(seed=0, load=1.5, ratio=2.00, trl=0.350)
    raw.write_text(re.sub(r"^threads: .*$", line, old, flags=re.M))
    assert parse(raw.read_text())[0]["worker"] == (200, 203)
    assert ("rlnb's decode and update as 2 row parts of one thread each (the decode's second part in a worker "
            "process in 200 of 203 decodes), OpenMP waits passive;") in block_markdown(raw)


def test_a_file_without_seed_sections_is_refused(tmp_path):
    with pytest.raises(ValueError, match="== seed S"):
        parse("settings: nothing measured\n")


WAITS = """CPU: AMD EPYC (2 logical CPUs); threads 2; 8 steps per cell after a warm-up, 2 rounds alternated; passive: ...; spin: GOMP_SPINCOUNT=10000
burners | passive s/step (sample + update) | spin s/step (sample + update) | passive / spin
      0 | 0.600 (0.200 + 0.300) | 0.400 (0.200 + 0.200) | 1.50
      1 | 0.500 (0.200 + 0.300) | 1.000 (0.200 + 0.800) | 0.50
"""


def test_the_waits_sentence_is_generated_from_its_raw_output(tmp_path):
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- waits:start -->\n(.*?)\n<!-- waits:end -->", text, re.S)
    assert block and block.group(1) == waits_markdown(ROOT / "docs" / "bench_waits.txt"), \
        "README's OpenMP waits sentence is stale: python scripts/regen_tables.py"
    raw = tmp_path / "waits.txt"
    raw.write_text(WAITS)
    md = waits_markdown(raw)
    assert "`GOMP_SPINCOUNT=10000`" in md and "1.50x as fast on a quiet machine (0.600 -> 0.400 s per step)" in md
    assert "beside 1 busy process it takes 2.00x the passive time (0.500 -> 1.000 s)" in md
    raw.write_text(WAITS.splitlines()[0] + "\n")
    with pytest.raises(ValueError, match="quiet row"):
        waits_markdown(raw)


def test_the_terminal_run_table_is_generated_from_its_summary(tmp_path):
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- train:start -->\n(.*?)\n<!-- train:end -->", text, re.S)
    assert block and block.group(1) == train_markdown(ROOT / "docs" / "train_grpo_add.json"), \
        "README's terminal-run table is stale: python scripts/regen_tables.py"
    summary = {"greedy_pass@1_before": 0.2, "greedy_pass@1_after": 0.6251, "steps": 200, "wall_s_this_invocation": 99.6,
               "mean_time_per_stage_s": {"timing/sample_s": 0.2304, "timing/reward_s": 0.002,
                                         "timing/advantage_s": 0.0004, "timing/update_s": 0.26}}
    raw = tmp_path / "summary.json"
    raw.write_text(json.dumps(summary))
    assert train_markdown(raw).splitlines()[-1] == "| 0.200 | 0.625 | 100 s | 0.230 s / 0.002 s / <0.001 s / 0.260 s |"
    raw.write_text(json.dumps({k: v for k, v in summary.items() if k != "greedy_pass@1_after"}))
    with pytest.raises(ValueError, match="greedy_pass@1_after"):
        train_markdown(raw)
