"""The run loop every algos/ script shares: it drives a script's jitted training functions chunk by chunk.

A script ends with `driver.main(Config, make_train, __doc__, __file__, HEADLINE_METRICS)`. `run` then
prepares the run folder (new, --resume or --overwrite), restores the newest checkpoint, compiles one
chunk of `--log-interval` updates, and repeats: step a chunk, check that losses and parameters are finite,
write logs.csv / wandb / the progress line, evaluate and take pictures when due, checkpoint, and stop on
--total-updates, --total-student-updates, --total-env-steps, --train-seconds, Ctrl+C or SIGTERM. In a
multi-host run every process runs the same computations, process 0's stop decisions are broadcast, and
only process 0 writes files.

Periodic work (evaluations, pictures, checkpoints, archives) happens when a chunk ends on a multiple of its
interval, and every interval and --total-updates is a multiple of --log-interval. So a resume must start at a
multiple of --log-interval too (otherwise it is refused before compiling, naming the values that work), and a
resume that a stop criterion already ends trains nothing.

What the driver needs from a script (`make_train`'s `common.contract.over_seeds`, a few declared values on its
`Config`) is written down in common/contract.py and checked before anything compiles; `contract.whole_run` is the
same schedule as one pure function, `BatchedOverSeeds.train`.
"""

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

from common.checkpoint import Checkpoints, remedy, sweep_temporary_files
from common.config import check_resumable, flags_of, log_intervals_resuming_at, parse_command_line, summary
from common.contract import FINITE_METRIC, BatchedOverSeeds, check_config, check_health_metric
from common.devices import check_compiled_fits, check_state_fits, initialize_distributed
from common.errors import ConfigError
from common.runs import (
    RunLog,
    StopSignal,
    chunk_rows,
    compile_timed,
    holds_a_run,
    one_line_errors,
    open_run_folder,
    read_log,
    record_config,
    remove_unstarted,
    start_run,
    stop_reason,
)
from common.sweep import run_functions, stopped_entries
from envs.render import render_grid, save_png


def main(config_class, make_train: Callable, docstring: str, script_file: str, headline: tuple[str, ...]) -> None:
    """A script's command line: parse the flags (on --resume, from the saved config) and `run` them, reporting
    bad input as one `error:` line with exit status 2."""
    script = f"algos/{Path(script_file).name}"
    with one_line_errors():
        config = parse_command_line(config_class, summary(docstring), script=script)
        run(config, make_train, script, headline, process_ends_after=True)


def run(config, make_train: Callable, script: str, headline: tuple[str, ...], process_ends_after: bool = False) -> Path:
    """Train `config` with the functions of `make_train(config)` (a BatchedOverSeeds), writing the run folder
    as process 0, which holds the folder's lock until this returns or the process ends; `headline` names the
    metrics on the progress line; `process_ends_after` (a script's command line) leaves Ctrl+C and SIGTERM
    ignored on return and ends the process with status 128 + the signal's number (130 for Ctrl+C, 143 for
    SIGTERM) when one stopped the run, so a wrapper tells a stopped run from a finished one (0). Returns the run
    folder."""
    check_config(config, script)
    settings = config.run
    # Ctrl+C and SIGTERM are caught from before the run folder is opened: a new run stopped at any moment leaves a
    # checkpoint (`train` saves its update-0 state), a resume or --overwrite stopped before its first write leaves
    # the folder as it was.
    with StopSignal(process_ends_after) as stop_signal:
        initialize_distributed(settings.devices)
        functions = run_functions(config, make_train, script)
        runner_shapes = jax.eval_shape(functions.init, jax.random.split(jax.random.key(0), settings.num_seeds))
        check_health_metric(functions, runner_shapes, script)
        check_state_fits(runner_shapes, functions.placement)
        if not functions.placement.is_main_process:  # in a multi-host run only process 0 writes files
            run_dir = Path(settings.runs_dir) / settings.run_name
            return train(config, functions, headline, run_dir, stop_signal, script)
        folder = open_run_folder(config, script)
        try:
            run_dir = train(config, functions, headline, folder.path, stop_signal, script)
        except BaseException:
            if not settings.resume:  # a new run refused before its first write leaves no folder it made
                remove_unstarted(folder)
            raise
        finally:
            os.close(folder.lock)
    if process_ends_after and stop_signal.stopped_run:  # stopped before its end, checkpoint saved: --resume continues
        raise SystemExit(128 + signal.Signals[stop_signal.requested or "SIGTERM"])
    return run_dir


