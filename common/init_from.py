"""--init-from: start a run's networks from saved parameters, with fresh optimizer states (a warm start, fine-tuning,
or two runs from the same initial parameters).

The networks are the runner state's flax `TrainState`s (the student's; PAIRED's students and teacher). A source is
either a cleanued checkpoint, whose TrainStates are read at the same places in its state as this config's (so a DR
checkpoint starts PLR or ACCEL, whose student sits where DR's does, but not PAIRED), or a `.npz` of `params/<path>`
arrays for a script with one network (benchmarks/learning/minimax_checkpoint_params.py writes minimax's that way).
Each parameter is either one seed's, given to every seed, or stacked with a leading axis of --num-seeds, one per
seed. Anything else is refused in one line before a run folder is made. Only the parameters are taken: optimizer
states, counters, buffers and random keys are the new run's own.
"""

import json
import zipfile
import zlib
from pathlib import Path

import jax
import numpy as np
from flax import serialization
from flax.training.train_state import TrainState

from common.checkpoint import MAGIC, CheckpointError, read_payload
from common.errors import ConfigError

NPZ_PREFIX = "params/"
"""Keys of the parameter arrays in an .npz source; the rest of the file (counters, notes) is ignored."""


def _key_name(key) -> str:
    """A pytree path entry as flax's state dicts name it (field, dict key or sequence index)."""
    for attribute in ("name", "key", "idx"):
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    raise TypeError(f"unexpected pytree key {key!r}")


def network_paths(runner) -> list[tuple[str, ...]]:
    """The state-dict paths of the TrainStates in a runner state, in tree order."""
    found = jax.tree_util.tree_flatten_with_path(runner, is_leaf=lambda node: isinstance(node, TrainState))[0]
    return [tuple(map(_key_name, path)) for path, node in found if isinstance(node, TrainState)]


def flat_names(tree: dict, prefix: str = "") -> dict:
    """{'a/b/c': leaf} of a nested dict: the names an .npz source holds its parameters under (after NPZ_PREFIX)."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat |= flat_names(value, f"{prefix}{key}/")
        else:
            flat[prefix + key] = value
    return flat


def _nested(flat: dict) -> dict:
    tree = {}
    for key, value in flat.items():
        *path, leaf = key.split("/")
        node = tree
        for name in path:
            node = node.setdefault(name, {})
        node[leaf] = value
    return tree


def _source_networks(path: Path, paths: list[tuple[str, ...]]) -> dict[tuple[str, ...], dict]:
    """{network path: flat parameters {'params/...': array}} from the file at `path`."""
    where = f"--init-from {path}"
    if not path.is_file():
        raise ConfigError(f"{where}: no such file")
    with open(path, "rb") as handle:
        is_checkpoint = handle.read(len(MAGIC)) == MAGIC
    if is_checkpoint:
        try:
            payload = read_payload(path)
        except CheckpointError as error:
            raise ConfigError(f"{where}: {error}") from None
        if json.loads(payload["config"]).get("sweep"):  # its entries are points x seeds, not one config's seeds
            raise ConfigError(
                f"{where}: a checkpoint of a --sweep holds every point's seeds; start from a run of one config"
            )
        state = payload["state"]
        networks = {}
        for network in paths:
            node = state
            for name in (*network, "params"):
                if not isinstance(node, dict) or name not in node:
                    raise ConfigError(
                        f"{where}: the checkpoint has no network at {'/'.join(network)}, where this script keeps one "
                        "(a checkpoint of another method?)"
                    )
                node = node[name]
            networks[network] = flat_names(node)
        return networks
    if path.suffix != ".npz":
        raise ConfigError(f"{where}: neither a cleanued checkpoint nor an .npz of {NPZ_PREFIX}... arrays")
    if len(paths) != 1:
        shown = ", ".join("/".join(network) for network in paths)
        raise ConfigError(f"{where}: an .npz holds one network and this script has {len(paths)} ({shown}); use one of "
                          "its checkpoints")  # fmt: skip
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):  # an .npy saved under an .npz name: one bare array
            raise ValueError("it holds one array, not named arrays")
        with data:
            flat = {key: data[key] for key in data.files if key.startswith(NPZ_PREFIX)}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        raise ConfigError(f"{where}: cannot read it as an .npz ({str(error) or type(error).__name__})") from None
    if not flat:
        raise ConfigError(f"{where}: the .npz has no {NPZ_PREFIX}... arrays")
    return {paths[0]: flat}


def _per_seed(name: str, value: np.ndarray, expected: tuple[int, ...], num_seeds: int, where: str) -> np.ndarray:
    """`value` as [num_seeds, *expected]: one seed's array repeated, or a stack of num_seeds; else a one-line error."""
    shape = tuple(np.shape(value))
    if shape in (expected, (1, *expected)):
        return np.broadcast_to(np.reshape(value, expected), (num_seeds, *expected))
    if shape == (num_seeds, *expected):
        return np.asarray(value)
    if shape[1:] == expected:
        raise ConfigError(
            f"{where}: {name} holds {shape[0]} seeds and this run has --num-seeds {num_seeds}: give one seed's "
            f"parameters or {num_seeds} seeds'"
        )
    raise ConfigError(
        f"{where}: {name} is {shape} there and {expected} here: the parameters are another network's (another "
        "--lstm-size, or another method's?)"
    )


