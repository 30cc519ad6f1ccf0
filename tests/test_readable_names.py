"""What a learner reads uses the course's labels, not raw history keys: the progress bar says "mean reward 0.188",
not "reward=0.188" (issue 44)."""

from rlnb import Trainer


def test_the_progress_bar_names_the_reward_by_its_label(capsys):
    t = Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, seed=0)
    t.run(1, progress=True)
    err = capsys.readouterr().err
    assert f"mean reward {t.history[-1]['reward']:.3f}" in err and "reward=" not in err
