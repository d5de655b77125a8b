"""Run folders cannot be lost, escaped or mixed (the fault trial's defects, each with a test that failed before):
run names confined to --runs-dir, --overwrite deleting only run folders, a lock per run folder, --resume refusing a
folder without a checkpoint, a checkpoint of another experiment, another script's run or a missing folder by name,
torn logs, one-line errors, range checks, temporary files swept, archives on schedule, a resume only at a multiple
of --log-interval (so every schedule holds) and never past its end, Ctrl+C / SIGTERM at any moment, a full disk
(also at the start), a --runs-dir that is a file. Everything happens in temporary folders."""

import csv
import errno
import hashlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import serialization

from algos import accel, accel_parallel, dr, paired, plr, plr_parallel, sfl
from common import checkpoint, devices, driver, runs
from common.config import flags_of, log_intervals_resuming_at, parse_command_line, with_flags
from common.errors import ConfigError, DoesNotFit
from tests.conftest import environment_with_fusion_emitters
from tests.states import assert_states_close, command_in_process, newest_state, run_script

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY = dict(
    num_envs=4, num_steps=8, lstm_size=8, maze_size=5, n_walls=3, max_steps=6, total_updates=4, log_interval=2,
    eval_interval=0, checkpoint_interval=2, screenshot_interval=0,
)  # fmt: skip
TINY_FLAGS = [f"--{key.replace('_', '-')}={value}" for key, value in TINY.items()]


def tiny(runs_dir: Path, **flags) -> dr.Config:
    return with_flags(dr.Config(), **{**TINY, "runs_dir": str(runs_dir), **flags})


def cli(*args: str, cwd: Path = REPO_ROOT, script: str = "algos/dr.py") -> subprocess.CompletedProcess:
    """`python <script> <args>`, run in this test's process (tests.states.command_in_process)."""
    return command_in_process(str(REPO_ROOT / script), *args, cwd=cwd)


def one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def snapshot(directory: Path) -> dict:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A finished 4-update run (checkpoints at 2 and 4); tests work on copies of it."""
    runs_dir = tmp_path_factory.mktemp("runs")
    return run_script(dr, tiny(runs_dir, run_name="done"))


def copy_of(finished_run: Path, tmp_path: Path, name: str = "copy") -> Path:
    target = tmp_path / name
    shutil.copytree(finished_run, target)
    return target


@pytest.mark.parametrize("name", ["..", ".", "", " ", " a", "a ", "a/b", "/etc", "../escape", "a\\b"])
def test_a_run_name_is_one_plain_folder_name(tmp_path, name):
    with pytest.raises(ConfigError, match="must be one plain folder name"):
        tiny(tmp_path, run_name=name)


def test_run_name_dot_dot_with_overwrite_deletes_nothing(tmp_path):
    runs_dir = tmp_path / "checkout" / "runs"
    runs_dir.mkdir(parents=True)
    (tmp_path / "checkout" / "precious.txt").write_text("keep")
    before = snapshot(tmp_path)
    one_line_error(cli("--runs-dir", str(runs_dir), "--run-name", "..", "--overwrite"), "plain folder name")
    assert snapshot(tmp_path) == before


def test_a_locked_folder_is_refused_in_one_line_and_free_once_released(tmp_path):
    """A second lock on a run folder (here from the same process: flock locks belong to each open) is a one-line
    refusal that leaves no descriptor open; once the holder closes, the folder can be locked again. Fails with the
    refusal's message or its descriptor's closing changed (mutmut's survivors of lock_run_folder 11 and 12)."""
    holder = runs.lock_run_folder(tmp_path)
    open_before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(ConfigError, match=f"^{re.escape(str(tmp_path))} is in use by another process; wait for it"):
        runs.lock_run_folder(tmp_path)
    assert len(os.listdir("/proc/self/fd")) == open_before
    os.close(holder)
    os.close(runs.lock_run_folder(tmp_path))


def test_a_marker_that_cannot_be_read_proves_nothing(tmp_path, monkeypatch):
    """`is_run_folder` is false when reading the marker fails (no permission, an I/O error), as for a folder
    without one. Fails with the error taken as proof (mutmut's survivor of is_run_folder 7)."""
    (tmp_path / runs.MARKER).write_bytes(runs.MARKER_TEXT)
    assert runs.is_run_folder(tmp_path)

    def unreadable(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(Path, "read_bytes", unreadable)
    assert not runs.is_run_folder(tmp_path)


def test_overwrite_deletes_only_run_folders(tmp_path, finished_run):
    """Only a folder holding the marker a new run writes first is ever deleted; names prove nothing (the fault trial
    emptied other projects' folders holding `checkpoints/best_model.pt`, `wandb/`, `logs.csv`, or only `images/`,
    and a foreign config.json naming an algos/ script). Mutation checked by hand: with `is_run_folder` true for
    every folder, the first three refusals fail."""

    def made(name: str, files: dict) -> Path:
        folder = tmp_path / name
        for relative, text in files.items():
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_text(text)
        return folder

    others = {
        "other_project": {"checkpoints/best_model.pt": "weights", "wandb/run.txt": "x", "logs.csv": "a,b\n"},
        "holiday": {"images/holiday.png": "a picture"},
        "claimed": {"config.json": '{"script": "algos/dr.py", "config": {}}', "eval/results.txt": "someone's data"},
        "notes": {"data.txt": "not a run"},
    }
    for name, files in others.items():
        folder = made(name, files)
        before = snapshot(folder)
        with pytest.raises(ConfigError, match=rf"{name} was not made by a cleanued run .*refusing to delete it"):
            run_script(dr, tiny(tmp_path, run_name=name, overwrite=True))
        assert snapshot(folder) == before, name
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match="exists and is not a folder"):
        run_script(dr, tiny(tmp_path, run_name="afile", overwrite=True))
    run = copy_of(finished_run, tmp_path, "old_run")
    assert (run / runs.MARKER).read_bytes() == runs.MARKER_TEXT, "a new run writes the marker"
    (run / "notes.txt").write_text("a note beside the run")
    with pytest.raises(ConfigError, match=r"holds what no run writes \(notes.txt\)"):
        run_script(dr, tiny(tmp_path, run_name="old_run", overwrite=True, total_updates=2))
    (run / "notes.txt").rename(tmp_path / "notes.txt")
    run_script(dr, tiny(tmp_path, run_name="old_run", overwrite=True, total_updates=2))
    assert (run / "checkpoints" / "update_00000002.msgpack").exists()
    assert not (run / "checkpoints" / "update_00000004.msgpack").exists()
    forged = copy_of(finished_run, tmp_path, "forged")
    (forged / runs.MARKER).write_text("something else")
    with pytest.raises(ConfigError, match="was not made by a cleanued run"):
        run_script(dr, tiny(tmp_path, run_name="forged", overwrite=True))


def test_the_refusals_to_start_name_the_folder_the_way_out_and_at_most_five_of_its_entries(tmp_path, finished_run):
    """The one-line refusals of open_run_folder, word for word: a taken name (the three ways out), --overwrite of a
    folder no run made and of a run holding foreign files (five entries shown, then ", ..."), a resume with other
    flags (naming the folder). Kills mutmut's survivors of open_run_folder 20, 47-50, 55, 58-65, 67 and 74-80."""

    def refusal(**flags) -> str:
        with pytest.raises(ConfigError) as raised:
            runs.open_run_folder(tiny(tmp_path, **flags), "algos/dr.py")
        return str(raised.value)

    taken = copy_of(finished_run, tmp_path, "taken")
    assert refusal(run_name="taken") == (
        f"{taken} already exists: pass --resume to continue it, --overwrite to start over, or another --run-name"
    )
    assert refusal(run_name="taken", resume=True, lr=0.5).startswith(f"cannot resume {taken}: the config differs in")
    for count, shown in ((5, "a0, a1, a2, a3, a4"), (6, "a0, a1, a2, a3, a4, ...")):
        other = tmp_path / f"other{count}"
        other.mkdir()
        for index in range(count):
            (other / f"a{index}").write_text("x")
        assert refusal(run_name=f"other{count}", overwrite=True) == (
            f"{other} was not made by a cleanued run (it holds {shown} but no {runs.MARKER}, which a new run writes "
            "first; folders of runs before that file existed have none either): refusing to delete it"
        )
        run = copy_of(finished_run, tmp_path, f"run{count}")
        for index in range(count):
            (run / f"a{index}").write_text("x")
        assert refusal(run_name=f"run{count}", overwrite=True) == (
            f"{run} holds what no run writes ({shown}); refusing to delete it: move those away first"
        )


def test_a_run_folder_that_cannot_be_made_is_one_line_and_leaves_no_new_folder(tmp_path, monkeypatch):
    """The run folder's mkdir fails after making its parents (a full disk): one line naming the folder and the
    error, and the folders this start made are gone again (its parents stayed while the folder itself, never made,
    stopped the clean-up). Kills mutmut's survivors of open_run_folder 91-93."""
    make_folder = Path.mkdir

    def full_disk(self, *args, **kwargs):
        if self.name != "run":
            return make_folder(self, *args, **kwargs)
        make_folder(self.parent, parents=True, exist_ok=True)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "mkdir", full_disk)
    run_dir = tmp_path / "new" / "runs" / "run"
    with pytest.raises(ConfigError) as raised:
        runs.open_run_folder(tiny(run_dir.parent, run_name="run"), "algos/dr.py")
    assert str(raised.value) == f"could not create {run_dir} (No space left on device)"
    assert list(tmp_path.iterdir()) == []


