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

from rlnb.core.checks import MAX_POOL, check_int, short
from rlnb.tasks.base import Task, check_seed, register

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
        if not isinstance(source, (str, Path)) or not str(source):
            raise TypeError(f"source: expected a .jsonl path or a Hub dataset name, got {short(source)}")
        for name, v in (("split", split), ("config", config)):
            if not isinstance(v, str) or not v:
                raise TypeError(f"{name}: expected a non-empty string, got {short(v)}")
        self.source, self.split, self.config = source, split, config
        self._rows = read_jsonl(Path(source)) if str(source).endswith(".jsonl") else None  # checked now

    def params(self) -> dict:
        src = self.source
        if str(src).endswith(".jsonl"):  # the shipped sample by name (it moves with the package), files absolute
            src = None if Path(src).resolve() == SAMPLE.resolve() else str(Path(src).resolve())
        return {**({"source": str(src)} if src is not None else {}), "split": self.split, "config": self.config}

    def load(self) -> datasets.Dataset:
        if self._rows is not None:  # read directly: no cache files, no progress bars
            return datasets.Dataset.from_list(self._rows)
        src = str(self.source)
        if Path(src).is_file():
            raise ValueError(f"source: expected a .jsonl file (one JSON object per line) or a Hub name, got the file {src}")
        try:
            return datasets.load_dataset(src, self.config, split=self.split)
        except (OSError, ValueError, ConnectionError) as e:  # not found, offline, no such split
            raise OSError(f"source: cannot load the dataset {src!r} (config {self.config!r}, split "
                          f"{self.split!r}): {str(e).splitlines()[0] if str(e) else type(e).__name__}") from e

    def dataset(self, n: int | None = None, seed: int | str = 0) -> datasets.Dataset:
        if n is not None:
            check_int("n", n, low=1, high=MAX_POOL)
        check_seed(seed)
        if not isinstance(seed, int):  # the Trainer's pool seed is a string ("train:<seed>"); numpy wants an int
            seed = int.from_bytes(hashlib.sha256(str(seed).encode()).digest()[:4], "little")
        raw = self.load().shuffle(seed=seed % 2**32)
        if n is not None:
            raw = raw.select(range(min(n, len(raw))))
        rows = [
            {"prompt": f"Q: {q}\nA:", "answer": final_number(a) or "", "target": " " + a}
            for q, a in zip(raw["question"], raw["answer"])
        ]
        return datasets.Dataset.from_list(rows)

    def extract(self, completion: str) -> str | None:
        return final_number(completion)


def read_jsonl(path: Path) -> list[dict]:
    """The rows of a GSM8K-style file; a torn or malformed line is reported with the file and line number."""
    if not path.exists():
        raise FileNotFoundError(f"source: no such file {path}")
    if not path.is_file():
        raise ValueError(f"source: expected a .jsonl file, got the folder {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"source: {path}: expected UTF-8 text, got {e.reason} at byte {e.start}") from None
    rows = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"source: {path} line {i}: expected one JSON object per line, got invalid JSON "
                             f"({e.msg} at column {e.colno}): a torn or truncated line?") from None
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("question", "answer")):
            got = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise ValueError(f"source: {path} line {i}: expected an object with 'question' and 'answer' strings, "
                             f"got {got}")
        if final_number(row["answer"]) is None:
            raise ValueError(f"source: {path} line {i}: the answer has no final number (expected '#### n')")
        rows.append({"question": row["question"], "answer": row["answer"]})
    if not rows:
        raise ValueError(f"source: {path} holds no rows")
    return rows