def train(
    config,
    functions: BatchedOverSeeds,
    headline: tuple[str, ...],
    run_dir: Path,
    stop_signal,
    script: str,
) -> Path:
    """The body of `run`, once the run folder is held (by process 0, the only one that writes). A new run's first
    write (`start_run`: --overwrite's deletion, config.json) waits until its programs are compiled and fit."""
    settings, placement = config.run, functions.placement
    writer = placement.is_main_process
    seeds_per_point = settings.num_seeds if settings.sweep else None
    init = jax.jit(functions.init)
    rngs = jax.random.split(jax.random.key(settings.seed), settings.num_seeds)
    checkpoints = Checkpoints(run_dir, settings.keep_checkpoints, settings.archive_interval, flags_of(config))
    previous_log, wall_offset = None, 0.0
    if settings.resume:
        runner, update, saved, path = checkpoints.restore(jax.eval_shape(init, rngs))
        check_resumable(saved, config, f"from {path}, a checkpoint saved with another config")
        if writer:  # only once the checkpoint is known to be this run's: a refused resume writes nothing
            checkpoints.archive_due()
        env_steps = update * config.env_steps_per_update
        student_updates = int(np.min(functions.student_updates(runner)))
        reached = stop_reason(settings, update, env_steps, 0.0, student_updates)
        if reached:
            print(f"{run_dir} is at update {update} and has {reached}: nothing to train", file=sys.stderr)
            return run_dir
        check_aligned(config, update, run_dir)
        if writer:
            previous_log = read_log(run_dir / "logs.csv", update)
            wall_offset = float(previous_log.rows[-1]["wall_time"]) if previous_log.rows else 0.0
            for warning in previous_log.warnings:
                print(f"warning: {warning}", file=sys.stderr)
            sweep_temporary_files(run_dir)  # this process holds the lock: no other write can be under way
        print(f"resumed {run_dir} at update {update}", file=sys.stderr)
    else:
        runner, update = None, 0  # made once its programs are known to fit: the state may be most of the memory
    with errors_as_one_line(run_dir, checkpoints):
        # Every program is compiled from the state's shapes, so its memory is checked before a new run's state exists.
        runner_shapes = jax.eval_shape(init, rngs)
        make_state = None if runner is not None else init.lower(rngs).compile()
        # On a mesh the state is split once made, and its share per device is what check_state_fits counted.
        if make_state is not None and placement.mesh is None:
            check_compiled_fits("initial state", make_state, placement)
        stopped_before_compiling = placement.agree(bool(stop_signal.requested))
        evaluate, eval_keys = None, []
        if not stopped_before_compiling:
            print(f"compiling: a chunk of {settings.log_interval} updates, evaluation and pictures...", file=sys.stderr)
            step_chunk = compile_timed("training chunk", placement.jit(functions.step, donate=True), runner_shapes)
            check_compiled_fits("training chunk", step_chunk, placement)
            if settings.eval_interval:
                evaluate = compile_timed("evaluation", placement.jit(functions.evaluate), runner_shapes)
                check_compiled_fits("evaluation", evaluate, placement)
                eval_keys = list(evaluate.out_info)
        # Nothing of this start is written yet: a stop asked for by now leaves a resumed run, or the old run of an
        # --overwrite, as it was.
        keeps_folder = settings.resume or (settings.overwrite and writer and holds_a_run(run_dir))
        if placement.agree(bool(stop_signal.requested) and keeps_folder):
            stop_signal.stopped_run = True
            if writer:
                reason = f"stopped by {stop_signal.requested or 'process 0'}"
                print(f"{reason} before this start wrote its config; {run_dir} is as it was", file=sys.stderr)
            return run_dir
        if writer:  # only now that the run can train: --overwrite deletes the old run here
            if settings.resume:
                record_config(run_dir, config, script)
            else:
                start_run(run_dir, config, script)
        if stopped_before_compiling:  # a new run: its update-0 state, so --resume continues
            placement.save(checkpoints, placement.place(make_state(rngs)), update)
            stop_signal.stopped_run = True
            if writer:
                reason = f"stopped by {stop_signal.requested or 'process 0'}"
                print(f"{reason} before compiling; {run_dir} at update {update}", file=sys.stderr)
            return run_dir
        runner = placement.place(make_state(rngs) if runner is None else runner)
        training_levels = placement.jit(functions.levels)
        metric_keys = [key for key in step_chunk.out_info[1] if key != FINITE_METRIC]
        headline = (*headline, *(key for key in eval_keys if "solve_rate" in key))
        log = RunLog(config, run_dir, metric_keys + eval_keys, update, headline, previous_log) if writer else None
        saved_update = update if settings.resume else None
        started = time.perf_counter()
        student_updates = placement.to_host(functions.student_updates(runner))
        while True:
            elapsed, env_steps = time.perf_counter() - started, update * config.env_steps_per_update
            reason = stop_reason(settings, update, env_steps, elapsed, int(student_updates.min()))
            if stop_signal.requested:
                reason = f"stopped by {stop_signal.requested}"
                stop_signal.stopped_run = True
            # Every process must run the same computations, so process 0's stop decisions are broadcast.
            if placement.agree(reason is not None):
                break
            chunk_started = time.perf_counter()
            stop_signal.chunk_running = True
            next_runner, metrics = step_chunk(runner)  # consumes `runner`: a failed chunk keeps the last checkpoint
            metrics = placement.to_host(metrics)  # blocks: the timing below is true
            stop_signal.chunk_running = False
            finite = metrics.pop(FINITE_METRIC).all(axis=1)  # [entries]: seeds, or points x seeds in a sweep
            chunk_env_steps = settings.log_interval * config.env_steps_per_update * len(finite)
            env_steps_per_s = chunk_env_steps / (time.perf_counter() - chunk_started)
            if not finite.all():
                updates, entries = f"{update + 1}-{update + settings.log_interval}", np.flatnonzero(~finite).tolist()
                where = f"seeds {entries}"
                if seeds_per_point is not None:
                    where = "point/seed " + ", ".join(f"{e // seeds_per_point}/{e % seeds_per_point}" for e in entries)
                raise SystemExit(
                    f"error: non-finite loss or parameters in updates {updates} ({where}); "
                    f"last good checkpoint: {checkpoints.newest() or 'none'}"
                )
            stopped = np.zeros(len(finite), bool)  # a sweep's points that had reached their budget: no rows
            if seeds_per_point is not None and settings.total_student_updates is not None:
                stopped = stopped_entries(student_updates, settings.total_student_updates, seeds_per_point)
            runner, update = next_runner, update + settings.log_interval
            student_updates = placement.to_host(functions.student_updates(runner))
            wall_time = wall_offset + time.perf_counter() - started
            env_steps = update * config.env_steps_per_update
            rows = chunk_rows(metrics, update, env_steps, wall_time, env_steps_per_s, student_updates, seeds_per_point)
            if settings.eval_interval and update % settings.eval_interval == 0:
                eval_metrics = placement.to_host(evaluate(runner))
                for seed, row in enumerate(rows):
                    row.update({key: float(values[seed]) for key, values in eval_metrics.items()})
            if settings.screenshot_interval and update % settings.screenshot_interval == 0:
                levels, numbers = jax.tree.map(lambda x: x[0], placement.to_host(training_levels(runner)))
                if writer:
                    picture = render_grid(levels, labels=level_labels(numbers) if numbers else None)
                    save_png(picture, run_dir / "images" / f"levels_update_{update:08d}.png")
            if writer:
                log.write([row for row, done in zip(rows, stopped, strict=True) if not done], env_steps_per_s)
            stop_requested = placement.agree(bool(stop_signal.requested))
            archive = settings.archive_interval and update % settings.archive_interval == 0
            if update % settings.checkpoint_interval == 0 or archive or stop_requested:
                placement.save(checkpoints, runner, update)
                saved_update = update
            if stop_requested:
                reason = f"stopped by {stop_signal.requested or 'process 0'}"
                stop_signal.stopped_run = True
                break
        if saved_update != update:
            placement.save(checkpoints, runner, update)
    if writer:
        log.close()
        print(f"{reason}; {run_dir} at update {update}", file=sys.stderr)
    return run_dir


