"""The README's numbers against TRL, generated from the benchmark's raw output (``docs/bench_vs_trl.txt``: the
printout of ``python scripts/bench_vs_trl.py --steps 100 --seed S`` for each seed, each after a ``== seed S``
line), so the prose cannot drift from what was measured. ``scripts/regen_tables.py`` writes it between the
README's ``bench`` markers; tests/test_bench_readme.py fails when the two differ.
"""

from __future__ import annotations

import re
from pathlib import Path

from rlnb.studies.summary import Stat

_NUM = r"([-+]?\d+(?:\.\d+)?)"


def _stages(line: str) -> dict:
    """``TRL   s/step median 0.643   per stage (medians): generate 0.249  reward 0.001 ...`` -> floats by name."""
    out = {"total": float(re.search(r"s/step median " + _NUM, line)[1])}
    for key, value in re.findall(r"([a-z_]+) " + _NUM, line.split("(medians):", 1)[1]):
        out[key] = float(value)
    return out


def parse(text: str) -> list[dict]:
    """One dict per ``== seed S`` section: seed, cpu, settings, trl/rlnb stages, ratio (median, quartiles),
    matmul rate, utilisation, padding, positions, pass@1 (start, trl, rlnb), load averages seen."""
    runs = []
    for block in re.split(r"^== seed ", text, flags=re.M)[1:]:
        r: dict = {"seed": int(block.split(None, 1)[0]), "loads": [], "cpu": None}
        for line in block.splitlines():
            if "load average:" in line:
                r["loads"] += [float(x) for x in line.split("load average:")[1].split(",")]
            elif line.startswith("CPU: "):
                r["cpu"] = line[5:].split("; torch")[0]
            elif line.startswith("settings: "):
                r["settings"] = line[10:]
            elif line.startswith("threads: "):
                m = re.search(r"(?:its decode (\d+)|as (\d+) row parts).*OMP_WAIT_POLICY=(\S+), GOMP_SPINCOUNT=(\S+)", line)
                r["waits"] = (m[3], m[4])
                r.update({"decode_threads": int(m[1])} if m[1] else {"row_parts": int(m[2])})
            elif line.startswith("rlnb's decode worker process"):
                m = re.search(r"second row part in (\d+) of (\d+) decodes", line)
                r["worker"] = (int(m[1]), int(m[2]))
            elif line.startswith(("TRL ", "rlnb ")) and "s/step median" in line:
                r[line.split()[0].lower()] = _stages(line)
            elif line.startswith("paired ratio"):
                m = re.search(rf"median {_NUM} \(quartiles {_NUM}-{_NUM}\)", line)
                r["ratio"], r["ratio_q"] = float(m[1]), (float(m[2]), float(m[3]))
            elif re.match(r"(fp32|bf16|fp16) matmul", line):
                r["precision"] = line.split()[0]
                r["gflops"] = float(re.search(rf"median {_NUM} GFLOP/s", line)[1])
                r["util"] = tuple(float(x) for x in re.search(rf"utilisation TRL {_NUM}, rlnb {_NUM}", line).groups())
            elif line.startswith("padding efficiency"):
                r["padding"] = tuple(float(x) for x in re.search(rf"TRL {_NUM}, rlnb {_NUM}", line).groups())
            elif line.startswith("training-forward positions"):
                m = re.search(rf"TRL {_NUM}, rlnb {_NUM} \(rlnb's batch holds {_NUM}", line)
                r["positions"] = tuple(float(x) for x in m.groups())
            elif line.startswith("rows whose backward ran"):
                r["backward_rows"] = tuple(float(x) for x in re.search(rf"TRL {_NUM}, rlnb {_NUM}", line).groups())
            elif line.startswith("rlnb's utilisation counting only"):
                r["util_ran"] = float(re.search(rf"about\): {_NUM}", line)[1])
            elif line.startswith("greedy pass@1"):
                m = re.search(rf"start {_NUM}, after (\d+) steps TRL {_NUM}, rlnb {_NUM}", line)
                r["pass1"] = (float(m[1]), int(m[2]), float(m[3]), float(m[4]))
        runs.append(r)
    if not runs:
        raise ValueError("text: expected the benchmark's printout with '== seed S' sections, found none")
    return runs


def _row(name: str, st: dict, keys: tuple, util: float, pad: float, pos: float, p1: float) -> str:
    cells = " | ".join(f"{st.get(k, 0.0):.3f}" for k in keys)
    return f"| {name} | {st['total']:.3f} | {cells} | {util:.2f} | {pad:.2f} | {pos:.0f} | {p1:.3f} |"


def _threads(run: dict) -> str:
    """How rlnb used the threads (row parts since the second 12-06 runs, before that the decode's thread count) and
    the OpenMP waits, when the printout has them (runs before 12-06 do not)."""
    if "waits" not in run:
        return ""
    policy, spin = run["waits"]
    waits = f"OpenMP waits {policy.lower()}" + ("" if spin == "None" else f", GOMP_SPINCOUNT={spin}")
    if "row_parts" in run:
        played, decodes = run.get("worker", (0, 0))
        worker = (f" (the decode's second part in a worker process in {played} of {decodes} decodes)"
                  if played else "")
        return f", rlnb's decode and update as {run['row_parts']} row parts of one thread each{worker}, {waits}"
    return f", rlnb's decode on {run['decode_threads']} thread{'s' * (run['decode_threads'] > 1)}, {waits}"


