"""The stages of benchmarks/learning/learning_vs_minimax.py against what they leave under --out, with stand-ins for
the processes they start: the run stage's jobs (fake training processes of a few lines of Python, minimax stubbed
by a process that writes its logs and archives and waits to be stopped), minimax's initial-only runs and converter
(subprocess.run stubbed), and the evaluate stage's players and parameter files. Nothing here trains, compiles a
policy or needs minimax's venv. The tests came out of a hand mutation trial of learning_vs_minimax_run.py,
_evaluate.py and _outputs.py: each names the mutations it was checked against."""

import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from benchmarks.learning import learning_vs_minimax_config as config
from benchmarks.learning import learning_vs_minimax_evaluate as evaluate
from benchmarks.learning import learning_vs_minimax_outputs as outputs
from benchmarks.learning import learning_vs_minimax_run as run
from common import checkpoint as checkpoints
from common.errors import ConfigError


def minimax_log(n_updates: list[int]) -> str:
    """minimax's logs.csv of ticks 1.. with the given cumulative gradient updates."""
    return "# _tick,n_updates\n" + "".join(f"{tick},{n}\n" for tick, n in enumerate(n_updates, start=1))


def command_flags(command: list[str]) -> dict:
    """A minimax training command's --flag=value items as {flag: value}."""
    return dict(item.removeprefix("--").split("=", 1) for item in command[2:])


def test_jsonl_records_append_in_order_and_read_back_after_a_rewrite(tmp_path):
    """append_jsonl makes the folder and adds one line per record after the earlier ones; a file write_jsonl wrote
    ends its last record with a newline, so a record appended later is a line of its own; a blank line reads as
    nothing. Mutation checked by hand: append_jsonl opening for writing, or without its mkdir; write_jsonl joining
    the records without the final newline; read_jsonl parsing blank lines: each fails this test."""
    path = tmp_path / "new" / "records.jsonl"
    first, second, third = {"a": 1}, {"b": [1, 2]}, {"c": "x"}
    outputs.append_jsonl(path, first)
    outputs.append_jsonl(path, second)
    assert outputs.read_jsonl(path) == [first, second]
    outputs.write_jsonl(path, [second, first])
    outputs.append_jsonl(path, third)
    assert outputs.read_jsonl(path) == [second, first, third]
    path.write_text(path.read_text() + "\n \n")
    assert outputs.read_jsonl(path) == [second, first, third]
    assert outputs.read_jsonl(tmp_path / "missing.jsonl") == []


def test_a_run_is_done_at_its_last_grid_point_and_minimax_only_for_this_rollout_target(tmp_path):
    """cleanued's run is done once it has archived --rollouts (not an earlier grid point); minimax's once its
    stopped.json records this --rollouts as its target (a run stopped for a shorter comparison is not). Mutation
    checked by hand: cleanued_done looking for the first grid point's archive, or minimax_done without the target
    check, fails this test."""
    args = config.Args(methods=("dr",), seeds=1, rollouts=20, checkpoint_every=10, out=tmp_path)
    archive = outputs.cleanued_run_dir(tmp_path, "cleanued_dr") / "checkpoints" / "archive"
    archive.mkdir(parents=True)
    checkpoints.checkpoint_path(archive, 10).write_bytes(b"")
    assert not outputs.cleanued_done(args, "cleanued_dr")
    checkpoints.checkpoint_path(archive, 20).write_bytes(b"")
    assert outputs.cleanued_done(args, "cleanued_dr")
    directory = outputs.minimax_dir(tmp_path, "dr", 1)
    assert not outputs.minimax_done(args, "dr", 1)
    directory.mkdir(parents=True)
    (directory / "stopped.json").write_text(json.dumps({"target": 20, "stop_tick": 20}))
    assert outputs.minimax_done(args, "dr", 1)
    assert not outputs.minimax_done(dataclasses.replace(args, rollouts=40), "dr", 1)


def test_every_setting_that_defines_the_runs_is_in_the_experiment_record_and_nothing_else(tmp_path):
    """Changing any flag the runs depend on changes experiment.json's record in that field alone; the evaluation's
    flags, --jobs and added methods do not change it; the flags added later are left out at their defaults, as in
    the folders written before them. Mutation checked by hand: lstm_size or accel_archive_ticks dropped from
    EXPERIMENT_FIELDS, or cleanued_per_seed recorded at its default, fails this test."""
    base = config.Args(methods=("dr",))
    record = outputs.experiment_settings(base)
    assert set(record) == {
        "seeds", "rollouts", "maze_size", "n_walls", "max_steps", "num_envs", "num_steps", "lstm_size",
        "match_deviations", "checkpoint_every", "accel_archive_ticks",
    }  # fmt: skip
    defining = {"seeds": 3, "rollouts": 1200, "maze_size": 9, "n_walls": 10, "max_steps": 32, "num_envs": 16}
    defining |= {"num_steps": 64, "lstm_size": 32, "match_deviations": False, "checkpoint_every": 200}
    defining |= {"accel_archive_ticks": 20, "diagnostic": ("discount=0.9",), "first_seed": 5, "same_init": True}
    defining |= {"cleanued_per_seed": True}
    for field, value in defining.items():
        changed = outputs.experiment_settings(dataclasses.replace(base, **{field: value}))
        assert {key for key in record.keys() | changed.keys() if record.get(key) != changed.get(key)} == {field}
    others = {"eval_seed": 3, "train_levels": 64, "heldout_episodes": 10, "heldout_mazes": ("Labyrinth",)}
    others |= {"window": 10, "jobs": 4, "methods": ("dr", "plr"), "out": tmp_path, "bootstrap_resamples": 10}
    for field, value in others.items():
        assert outputs.experiment_settings(dataclasses.replace(base, **{field: value})) == record, field