def test_a_start_that_another_process_beat_to_the_same_new_folder_is_refused(tmp_path, monkeypatch):
    """Two plain starts of one new --run-name at once: the one that takes the lock second finds the other's files and
    stops with one line, deleting nothing. Kills mutmut's survivor of open_run_folder 97."""
    lock = runs.lock_run_folder

    def beaten(run_dir):
        (run_dir / "config.json").write_text("the other process's")
        return lock(run_dir)

    monkeypatch.setattr(runs, "lock_run_folder", beaten)
    run_dir = tmp_path / "raced"
    with pytest.raises(ConfigError) as raised:
        runs.open_run_folder(tiny(tmp_path, run_name="raced"), "algos/dr.py")
    assert str(raised.value) == f"{run_dir} was started by another process at the same time; choose another --run-name"
    assert (run_dir / "config.json").read_text() == "the other process's"


def test_the_signals_are_handed_back_after_a_run_unless_the_process_ends_after_it():
    """StopSignal's exit: a run inside a longer program (a test, a notebook) gets its Ctrl+C and SIGTERM handlers
    back, also after a stop (a notebook's next Ctrl+C must still interrupt it; a stopped in-process run left them
    ignored for the test worker's later tests and their children); when the process ends after the run (a script's
    command line), they stay ignored. Kills mutmut's survivors of StopSignal.__init__ 1 and 7."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with runs.StopSignal():
            assert signal.getsignal(signal.SIGINT) not in (previous[signal.SIGINT], signal.SIG_IGN)
        assert {sig: signal.getsignal(sig) for sig in previous} == previous
        with runs.StopSignal(process_ends_after=True):
            pass
        assert {signal.getsignal(sig) for sig in previous} == {signal.SIG_IGN}
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        with runs.StopSignal() as stop:
            stop.requested = "SIGTERM"
        assert {sig: signal.getsignal(sig) for sig in previous} == previous
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def test_overwrite_empties_the_old_run_whatever_order_its_entries_come_in_and_says_what_it_could_not_delete(
    tmp_path, finished_run, monkeypatch
):
    """--overwrite deletes every entry but the marker even when the marker is listed first (a folder lists its entries
    in no set order), only in `start_run` (opening the folder leaves the old run whole), and an entry it cannot
    delete is named in one line that says how to finish (mutmut's survivors of the deletion loop)."""
    list_entries = Path.iterdir
    monkeypatch.setattr(Path, "iterdir", lambda self: iter(sorted(list_entries(self))))  # ".cleanued-run" first
    run = copy_of(finished_run, tmp_path, "old")
    before = snapshot(run)
    config = tiny(tmp_path, run_name="old", overwrite=True)
    folder = runs.open_run_folder(config, "algos/dr.py")
    assert snapshot(run) == before
    runs.start_run(folder.path, config, "algos/dr.py")
    os.close(folder.lock)
    assert sorted(entry.name for entry in list_entries(run)) == [runs.MARKER, "config.json"]

    def cannot_delete(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(shutil, "rmtree", cannot_delete)
    copy_of(finished_run, tmp_path, "stuck")
    config = tiny(tmp_path, run_name="stuck", overwrite=True)
    folder = runs.open_run_folder(config, "algos/dr.py")
    with pytest.raises(ConfigError) as raised:
        runs.start_run(folder.path, config, "algos/dr.py")
    os.close(folder.lock)
    remedy = runs.remedy(PermissionError(13, "Permission denied"))
    assert str(raised.value) == (
        f"could not delete {tmp_path / 'stuck' / 'checkpoints'} (Permission denied) for --overwrite: {remedy}, then "
        "--overwrite again (the folder still holds its marker, so that finishes the job)"
    )


def test_an_overwrite_cut_off_part_way_is_finished_by_the_next(tmp_path, finished_run, monkeypatch):
    """A kill while --overwrite deletes the old run: the marker stays to the end, so the folder still proves it is a
    run and one more --overwrite finishes, config.json gone or not; a folder of a run from before the marker (no
    marker) is refused."""
    run = copy_of(finished_run, tmp_path, "cut")
    before = {entry.name for entry in run.iterdir()}
    real_rmtree = runs.shutil.rmtree

    def killed(path, *args, **kwargs):
        real_rmtree(path, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(runs.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        run_script(dr, tiny(tmp_path, run_name="cut", overwrite=True, total_updates=2))
    monkeypatch.undo()
    left = {entry.name for entry in run.iterdir()}
    assert runs.MARKER in left and left < before, "killed part way, with the marker still there"
    run_script(dr, tiny(tmp_path, run_name="cut", overwrite=True, total_updates=2))
    assert checkpoint.list_checkpoints(run / "checkpoints")[-1].name == "update_00000002.msgpack"
    orphan = copy_of(finished_run, tmp_path, "orphan")
    (orphan / "config.json").unlink()
    refused = cli("--runs-dir", str(tmp_path), "--run-name", "orphan", "--resume")
    one_line_error(refused, "no config.json; it holds", "--overwrite starts it over if a run made it")
    run_script(dr, tiny(tmp_path, run_name="orphan", overwrite=True, total_updates=2))
    assert (orphan / "config.json").exists()
    legacy = copy_of(finished_run, tmp_path, "legacy")
    (legacy / runs.MARKER).unlink()
    one_line_error(
        cli("--runs-dir", str(tmp_path), "--run-name", "legacy", "--overwrite", *TINY_FLAGS),
        "not made by a cleanued run",
        runs.MARKER,
    )
    assert (legacy / "config.json").exists()


def test_a_start_refused_once_compiled_keeps_the_old_run_and_leaves_no_new_folder(tmp_path, finished_run, monkeypatch):
    """--overwrite deletes the old run only once the new one's programs are compiled and fit: a chunk refused as too
    large (or any failure before) leaves the old run whole (the fault trial: `--overwrite --num-envs 100000000` lost
    it). A new run, a sweep's too, that fails there leaves no folder (one used to keep points.csv and config.json,
    and a rerun was refused as `already exists`). Fails with the deletion or config.json back in open_run_folder."""
    real_check = driver.check_compiled_fits

    def chunk_too_large(name, compiled, placement):
        if name == "training chunk":
            raise DoesNotFit("the compiled training chunk takes too much of this test's host")
        return real_check(name, compiled, placement)

    monkeypatch.setattr(driver, "check_compiled_fits", chunk_too_large)
    run = copy_of(finished_run, tmp_path, "old")
    before = snapshot(run)
    with pytest.raises(DoesNotFit):
        run_script(dr, tiny(tmp_path, run_name="old", overwrite=True))
    assert snapshot(run) == before
    (tmp_path / "mine").mkdir()  # made by the user beforehand: it stays
    with pytest.raises(DoesNotFit):
        run_script(dr, tiny(tmp_path, run_name="mine"))
    assert list((tmp_path / "mine").iterdir()) == []
    with pytest.raises(DoesNotFit):
        run_script(dr, tiny(tmp_path, run_name="swept", sweep=("lr=1e-4,3e-4",)))
    assert not (tmp_path / "swept").exists()

    def compile_fails(*args):
        raise OverflowError("Python int too large to convert to C int")

    monkeypatch.setattr(driver, "compile_timed", compile_fails)
    with pytest.raises(OverflowError):
        run_script(dr, tiny(tmp_path / "runs", run_name="new"))
    assert not (tmp_path / "runs" / "new").exists()
    with pytest.raises(OverflowError):
        run_script(dr, tiny(tmp_path, run_name="old", overwrite=True))
    assert snapshot(run) == before


@pytest.mark.parametrize(
    ("value", "message"),
    [("3", "saved config does not fit algos.dr.Config"), (True, "--num-seeds must be at least 1, got True")],
)
def test_a_config_json_edited_to_a_wrong_type_is_one_line(tmp_path, finished_run, value, message):
    """A hand-edited config.json with text or a boolean where a number belongs: one line at --resume, not a
    traceback from the compile (the mutation trial's survivors of config_from_saved and range_problems)."""
    run = copy_of(finished_run, tmp_path, "edited")
    saved = json.loads((run / "config.json").read_text())
    saved["config"]["num_seeds"] = value
    (run / "config.json").write_text(json.dumps(saved))
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_command_line(dr.Config, "", ["--resume", "--runs-dir", str(tmp_path), "--run-name", "edited"])


def test_a_resume_refused_for_want_of_a_checkpoint_lets_go_of_the_folder(tmp_path, finished_run):
    """The refusal releases the folder's lock: in a longer program (a notebook) the next start on it must not find it
    held. Fails with the descriptor left open (the mutation trial's survivor of open_run_folder)."""
    run = copy_of(finished_run, tmp_path, "bare")
    shutil.rmtree(run / "checkpoints")
    with pytest.raises(ConfigError, match="it has no checkpoint yet"):
        runs.open_run_folder(tiny(tmp_path, run_name="bare", resume=True), "algos/dr.py")
    os.close(runs.lock_run_folder(run))


def test_a_marker_that_is_a_link_proves_nothing(tmp_path, finished_run):
    """A `.cleanued-run` that links to a real marker elsewhere does not make a folder a run folder: --overwrite is
    refused and the folder left as it was. Fails with the link check dropped from is_run_folder."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "data.txt").write_text("someone's")
    (other / runs.MARKER).symlink_to(finished_run / runs.MARKER)
    before = snapshot(other)
    with pytest.raises(ConfigError, match="was not made by a cleanued run"):
        runs.open_run_folder(tiny(tmp_path, run_name="other", overwrite=True), "algos/dr.py")
    assert snapshot(other) == before


def test_a_stop_during_the_compile_leaves_an_old_run_or_a_resumed_one_as_it_was(tmp_path, finished_run, monkeypatch):
    """Ctrl+C while an --overwrite start or a resume compiles: nothing of it is written yet, so the old run (the review
    saw its archives replaced by an update-0 checkpoint) or the resumed run's config.json stays as it was. A new
    run stopped so still saves its update-0 state, so --resume continues it. Fails with the stop checked after the
    first write."""
    real_compile = driver.compile_timed

    def stopped_while_compiling(*args):
        os.kill(os.getpid(), signal.SIGINT)  # caught by the run's StopSignal, as a Ctrl+C is
        return real_compile(*args)

    monkeypatch.setattr(driver, "compile_timed", stopped_while_compiling)
    run = copy_of(finished_run, tmp_path, "old")
    before = snapshot(run)
    run_script(dr, tiny(tmp_path, run_name="old", overwrite=True))
    assert snapshot(run) == before
    run_script(dr, tiny(tmp_path, run_name="old", resume=True, total_updates=8, checkpoint_interval=4))
    assert snapshot(run) == before
    new = run_script(dr, tiny(tmp_path, run_name="new"))
    assert [path.name for path in checkpoint.list_checkpoints(new / "checkpoints")] == ["update_00000000.msgpack"]
    assert (new / "config.json").is_file()


def test_a_folder_whose_run_never_wrote_is_started_again_without_overwrite(tmp_path):
    """kill -9 while a new run compiled leaves its folder with only the marker (nothing saved): a plain start takes
    it, and --resume says so instead of calling it no run folder. Fails with the marker-only folder taken as a run."""
    run = tmp_path / "killed"
    run.mkdir()
    (run / runs.MARKER).write_bytes(runs.MARKER_TEXT)
    with pytest.raises(ConfigError) as raised:
        parse_command_line(dr.Config, "", ["--resume", "--runs-dir", str(tmp_path), "--run-name", "killed"])
    assert str(raised.value) == (
        f"cannot resume {run}: its run never wrote anything (it was stopped while it compiled); start it again "
        "without --resume"
    )
    run_script(dr, tiny(tmp_path, run_name="killed", total_updates=2))
    assert checkpoint.list_checkpoints(run / "checkpoints")[-1].name == "update_00000002.msgpack"


def test_overwrite_refuses_a_file_of_ones_own_anywhere_in_the_run_folder(tmp_path, finished_run):
    """What no run writes is refused inside the run's own folders too (the fault trial lost eval/my_analysis.ipynb,
    checkpoints/notes.txt and images/hand_drawn.png), also when it is put there while the new run compiles; what
    runs and common.evaluate write there does not stop --overwrite. Fails with only the top level checked, or with
    no second check in start_run."""
    written = {
        "eval/evaluate_00000004_20261127-101500.csv": "x",
        "eval/risk_00000004_20261127-101500.csv": "x",
        "eval/SixteenRooms_update_00000004.gif": "x",
        "images/levels_update_00000004.png": "x",
        "checkpoints/archive/update_00000004.msgpack": "x",
        "checkpoints/.update_00000006.msgpack.tmp-123": "x",
        "wandb/run-1/files/output.log": "x",
    }
    own = [
        "eval/my_analysis.ipynb",
        "checkpoints/notes.txt",
        "images/hand_drawn.png",
        "checkpoints/archive/best.pt",
        "eval/draft.tmp-1",  # like write_atomic's temporaries but without the leading dot: someone's file
    ]
    for index, relative in enumerate(own):
        run = copy_of(finished_run, tmp_path, f"run{index}")
        for path, text in {**written, relative: "mine"}.items():
            (run / path).parent.mkdir(parents=True, exist_ok=True)
            (run / path).write_text(text)
        before = snapshot(run)
        with pytest.raises(ConfigError) as raised:
            runs.open_run_folder(tiny(tmp_path, run_name=f"run{index}", overwrite=True), "algos/dr.py")
        assert (
            str(raised.value)
            == f"{run} holds what no run writes ({relative}); refusing to delete it: move those away first"
        )
        assert snapshot(run) == before
        (run / relative).unlink()
        config = tiny(tmp_path, run_name=f"run{index}", overwrite=True)
        folder = runs.open_run_folder(config, "algos/dr.py")
        (run / relative).write_text("put there while the new run compiled")
        with pytest.raises(ConfigError, match=re.escape(f"({relative}); refusing to delete it")):
            runs.start_run(folder.path, config, "algos/dr.py")
        (run / relative).unlink()
        runs.start_run(folder.path, config, "algos/dr.py")
        os.close(folder.lock)
        assert sorted(entry.name for entry in run.iterdir()) == [runs.MARKER, "config.json"]


@pytest.mark.slow
def test_evaluate_never_runs_code_outside_algos(tmp_path, finished_run):
    evil = tmp_path / "evil.py"
    marker = tmp_path / "PWNED"
    evil.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    run = copy_of(finished_run, tmp_path)
    config = json.loads((run / "config.json").read_text())
    for script in (str(evil), "../" * 8 + str(evil).lstrip("/"), "algos/../evil.py", "common/evaluate.py"):
        (run / "config.json").write_text(json.dumps({**config, "script": script}))
        result = subprocess.run(
            [sys.executable, "-m", "common.evaluate", "--run-dir", str(run), "--episodes", "1"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        )
        one_line_error(result, "not an algos/ script")
        assert not marker.exists()


@pytest.mark.slow
def test_a_held_run_folder_refuses_every_other_start_until_its_holder_dies(tmp_path, finished_run):
    run = copy_of(finished_run, tmp_path)
    hold = f"import pathlib, time\nfrom common import runs\nlock = runs.lock_run_folder(pathlib.Path({str(run)!r}))\n"
    holder = subprocess.Popen(
        [sys.executable, "-c", hold + "print('held', flush=True)\ntime.sleep(600)"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        before = snapshot(run)
        common = ["--runs-dir", str(tmp_path), "--run-name", run.name]
        for flags in (["--resume"], ["--overwrite"], []):
            result = cli(*common, *flags)
            assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
            assert ("in use by another process" in result.stderr) or ("already exists" in result.stderr)
        assert snapshot(run) == before
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    os.close(runs.lock_run_folder(run))  # the OS released the lock with the killed process


def test_resume_without_a_checkpoint_is_refused(tmp_path, finished_run):
    run = copy_of(finished_run, tmp_path)
    shutil.rmtree(run / "checkpoints")
    before = snapshot(run)
    with pytest.raises(
        ConfigError, match="has no checkpoint yet \\(it holds config.json, logs.csv\\); --overwrite starts it over"
    ):
        run_script(dr, tiny(tmp_path, run_name=run.name, resume=True, total_updates=6))
    assert snapshot(run) == before


def test_a_foreign_checkpoint_is_refused(tmp_path, finished_run):
    run = copy_of(finished_run, tmp_path)
    newest = checkpoint.list_checkpoints(run / "checkpoints")[-1]
    template = jax.eval_shape(dr.make_train(tiny(tmp_path)).init, jax.random.split(jax.random.key(0), 1))
    state, update, saved = checkpoint.load(newest, template)
    checkpoint.save(newest, state, update, {**saved, "lr": 5e-4, "gamma": 0.9})  # same shapes, another experiment
    before = snapshot(run)
    with pytest.raises(
        ConfigError, match="a checkpoint saved with another config: .*--gamma: saved 0.9, now 0.995; --lr"
    ):
        run_script(dr, tiny(tmp_path, run_name=run.name, resume=True, total_updates=6))
    assert snapshot(run) == before


def test_torn_logs_resume_cleanly_or_refuse_before_writing(tmp_path, finished_run, capsys):
    run = copy_of(finished_run, tmp_path)
    log = run / "logs.csv"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # a crash cut the last row
    run_script(dr, tiny(tmp_path, run_name=run.name, resume=True, total_updates=6))
    warnings = capsys.readouterr().err
    assert "dropped the torn last line" in warnings and "ends at update 2 but the checkpoint is at 4" in warnings
    rows = [line.split(",") for line in log.read_text().splitlines()[1:]]
    assert [int(row[1]) for row in rows] == [2, 6] and all(len(row) == len(rows[0]) for row in rows)
    broken = copy_of(finished_run, tmp_path, "broken")
    lines = (broken / "logs.csv").read_text().splitlines(keepends=True)
    (broken / "logs.csv").write_text(lines[0] + "0,\n" + "".join(lines[1:]))
    before = snapshot(broken)
    with pytest.raises(ConfigError, match="logs.csv line 2 is malformed"):
        run_script(dr, tiny(tmp_path, run_name="broken", resume=True, total_updates=6))
    assert snapshot(broken) == before, "config.json must not be rewritten before the checks pass"


@pytest.mark.parametrize(
    ("setup", "flags", "fragment"),
    [
        ("garbage", ["--resume"], "is not valid JSON"),
        ("list", ["--resume"], "is not a cleanued config"),
        (None, ["--num-minibatches", "0"], "--num-minibatches must be at least 1, got 0"),
        (None, ["--num-envs", "0"], "--num-envs must be at least 1, got 0"),
        (None, ["--num-steps", "0"], "--num-steps must be at least 1, got 0"),
        ("file", [], "exists and is not a folder"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(tmp_path, setup, flags, fragment):
    run = tmp_path / "run"
    if setup == "file":
        run.write_text("a file")
    elif setup:
        run.mkdir()
        (run / "config.json").write_text("{garbage" if setup == "garbage" else "[1, 2]")
    before = snapshot(tmp_path)
    one_line_error(cli(*TINY_FLAGS, "--runs-dir", str(tmp_path), "--run-name", "run", *flags), fragment)
    assert snapshot(tmp_path) == before
    if setup in ("garbage", "list"):
        one_line_error(command_in_process("-m", "common.evaluate", "--run-dir", str(run)), fragment)


BAD_VALUES = [
    ("lr", -1.0, "--lr must be positive"),
    ("lr", float("nan"), "--lr must be positive, got nan"),
    ("lr", float("inf"), "--lr must be positive, got inf"),
    ("gamma", 1.5, "--gamma must be in [0, 1], got 1.5"),
    ("max_steps", 0, "--max-steps must be at least 1, got 0"),
    ("maze_size", 500, "--maze-size must be in [2, 101], got 500"),
    ("n_walls", 24, "--n-walls (24) must leave two cells free"),
    ("ent_coef", -1000.0, "--ent-coef must be non-negative"),
    ("max_grad_norm", 0.0, "--max-grad-norm must be positive"),
    ("eval_episodes", 0, "--eval-episodes must be at least 1, got 0"),
    ("total_env_steps", 0, "--total-env-steps must be at least 1, got 0"),
    ("lr", 1e39, "--lr must be 0 or 1.18e-38 to 3.4e+38 in size (a float32 when compiled), got 1e+39"),
    ("lr", 1e-50, "--lr must be 0 or 1.18e-38 to 3.4e+38 in size (a float32 when compiled), got 1e-50"),
    ("log_interval", 2**31, "--log-interval must be at most 2147483647 (a 32-bit integer when compiled), got"),
    ("num_envs", 2**40, "--num-envs must be at most 2147483647"),
]


def test_values_the_compiled_program_cannot_hold_are_refused_and_host_side_bounds_are_not_narrowed(tmp_path):
    """A float that float32 makes infinite or zero, or an int past int32, is refused with the flags (the fault trial:
    --lr 1e39 compiled and stopped as non-finite, --lr 1e-50 trained with a learning rate of 0, and 2**31 updates a
    chunk raised an OverflowError after the folder was made), a swept value too; a bound the field sets itself
    (--seed, to 2**32 - 1) and a host-side count (--total-env-steps) keep their range, and 0 stays allowed.
    Fails with the width check dropped, or applied over a field's own bound."""
    config = with_flags(dr.Config(), **TINY, seed=2**32 - 1, total_env_steps=5 * 10**9, ent_coef=0.0)
    assert (config.run.seed, config.run.total_env_steps) == (2**32 - 1, 5 * 10**9)
    for values in ("1e-4,1e39", "1e39,2e39", "1e-50,2e-50"):  # two that float32 makes equal: the width is named
        swept = cli(*TINY_FLAGS, "--runs-dir", str(tmp_path), "--sweep", f"lr={values}")
        one_line_error(swept, f"--sweep 'lr={values}': --lr must be 0 or 1.18e-38 to 3.4e+38 in size")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "module", [dr, plr, accel, plr_parallel, accel_parallel, paired, sfl], ids=lambda m: m.__name__
)
def test_every_script_checks_numeric_ranges_before_compiling(tmp_path, module):
    for name, value, message in BAD_VALUES:
        with pytest.raises(ConfigError) as error:
            with_flags(module.Config(), **{**TINY, "runs_dir": str(tmp_path), name: value})
        assert str(error.value).startswith(message), (name, value, str(error.value))


@pytest.mark.slow
def test_evaluate_checks_its_ranges(tmp_path, finished_run):
    for flags, fragment in ((["--episodes", "0"], "--episodes must be at least 1"), (["--seed", "-1"], "--seed")):
        result = subprocess.run(
            [sys.executable, "-m", "common.evaluate", "--run-dir", str(finished_run), *flags],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        )
        one_line_error(result, fragment)


def test_failed_writes_leave_no_temporary_file_and_stale_ones_are_swept(tmp_path, finished_run, monkeypatch):
    target = tmp_path / "file.bin"

    def failing_fsync(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", failing_fsync)
        with pytest.raises(OSError):
            checkpoint.write_atomic(target, b"data")
    assert list(tmp_path.iterdir()) == []
    run = copy_of(finished_run, tmp_path)
    stale = [run / "checkpoints" / ".update_00000004.msgpack.tmp-99999", run / ".logs.csv.tmp-123"]
    for path in stale:
        path.write_bytes(b"partial")
    run_script(dr, tiny(tmp_path, run_name=run.name, resume=True, total_updates=6))
    assert not any(path.exists() for path in stale)


def test_the_sweep_deletes_only_write_atomics_temporary_files(tmp_path):
    """Files named as `write_atomic` names its temporary files go; a user's file that only looks alike and a folder
    named like one stay. Fails with either condition of the sweep's filter dropped (mutmut: `and` -> `or`)."""
    ours = [tmp_path / ".logs.csv.tmp-123", tmp_path / "checkpoints" / ".update_00000004.msgpack.tmp-99999"]
    theirs = [tmp_path / ".notes.tmp-draft", tmp_path / "checkpoints" / ".backup.tmp-"]
    folder = tmp_path / ".cache.tmp-42"
    folder.mkdir()
    for path in ours + theirs:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"partial")
    assert sorted(checkpoint.sweep_temporary_files(tmp_path)) == sorted(ours)
    assert not any(path.exists() for path in ours) and all(path.exists() for path in theirs) and folder.is_dir()


LOG_HEADER = "seed,update,env_steps,loss\n"


@pytest.mark.parametrize(
    ("text", "resume_update", "updates", "expected_warnings"),
    [
        (None, 4, [], ["{log} is missing; the log restarts at update 4"]),
        (None, 0, [], []),
        (LOG_HEADER + "0,2,64,0.5\n0,4,128,0.25\n0,6,192,0.125\n", 4, [2, 4], []),
        (LOG_HEADER + "0,2,64,0.5\n0,4,128,0.25\n", 4, [2, 4], []),
        ("seed,update,env_steps\n0,2,64\n", 2, [2], []),
        (LOG_HEADER, 4, [], ["{log} ends at update 0 but the checkpoint is at 4: those rows are lost"]),
        (
            LOG_HEADER + "0,2,64,0.5\n0,4.5,128,0.25\n",
            4,
            [2],
            [
                "{log}: dropped the malformed last row (update is '4.5')",
                "{log} ends at update 2 but the checkpoint is at 4: those rows are lost",
            ],
        ),
        (
            LOG_HEADER + "0,2,64,0.5\n0,4,128,0.2500000000000000000000000000000000000000000000",
            4,
            [2],
            [
                "{log}: dropped the torn last line ('0,4,128,0.250000000000000000000000000000')",
                "{log} ends at update 2 but the checkpoint is at 4: those rows are lost",
            ],
        ),
    ],
    ids=[
        "missing",
        "missing-at-0",
        "rows-past-the-checkpoint",
        "whole",
        "counts-only",
        "header-only",
        "malformed-last",
        "torn",
    ],
)
def test_the_log_a_resume_continues_is_read_row_by_row(tmp_path, text, resume_update, updates, expected_warnings):
    """`read_log` on its own: a missing log (a warning only once rows could be lost), rows past the checkpoint
    dropped silently, a whole last row kept, a header of the three counts alone taken, a header without rows, a
    malformed last row dropped with a warning, a torn last row dropped with its first 40 characters shown. Fails
    with the missing-log warning changed or its return, with lines read without their ends (every last row then
    looks torn), with another line or length shown for the torn one, with the header's counts required to come with
    more, or with the last update of no rows taken as other than 0 (mutmut's survivors of read_log)."""
    log = tmp_path / "logs.csv"
    if text is not None:
        log.write_text(text)
    previous = runs.read_log(log, resume_update)
    assert [int(row["update"]) for row in previous.rows] == updates
    assert previous.columns == ([] if text is None else text.splitlines()[0].split(","))
    assert previous.warnings == [warning.format(log=log) for warning in expected_warnings]


@pytest.mark.parametrize(
    ("header", "row", "problem"),
    [
        (LOG_HEADER, "0,2.5,64,0.5", "update is '2.5'"),
        (LOG_HEADER, "0,,64,0.5", "update is ''"),
        (LOG_HEADER, "0,2,64,lost", "loss is 'lost'"),
        ("point,seed,update,env_steps\n", "0.5,0,2,64", "point is '0.5'"),
    ],
    ids=["fractional-count", "empty-count", "text-metric", "fractional-point"],
)
def test_a_row_with_a_cell_of_the_wrong_kind_is_refused_saying_which(tmp_path, header, row, problem):
    """The counts and a sweep's point must be integers and the metrics numbers (empty allowed), in any row before
    the last. Fails with the counts or the point read as floats (mutmut's survivors of _row_problem 9, 12, 13)."""
    log = tmp_path / "logs.csv"
    last = "0,4,128,0.25" if header == LOG_HEADER else "0,0,4,128"
    log.write_text(header + row + "\n" + last + "\n")
    with pytest.raises(ConfigError, match=re.escape(f"line 2 is malformed ({problem})")):
        runs.read_log(log, 4)


def test_a_sweeps_points_are_recorded_by_number_beside_its_config(tmp_path):
    """`record_config` of a zipped sweep: points.csv numbers each point with its values, as logs.csv and the
    evaluations name them, and config.json holds the script and every flag. Fails with the sweep or its zip
    ignored, or points.csv or config.json written otherwise or elsewhere (mutmut's survivors of record_config)."""
    config = tiny(tmp_path, sweep=("lr=1e-4,3e-4", "gamma=0.9,0.99"), sweep_zip=True)
    runs.record_config(tmp_path, config, "algos/dr.py")
    assert (tmp_path / "points.csv").read_text() == "point,lr,gamma\n0,0.0001,0.9\n1,0.0003,0.99\n"
    text = (tmp_path / "config.json").read_text()
    assert json.loads(text) == {"script": "algos/dr.py", "config": flags_of(config)}
    assert text.startswith('{\n  "script": "algos/dr.py",\n  "config": {\n    "'), "indented for a reader"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["config.json", "points.csv"]


def test_a_chunks_rows_name_each_entrys_point_and_seed_and_average_in_float64():
    """`chunk_rows`: in a sweep, entry e is point e // seeds_per_point's seed e % seeds_per_point (without a sweep,
    seed e); each metric is the mean of the chunk's updates in float64 without NaN (float32 would lose the 1 beside
    1e8); the counts as given, wall time to 0.01 s and env steps/s to the unit. Fails with the point or seed named
    or computed otherwise, the mean taken in float32, or the rounding changed (mutmut's survivors of chunk_rows and
    nanmean); an all-NaN mean is NaN without numpy's warning."""
    returns = np.array([[1e8, 1.0, -1e8], [np.nan, 0.5, np.nan], [0.25] * 3, [0.0] * 3], np.float32)
    counts = dict(update=6, env_steps=768, wall_time=12.3456, env_steps_per_s=1234.6)
    rows = runs.chunk_rows({"train/return": returns}, **counts, student_updates=np.arange(3, 7), seeds_per_point=2)
    assert [(row["point"], row["seed"]) for row in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [row["train/return"] for row in rows] == [1 / 3, 0.5, 0.25, 0.0]
    logged = ("update", "student_updates", "env_steps", "wall_time", "sps")
    assert {key: rows[3][key] for key in logged} == dict(
        update=6, student_updates=6, env_steps=768, wall_time=12.35, sps=1235
    )
    alone = runs.chunk_rows({"train/return": returns}, **counts, student_updates=np.arange(3, 7))
    assert [row["seed"] for row in alone] == [0, 1, 2, 3] and "point" not in alone[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns on the mean of nothing; a chunk where no episode ended must not
        assert math.isnan(runs.nanmean(np.full(3, np.nan, np.float32)))


def test_an_empty_log_is_refused_in_one_line(tmp_path):
    log = tmp_path / "logs.csv"
    log.write_text("")
    with pytest.raises(ConfigError, match="has no logs.csv header; move it away to resume with a fresh log"):
        runs.read_log(log, 4)


@pytest.mark.slow
def test_a_full_disk_keeps_the_last_checkpoint_and_resume_works_after(tmp_path, monkeypatch):
    real_save = checkpoint.save

    def save_until_full(path, state, update, config):
        if update >= 4:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(path, state, update, config)

    monkeypatch.setattr(checkpoint, "save", save_until_full)
    config = tiny(tmp_path, run_name="full", total_updates=6)
    with pytest.raises(ConfigError, match="No space left on device.*newest complete checkpoint is .*update_00000002"):
        run_script(dr, config)
    monkeypatch.setattr(checkpoint, "save", real_save)
    assert [p.name for p in checkpoint.list_checkpoints(tmp_path / "full" / "checkpoints")] == [
        "update_00000002.msgpack"
    ]
    run_script(dr, tiny(tmp_path, run_name="full", resume=True, total_updates=6))
    run_script(dr, tiny(tmp_path, run_name="straight", total_updates=6))
    assert_states_close(*(newest_state(dr, config, tmp_path / name) for name in ("full", "straight")))


def test_archives_follow_their_own_interval(tmp_path):
    run_script(dr, tiny(tmp_path, run_name="archived", total_updates=12, checkpoint_interval=4, archive_interval=6))
    archived = checkpoint.list_checkpoints(tmp_path / "archived" / "checkpoints" / "archive")
    assert [p.name for p in archived] == ["update_00000006.msgpack", "update_00000012.msgpack"]


@pytest.mark.slow
def test_ctrl_c_during_compile_stops_cleanly(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "algos/dr.py", *TINY_FLAGS, "--runs-dir", str(tmp_path), "--run-name", "interrupted"],
        cwd=REPO_ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    while "compiling" not in process.stderr.readline():
        pass
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    # 130: stopped, not finished (a wrapper can tell); the checkpoint is saved
    assert process.returncode == 130 and "Traceback" not in stderr and "stopped by SIGINT" in stderr, stderr
    assert checkpoint.list_checkpoints(tmp_path / "interrupted" / "checkpoints"), "resumable from update 0"


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
def test_the_stop_note_ends_the_progress_line_only_on_a_terminal(capfd, monkeypatch, terminal):
    """What a first and a second signal print, byte for byte: on a terminal after a newline (the progress line is
    being rewritten there), in a log file without the empty line. The process-level behaviour (checkpoint, exit
    status) is checked by the signal tests that run a script; this one reads the handler alone. Fails with the
    newline's condition dropped either way, or with the note's wording changed (mutmut's survivors of
    StopSignal._handle)."""
    monkeypatch.setattr(runs.os, "isatty", lambda descriptor: terminal and descriptor == 2)
    stop = runs.StopSignal()
    stop._handle(signal.SIGTERM, None)
    stop._handle(signal.SIGINT, None)
    start = "\n" if terminal else ""
    assert capfd.readouterr().err == (
        f"{start}SIGTERM: stopping with a checkpoint after the current chunk or compile\n"
        f"{start}SIGINT again: still stopping; kill -9 {os.getpid()} ends the run now, without a checkpoint\n"
    )
    assert stop.requested == "SIGTERM" and not stop.stopped_run


def test_log_intervals_a_resume_may_use_divide_the_update_and_every_interval():
    intervals = dict(total_updates=300, log_interval=20, eval_interval=100, checkpoint_interval=100)
    config = tiny(Path("runs"), **intervals)
    assert log_intervals_resuming_at(config, 150) == [50, 25, 10, 5, 2, 1]
    assert log_intervals_resuming_at(with_flags(config, archive_interval=40), 150) == [10, 5, 2, 1]
    scored = with_flags(sfl.Config(), **{**TINY, **intervals, "refresh_interval": 20})  # SFL's own interval counts
    assert log_intervals_resuming_at(scored, 150) == [10, 5, 2, 1]


@pytest.mark.slow
def test_a_resume_off_the_log_interval_is_refused_and_an_aligned_one_keeps_every_schedule(tmp_path, capsys):
    schedule = dict(eval_interval=4, checkpoint_interval=4, archive_interval=4, eval_mazes=("SixteenRooms",))
    run = run_script(dr, tiny(tmp_path, run_name="r", total_updates=6, eval_episodes=2, **schedule))  # stops at 6
    before = snapshot(run)
    capsys.readouterr()
    refused = r"cannot resume .*r at update 6 with --log-interval 4: .* one that divides 6 and fits every interval"
    with pytest.raises(ConfigError, match=refused + " works: 2, 1$"):
        run_script(dr, tiny(tmp_path, run_name="r", resume=True, total_updates=12, log_interval=4, **schedule))
    assert snapshot(run) == before and "compiling" not in capsys.readouterr().err
    run_script(dr, tiny(tmp_path, run_name="r", resume=True, total_updates=12, eval_episodes=2, **schedule))
    with open(run / "logs.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(row["update"]) for row in rows] == [2, 4, 6, 8, 10, 12]
    evaluated = [int(row["update"]) for row in rows if row["eval/solve_rate/SixteenRooms"]]
    assert evaluated == [4, 8, 12]
    names = [path.name for path in checkpoint.list_checkpoints(run / "checkpoints")]
    archived = [path.name for path in checkpoint.list_checkpoints(run / "checkpoints" / "archive")]
    assert names == ["update_00000008.msgpack", "update_00000012.msgpack"]
    assert archived == ["update_00000004.msgpack", "update_00000008.msgpack", "update_00000012.msgpack"]


def test_a_resume_at_or_past_its_end_trains_nothing_and_writes_nothing(tmp_path, finished_run, capsys):
    run = copy_of(finished_run, tmp_path)
    before = snapshot(run)
    for total_updates in (4, 2):
        run_script(dr, tiny(tmp_path, run_name=run.name, resume=True, total_updates=total_updates))
        stderr = capsys.readouterr().err
        assert f"is at update 4 and has reached --total-updates {total_updates}: nothing to train" in stderr
        assert "compiling" not in stderr and snapshot(run) == before


def start(tmp_path: Path, name: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "algos/dr.py", *TINY_FLAGS, "--runs-dir", str(tmp_path), "--run-name", name],
        cwd=REPO_ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "WANDB_MODE": "disabled"},
    )


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=lambda stop: stop.name)
def test_a_signal_right_after_the_folder_is_made_leaves_a_resumable_folder(tmp_path, stop, capsys):
    """A stop once the new folder holds its marker, before the chunk's compile: the compile is skipped, config.json
    written and the update-0 state saved, so --resume continues."""
    process = start(tmp_path, "early")
    while not (tmp_path / "early" / runs.MARKER).exists() and process.poll() is None:
        time.sleep(0.005)
    process.send_signal(stop)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 128 + stop, stderr  # stopped, not finished
    assert f"stopped by {stop.name}" in stderr and "Traceback" not in stderr, stderr
    assert "compiled training chunk" not in stderr, "a stop before the compile skips it"
    run = tmp_path / "early"
    assert [p.name for p in checkpoint.list_checkpoints(run / "checkpoints")] == ["update_00000000.msgpack"]
    run_script(dr, tiny(tmp_path, run_name="early", resume=True))
    assert "warning" not in capsys.readouterr().err, "a run stopped at update 0 has lost no log row"
    with open(run / "logs.csv") as handle:
        assert [int(row["update"]) for row in csv.DictReader(handle)] == [2, 4]


@pytest.mark.slow
def test_repeated_ctrl_c_during_the_compile_never_crashes(tmp_path):
    process = start(tmp_path, "pressed")
    while "compiling" not in process.stderr.readline():
        pass
    for _ in range(3):
        time.sleep(0.15)
        process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130 and "stopped by SIGINT" in stderr and "Traceback" not in stderr, stderr
    assert checkpoint.list_checkpoints(tmp_path / "pressed" / "checkpoints"), "resumable from update 0"


def no_space(descriptor):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("fills_at", [runs.MARKER, "config.json"])
def test_a_full_disk_at_start_is_one_line_and_leaves_no_folder(tmp_path, monkeypatch, fills_at):
    real_fsync, names = os.fsync, []

    def fills(descriptor):
        names.append(descriptor)
        if len(names) == (1 if fills_at == runs.MARKER else 2):
            no_space(descriptor)
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", fills)
    with pytest.raises(ConfigError, match=rf"could not write .*{fills_at} \(No space left on device\): free space"):
        run_script(dr, tiny(tmp_path / "runs", run_name="full"))
    assert list(tmp_path.iterdir()) == [], "the runs dir this attempt created is gone too"


def test_a_full_disk_at_resume_is_one_line_and_changes_nothing(tmp_path, finished_run, monkeypatch):
    run = copy_of(finished_run, tmp_path)
    before = snapshot(run)
    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(ConfigError, match=r"could not write .*config.json \(No space left on device\): free space"):
        run_script(dr, tiny(tmp_path, run_name=run.name, resume=True, total_updates=6))
    assert snapshot(run) == before


def test_a_full_disk_before_the_first_checkpoint_says_to_start_over(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "save", lambda *_: no_space(None))
    with pytest.raises(ConfigError, match="No space left on device.*no checkpoint yet: .*start over with --overwrite"):
        run_script(dr, tiny(tmp_path, run_name="full"))


def test_runs_dir_that_is_a_file_is_one_line_and_changes_nothing(tmp_path):
    a_file = tmp_path / "afile"
    a_file.write_text("not a folder")
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match=f"--runs-dir {a_file} is not a folder \\({a_file} is a file\\)"):
        run_script(dr, tiny(a_file, run_name="r"))
    with pytest.raises(ConfigError, match=f"^cannot resume {a_file}/r: {a_file} is a file, not a folder$"):
        parse_command_line(dr.Config, "", ["--resume", "--runs-dir", str(a_file), "--run-name", "r"])
    assert snapshot(tmp_path) == before


def test_resuming_a_missing_run_says_it_does_not_exist(tmp_path):
    resume = ["--resume", "--runs-dir", str(tmp_path), "--run-name", "missing"]
    missing = f"^cannot resume {tmp_path}/missing: it does not exist \\(there is no 'missing' in {tmp_path}\\)$"
    with pytest.raises(ConfigError, match=missing):
        parse_command_line(dr.Config, "", resume)
    with pytest.raises(ConfigError, match=missing):
        run_script(dr, tiny(tmp_path, run_name="missing", resume=True))
    resume[2] = str(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match=f"nowhere/missing: it does not exist, nor does {tmp_path}/nowhere$"):
        parse_command_line(dr.Config, "", resume)


def test_a_resume_with_another_script_names_both(tmp_path, finished_run):
    run = copy_of(finished_run, tmp_path)
    before = snapshot(run)
    started_by = f"cannot resume {run} with algos/plr.py: algos/dr.py started it"
    one_line_error(
        cli("--resume", "--runs-dir", str(tmp_path), "--run-name", run.name, script="algos/plr.py"), started_by
    )
    with pytest.raises(ConfigError, match=started_by):
        run_script(
            plr, with_flags(plr.Config(), **{**TINY, "runs_dir": str(tmp_path), "run_name": run.name}, resume=True)
        )
    assert snapshot(run) == before


def test_an_archive_cut_off_by_a_kill_is_written_on_resume(tmp_path):
    """kill -9 (or a full disk) between a checkpoint's rename and its archive copy leaves the archive missing: the
    resume writes it from the checkpoint, byte for byte, before training on."""
    run = run_script(dr, tiny(tmp_path, run_name="cut", total_updates=4, archive_interval=4))
    archive = run / "checkpoints" / "archive" / "update_00000004.msgpack"
    kept = (run / "checkpoints" / "update_00000004.msgpack").read_bytes()
    archive.unlink()
    run_script(dr, tiny(tmp_path, run_name="cut", resume=True, total_updates=6, archive_interval=4))
    assert archive.read_bytes() == kept


def test_a_resume_refused_for_another_experiments_checkpoint_writes_nothing(tmp_path, finished_run):
    """A checkpoint of another --lr as the newest: the resume is refused, and writes nothing first (the fault trial:
    the due archives, the foreign checkpoint among them, were copied into checkpoints/archive/ before the refusal).
    Fails with the archives repaired before the checkpoint's config is checked."""
    run = copy_of(finished_run, tmp_path, "mixed")
    payload = checkpoint.read_payload(run / "checkpoints" / "update_00000004.msgpack")
    config = {**json.loads(payload["config"]), "lr": 0.5}
    foreign = serialization.msgpack_serialize({**payload, "update": 6, "config": json.dumps(config, sort_keys=True)})
    checkpoint.write_atomic(
        run / "checkpoints" / "update_00000006.msgpack",
        checkpoint.MAGIC + hashlib.sha256(foreign).hexdigest().encode() + b"\n" + foreign,
    )
    before = snapshot(run)
    with pytest.raises(ConfigError, match="a checkpoint saved with another config: the config differs in --lr"):
        run_script(dr, tiny(tmp_path, run_name="mixed", resume=True, total_updates=8, archive_interval=2))
    assert snapshot(run) == before


def test_only_process_0_repairs_archives_on_resume(tmp_path, monkeypatch):
    """In a multi-process run every process restores the checkpoint, but only process 0 holds the folder's lock and
    may write: another process writing the missing archive raced process 0's sweep of temporary files."""
    run = run_script(dr, tiny(tmp_path, run_name="cut", total_updates=4, archive_interval=4))
    archive = run / "checkpoints" / "archive" / "update_00000004.msgpack"
    archive.unlink()
    monkeypatch.setattr(devices.Placement, "is_main_process", property(lambda placement: False))
    run_script(dr, tiny(tmp_path, run_name="cut", resume=True, total_updates=4, archive_interval=4))
    assert not archive.exists(), "a process other than 0 wrote into the run folder"
    monkeypatch.undo()
    run_script(dr, tiny(tmp_path, run_name="cut", resume=True, total_updates=4, archive_interval=4))
    assert archive.exists(), "process 0 repairs it"


def test_a_copied_run_folder_resumes_where_it_is(tmp_path, finished_run, monkeypatch):
    """A run folder copied under another --runs-dir (its config.json still names the original one) trains and
    writes where it was copied to, given by --runs-dir or by the default runs/ of the working folder."""
    copied = copy_of(finished_run, tmp_path / "elsewhere", "moved")
    config = parse_command_line(
        dr.Config, "", ["--resume", "--runs-dir", str(tmp_path / "elsewhere"), "--run-name", "moved"], "algos/dr.py"
    )
    assert (config.run.runs_dir, config.run.run_name) == (str(tmp_path / "elsewhere"), "moved")
    monkeypatch.chdir(tmp_path)
    copy_of(copied, tmp_path / "runs", "here")
    config = parse_command_line(
        dr.Config, "", ["--resume", "--run-name", "here", "--total-updates", "6"], "algos/dr.py"
    )
    assert (config.run.runs_dir, config.run.run_name) == ("runs", "here")
    run_script(dr, config)
    assert checkpoint.list_checkpoints(tmp_path / "runs" / "here" / "checkpoints")[-1].name == "update_00000006.msgpack"
    assert checkpoint.list_checkpoints(finished_run / "checkpoints")[-1].name == "update_00000004.msgpack"


def test_names_and_paths_too_long_for_the_file_system_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="--run-name has a 300-byte name, 'rrrrrrrrrrrrrrrrrrrr'...: file systems"):
        tiny(tmp_path, run_name="r" * 300)
    with pytest.raises(ConfigError, match="--runs-dir has a 256-byte name"):
        tiny(tmp_path / ("d" * 256))
    deep = tmp_path.joinpath(*["d" * 200] * 20)
    with pytest.raises(ConfigError, match="--runs-dir and --run-name make a path of 4.* bytes"):
        tiny(deep)
    result = cli("--runs-dir", str(tmp_path), "--run-name", "r" * 300, *TINY_FLAGS)
    one_line_error(result, "--run-name has a 300-byte name")
    # --resume and the evaluate and report commands read the folder before any flag check: an OSError traceback
    one_line_error(cli("--runs-dir", str(tmp_path), "--run-name", "r" * 300, "--resume"), "300-byte name")
    long_folder = str(tmp_path / ("r" * 300))
    for command in (
        ["common.evaluate", "--run-dir", long_folder],
        ["common.report", long_folder, "--out", str(tmp_path)],
    ):
        # In its own process: the one refusal of each command checked with what the interpreter prints around it
        result = subprocess.run([sys.executable, "-m", *command], cwd=REPO_ROOT, capture_output=True, text=True)
        one_line_error(result, "300-byte name")
    assert list(tmp_path.iterdir()) == []


