"""Run management shared by every algos/ script: the run folder, resume rules, logs.csv, the progress
line, clean stops on Ctrl+C / SIGTERM, stop criteria and optional wandb.

A run folder `runs/<run-name>/` holds `config.json`, `logs.csv`, `checkpoints/` (the newest
`--keep-checkpoints`), `checkpoints/archive/` (every `--archive-interval`, never pruned), `eval/` and
`images/`.
"""

import contextlib
import csv
import fcntl
import io
import json
import math
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from common.checkpoint import TEMPORARY, CheckpointError, list_checkpoints, remedy, write_atomic
from common.config import (
    check_resumable,
    check_same_script,
    file_in_the_way,
    flags_of,
    read_config_to_resume,
)
from common.errors import ConfigError
from common.sweep import parse_sweep


@contextlib.contextmanager
def one_line_errors():
    """Turn bad flags, run folders and checkpoints into `error: <message>` on stderr and exit status 2, and a
    Ctrl+C before the run's own handler is installed (`StopSignal`: while the flags are read) into one line and
    exit status 130, instead of a traceback."""
    try:
        yield
    except (ConfigError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        print("error: interrupted; files written so far are complete (writes are atomic)", file=sys.stderr)
        raise SystemExit(130) from None


class RunFolder(NamedTuple):
    path: Path
    lock: int  # an open descriptor of the folder, locked (flock): the OS releases it on any exit, kill -9 too
    created: tuple[Path, ...] = ()  # the folders opening it made, innermost first: a refused start removes them


MARKER = ".cleanued-run"
"""The file a new run writes first into its folder and --overwrite never removes before everything else is gone:
the one proof that a run of this project made the folder."""
MARKER_TEXT = b"A cleanued run folder: --overwrite may delete this folder while this file is in it.\n"
RUN_ENTRIES = (MARKER, "config.json", "points.csv", "logs.csv", "checkpoints", "images", "eval", "wandb")
"""What a run writes into its folder (the driver, common.evaluate, wandb), besides `write_atomic`'s temporaries."""


UPDATE_CHECKPOINT = re.compile(r"^update_\d+\.msgpack$")
RUN_FOLDER_FILES = {
    "checkpoints": UPDATE_CHECKPOINT,
    "checkpoints/archive": UPDATE_CHECKPOINT,
    "images": re.compile(r"^levels_update_\d+\.png$"),
    "eval": re.compile(r"^(evaluate|risk)_\d+_\d{8}-\d{6}\.csv$|^.+_update_\d+\.gif$"),
}
"""The files a run writes into each of its folders (the driver's checkpoints and pictures, common.evaluate's default
outputs); wandb/ is wandb's own."""


def foreign_entries(run_dir: Path) -> list[str]:
    """The paths, relative to `run_dir`, that no run writes (someone's notes, another tool's output, an evaluation
    written under a name of one's own), sorted."""
    found = [entry.name for entry in run_dir.iterdir() if entry.name not in RUN_ENTRIES]
    for folder, written in RUN_FOLDER_FILES.items():
        path = run_dir / folder
        if not path.is_dir() or path.is_symlink():  # --overwrite deletes a link, never what it points to
            continue
        try:
            entries = list(path.iterdir())
        except OSError as error:
            raise ConfigError(f"cannot read {path} ({error.strerror or error}) to check it for --overwrite") from None
        for entry in entries:
            relative = f"{folder}/{entry.name}"
            is_folder = entry.is_dir() and not entry.is_symlink()
            if relative not in RUN_FOLDER_FILES and not (written.match(entry.name) and not is_folder):
                found.append(relative)
    return sorted(relative for relative in found if not TEMPORARY.match(Path(relative).name))


def is_run_folder(run_dir: Path) -> bool:
    """Whether a run of this project made `run_dir`: it holds the `MARKER` file a new run writes first (the only
    folders --overwrite deletes). Entry names prove nothing: another tool may write a config.json or logs.csv."""
    marker = run_dir / MARKER
    try:
        return marker.is_file() and not marker.is_symlink() and marker.read_bytes() == MARKER_TEXT
    except OSError:
        return False


def lock_run_folder(run_dir: Path) -> int:
    """An exclusive OS lock on the run folder itself (no lock file to go stale), or a one-line refusal if another
    process holds it. Returns the locked descriptor; keep it open for as long as the folder is in use."""
    descriptor = os.open(run_dir, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise ConfigError(f"{run_dir} is in use by another process; wait for it to end") from None
    return descriptor


def open_run_folder(config, script: str) -> RunFolder:
    """Check `runs_dir/run_name` against the flags (new, --resume or --overwrite) and take its lock; a new folder
    gets the marker that claims it for a run (`script`: 'algos/dr.py'). Refuses anything that would lose or mix
    saved work: a name that is not one plain folder name (checked with the flags), a file in the way, a folder
    another process holds, --overwrite of a folder that is not a run folder or that holds what no run writes,
    --resume of a folder with no checkpoint or of another script's run. Writes nothing else: --overwrite's
    deletion and a new run's config.json wait for `start_run`. If the marker cannot be written (a full disk), the
    folders this call created are removed again."""
    run = config.run
    run_dir = Path(run.runs_dir) / run.run_name
    in_the_way = file_in_the_way(run_dir)
    if in_the_way == run_dir:
        raise ConfigError(f"{run_dir} exists and is not a folder; choose another --run-name")
    if in_the_way:
        raise ConfigError(f"--runs-dir {run.runs_dir} is not a folder ({in_the_way} is a file); choose another")
    if run.resume:
        saved = read_config_to_resume(run_dir)
        check_same_script(saved, script, run_dir)
        check_resumable(saved["config"], config, run_dir)
        lock = lock_run_folder(run_dir)
        if not list_checkpoints(run_dir / "checkpoints"):
            os.close(lock)
            held = ", ".join(sorted(entry.name for entry in run_dir.iterdir() if entry.name != MARKER))
            raise ConfigError(
                f"cannot resume {run_dir}: it has no checkpoint yet (it holds {held}); --overwrite starts it over"
            )
        return RunFolder(run_dir, lock)
    if run_dir.is_dir() and any(run_dir.iterdir()) and (holds_a_run(run_dir) or not is_run_folder(run_dir)):
        if not run.overwrite:
            choices = "pass --resume to continue it, --overwrite to start over, or another --run-name"
            raise ConfigError(f"{run_dir} already exists: {choices}")
        if not is_run_folder(run_dir):
            held = sorted(entry.name for entry in run_dir.iterdir())
            shown = ", ".join(held[:5]) + (", ..." if len(held) > 5 else "")
            raise ConfigError(
                f"{run_dir} was not made by a cleanued run (it holds {shown} but no {MARKER}, which a new run writes "
                "first; folders of runs before that file existed have none either): refusing to delete it"
            )
        refuse_foreign_entries(run_dir)
    created = [folder for folder in (run_dir, *run_dir.parents) if not folder.exists()]  # innermost first
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        remove_empty_folders(created)
        raise ConfigError(f"could not create {run_dir} ({error.strerror or error})") from None
    lock = lock_run_folder(run_dir)
    try:
        if not run.overwrite and holds_a_run(run_dir):
            raise ConfigError(f"{run_dir} was started by another process at the same time; choose another --run-name")
        if not is_run_folder(run_dir):
            write_marker(run_dir)
    except BaseException:
        os.close(lock)
        if created:  # the folder is this call's: it leaves nothing behind
            (run_dir / MARKER).unlink(missing_ok=True)
        remove_empty_folders(created)
        raise
    return RunFolder(run_dir, lock, tuple(created))


def start_run(run_dir: Path, config, script: str) -> None:
    """A new run's first writes into its folder, held by `open_run_folder`, once its programs are known to fit:
    --overwrite's deletion of the old run, then config.json (and a sweep's points.csv). Until then a refused start
    leaves the old run whole."""
    refuse_foreign_entries(run_dir)  # again: the compile took a while, and someone may have put a file in
    # The marker stays: a kill part way leaves a folder that still proves it is a run, which --overwrite finishes.
    for entry in run_dir.iterdir():
        if entry.name == MARKER:
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError as error:
            raise ConfigError(
                f"could not delete {entry} ({error.strerror or error}) for --overwrite: {remedy(error)}, then "
                "--overwrite again (the folder still holds its marker, so that finishes the job)"
            ) from None
    record_config(run_dir, config, script)


def refuse_foreign_entries(run_dir: Path) -> None:
    """A one-line refusal to delete a run folder that holds what no run writes (`foreign_entries`)."""
    foreign = foreign_entries(run_dir)
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise ConfigError(f"{run_dir} holds what no run writes ({shown}); refusing to delete it: move those away first")


def holds_a_run(run_dir: Path) -> bool:
    """Whether a run folder holds more than its marker: a run's files, not only a start that never wrote (one
    stopped or killed while it compiled)."""
    return any(entry.name != MARKER for entry in run_dir.iterdir())


def remove_unstarted(folder: RunFolder) -> None:
    """Undo a new run's start that never wrote (`start_run`: refused or failed before it): the marker goes, and the
    folders that opening the run folder made. A folder that holds anything else, or that was there before, stays."""
    if not holds_a_run(folder.path):
        (folder.path / MARKER).unlink(missing_ok=True)
        remove_empty_folders(list(folder.created))


def remove_empty_folders(folders: list[Path]) -> None:
    """Remove `folders` (innermost first) as long as they are empty; never deletes a file. One that is not there (a
    mkdir that failed after making its parents) is passed over."""
    for folder in folders:
        try:
            folder.rmdir()
        except FileNotFoundError:
            continue
        except OSError:
            return


def write_marker(run_dir: Path) -> None:
    """The `MARKER` file, before anything else of a new run (a full disk: one line, as for config.json)."""
    try:
        write_atomic(run_dir / MARKER, MARKER_TEXT)
    except OSError as error:
        problem = error.strerror or error
        raise ConfigError(f"could not write {run_dir / MARKER} ({problem}): {remedy(error)} and run again") from None


def record_config(run_dir: Path, config, script: str) -> None:
    """config.json: every field by flag name and the script that ran it (never environment variables or
    secrets), and for a sweep points.csv, its points' values by number. A failed write (a full disk) is a one-line
    error and leaves the previous config.json, if any."""
    path = run_dir / "config.json"
    sweep = parse_sweep(config.run.sweep, config.run.sweep_zip)
    try:
        if sweep is not None:  # the grid's points by number, as logs.csv and the evaluations name them
            table = io.StringIO()
            writer = csv.writer(table)
            writer.writerow(["point", *sweep.names])
            for index, point in enumerate(sweep.points):
                writer.writerow([index, *(point[name] for name in sweep.names)])
            path = run_dir / "points.csv"
            write_atomic(path, table.getvalue().encode())
            path = run_dir / "config.json"
        write_atomic(path, json.dumps({"script": script, "config": flags_of(config)}, indent=2).encode())
    except OSError as error:
        problem = error.strerror or error
        raise ConfigError(f"could not write {path} ({problem}): {remedy(error)} and run again") from None


INTEGER_COLUMNS = ("seed", "update", "env_steps")


class PreviousLog(NamedTuple):
    columns: list[str]
    rows: list[dict]  # the rows up to the restored update
    warnings: list[str]


def read_log(path: Path, resume_update: int) -> PreviousLog:
    """The logs.csv a resumed run continues, checked row by row: rows past the checkpoint are dropped (so the
    log matches it); a torn last row (a crash or a full disk cut it) is dropped with a warning; any other
    malformed row is a one-line error. Reads only."""
    if not path.exists():  # at update 0 no row can be lost: a run stopped before its first chunk has no log yet
        warnings = [f"{path} is missing; the log restarts at update {resume_update}"] if resume_update else []
        return PreviousLog([], [], warnings)
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    warnings = []
    if lines and not lines[-1].endswith("\n"):
        warnings.append(f"{path}: dropped the torn last line ({lines[-1].strip()[:40]!r})")
        lines = lines[:-1]
    records = list(csv.reader(lines))
    if not records or not set(INTEGER_COLUMNS) <= set(records[0]):
        raise ConfigError(f"{path} has no logs.csv header; move it away to resume with a fresh log")
    columns, rows = records[0], []
    for number, record in enumerate(records[1:], start=2):
        problem = _row_problem(columns, record)
        if problem and number == len(records):
            warnings.append(f"{path}: dropped the malformed last row ({problem})")
        elif problem:
            raise ConfigError(f"{path} line {number} is malformed ({problem}); fix or delete that line to resume")
        elif int(record[columns.index("update")]) <= resume_update:
            rows.append(dict(zip(columns, record, strict=True)))
    last = max((int(row["update"]) for row in rows), default=0)
    if last < resume_update:
        warnings.append(f"{path} ends at update {last} but the checkpoint is at {resume_update}: those rows are lost")
    return PreviousLog(columns, rows, warnings)


def _row_problem(columns: list[str], record: list[str]) -> str | None:
    if len(record) != len(columns):
        return f"{len(record)} fields, expected {len(columns)}"
    for column, cell in zip(columns, record, strict=True):
        try:
            if column in INTEGER_COLUMNS or column == "point":
                int(cell)
            elif cell:
                float(cell)
        except ValueError:
            return f"{column} is {cell!r}"
    return None


class CsvLog:
    """logs.csv: one row per seed per log step. A resumed run rewrites the previous rows it continues (see
    `read_log`) and adds new columns to the header."""

    def __init__(self, path: Path, columns: list[str], previous: PreviousLog | None = None):
        self.path = path
        previous = previous or PreviousLog([], [], [])
        self.columns = previous.columns + [column for column in columns if column not in previous.columns]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, self.columns)
        writer.writeheader()
        writer.writerows(previous.rows)
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
    """A one-line progress display: updates, true env steps/s, ETA, latest return and eval solve rate. On a
    terminal the line is rewritten in place; `keep` prints a line above it that stays."""

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

    def keep(self, line: str) -> None:
        """Print `line` for good: on a terminal it replaces the progress line, which the next `show` redraws."""
        print(f"\r{line}\033[K" if self.interactive else line, file=sys.stderr, flush=True)

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
    the end of the current chunk (or compile) and exit cleanly. A second signal while a chunk runs (the driver sets
    `chunk_running`) ends the process at once, without a checkpoint: a chunk too large for the machine may never
    finish. Elsewhere repeated signals only say that the stop is under way: an exception raised in the middle of a
    compile can crash the process (a segmentation fault), and a run stopped before its first checkpoint would
    leave a folder that --resume refuses. When the process ends after the run, the signals stay ignored on exit;
    a run inside a longer program (a notebook, a test) gets its handlers back, also after a stop, so that its
    next Ctrl+C still interrupts it."""

    def __init__(self, process_ends_after: bool = False):
        self.requested = None
        self.chunk_running = False
        self.stopped_run = False  # the driver ended the run early because of a signal (set by `driver.train`)
        self.process_ends_after = process_ends_after

    def __enter__(self):
        self._previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _handle(self, signum, frame):
        name = signal.Signals(signum).name
        end_progress_line = "\n" if os.isatty(2) else ""
        if self.requested and self.chunk_running:
            note = f"{name} again: ending now, in the middle of a chunk, without a checkpoint (the newest one stays)"
            os.write(2, f"{end_progress_line}{note}\n".encode())
            os._exit(128 + signum)
        if self.requested:
            note = f"{name} again: still stopping; kill -9 {os.getpid()} ends the run now, without a checkpoint"
        else:
            self.requested = name
            note = f"{name}: stopping with a checkpoint after the current chunk or compile"
        # os.write, not print: the handler may run while the main thread is inside a print to stderr.
        os.write(2, f"{end_progress_line}{note}\n".encode())

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            # When the process ends after the run, only the interpreter's shutdown (jax's clean-up among it) is
            # left: a signal then would interrupt it with tracebacks, not stop sooner.
            signal.signal(sig, signal.SIG_IGN if self.process_ends_after else handler)


def stop_reason(run, update: int, env_steps: int, seconds: float, student_updates: int) -> str | None:
    """Why training should stop now, if it should (`run`: a common.config.RunConfig): --total-updates,
    --total-student-updates (`student_updates`: the fewest any seed has taken), --total-env-steps or
    --train-seconds."""
    if update >= run.total_updates:
        return f"reached --total-updates {run.total_updates}"
    if run.total_student_updates is not None and student_updates >= run.total_student_updates:
        return f"reached --total-student-updates {run.total_student_updates}"
    if run.total_env_steps is not None and env_steps >= run.total_env_steps:
        return f"reached --total-env-steps {run.total_env_steps}"
    if run.train_seconds is not None and seconds >= run.train_seconds:
        return f"reached --train-seconds {run.train_seconds}"
    return None


def chunk_rows(
    metrics: dict,
    update: int,
    env_steps: int,
    wall_time: float,
    env_steps_per_s: float,
    student_updates,
    seeds_per_point: int | None = None,
) -> list[dict]:
    """Rows for logs.csv from a chunk's metrics ({key: [entries, num_updates]}): per seed, the mean of each metric over
    the chunk's updates (NaN where no episode finished), and its student updates so far. In a sweep
    (`seeds_per_point`) entry e is point e // seeds_per_point's seed e % seeds_per_point, and rows name both."""
    entries = next(iter(metrics.values())).shape[0]
    rows = []
    for entry in range(entries):
        where = {"seed": entry}
        if seeds_per_point is not None:
            where = {"point": entry // seeds_per_point, "seed": entry % seeds_per_point}
        row = {
            **where,
            "update": update,
            "student_updates": int(student_updates[entry]),
            "env_steps": env_steps,
            "wall_time": round(wall_time, 2),
            "sps": round(env_steps_per_s),
        }
        row.update({key: nanmean(values[entry]) for key, values in metrics.items()})
        rows.append(row)
    return rows


def nanmean(values) -> float:
    """Mean ignoring NaN; NaN (without a warning) when nothing is left."""
    values = np.asarray(values, dtype=np.float64)
    kept = values[~np.isnan(values)]
    return float(kept.mean()) if kept.size else float("nan")


class RunLog:
    """Everything a log step writes: logs.csv, wandb (with --track), the progress line and, after an evaluation,
    its results on a line of their own."""

    def __init__(
        self, config, run_dir: Path, columns: list[str], start_update: int, headline: tuple[str, ...], previous
    ):
        fixed = [*(["point"] if config.run.sweep else []), "seed", "update", "student_updates", "env_steps"]
        fixed += ["wall_time", "sps"]
        self.csv = CsvLog(run_dir / "logs.csv", [*fixed, *columns], previous)
        self.wandb = WandbLogger(config, run_dir) if config.run.track else None
        self.progress = Progress(config.run.total_updates, start_update)
        self.headline = headline
        self.eval_episodes = config.run.eval_episodes
        self.latest = {}

    def write(self, rows: list[dict], env_steps_per_s: float) -> None:
        self.csv.write(rows)
        if self.wandb:
            self.wandb.log(rows)
        self.latest = {key: nanmean([row.get(key, float("nan")) for row in rows]) for key in self.headline}
        update = rows[0]["update"]
        evaluated = [key for key in rows[0] if key.startswith("eval/")]  # only rows of an evaluation have these
        evaluated.sort(key=lambda key: not key.startswith("eval/solve_rate/"))  # the headline first, mazes in order
        if evaluated:
            results = " | ".join(f"{key} {nanmean([row[key] for row in rows]):.3f}" for key in evaluated)
            # A few episodes swing widely from one evaluation to the next: the line says how few, and where to look.
            averaged = f"{len(rows)} seeds"
            if "point" in rows[0]:
                averaged = f"{rows[-1]['point'] + 1} points x {rows[-1]['seed'] + 1} seeds"
            sample = f"{self.eval_episodes} episodes a maze and seed, mean of {averaged}"
            self.progress.keep(
                f"update {update}, held-out evaluation ({sample}; common.evaluate for a larger sample): {results}"
            )
        self.progress.show(update, env_steps_per_s, self.latest)

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
        sweep = parse_sweep(run.sweep, run.sweep_zip)
        # A sweep's point is part of each run's config, so wandb's sweep views (parallel coordinates, grouping by a
        # value) read the swept values like any hyperparameter.
        points = [None] if sweep is None else list(range(len(sweep.points)))
        self.num_seeds = run.num_seeds
        self.runs = [
            wandb.init(
                project=run.wandb_project,
                entity=run.wandb_entity,
                group=run.run_name,
                name=f"{run.run_name}-seed{seed}" if point is None else f"{run.run_name}-point{point}-seed{seed}",
                config={
                    **flags_of(config),
                    "seed_index": seed,
                    **({} if point is None else {"point": point, **sweep.points[point]}),
                },
                dir=str(run_dir),
                reinit="create_new",
            )
            for point in points
            for seed in range(run.num_seeds)
        ]

    def log(self, rows: list[dict]) -> None:
        for row in rows:  # a sweep's point that has stopped has no rows
            run = self.runs[row.get("point", 0) * self.num_seeds + row["seed"]]
            run.log(
                {key: value for key, value in row.items() if key not in ("seed", "point") and not _is_nan(value)},
                step=int(row["update"]),
            )

    def close(self) -> None:
        for run in self.runs:
            run.finish()


def _is_nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)
