"""Random-policy AMaze throughput (env steps per second) against the number of parallel envs.

Each measurement is one jitted `lax.scan` of `--num-steps` random-action steps over N envs, with
`--wrapper resample` (DR: every episode on a fresh level, `--levels-per-env` of them made up front for each env
and taken one per episode by `step_and_next_level`, as dr.py runs it; making them is part of the timed call) or
`--wrapper restart` (replay: the same level restarts). Compile is timed apart, then the median of `--repeats`
runs after `block_until_ready`. Prints one JSON line per N (with the episodes that had to reuse a level: 0
unless an env ran out), then a table.

    python benchmarks/speed/bench_env.py --num-envs 32 1024 16384
    python benchmarks/speed/bench_env.py --wrapper restart --size 101 --num-envs 1024

With `--minimax`, minimax-lib 0.2.0's Maze runs the same protocol (benchmarks/peers/minimax_env_worker.py, in the
virtual environment bench_algos.py creates) at 13x13 with 60 walls, and a side-by-side table follows.

    python benchmarks/speed/bench_env.py --num-envs 32 1024 --minimax
"""

import functools
import json
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import jax
import jax.numpy as jnp
import tyro

# SCAFFOLDING: make `benchmarks`, `envs` and `common` importable when run as a script.
REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.speed.bench_algos import minimax_python  # noqa: E402
from benchmarks.speed.env_timing import time_rollout  # noqa: E402
from common.config import AT_LEAST_ONE, Range, raise_first, range_problems  # noqa: E402
from common.provenance import describe_environment  # noqa: E402
from common.runs import one_line_errors  # noqa: E402
from envs.levels import sample_dr_level  # noqa: E402
from envs.maze import (  # noqa: E402
    NUM_ACTIONS,
    EnvParams,
    reset_to_fresh_levels,
    reset_to_level,
    step_and_next_level,
    step_and_restart,
)


@dataclass(frozen=True)
class Args:
    num_envs: tuple[int, ...] = (32, 1024, 16384)
    """Parallel env counts to measure."""
    num_steps: Annotated[int, AT_LEAST_ONE] = 256
    """Steps per measured scan."""
    repeats: Annotated[int, AT_LEAST_ONE] = 5
    """Timed runs per setting; the median is reported."""
    size: Annotated[int, Range(2, 101)] = 13
    """Maze interior size (square)."""
    n_walls: int = 60
    """Walls drawn per generated level."""
    wrapper: Literal["resample", "restart"] = "resample"
    """What happens on done: the env's next fresh DR level starts (resample) or the same one restarts (restart)."""
    levels_per_env: int | None = None
    """Resample: fresh levels made per env (default --num-steps / 4, dr.py's; a random policy needs about 2)."""
    tags: dict[str, str] = field(default_factory=dict)
    """Extra key=value pairs recorded with every result."""
    minimax: bool = False
    """Also measure minimax-lib 0.2.0's Maze (13x13, 60 walls only) and print the ratio per env count."""
    minimax_venv: str = str(REPO_ROOT / "benchmarks" / ".minimax-venv")
    """Virtual environment for minimax's pinned stack; created with the running Python if missing."""

    def __post_init__(self):
        raise_first(range_problems(self))


def levels_per_env(args: Args) -> int:
    return args.levels_per_env or -(-args.num_steps // 4)


def make_rollout(args: Args, num_envs: int):
    """The timed function: rng -> (a total that depends on every observation and reward, episodes that reused a
    level)."""
    params = EnvParams()
    sample_level = functools.partial(sample_dr_level, height=args.size, width=args.size, n_walls=args.n_walls)
    if args.wrapper == "resample":
        step_env = jax.vmap(functools.partial(step_and_next_level, params=params))
    else:
        step_env = jax.vmap(functools.partial(step_and_restart, params=params))

    def rollout(rng):
        rng_levels, rng_steps = jax.random.split(rng)
        if args.wrapper == "resample":
            keys = jax.random.split(rng_levels, (num_envs, levels_per_env(args)))
            levels = jax.vmap(jax.vmap(sample_level))(keys)
            _, state = jax.vmap(reset_to_fresh_levels, (None, 0, None))(rng, levels, params)
        else:
            levels = jax.vmap(sample_level)(jax.random.split(rng_levels, num_envs))
            _, state = jax.vmap(reset_to_level, (None, 0, None))(rng, levels, params)

        def body(carry, rng_step):
            state, total_reward = carry
            rng_action, rng_env = jax.random.split(rng_step)
            actions = jax.random.randint(rng_action, (num_envs,), 0, NUM_ACTIONS)
            obs, state, reward, _, _ = step_env(jax.random.split(rng_env, num_envs), state, actions)
            # The observation enters the result, as a policy would read it, so XLA cannot skip computing it.
            return (state, total_reward + reward.sum() + obs.image.sum()), None

        (end, total_reward), _ = jax.lax.scan(
            body, (state, jnp.float32(0)), jax.random.split(rng_steps, args.num_steps)
        )
        if args.wrapper == "resample":
            return total_reward, jnp.maximum(end.started - levels_per_env(args), 0).sum()
        return total_reward, jnp.int32(0)

    return jax.jit(rollout)


def measure(args: Args, num_envs: int) -> dict:
    timing = time_rollout(make_rollout(args, num_envs), jax.random.key, args.repeats)
    return {
        "bench": "env",
        "impl": "cleanued",
        "wrapper": args.wrapper,
        "levels_per_env": levels_per_env(args) if args.wrapper == "resample" else None,
        "reused_level_episodes": sum(int(reused) for _, reused in timing.outputs),
        "size": args.size,
        **timing.report(num_envs, args.num_steps),
        **describe_environment(),
        "config": asdict(args),
    }


def measure_minimax(args: Args) -> list[dict]:
    worker = REPO_ROOT / "benchmarks" / "peers" / "minimax_env_worker.py"
    command = [str(minimax_python(Path(args.minimax_venv))), str(worker)]
    command += ["--num-envs", *map(str, args.num_envs), "--num-steps", str(args.num_steps)]
    command += ["--repeats", str(args.repeats), "--wrapper", args.wrapper]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def main(args: Args) -> None:
    if args.minimax and (args.size, args.n_walls) != (13, 60):
        raise SystemExit("error: --minimax compares the shipped 13x13 maze with 60 walls (--size 13 --n-walls 60)")
    results = [measure(args, num_envs) for num_envs in args.num_envs]
    for result in results:
        print(json.dumps(result))
    print("\n| wrapper | maze | envs | steps/s | compile s |\n|---|---:|---:|---:|---:|")
    for result in results:
        maze, envs = f"{result['size']}x{result['size']}", result["num_envs"]
        print(f"| {args.wrapper} | {maze} | {envs} | {result['env_steps_per_s']:,} | {result['compile_s']} |")
    if args.minimax:
        minimax_results = measure_minimax(args)
        for result in minimax_results:
            print(json.dumps(result))
        print("\n| wrapper | envs | ours steps/s | minimax steps/s | speed-up | ours compile s | minimax compile s |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for ours, theirs in zip(results, minimax_results, strict=True):
            speedup = ours["env_steps_per_s"] / theirs["env_steps_per_s"]
            row = [args.wrapper, ours["num_envs"], f"{ours['env_steps_per_s']:,}", f"{theirs['env_steps_per_s']:,}"]
            print("| " + " | ".join(map(str, [*row, f"{speedup:.2f}x", ours["compile_s"], theirs["compile_s"]])) + " |")


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args))
