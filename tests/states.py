"""Runs and runner states in tests: a script run through the shared driver, the newest checkpoint of a run, and
leaf-by-leaf comparison (RNG keys as their data)."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from common import checkpoint, driver


def newest_state(module, config, run_dir: Path):
    """The runner state in the newest checkpoint of `run_dir`, written by algos/<module> with `config`."""
    template = jax.eval_shape(
        module.make_train(config).init, jax.random.split(jax.random.key(config.run.seed), config.run.num_seeds)
    )
    return checkpoint.load(checkpoint.list_checkpoints(run_dir / "checkpoints")[-1], template)[0]


def assert_states_close(a, b, rtol: float = 0.0, atol: float = 0.0) -> None:
    """Every leaf equal (by default exactly); typed RNG keys are compared by their key data."""
    for leaf_a, leaf_b in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        if jnp.issubdtype(leaf_a.dtype, jax.dtypes.prng_key):
            leaf_a, leaf_b = jax.random.key_data(leaf_a), jax.random.key_data(leaf_b)
        np.testing.assert_allclose(np.asarray(leaf_a), np.asarray(leaf_b), rtol=rtol, atol=atol)


def run_script(module, config) -> Path:
    """Run `config` through the shared driver, as `python algos/<module>.py` would; returns the run folder."""
    script = f"algos/{module.__name__.split('.')[-1]}.py"
    return driver.run(config, module.make_train, script, module.HEADLINE_METRICS)