def test_a_run_of_zero_updates_is_refused_before_anything_is_made(tmp_path):
    result = cli("--runs-dir", str(tmp_path), "--run-name", "empty", *TINY_FLAGS, "--total-updates", "0")
    one_line_error(result, "--total-updates", "at least 1")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_second_signal_ends_a_chunk_that_runs_on(tmp_path):
    """Chunks of 2,000 updates (about 9 s here; a size too large for the machine may never end): the first Ctrl+C
    waits for the chunk under way, the second ends the process at once, saying so. The signals go a second into the
    second chunk: the first chunk's progress line says that it has begun, while the end of the compile leaves a
    loaded machine setting up the run for longer than a fixed wait."""
    flags = [*TINY_FLAGS, "--log-interval", "2000", "--total-updates", "6000", "--checkpoint-interval", "2000"]
    process = subprocess.Popen(
        [sys.executable, "algos/dr.py", *flags, "--runs-dir", str(tmp_path), "--run-name", "long"],
        cwd=REPO_ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "WANDB_MODE": "disabled"},
    )
    for line in process.stderr:
        if line.startswith("update 2000/6000"):
            break
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)
    time.sleep(0.2)
    started = time.perf_counter()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGINT and time.perf_counter() - started < 2, stderr
    assert "SIGINT again: ending now, in the middle of a chunk, without a checkpoint" in stderr
    assert "Traceback" not in stderr


