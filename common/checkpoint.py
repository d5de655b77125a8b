"""Checkpoints of whole runner states: flax msgpack (never executes code when loaded), a SHA-256 header
so truncation and corruption are caught, atomic writes (temporary file + rename), and retention.

File layout: `MAGIC`, 64 hex digits of the payload's SHA-256, newline, msgpack payload
{"update": int, "config": json str, "state": state dict}.
"""

import errno
import hashlib
import json
import os
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

MAGIC = b"CLEANUED-CKPT-1\n"
NAME = re.compile(r"update_(\d+)\.msgpack$")


class CheckpointError(Exception):
    """A checkpoint that cannot be used; the message is one line naming the file."""


def _is_key(leaf) -> bool:
    return hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _host_shape(leaf) -> tuple[int, ...]:
    return jax.eval_shape(jax.random.key_data, leaf).shape if _is_key(leaf) else tuple(leaf.shape)


def _to_host(tree):
    """Typed PRNG keys become their raw uint32 data; everything becomes numpy."""
    return jax.tree.map(lambda leaf: np.asarray(jax.random.key_data(leaf) if _is_key(leaf) else leaf), tree)


TEMPORARY = re.compile(r"^\..+\.tmp-\d+$")
"""Names of `write_atomic`'s temporary files: `.<name>.tmp-<pid>`."""


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` so that `path` is either the old file or the complete new one, never a torn write. On any
    failure (a full disk, an interrupt) the temporary file is removed and the error raised."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def remedy(error: OSError) -> str:
    """What to do about a failed write, by its cause: a full disk and a folder one may not write call for
    different things."""
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "make the folder writable (or copy it to one that is)"
    return "free space"


def sweep_temporary_files(run_dir: Path) -> list[Path]:
    """Delete the temporary files that interrupted writes (kill -9, power loss) left in a run folder; only call
    while holding the run folder's lock, when no other process can be writing one. Returns what was deleted."""
    found = [path for path in run_dir.rglob(".*.tmp-*") if path.is_file() and TEMPORARY.match(path.name)]
    for path in found:
        path.unlink()
    return found


def save(path: Path, state, update: int, config: dict) -> Path:
    payload = serialization.msgpack_serialize(
        {
            "update": update,
            "config": json.dumps(config, sort_keys=True),
            "state": serialization.to_state_dict(_to_host(state)),
        }
    )
    write_atomic(path, MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
    return path


def read_payload(path: Path) -> dict:
    data = path.read_bytes()
    header = len(MAGIC) + 65
    if not data.startswith(MAGIC) or len(data) < header:
        raise CheckpointError(f"{path} is not a cleanued checkpoint (bad header)")
    digest, payload = data[len(MAGIC) : header - 1].decode(errors="replace"), data[header:]
    if hashlib.sha256(payload).hexdigest() != digest:
        raise CheckpointError(f"{path} is truncated or corrupted (checksum mismatch)")
    return serialization.msgpack_restore(payload)


def load(path: Path, template) -> tuple[object, int, dict]:
    """(state shaped like `template`, update, saved config). `template` may hold ShapeDtypeStructs."""
    payload = read_payload(path)
    host_template = jax.tree.map(lambda leaf: np.zeros(_host_shape(leaf), np.uint32), template)
    try:
        host_state = serialization.from_state_dict(host_template, payload["state"])
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{path} does not match this config's runner state ({error})") from None
    for saved, expected in zip(jax.tree.leaves(host_state), jax.tree.leaves(host_template), strict=True):
        if np.shape(saved) != np.shape(expected):
            shapes = f"an array of shape {np.shape(saved)}, expected {np.shape(expected)}"
            raise CheckpointError(f"{path} does not match this config's runner state ({shapes})")
    state = jax.tree.map(
        lambda leaf, saved: (
            jax.random.wrap_key_data(jnp.asarray(saved)) if _is_key(leaf) else jnp.asarray(saved, leaf.dtype)
        ),
        template,
        host_state,
    )
    return state, int(payload["update"]), json.loads(payload["config"])


def list_checkpoints(directory: Path) -> list[Path]:
    """Checkpoints in `directory`, oldest first."""
    if not directory.is_dir():
        return []
    found = [(int(match.group(1)), path) for path in directory.iterdir() if (match := NAME.search(path.name))]
    return [path for _, path in sorted(found)]


def checkpoint_path(directory: Path, update: int) -> Path:
    return directory / f"update_{update:08d}.msgpack"


def checkpoint_update(path: Path) -> int:
    """The update of a checkpoint file named by `checkpoint_path`."""
    return int(NAME.search(path.name).group(1))


def prune(directory: Path, keep: int) -> None:
    """Delete all but the newest `keep` checkpoints in `directory` (archives live elsewhere)."""
    for path in list_checkpoints(directory)[:-keep] if keep > 0 else []:
        path.unlink()


class Checkpoints:
    """A run's checkpoints/: save (atomic, pruned to the newest `keep`, archived every `archive_interval`
    updates into checkpoints/archive/) and restore the newest."""

    def __init__(self, run_dir: Path, keep: int, archive_interval: int, config: dict):
        self.directory, self.keep, self.archive_interval, self.config = (
            run_dir / "checkpoints",
            keep,
            archive_interval,
            config,
        )

    def newest(self) -> Path | None:
        saved = list_checkpoints(self.directory)
        return saved[-1] if saved else None

    def save(self, state, update: int) -> Path:
        path = save(checkpoint_path(self.directory, update), state, update, self.config)
        prune(self.directory, self.keep)
        if self.archive_interval and update % self.archive_interval == 0:
            write_atomic(checkpoint_path(self.directory / "archive", update), path.read_bytes())
        return path

    def restore(self, template) -> tuple[object, int, dict, Path] | None:
        """(state, update, the config saved with it, its path) from the newest checkpoint, or None when there
        is none yet. Writes nothing: the archives a kill left out (`archive_due`) wait until the checkpoint is
        known to be this run's, and only process 0 of a multi-process run writes them."""
        newest = self.newest()
        if newest is None:
            return None
        try:
            state, update, config = load(newest, template)
        except CheckpointError as error:
            raise CheckpointError(f"{error}; delete it to resume from the previous checkpoint") from None
        return state, update, config, newest

    def archive_due(self) -> list[Path]:
        """Copy into checkpoints/archive/ every kept checkpoint on the archive interval that has no archive yet: a
        process killed (or a disk that filled) between a checkpoint and its archive copy left it out. Returns the
        archives written."""
        written = []
        for path in list_checkpoints(self.directory) if self.archive_interval else []:
            archive = self.directory / "archive" / path.name
            if checkpoint_update(path) % self.archive_interval == 0 and not archive.exists():
                write_atomic(archive, path.read_bytes())
                written.append(archive)
        return written
