"""Training throughput of the algos/ scripts: compile time and steady-state seconds per update.

For each method: build `make_train(Config(...))` at the given sizes, AOT-compile one chunk of
`--updates-per-call` updates for all seeds (`lower().compile()`, timed), run it once to warm up, then
time `--repeats` calls after `block_until_ready` and report the median. Replay methods start from a full
level buffer (random levels of the method's own generator, random scores and ages), so replay, mutation
and replacement all take place in the timed calls. One JSON line per method and setting with the device,
versions, commit and full config, then a markdown table. Several `--num-envs` or `--num-seeds` values
measure every combination (a scaling sweep).

    python benchmarks/speed/bench_algos.py --algos dr --num-envs 32 --num-steps 256 --num-seeds 1
    python benchmarks/speed/bench_algos.py --algos dr plr --num-envs 32 256 1024 4096 --updates-per-call 1

With `--minimax`, the same protocol runs on minimax-lib 0.2.0 at the same settings (its shipped maze config
per method) in a subprocess (benchmarks/peers/minimax_worker.py), from a virtual environment the benchmark
creates on first use with minimax's pinned stack, and a side-by-side table of env steps/s with the
speed-up per method follows.

    python benchmarks/speed/bench_algos.py --algos dr plr --minimax
"""

import functools
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import jax
import jax.numpy as jnp
import tyro

# SCAFFOLDING: make `envs` and `common` importable when run as a script.
REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from common import level_buffer  # noqa: E402
from common.config import AT_LEAST_ONE, flags_of, raise_first, range_problems, with_flags  # noqa: E402
from common.devices import make_placement  # noqa: E402
from common.provenance import describe_environment  # noqa: E402
from common.runs import one_line_errors  # noqa: E402
from common.sweep import run_functions  # noqa: E402
from envs.levels import sample_dr_level  # noqa: E402

ALGOS = ("dr", "paired", "plr", "accel", "plr_parallel", "accel_parallel")
"""Methods with a script in algos/."""
MINIMAX_CONFIGS = {
    "dr": "dr",
    "paired": "paired",
    "plr": "plr",
    "accel": "accel",
    "plr_parallel": "pplr",
    "accel_parallel": "paccel",
}
"""Our method -> minimax-lib's shipped maze config (minimax/config/configs/maze/<name>.json)."""
MINIMAX_STACK = (
    "minimax-lib==0.2.0",
    "jax==0.4.31",
    "jaxlib==0.4.31",
    "flax==0.8.5",
    "optax==0.2.3",
    "chex==0.1.86",
    "orbax-checkpoint==0.5.23",
)
"""The versions minimax-lib 0.2.0 runs with (it breaks on newer JAX); it needs Python <= 3.11."""


@dataclass(frozen=True)
class Args:
    algos: tuple[str, ...] = ALGOS
    """Methods to measure (algos/<name>.py)."""
    num_envs: tuple[int, ...] = (32,)
    """Parallel envs per seed (per block for the parallel methods); several values give a scaling sweep."""
    num_steps: int = 256
    """Rollout length per update."""
    num_seeds: tuple[int, ...] = (1,)
    """Seeds vmapped in one process; several values give a scaling sweep."""
    num_devices: int = 1
    """Devices to spread the run over (seeds when they divide, else envs; on CPU force several with
    XLA_FLAGS=--xla_force_host_platform_device_count=N)."""
    shard_envs: bool = False
    """Split each seed's envs across the devices even when the seeds divide."""
    updates_per_call: int = 2
    """Updates per timed call (one jitted chunk)."""
    repeats: Annotated[int, AT_LEAST_ONE] = 3
    """Timed calls; the median is reported."""
    minimax: bool = False
    """Also time minimax-lib 0.2.0 at the same settings (single seed) and print the ratio per method."""
    minimax_venv: str = str(REPO_ROOT / "benchmarks" / ".minimax-venv")
    """Virtual environment for minimax's pinned stack; created with the running Python if missing."""
    set: tuple[str, ...] = ()
    """Config overrides as key=value (values parsed as JSON when they can be), e.g. teacher_conv_filters=8."""
    sweep: tuple[str, ...] = ()
    """The scripts' --sweep NAME=V1,V2,...: every point x seed vmapped in one program (env steps/s counts all)."""

    def __post_init__(self):
        raise_first(range_problems(self))


def load_algo(name: str):
    path = REPO_ROOT / "algos" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _parse(value: str):
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def warm_buffers(runner, config):
    """The runner with every seed's level buffer full (no-op for methods without a PLR buffer; SFL's is rebuilt
    by its first refresh)."""
    if not isinstance(getattr(runner, "buffer", None), level_buffer.LevelBuffer):
        return runner
    buffer = runner.buffer
    num_seeds, capacity = buffer.scores.shape
    rng_levels, rng_scores, rng_ages = jax.random.split(jax.random.key(1), 3)
    sample = functools.partial(
        sample_dr_level, height=config.env.maze_size, width=config.env.maze_size, n_walls=config.env.n_walls
    )
    levels = jax.vmap(jax.vmap(sample))(jax.random.split(rng_levels, (num_seeds, capacity)))
    scores = jax.random.uniform(rng_scores, (num_seeds, capacity))
    full = buffer.replace(
        levels=levels,
        scores=scores,
        max_returns=scores,
        ages=jax.random.randint(rng_ages, (num_seeds, capacity), 0, capacity),
        filled=jnp.ones((num_seeds, capacity), bool),
    )
    return runner.replace(buffer=full)


