"""The measurements a GPU session runs, in one command: throughput and compile time of every method, seeds
vmapped in one process, and the env alone at growing batch sizes.

    python benchmarks/gpu_suite.py --out gpu_results            # on a GPU: about 20 minutes on one H100 (planned)
    python benchmarks/gpu_suite.py --out /tmp/smoke --smoke     # the same steps at tiny sizes, on a CPU

Stages, in order, each a list of settings measured by the benchmark that owns them:
1. `methods`: every algos/ script at the paper configuration (32 envs x 256 steps, LSTM-256, one seed),
   `benchmarks/bench_algos.py:measure` (AOT compile timed apart, replay buffers full, median of timed calls).
2. `seeds`: DR and ACCEL at 1, 8 and 64 vmapped seeds, the same measure.
3. `env`: AMaze alone with DR resampling and a random policy reading every observation, 1,024 to 65,536 envs,
   `benchmarks/bench_env.py:measure`.
Every result is one JSON line (device, versions, commit and config included) appended to
`<out>/<stage>.jsonl` as soon as it is measured, so a session cut short keeps what it measured; a setting
that fails (out of memory, say) is recorded with its error and the suite goes on. After each stage the suite
prints its markdown table for benchmarks/README.md. `--stages` and `--methods` pick what runs; `--smoke`
shrinks every size so the suite runs on a CPU (tests/test_gpu_suite.py runs it there with two methods; the
CUDA export of every method is tests/test_cuda_lowering.py).
"""

import json
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Literal

import tyro

# SCAFFOLDING: make `benchmarks`, `envs` and `common` importable when run as a script.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import bench_algos, bench_env  # noqa: E402
from common.provenance import describe_environment  # noqa: E402

Stage = Literal["methods", "seeds", "env"]
METHODS = ("dr", "paired", "plr", "accel", "plr_parallel", "accel_parallel", "sfl")


@dataclass(frozen=True)
class Args:
    out: str
    """Folder for the JSON lines (created; existing files are appended to)."""
    stages: tuple[Stage, ...] = ("methods", "seeds", "env")
    """Stages to run, in this order."""
    methods: tuple[str, ...] = METHODS
    """Methods of the `methods` stage (algos/<name>.py)."""
    smoke: bool = False
    """Tiny sizes everywhere: checks the suite end to end on a CPU."""


@dataclass(frozen=True)
class Sizes:
    """What each stage measures."""

    num_envs: int | None = None  # None: each script's own (32; SFL's 256)
    num_steps: int = 256
    updates_per_call: int = 5
    repeats: int = 3
    seed_counts: tuple[int, ...] = (1, 8, 64)
    env_counts: tuple[int, ...] = (1024, 4096, 16384, 65536)
    env_steps: int = 256
    overrides: tuple[str, ...] = ()  # key=value config overrides for every method (bench_algos --set)


PAPER = Sizes()
SMOKE = Sizes(
    num_envs=4,
    num_steps=8,
    updates_per_call=2,
    repeats=1,
    seed_counts=(1, 2),
    env_counts=(8,),
    env_steps=8,
    overrides=(
        "lstm_size=8",
        "maze_size=5",
        "n_walls=3",
        "max_steps=8",
        "buffer_size=16",
        "teacher_lstm_size=8",
        "teacher_conv_filters=4",
        "score_batches=1",
        "score_batch_size=16",
        "score_steps=8",
    ),
)


def algo_args(sizes: Sizes, name: str) -> bench_algos.Args:
    """bench_algos' settings for `name`; overrides the script has no field for are left out."""
    fields = bench_algos.load_algo(name).Config()
    known = [item for item in sizes.overrides if has_flag(fields, item.split("=", 1)[0])]
    return bench_algos.Args(
        algos=(name,),
        num_steps=sizes.num_steps,
        updates_per_call=sizes.updates_per_call,
        repeats=sizes.repeats,
        set=tuple(known),
    )


def has_flag(config, name: str) -> bool:
    """Whether the (nested) config has a field `name` at any depth."""
    for field in fields(config):
        value = getattr(config, field.name)
        if field.name == name or (is_dataclass(value) and has_flag(value, name)):
            return True
    return False


def measure_algo(sizes: Sizes, name: str, num_seeds: int) -> dict:
    num_envs = sizes.num_envs or bench_algos.load_algo(name).Config().ppo.num_envs
    return bench_algos.measure(name, algo_args(sizes, name), num_envs, num_seeds)


def settings(stage: Stage, sizes: Sizes, methods: tuple[str, ...]) -> list[tuple[str, Callable[[], dict]]]:
    """(label, measure) for every setting of `stage`."""
    if stage == "methods":
        return [(name, lambda name=name: measure_algo(sizes, name, 1)) for name in methods]
    if stage == "seeds":
        return [
            (f"{name} x{seeds}", lambda name=name, seeds=seeds: measure_algo(sizes, name, seeds))
            for name in ("dr", "accel")
            for seeds in sizes.seed_counts
        ]
    env_args = bench_env.Args(num_envs=sizes.env_counts, num_steps=sizes.env_steps, repeats=sizes.repeats)
    if sizes is SMOKE:
        env_args = replace(env_args, size=5, n_walls=3)
    return [(f"env {count}", lambda c=count: bench_env.measure(env_args, c)) for count in sizes.env_counts]


def run_stage(stage: Stage, sizes: Sizes, methods: tuple[str, ...], out: Path) -> list[dict]:
    results = []
    for label, measure in settings(stage, sizes, methods):
        started = time.perf_counter()
        try:
            result = {"stage": stage, "setting": label, **measure()}
        except Exception as error:  # noqa: BLE001 a failed setting (out of memory) must not end the session
            result = {"stage": stage, "setting": label, "error": f"{type(error).__name__}: {error}"}
            traceback.print_exc()
        result["wall_s"] = round(time.perf_counter() - started, 1)
        with open(out / f"{stage}.jsonl", "a") as file:
            file.write(json.dumps(result) + "\n")
        print(f"{stage} {label}: {result.get('env_steps_per_s', result.get('error'))}", file=sys.stderr, flush=True)
        results.append(result)
    return results


def table(results: list[dict]) -> str:
    """The markdown table of one stage's results."""
    lines = [
        "| setting | envs x steps | seeds | compile s | s per update (env: per scan) | env steps/s |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for result in results:
        if "error" in result:
            lines.append(f"| {result['setting']} | - | - | - | - | {result['error']} |")
            continue
        seconds = result.get("steady_s_per_update", result.get("steady_s"))
        row = [
            result["setting"],
            f"{result['num_envs']} x {result['num_steps']}",
            result.get("num_seeds", 1),
            result["compile_s"],
            seconds,
            f"{result['env_steps_per_s']:,}",
        ]
        lines.append("| " + " | ".join(map(str, row)) + " |")
    return "\n".join(lines)


def main(args: Args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sizes = SMOKE if args.smoke else PAPER
    environment = describe_environment()
    print(json.dumps({"suite": "gpu", "smoke": args.smoke, **environment}), flush=True)
    for stage in args.stages:
        results = run_stage(stage, sizes, args.methods, out)
        print(f"\n### {stage} ({environment['device']})\n\n{table(results)}", flush=True)


if __name__ == "__main__":
    main(tyro.cli(Args))
