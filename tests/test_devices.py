"""Placement flags: one-line errors before compiling, and the 4-device suite (tests/multidevice) in a process
with 4 forced CPU devices (the two-process run on localhost is in tests/test_multi_process.py); when a process
joins a coordinator; the memory checks against stand-in devices and compiled programs, to the byte; --shard-envs's
layout constraint."""

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh

from algos import dr
from common import devices
from common.config import Devices, with_flags
from common.devices import AXIS, Placement, initialize_distributed, make_placement, vmap_seeds
from common.errors import ConfigError, DoesNotFit

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
    # One process: the sub-suite is one file, so a second pytest-xdist worker would only start up and wait.
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/multidevice"],
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


@pytest.fixture
def no_jax_process_variables(monkeypatch):
    for name in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        monkeypatch.delenv(name, raising=False)


def test_several_processes_without_a_coordinator_are_refused(monkeypatch, no_jax_process_variables):
    monkeypatch.setenv("JAX_NUM_PROCESSES", "2")
    flags = Devices(coordinator_address=None, num_processes=1, process_id=0)
    with pytest.raises(ConfigError, match="a multi-process run needs --coordinator-address and --process-id"):
        initialize_distributed(flags)


def test_a_coordinator_address_joins_it_even_with_one_process(monkeypatch, no_jax_process_variables):
    """Only no address and one process is a run of its own; an address given means a coordinator to join."""
    joined = []
    monkeypatch.setattr(jax.distributed, "initialize", lambda *args: joined.append(args))
    initialize_distributed(Devices(coordinator_address="localhost:1234", num_processes=1, process_id=0))
    assert joined == [("localhost:1234", 1, 0)]
    initialize_distributed(Devices(coordinator_address=None, num_processes=1, process_id=None))
    assert joined == [("localhost:1234", 1, 0)], "a single process joins nothing"


FOUR_DEVICES = SimpleNamespace(num_devices=4)
"""A stand-in placement: the memory checks read only its number of devices."""


def test_cpu_devices_share_the_hosts_memory_evenly(monkeypatch):
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 1000}
    monkeypatch.setattr(devices.os, "sysconf", pages.__getitem__)
    monkeypatch.setattr(jax, "local_devices", lambda: [SimpleNamespace(platform="cpu")])
    assert devices.memory_per_device(FOUR_DEVICES) == (1024000, "each of 4 devices has of this host's memory")


def test_the_state_is_counted_split_across_the_devices_to_the_byte(monkeypatch):
    """4 devices of 1000 bytes hold a state of 1000 float32s (4000 bytes), and not one float32 more."""
    monkeypatch.setattr(devices, "memory_per_device", lambda placement: (1000, "of this test's device"))
    devices.check_state_fits({"weights": jax.ShapeDtypeStruct((1000,), jnp.float32)}, FOUR_DEVICES)
    with pytest.raises(DoesNotFit, match="the training state alone takes"):
        devices.check_state_fits({"weights": jax.ShapeDtypeStruct((1001,), jnp.float32)}, FOUR_DEVICES)


@pytest.mark.parametrize(("available", "fits"), [(1000, True), (999, False)])
def test_a_compiled_program_needs_its_arguments_outputs_and_temporaries_less_what_outputs_reuse(
    monkeypatch, available, fits
):
    """600 + 300 - 200 aliased + 300 temporary bytes: 1000 exactly."""
    monkeypatch.setattr(devices, "memory_per_device", lambda placement: (available, "of this test's device"))
    sizes = dict(argument_size_in_bytes=600, output_size_in_bytes=300, alias_size_in_bytes=200, temp_size_in_bytes=300)
    compiled = SimpleNamespace(memory_analysis=lambda: SimpleNamespace(**sizes))
    if fits:
        devices.check_compiled_fits("chunk", compiled, FOUR_DEVICES)
    else:
        with pytest.raises(DoesNotFit, match="the compiled chunk takes"):
            devices.check_compiled_fits("chunk", compiled, FOUR_DEVICES)


def test_one_device_more_than_there_are_fails_before_compiling():
    count = jax.device_count() + 1
    config = with_flags(dr.Config(), num_devices=count, num_seeds=count)
    with pytest.raises(ConfigError, match=f"--num-devices \\({count}\\) exceeds the {count - 1} devices"):
        make_placement(config.run, config.ppo.num_envs)


@pytest.mark.parametrize("shard_envs", [True, False])
def test_envs_are_split_across_the_devices_only_with_shard_envs(shard_envs):
    """The layout constraint is in the traced split whenever envs are split, whatever the number of devices."""
    placement = Placement(mesh=Mesh(np.array(jax.devices()[:1]), (AXIS,)), shard_envs=shard_envs)
    traced = str(jax.make_jaxpr(placement.split_envs)(jnp.zeros((4, 3))))
    assert ("sharding_constraint" in traced) == shard_envs, traced
