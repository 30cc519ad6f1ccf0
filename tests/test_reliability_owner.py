"""One owner at a time: while a Lab plays (or holds a half-run step), the trainer's own methods called from
the notebook's thread are refused by name, nothing changes, and after a pause they work and the history is
one unbroken run."""

import threading

import pytest

from rlnb import Trainer
from rlnb.lab import LabLoop
from rlnb.run import owner

# each call a notebook might make while the lab plays; the refusal must name the method
CALLS = {
    "step": lambda t, tmp: t.step(),
    "run": lambda t, tmp: t.run(2, progress=False),
    "rollout": lambda t, tmp: t.rollout(),
    "save": lambda t, tmp: t.save(tmp / "ckpt"),
    "reconfigure": lambda t, tmp: t.reconfigure(lr=1e-3),
    "set_recipe": lambda t, tmp: t.set_recipe(t.recipe.replace(beta=0.1)),
    "use_reference": lambda t, tmp: t.use_reference("copy"),
    "set_state": lambda t, tmp: t.set_state(t.state()),
    "next_prompts": lambda t, tmp: t.next_prompts(),             # it moves the playing run's prompt cursor
    "evaluate": lambda t, tmp: t.evaluate(4),                     # it switches the playing model to eval mode
    "log_knobs": lambda t, tmp: t.log_knobs("lr"),                # it changes what the next step records
}


@pytest.fixture(scope="module")
def playing():
    t = Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, max_new_tokens=8)
    loop = LabLoop(t)
    first = threading.Event()
    loop.on_step = lambda rec: first.set()
    loop.play()
    assert first.wait(120), "the lab never took a step"
    yield t, loop
    loop.close()


@pytest.mark.parametrize("name", list(CALLS))
def test_a_call_from_the_notebook_while_the_lab_plays_is_refused_by_name(playing, name, tmp_path):
    t, loop = playing
    recipe, lr = t.recipe, t.optimizer.param_groups[0]["lr"]
    assert owner.driver(t) == "a playing Lab"
    with pytest.raises(RuntimeError, match=rf"^{name}: a playing Lab is training this trainer.*lab\.pause\(\)"):
        CALLS[name](t, tmp_path)
    assert t.recipe is recipe and t.optimizer.param_groups[0]["lr"] == lr   # nothing changed
    assert t.logged_knobs == ()
    assert not (tmp_path / "ckpt").exists()
    assert loop.state == "playing" and loop.error is None                  # and the lab plays on


def test_after_pause_the_calls_work_and_the_history_is_one_run(tmp_path):
    t = Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, max_new_tokens=8)
    loop = LabLoop(t)
    loop.play(steps=2)
    loop.wait()
    loop.pause()
    assert owner.driver(t) is None
    t.step()
    t.save(tmp_path / "ckpt")
    t.reconfigure(lr=1e-3)
    assert [h["step"] for h in t.history] == [1, 2, 3]
    loop.close()


def test_a_half_run_step_owns_the_trainer_until_it_commits():
    t = Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, max_new_tokens=8)
    loop = LabLoop(t)
    assert loop.step_stage()[0] == "sample"
    with pytest.raises(RuntimeError, match=r"^step: a Lab's half-run step"):
        t.step()
    for _ in range(3):
        stage, _ = loop.step_stage()
    assert stage == "update" and owner.driver(t) is None
    t.step()                                                                # free again
    assert t.step_count == 2
    loop.close()


def test_the_driver_thread_itself_may_call_anything():
    t = Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, max_new_tokens=8)
    out = {}

    def drive():
        out["rec"] = t.step()

    th = threading.Thread(target=drive)
    owner.claim(t, th, "a test thread")
    th.start()
    th.join(120)
    owner.release(t, th)
    assert out["rec"].metrics["step"] == 1 and owner.driver(t) is None


# --- refused changes are atomic ------------------------------------------------------------------------

def small():
    return Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, max_new_tokens=8)


REFUSED = {  # a change the trainer refuses: (call, the error's first words)
    "context": (lambda t: t.reconfigure(max_new_tokens=100000), "max_new_tokens: expected fewer"),
    "context with beta": (lambda t: t.reconfigure(beta=0.1, max_new_tokens=100000), "max_new_tokens: expected fewer"),
    "critic": (lambda t: t.reconfigure(critic=True), "critic: cannot switch"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_refused_reconfigure_leaves_recipe_stages_and_reference_as_they_were(case, tmp_path):
    t = small()
    before = {k: getattr(t, k) for k in ("recipe", "ref_model", "sampler", "updater", "controllers")}
    call, words = REFUSED[case]
    with pytest.raises(ValueError, match=f"^{words}"):
        call(t)
    assert all(getattr(t, k) is v for k, v in before.items())
    t.step()
    t.save(tmp_path / "c")
    assert Trainer.load(tmp_path / "c").recipe == t.recipe                 # the checkpoint still loads


def test_the_lab_refuses_a_recipe_switch_it_cannot_make_whole():
    from rlnb.viz import Lab

    t = small()
    lab = Lab(t)
    recipe = t.recipe
    with pytest.raises(ValueError, match=r"^recipe: 'ppo' trains critic .* cannot switch live"):
        lab.set("recipe", "ppo")
    with pytest.raises(ValueError, match="^max_new_tokens"):
        lab.set("max_new_tokens", 100000)
    assert t.recipe is recipe and lab.loop.pending == {}
    lab.controls["recipe"].value = "ppo"                                    # the dropdown: shown, and put back
    assert "critic" in lab.message.value and lab.controls["recipe"].value == recipe.name and t.recipe is recipe
    lab.set("recipe", "dr_grpo")                                            # a whole switch applies whole
    assert (t.recipe.name, t.recipe.advantage, t.recipe.aggregation) == ("dr_grpo", "dr_grpo", "seq-mean-token-sum-norm")
    lab.close()
    with pytest.raises(RuntimeError, match="^set: this lab is closed"):
        lab.set("beta", 0.1)
    again = Lab(t)                                                          # released: a new lab may drive it
    again.close()


def test_a_lab_whose_constructor_raised_owns_nothing(monkeypatch):
    from rlnb.viz.live import lab_panel as lab_mod

    t = small()

    def broken(*a, **k):
        raise RuntimeError("dashboard broke")

    monkeypatch.setattr(lab_mod, "LabDashboard", broken)
    with pytest.raises(RuntimeError, match="dashboard broke"):
        lab_mod.Lab(t)
    assert t.ref_model is None                                              # the reference it added is handed back
    monkeypatch.undo()
    lab_mod.Lab(t).close()                                                  # nobody owns the trainer


def test_a_lab_loop_whose_checkpoint_failed_owns_nothing(monkeypatch):
    from rlnb.lab import points

    t = small()
    monkeypatch.setattr(points, "snapshot", lambda *a, **k: (_ for _ in ()).throw(MemoryError("no room")))
    with pytest.raises(MemoryError):
        LabLoop(t)
    monkeypatch.undo()
    LabLoop(t).close()
