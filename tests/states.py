"""Runs and runner states in tests: a script run through the shared driver, a command line run in the test's
process, the newest checkpoint of a run, and leaf-by-leaf comparison (RNG keys as their data)."""

import contextlib
import importlib.util
import io
import os
import runpy
import signal
import subprocess
import sys
import unittest.mock
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from common import checkpoint, driver

REPO_ROOT = Path(__file__).resolve().parents[1]


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


def run_update_by_update(functions, config, key) -> tuple[list, dict]:
    """A run of `functions` (a script's make_train) one update per call, so its state can be compared before and
    after every update: (the host runner state before each update, then after the last; every metric [seeds,
    updates])."""
    step = jax.jit(functions.step)
    runner = jax.jit(functions.init)(jax.random.split(key, config.run.num_seeds))
    runners, per_update = [jax.device_get(runner)], []
    for _ in range(config.run.total_updates):
        runner, metrics = step(runner)
        runners.append(jax.device_get(runner))
        per_update.append(jax.device_get(metrics))
    return runners, jax.tree.map(lambda *m: np.concatenate(m, axis=1), *per_update)


def for_seed(tree, seed: int):
    """One seed's part of a batched state or tree, as numpy leaves."""
    return jax.tree.map(lambda x: np.asarray(x[seed]), tree)


def params_changed(before, after, seed: int) -> bool:
    """Whether one seed's parameters differ between two batched parameter trees."""
    leaves = zip(jax.tree.leaves(before), jax.tree.leaves(after), strict=True)
    return any(bool((x[seed] != y[seed]).any()) for x, y in leaves)


def run_script(module, config) -> Path:
    """Run `config` through the shared driver, as `python algos/<module>.py` would; returns the run folder."""
    script = f"algos/{module.__name__.split('.')[-1]}.py"
    return driver.run(config, module.make_train, script, module.HEADLINE_METRICS)


def command_in_process(*argv: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    """`python *argv` (a script's path, or `-m` and a module, then its flags) run in this process with wandb
    disabled, its exit status and what it printed returned as `subprocess.run(..., capture_output=True, text=True)`
    does: the same code from the command line on, without a second interpreter loading jax, flax and distrax (about
    2 s on the 2-core machine), for the many refusals the tests check. The scripts and commands keep refusal tests
    in their own process: what the interpreter itself prints (an import's warning) shows only there."""
    stdout, stderr = io.StringIO(), io.StringIO()
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    saved_argv, saved_cwd, status = sys.argv, os.getcwd(), 0
    try:
        os.chdir(cwd)
        with (
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
            unittest.mock.patch.dict(os.environ, {"WANDB_MODE": "disabled"}),
        ):
            # A module by its file: runpy.run_module warns when a test has imported the module already.
            path = importlib.util.find_spec(argv[1]).origin if argv[0] == "-m" else argv[0]
            sys.argv = [path, *argv[2 if argv[0] == "-m" else 1 :]]
            runpy.run_path(path, run_name="__main__")
    except SystemExit as ended:
        if isinstance(ended.code, str):
            stderr.write(ended.code + "\n")
        status = 1 if isinstance(ended.code, str) else ended.code or 0
    finally:
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        for number, handler in handlers.items():  # a script's run leaves Ctrl+C ignored for the process's end
            signal.signal(number, handler)
    return subprocess.CompletedProcess(list(argv), status, stdout.getvalue(), stderr.getvalue())