def test_a_state_too_large_for_memory_is_one_line_before_anything_is_made(tmp_path):
    """An LSTM of 200,000 units: its parameters and Adam moments alone exceed any host; this once compiled, then
    hung. The state's size comes from its traced shapes, so nothing compiles."""
    result = cli("--runs-dir", str(tmp_path), "--run-name", "huge", "--lstm-size", "200000")
    one_line_error(result, "the training state alone takes", "GiB of this host's memory", "--lstm-size")
    assert list(tmp_path.iterdir()) == []


def test_programs_too_large_for_memory_are_refused_before_the_state_is_made(tmp_path, monkeypatch):
    """A host with room for ACCEL's state alone and no more (the fault trial's --buffer-size 100000000 took 19.9 GiB of
    23): the new run's state used to be made before its programs were checked, so the process grew past the host's
    memory before the one-line refusal could come. Now every program is compiled from the state's shapes and checked
    first: the refusal comes, the state was never made and no folder is left, whichever program does not fit. Fails
    with the state made before the compile (driver.train's old order)."""
    made = []

    def watched_make_train(config):
        functions = accel.make_train(config)

        def init(rngs):
            jax.debug.callback(lambda: made.append(True))  # runs when the state is made, not when it is traced
            return functions.init(rngs)

        return functions._replace(init=init)

    config = with_flags(accel.Config(), **TINY, runs_dir=str(tmp_path), run_name="big", buffer_size=4000)
    rngs = jax.random.split(jax.random.key(0), config.run.num_seeds)
    state = jax.eval_shape(accel.make_train(config).init, rngs)
    state_bytes = sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(state))
    making = jax.jit(accel.make_train(config).init).lower(rngs).compile().memory_analysis()
    making_bytes = making.argument_size_in_bytes + making.output_size_in_bytes + making.temp_size_in_bytes
    # Room for the state alone (its program is refused), then for making it but not for a chunk of training.
    for available, refused in ((state_bytes, "initial state"), (making_bytes, "training chunk")):
        monkeypatch.setattr(devices, "memory_per_device", lambda _, room=available: (room, "of this test's host"))
        with pytest.raises(DoesNotFit, match=f"the compiled {refused} takes .* of this test's host"):
            driver.run(config, watched_make_train, "algos/accel.py", accel.HEADLINE_METRICS)
        assert made == [] and list(tmp_path.iterdir()) == [], refused


