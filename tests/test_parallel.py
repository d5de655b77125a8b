"""algos/plr_parallel.py and algos/accel_parallel.py: every update plays new, replay (and mutant) blocks in
one rollout; fresh levels stand in for replay and no PPO step is kept until the buffer is warm, then every
update trains on the replay block; mutants enter the buffer one generation deeper; resume is exact."""

import jax
import numpy as np
import pytest

from algos import accel_parallel, plr_parallel
from common.config import with_flags
from tests.states import assert_states_close, newest_state, run_script

TINY = dict(
    num_seeds=2,
    num_envs=4,
    num_steps=24,
    max_steps=12,
    maze_size=5,
    lstm_size=16,
    buffer_size=24,
    total_updates=6,
    log_interval=1,
    eval_interval=0,
    checkpoint_interval=6,
    screenshot_interval=0,
)
MODULES = [plr_parallel, accel_parallel]


def tiny_config(module, tmp_path, **overrides):
    # Parallel PLR's 60 default walls do not fit a 5x5 maze; Parallel ACCEL's new levels stay empty.
    walls = {"n_walls": 3} if module is plr_parallel else {}
    return with_flags(module.Config(), **{**TINY, **walls, "runs_dir": str(tmp_path), **overrides})


def params_changed(before, after, seed) -> bool:
    leaves = zip(jax.tree.leaves(before), jax.tree.leaves(after), strict=True)
    return any(bool((x[seed] != y[seed]).any()) for x, y in leaves)


@pytest.mark.slow
@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.split(".")[-1])
def test_blocks_warm_up_then_train_on_replay_every_update(module, tmp_path):
    config = tiny_config(module, tmp_path)
    functions = module.make_train(config)
    runner = jax.jit(functions.init)(jax.random.split(jax.random.key(0), config.run.num_seeds))
    step = jax.jit(functions.step)
    fills, replayed = [], []
    for _ in range(config.run.total_updates):
        before = runner.train_state.params
        runner, metrics = jax.device_get(step(runner))
        fills.append(metrics["buffer/fill"][:, 0])
        replayed.append(metrics["buffer/replay_fraction"][:, 0])
        warm = bool(replayed[-1][0])
        assert (replayed[-1] == warm).all(), "both seeds see the same fill, so they warm up together"
        for seed in range(config.run.num_seeds):
            assert params_changed(before, runner.train_state.params, seed) == warm
        assert np.isnan(metrics["level_replay/walls"]).all() != warm
        assert np.isfinite(metrics["ppo/loss"]).all() == warm and np.isnan(metrics["ppo/loss"]).all() != warm
        assert np.isfinite(metrics["train_new/return"]).all()
    # Before warm-up every block is inserted: 2 (3) blocks of 4 levels into 24 slots.
    np.testing.assert_allclose(fills[0], config.num_blocks * config.ppo.num_envs / config.buffer_size)
    assert replayed[0].sum() == 0 and all(r.all() for r in replayed[-3:])
    if module is accel_parallel:
        assert (metrics["level_new/walls"] == 0).all(), "new levels are empty mazes"
        assert (metrics["level_mutant/walls"] > 0).all()
        assert runner.buffer.mutations.max() >= 2, "mutants of mutants enter the buffer"
        assert metrics["buffer/max_mutations"][:, 0].tolist() == runner.buffer.mutations.max(axis=1).tolist()


@pytest.mark.slow
@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.split(".")[-1])
def test_resume_equals_uninterrupted(module, tmp_path):
    common = dict(log_interval=2, checkpoint_interval=2)
    straight = tiny_config(module, tmp_path, run_name="straight", **common)
    run_script(module, straight)
    run_script(module, tiny_config(module, tmp_path, run_name="split", total_updates=2, **common))
    run_script(module, tiny_config(module, tmp_path, run_name="split", resume=True, **common))
    states = [newest_state(module, straight, tmp_path / name) for name in ("straight", "split")]
    assert int(states[0].update[0]) == 6 and int(states[0].buffer.filled.sum()) > 0
    assert_states_close(*states)


def test_parallel_accel_counts_all_three_blocks():
    config = with_flags(accel_parallel.Config(), num_envs=8, num_steps=16)
    assert config.env_steps_per_update == 3 * 8 * 16
    assert with_flags(plr_parallel.Config(), num_envs=8, num_steps=16).env_steps_per_update == 2 * 8 * 16
