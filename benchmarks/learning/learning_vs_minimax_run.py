"""The run stage of benchmarks/learning/learning_vs_minimax.py: both sides' training commands and the processes that run
them, `--jobs` at once. cleanued resumes an interrupted run; minimax starts over and is stopped at the first
archive where it has played `--rollouts` rollouts. Every finished process is recorded in jobs.jsonl.
"""

import io
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.learning.learning_vs_minimax_config import (
    LOG_INTERVAL,
    REPO_ROOT,
    Args,
    CleanuedRun,
    cleanued_run_settings,
    cleanued_runs,
    cli_flags,
    same,
)
from benchmarks.learning.learning_vs_minimax_outputs import (
    append_jsonl,
    cleanued_done,
    cleanued_run_dir,
    experiment_path,
    experiment_settings,
    has_training_logs,
    minimax_archive,
    minimax_archive_ticks,
    minimax_dir,
    minimax_done,
    minimax_rollouts,
    minimax_seeds,
    minimax_xpid,
    read_minimax_log,
    stop_tick,
)
from common import checkpoint as checkpoints
from common.config import read_saved_config
from common.errors import ConfigError


def cleanued_command(args: Args, method: str, run: CleanuedRun, settings: dict) -> list[str]:
    flags = cleanued_run_settings(args, method, run)
    return [sys.executable, f"algos/{method}.py", *cli_flags(flags), *cli_flags(settings)]


def minimax_command(args: Args, method: str, seed: int, settings: dict, initial_only: bool = False) -> list[str]:
    """minimax's training command for one seed; `initial_only`: the run that only writes its initial parameters
    (checkpoint_0.pkl, before any update) under init/, for --same-init."""
    run = {
        "seed": seed,
        "xpid": minimax_xpid(method, seed),
        "log_dir": args.out / ("init" if initial_only else "minimax"),
        "log_interval": 1,
        "verbose": False,
        "from_last_checkpoint": False,  # a rerun never resumes: the checkpoint lacks the PLR buffer
        "checkpoint_interval": minimax_archive_ticks(args, method),
        "archive_interval": minimax_archive_ticks(args, method),
        "archive_init_checkpoint": False,
        # Never more gradient updates than rollouts; DR and PAIRED (one update per tick) stop here themselves.
        "n_total_updates": args.rollouts,
        "test_env_names": None,  # no in-training evaluation: the evaluate stage evaluates both sides alike
        "test_interval": 0,
    }
    if initial_only:  # minimax initialises from --seed alone, so these are the parameters its training run starts from
        run |= {"archive_init_checkpoint": True, "n_total_updates": 0}
    elif args.init_from:  # TRAINER's own flags: seed index i takes item i of stacked parameters
        run |= {"init_params": args.init_from.resolve(), "init_params_index": seed - args.first_seed - 1}
    flags = [f"--{key}={value}" for key, value in {**settings, **run}.items() if value is not None]
    return [str(args.minimax_venv / "bin" / "python"), str(REPO_ROOT / "benchmarks" / "learning" / TRAINER), *flags]


def minimax_flags(command: str) -> list[str]:
    """The flags of a minimax training command line that define its run, whichever program ran it (runs made before
    the harness ran minimax through TRAINER ran `python -m minimax.train` with the same flags) and wherever its log
    dir and its --init-from file were (a run copied from another --out of the same experiment counts; experiment.json
    holds the file's digest)."""
    return [
        item
        for item in shlex.split(command)
        if item.startswith("--") and not item.startswith(("--log_dir=", "--init_params="))
    ]