def check_aligned(config, update: int, run_dir: Path) -> None:
    """Refuse to resume at an `update` that is not a multiple of --log-interval: the run's chunks would then
    never end on a multiple of --eval-interval, --checkpoint-interval, --archive-interval or
    --screenshot-interval again, nor on --total-updates (each a multiple of --log-interval)."""
    if update % config.run.log_interval == 0:
        return
    working = log_intervals_resuming_at(config, update)
    shown = ", ".join(str(value) for value in working[:6]) + (", ..." if len(working) > 6 else "")
    if working:
        choice = f"one that divides {update} and fits every interval works: {shown}"
    else:
        choice = f"none that divides {update} fits the intervals as given; change them too"
    raise ConfigError(
        f"cannot resume {run_dir} at update {update} with --log-interval {config.run.log_interval}: its chunks would "
        f"never end on a multiple of the intervals (evaluations, checkpoints, archives, pictures) or at "
        f"--total-updates; {choice}"
    )


def level_labels(numbers: dict) -> list[str]:
    """One label per level from {name: [n]} numbers: 'score 0.12 mutations 3'."""
    count = len(next(iter(numbers.values())))
    return [" ".join(f"{name} {float(values[i]):.3g}" for name, values in numbers.items()) for i in range(count)]


@contextlib.contextmanager
def errors_as_one_line(run_dir: Path, checkpoints: Checkpoints):
    """A failed write (a full disk, a folder gone) becomes one line naming the newest complete checkpoint."""
    try:
        yield
    except OSError as error:
        newest = checkpoints.newest()
        message = f"could not write to {run_dir} ({error.strerror or error})"
        if newest is None:
            message += f"; it has no checkpoint yet: {remedy(error)}, then start over with --overwrite"
        else:
            message += f"; its newest complete checkpoint is {newest}: {remedy(error)}, then --resume"
        raise ConfigError(message) from None
