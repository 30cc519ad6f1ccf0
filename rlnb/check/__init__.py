"""Exercise checkers for the notebooks: ``rlnb.check.<name>(your_fn)``. This file is their face; they live one
file per topic: ``advantages``, ``losses``, ``sampling``, ``credit``, ``runs``, ``mechanics`` (and ``base``, the
comparison every checker shares).

Each checker calls your function on a few hand-picked and random cases, compares it with the library's
own implementation, prints what it found, and returns True. On a mismatch it raises ``AssertionError``
with the first failing input, your output and the expected one, so the learner sees *where* it differs;
with ``strict=False`` (what the notebooks use) it prints the same message as "Not yet" and returns False,
so a half-done exercise never stops the rest of the notebook.
"""

from rlnb.check.advantages import dynamic_sampling_keep, grpo_advantage, maxrl_advantage, rloo_advantage
from rlnb.check.base import Verdict
from rlnb.check.credit import gae_by_hand, mc_value, token_credit, value_clip
from rlnb.check.losses import (
           k3,
           overlong_penalty,
           ppo_clip_loss,
           score_function,
           seq_mean_token_mean,
           token_mean,
)
from rlnb.check.mechanics import clip_can_fire, clip_weight, k3_pull, per_token_weight
from rlnb.check.runs import crash_step, hack_share, scalerl_curve
from rlnb.check.sampling import final_number, online_logsumexp, pass_at_k, top_p_filter

__all__ = ["Verdict", "clip_can_fire", "clip_weight", "crash_step", "dynamic_sampling_keep", "final_number",
           "gae_by_hand", "grpo_advantage", "hack_share", "k3", "k3_pull", "maxrl_advantage", "mc_value",
           "online_logsumexp", "overlong_penalty", "pass_at_k", "per_token_weight", "ppo_clip_loss",
           "rloo_advantage", "scalerl_curve", "score_function", "seq_mean_token_mean", "token_credit", "token_mean",
           "top_p_filter", "value_clip"]
