"""What the stages of benchmarks/learning/learning_vs_minimax.py leave under `--out` and how the next stage reads it:
each side's run folder, minimax's log dirs, archives and logs.csv (with the rollouts its ticks played), when a
run counts as done, and the JSON-lines records.
"""

import csv
import json
import math
from pathlib import Path

from benchmarks.learning.learning_vs_minimax_config import Args, cleanued_runs, init_from_digest
from common import checkpoint as checkpoints

EXPERIMENT_FIELDS = (
    "seeds", "rollouts", "maze_size", "n_walls", "max_steps", "num_envs", "num_steps", "lstm_size", "match_deviations",
    "checkpoint_every", "accel_archive_ticks", "diagnostic", "first_seed", "same_init",
    "cleanued_per_seed", "init_from",
)  # fmt: skip


def experiment_settings(args: Args) -> dict:
    """What one --out's runs are: a later invocation with other values would mix two experiments. Methods may be
    added; the evaluation's settings may change, since each evaluation record carries them and the report picks
    the records of its own."""
    values = {field: getattr(args, field) for field in EXPERIMENT_FIELDS}
    defaults = (
        ("diagnostic", ()), ("first_seed", 0), ("same_init", False), ("cleanued_per_seed", False), ("init_from", None)
    )  # fmt: skip
    for field, default in defaults:
        if values[field] == default:  # as in the folders written before the flag existed
            del values[field]
    if "init_from" in values:
        values["init_from"] = init_from_digest(values["init_from"])
    return json.loads(json.dumps(values))  # as read back: tuples are lists


def experiment_path(out: Path) -> Path:
    return out / "experiment.json"


def has_training_logs(args: Args) -> bool:
    return any(
        any((cleanued_run_dir(args.out, run.name) / "logs.csv").is_file() for run in cleanued_runs(args, method))
        or any((minimax_dir(args.out, method, seed) / "logs.csv").is_file() for seed in minimax_seeds(args))
        for method in args.methods
    )


def cleanued_run_dir(out: Path, name: str) -> Path:
    """The folder of the cleanued run `name` (a `CleanuedRun.name`)."""
    return out / "runs" / name


def minimax_seeds(args: Args) -> range:
    """minimax's --seed of each run, seed index i running --seed=first_seed+i+1."""
    return range(args.first_seed + 1, args.first_seed + args.seeds + 1)


def minimax_xpid(method: str, seed: int) -> str:
    return f"{method}_{seed}"


def minimax_dir(out: Path, method: str, seed: int) -> Path:
    return out / "minimax" / minimax_xpid(method, seed)


def minimax_archive_ticks(args: Args, method: str) -> int:
    """Ticks between a minimax run's archives (which are never overwritten, so each is one tick's policy). DR,
    PLR and PAIRED play one rollout per tick and archive on the evaluation grid; ACCEL's rollout count runs
    ahead of its ticks, so it archives more often to stop near the target and to match the grid closely."""
    return args.accel_archive_ticks if method == "accel" else args.checkpoint_every


def minimax_rollouts(method: str, tick: int, n_updates: int) -> int:
    """Rollouts a minimax run has played after `tick` ticks: one per tick, and an ACCEL replay tick (the ticks
    whose gradient update raised n_updates) plays the mutants as a second rollout."""
    return tick + n_updates if method == "accel" else tick


def read_minimax_log(path: Path) -> list[dict]:
    """minimax's logs.csv (header line `# a,b,...`, one row per tick) as dicts of floats, NaN where a value is
    empty (minimax writes -inf, "not played this tick", as an empty cell). A torn last row is dropped."""
    if not path.is_file():
        return []
    lines = path.read_text().splitlines()
    if not lines:
        return []
    header = lines[0].removeprefix("# ").split(",")
    rows = []
    for values in csv.reader(lines[1:]):
        if len(values) != len(header):
            continue
        try:
            rows.append({key: float(value) if value else math.nan for key, value in zip(header, values, strict=True)})
        except ValueError:
            continue
    return rows


def stop_tick(rows: list[dict], method: str, target: int, archive_ticks: int) -> int | None:
    """The first archived tick at which a minimax run has played `target` rollouts, or None."""
    for row in rows:
        tick = int(row["_tick"])
        if tick % archive_ticks == 0 and minimax_rollouts(method, tick, int(row["n_updates"])) >= target:
            return tick
    return None


def minimax_archive(directory: Path, tick: int) -> Path:
    return directory / f"checkpoint_{tick}.pkl"


def cleanued_done(args: Args, name: str) -> bool:
    """The cleanued run `name` has archived its last grid point."""
    archive = cleanued_run_dir(args.out, name) / "checkpoints" / "archive"
    return checkpoints.checkpoint_path(archive, args.rollouts).exists()


def minimax_done(args: Args, method: str, seed: int) -> bool:
    stopped = minimax_dir(args.out, method, seed) / "stopped.json"
    return stopped.is_file() and json.loads(stopped.read_text()).get("target") == args.rollouts


def read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def append_jsonl(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        handle.write(json.dumps(record, default=str) + "\n")


def write_jsonl(path: Path, records: list[dict]) -> None:
    checkpoints.write_atomic(path, "".join(json.dumps(record, default=str) + "\n" for record in records).encode())
