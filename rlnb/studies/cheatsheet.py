"""docs/cheatsheet.md's table, generated: a knob is recommended for a symptom only when the evidence row it rests on
(a claim of ``rlnb.studies.claims`` judged under its plan) says **reproduced**; otherwise it is listed with its
verdict ("not supported here") or as "untested here" when no row tests it. ``scripts/regen_tables.py`` writes it."""

from __future__ import annotations

# (symptom, check first, [(knob, plan key of the claim it rests on, or None)], notebooks)
SYMPTOMS: tuple = (
    ("entropy falls fast (`entropy`)", "does the reward discriminate? share of groups with no signal "
     "(`frac_reward_zero_std`), reward spread within groups. Clipping does not stop collapse (the clip never fires "
     "at mu = 1)", [("fewer updates per batch (`num_iterations`, `num_mini_batches`)", "updates_collapse"),
                    ("`entropy_coef` 0.01 (bonus)", "bonus"), ("`entropy_target` (thermostat)", "thermostat"),
                    ("`eps_high` 0.28 (clip-higher)", "clip_higher_entropy_third"), ("`temperature`", None)],
     "`06_kl_and_entropy`, `10_dapo`"),
    ("gradient norm noisy, loss jumps (`grad_norm`)", "group size and prompts per step: too few samples per baseline",
     [("`num_generations` (G), `prompts_per_step`", None), ("`max_grad_norm`", None)], "`03_advantages`"),
    ("many groups with no signal (`frac_reward_zero_std` high)", "prompts too easy or too hard for the model; "
     "normalisation cannot create signal the reward lacks",
     [("dynamic sampling (`filters`), for the groups in the update", "dynamic_sampling"),
      ("dynamic sampling, for held-out pass@1", "dapo_dynamic"), ("a curriculum, a richer reward", None)],
     "`01_sampling_and_groups`, `03_advantages`, `10_dapo`"),
    ("loss flat at ~0", "nothing: with one update per batch the loss is 0 by construction; read reward, pass@1, "
     "entropy", [], "`00_start_here`, `05_ratio_and_clipping`"),
    ("reward rises, held-out accuracy does not (`reward` vs `eval/pass@1`)", "the verifier: is there a loophole? "
     "read completions", [("fix the verifier", None), ("`beta` (KL is the last gate, not the first)",
                                                       "reward_hacking")], "`02_rewards`, `07_reward_hacking_and_kl`"),
    ("KL to reference grows steadily (`kl`)", "the learning rate and off-policy updates; is the reward being hacked?",
     [("`beta`", "beta_drift"), ("`lr`, `num_iterations`", None)], "`06_kl_and_entropy`"),
    ("clip fraction high (`clip_ratio/*`)", "too many updates per batch or too high a learning rate",
     [("`lr`, `num_iterations`, `num_mini_batches`", None), ("`eps_low` / `eps_high`", None)],
     "`05_ratio_and_clipping`, `11_instability`"),
    ("reward collapses to 0 within tens of steps", "learning rate too high (the toy's sharp edge: 1e-3, or 3e-4 with "
     "several updates per batch)", [("`lr`, `warmup_steps`; reload the last good checkpoint", None)],
     "`11_instability`"),
    ("wrong answers grow longer (`completions/mean_length_wrong`)", "the aggregation: seq-mean-token-mean dilutes "
     "long answers' per-token push", [("`aggregation` = token-mean (not seq-mean-token-mean)", "length_bias"),
                                      ("token-mean, for held-out pass@1", "dapo_token_mean")],
     "`08_aggregation_and_length_bias`"),
    ("completions hit the length limit (`completions/mean_length` near `max_new_tokens`)", "truncated answers get "
     "reward 0; are right answers longer than the limit?", [("`max_new_tokens`", None),
                                                            ("overlong filtering (`filters`)", "dapo_overlong")],
     "`02_rewards`, `10_dapo`"),
    ("nearly solved prompts dominate updates", "std normalisation multiplies tiny reward gaps by $1/s$",
     [("advantage `dr_grpo` (no std)", None)], "`03_advantages`"),
    ("pass@1 rises, pass@k falls", "diversity is being traded for the first answer",
     [("advantage `maxrl`", "maxrl_pass_k"), ("`entropy_coef`, `temperature`", None)], "`12_zoo_race`"),
    ("a bigger G did not help", "at a fixed sample budget, more siblings mean fewer prompts; the baseline improves "
     "only like $1/\\sqrt{G}$", [("more prompts per step instead", None)], "`01_sampling_and_groups`"),
    ("every token of an answer moves the same way", "outcome rewards give every token the same advantage; it is "
     "unbiased, only noisy: more samples may be the cheapest fix",
     [("a critic (`critic`, GAE)", "ppo_vs_grpo"), ("Monte-Carlo credit (`advantage=\"vineppo\"`)", "credit_race"),
      ("`top_entropy_quantile`", None)], "`09_credit_assignment`, `04_ppo_critic_and_gae`"),
    ("PPO with a critic: learning is slow to start", "the critic's error on fresh batches "
     "(`rlnb.notebook.critic.masked_rmse`): a young critic is a poor baseline",
     [("`vf_coef`, `lam` = 1 until the critic is accurate", None)], "`04_ppo_critic_and_gae`"),
)


def _verdicts(root=None) -> dict:
    from rlnb.studies.claims import CLAIMS, describe

    return {c.plan: (c.text, describe(c, root)) for c in CLAIMS if c.plan}


def table_markdown(root=None) -> str:
    """The symptom table: knobs whose evidence row is reproduced, then the others with their verdict or "untested
    here"."""
    verdicts = _verdicts(root)
    rows = ["| symptom (metric) | check first | then the knob: supported here (evidence row) | not supported or "
            "untested here | notebook |", "|---|---|---|---|---|"]
    for symptom, first, knobs, notebooks in SYMPTOMS:
        yes, no = [], []
        for knob, key in knobs:
            if key is None:
                no.append(f"{knob}: untested here")
                continue
            text, d = verdicts[key]
            head = d["line"].split("**")[1] if "**" in d["line"] else d["verdict"]
            cost = "".join(f" (also {words})" for words in d.get("also", ()))  # what the effect cost
            (yes if d["verdict"] == "reproduced" else no).append(f"{knob}: *{text}*: {head}{cost}")
        rows.append(f"| {symptom} | {first} | {'; '.join(yes) or '-'} | {'; '.join(no) or '-'} | {notebooks} |")
    return "\n".join(rows)