def test_training_logs_of_either_side_and_any_method_count_for_a_report(tmp_path):
    """A report needs some run's logs.csv: one cleanued run's of the second method is enough. Mutation checked by
    hand: has_training_logs looking at minimax's logs alone, or asking every method for logs, fails this test."""
    args = config.Args(methods=("dr", "plr"), seeds=2, rollouts=20, checkpoint_every=10, out=tmp_path)
    assert not outputs.has_training_logs(args)
    log = outputs.cleanued_run_dir(tmp_path, "cleanued_plr") / "logs.csv"
    log.parent.mkdir(parents=True)
    log.write_text("seed,update\n")
    assert outputs.has_training_logs(args)


def test_each_side_writes_its_run_where_the_later_stages_read_it(tmp_path):
    """minimax writes a run into --log_dir/--xpid and cleanued's scripts into --runs-dir/--run-name: those are the
    folders minimax_dir and cleanued_run_dir name, for every seed and either way of running cleanued's seeds.
    Mutation checked by hand: minimax_dir under runs/, or cleanued_run_dir without runs/, fails this test."""
    for per_seed in (False, True):
        args = config.Args(methods=("dr",), seeds=2, first_seed=3, rollouts=20, checkpoint_every=10, out=tmp_path,
                           cleanued_per_seed=per_seed)  # fmt: skip
        for seed in outputs.minimax_seeds(args):
            flags = command_flags(run.minimax_command(args, "dr", seed, {}))
            assert Path(flags["log_dir"]) / flags["xpid"] == outputs.minimax_dir(tmp_path, "dr", seed)
        for cleanued_run in config.cleanued_runs(args, "dr"):
            flags = config.cleanued_run_settings(args, "dr", cleanued_run)
            assert flags["runs_dir"] / flags["run_name"] == outputs.cleanued_run_dir(tmp_path, cleanued_run.name)


def test_minimax_starts_over_and_checkpoints_at_every_tick_it_archives(tmp_path):
    """minimax's safe_checkpoint (minimax/util/checkpoint.py) copies checkpoint_<tick>.pkl only when it checkpoints
    at a tick that is a multiple of --archive_interval, so every archive tick must be a checkpoint tick, or ACCEL
    (archiving every --accel-archive-ticks) would lack the archives its stop and grid are chosen from. A rerun
    starts over (--from_last_checkpoint=False): its checkpoint lacks the PLR buffer. Mutation checked by hand: the
    checkpoint interval at --checkpoint-every, or from_last_checkpoint True, fails this test."""
    args = config.Args(rollouts=600, checkpoint_every=100, accel_archive_ticks=10, out=tmp_path)
    for method in config.METHODS:
        flags = command_flags(run.minimax_command(args, method, 1, {}))
        assert int(flags["archive_interval"]) == outputs.minimax_archive_ticks(args, method)
        assert int(flags["archive_interval"]) % int(flags["checkpoint_interval"]) == 0, method
        assert flags["from_last_checkpoint"] == "False"


def test_every_training_process_runs_without_wandb_and_minimax_keeps_what_running_needs(monkeypatch):
    """ENVIRONMENT_SET holds for both sides whatever the caller's environment says; minimax keeps PATH and HOME.
    Mutation checked by hand: the caller's values winning over ENVIRONMENT_SET, or minimax's environment cut to the
    JAX_/XLA_/... prefixes, fails this test."""
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")
    monkeypatch.setenv("HOME", "/home/someone")
    for side in ("cleanued", "minimax"):
        assert run.job_environment(side) | run.ENVIRONMENT_SET == run.job_environment(side)
        assert run.job_environment(side)["WANDB_MODE"] == "disabled"
    minimax = run.job_environment("minimax")
    assert minimax["HOME"] == "/home/someone" and minimax["PATH"] == os.environ["PATH"]


