"""``AdvantageExplorer``: a group's rewards -> each completion's advantage, under any estimator."""

from __future__ import annotations

import ipywidgets as widgets
import torch

from rlnb.algos import ADVANTAGES
from rlnb.recipe import Recipe
from rlnb.viz.explorers.base import STYLE, Explorer, dropdown, hyper_controls, hyper_kwargs, set_hypers
from rlnb.viz.figures import compute
from rlnb.viz.figures.zoo import advantage_figure

GAPS = torch.logspace(-3, 0, 40, dtype=torch.float64)  # reward gaps of the odd-one-out panel
COMPARE = ("grpo", "rloo", "dr_grpo")  # drawn there by default: a legend of nine lines does not read


def parse_rewards(text: str) -> torch.Tensor:
    """``"1, 0, 0.5"`` -> tensor([1., 0., .5]) (float64)."""
    try:
        vals = [float(v) for v in text.replace(";", ",").split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"rewards: expected comma-separated numbers, got {text!r}") from None
    if not vals:
        raise ValueError("rewards: expected at least one number, got none")
    return torch.tensor(vals, dtype=torch.float64)


class AdvantageExplorer(Explorer):
    """Edit a group's rewards, G and the reward noise; pick an estimator; see each completion's
    advantage, their distribution over many groups, and how std normalisation inflates tiny reward
    differences on nearly solved prompts (the odd-one-out panel).

    Keyword arguments (all optional):
        rewards: the group's rewards (G = their number). Default ``(1, 0, 0, 0)``.
        batch, group: take the rewards of group ``group`` of a real ``Batch`` instead.
        estimator: a key of ``ADVANTAGES`` that needs only the rewards (``compute.plain_advantages()``;
        ReMax, OPO and REINFORCE++ also read lengths or a greedy rollout). estimators: the ones offered in
        the dropdown and the ``compare`` control (default all of them; a chapter lists what it taught).
        recipe: a ``Recipe`` whose fields set the hyperparameters.
        p: success rate of the simulated groups. sigma_shared, sigma_sample: reward noise std, one
        draw per group vs one per completion. n_groups, seed: the simulation.
        compare: the estimators drawn in the odd-one-out panel besides the chosen one (default: those of ``COMPARE``
        offered, a few and not all nine; the ``compare`` control adds more).

    Controls: ``estimator``, ``rewards`` (text), ``G``, ``p``, ``sigma_shared``, ``sigma_sample``, ``compare``, and
    every estimator's hyperparameters (``unbiased``, ``eps``, ``batch_std_centred``; only the current
    estimator's are shown). Readout values: ``A_0`` (advantage of completion 0), ``sum|A|``,
    ``mean A right`` (over the simulated groups).
    """

    title = "Advantage explorer"

    def __init__(self, *, rewards=(1.0, 0.0, 0.0, 0.0), batch=None, group: int = 0, estimator: str = "grpo",
                 estimators=None, recipe: Recipe | None = None, p: float = 0.75, sigma_shared: float = 0.0,
                 sigma_sample: float = 0.0, n_groups: int = 2000, seed: int = 0, compare=None):
        if batch is not None:
            G = batch.group_size
            if not 0 <= group < batch.P:
                raise ValueError(f"group: expected 0 <= group < P={batch.P}, got {group!r}")
            rewards = batch.rewards[group * G:(group + 1) * G].tolist()
        rewards = [float(r) for r in rewards]
        self.recipe, self.n_groups, self.seed = recipe, n_groups, seed
        names = compute.plain_advantages()                 # estimators that need a real batch are left out
        if estimators is not None:
            if isinstance(estimators, str) or not estimators or any(e not in names for e in estimators):
                raise ValueError(f"estimators: expected a non-empty list from {names}, got {estimators!r}")
            names = list(estimators)
        self.names = names
        if estimator not in names:
            raise ValueError(f"estimator: expected one of {names} (estimators with extra inputs need a batch: "
                             f"run them in a Trainer), got {estimator!r}")
        fns = [ADVANTAGES[n] for n in names]
        compare = tuple([n for n in COMPARE if n in names] if compare is None else compare)  # offered ones only
        if isinstance(compare, str) or not set(compare) <= set(names):
            raise ValueError(f"compare: expected estimator names among {names}, got {compare!r}")
        c = {
            "estimator": dropdown("estimator", names, estimator, "Advantage estimator (ADVANTAGES)"),
            "rewards": widgets.Text(value=", ".join(f"{r:g}" for r in rewards), description="rewards",
                                    continuous_update=False, style=STYLE,
                                    tooltip="The group's rewards r_1..r_G, comma-separated"),
            "G": widgets.IntSlider(value=len(rewards), min=1, max=32, description="G", style=STYLE,
                                   tooltip=Recipe.field_docs()["num_generations"]),
            "p": widgets.FloatSlider(value=p, min=0, max=1, step=0.05, description="p", style=STYLE,
                                     tooltip="Success rate of the simulated groups (reward 1 w.p. p)"),
            "sigma_shared": widgets.FloatSlider(value=sigma_shared, min=0, max=1, step=0.01, style=STYLE,
                                                description="sigma_shared", tooltip="Reward noise shared by the group"),
            "sigma_sample": widgets.FloatSlider(value=sigma_sample, min=0, max=1, step=0.01, style=STYLE,
                                                description="sigma_sample", tooltip="Reward noise of each completion"),
            "compare": widgets.SelectMultiple(options=names, value=compare, rows=min(len(names), 6), description="compare",
                                              style=STYLE, tooltip="Estimators drawn in the odd-one-out panel "
                                              "(Ctrl or Cmd-click to add one)"),
        }
        hyper = hyper_controls(fns, recipe=recipe)
        self._hyper = list(hyper)
        c.update(hyper)
        set_hypers(ADVANTAGES[estimator], c, self._hyper, recipe=recipe)
        self._start(c, handlers={"estimator": self._on_estimator, "G": self._on_G, "rewards": self._on_rewards})

    # --- controls that change other controls ------------------------------------------------------
    def _on_estimator(self, change) -> None:
        with self.hold():
            set_hypers(ADVANTAGES[change["new"]], self.controls, self._hyper, recipe=self.recipe)

    def _on_G(self, change) -> None:
        """Resize the rewards to G: keep the first ones, pad with 0."""
        try:
            r = parse_rewards(self.controls["rewards"].value).tolist()
        except ValueError:
            r = []
        G = change["new"]
        with self.hold():
            self.controls["rewards"].value = ", ".join(f"{v:g}" for v in (r + [0.0] * G)[:G])

    def _on_rewards(self, change) -> None:
        try:
            n = len(parse_rewards(change["new"]))
        except ValueError:
            n = None
        with self.hold():
            if n is not None and 1 <= n <= self.controls["G"].max:
                self.controls["G"].value = n

    # --- the numbers and the figure ----------------------------------------------------------------
    def _figure(self):
        c = self.controls
        name, G = c["estimator"].value, c["G"].value
        fn = ADVANTAGES[name]
        hyper = hyper_kwargs(fn, c)
        clean = parse_rewards(c["rewards"].value)
        if len(clean) != G:
            raise ValueError(f"rewards: expected G={G} numbers, got {len(clean)}")
        noise = dict(sigma_shared=c["sigma_shared"].value, sigma_sample=c["sigma_sample"].value)
        rewards = compute.noisy_rewards(clean, **noise, seed=self.seed)          # (G,)
        adv = fn(rewards, G, **hyper)                                            # (G,)
        many, right = compute.advantage_samples(fn, hyper, G=G, p=c["p"].value, n_groups=self.n_groups,
                                                seed=self.seed, **noise)
        odd = {n: self._odd(n, G) for n in dict.fromkeys((name, *c["compare"].value))}  # chosen first
        self.values = {"A_0": float(adv[0]), "sum|A|": float(adv.abs().sum()),
                       "mean A right": float(many[right].mean()) if right.any() else float("nan")}
        return advantage_figure(rewards=rewards, adv=adv, dist_right=many[right], dist_wrong=many[~right],
                                gaps=GAPS, odd=odd, selected=name, title=f"Advantages: {name}, G = {G}")

    def _odd(self, name: str, G: int) -> torch.Tensor:
        fn = ADVANTAGES[name]
        try:
            return compute.odd_one_out(fn, hyper_kwargs(fn, self.controls), G=G, gaps=GAPS)
        except ValueError:  # an estimator that rejects this group (e.g. G = 1) draws no line
            return torch.full_like(GAPS, float("nan"))
