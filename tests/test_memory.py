"""Four models vs three: model-state bytes by hand, and activation bytes measured by autograd's saved tensors."""

import pytest
import torch
from torch import nn

from rlnb.notebook.memory import (
    critic_share,
    decoder_activation_bytes,
    model_state_bytes,
    saved_activation_bytes,
    setup_memory,
    trunk_activation_bytes,
)


def test_model_state_bytes_per_precision():
    assert model_state_bytes(1000, trainable=False, precision="fp32") == 4000
    assert model_state_bytes(1000, trainable=True, precision="fp32") == 16000          # w, grad, 2 Adam moments
    assert model_state_bytes(1000, trainable=False, precision="bf16-mixed") == 2000
    assert model_state_bytes(1000, trainable=True, precision="bf16-mixed") == 16000    # 2 + 2 + 8 + 4 master


def test_setups_and_the_critic_share_by_hand():
    ppo = setup_memory(100, setup="ppo", precision="bf16-mixed", activations=7)
    assert set(ppo) == {"policy", "rollout", "reference", "critic", "activations"}
    assert ppo["critic"] == ppo["policy"] == 1600 and ppo["rollout"] == ppo["reference"] == 200
    assert ppo["activations"] == 14                                                    # two trained models
    group = setup_memory(100, setup="group baseline", precision="bf16-mixed", activations=7, reference=False)
    assert set(group) == {"policy", "rollout", "activations"} and group["activations"] == 7
    # bf16-mixed, with reference: 1 - (16 + 2 + 2) / (16 + 16 + 2 + 2) = 16 / 36
    assert critic_share(100, precision="bf16-mixed") == pytest.approx(16 / 36)
    # without the reference the critic is half of what is left: 16 / (16 + 16 + 2)
    assert critic_share(100, precision="bf16-mixed", reference=False) == pytest.approx(16 / 34)
    # activations: the critic adds one trained model's activations
    assert critic_share(100, precision="fp32", activations=10**6) > critic_share(100, precision="fp32")


@pytest.mark.parametrize("bad", [dict(n_params=-1), dict(n_params=1.5), dict(precision="fp8")])
def test_model_state_bytes_rejects_bad_input(bad):
    kw = dict(n_params=10, trainable=True, precision="fp32") | bad
    with pytest.raises(ValueError, match=next(iter(bad))):
        model_state_bytes(kw.pop("n_params"), **kw)


def test_setup_memory_rejects_unknown_setup():
    with pytest.raises(ValueError, match="setup"):
        setup_memory(10, setup="trpo")


def test_saved_bytes_of_a_linear_chain_by_hand():
    net = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    x = torch.zeros(4, 3)
    # Linear 1 saves its input x (4x3); ReLU saves its output (4x5); Linear 2 saves its input, the same
    # tensor as ReLU's output (counted once). Weights are parameters: not counted. fp32: 4 bytes each.
    assert saved_activation_bytes(net, x) == (4 * 3 + 4 * 5) * 4
    with torch.no_grad():                      # a frozen forward still counts what it *would* save under grad
        assert saved_activation_bytes(net, x) == (4 * 3 + 4 * 5) * 4


def test_trunk_extrapolation_matches_the_full_model_and_scales_with_tokens(default_model):
    model, _ = default_model
    full = decoder_activation_bytes(model, batch=2, seq=8)
    assert trunk_activation_bytes(model.config, batch=2, seq=8) == full
    one, four = decoder_activation_bytes(model, batch=1, seq=8), decoder_activation_bytes(model, batch=4, seq=8)
    # affine in the batch: per-row activations plus what rows share (the rotary cos/sin tables)
    assert four - full == 2 * (full - one) and full - one > 0.9 * one


def test_activation_sizes_are_checked():
    with pytest.raises(ValueError, match="seq"):
        decoder_activation_bytes(nn.Linear(2, 2), batch=1, seq=0)