def check_values(name: str, value, where: str) -> None:
    """A one-line error unless `value` holds real, finite numbers: text or complex numbers would be cast (or fail)
    without a word, and a NaN stops the run only once it has compiled and trained a chunk."""
    value = np.asarray(value)
    if value.dtype == bool or not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)):
        raise ConfigError(f"{where}: {name} holds {value.dtype} values, not real numbers")
    if not np.isfinite(value).all():
        raise ConfigError(f"{where}: {name} holds non-finite values (NaN or infinity)")


def read_parameters(path: Path, runner_shapes, num_seeds: int) -> dict[tuple[str, ...], dict]:
    """{network path: parameter tree [num_seeds, ...] (numpy)} for every TrainState of `runner_shapes` (a runner
    state of `num_seeds` seeds, shapes suffice), read from `path` and checked against this config's networks."""
    where = f"--init-from {path}"
    paths = network_paths(runner_shapes)
    if not paths:
        raise ConfigError(f"{where}: this script's runner state holds no flax TrainState to start from it")
    sources = _source_networks(path, paths)
    networks = dict(zip(paths, (node for node in _train_states(runner_shapes)), strict=True))
    parameters = {}
    for network, train_state in networks.items():
        expected = flat_names(serialization.to_state_dict(train_state.params))
        given = sources[network]
        missing, extra = sorted(expected.keys() - given.keys()), sorted(given.keys() - expected.keys())
        if missing or extra:
            first = f"{missing[0]} is missing" if missing else f"{extra[0]} is not in this config's network"
            raise ConfigError(f"{where}: the parameters are another network's ({first})")
        for name in expected:
            check_values(name, given[name], where)
        flat = {
            name: _per_seed(name, given[name], tuple(shape.shape[1:]), num_seeds, where).astype(shape.dtype)
            for name, shape in expected.items()
        }
        parameters[network] = serialization.from_state_dict(train_state.params, _nested(flat))
    return parameters


def _train_states(runner) -> list[TrainState]:
    leaves = jax.tree_util.tree_leaves(runner, is_leaf=lambda node: isinstance(node, TrainState))
    return [leaf for leaf in leaves if isinstance(leaf, TrainState)]


def with_parameters(runner, parameters: dict[tuple[str, ...], dict]):
    """`runner` with each TrainState's parameters replaced by `parameters[its path]`; its optimizer state, step
    and everything else stay as they are."""

    def replace(path, node):
        if not isinstance(node, TrainState):
            return node
        return node.replace(params=jax.tree.map(jax.numpy.asarray, parameters[tuple(map(_key_name, path))]))

    return jax.tree_util.tree_map_with_path(replace, runner, is_leaf=lambda node: isinstance(node, TrainState))
