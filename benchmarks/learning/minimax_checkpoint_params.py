"""Turn minimax-lib 0.2.0 training checkpoints into cleanued's student parameter tree, for
benchmarks/learning/learning_vs_minimax.py, which evaluates both libraries' policies with cleanued's evaluator.

Run with the Python of the minimax virtual environment (its pinned JAX 0.4.31 stack, `MINIMAX_STACK` in
benchmarks/speed/bench_algos.py); it never imports cleanued's code. The parameter names are mapped with
benchmarks/learning/minimax_params.py (`flat_params`), the mapping the parity tests use.

    benchmarks/.minimax-venv/bin/python benchmarks/learning/minimax_checkpoint_params.py versions
    benchmarks/.minimax-venv/bin/python benchmarks/learning/minimax_checkpoint_params.py convert IN.pkl OUT.npz \
        [IN OUT ...]

`versions` prints one JSON line: minimax's package versions and the devices its JAX sees. `convert` reads
each checkpoint `python -m minimax.train` wrote (`checkpoint_<tick>.pkl`: a list whose item 1 is the student
train state's `state_dict`) and writes OUT.npz with `params/<cleanued path>` for student 0 (the only student
of DR, PLR and ACCEL; PAIRED's protagonist), `n_iters` (ticks) and `n_updates` (student gradient updates).
A checkpoint is a pickle, and unpickling runs code named in the file: convert only checkpoints your own
minimax runs wrote.
"""

import argparse
import json
import os
import pickle
import platform
import sys
from importlib import metadata
from pathlib import Path

MINIMAX_PACKAGES = ("minimax-lib", "jax", "jaxlib", "flax", "optax", "chex")


def versions() -> dict:
    import jax

    devices = jax.devices()
    return {
        "python": platform.python_version(),
        **{name: metadata.version(name) for name in MINIMAX_PACKAGES},
        "device": f"{len(devices)}x {devices[0].device_kind} ({devices[0].platform})",
    }


def convert(checkpoint: Path, out: Path) -> dict:
    """Write `out` from one minimax checkpoint; returns its counters."""
    import numpy as np

    # minimax_fixtures sets JAX_PLATFORMS=cpu (unless set) before JAX loads: converting needs no accelerator.
    from minimax_fixtures import flat_params

    with open(checkpoint, "rb") as handle:
        state = pickle.load(handle)
    student = state[1]  # the student population's train state, leaves [n_students, ...]
    counters = {
        "n_iters": int(np.asarray(student["n_iters"])[0]),
        "n_updates": int(np.asarray(student["n_updates"])[0]),
    }
    arrays = {**flat_params("params/", student["params"]), **{key: np.array(value) for key, value in counters.items()}}
    meta = {"checkpoint": str(checkpoint), "minimax-lib": metadata.version("minimax-lib"), **counters}
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    # Written whole, then renamed, so an interrupted conversion never leaves a file that looks done.
    temporary = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(temporary, "wb") as handle:
        np.savez(handle, **arrays)
    os.replace(temporary, out)
    return counters


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = cli.add_subparsers(dest="command", required=True)
    commands.add_parser("versions", help="print minimax's versions and devices as one JSON line")
    converting = commands.add_parser("convert", help="checkpoint/output pairs: IN.pkl OUT.npz [IN.pkl OUT.npz ...]")
    converting.add_argument("paths", nargs="+", type=Path)
    options = cli.parse_args()
    if options.command == "versions":
        print(json.dumps(versions()), flush=True)
        return
    if len(options.paths) % 2:
        sys.exit("convert takes pairs of paths: IN.pkl OUT.npz")
    for checkpoint, out in zip(options.paths[::2], options.paths[1::2], strict=True):
        print(json.dumps({"checkpoint": str(checkpoint), "out": str(out), **convert(checkpoint, out)}), flush=True)


if __name__ == "__main__":
    main()
