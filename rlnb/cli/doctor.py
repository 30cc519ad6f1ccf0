"""``rlnb doctor``: a pre-flight check a teacher sends learners before a workshop (skeleton)."""

from __future__ import annotations