@pytest.mark.slow
def test_a_chunk_too_large_for_memory_is_refused_before_it_runs(tmp_path):
    """3,000,000 envs: a state that fits, a rollout that does not (XLA counts about 13,000 GiB). The compiled
    chunk's own memory account refuses it in one line before it runs, and the new run leaves no folder. In a process
    of its own that compiles with XLA's fusion emitters, as the script does: the older emitter the tests compile with
    cannot compile this rollout's scatter of over 2**31 indices."""
    result = subprocess.run(
        [sys.executable, "algos/dr.py", "--runs-dir", str(tmp_path), "--run-name", "wide", "--num-envs", "3000000"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env={**environment_with_fusion_emitters(), "WANDB_MODE": "disabled"},
    )
    *progress, last = result.stderr.strip().splitlines()
    assert result.returncode == 2 and last.startswith("error: the compiled training chunk takes"), result.stderr
    assert all(line.startswith("compil") for line in progress), result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_ctrl_c_pressed_on_while_the_process_ends_prints_no_traceback(tmp_path):
    """Ctrl+C held down from the last chunk on: the stop is under way, and the presses that land during the
    interpreter's shutdown (jax's clean-up) used to print KeyboardInterrupt tracebacks and end with SIGINT."""
    process = start(tmp_path, "ending")
    for line in process.stderr:
        if line.startswith("reached --total-updates"):
            break
    while process.poll() is None:
        process.send_signal(signal.SIGINT)
        time.sleep(0.01)
    stderr = process.stderr.read()
    assert process.returncode == 0 and "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr


def test_a_read_only_run_folder_says_so_on_overwrite_and_resume(tmp_path, finished_run, monkeypatch):
    """The fault trial's read-only run folder: --overwrite ended in a PermissionError traceback and --resume said
    "free space and run again", which is not the cause. (As root a read-only folder never refuses a write, so the
    OSError is raised where the write happens.)"""
    run = copy_of(finished_run, tmp_path, "locked")

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(runs.shutil, "rmtree", refused)
    with pytest.raises(
        ConfigError, match=r"could not delete .* \(Permission denied\) for --overwrite: make the folder"
    ):
        run_script(dr, tiny(tmp_path, run_name="locked", overwrite=True))
    assert (run / runs.MARKER).exists(), "what could be deleted is gone; the marker stays for the next --overwrite"
    monkeypatch.undo()
    run = copy_of(finished_run, tmp_path, "read_only")
    before = snapshot(run)
    monkeypatch.setattr(
        os, "fsync", lambda descriptor: (_ for _ in ()).throw(OSError(errno.EROFS, "Read-only file system"))
    )
    with pytest.raises(ConfigError, match=r"config.json \(Read-only file system\): make the folder writable"):
        run_script(dr, tiny(tmp_path, run_name="read_only", resume=True, total_updates=6))
    assert snapshot(run) == before
