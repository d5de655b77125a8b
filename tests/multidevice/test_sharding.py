"""Sharding across 4 devices; run by tests/test_devices.py in a process started with
XLA_FLAGS=--xla_force_host_platform_device_count=4 (skipped in a process with fewer devices).

Seed sharding runs one seed per device, and XLA compiles a 1-seed program differently from a 4-seed one, so
results agree to float rounding (about 1e-7, as a vmapped seed agrees with a single-seed run), not bitwise.
"""

import jax
import numpy as np
import pytest

from algos import accel_parallel, dr, paired
from common import evaluate, sweep
from common.config import with_flags
from common.devices import make_placement
from common.errors import ConfigError
from tests.states import assert_states_close, newest_state, run_script

pytestmark = pytest.mark.skipif(jax.device_count() < 4, reason="needs 4 devices (XLA_FLAGS forces them on CPU)")

TINY = dict(
    num_envs=8,
    num_steps=16,
    lstm_size=16,
    maze_size=7,
    n_walls=10,
    max_steps=12,
    total_updates=4,
    log_interval=2,
    eval_interval=2,
    eval_mazes=("SixteenRooms",),
    eval_episodes=2,
    checkpoint_interval=2,
    screenshot_interval=2,
)


UNWATCHED = dict(eval_interval=0, screenshot_interval=0)
"""For runs whose state is what a test compares: no evaluation or pictures to compile."""


def train_chunks(module, num_chunks=2, evaluated=False, **overrides):
    """Drive `num_chunks` chunks as main() does; returns (placement, runner state, metrics, the held-out evaluation
    when `evaluated`, else None)."""
    config = with_flags(module.Config(), **{**TINY, **overrides})
    functions = module.make_train(config)
    placement = make_placement(config.run, config.ppo.num_envs)
    runner = placement.place(jax.jit(functions.init)(jax.random.split(jax.random.key(0), config.run.num_seeds)))
    step = placement.jit(functions.step)
    metrics = []
    for _ in range(num_chunks):
        runner, chunk_metrics = step(runner)
        metrics.append(placement.to_host(chunk_metrics))
    evaluation = placement.to_host(placement.jit(functions.evaluate)(runner)) if evaluated else None
    return placement, runner, metrics, evaluation


def test_seed_sharding_matches_one_device():
    placement, runner, metrics, evaluation = train_chunks(dr, evaluated=True, num_seeds=4, num_devices=4)
    assert placement.num_devices == 4 and not placement.shard_envs
    params = jax.tree.leaves(runner.train_state.params)[0]
    assert len(params.sharding.device_set) == 4 and params.addressable_shards[0].data.shape[0] == 1
    _, single, single_metrics, single_evaluation = train_chunks(dr, evaluated=True, num_seeds=4, num_devices=1)
    assert_states_close(jax.device_get(runner), jax.device_get(single), rtol=1e-5, atol=1e-6)
    assert_states_close(metrics, single_metrics, rtol=1e-4, atol=1e-5)
    assert evaluation.keys() == single_evaluation.keys()
    assert all(np.isfinite(values).all() and values.shape == (4,) for values in evaluation.values())


@pytest.mark.parametrize("module", [dr, accel_parallel], ids=["dr", "accel_parallel"])
def test_env_sharding_matches_one_device(module):
    placement, runner, metrics, evaluation = train_chunks(
        module, evaluated=module is dr, num_seeds=2, num_devices=4, shard_envs=True
    )
    assert placement.shard_envs and placement.num_devices == 4
    if module is dr:  # evaluated with the state replicated and the envs split
        assert all(np.isfinite(values).all() and values.shape == (2,) for values in evaluation.values())
    _, single, single_metrics, _ = train_chunks(module, num_seeds=2, num_devices=1)
    assert int(jax.device_get(runner.update)[0]) == 4
    assert_states_close(runner.train_state.params, single.train_state.params, rtol=1e-4, atol=1e-5)
    assert_states_close(metrics, single_metrics, rtol=1e-3, atol=1e-4)
    if module is accel_parallel:
        for a, b in zip(jax.tree.leaves(runner.buffer.levels), jax.tree.leaves(single.buffer.levels), strict=True):
            np.testing.assert_array_equal(a, b)


def test_seeds_that_do_not_divide_split_envs_instead():
    placement, _, metrics, _ = train_chunks(paired, num_chunks=1, num_seeds=3, num_devices=4, teacher_conv_filters=4)
    assert placement.shard_envs
    assert np.isfinite(metrics[0]["teacher/ppo/loss"]).all() and np.isfinite(metrics[0]["protagonist/ppo/loss"]).all()


def test_a_sweep_takes_one_device_when_none_is_given_and_is_evaluated_there(tmp_path):
    """With --num-devices unset a run takes every device its seeds or envs split over; a sweep (one device only)
    was refused on such a host, and its folder could not be evaluated there."""
    config = with_flags(dr.Config(), **{**TINY, "num_seeds": 2, "runs_dir": str(tmp_path), "sweep": ("lr=1e-4,3e-4",)})
    assert config.run.devices.num_devices is None
    assert make_placement(config.run, config.ppo.num_envs).num_devices == 4  # what a run without the sweep takes
    functions = sweep.run_functions(config, dr.make_train, "algos/dr.py")
    assert functions.placement.num_devices == 1
    run_dir = run_script(dr, with_flags(config, total_updates=2, eval_interval=0, screenshot_interval=0))
    evaluate.main(evaluate.Args(run_dir=run_dir, mazes=("SixteenRooms",), episodes=1))
    assert list((run_dir / "eval").glob("evaluate_*.csv"))
    with pytest.raises(ConfigError, match="--sweep trains on one device: give --num-devices 1"):
        sweep.run_functions(with_flags(config, num_devices=2), dr.make_train, "algos/dr.py")


def test_checkpoint_resumes_on_another_device_count(tmp_path):
    run = lambda **flags: run_script(
        dr, with_flags(dr.Config(), **{**TINY, **UNWATCHED, "num_seeds": 4, "runs_dir": str(tmp_path), **flags})
    )  # noqa: E731
    run(run_name="straight", num_devices=1, total_updates=6)
    run(run_name="moved", num_devices=4, total_updates=2)
    run(run_name="moved", num_devices=1, total_updates=4, resume=True)
    run(run_name="moved", num_devices=4, total_updates=6, resume=True)
    config = with_flags(dr.Config(), **{**TINY, "num_seeds": 4})
    straight, moved = (newest_state(dr, config, tmp_path / name) for name in ("straight", "moved"))
    assert int(moved.update[0]) == 6
    assert_states_close(straight, moved, rtol=1e-5, atol=1e-6)
