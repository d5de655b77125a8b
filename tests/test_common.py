"""common/: checkpoints, logs.csv on resume, resume rules, stop criteria, confidence intervals."""

import dataclasses
import errno
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import dr, paired, sfl
from common import checkpoint, runs
from common.config import check_resumable, divisors, flags_of, with_flags
from common.errors import ConfigError
from common.evaluate import describe, mean_and_interval
from common.runs import CsvLog, chunk_rows, compile_timed, read_log, stop_reason


def test_checkpoint_round_trip_with_typed_keys(tmp_path):
    state = {"rng": jax.random.split(jax.random.key(3), 2), "w": jnp.arange(6.0).reshape(2, 3), "n": jnp.int32(7)}
    path = checkpoint.save(tmp_path / "c.msgpack", state, update=12, config={"lr": 0.1})
    restored, update, config = checkpoint.load(path, jax.eval_shape(lambda: state))
    assert update == 12 and config == {"lr": 0.1}
    np.testing.assert_array_equal(jax.random.key_data(restored["rng"]), jax.random.key_data(state["rng"]))
    np.testing.assert_array_equal(restored["w"], state["w"])
    assert restored["n"].dtype == jnp.int32
    assert not list(tmp_path.glob(".*tmp*")), "no temporary file may be left behind"


def test_damaged_and_foreign_checkpoints_are_refused_saying_which(tmp_path):
    """Each way a file can fail to be this run's checkpoint gets its own message: a long file without the header
    (bad header), one cut right after it or with garbled bytes in its checksum (truncated or corrupted: the
    checksum is read with bad bytes replaced, not raised on), one of another runner state or of another shape
    (does not match, naming the shapes). Fails with the header check needing both faults, a cut at the header
    called a bad header, another decode error handler, or any message dropped (mutmut's survivors of read_payload
    and load)."""
    state = {"w": jnp.arange(3.0)}
    good = checkpoint.save(tmp_path / "good.msgpack", state, update=2, config={})
    data = good.read_bytes()
    header = len(checkpoint.MAGIC) + 65
    cases = [
        ("not a cleanued checkpoint (bad header)", b"x" * (2 * header)),
        ("truncated or corrupted (checksum mismatch)", data[:header]),
        ("truncated or corrupted (checksum mismatch)", checkpoint.MAGIC + b"\xff" * 64 + b"\n" + data[header:]),
    ]
    for message, content in cases:
        path = tmp_path / "damaged.msgpack"
        path.write_bytes(content)
        with pytest.raises(checkpoint.CheckpointError, match=re.escape(f"{path} is {message}")):
            checkpoint.load(path, jax.eval_shape(lambda: state))
    with pytest.raises(checkpoint.CheckpointError, match=re.escape(f"{good} does not match this config's runner")):
        checkpoint.load(good, {"other": jax.ShapeDtypeStruct((3,), jnp.float32)})
    shapes = "does not match this config's runner state (an array of shape (3,), expected (4,))"
    with pytest.raises(checkpoint.CheckpointError, match=re.escape(f"{good} {shapes}")):
        checkpoint.load(good, {"w": jax.ShapeDtypeStruct((4,), jnp.float32)})


def test_write_atomic_makes_missing_folders_and_a_failed_open_raises_its_own_error(tmp_path, monkeypatch):
    """A file several new folders deep is written; when even the temporary file cannot be opened (a full disk),
    that error is what the caller sees, not a FileNotFoundError from removing a temporary file that never existed.
    Fails with the folders made one level only, or the clean-up insisting on the temporary file (mutmut's survivors
    of write_atomic)."""
    deep = tmp_path / "a" / "b" / "c.bin"
    checkpoint.write_atomic(deep, b"data")
    assert deep.read_bytes() == b"data"

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint, "open", full_disk, raising=False)
    with pytest.raises(OSError) as error:
        checkpoint.write_atomic(tmp_path / "d.bin", b"data")
    assert error.value.errno == errno.ENOSPC


