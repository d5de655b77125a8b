"""Where a run's seeds and envs live: devices (`--num-devices`, `--shard-envs`) and hosts (`jax.distributed`).

With N devices the vmapped seed axis is split across them when N divides `--num-seeds` (each device runs
its own seeds; no communication). Otherwise, or with `--shard-envs`, every seed's env batch is split
across the devices: the runner state (parameters, optimizer, level buffer) is replicated, the rollout's
env axis is sharded, and XLA averages the PPO gradients across devices (the losses are means over envs).
Either way a seed's level buffer stays one logical buffer: on its seed's device, or replicated with every
device applying the same updates.

`--unroll` sets how many steps each iteration of the rollout and LSTM scans runs (`scan_unroll`): a GPU pays a
fixed cost per loop iteration, a CPU barely does, so the default depends on the backend.

Several hosts run the same command with `--coordinator-address host:port --num-processes P --process-id i`
(or the environment variables JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID); the devices of
all processes form one mesh, and only process 0 writes logs, images and checkpoints.
"""

import functools
import os
from dataclasses import dataclass

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from common.errors import ConfigError, DoesNotFit

AXIS = "devices"
GPU_UNROLL = 8
"""Default --unroll on a GPU: a step is a few small kernels there, so a loop iteration's fixed cost dominates
(benchmarks/README.md, the unroll sweep of the GPU suite)."""
CPU_UNROLL = 1
"""Default --unroll on a CPU: unrolling buys nothing measurable there and lengthens every compile
(benchmarks/README.md)."""


def placement_problems(devices, num_seeds: int, num_envs: int) -> list[tuple[bool, str]]:
    """(failed, message) checks of the placement flags (common.config.Devices, each already in its range) that
    need no device query (run before any JAX call, which must come after `jax.distributed.initialize`)."""
    return [
        (
            devices.process_id is not None and devices.process_id >= devices.num_processes,
            f"--process-id ({devices.process_id}) must be in [0, --num-processes ({devices.num_processes}))",
        ),
        *env_split_problems(devices.shard_envs, devices.num_devices, num_seeds, num_envs),
    ]


def env_split_problems(shard_envs: bool, count: int | None, num_seeds: int, num_envs: int) -> list[tuple[bool, str]]:
    shards = count is not None and count > 1 and (shard_envs or num_seeds % count != 0)
    reason = "with --shard-envs" if shard_envs else f"as --num-seeds ({num_seeds}) does not divide"
    return [
        (
            shards and num_envs % count != 0,
            f"--num-envs ({num_envs}) must be divisible by --num-devices ({count}) to split envs across "
            f"devices ({reason})",
        )
    ]


def initialize_distributed(devices) -> None:
    """Join the other processes of a multi-host run (a no-op for a single process)."""
    address = devices.coordinator_address or os.environ.get("JAX_COORDINATOR_ADDRESS")
    num_processes = int(os.environ.get("JAX_NUM_PROCESSES", devices.num_processes))
    process_id = devices.process_id if devices.process_id is not None else os.environ.get("JAX_PROCESS_ID")
    if address is None and num_processes == 1:
        return
    if address is None or process_id is None:
        raise ConfigError("a multi-process run needs --coordinator-address and --process-id (or JAX_* variables)")
    jax.distributed.initialize(address, num_processes, int(process_id))


def memory_per_device(placement: "Placement") -> tuple[float, str]:
    """The bytes one device of `placement` may use, and a description of them for messages."""
    device = jax.local_devices()[0]
    if device.platform == "cpu":  # a process's CPU devices share the host's memory
        host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        if placement.num_devices == 1:
            return host, "of this host's memory"
        return host / placement.num_devices, f"each of {placement.num_devices} devices has of this host's memory"
    stats = device.memory_stats() or {}  # None, or without a limit, on backends that do not report one
    return stats.get("bytes_limit", float("inf")), f"of one {device.device_kind}"


def check_fits(needed_per_device: float, what: str, placement: "Placement") -> None:
    """A one-line DoesNotFit when `what` needs more bytes per device than a device has."""
    available, where = memory_per_device(placement)
    if needed_per_device > available:
        raise DoesNotFit(
            f"{what} takes {needed_per_device / 2**30:,.1f} GiB per device, more than the {available / 2**30:,.1f} "
            f"GiB {where}: lower --num-envs, --num-steps, --lstm-size, --buffer-size (replay methods) or --num-seeds "
            "(or use more devices)"
        )


def check_state_fits(runner_shapes, placement: "Placement") -> None:
    """Before anything compiles: the runner state alone, exact from its traced shapes and at best split evenly
    across the devices, is a lower bound on what training needs, so nothing that fits is refused and a size far
    too large fails here, not in a compile that runs out of memory or never ends."""
    state_bytes = sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(runner_shapes))
    check_fits(state_bytes / placement.num_devices, "the training state alone", placement)


def check_compiled_fits(name: str, compiled, placement: "Placement") -> None:
    """After a compile, before it runs: XLA's own account of the program's memory (arguments, outputs not aliased
    to them, temporaries), which catches what the state alone does not (a rollout of very many envs)."""
    stats = compiled.memory_analysis()
    if stats is None:  # a backend that does not report it
        return
    needed = (
        stats.argument_size_in_bytes + stats.output_size_in_bytes - stats.alias_size_in_bytes + stats.temp_size_in_bytes
    )
    check_fits(needed, f"the compiled {name}", placement)


