"""Run notebooks in full mode and write their runtimes to docs/results/runtimes.json.

    python scripts/measure_runtimes.py                 # every notebook
    python scripts/measure_runtimes.py 00_start_here 04_ppo_critic_and_gae

Each entry: seconds (wall, kernel start included), date, machine (cores, CPU model) and the 1-minute load
average at the start, so a reader can judge the number. Entries of notebooks not run are kept. The notebooks'
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


def machine() -> str:
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines() if ln.startswith("model name")]
        model = names[0] if names else model
    return f"{os.cpu_count()} cores, {model}"


def run_one(path: Path) -> float:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env = dict(os.environ, RLNB_SMOKE="0")
    os.environ.update(env)
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    return time.perf_counter() - t0


def main(names: list[str]) -> int:
    books = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if names:
        books = [b for b in books if b.stem in names or b.stem[:2] in names]
    results = json.loads(OUT.read_text()) if OUT.is_file() else {}
    for book in books:
        load = os.getloadavg()[0]
        print(f"{book.stem}: running in full mode (load {load:.1f}) ...", flush=True)
        seconds = run_one(book)
        results[book.stem] = {"seconds": round(seconds, 1), "date": datetime.date.today().isoformat(),
                              "machine": machine(), "load": round(load, 2)}
        print(f"{book.stem}: {seconds:.0f} s", flush=True)
        OUT.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")  # kept even if a later one fails
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
