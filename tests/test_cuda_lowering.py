"""Every algos/ script compiles for a GPU, checked on a CPU-only machine: its jitted init, training chunk,
evaluation and pictures are exported for the `cuda` platform with `jax.export` at a tiny config. Export refuses
host callbacks and custom calls without a stability guarantee (CPU-only kernels among them), so a script that
would only fail on a user's GPU fails here. One seed and two: `vmap_seeds` builds a different program for one
seed (no vmap, the one-seed PPO skip a plain `lax.cond`), and both run on users' GPUs."""

import importlib

import jax
import pytest
from jax import export

from common.config import with_flags

TINY = dict(
    num_envs=4,
    num_steps=8,
    max_steps=8,
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
SCRIPT_FLAGS = {
    "dr": {},
    "plr": dict(buffer_size=8),
    "accel": dict(buffer_size=8),
    "plr_parallel": dict(buffer_size=8),
    "accel_parallel": dict(buffer_size=12),
    "paired": dict(teacher_lstm_size=8, teacher_conv_filters=4),
    "sfl": dict(refresh_interval=2, score_batches=1, score_batch_size=8, score_steps=8, buffer_size=4),
}


def export_for_cuda(function, *args) -> str:
    """The StableHLO text of `function` exported for CUDA (export raises on what CUDA cannot run)."""
    return export.export(jax.jit(function), platforms=("cuda",))(*args).mlir_module()


@pytest.mark.slow
@pytest.mark.parametrize("num_seeds", [1, 2], ids=["one_seed", "two_seeds"])
@pytest.mark.parametrize("name", SCRIPT_FLAGS)
def test_every_function_of_the_script_exports_for_cuda(name, num_seeds):
    module = importlib.import_module(f"algos.{name}")
    config = with_flags(module.Config(), **TINY, num_seeds=num_seeds, **SCRIPT_FLAGS[name])
    functions = module.make_train(config)
    rngs = jax.random.split(jax.random.key(0), config.run.num_seeds)
    runner = jax.eval_shape(functions.init, rngs)
    modules = {
        "init": export_for_cuda(functions.init, rngs),
        "step": export_for_cuda(functions.step, runner),
        "evaluate": export_for_cuda(functions.evaluate, runner),
        "levels": export_for_cuda(functions.levels, runner),
    }
    for part, text in modules.items():
        assert "callback" not in text, f"{name}.{part} calls back to the host"


def test_the_check_catches_a_host_callback():
    def with_callback(x):
        return jax.experimental.io_callback(lambda v: v, jax.ShapeDtypeStruct((), x.dtype), x)

    with pytest.raises(ValueError, match="lowering platform cuda"):
        export_for_cuda(with_callback, jax.numpy.float32(1.0))
