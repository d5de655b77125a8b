"""Placement flags: one-line errors before compiling, and the 4-device suite (tests/multidevice) in a process
with 4 forced CPU devices (the two-process run on localhost is in tests/test_multi_process.py)."""

import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import dr
from common.config import with_flags
from common.devices import make_placement, vmap_seeds
from common.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[1]
FORCE_DEVICES = "--xla_force_host_platform_device_count={}"


def env_with_devices(count: int | None) -> dict:
    """This process's environment with `count` forced CPU devices (None: XLA's own count); other XLA flags kept."""
    kept = [flag for flag in os.environ.get("XLA_FLAGS", "").split() if not flag.startswith(FORCE_DEVICES.format(""))]
    forced = [FORCE_DEVICES.format(count)] if count else []
    return {**os.environ, "WANDB_MODE": "disabled", "XLA_FLAGS": " ".join(kept + forced)}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (dict(num_devices=4, num_seeds=3, num_envs=6), "--num-envs \\(6\\) must be divisible by --num-devices \\(4\\)"),
        (dict(num_devices=2, shard_envs=True, num_envs=3), "to split envs across devices \\(with --shard-envs\\)"),
        (dict(num_devices=0), "--num-devices must be at least 1"),
        (dict(num_processes=2, process_id=2), "--process-id \\(2\\) must be in \\[0, --num-processes \\(2\\)\\)"),
    ],
)
def test_invalid_placements_fail_in_one_line(flags, message):
    with pytest.raises(ConfigError, match=message):
        with_flags(dr.Config(), **flags)


def test_more_devices_than_there_are_fails_before_compiling():
    with pytest.raises(ConfigError, match=f"--num-devices \\(64\\) exceeds the {jax.device_count()} devices"):
        config = with_flags(dr.Config(), num_devices=64, num_seeds=64)
        make_placement(config.run, config.ppo.num_envs)


def test_cli_reports_a_bad_split_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "algos/dr.py", "--num-devices", "4", "--num-seeds", "3", "--num-envs", "6"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=env_with_devices(None),
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: --num-envs (6) must be divisible by --num-devices (4)")


@pytest.mark.slow
def test_four_device_suite():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/multidevice"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=env_with_devices(4),
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "skipped" not in result.stdout.splitlines()[-1], result.stdout[-2000:]


def test_vmap_seeds_branches_for_one_seed_and_selects_for_several():
    def step(x):
        return jax.lax.cond(x.sum() > 0, lambda: x * 2.0, lambda: x - 1.0)

    one, several = jnp.ones((1, 3)), jnp.stack([jnp.ones(3), -jnp.ones(3)])
    assert "cond" in str(jax.make_jaxpr(vmap_seeds(step))(one)), "one seed runs unbatched: a real branch"
    assert "cond" not in str(jax.make_jaxpr(vmap_seeds(step))(several)), "vmapped: both sides, then a select"
    for seeds in (one, several):
        np.testing.assert_array_equal(vmap_seeds(step)(seeds), jax.vmap(step)(seeds))