def test_checkpoint_rotation_and_archive(tmp_path):
    checkpoints = checkpoint.Checkpoints(tmp_path, keep=2, archive_interval=20, config={})
    for update in (10, 20, 30, 40):
        checkpoints.save({"x": jnp.float32(update)}, update)
    assert [p.name for p in checkpoint.list_checkpoints(tmp_path / "checkpoints")] == [
        "update_00000030.msgpack",
        "update_00000040.msgpack",
    ]
    assert [p.name for p in checkpoint.list_checkpoints(tmp_path / "checkpoints" / "archive")] == [
        "update_00000020.msgpack",
        "update_00000040.msgpack",
    ]
    state, update, config, path = checkpoints.restore({"x": jax.ShapeDtypeStruct((), jnp.float32)})
    assert update == 40 and float(state["x"]) == 40 and config == {} and path.name == "update_00000040.msgpack"
    three = checkpoint.Checkpoints(tmp_path / "three", keep=3, archive_interval=0, config={})
    for update in (10, 20, 30):
        three.save({"x": jnp.float32(update)}, update)
    assert three.newest().name == "update_00000030.msgpack", "the newest of three kept, not the second"
    one = checkpoint.Checkpoints(tmp_path / "one", keep=1, archive_interval=0, config={})
    for update in (10, 20, 30):
        one.save({"x": jnp.float32(update)}, update)
    assert [path.name for path in checkpoint.list_checkpoints(tmp_path / "one" / "checkpoints")] == [
        "update_00000030.msgpack"
    ], "--keep-checkpoints 1 keeps one"


def test_restore_writes_nothing_archive_due_repairs_a_missing_archive_and_a_corrupt_checkpoint_is_named(tmp_path):
    """A kill between a checkpoint and its archive copy: `restore` leaves it missing (the driver repairs it once the
    checkpoint is known to be the run's: a refused resume writes nothing), `archive_due` writes it and returns it.
    A corrupt newest checkpoint is refused with what to do. Only the missing archive on the interval is written
    (update 10's checkpoint is kept, not archived). Fails with a repair in restore, the advice dropped, or a
    checkpoint off the interval or already archived written (mutmut's survivors of restore and archive_due)."""
    checkpoints = checkpoint.Checkpoints(tmp_path, keep=2, archive_interval=20, config={})
    for update in (10, 20):
        checkpoints.save({"x": jnp.float32(update)}, update)
    archive = tmp_path / "checkpoints" / "archive" / "update_00000020.msgpack"
    archive.unlink()
    template = {"x": jax.ShapeDtypeStruct((), jnp.float32)}
    checkpoints.restore(template)
    assert not archive.exists()
    assert checkpoints.archive_due() == [archive] and checkpoints.archive_due() == []
    assert [path.name for path in checkpoint.list_checkpoints(archive.parent)] == ["update_00000020.msgpack"]
    newest = tmp_path / "checkpoints" / "update_00000020.msgpack"
    newest.write_bytes(newest.read_bytes()[:-10])
    with pytest.raises(checkpoint.CheckpointError, match="update_00000020.msgpack.*; delete it to resume from the"):
        checkpoints.restore(template)


def test_csv_log_drops_rows_past_the_checkpoint_on_resume(tmp_path):
    path = tmp_path / "logs.csv"
    log = CsvLog(path, ["seed", "update", "env_steps", "a"])
    log.write([{"seed": 0, "update": u, "env_steps": 8 * u, "a": float(u)} for u in (10, 20, 30)])
    resumed = CsvLog(path, ["seed", "update", "env_steps", "a", "b"], read_log(path, resume_update=20))
    resumed.write([{"seed": 0, "update": 30, "env_steps": 240, "a": 3.0, "b": float("nan")}])
    lines = path.read_text().splitlines()
    assert lines == ["seed,update,env_steps,a,b", "0,10,80,10,", "0,20,160,20,", "0,30,240,3,"]
    # A resume that no longer logs `a` keeps its column (and earlier values) first; six significant digits.
    again = CsvLog(path, ["seed", "update", "env_steps", "b"], read_log(path, resume_update=30))
    again.write([{"seed": 0, "update": 40, "env_steps": 320, "b": 0.123456789}])
    assert path.read_text().splitlines()[-2:] == ["0,30,240,3,", "0,40,320,,0.123457"]
    (warning,) = read_log(path, resume_update=41).warnings  # even one update past the last row is a lost row
    assert warning == f"{path} ends at update 40 but the checkpoint is at 41: those rows are lost"


def test_divisors_of_a_square_come_once_and_flags_that_exclude_each_other_are_refused():
    """A square's root is one divisor, not two (the refusal's list of --log-interval values said '10, 10'); --resume
    with --overwrite and an even --agent-view-size are refused in code as on the command line (the mutation trial's
    survivors of divisors and the Config checks)."""
    assert list(divisors(100)) == [100, 50, 25, 20, 10, 5, 4, 2, 1]
    with pytest.raises(ConfigError, match="--resume and --overwrite exclude each other"):
        with_flags(dr.Config(), resume=True, overwrite=True)
    with pytest.raises(ConfigError, match="--agent-view-size must be odd, got 4"):
        with_flags(dr.Config(), agent_view_size=4)


