"""GSM8K-style grade-school maths: ``question`` / ``answer`` rows whose answer ends in ``#### n``.

Works offline on the small sample shipped in ``rlnb/tasks/data/gsm8k_sample.jsonl`` (written for rlnb in
GSM8K's format), and on the real data set when you have it: ``rlnb.tasks.get("gsm8k",
source="openai/gsm8k")`` calls ``datasets.load_dataset`` (needs the Hub or its cache).
The extractor takes the number after ``####`` in a completion, else its last number.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import datasets

from rlnb.tasks.base import Task, register

SAMPLE = Path(__file__).parent / "data" / "gsm8k_sample.jsonl"
_NUMBER = re.compile(r"-?\d[\d,]{0,30}(?:\.\d{1,12})?")


def final_number(text: str) -> str | None:
    """The number after ``####``, else the last number; commas removed, ``3.0`` -> ``3``.

    >>> final_number("She has 3 + 4 = 7 apples.\\n#### 7"), final_number("so 1,200 in total"), final_number("none")
    ('7', '1200', None)
    """
    tail = text.rsplit("####", 1)[-1] if "####" in text else text
    found = _NUMBER.findall(tail[-2000:])
    if not found:
        return None
    num = found[-1].replace(",", "")
    if "." in num:
        num = num.rstrip("0").rstrip(".")
    return num or None


@register("gsm8k")
class GSM8K(Task):
    """``source``: a ``.jsonl`` path, or a Hub name for ``datasets.load_dataset``."""

    description = "grade-school maths word problems, answer after ####"

    def __init__(self, source: str | Path = SAMPLE, split: str = "test", config: str = "main"):
        self.source, self.split, self.config = source, split, config

    def load(self) -> datasets.Dataset:
        src = str(self.source)
        if src.endswith(".jsonl"):  # read directly: no cache files, no progress bars
            rows = [json.loads(line) for line in Path(src).read_text().splitlines() if line.strip()]
            return datasets.Dataset.from_list(rows)
        return datasets.load_dataset(src, self.config, split=self.split)

    def dataset(self, n: int | None = None, seed: int | str = 0) -> datasets.Dataset:
        if not isinstance(seed, int):  # the Trainer's pool seed is a string ("train:<seed>"); numpy wants an int
            seed = int.from_bytes(hashlib.sha256(str(seed).encode()).digest()[:4], "little")
        raw = self.load().shuffle(seed=seed)
        if n is not None:
            raw = raw.select(range(min(n, len(raw))))
        rows = [
            {"prompt": f"Q: {q}\nA:", "answer": final_number(a) or "", "target": " " + a}
            for q, a in zip(raw["question"], raw["answer"])
        ]
        return datasets.Dataset.from_list(rows)

    def extract(self, completion: str) -> str | None:
        return final_number(completion)
