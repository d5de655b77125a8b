"""Side by side with JaxUED (DramaCow/jaxued): its Maze env-only, and its training scripts, against ours and minimax.

Env-only (`--part env`): random policy reading every observation, bench_env.py's protocol at 13x13 with 60 walls,
ours in this process, JaxUED's Maze from the PyPI wheel (jaxued 0.0.1) in its own virtual environment
(benchmarks/peers/jaxued_env_worker.py), and with `--minimax` minimax-lib 0.2.0's
(benchmarks/peers/minimax_env_worker.py).

Training (`--part train`, needs `--jaxued-repo`, a local checkout of github.com/DramaCow/jaxued, whose examples/
are not in the wheel): ours as bench_algos.py times it (paper configuration, one seed, replay methods from a full
buffer), JaxUED's examples/maze_{dr,plr,paired}.py run by benchmarks/peers/jaxued_worker.py at the same configuration
and steady-state rule, and with `--minimax` minimax's worker. One table of env steps/s per method.

    python benchmarks/peers/bench_jaxued.py --part env --num-envs 32 1024 4096
    python benchmarks/peers/bench_jaxued.py --part train --jaxued-repo /tmp/jaxued --algos dr plr accel paired

The JaxUED environment is created on first use with the running Python (3.11) and JAXUED_STACK; nothing of it or
of the checkout is committed.
"""

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tyro

# SCAFFOLDING: make `benchmarks`, `envs` and `common` importable when run as a script.
REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.speed import bench_algos, bench_env  # noqa: E402
from benchmarks.speed.tables import json_lines, markdown_table, ratio  # noqa: E402

JAXUED_STACK = (
    "jaxued==0.0.1",
    "jax==0.4.30",
    "jaxlib==0.4.30",
    "flax==0.8.5",
    "chex==0.1.86",
    "optax==0.2.3",
    "distrax==0.1.5",
    "tensorflow-probability==0.24.0",
    "gymnax==0.0.8",
    "numpy==1.26.4",
)
"""Versions the jaxued 0.0.1 wheel and its examples run with (the wheel pins nothing; newer JAX breaks them)."""
JAXUED_ALGOS = ("dr", "plr", "accel", "paired")
"""Methods JaxUED has an example script for (ACCEL is maze_plr.py --use_accel)."""


@dataclass(frozen=True)
class Args:
    part: Literal["env", "train", "both"] = "env"
    """Env-only throughput, training throughput, or both."""
    num_envs: tuple[int, ...] = (32, 1024, 4096)
    """Env-only: parallel env counts."""
    wrappers: tuple[str, ...] = ("resample", "restart")
    """Env-only: what happens on done, a fresh DR level (resample) or the same level (restart)."""
    num_steps: int = 256
    """Env-only: steps per measured scan."""
    repeats: int = 3
    """Timed calls per setting; the median is reported."""
    algos: tuple[str, ...] = JAXUED_ALGOS
    """Training: methods to compare."""
    updates_per_call: int = 2
    """Training: updates per timed call, ours and JaxUED's (PAIRED uses 1; ACCEL needs an even number)."""
    jaxued_repo: str | None = None
    """Training: a checkout of github.com/DramaCow/jaxued (its examples/ are the timed scripts)."""
    minimax: bool = False
    """Also run minimax-lib 0.2.0 (its venv is built by bench_algos.py on first use)."""
    jaxued_venv: str = str(REPO_ROOT / "benchmarks" / ".jaxued-venv")
    """Virtual environment for JaxUED's pinned stack; created with the running Python if missing."""
    minimax_venv: str = str(REPO_ROOT / "benchmarks" / ".minimax-venv")
    """Virtual environment for minimax's pinned stack."""


def jaxued_python(venv: Path) -> Path:
    return bench_algos.pinned_python(venv, JAXUED_STACK)