def test_resume_rules_list_every_differing_flag():
    started = with_flags(dr.Config(), total_updates=100, log_interval=10, lr=1e-4, num_envs=32, seed=0)
    saved = flags_of(started)
    check_resumable(saved, with_flags(started, total_updates=500, log_interval=5, num_devices=2), "run")
    with pytest.raises(ConfigError) as error:
        check_resumable(saved, with_flags(started, num_envs=16, lr=3e-4, seed=1, total_updates=500), "run")
    assert str(error.value) == (
        "cannot resume run: the config differs in --lr: saved 0.0001, now 0.0003; --num-envs: saved 32, now 16; "
        "--seed: saved 0, now 1"
    )


@pytest.mark.parametrize(
    ("module", "schedule"), [(dr, {"anneal_lr": True}), (paired, {"teacher_anneal_lr": True}), (sfl, {})]
)
def test_a_schedule_over_the_run_fixes_its_length_on_resume(module, schedule):
    started = with_flags(module.Config(), total_updates=100, log_interval=10, **schedule)
    assert started.schedule_spans_run
    with pytest.raises(ConfigError, match="--total-updates: saved 100, now 500"):
        check_resumable(flags_of(started), with_flags(started, total_updates=500), "run")
    with pytest.raises(ConfigError, match="--total-student-updates: saved None, now 50"):
        check_resumable(flags_of(started), with_flags(started, total_student_updates=50), "run")
    unscheduled = with_flags(started, **{"anneal_lr": False, **{name: False for name in schedule}})
    assert not unscheduled.schedule_spans_run
    check_resumable(flags_of(unscheduled), with_flags(unscheduled, total_updates=500), "run")


def test_stop_reasons():
    """Each limit stops a run once it is reached, not only once it is passed. Fails with `>` for `>=` in any of
    them (mutmut's survivor of stop_reason 10: --train-seconds)."""

    @dataclasses.dataclass
    class Limits:
        total_updates: int = 100
        total_student_updates: int | None = 40
        total_env_steps: int | None = 5000
        train_seconds: float | None = 60.0

    assert stop_reason(Limits(), 10, 100, 1.0, 5) is None
    assert "total-updates" in stop_reason(Limits(), 100, 100, 1.0, 5)
    assert "total-student-updates 40" in stop_reason(Limits(), 10, 100, 1.0, 40), "the fewest of any seed"
    assert "total-env-steps" in stop_reason(Limits(), 10, 5000, 1.0, 5)
    assert "train-seconds" in stop_reason(Limits(), 10, 100, 60.0, 5)
    assert stop_reason(Limits(), 99, 4999, 59.9, 39) is None


def test_compile_timed_returns_the_compiled_program_and_says_how_long_it_took(capsys, monkeypatch):
    """Fails with the line's text, its time or its stream changed (mutmut's survivors of compile_timed 4-8)."""
    clock = iter([10.0, 12.5])
    monkeypatch.setattr(runs.time, "perf_counter", lambda: next(clock))
    compiled = compile_timed("double", jax.jit(lambda x: 2 * x), jnp.ones(3))
    assert compiled(jnp.ones(3)).tolist() == [2.0, 2.0, 2.0]
    assert capsys.readouterr().err == "compiled double in 2.5s\n"


def test_chunk_rows_average_each_seed_and_skip_missing_episodes():
    metrics = {
        "train/return": np.array([[0.5, np.nan], [np.nan, np.nan]]),
        "ppo/loss": np.array([[1.0, 3.0], [2.0, 2.0]]),
    }
    rows = chunk_rows(metrics, 20, 640, wall_time=3.0, env_steps_per_s=100.0, student_updates=np.array([7, 9]))
    assert rows[0]["train/return"] == 0.5 and rows[0]["ppo/loss"] == 2.0
    assert [row["student_updates"] for row in rows] == [7, 9]
    assert np.isnan(rows[1]["train/return"]) and rows[1]["seed"] == 1
    assert json.dumps(rows[0]["update"]) == "20"


def test_interval_over_seeds_is_student_t_clipped_and_absent_below_three_seeds():
    values = [0.6, 0.8, 1.0, 1.0, 1.0]
    mean, (low, high) = mean_and_interval(values)
    half_width = 2.776 * np.std(values, ddof=1) / np.sqrt(5)  # t(0.975, 4 degrees of freedom) = 2.776
    assert mean == pytest.approx(0.88) and low == pytest.approx(0.88 - half_width, abs=1e-3)
    assert 0.88 + half_width > 1.0 and high == 1.0, "clipped to the metric's range"
    assert mean_and_interval([0.0, 1.0]) == (0.5, None), "two seeds: a t-interval would be 0.5 +- 6.35"
    assert describe([0.0, 1.0]) == "0.500" and describe([0.5, 0.5, 0.5]) == "0.500 [0.500, 0.500]"
