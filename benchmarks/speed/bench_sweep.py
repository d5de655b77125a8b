"""What `--sweep` saves: a grid trained in one process against the same grid as one command per point.

For each method, the same work two ways, each a real `algos/<method>.py` command in a fresh process (so every
wall-clock second a user would wait is counted: start-up, compiles, training, checkpoints):
- one command with `--sweep lr=V1,...,Vn --num-seeds S` (n points x S seeds vmapped in one program);
- n commands, one per point, `--lr Vi --num-seeds S`, one after the other.
Both train every point for `--total-updates` updates. `--repeats` repeats the pair, the order swapped each time
(this machine's speed drifts, so the two ways alternate rather than run in blocks). One JSON line per command
(wall and CPU seconds of the process, device, versions, commit), then a table.

    python benchmarks/speed/bench_sweep.py --out /tmp/bench_sweep   # DR and Robust PLR, 8 points x 2 seeds
"""

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import tyro

# SCAFFOLDING: make `benchmarks`, `envs` and `common` importable when run as a script.
REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.speed.tables import markdown_table, ratio  # noqa: E402
from common.provenance import describe_environment  # noqa: E402

QUICKSTART = (
    ("--maze-size", "7"),
    ("--n-walls", "8"),
    ("--max-steps", "64"),
    ("--num-steps", "128"),
    ("--lstm-size", "64"),
)
"""The README quickstart's sizes: a sweep is how a researcher tunes at this scale before a long run."""


@dataclass(frozen=True)
class Args:
    out: str
    """Folder for the runs (its runs/ emptied first) and results.jsonl (appended to: give a new folder per
    measurement)."""
    methods: tuple[str, ...] = ("dr", "plr")
    """algos/<name>.py scripts to measure."""
    lrs: tuple[float, ...] = (1e-4, 2e-4, 3e-4, 4e-4, 5e-4, 6e-4, 8e-4, 1e-3)
    """The swept --lr values: one point each."""
    num_seeds: int = 2
    """Seeds per point."""
    total_updates: int = 40
    """Updates every point trains for."""
    log_interval: int = 20
    """Updates per jitted chunk (--log-interval, and --checkpoint-interval)."""
    repeats: int = 1
    """Times the pair of ways is measured, the order swapped each time."""


def command(args: Args, method: str, run_name: str, runs_dir: Path, lr_flags: list[str]) -> list[str]:
    sizes = [part for pair in QUICKSTART for part in pair]
    return [
        sys.executable,
        str(REPO_ROOT / "algos" / f"{method}.py"),
        *("--run-name", run_name, "--runs-dir", str(runs_dir), "--num-seeds", str(args.num_seeds)),
        *sizes,
        *("--total-updates", str(args.total_updates), "--log-interval", str(args.log_interval)),
        *("--checkpoint-interval", str(args.log_interval), "--eval-interval", "0", "--screenshot-interval", "0"),
        *lr_flags,
    ]


def timed(argv: list[str]) -> dict:
    """Wall and CPU seconds of one command in a fresh process; a failed command raises with its last line."""
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "WANDB_MODE": "disabled"})
    wall = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        last_line = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{' '.join(argv[1:3])} exited with {result.returncode}: {last_line}")
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}


def measure_way(args: Args, method: str, way: str, runs_dir: Path, repeat: int) -> dict:
    """One way's commands for `method`: the one sweep, or one command per point."""
    if way == "sweep":
        values = ",".join(f"{lr:g}" for lr in args.lrs)
        argvs = [command(args, method, f"{method}_sweep_{repeat}", runs_dir, ["--sweep", f"lr={values}"])]
    else:
        argvs = [command(args, method, f"{method}_lr{lr:g}_{repeat}", runs_dir, ["--lr", f"{lr:g}"]) for lr in args.lrs]
    runs = [timed(argv) for argv in argvs]
    return {
        "method": method,
        "way": way,
        "repeat": repeat,
        "commands": len(argvs),
        "points": len(args.lrs),
        "num_seeds": args.num_seeds,
        "total_updates": args.total_updates,
        "wall_s": round(sum(run["wall_s"] for run in runs), 1),
        "cpu_s": round(sum(run["cpu_s"] for run in runs), 1),
        "per_command_wall_s": [run["wall_s"] for run in runs],
        "command": " ".join(argvs[0][1:]),
    }


def main(args: Args) -> None:
    unknown = [name for name in args.methods if not (REPO_ROOT / "algos" / f"{name}.py").exists()]
    if unknown:
        raise SystemExit(f"error: no algos/ script for {', '.join(unknown)}")
    out = Path(args.out)
    runs_dir = out / "runs"
    shutil.rmtree(runs_dir, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    environment = describe_environment()
    results = []
    for repeat in range(args.repeats):
        for method in args.methods:
            ways = ("sweep", "separate") if repeat % 2 == 0 else ("separate", "sweep")
            for way in ways:
                result = {**measure_way(args, method, way, runs_dir, repeat), **environment}
                results.append(result)
                with open(out / "results.jsonl", "a") as file:
                    file.write(json.dumps(result) + "\n")
                print(json.dumps(result), flush=True)
    rows = []
    for method in args.methods:
        for repeat in range(args.repeats):
            sweep, separate = (
                next(r for r in results if (r["method"], r["way"], r["repeat"]) == (method, way, repeat))
                for way in ("sweep", "separate")
            )
            rows.append(
                [method, repeat, f"{len(args.lrs)} x {args.num_seeds}", separate["wall_s"], sweep["wall_s"]]
                + [ratio(separate["wall_s"], sweep["wall_s"]), separate["cpu_s"], sweep["cpu_s"]]
            )
    header = ["method", "repeat", "points x seeds", "separate wall s", "sweep wall s", "separate / sweep"]
    print("\n" + markdown_table(header + ["separate CPU s", "sweep CPU s"], rows))


if __name__ == "__main__":
    main(tyro.cli(Args))
