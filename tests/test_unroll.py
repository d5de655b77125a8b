"""--unroll changes how the rollout and LSTM scans compile, not what they compute: a chunk of updates and an
evaluation with unroll 1 and with an unroll that does not divide the scans' lengths agree to float tolerance, for
the student's scans (DR), the teacher's (PAIRED) and SFL's scoring rollouts. Which default each backend gets is
common.devices.scan_unroll."""

import jax
import numpy as np
import pytest

from algos import dr, paired, sfl
from common.config import with_flags
from common.devices import CPU_UNROLL, GPU_UNROLL, scan_unroll
from tests.states import assert_states_close

TINY = dict(
    num_seeds=2,
    num_envs=2,
    num_steps=8,
    max_steps=6,
    maze_size=5,
    n_walls=3,
    lstm_size=8,
    total_updates=2,
    log_interval=2,
    eval_interval=2,
    eval_mazes=("SixteenRooms",),
    eval_episodes=2,
    checkpoint_interval=2,
    screenshot_interval=0,
)
EXTRA = {
    dr: {},
    paired: dict(teacher_lstm_size=8, teacher_conv_filters=4, noise_dim=2),
    sfl: dict(refresh_interval=2, score_batches=1, score_batch_size=4, score_steps=8, buffer_size=3, num_minibatches=1),
}


def chunk_and_evaluation(module, unroll: int):
    config = with_flags(module.Config(), **TINY, **EXTRA[module], unroll=unroll)
    functions = module.make_train(config)
    runner = jax.jit(functions.init)(jax.random.split(jax.random.key(5), 2))
    runner, metrics = jax.jit(functions.step)(runner)
    return runner, metrics, jax.jit(functions.evaluate)(runner)


@pytest.mark.parametrize("module", [dr, paired, sfl], ids=lambda module: module.__name__.split(".")[-1])
def test_unrolled_scans_compute_the_same_update(module):
    plain_runner, plain_metrics, plain_eval = chunk_and_evaluation(module, 1)
    runner, metrics, evaluation = chunk_and_evaluation(module, 3)
    assert_states_close(plain_runner, runner, rtol=1e-4, atol=1e-5)
    for key, values in plain_metrics.items():
        np.testing.assert_allclose(values, metrics[key], rtol=1e-4, atol=1e-5, err_msg=key)
    for key, values in plain_eval.items():
        np.testing.assert_allclose(values, evaluation[key], rtol=1e-4, atol=1e-5, err_msg=key)


def test_the_default_unroll_follows_the_backend():
    config = dr.Config()
    assert config.run.devices.unroll is None
    expected = CPU_UNROLL if jax.default_backend() == "cpu" else GPU_UNROLL
    assert scan_unroll(config.run.devices) == expected
    assert scan_unroll(with_flags(config, unroll=5).run.devices) == 5