def measure(name: str, args: Args, num_envs: int, num_seeds: int) -> dict:
    module = load_algo(name)
    overrides = {key: _parse(value) for key, value in (item.split("=", 1) for item in args.set)}
    config = with_flags(
        module.Config(),
        **overrides,
        num_envs=num_envs,
        num_steps=args.num_steps,
        num_seeds=num_seeds,
        num_devices=args.num_devices,
        shard_envs=args.shard_envs,
        log_interval=args.updates_per_call,
        total_updates=args.updates_per_call,
        eval_interval=0,
        checkpoint_interval=args.updates_per_call,
        screenshot_interval=0,
        sweep=args.sweep,
    )
    functions = run_functions(config, module.make_train, f"algos/{name}.py")
    placement = make_placement(config.run, config.ppo.num_envs)
    runner = warm_buffers(jax.jit(functions.init)(jax.random.split(jax.random.key(0), num_seeds)), config)
    num_entries = jax.tree.leaves(runner)[0].shape[0]  # points x seeds with a sweep
    runner = placement.place(runner)
    started = time.perf_counter()
    step_chunk = placement.jit(functions.step).lower(runner).compile()
    compile_s = time.perf_counter() - started
    runner, _ = jax.block_until_ready(step_chunk(runner))
    durations, replay_fractions = [], []
    for _ in range(args.repeats):
        started = time.perf_counter()
        runner, metrics = jax.block_until_ready(step_chunk(runner))
        durations.append(time.perf_counter() - started)
        replay_fractions.append(float(jnp.mean(metrics.get("buffer/replay_fraction", jnp.nan))))
    per_update = statistics.median(durations) / args.updates_per_call
    return {
        "algo": name,
        "num_envs": num_envs,
        "num_steps": args.num_steps,
        "num_seeds": num_seeds,
        "points": num_entries // num_seeds,
        "num_devices": placement.num_devices,
        "sharded": "envs" if placement.shard_envs else ("seeds" if placement.num_devices > 1 else "-"),
        "compile_s": round(compile_s, 2),
        "steady_s_per_update": round(per_update, 4),
        # The fastest and slowest timed calls: whether two settings' medians differ by more than the calls' spread.
        "s_per_update_range": [
            round(min(durations) / args.updates_per_call, 4),
            round(max(durations) / args.updates_per_call, 4),
        ],
        "env_steps_per_s": round(config.env_steps_per_update * num_entries / per_update),
        # Replay methods: the share of timed updates that replayed (and so took the PPO step).
        "replay_fraction": None if jnp.isnan(replay_fractions[0]) else round(statistics.mean(replay_fractions), 3),
        "overrides": list(args.set),
        "sweep": list(args.sweep),
        **describe_environment(),
        "config": flags_of(config),
    }


def pinned_python(venv: Path, packages: tuple[str, ...]) -> Path:
    """The interpreter of `venv`, created with the running Python and `packages` installed on first use (a
    peer's pinned stack, apart from ours)."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True)
    return python


def minimax_python(venv: Path) -> Path:
    return pinned_python(venv, MINIMAX_STACK)


def measure_minimax(name: str, args: Args, num_envs: int) -> dict:
    worker = REPO_ROOT / "benchmarks" / "peers" / "minimax_worker.py"
    command = [str(minimax_python(Path(args.minimax_venv))), str(worker)]
    command += ["--config", MINIMAX_CONFIGS[name], "--num-envs", str(num_envs)]
    command += ["--num-steps", str(args.num_steps), "--repeats", str(args.repeats)]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(args: Args) -> None:
    results = []
    for name in args.algos:
        for num_envs in args.num_envs:
            for num_seeds in args.num_seeds:
                results.append(measure(name, args, num_envs, num_seeds))
                print(json.dumps(results[-1]), flush=True)
    if args.minimax:
        minimax_runs = {}
        for name in args.algos:
            for num_envs in args.num_envs:
                minimax_runs[name, num_envs] = measure_minimax(name, args, num_envs)
                print(json.dumps(minimax_runs[name, num_envs]), flush=True)
        columns = ["env steps/s", "s/update", "compile s"]
        header = ["algo", *(f"{who} {column}" for column in columns for who in ("ours", "minimax"))]
        print("\n| " + " | ".join([*header[:3], "speed-up", *header[3:]]) + " |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for ours in results:
            theirs = minimax_runs[ours["algo"], ours["num_envs"]]
            # Env steps/s, not s/update: minimax's ACCEL plays the mutants inside its replay update, ours in
            # an update of their own. Ours per seed (minimax runs one), s/update over all seeds.
            ours_rate = ours["env_steps_per_s"] / ours["num_seeds"]
            row = [f"{ours['algo']} ({ours['num_envs']} envs, {ours['num_seeds']} seeds)", f"{round(ours_rate):,}"]
            row += [f"{theirs['env_steps_per_s']:,}"]
            row += [f"{ours_rate / theirs['env_steps_per_s']:.2f}x", ours["steady_s_per_update"]]
            row += [theirs["steady_s_per_update"], ours["compile_s"], theirs["compile_s"]]
            print("| " + " | ".join(map(str, row)) + " |")
    print("\n| algo | overrides | envs x steps | seeds | devices (split) | compile s | s/update | env steps/s |")
    print("|---|---|---|---:|---|---:|---:|---:|")
    for r in results:
        shape, overrides = f"{r['num_envs']} x {r['num_steps']}", " ".join(r["overrides"]) or "-"
        row = [
            r["algo"],
            overrides,
            shape,
            r["num_seeds"],
            f"{r['num_devices']} ({r['sharded']})",
            r["compile_s"],
            r["steady_s_per_update"],
            f"{r['env_steps_per_s']:,}",
        ]
        print("| " + " | ".join(map(str, row)) + " |")


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args))