def run_worker(python: Path, script: str, *args: str) -> list[dict]:
    command = [str(python), str(Path(__file__).resolve().parent / script), *args]
    return json_lines(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def env_part(args: Args) -> list[dict]:
    python = jaxued_python(Path(args.jaxued_venv))
    results, rows = [], []
    for wrapper in args.wrappers:
        env_args = bench_env.Args(
            num_envs=args.num_envs,
            num_steps=args.num_steps,
            repeats=args.repeats,
            wrapper=wrapper,
            minimax_venv=args.minimax_venv,
        )
        ours = [bench_env.measure(env_args, num_envs) for num_envs in args.num_envs]
        common = ["--num-envs", *map(str, args.num_envs), "--num-steps", str(args.num_steps)]
        common += ["--repeats", str(args.repeats), "--wrapper", wrapper]
        jaxued = run_worker(python, "jaxued_env_worker.py", *common, "--n-walls", str(env_args.n_walls))
        minimax = bench_env.measure_minimax(env_args) if args.minimax else [None] * len(ours)
        for mine, theirs, mm in zip(ours, jaxued, minimax, strict=True):
            results += [line for line in (mine, theirs, mm) if line]
            mm_rate = mm["env_steps_per_s"] if mm else None
            rows.append(
                [wrapper, mine["num_envs"], mine["env_steps_per_s"], theirs["env_steps_per_s"], mm_rate]
                + [ratio(mine["env_steps_per_s"], theirs["env_steps_per_s"]), ratio(mine["env_steps_per_s"], mm_rate)]
                + [mine["compile_s"], theirs["compile_s"], mm["compile_s"] if mm else None]
            )
    for line in results:
        print(json.dumps(line), flush=True)
    header = ["wrapper", "envs", "ours steps/s", "JaxUED steps/s", "minimax steps/s", "ours / JaxUED"]
    header += ["ours / minimax", "ours compile s", "JaxUED compile s", "minimax compile s"]
    print("\n" + markdown_table(header, rows))
    return results


def train_part(args: Args) -> list[dict]:
    if args.jaxued_repo is None:
        raise SystemExit("error: --part train needs --jaxued-repo, a checkout of github.com/DramaCow/jaxued")
    python = jaxued_python(Path(args.jaxued_venv))
    results, rows = [], []
    for name in args.algos:
        updates = 1 if name == "paired" else args.updates_per_call
        algo_args = bench_algos.Args(
            algos=(name,), updates_per_call=updates, repeats=args.repeats, minimax_venv=args.minimax_venv
        )
        ours = bench_algos.measure(name, algo_args, 32, 1)
        print(json.dumps(ours), flush=True)
        worker_args = ["--repo", args.jaxued_repo, "--method", name]
        (theirs,) = run_worker(
            python, "jaxued_worker.py", *worker_args, "--updates-per-call", str(updates), "--repeats", str(args.repeats)
        )
        print(json.dumps(theirs), flush=True)
        mm = bench_algos.measure_minimax(name, algo_args, 32) if args.minimax else None
        if mm:
            print(json.dumps(mm), flush=True)
        results += [line for line in (ours, theirs, mm) if line]
        mm_rate = mm["env_steps_per_s"] if mm else None
        rows.append(
            [name, ours["env_steps_per_s"], theirs["env_steps_per_s"], mm_rate]
            + [ratio(ours["env_steps_per_s"], theirs["env_steps_per_s"]), ratio(ours["env_steps_per_s"], mm_rate)]
            + [ours["steady_s_per_update"], theirs["steady_s_per_update"], mm["steady_s_per_update"] if mm else None]
            + [ours["compile_s"], theirs["compile_s"], mm["compile_s"] if mm else None]
        )
    header = ["algo", "ours env steps/s", "JaxUED env steps/s", "minimax env steps/s", "ours / JaxUED"]
    header += ["ours / minimax", "ours s/update", "JaxUED s/update", "minimax s/update"]
    header += ["ours compile s", "JaxUED compile s", "minimax compile s"]
    print("\n" + markdown_table(header, rows))
    return results


def main(args: Args) -> None:
    if args.part in ("env", "both"):
        env_part(args)
    if args.part in ("train", "both"):
        train_part(args)


if __name__ == "__main__":
    main(tyro.cli(Args))