TRAINER = "minimax_train.py"
"""minimax.train as it is, logging more of its buffer (the first-divergence statistics)."""
CONVERTER = "minimax_checkpoint_params.py"
"""The worker, run in minimax's venv, that turns its checkpoints into cleanued's parameter tree."""
ENVIRONMENT_SET = {"WANDB_MODE": "disabled", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
"""Set for every training process: no wandb; GPU memory on demand, as several processes may share one GPU."""
MINIMAX_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH", "OMP_NUM_THREADS")
MINIMAX_ENVIRONMENT_PREFIXES = ("JAX_", "XLA_", "CUDA_", "NVIDIA_", "TF_CPP_")


def job_environment(side: str) -> dict:
    """The environment of a training process. minimax writes its whole environment into meta.json, so it gets
    only what running needs, never the caller's tokens or credentials."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if side == "cleanued" or key in MINIMAX_ENVIRONMENT or key.startswith(MINIMAX_ENVIRONMENT_PREFIXES)
    }
    return environment | ENVIRONMENT_SET


@dataclass
class Job:
    side: str
    method: str
    seeds: tuple[int, ...]  # cleanued: the seed indices it trains; minimax: its one --seed
    command: list[str]
    log: Path
    run_name: str | None = None  # cleanued: its run folder under runs/
    process: subprocess.Popen | None = None
    started: float = 0.0
    stop: int | None = None  # minimax: the tick it is stopped at
    terminated: float | None = None  # minimax: when it was sent SIGTERM

    @property
    def name(self) -> str:
        return self.run_name if self.side == "cleanued" else f"{self.side}_{self.method}_{self.seeds[0]}"

    def done(self, args: Args) -> bool:
        if self.side == "cleanued":
            return cleanued_done(args, self.run_name)
        return minimax_done(args, self.method, self.seeds[0])


def prepare_job(args: Args, job: Job) -> None:
    """Make the job start from where it can: cleanued resumes its newest checkpoint; minimax starts over."""
    if job.side == "cleanued":
        run_dir = cleanued_run_dir(args.out, job.run_name)
        if checkpoints.list_checkpoints(run_dir / "checkpoints"):
            job.command = [*job.command, "--resume"]
        elif run_dir.exists():
            job.command = [*job.command, "--overwrite"]  # a folder without a checkpoint holds nothing to keep
        return
    directory = minimax_dir(args.out, job.method, job.seeds[0])
    if directory.exists():
        if not (directory / "meta.json").is_file() and any(directory.iterdir()):
            raise ConfigError(f"{directory} is not a minimax log dir of this benchmark; refusing to delete it")
        shutil.rmtree(directory)


def signal_job(job: Job, signum: int) -> None:
    """Signal a child that `reap` has not reaped yet (so its pid is still its own). Not Popen.send_signal: that
    polls first and may reap the child, losing its CPU time."""
    try:
        os.kill(job.process.pid, signum)
    except ProcessLookupError:
        pass


def reap(process: subprocess.Popen) -> float | None:
    """CPU seconds (user + system) of a finished child, reaping it; None while it runs."""
    pid, status, usage = os.wait4(process.pid, os.WNOHANG)
    if pid == 0:
        return None
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


MINIMAX_GRACE_SECONDS = 60
"""minimax has no SIGTERM handler and dies at once; this only covers a process stuck in native code."""
ARCHIVE_SETTLE_SECONDS = 0.5
"""minimax copies an archive (0.8 MB, PAIRED's 83 MB with the teacher) without pausing this long, so a size that
holds still over it is a finished copy; the conversion then loads every archive it uses, which a torn one fails."""


def poll_minimax(args: Args, job: Job) -> None:
    """Stop a minimax run once the archive of its stop tick is completely written (its size holds still)."""
    directory = minimax_dir(args.out, job.method, job.seeds[0])
    if job.stop is None:
        rows = read_minimax_log(directory / "logs.csv")
        job.stop = stop_tick(rows, job.method, args.rollouts, minimax_archive_ticks(args, job.method))
    if job.stop is None:
        return
    if job.terminated is not None:
        if time.time() - job.terminated > MINIMAX_GRACE_SECONDS:
            signal_job(job, signal.SIGKILL)
        return
    archive = minimax_archive(directory, job.stop)
    sizes = []
    for _ in range(2):
        sizes.append(archive.stat().st_size if archive.is_file() else -1)
        time.sleep(ARCHIVE_SETTLE_SECONDS)
    if sizes[0] > 0 and sizes[0] == sizes[1]:
        signal_job(job, signal.SIGTERM)
        job.terminated = time.time()


def finish_job(args: Args, job: Job, cpu_s: float) -> dict:
    """The job's record for jobs.jsonl; a minimax job also gets its stopped.json."""
    record = {"job": job.name, "side": job.side, "method": job.method, "seeds": list(job.seeds)}
    environment = job_environment(job.side)
    kept = "all of the caller's" if job.side == "cleanued" else sorted(set(environment) - set(ENVIRONMENT_SET))
    record |= {"command": shlex.join(job.command), "cwd": str(REPO_ROOT), "log": str(job.log)}
    record |= {"environment_set": ENVIRONMENT_SET, "environment_kept": kept}
    record |= {"returncode": job.process.returncode, "wall_s": round(time.time() - job.started, 1)}
    record |= {"cpu_s": round(cpu_s, 1), "finished": time.strftime("%Y-%m-%d %H:%M:%S")}
    if job.side == "cleanued":
        record["ok"] = job.done(args)
        return record
    directory = minimax_dir(args.out, job.method, job.seeds[0])
    rows = read_minimax_log(directory / "logs.csv")
    tick = job.stop or stop_tick(rows, job.method, args.rollouts, minimax_archive_ticks(args, job.method))
    row = next((row for row in rows if tick is not None and int(row["_tick"]) == tick), None)
    record["ok"] = row is not None and minimax_archive(directory, tick).is_file()
    if record["ok"]:
        n_updates = int(row["n_updates"])
        stopped = {"target": args.rollouts, "stop_tick": tick, "n_updates": n_updates}
        stopped |= {"rollouts": minimax_rollouts(job.method, tick, n_updates), **record}
        checkpoints.write_atomic(directory / "stopped.json", (json.dumps(stopped, indent=1) + "\n").encode())
        record |= {"stop_tick": tick, "n_updates": n_updates, "rollouts": stopped["rollouts"]}
    return record


def make_jobs(args: Args, settings: dict) -> list[Job]:
    jobs = []
    for method in args.methods:
        for cleanued_run in cleanued_runs(args, method):
            command = cleanued_command(args, method, cleanued_run, settings[method]["cleanued"])
            log = args.out / "logs" / f"{cleanued_run.name}.log"
            jobs.append(Job("cleanued", method, cleanued_run.seeds, command, log, run_name=cleanued_run.name))
        for seed in minimax_seeds(args):
            command = minimax_command(args, method, seed, settings[method]["minimax"])
            log = args.out / "logs" / f"minimax_{method}_{seed}.log"
            jobs.append(Job("minimax", method, (seed,), command, log))
    return jobs


def check_existing_runs(args: Args, settings: dict) -> None:
    """Refuse an --out whose runs or evaluations were made with other settings or seeds (resuming or reusing them
    would mix two configurations), and a report of an --out that holds no training logs (a kept results folder:
    its report would lose the curriculum and the counts)."""
    saved_experiment = experiment_path(args.out)
    if saved_experiment.is_file():
        saved, now = json.loads(saved_experiment.read_text()), experiment_settings(args)
        differing = [
            f"{key}: saved {saved.get(key)!r}, now {now.get(key)!r}"
            for key in sorted(saved.keys() | now.keys())
            if saved.get(key) != now.get(key)
        ]
        if differing:
            raise ConfigError(f"{args.out} holds another experiment ({'; '.join(differing)}); use another --out")
    for method in args.methods:
        for seed in minimax_seeds(args):
            stopped = minimax_dir(args.out, method, seed) / "stopped.json"
            command = shlex.join(minimax_command(args, method, seed, settings[method]["minimax"]))
            if minimax_done(args, method, seed) and minimax_flags(json.loads(stopped.read_text())["command"]) != (
                minimax_flags(command)
            ):
                raise ConfigError(f"{stopped.parent} was trained by another command; use another --out")
        table = settings[method]["table"]
        used = {row["cleanued_flag"]: row["cleanued_used"] for row in table if row["kind"] != "fixed"}
        for cleanued_run in cleanued_runs(args, method):
            run_dir = cleanued_run_dir(args.out, cleanued_run.name)
            if not (run_dir / "config.json").is_file():
                continue
            saved = read_saved_config(run_dir)["config"]
            expected = {**used, "num_seeds": len(cleanued_run.seeds), "seed": cleanued_run.seed}
            expected |= {"archive_interval": args.checkpoint_every, "log_interval": LOG_INTERVAL}
            differing = [
                f"{key}: saved {saved.get(key)!r}, now {value!r}"
                for key, value in expected.items()
                if not same(saved.get(key), value)
            ]
            if differing:
                raise ConfigError(
                    f"{run_dir} was trained with other settings ({'; '.join(differing)}); use another --out"
                )
    if args.stage == "report" and not has_training_logs(args):
        raise ConfigError(f"{args.out} holds no training logs of {' '.join(args.methods)}: nothing to report from")


def prepare_initial_parameters(args: Args, method: str, settings: dict) -> None:
    """--same-init: minimax's initial parameters of every seed (an initial-only run per seed, `--jobs` at once, each
    converted to cleanued's tree), stacked in seed order into the file cleanued's --init-from reads."""
    target = args.out / "init" / f"minimax_{method}.npz"
    if target.is_file():
        return
    seeds = list(minimax_seeds(args))
    commands = [minimax_command(args, method, seed, settings[method]["minimax"], initial_only=True) for seed in seeds]
    print(f"run: minimax's initial parameters of {len(seeds)} seeds for --same-init", flush=True)
    for seed in seeds:
        shutil.rmtree(args.out / "init" / minimax_xpid(method, seed), ignore_errors=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = list(
            pool.map(
                lambda command: subprocess.run(
                    command, cwd=REPO_ROOT, env=job_environment("minimax"), capture_output=True, text=True
                ),
                commands,
            )
        )
    for seed, result in zip(seeds, runs, strict=True):
        if result.returncode != 0:
            raise SystemExit(f"run: minimax's initial-only run of seed {seed} failed: {result.stderr.strip()[-500:]}")
    # Where initial_parameters_path looks for one seed's (--cleanued-per-seed).
    converted = [args.out / "init" / minimax_xpid(method, seed) / "initial.npz" for seed in seeds]
    pairs = []
    for seed, path in zip(seeds, converted, strict=True):
        pairs += [str(minimax_archive(args.out / "init" / minimax_xpid(method, seed), 0)), str(path)]
    worker = [str(args.minimax_venv / "bin" / "python"), str(REPO_ROOT / "benchmarks" / "learning" / CONVERTER)]
    subprocess.run([*worker, "convert", *pairs], check=True, env=job_environment("minimax"), stdout=subprocess.DEVNULL)
    stacked = {}
    for path in converted:
        with np.load(path) as data:
            for key in data.files:
                if key.startswith("params/"):
                    stacked.setdefault(key, []).append(data[key])
    buffer = io.BytesIO()
    np.savez(buffer, **{key: np.stack(values) for key, values in stacked.items()}, minimax_seeds=np.array(seeds))
    checkpoints.write_atomic(target, buffer.getvalue())


def run_stage(args: Args, settings: dict) -> None:
    pending = [job for job in make_jobs(args, settings) if not job.done(args)]
    if args.same_init:
        for method in {job.method for job in pending if job.side == "cleanued"}:
            prepare_initial_parameters(args, method, settings)
    print(f"run: {len(pending)} training processes to run, {args.jobs} at once", flush=True)
    running, failed = [], []
    # A SIGTERM to this process (not only Ctrl+C, which the children get too) stops the children below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        while pending or running:
            while pending and len(running) < args.jobs:
                job = pending.pop(0)
                prepare_job(args, job)
                job.log.parent.mkdir(parents=True, exist_ok=True)
                print(f"start {job.name}: {shlex.join(job.command)}", flush=True)
                with open(job.log, "a") as log:  # a resumed cleanued run keeps its earlier output
                    log.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(job.command)}\n")
                    log.flush()
                    job.process = subprocess.Popen(
                        job.command, cwd=REPO_ROOT, env=job_environment(job.side), stdout=log, stderr=subprocess.STDOUT
                    )
                job.started = time.time()
                running.append(job)
            time.sleep(args.poll_seconds)
            for job in list(running):
                if job.side == "minimax" and job.process.returncode is None:
                    poll_minimax(args, job)
                cpu_s = reap(job.process)
                if cpu_s is None:
                    continue
                running.remove(job)
                record = finish_job(args, job, cpu_s)
                append_jsonl(args.out / "jobs.jsonl", record)
                state = "done" if record["ok"] else f"FAILED (exit {record['returncode']}; see {job.log})"
                print(f"{state}: {job.name} in {record['wall_s']:.0f} s wall, {record['cpu_s']:.0f} s CPU", flush=True)
                if not record["ok"]:
                    failed.append(job.name)
    finally:
        for job in running:  # interrupted: cleanued saves a checkpoint on SIGTERM, so a rerun resumes it
            if job.process.returncode is None:
                signal_job(job, signal.SIGTERM)
        for job in running:
            job.process.wait()
    if failed:
        raise SystemExit(f"run: {len(failed)} jobs failed: {', '.join(failed)}")
