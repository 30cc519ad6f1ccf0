"""Run notebooks in full mode and write their runtimes to docs/results/runtimes.json.

    python scripts/measure_runtimes.py                 # every notebook
    python scripts/measure_runtimes.py 00_start_here 04_ppo_critic_and_gae
    python scripts/measure_runtimes.py --save test-artifacts/executed 04    # also keep the executed notebooks
    python scripts/measure_runtimes.py --readme                             # only rewrite the README's column
    python scripts/measure_runtimes.py --step-seconds                       # only (re)time the 5-step reference

Each entry: seconds (wall, kernel start included), date, machine (cores, CPU model), the 1-minute load
average at the start, the share of CPU time that niced background work took during the run (``niced_share``,
from /proc/stat: a number near 0 means the notebook had the cores to itself whatever the load average says)
and the slowest cells, so a reader can judge the number and a writer knows where the time goes. ``step_seconds``:
the median GRPO step of the default model on that machine at that moment (``rlnb.cli.doctor.step_seconds``),
so `rlnb doctor` can scale each runtime to a learner's laptop (``step_load``: the load average while it was timed).
``--step-seconds`` records only that timing, into the entries measured on this same machine, without running any
notebook (entries measured before step times were recorded get theirs this way). Entries of notebooks not run are kept. The notebooks'
"Runtime" line and the README table read this file (``rlnb.notebook.runtime_line``).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results" / "runtimes.json"
README = ROOT / "README.md"


def machine() -> str:
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines() if ln.startswith("model name")]
        model = names[0] if names else model
    return f"{os.cpu_count()} cores, {model}"


def cpu_times() -> tuple[int, int]:
    """(niced user time, total time) in clock ticks over all cores, from /proc/stat (0, 0 where absent)."""
    stat = Path("/proc/stat")
    if not stat.is_file():
        return 0, 0
    fields = [int(x) for x in stat.read_text().splitlines()[0].split()[1:]]
    return fields[1], sum(fields)


def slowest_cells(nb, n: int = 3) -> list[list]:
    """[[cell index, seconds], ...] of the n slowest code cells, from nbclient's execution timestamps."""
    out = []
    for i, cell in enumerate(nb.cells):
        ex = cell.get("metadata", {}).get("execution", {})
        a, b = ex.get("iopub.execute_input"), ex.get("shell.execute_reply")
        if a and b:
            dt = datetime.datetime.fromisoformat(b.replace("Z", "+00:00")) - datetime.datetime.fromisoformat(a.replace("Z", "+00:00"))
            out.append([i, round(dt.total_seconds(), 1)])
    return sorted(out, key=lambda c: -c[1])[:n]


def run_one(path: Path, save: Path | None) -> tuple[float, list]:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    os.environ["RLNB_SMOKE"] = "0"
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=1800, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - t0
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, save / path.name)
    return seconds, slowest_cells(nb)


def cell(entry: dict | None) -> str:
    """The README's "full mode" cell of one notebook."""
    if not entry:
        return "not measured"
    busy = f" (load {entry['load']:.0f})" if entry["load"] >= 2 and entry.get("niced_share", 1) > 0.2 else ""
    return f"{entry['seconds']:.0f} s{busy}"


def readme_table(results: dict, text: str) -> str:
    """``text`` (the README) with the curriculum table's "full mode" column and the line under it rewritten
    from ``results``, so the README cannot disagree with the runtime results."""
    head, rest = text.split("<!-- notebooks:start -->\n", 1)
    table, tail = rest.split("<!-- notebooks:end -->", 1)
    rows = []
    for line in table.splitlines():
        parts = line.split(" | ")
        if line.startswith("| [") and len(parts) >= 4:
            name = line.split("]", 1)[0].removeprefix("| [")
            parts[2] = cell(results.get(name))
            line = " | ".join(parts)
        elif line.startswith("Full mode measured"):
            break
        rows.append(line)
    dates = sorted({e["date"] for e in results.values()})
    machines = sorted({e["machine"] for e in results.values()})
    total = sum(e["seconds"] for e in results.values()) / 60
    note = (f"Full mode measured by `python scripts/measure_runtimes.py` (one notebook at a time; date, machine, load and "
            f"the CPU share other work took are in `docs/results/runtimes.json`): {', '.join(machines)}, "
            f"{' to '.join(dict.fromkeys([dates[0], dates[-1]]))}, {total:.0f} minutes for all {len(results)}. "
            "A load is shown where other work competed for the cores. Smoke mode (`RLNB_SMOKE=1`): seconds each.\n")
    return head + "<!-- notebooks:start -->\n" + "\n".join(rows) + "\n" + note + "<!-- notebooks:end -->" + tail


def record_step_seconds(results: dict, here: str, repeats: int = 5) -> list[str]:
    """Time the 5-step reference now and write it into each entry measured on machine ``here``; returns those.
    The fastest of ``repeats`` timings: other work on the machine only ever slows a step down, so the fastest is
    the closest to the quiet machine the runtimes were measured on (``step_load``: the load average meanwhile)."""
    from rlnb.cli.doctor import step_seconds

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as `make` runs everything (spinning threads on a busy
    load = os.getloadavg()[0]                             # machine made a step 5-10x slower)
    step = round(min(step_seconds(5) for _ in range(repeats)), 3)
    names = [n for n, e in results.items() if e.get("machine") == here]
    for n in names:
        results[n].update(step_seconds=step, step_load=round(load, 2))
    print(f"step_seconds {step} (load {load:.1f}) recorded for {len(names)} of {len(results)} entries "
          f"(those measured on {here})", flush=True)
    return names


def main(names: list[str]) -> int:
    if names == ["--step-seconds"]:
        results = json.loads(OUT.read_text())
        record_step_seconds(results, machine())
        OUT.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
        return 0
    if names == ["--readme"]:
        README.write_text(readme_table(json.loads(OUT.read_text()), README.read_text()))
        return 0
    save = None
    if "--save" in names:
        at = names.index("--save")
        save, names = Path(names[at + 1]).resolve(), names[:at] + names[at + 2:]
    books = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if names:
        books = [b for b in books if b.stem in names or b.stem[:2] in names]
    results = json.loads(OUT.read_text()) if OUT.is_file() else {}
    step = None
    for book in books:
        load = os.getloadavg()[0]
        if step is None:  # once per run, when there is a notebook to measure, on the machine that measures it
            from rlnb.cli.doctor import step_seconds

            step, step_load = round(step_seconds(5), 3), round(load, 2)
        print(f"{book.stem}: running in full mode (load {load:.1f}) ...", flush=True)
        nice0, total0 = cpu_times()
        seconds, slow = run_one(book, save)
        nice1, total1 = cpu_times()
        niced = (nice1 - nice0) / max(total1 - total0, 1)
        results[book.stem] = {"seconds": round(seconds, 1), "date": datetime.date.today().isoformat(),
                              "machine": machine(), "load": round(load, 2), "niced_share": round(niced, 3),
                              "slowest_cells": slow, "step_seconds": step, "step_load": step_load}
        print(f"{book.stem}: {seconds:.0f} s (niced background work took {niced:.0%} of the CPU; "
              f"slowest cells {slow})", flush=True)
        OUT.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")  # kept even if a later one fails
        README.write_text(readme_table(results, README.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
