"""Run management shared by every algos/ script: the run folder, resume rules, logs.csv, the progress
line, clean stops on Ctrl+C / SIGTERM, stop criteria and optional wandb.

A run folder `runs/<run-name>/` holds `config.json`, `logs.csv`, `checkpoints/` (the newest
`--keep-checkpoints`), `checkpoints/archive/` (every `--archive-interval`, never pruned), `eval/` and
`images/`.
"""

import contextlib
import csv
import io
import json
import math
import shutil
import signal
import sys
import time
from pathlib import Path

import numpy as np

from common.checkpoint import CheckpointError, write_atomic
from common.config import check_resumable, flags_of, read_saved_config
from common.errors import ConfigError


@contextlib.contextmanager
def one_line_errors():
    """Turn bad flags, run folders and checkpoints into `error: <message>` on stderr and exit status 2,
    instead of a traceback."""
    try:
        yield
    except (ConfigError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def prepare_run_dir(config) -> Path:
    """Check and create `runs_dir/run_name` as the flags ask (new, --resume or --overwrite); refuse
    anything that would lose or mix up saved work. Writes nothing into an existing run: config.json is
    written by `record_config` once a resumed checkpoint has loaded."""
    run = config.run
    run_dir = Path(run.runs_dir) / run.run_name
    if run.resume:
        saved = read_saved_config(run_dir)
        check_resumable(saved["config"], flags_of(config), run_dir)
    elif run_dir.exists() and any(run_dir.iterdir()):
        if not run.overwrite:
            choices = "pass --resume to continue it, --overwrite to start over, or another --run-name"
            raise ConfigError(f"{run_dir} already exists: {choices}")
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def record_config(run_dir: Path, config, script: str) -> None:
    """config.json: every field by flag name and the script that ran it (never environment variables or
    secrets)."""
    write_atomic(run_dir / "config.json", json.dumps({"script": script, "config": flags_of(config)}, indent=2).encode())


class CsvLog:
    """logs.csv: one row per seed per log step. On resume, rows past the restored update are dropped so
    the log matches the checkpoint; new columns are added to the header."""

    def __init__(self, path: Path, columns: list[str], resume_update: int | None = None):
        self.path = path
        previous_rows, previous_columns = [], []
        if resume_update is not None and path.exists():
            with open(path, newline="") as handle:
                reader = csv.DictReader(handle)
                previous_columns = list(reader.fieldnames or [])
                previous_rows = [row for row in reader if int(row["update"]) <= resume_update]
        self.columns = previous_columns + [column for column in columns if column not in previous_columns]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, self.columns)
        writer.writeheader()
        writer.writerows(previous_rows)
        write_atomic(path, buffer.getvalue().encode())

    def write(self, rows: list[dict]) -> None:
        with open(self.path, "a", newline="") as handle:
            csv.DictWriter(handle, self.columns).writerows(
                [{key: _cell(value) for key, value in row.items()} for row in rows]
            )


def _cell(value):
    if isinstance(value, float | np.floating):
        return "" if math.isnan(value) else f"{float(value):.6g}"
    return value