@dataclass(frozen=True)
class Placement:
    """The device mesh of a run and how its state is laid out on it."""

    mesh: Mesh | None  # None: one device, nothing to place
    shard_envs: bool

    @property
    def num_devices(self) -> int:
        return 1 if self.mesh is None else self.mesh.size

    @property
    def is_main_process(self) -> bool:
        return jax.process_index() == 0

    @property
    def state_sharding(self) -> NamedSharding | None:
        """Layout of every leaf with a leading seed axis: split along seeds, or replicated when envs are split."""
        if self.mesh is None:
            return None
        return NamedSharding(self.mesh, PartitionSpec() if self.shard_envs else PartitionSpec(AXIS))

    def place(self, tree):
        """Put a runner state (leaves [num_seeds, ...], numpy or jax) on the mesh."""
        if self.mesh is None:
            return tree
        return jax.tree.map(lambda leaf: _put(leaf, self.state_sharding), tree)

    def jit(self, function, donate: bool = False):
        """`jax.jit` of a function of the runner state whose outputs all have a leading seed axis, laid out
        like the state. `donate`: the function consumes the state it is given (a training chunk), so XLA writes
        the new state into its buffers instead of copying it (the level buffer is most of it)."""
        donate_argnums = (0,) if donate else ()
        if self.mesh is None:
            return jax.jit(function, donate_argnums=donate_argnums)
        return jax.jit(
            function,
            in_shardings=self.state_sharding,
            out_shardings=self.state_sharding,
            donate_argnums=donate_argnums,
        )

    def split_envs(self, tree):
        """Inside the per-seed update: lay out leaves [num_envs, ...] across devices along the env axis."""
        if self.mesh is None or not self.shard_envs:
            return tree
        return jax.lax.with_sharding_constraint(tree, NamedSharding(self.mesh, PartitionSpec(AXIS)))

    def to_host(self, tree):
        """Numpy copies of every leaf, gathered from all processes."""
        if jax.process_count() == 1:
            return jax.device_get(tree)
        return jax.tree.map(_gather, tree)

    def save(self, checkpoints, runner, update: int) -> None:
        """Gather the runner state from every process (all must call this), then write it from process 0."""
        host_runner = self.to_host(runner)
        if self.is_main_process:
            checkpoints.save(host_runner, update)

    def agree(self, value: bool) -> bool:
        """Process 0's value on every process, so all processes stop (and save) on the same chunk."""
        if jax.process_count() == 1:
            return value
        return bool(multihost_utils.broadcast_one_to_all(np.bool_(value)))


def scan_unroll(devices) -> int:
    """The unroll of the rollout and LSTM scans (`devices`: common.config.Devices): --unroll, else the default of
    the backend JAX runs on (call after `initialize_distributed`)."""
    if devices.unroll is not None:
        return devices.unroll
    return CPU_UNROLL if jax.default_backend() == "cpu" else GPU_UNROLL


def vmap_seeds(function):
    """`jax.vmap(function)` over the leading seed axis, except that a single seed runs unbatched. Under vmap
    a `lax.cond` on a per-seed value (Robust PLR's PPO step on replay updates only) computes both branches
    and selects; unbatched it runs only the branch taken, so a one-seed run skips the work it would drop."""

    def over_seeds(tree):
        if jax.tree.leaves(tree)[0].shape[0] != 1:
            return jax.vmap(function)(tree)
        return jax.tree.map(lambda leaf: leaf[None], function(jax.tree.map(lambda leaf: leaf[0], tree)))

    return over_seeds


def map_seeds(init):
    """`init` (one seed's rng -> runner state) over a batch of rngs, one seed at a time. lax.map, not vmap: a
    batch of LAPACK QRs (the orthogonal initializer) can deadlock XLA's CPU thread pool on 2 cores (jaxlib
    0.10.2); one seed at a time gives the same values."""
    return functools.partial(jax.lax.map, init)


def make_placement(run, num_envs: int) -> Placement:
    """The placement the flags ask for (`run`: a common.config.RunConfig), checked against the devices there
    are (after `initialize_distributed`)."""
    devices, num_seeds = run.devices, run.num_seeds
    available = jax.device_count()
    count = devices.num_devices or available
    if devices.num_devices is None and num_seeds % count and num_envs % count:
        count = 1
    if count > available:
        raise ConfigError(f"--num-devices ({count}) exceeds the {available} devices available")
    for failed, message in env_split_problems(devices.shard_envs, count, num_seeds, num_envs):
        if failed:
            raise ConfigError(message)
    if count == 1:
        return Placement(mesh=None, shard_envs=False)
    mesh = Mesh(np.array(jax.devices()[:count]), (AXIS,))
    return Placement(mesh=mesh, shard_envs=devices.shard_envs or num_seeds % count != 0)


def _put(leaf, sharding: NamedSharding):
    if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(_put(jax.random.key_data(leaf), sharding), impl=jax.random.key_impl(leaf))
    if jax.process_count() == 1:
        return jax.device_put(leaf, sharding)
    host = np.asarray(leaf)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def _gather(leaf):
    if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        data = multihost_utils.process_allgather(jax.random.key_data(leaf), tiled=True)
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(leaf))
    return multihost_utils.process_allgather(leaf, tiled=True)