def block_markdown(path: Path) -> str:
    """The README block: seed 0's stage table, every seed's paired ratio, the pass@1 difference over seeds."""
    runs = parse(Path(path).read_text())
    first = runs[0]
    loads = [x for r in runs for x in r["loads"]]
    steps = first["pass1"][1] - 1
    cpu = f"{first['cpu']}, " if first["cpu"] else ""
    head = (f"Against TRL's `GRPOTrainer` at the same settings, interleaved step by step in one process "
            f"(`python scripts/bench_vs_trl.py --steps {steps} --seed S` for seeds "
            f"{', '.join(str(r['seed']) for r in runs)}: same embedded model, same prompts in the same order, same "
            f"verifier; {first['settings'].split(', interleaved')[0]}{_threads(first)}; {cpu}load average "
            f"{min(loads):.1f}-{max(loads):.1f} during the runs, the benchmark's own threads included; raw output in "
            f"`docs/bench_vs_trl.txt`). Seed {first['seed']}:")
    table = ["| | s/step (median) | generate | reward | loss forward | backward + optimizer | utilisation | padding "
             "efficiency | positions computed | greedy pass@1 after the run |", "|---|---|---|---|---|---|---|---|---|---|",
             _row("TRL", first["trl"], ("generate", "reward", "loss_forward", "backward_optim"), first["util"][0],
                  first["padding"][0], first["positions"][0], first["pass1"][2]),
             _row("rlnb", first["rlnb"], ("generate", "reward", "update_forward", "update_other"), first["util"][1],
                  first["padding"][1], first["positions"][1], first["pass1"][3])]
    diff = Stat(tuple(r["pass1"][2] - r["pass1"][3] for r in runs))
    lo, hi = diff.ci95()
    trl, ours = (sum(r["pass1"][i] for r in runs) / len(runs) for i in (2, 3))
    ratios = ", ".join(f"{r['ratio']:.2f} (seed {r['seed']})" for r in runs)
    tail = (f"TRL s / rlnb s per pair, median over the pairs of each seed: {ratios}; quartiles for seed "
            f"{first['seed']}: {first['ratio_q'][0]:.2f}-{first['ratio_q'][1]:.2f}. Greedy pass@1 after "
            f"{first['pass1'][1]} steps (start {first['pass1'][0]:.3f}), TRL minus rlnb over the {diff.n} seeds: "
            f"{diff.mean:+.3f} [95 % CI {lo:+.3f}, {hi:+.3f}] (means {trl:.3f} and {ours:.3f}): "
            f"{'the interval includes 0, so the two learn alike within seed noise' if lo <= 0 <= hi else 'the interval excludes 0: they do not learn alike'}. Utilisation is the "
            f"step's model FLOPs per second over a plain {first['precision']} matmul of the MLP's shape, measured between steps "
            f"(median {first['gflops']:.0f} GFLOP/s for seed {first['seed']}). Positions computed: rlnb's batch "
            f"holds about {first['positions'][2]:.0f} prompt and completion tokens.{_ran(runs)}")
    return "\n".join([head, "", *table, "", tail])


def _ran(runs: list[dict]) -> str:
    """What rlnb's utilisation counts and what it ran (printouts from 12-07 on have the lines)."""
    if not all("util_ran" in r and "backward_rows" in r for r in runs):
        return ""
    first = runs[0]
    utils = ", ".join(f"{r['util'][1]:.2f}" for r in runs)
    ran = ", ".join(f"{r['util_ran']:.2f}" for r in runs)
    return (f" rlnb's utilisation by seed: {utils}. The FLOPs count every row's backward on both sides; rlnb ran it "
            f"for a median {first['backward_rows'][1]:.0f} of {first['backward_rows'][0]:.0f} rows per step (seed "
            f"{first['seed']}: a row with advantage 0 on every token adds exactly nothing to the gradient, "
            f"`rlnb/stages/live_rows.py`). Counting only the FLOPs rlnb ran (each prompt once, the backward over the "
            f"rows with a gradient), its utilisation is about {ran} by seed.")


def waits_markdown(path: Path) -> str:
    """The README's sentence on OpenMP waits, from ``python -m rlnb.bench waits``'s printout (docs/bench_waits.txt)."""
    text = Path(path).read_text()
    spin = re.search(r"GOMP_SPINCOUNT=(\d+)", text)
    rows = {int(m[1]): (float(m[2]), float(m[3]), float(m[4])) for m in
            re.finditer(rf"^\s*(\d+) \| {_NUM} \(.*?\) \| {_NUM} \(.*?\) \| {_NUM}$", text, flags=re.M)}
    if spin is None or 0 not in rows:
        raise ValueError(f"{path}: expected the waits benchmark's printout with a quiet row (0 burners)")
    p, s, r = rows[0]
    busy = "; ".join(f"beside {n} busy process{'es' * (n > 1)} it takes {v[1] / v[0]:.2f}x the passive time "
                     f"({v[0]:.3f} -> {v[1]:.3f} s)" for n, v in sorted(rows.items()) if n)
    return (f"OpenMP waits (`python -m rlnb.bench waits`, raw output in `docs/bench_waits.txt`): rlnb's threads wait "
            f"passively, the setting the chapters' runtimes were measured with. Spinning waits "
            f"(`GOMP_SPINCOUNT={spin[1]}` in the environment before Python starts) make a step {r:.2f}x as fast on a "
            f"quiet machine ({p:.3f} -> {s:.3f} s per step){'; ' + busy if busy else ''}. Set it only where nothing "
            f"else runs (not beside a browser on a laptop); it never changes a number, only how long threads wait.")