def test_a_job_resumes_cleanued_starts_minimax_over_and_never_deletes_a_foreign_folder(tmp_path):
    """cleanued: nothing there trains afresh, a folder without a checkpoint is overwritten, one with a checkpoint
    resumed; minimax: its log dir is deleted, an empty folder too, a folder of other files is refused and kept.
    Mutation checked by hand: --overwrite for --resume, no --overwrite, the refusal dropped, or the deletion
    dropped: each fails this test."""
    args = config.Args(methods=("dr",), seeds=1, rollouts=20, checkpoint_every=10, out=tmp_path)

    def prepared(side: str) -> run.Job:
        name = "cleanued_dr" if side == "cleanued" else None
        job = run.Job(side, "dr", (0,) if side == "cleanued" else (1,), ["train"], tmp_path / "log", run_name=name)
        run.prepare_job(args, job)
        return job

    assert prepared("cleanued").command == ["train"]
    run_dir = outputs.cleanued_run_dir(tmp_path, "cleanued_dr")
    run_dir.mkdir(parents=True)
    assert prepared("cleanued").command == ["train", "--overwrite"]
    (run_dir / "checkpoints").mkdir()
    checkpoints.checkpoint_path(run_dir / "checkpoints", 10).write_bytes(b"")
    assert prepared("cleanued").command == ["train", "--resume"]
    directory = outputs.minimax_dir(tmp_path, "dr", 1)
    directory.mkdir(parents=True)
    (directory / "meta.json").write_text("{}")
    (directory / "logs.csv").write_text("# _tick,n_updates\n1,0\n")
    assert prepared("minimax").command == ["train"] and not directory.exists()
    directory.mkdir()
    (directory / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is not a minimax log dir of this benchmark; refusing to delete it"):
        prepared("minimax")
    assert (directory / "notes.txt").read_text() == "mine"
    (directory / "notes.txt").unlink()
    prepared("minimax")
    assert not directory.exists()


def test_minimax_is_stopped_once_its_stop_archive_holds_still_and_killed_after_the_grace(monkeypatch, tmp_path):
    """poll_minimax: no signal while logs.csv is empty, short of the target, or the stop tick's archive is missing
    or still growing (a copy in progress); SIGTERM once it holds still, once; SIGKILL only after the grace.
    Mutation checked by hand: read_minimax_log failing on an empty file, a signal on a missing or a growing archive,
    the time of the SIGTERM not kept, or the grace compared the wrong way: each fails this test."""
    args = config.Args(methods=("dr",), seeds=1, rollouts=20, checkpoint_every=10, out=tmp_path)
    sent = []
    monkeypatch.setattr(run, "signal_job", lambda job, signum: sent.append(signum))
    monkeypatch.setattr(run, "ARCHIVE_SETTLE_SECONDS", 0.0)
    directory = outputs.minimax_dir(tmp_path, "dr", 1)
    directory.mkdir(parents=True)
    job = run.Job("minimax", "dr", (1,), ["train"], tmp_path / "log")
    (directory / "logs.csv").write_text("")  # created, not written yet
    run.poll_minimax(args, job)
    (directory / "logs.csv").write_text(minimax_log([0] * 19))
    run.poll_minimax(args, job)
    assert job.stop is None and sent == []
    (directory / "logs.csv").write_text(minimax_log([0] * 21))  # the log runs ahead of the archive copy
    run.poll_minimax(args, job)
    assert job.stop == 20 and sent == []
    archive = outputs.minimax_archive(directory, 20)
    archive.write_bytes(b"part")

    def copying(seconds):
        with open(archive, "ab") as handle:
            handle.write(b"more")

    with monkeypatch.context() as patch:
        patch.setattr(run, "time", SimpleNamespace(sleep=copying, time=time.time))
        run.poll_minimax(args, job)
    assert sent == []
    run.poll_minimax(args, job)
    assert sent == [signal.SIGTERM] and job.terminated is not None
    run.poll_minimax(args, job)
    assert sent == [signal.SIGTERM]  # within the grace: minimax is dying
    job.terminated -= run.MINIMAX_GRACE_SECONDS + 1
    run.poll_minimax(args, job)
    assert sent == [signal.SIGTERM, signal.SIGKILL]


def test_a_finished_job_records_what_it_reached_and_minimax_its_stop(tmp_path):
    """ACCEL with a replay every second tick: tick t has played t + t // 2 rollouts, so with archives every 2 ticks
    the run of 20 rollouts stops at tick 14 (21 rollouts; tick 12 has played 18). stopped.json records this target,
    the stop tick, its updates and rollouts and the command; the job is ok only with the stop tick's archive; the
    environment it kept excludes what the harness set; cleanued's job is ok only with its last archive, whatever its
    exit status. Mutation checked by hand: the target recorded as the stop tick, the rollouts without the replay
    ticks, the archive check dropped, the set variables counted as kept, the job named without its seed, or a
    cleanued job ok on exit: each fails this test."""
    args = config.Args(methods=("accel",), seeds=1, rollouts=20, checkpoint_every=10, accel_archive_ticks=2,
                       out=tmp_path)  # fmt: skip
    directory = outputs.minimax_dir(tmp_path, "accel", 1)
    directory.mkdir(parents=True)
    (directory / "logs.csv").write_text(minimax_log([tick // 2 for tick in range(1, 17)]))
    job = run.Job("minimax", "accel", (1,), ["python", "train.py", "--seed=1"], tmp_path / "log", started=time.time())
    job.process = SimpleNamespace(returncode=-signal.SIGTERM)
    record = run.finish_job(args, job, 1.5)
    assert record["ok"] is False and not (directory / "stopped.json").exists()  # no archive of tick 14
    outputs.minimax_archive(directory, 14).write_bytes(b"params")
    record = run.finish_job(args, job, 1.5)
    stopped = json.loads((directory / "stopped.json").read_text())
    assert (stopped["target"], stopped["stop_tick"], stopped["n_updates"], stopped["rollouts"]) == (20, 14, 7, 21)
    assert stopped["command"] == "python train.py --seed=1" and outputs.minimax_done(args, "accel", 1)
    assert record["ok"] and (record["stop_tick"], record["rollouts"], record["job"]) == (14, 21, "minimax_accel_1")
    assert (record["returncode"], record["cpu_s"]) == (-signal.SIGTERM, 1.5)
    assert not set(record["environment_kept"]) & set(record["environment_set"])
    assert set(record["environment_kept"]) | set(record["environment_set"]) == set(run.job_environment("minimax"))
    cleanued = run.Job("cleanued", "accel", (0,), ["train"], tmp_path / "log", run_name="cleanued_accel")
    cleanued.process = SimpleNamespace(returncode=0)
    assert run.finish_job(args, cleanued, 0.0)["ok"] is False
    archive = outputs.cleanued_run_dir(tmp_path, "cleanued_accel") / "checkpoints" / "archive"
    archive.mkdir(parents=True)
    checkpoints.checkpoint_path(archive, 20).write_bytes(b"")
    assert run.finish_job(args, cleanued, 0.0)["ok"] is True


def test_reap_gives_a_finished_childs_user_and_system_seconds(monkeypatch):
    """jobs.jsonl's cpu_s is the child's user plus system time, and its exit status becomes the returncode.
    Mutation checked by hand: the system time left out fails this test."""
    process = SimpleNamespace(pid=4321, returncode=None)
    usage = SimpleNamespace(ru_utime=1.5, ru_stime=0.25)
    monkeypatch.setattr(run.os, "wait4", lambda pid, options: (0, 0, usage))
    assert run.reap(process) is None and process.returncode is None
    monkeypatch.setattr(run.os, "wait4", lambda pid, options: (pid, 3 << 8, usage))  # exit status 3
    assert run.reap(process) == 1.75 and process.returncode == 3


def test_an_out_whose_cleanued_run_archived_or_was_seeded_otherwise_is_refused(monkeypatch, tmp_path):
    """--cleanued-per-seed, seed 0's run not started and seed 1's saved: its own flags pass, another archive
    interval or --seed is refused. Mutation checked by hand: the loop stopping at the first run without a
    config.json, or archive_interval or seed left out of the comparison, fails this test."""
    monkeypatch.setattr(config, "minimax_shipped", lambda method, venv: {"lr_anneal_steps": 0})
    args = config.Args(methods=("dr",), seeds=2, rollouts=20, checkpoint_every=10, out=tmp_path,
                       cleanued_per_seed=True)  # fmt: skip
    settings = config.method_settings(args)
    used = {row["cleanued_flag"]: row["cleanued_used"] for row in settings["dr"]["table"] if row["kind"] != "fixed"}
    _, second = config.cleanued_runs(args, "dr")
    run_dir = outputs.cleanued_run_dir(tmp_path, second.name)
    run_dir.mkdir(parents=True)
    saved = used | config.cleanued_run_settings(args, "dr", second)
    for change, message in (
        ({}, None),
        ({"archive_interval": 20}, "archive_interval: saved 20, now 10"),
        ({"seed": 0}, "seed: saved 0, now 1"),
    ):
        saved_config = {"script": "algos/dr.py", "config": saved | change}
        (run_dir / "config.json").write_text(json.dumps(saved_config, default=str))
        if message is None:  # its own flags
            run.check_existing_runs(args, settings)
            continue
        with pytest.raises(ConfigError, match=f"was trained with other settings \\({message}\\)"):
            run.check_existing_runs(args, settings)


def test_a_minimax_run_whose_start_file_was_elsewhere_is_still_the_same_run(monkeypatch, tmp_path):
    """--init-from: a run copied from another --out has its --init_params path there (experiment.json holds the
    file's digest), so that path does not make it another run; its --init_params_index does. Mutation checked by
    hand: minimax_flags keeping --init_params fails this test."""
    monkeypatch.setattr(config, "minimax_shipped", lambda method, venv: {"lr_anneal_steps": 0})
    start = tmp_path / "start.npz"
    np.savez(start, **{"params/Dense_3/bias": np.zeros((1,), np.float32)})
    args = config.Args(methods=("dr",), seeds=1, rollouts=20, checkpoint_every=10, out=tmp_path / "out",
                       init_from=start)  # fmt: skip
    settings = config.method_settings(args)
    command = run.minimax_command(args, "dr", 1, settings["dr"]["minimax"])
    directory = outputs.minimax_dir(args.out, "dr", 1)
    directory.mkdir(parents=True)
    for replaced, refused in (("--init_params=/elsewhere/start.npz", False), ("--init_params_index=1", True)):
        flag = replaced.split("=")[0] + "="
        copied = [replaced if item.startswith(flag) else item for item in command]
        (directory / "stopped.json").write_text(json.dumps({"target": 20, "command": shlex.join(copied)}))
        if refused:
            with pytest.raises(ConfigError, match="trained by another command"):
                run.check_existing_runs(args, settings)
        else:
            run.check_existing_runs(args, settings)


def test_same_init_stacks_each_seeds_initial_parameters_in_seed_order(monkeypatch, tmp_path):
    """minimax's initial-only runs (stubbed: each writes its --log_dir/--xpid/checkpoint_0.pkl when told to archive
    the initial checkpoint and stop at 0 updates) and the converter (stubbed: params/ arrays holding the seed, and a
    counter) make the file cleanued's --init-from reads: every params/ array stacked in seed order, and the seeds.
    It is made once; a failed seed stops the stage naming it. Mutation checked by hand: the initial-only flags
    dropped, the converter given another tick's archive, the non-parameter arrays stacked too, the seeds left out,
    the failure check dropped, or the file made again: each fails this test."""
    calls = []

    def fake_run(command, **kwargs):
        calls.append(command)
        if command[1].endswith(run.TRAINER):
            flags = command_flags(command)
            if (flags["archive_init_checkpoint"], flags["n_total_updates"]) == ("True", "0"):
                folder = Path(flags["log_dir"]) / flags["xpid"]
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "checkpoint_0.pkl").write_text(flags["seed"])
            failed = flags["seed"] in failing
            return subprocess.CompletedProcess(command, int(failed), "", "out of memory\n" if failed else "")
        assert command[1].endswith(run.CONVERTER) and command[2] == "convert"
        for archive, converted in zip(command[3::2], command[4::2], strict=True):
            seed = float(Path(archive).read_text())
            Path(converted).parent.mkdir(parents=True, exist_ok=True)
            np.savez(converted, **{"params/Dense_3/bias": np.full(1, seed), "params/Conv/kernel": np.full((2, 2), seed),
                                   "n_updates": np.array(0)})  # fmt: skip
        return subprocess.CompletedProcess(command, 0)

    failing = set()
    monkeypatch.setattr(run.subprocess, "run", fake_run)
    args = config.Args(methods=("dr",), seeds=3, first_seed=4, rollouts=20, checkpoint_every=10, out=tmp_path / "a",
                       same_init=True)  # fmt: skip
    run.prepare_initial_parameters(args, "dr", {"dr": {"minimax": {}}})
    target = config.initial_parameters_path(args, "dr", config.cleanued_runs(args, "dr")[0])
    with np.load(target) as data:
        assert sorted(data.files) == ["minimax_seeds", "params/Conv/kernel", "params/Dense_3/bias"]
        assert data["minimax_seeds"].tolist() == [5, 6, 7] and data["params/Dense_3/bias"][:, 0].tolist() == [5, 6, 7]
        assert data["params/Conv/kernel"].shape == (3, 2, 2)
    calls.clear()
    run.prepare_initial_parameters(args, "dr", {"dr": {"minimax": {}}})
    assert calls == []
    failing.add("6")
    with pytest.raises(SystemExit, match="initial-only run of seed 6 failed: out of memory$"):
        run.prepare_initial_parameters(dataclasses.replace(args, out=tmp_path / "b"), "dr", {"dr": {"minimax": {}}})


CLEANUED_STAND_IN = """
import pathlib, sys
run_dir, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
print("flags:", *sys.argv[3:], flush=True)
(run_dir / "checkpoints" / "archive").mkdir(parents=True, exist_ok=True)
(run_dir / "checkpoints" / "update_00000010.msgpack").write_bytes(b"state")
if (out / "fail_once").exists():
    (out / "fail_once").unlink()
    sys.exit(3)
(run_dir / "checkpoints" / "archive" / "update_00000020.msgpack").write_bytes(b"state")
"""
"""cleanued's script for 20 rollouts: a checkpoint at 10, then (unless told to fail once) the last archive."""

MINIMAX_STAND_IN = """
import os, pathlib, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_DFL)  # pytest may have been started with it ignored, which children inherit
directory = pathlib.Path(sys.argv[1])
directory.mkdir(parents=True, exist_ok=True)
(directory / "meta.json").write_text("{}")
(directory / "logs.csv").write_text("# _tick,n_updates\\n" + "".join(f"{t},{t // 2}\\n" for t in range(1, 21)))
for tick in (10, 20):
    (directory / "copy.tmp").write_bytes(b"params")
    os.replace(directory / "copy.tmp", directory / f"checkpoint_{tick}.pkl")
time.sleep(5)
"""
"""minimax's DR run: its log and archives up to tick 20, then training on until it is stopped."""


def stand_in_commands(monkeypatch, folder: Path) -> list:
    """The run stage with the stand-ins for both sides' scripts (written to `folder`), no wait for an archive to
    settle, and no SIGTERM handler of this process replaced; returns the list of started processes, which it keeps."""
    started, real_popen = [], subprocess.Popen
    folder.mkdir()
    (folder / "cleanued.py").write_text(CLEANUED_STAND_IN)
    (folder / "minimax.py").write_text(MINIMAX_STAND_IN)

    def cleanued_command(args, method, cleanued_run, settings):
        run_dir = outputs.cleanued_run_dir(args.out, cleanued_run.name)
        return [sys.executable, str(folder / "cleanued.py"), str(run_dir), str(args.out)]

    def minimax_command(args, method, seed, settings):
        return [sys.executable, str(folder / "minimax.py"), str(outputs.minimax_dir(args.out, method, seed))]

    def popen(*arguments, **keywords):
        started.append(real_popen(*arguments, **keywords))
        return started[-1]

    monkeypatch.setattr(run, "cleanued_command", cleanued_command)
    monkeypatch.setattr(run, "minimax_command", minimax_command)
    monkeypatch.setattr(run.subprocess, "Popen", popen)
    monkeypatch.setattr(run, "ARCHIVE_SETTLE_SECONDS", 0.0)
    monkeypatch.setattr(run.signal, "signal", lambda signum, handler: None)
    return started


def stand_in_args(tmp_path, **fields) -> config.Args:
    return config.Args(methods=("dr",), rollouts=20, checkpoint_every=10, out=tmp_path, poll_seconds=0.01, **fields)


def test_the_run_stage_skips_done_runs_keeps_to_jobs_and_stops_each_minimax_run_at_its_target(monkeypatch, tmp_path):
    """Three DR seeds, cleanued's run and minimax's seed 3 done: only seeds 1 and 2 run, one at a time (--jobs 1),
    each stopped by SIGTERM once its archive of tick 20 is written, recorded in jobs.jsonl under its name, with its
    output in logs/minimax_dr_<seed>.log after the command line; --same-init prepares nothing, as no cleanued run
    is pending. Mutation checked by hand: done jobs not skipped (or minimax's never done), one job too many at once,
    minimax never polled (so run to its end), jobs.jsonl or a log elsewhere, or initial parameters prepared for
    pending minimax runs: each fails this test."""
    started = stand_in_commands(monkeypatch, tmp_path / "bin")
    prepared = []
    monkeypatch.setattr(run, "prepare_initial_parameters", lambda args, method, settings: prepared.append(method))
    most = []
    reap = run.reap

    def counting_reap(process):
        most.append(sum(item.returncode is None for item in started))
        return reap(process)

    monkeypatch.setattr(run, "reap", counting_reap)
    args = stand_in_args(tmp_path, seeds=3, jobs=1, same_init=True)
    archive = outputs.cleanued_run_dir(tmp_path, "cleanued_dr") / "checkpoints" / "archive"
    archive.mkdir(parents=True)
    checkpoints.checkpoint_path(archive, 20).write_bytes(b"")
    done = outputs.minimax_dir(tmp_path, "dr", 3)
    done.mkdir(parents=True)
    (done / "stopped.json").write_text(json.dumps({"target": 20, "stop_tick": 20}))
    run.run_stage(args, {"dr": {"cleanued": {}, "minimax": {}}})
    records = outputs.read_jsonl(tmp_path / "jobs.jsonl")
    assert [(record["job"], record["ok"], record["stop_tick"]) for record in records] == [
        ("minimax_dr_1", True, 20),
        ("minimax_dr_2", True, 20),
    ]
    assert all(record["returncode"] == -signal.SIGTERM for record in records)  # stopped, not run to its end
    assert len(started) == 2 and max(most) == 1 and prepared == []
    for seed in (1, 2):
        log = (tmp_path / "logs" / f"minimax_dr_{seed}.log").read_text()
        assert log.startswith("# ") and shlex.join(started[seed - 1].args) in log.splitlines()[0]


def test_a_failed_cleanued_run_stops_the_stage_and_the_next_run_resumes_it(monkeypatch, tmp_path):
    """The stand-in of cleanued's script exits 3 after its first checkpoint: the stage finishes minimax's run and
    then fails naming the cleanued job; jobs.jsonl records it not ok. Run again, only cleanued's run starts, with
    --resume, its log kept and continued, and --same-init prepares its initial parameters each time it is pending.
    Mutation checked by hand: a failed job not collected, a cleanued job ok on exit, the log opened for writing,
    --overwrite for --resume, or initial parameters prepared for pending minimax runs alone: each fails this test."""
    started = stand_in_commands(monkeypatch, tmp_path / "bin")
    prepared = []
    monkeypatch.setattr(run, "prepare_initial_parameters", lambda args, method, settings: prepared.append(method))
    args = stand_in_args(tmp_path, seeds=1, jobs=2, same_init=True)
    (tmp_path / "fail_once").write_text("")
    with pytest.raises(SystemExit, match="run: 1 jobs failed: cleanued_dr$"):
        run.run_stage(args, {"dr": {"cleanued": {}, "minimax": {}}})
    records = outputs.read_jsonl(tmp_path / "jobs.jsonl")
    assert sorted((record["job"], record["ok"], record["returncode"]) for record in records) == [
        ("cleanued_dr", False, 3),
        ("minimax_dr_1", True, -signal.SIGTERM),
    ]
    run.run_stage(args, {"dr": {"cleanued": {}, "minimax": {}}})
    assert [record["job"] for record in outputs.read_jsonl(tmp_path / "jobs.jsonl")[2:]] == ["cleanued_dr"]
    assert len(started) == 3 and prepared == ["dr", "dr"]
    lines = (tmp_path / "logs" / "cleanued_dr.log").read_text().splitlines()
    assert [line.startswith("# ") for line in lines] == [True, False, True, False]
    assert lines[1] == "flags:" and lines[3] == "flags: --resume"


def test_an_interrupted_run_stage_stops_its_children(monkeypatch, tmp_path):
    """An interrupt (Ctrl+C, or SIGTERM made SystemExit) while minimax's stand-in trains: the stage sends it SIGTERM
    and waits for it rather than leaving it running. Mutation checked by hand: without the SIGTERM in the finally
    block the stage waits out the stand-in's 5 s and this test fails."""
    started = stand_in_commands(monkeypatch, tmp_path / "bin")

    def interrupted(args, job):
        if (outputs.minimax_dir(args.out, "dr", 1) / "logs.csv").exists():  # the stand-in has taken its SIGTERM back
            raise KeyboardInterrupt

    monkeypatch.setattr(run, "poll_minimax", interrupted)
    args = stand_in_args(tmp_path, seeds=1, jobs=2)
    archive = outputs.cleanued_run_dir(tmp_path, "cleanued_dr") / "checkpoints" / "archive"
    archive.mkdir(parents=True)
    checkpoints.checkpoint_path(archive, 20).write_bytes(b"")
    with pytest.raises(KeyboardInterrupt):
        run.run_stage(args, {"dr": {"cleanued": {}, "minimax": {}}})
    (child,) = started
    assert child.returncode == -signal.SIGTERM


def test_each_checkpoint_of_both_sides_stands_for_its_grid_point_and_seed(tmp_path):
    """ACCEL, archives every 2 ticks, a replay every second tick (tick t: t + t // 2 rollouts): minimax seed index
    0's grid point 10 is tick 6 (9 rollouts; tick 8 has 12), 20 its stop tick 14 (21 rollouts); seed index 1 has
    not run and index 2 ran for another --rollouts, so neither has checkpoints. cleanued's one run of three seeds:
    each seed at each grid point, read from the seed's position in the file. Mutation checked by hand: the grid
    from 0, the not-done check dropped, grid and rollouts swapped, or every cleanued seed read from position 0:
    each fails this test."""
    args = config.Args(methods=("accel",), seeds=3, rollouts=20, checkpoint_every=10, accel_archive_ticks=2,
                       out=tmp_path)  # fmt: skip
    for seed, target in ((1, 20), (3, 40)):
        directory = outputs.minimax_dir(tmp_path, "accel", seed)
        directory.mkdir(parents=True)
        (directory / "stopped.json").write_text(json.dumps({"target": target, "stop_tick": 14}))
        (directory / "logs.csv").write_text(minimax_log([tick // 2 for tick in range(1, 17)]))
    found = evaluate.minimax_checkpoints(args, "accel")
    assert [(item.seed, item.grid, item.rollouts, int(item.path.stem.removeprefix("tick_"))) for item in found] == [
        (0, 10, 9, 6),
        (0, 20, 21, 14),
    ]
    assert all(item.path.parents[1] == outputs.minimax_dir(tmp_path, "accel", 1) for item in found)
    archive = outputs.cleanued_run_dir(tmp_path, "cleanued_accel") / "checkpoints" / "archive"
    archive.mkdir(parents=True)
    for grid in (10, 20):
        checkpoints.checkpoint_path(archive, grid).write_bytes(b"")
    found = evaluate.cleanued_checkpoints(args, "accel")
    assert [(item.seed, item.grid, item.rollouts, item.in_file) for item in found] == [
        (seed, grid, grid, seed) for grid in (10, 20) for seed in range(3)
    ]


def test_only_unconverted_minimax_checkpoints_go_to_the_converter_each_from_its_own_archive(monkeypatch, tmp_path):
    """One converter process for the minimax checkpoints not converted yet, each paired with its run's archive of
    that tick; none when all are converted; cleanued's checkpoints never. Mutation checked by hand: converting
    every checkpoint, the archive looked for in params/, or a converter started with nothing to convert: each fails
    this test."""
    calls = []
    monkeypatch.setattr(evaluate.subprocess, "run", lambda command, **keywords: calls.append(command))
    args = config.Args(methods=("dr",), seeds=1, rollouts=20, checkpoint_every=10, out=tmp_path)
    directory = outputs.minimax_dir(tmp_path, "dr", 1)
    converted, pending = directory / "params" / "tick_00000010.npz", directory / "params" / "tick_00000020.npz"
    converted.parent.mkdir(parents=True)
    converted.write_bytes(b"")
    found = [
        evaluate.Checkpoint("minimax", "dr", 0, 10, 10, converted),
        evaluate.Checkpoint("minimax", "dr", 0, 20, 20, pending),
        evaluate.Checkpoint("cleanued", "dr", 0, 20, 20, tmp_path / "runs" / "cleanued_dr" / "update.msgpack"),
    ]
    evaluate.convert_minimax_checkpoints(args, found)
    (command,) = calls
    assert command[2:] == ["convert", str(outputs.minimax_archive(directory, 20)), str(pending)]
    pending.write_bytes(b"")
    evaluate.convert_minimax_checkpoints(args, found)
    assert len(calls) == 1


def test_the_evaluators_draws_are_one_stream_per_grid_point_and_seed_and_per_maze_and_seed(monkeypatch):
    """The level sampler and the players replaced by stand-ins that return uniform draws from the key they are
    handed (equal draws: the same key), so nothing but the keys is compiled. The training-distribution levels are one
    set per --eval-seed; each (grid point, seed) draws its own attempts, the same for any parameters (common random
    numbers for both sides); each (maze, seed) its own held-out draws; another --eval-seed draws others. Mutation
    checked by hand: the seed or the grid point not folded into the training key, the seed or the maze not folded
    into the held-out key, or the levels or the training key not from --eval-seed: each fails this test."""

    def sampled(rng, height, width, n_walls):
        return jax.random.uniform(rng, (height, width))

    def played(rng, apply, params, carry, levels, env_params, max_steps):
        return SimpleNamespace(returns=jax.random.uniform(rng, (levels.shape[0],)))

    def evaluated(rng, apply, params, carry, maze, env_params, episodes):
        return SimpleNamespace(returns=jax.random.uniform(rng, (episodes,)))

    monkeypatch.setattr(evaluate, "sample_dr_level", sampled)
    monkeypatch.setattr(evaluate, "shortest_path_length", lambda level: 1)
    monkeypatch.setattr(evaluate, "play_levels", played)
    monkeypatch.setattr(evaluate, "evaluate_policy", evaluated)
    args = config.Args(methods=("dr",), maze_size=5, n_walls=3, max_steps=8, lstm_size=8, train_levels=8,
                       heldout_episodes=8, heldout_mazes=("SixteenRooms", "Labyrinth"))  # fmt: skip
    evaluator, other = evaluate.Evaluator(args), evaluate.Evaluator(dataclasses.replace(args, eval_seed=1))
    one, two = {"w": np.zeros(2, np.float32)}, {"w": np.ones(2, np.float32)}

    def training(params, grid, seed, by=evaluator):
        return tuple(by.training_levels(params, grid, seed).tolist())

    def heldout(params, maze, seed):
        return tuple(evaluator.heldout(params, maze, seed).tolist())

    assert training(two, 10, 0) == training(one, 10, 0)
    assert len({training(one, 10, 0), training(one, 20, 0), training(one, 10, 1), training(one, 10, 0, other)}) == 4
    assert heldout(two, "SixteenRooms", 0) == heldout(one, "SixteenRooms", 0)
    assert len({heldout(one, "SixteenRooms", 0), heldout(one, "SixteenRooms", 1), heldout(one, "Labyrinth", 0)}) == 3
    assert evaluator.levels.shape == (8, 5, 5) and evaluator.solvable_share == 1.0
    assert not np.array_equal(np.asarray(evaluator.levels), np.asarray(other.levels))


def test_a_mazes_held_out_draws_do_not_depend_on_where_heldout_mazes_names_it(monkeypatch):
    """A maze's records count as done whatever --heldout-mazes order made them, so its stream is the maze's own:
    Labyrinth alone, second (the default order) or third draws the same, and the default mazes keep the streams
    every kept comparison was evaluated with (the key folded with their place in the default list). Mutation
    checked by hand: the maze's index in --heldout-mazes, or in envs/heldout.py's registry, fails this test."""

    def evaluated(rng, apply, params, carry, maze, env_params, episodes):
        return SimpleNamespace(returns=jax.random.uniform(rng, (episodes,)))

    monkeypatch.setattr(evaluate, "evaluate_policy", evaluated)
    args = config.Args(methods=("dr",), maze_size=5, n_walls=3, max_steps=8, lstm_size=8, train_levels=8,
                       heldout_episodes=8)  # fmt: skip
    params = {"w": np.zeros(2, np.float32)}
    orders = [("Labyrinth",), config.DEFAULT_HELDOUT_MAZES, ("SixteenRooms", "StandardMaze", "Labyrinth", "FourRooms")]
    for maze in ("SixteenRooms", "Labyrinth", "StandardMaze"):
        draws = {
            tuple(evaluate.Evaluator(dataclasses.replace(args, heldout_mazes=order)).heldout(params, maze, 3).tolist())
            for order in orders
            if maze in order
        }
        kept = jax.random.fold_in(
            jax.random.fold_in(jax.random.key(args.eval_seed + 2), config.DEFAULT_HELDOUT_MAZES.index(maze)), 3
        )
        assert draws == {tuple(jax.random.uniform(kept, (8,)).tolist())}, maze
    four_rooms = evaluate.Evaluator(dataclasses.replace(args, heldout_mazes=orders[2])).heldout(params, "FourRooms", 3)
    assert not np.array_equal(four_rooms, evaluate.Evaluator(args).heldout(params, "StandardMaze", 3))


def test_parameters_come_from_the_checkpoints_own_file_and_seed(monkeypatch, tmp_path):
    """minimax's converted file gives its tree and n_updates; a cleanued archive gives the parameters and student
    updates at the checkpoint's position in its seed axis, its run's functions built once from its run folder, and
    one file held at a time. Mutation checked by hand: position 0 for the parameters or the updates, minimax's
    updates not read, the run folder taken one level too low, or every loaded file kept: each fails this test."""
    source = evaluate.ParameterSource()
    converted = tmp_path / "minimax" / "dr_1" / "params" / "tick_00000010.npz"
    converted.parent.mkdir(parents=True)
    np.savez(converted, **{"params/Dense_0/bias": np.array([1.0, 2.0]), "n_updates": np.array(7)})
    params, updates = source.get(evaluate.Checkpoint("minimax", "dr", 0, 10, 10, converted))
    assert updates == 7 and params["params"]["Dense_0"]["bias"].tolist() == [1.0, 2.0]
    loaded_runs = []

    def load_run(run_dir, checkpoint):
        loaded_runs.append(run_dir)
        functions = SimpleNamespace(policies={"student": lambda runner: runner["params"]},
                                    student_updates=lambda runner: runner["updates"])  # fmt: skip
        return SimpleNamespace(functions=functions, runner="template")

    archive = outputs.cleanued_run_dir(tmp_path, "cleanued_dr") / "checkpoints" / "archive"
    files = {
        checkpoints.checkpoint_path(archive, grid): {
            "params": {"w": np.arange(3.0)[:, None] + grid},
            "updates": np.array([3, 4, 5]) + grid,
        }
        for grid in (10, 20)
    }
    monkeypatch.setattr(evaluate, "load_run", load_run)
    monkeypatch.setattr(evaluate.checkpoints, "load", lambda path, template: (files[path], None, None))
    for grid, in_file in ((10, 2), (10, 0), (20, 1)):
        path = checkpoints.checkpoint_path(archive, grid)
        params, updates = source.get(evaluate.Checkpoint("cleanued", "dr", in_file, grid, grid, path, in_file))
        assert params["w"].tolist() == [in_file + grid] and updates == 3 + in_file + grid
    assert loaded_runs == [outputs.cleanued_run_dir(tmp_path, "cleanued_dr")]
    assert list(source.loaded) == [checkpoints.checkpoint_path(archive, 20)]


def test_the_evaluate_stage_records_each_pending_evaluation_once_with_its_checkpoints_facts(monkeypatch, tmp_path):
    """ACCEL, one seed, held-out from 20: the grid point 10 of both sides evaluated before (their records in
    evaluations.jsonl), so the stage converts only minimax's tick 14 and evaluates grid point 20 on the training
    levels and SixteenRooms, each record with the checkpoint's seed, grid point, rollouts, updates, the solve rate
    (the share of positive returns) and mean return, the file, and the solvable share on training levels alone; then
    a jobs.jsonl record. Run again: nothing. With another --eval-seed: everything again. A parameter tree of another
    shape is refused. Mutation checked by hand: done evaluations not skipped (no done set, or a key without the eval
    seed, or the pending check at eval seed 0), every found checkpoint converted, grid and seed swapped on the
    training levels, the grid point for the held-out seed, the grid point for the rollouts, a return of 0 counted as
    solved, the solvable share on held-out records, a jobs.jsonl record for no evaluations, or the tree check dropped:
    each fails this test."""
    calls, converted = [], []

    class Evaluator:
        solvable_share = 0.75

        def __init__(self, args):
            pass

        def training_levels(self, params, grid, seed):
            calls.append(("train_levels", grid, seed))
            return np.array([0.0, 0.5, 0.0, 0.25])

        def heldout(self, params, maze, seed):
            calls.append(("heldout", maze, seed))
            return np.array([0.0, 0.0, 0.0, 0.75])

    class ParameterSource:
        def get(self, checkpoint):
            tree = {"w": np.zeros(1)} if checkpoint.side == "cleanued" or not odd_tree else {"v": np.zeros(1)}
            return tree, {"cleanued": 11, "minimax": 7}[checkpoint.side]

    def convert(command, **keywords):
        converted.append(command[3:])

    odd_tree = False
    monkeypatch.setattr(evaluate, "Evaluator", Evaluator)
    monkeypatch.setattr(evaluate, "ParameterSource", ParameterSource)
    monkeypatch.setattr(evaluate.subprocess, "run", convert)
    args = config.Args(methods=("accel",), seeds=1, rollouts=20, checkpoint_every=10, accel_archive_ticks=2,
                       heldout_from=20, heldout_mazes=("SixteenRooms",), out=tmp_path)  # fmt: skip
    archive = outputs.cleanued_run_dir(tmp_path, "cleanued_accel") / "checkpoints" / "archive"
    archive.mkdir(parents=True)
    for grid in (10, 20):
        checkpoints.checkpoint_path(archive, grid).write_bytes(b"")
    directory = outputs.minimax_dir(tmp_path, "accel", 1)
    directory.mkdir(parents=True)
    (directory / "stopped.json").write_text(json.dumps({"target": 20, "stop_tick": 14}))
    (directory / "logs.csv").write_text(minimax_log([tick // 2 for tick in range(1, 17)]))
    earlier = {"method": "accel", "seed": 0, "grid": 10, "kind": "train_levels", "maze": None, "episodes": 512}
    earlier |= {"eval_seed": 0, "solve_rate": 0.0, "return": 0.0}
    outputs.write_jsonl(tmp_path / "evaluations.jsonl", [earlier | {"side": side} for side in ("cleanued", "minimax")])
    evaluate.evaluate_stage(args)
    (minimax_file,) = [item.path for item in evaluate.minimax_checkpoints(args, "accel") if item.grid == 20]
    assert converted == [[str(outputs.minimax_archive(directory, 14)), str(minimax_file)]]
    assert calls == [("train_levels", 20, 0), ("heldout", "SixteenRooms", 0)] * 2
    records = outputs.read_jsonl(tmp_path / "evaluations.jsonl")[2:]
    training = {"kind": "train_levels", "maze": None, "episodes": 512, "solve_rate": 0.5, "return": 0.1875}
    held_out = {"kind": "heldout", "maze": "SixteenRooms", "episodes": 200, "solve_rate": 0.25, "return": 0.1875}
    expected = []
    for side, rollouts, updates, path in (
        ("cleanued", 20, 11, checkpoints.checkpoint_path(archive, 20)),
        ("minimax", 21, 7, minimax_file),
    ):
        facts = {"side": side, "method": "accel", "seed": 0, "grid": 20, "rollouts": rollouts}
        facts |= {"student_updates": updates, "eval_seed": 0, "checkpoint": str(path.relative_to(tmp_path))}
        expected += [facts | training | {"solvable_share": 0.75}, facts | held_out]
    assert sorted(records, key=json.dumps) == sorted(expected, key=json.dumps)
    (job,) = outputs.read_jsonl(tmp_path / "jobs.jsonl")
    assert (job["job"], job["evaluations"]) == ("evaluate", 4)
    evaluate.evaluate_stage(args)
    assert len(outputs.read_jsonl(tmp_path / "evaluations.jsonl")) == 6 and len(calls) == 4
    assert len(outputs.read_jsonl(tmp_path / "jobs.jsonl")) == 1
    evaluate.evaluate_stage(dataclasses.replace(args, eval_seed=1))
    again = [record for record in outputs.read_jsonl(tmp_path / "evaluations.jsonl") if record["eval_seed"] == 1]
    assert sorted((record["side"], record["grid"], record["kind"]) for record in again) == [
        (side, grid, kind)
        for side in ("cleanued", "minimax")
        for grid, kind in ((10, "train_levels"), (20, "heldout"), (20, "train_levels"))
    ]
    odd_tree = True
    with pytest.raises(ConfigError, match="its parameter tree does not match cleanued's ActorCritic"):
        evaluate.evaluate_stage(dataclasses.replace(args, eval_seed=2))
