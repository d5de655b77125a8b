"""In every script the PPO update replays the rollout with the policy that played it: with one epoch of one
minibatch the loss is taken at the rollout's own parameters, so each action's probability ratio is 1 up to float32
rounding (approximate KL about 0, clip fraction 0) when the update feeds the network the rollout's observations,
episode resets and initial LSTM carry. Any other wiring (resets dropped, the carry of the rollout's end, observations
misaligned) gives the recurrent policy other inputs and a ratio away from 1 once the policy is no longer uniform: the
updates after the first, at a high learning rate. Episodes of at most 3 steps put resets inside every 8-step
rollout. Mutation checked by hand: each script's transitions recorded without their resets, and dr's PPO started
from the rollout's last carry with --carry-across-updates."""

import importlib

import jax
import numpy as np
import pytest

from common.config import with_flags
from tests.test_sweep import SCRIPTS, TINY

LEARNING_RATE = 0.03
MOVED = dict(num_epochs=1, num_minibatches=1, max_steps=3, log_interval=4, total_updates=8, checkpoint_interval=4)
CASES = {name: {} for name in SCRIPTS} | {"dr carried": {"carry_across_updates": True}}
TOLERANCE = 1e-7
"""Rounding's share of the mean approximate KL: (ratio - 1) - log ratio is evaluated in float32, so a log-probability
one ulp off in the update's pass over the whole rollout (other shapes, other fusions than the rollout's one-step
pass) leaves a few 1e-8 in an element. The wirings the module docstring names exceed it (dr without resets: 1e-5
and more)."""


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_one_minibatch_update_sees_each_action_with_the_probability_it_was_played(case, tmp_path):
    name = case.split()[0]
    module = importlib.import_module(f"algos.{name}")
    flags = {**TINY, **SCRIPTS[name][0], **MOVED, **CASES[case], "lr": LEARNING_RATE, "runs_dir": str(tmp_path)}
    if name == "sfl":  # refreshes fall between chunks: a multiple of MOVED's longer chunk
        flags["refresh_interval"] = MOVED["log_interval"]
    if name == "paired":  # the teacher's policy moves too, so its replay is tested off the uniform policy as well
        flags["teacher_lr"] = LEARNING_RATE
    config = with_flags(module.Config(), **flags)
    functions = module.make_train(config)
    runner = jax.jit(functions.init)(jax.random.split(jax.random.key(0), config.run.num_seeds))
    _, metrics = jax.jit(functions.step)(runner)
    kl_names = [metric for metric in metrics if metric.endswith("ppo/approx_kl")]
    assert kl_names, "every script logs its PPO updates' approximate KL"
    for kl_name in kl_names:
        kl = np.asarray(metrics[kl_name])[:, 1:]  # [seeds, updates]: the first sees the initial, uniform policy
        clipped = np.asarray(metrics[kl_name.replace("approx_kl", "clip_frac")])[:, 1:]
        updated = np.isfinite(kl)  # a replay method's new-level cycles skip PPO and log NaN
        assert updated.sum() >= 2, f"{kl_name}: too few updates to tell"
        assert np.all(kl[updated] <= TOLERANCE), f"{kl_name}: {kl}"
        assert np.all(clipped[updated] == 0), f"{kl_name}: {clipped}"