class Progress:
    """A one-line progress display: updates, true env steps/s, ETA, latest return and eval solve rate."""

    def __init__(self, total_updates: int, start_update: int):
        self.total_updates, self.start_update = total_updates, start_update
        self.started = time.perf_counter()
        self.interactive = sys.stderr.isatty()

    def show(self, update: int, env_steps_per_s: float, latest: dict) -> None:
        elapsed = time.perf_counter() - self.started
        done = update - self.start_update
        eta = elapsed / done * (self.total_updates - update) if done else float("nan")
        parts = [
            f"update {update}/{self.total_updates}",
            f"{env_steps_per_s:,.0f} env steps/s",
            f"ETA {_duration(eta)}",
        ]
        parts += [f"{name} {value:.3f}" for name, value in latest.items() if not math.isnan(value)]
        line = " | ".join(parts)
        print(
            f"\r{line}\033[K" if self.interactive else line,
            end="" if self.interactive else "\n",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        if self.interactive:
            print(file=sys.stderr)


def _duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


class StopSignal:
    """Ctrl+C and SIGTERM set `requested` instead of killing the process, so the driver can checkpoint at
    the end of the current chunk and exit cleanly. A second Ctrl+C interrupts at once."""

    def __init__(self):
        self.requested = None

    def __enter__(self):
        self._previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _handle(self, signum, frame):
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = signal.Signals(signum).name

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def stop_reason(run, update: int, env_steps: int, seconds: float) -> str | None:
    """Why training should stop now, if it should (`run`: a common.config.RunConfig): --total-updates,
    --total-env-steps or --train-seconds."""
    if update >= run.total_updates:
        return f"reached --total-updates {run.total_updates}"
    if run.total_env_steps is not None and env_steps >= run.total_env_steps:
        return f"reached --total-env-steps {run.total_env_steps}"
    if run.train_seconds is not None and seconds >= run.train_seconds:
        return f"reached --train-seconds {run.train_seconds}"
    return None


def chunk_rows(metrics: dict, update: int, env_steps: int, wall_time: float, env_steps_per_s: float) -> list[dict]:
    """Rows for logs.csv from a chunk's metrics ({key: [num_seeds, num_updates]}): per seed, the mean of
    each metric over the chunk's updates (NaN where no episode finished)."""
    num_seeds = next(iter(metrics.values())).shape[0]
    rows = []
    for seed in range(num_seeds):
        row = {
            "seed": seed,
            "update": update,
            "env_steps": env_steps,
            "wall_time": round(wall_time, 2),
            "sps": round(env_steps_per_s),
        }
        row.update({key: nanmean(values[seed]) for key, values in metrics.items()})
        rows.append(row)
    return rows


def nanmean(values) -> float:
    """Mean ignoring NaN; NaN (without a warning) when nothing is left."""
    values = np.asarray(values, dtype=np.float64)
    kept = values[~np.isnan(values)]
    return float(kept.mean()) if kept.size else float("nan")


class RunLog:
    """Everything a log step writes: logs.csv, wandb (with --track) and the progress line."""

    def __init__(self, config, run_dir: Path, columns: list[str], start_update: int, headline: tuple[str, ...]):
        self.csv = CsvLog(
            run_dir / "logs.csv",
            ["seed", "update", "env_steps", "wall_time", "sps", *columns],
            start_update if config.run.resume else None,
        )
        self.wandb = WandbLogger(config, run_dir) if config.run.track else None
        self.progress = Progress(config.run.total_updates, start_update)
        self.headline = headline
        self.latest = {}

    def write(self, rows: list[dict], env_steps_per_s: float) -> None:
        self.csv.write(rows)
        if self.wandb:
            self.wandb.log(rows)
        self.latest = {key: nanmean([row.get(key, float("nan")) for row in rows]) for key in self.headline}
        self.progress.show(rows[0]["update"], env_steps_per_s, self.latest)

    def close(self) -> None:
        self.progress.close()
        if self.wandb:
            self.wandb.close()


def compile_timed(name: str, jitted, *args):
    """AOT-compile `jitted` for `args` so the first timed chunk measures training, not compilation."""
    started = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    print(f"compiled {name} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    return compiled


class WandbLogger:
    """Opt-in (--track) wandb logging: one run per seed, grouped by run name. Honours WANDB_MODE (e.g.
    offline); imported only when used so wandb is never required."""

    def __init__(self, config, run_dir: Path):
        import wandb

        run = config.run
        self.runs = [
            wandb.init(
                project=run.wandb_project,
                entity=run.wandb_entity,
                group=run.run_name,
                name=f"{run.run_name}-seed{seed}",
                config={**flags_of(config), "seed_index": seed},
                dir=str(run_dir),
                reinit="create_new",
            )
            for seed in range(run.num_seeds)
        ]

    def log(self, rows: list[dict]) -> None:
        for run, row in zip(self.runs, rows, strict=True):
            run.log(
                {key: value for key, value in row.items() if key != "seed" and not _is_nan(value)},
                step=int(row["update"]),
            )

    def close(self) -> None:
        for run in self.runs:
            run.finish()


def _is_nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)
