"""Where a number came from: device, library versions and the git commit, recorded with every result."""

import platform
import subprocess
from importlib import metadata
from pathlib import Path

import jax

PACKAGES = ("jax", "jaxlib", "flax", "optax", "numpy")
REPO_ROOT = Path(__file__).resolve().parents[1]


def git_commit(repo: Path = REPO_ROOT) -> str:
    """The checked-out commit, with `+dirty` when the work tree has uncommitted changes."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "-uno"], cwd=repo, capture_output=True, text=True)
    except OSError:
        return "unknown"
    if commit.returncode != 0:
        return "unknown"
    return commit.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def describe_environment() -> dict:
    devices = jax.devices()
    return {
        "device": f"{len(devices)}x {devices[0].device_kind} ({devices[0].platform})",
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        **{name: metadata.version(name) for name in PACKAGES},
        "commit": git_commit(),
    }
