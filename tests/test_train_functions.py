"""For every method besides DR and Robust PLR (tests/test_contract.py drives those two the same way, with their
stopping rules): driving `make_train`'s functions chunk by chunk, as the shared driver does, equals the pure one-shot
`train` bitwise, evaluations included."""

import functools

import jax
import numpy as np
import pytest

from algos import accel, accel_parallel, paired, plr_parallel, sfl
from common.config import with_flags
from tests.conftest import SCRIPTS_FUSION_EMITTERS
from tests.states import assert_states_close

TINY = dict(
    num_seeds=2,
    num_envs=2,
    num_steps=8,
    max_steps=6,
    maze_size=5,
    n_walls=3,
    lstm_size=8,
    total_updates=4,
    log_interval=1,
    eval_interval=2,
    eval_mazes=("SixteenRooms",),
    eval_episodes=1,
    checkpoint_interval=2,
    screenshot_interval=0,
)
EXTRA = {
    accel: dict(buffer_size=4),
    plr_parallel: dict(buffer_size=6),
    accel_parallel: dict(buffer_size=8),
    paired: dict(teacher_lstm_size=8, teacher_conv_filters=4, noise_dim=2),
    sfl: dict(refresh_interval=2, score_batches=2, score_batch_size=4, score_steps=8, buffer_size=3, num_minibatches=1),
}


@pytest.mark.slow
@pytest.mark.parametrize("module", list(EXTRA), ids=lambda module: module.__name__.split(".")[-1])
def test_chunked_driving_equals_one_shot_train(module):
    config = with_flags(module.Config(), **TINY, **EXTRA[module])
    functions = module.make_train(config)
    keys = jax.random.split(jax.random.key(3), config.run.num_seeds)
    # Bitwise equal as the scripts compile: the tests' faster emitter fuses the step inside train's loop otherwise
    # than alone, and one float in a few thousand rounds the other way.
    jit = functools.partial(jax.jit, compiler_options=SCRIPTS_FUSION_EMITTERS)
    one_shot, (metrics, evaluations) = jit(functions.train)(keys)
    runner, step, evaluate = jit(functions.init)(keys), jit(functions.step), jit(functions.evaluate)
    chunk_metrics, chunk_evaluations = [], []
    for chunk in range(config.run.total_updates // config.run.log_interval):
        runner, chunk_metric = step(runner)
        chunk_metrics.append(chunk_metric)
        if (chunk + 1) * config.run.log_interval % config.run.eval_interval == 0:
            chunk_evaluations.append(evaluate(runner))
    assert_states_close(one_shot, runner)
    # One-shot metrics are [chunks, seeds, updates]; evaluations [evaluations, seeds].
    for key, values in metrics.items():
        np.testing.assert_array_equal(values, np.stack([m[key] for m in chunk_metrics]), err_msg=key)
    for key, values in evaluations.items():
        np.testing.assert_array_equal(values, np.stack([e[key] for e in chunk_evaluations]))
