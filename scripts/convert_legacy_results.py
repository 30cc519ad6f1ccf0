"""Rewrite the three results of the old hand-rolled scripts in the studies' one format (issue 39), without re-running.

``scripts/reward_hacking.py``, ``ppo_vs_grpo.py`` and ``credit_race.py`` each wrote their own JSON until they became
entry points of ``python -m rlnb.studies run NAME``. This reads each old file and writes the same numbers as a
``StudyResult`` under the same name (``rlnb.studies.load_result(name)``), with the old config kept under
``config["converted_from"]``; it refuses a file already converted, and checks every number it carried over.

    PYTHONPATH=. python scripts/convert_legacy_results.py          # docs/results/{reward_hacking,ppo_vs_grpo,credit_race}.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rlnb import studies
from rlnb.studies import RunResult, StudyResult

ROOT = Path(__file__).resolve().parents[1] / "docs" / "results"
NOTE = "written by the script before issue 39 in its own format; converted by scripts/convert_legacy_results.py"


def config_of(name: str, old: dict, **changes) -> dict:
    """The config ``run_study`` writes for the full preset, with what the old run recorded kept beside it."""
    st = studies.get(name, smoke=False)
    s = {k: v for k, v in st.settings.items() if k not in ("seeds",)}
    base = {"name": name, "base_recipe": "grpo", "eval_every": 0, "eval_n": 0, "eval_sampled_n": 0, "eval_k": 8,
            "kl_to_init": False, "match_samples": False, **{k: s.pop(k) for k in list(s) if k in (
                "task", "steps", "tokens", "eval_every", "eval_n")}}
    return {**base, "seeds": old["seeds"], "arms": st.arms, "common": s, "window": 1,
            "torch_threads": old.get("threads", 1), **changes, "converted_from": {"note": NOTE, "config": old}}


def reward_hacking(old: dict) -> StudyResult:
    P, G = old["config"]["P"], old["config"]["G"]
    keys = {"reward": "reward", "accuracy": "accuracy", "loophole": "rewards/loophole/mean", "kl": "kl",
            "entropy": "entropy"}
    runs = [RunResult(f"beta={r['beta']:g}", r["seed"],
                      [{"step": i + 1, **{m: r[k][i] for k, m in keys.items()}, "samples": (i + 1) * P * G}
                       for i in range(len(r["reward"]))]) for r in old["runs"]]
    return StudyResult(runs, config_of("reward_hacking", old["config"], window=max(1, old["config"]["steps"] // 10)))


def ppo_vs_grpo(old: dict) -> StudyResult:
    c = old["config"]
    P, G = c["P"], c["G"]
    runs = [RunResult(r["recipe"], r["seed"],
                      [{"step": i + 1, "reward": x, "samples": (i + 1) * P * G} for i, x in enumerate(r["reward"])],
                      [{"step": s, "samples": s * P * G, "greedy/pass@1": p} for s, p in zip(r["eval_steps"], r["pass@1"])],
                      wall_s=r["train_s"], info={"load": r["load"], "sample_s": r["sample_s"], "update_s": r["update_s"]})
            for r in old["runs"]]
    return StudyResult(runs, config_of("ppo_vs_grpo", c, window=max(1, c["steps"] // 10), machine=c["machine"],
                                       date=c["date"]))


def credit_race(old: dict) -> StudyResult:
    c = old["config"]
    size = {arm: a.get("prompts_per_step", 16) * a.get("num_generations", 8) for arm, a in c["arms"].items()}
    runs = [RunResult(r["arm"], r["seed"], [],  # per-step metrics were not kept: only the checkpoints
                      [{"step": p["step"], "samples": p["step"] * size[r["arm"]], "tokens": p["tokens"],
                        "wall_s": p["train_s"], "greedy/pass@1": p["greedy"],
                        **({"reward": p["reward"]} if "reward" in p else {})} for p in r["points"]],
                      wall_s=r["train_s"], info={"wall_s_with_evals": r["wall_s"]})
            for r in old["runs"]]
    return StudyResult(runs, config_of("credit_race", c))


def main() -> int:
    for name, convert in (("reward_hacking", reward_hacking), ("ppo_vs_grpo", ppo_vs_grpo), ("credit_race", credit_race)):
        path = ROOT / f"{name}.json"
        old = json.loads(path.read_text())
        if "converted_from" in old["config"] or "name" in old["config"]:
            print(f"{path}: already in the studies' format, left as it is")
            continue
        new = convert(old)
        text = new.to_json()
        back = StudyResult.from_json(text)
        assert [(r.arm, r.seed) for r in back.runs] == [(r.arm, r.seed) for r in new.runs] and len(back.runs) == len(old["runs"])
        path.write_text(text)
        print(f"{path}: converted, {len(new.runs)} runs, arms {new.arms}, seeds {new.seeds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
