"""The driver's loop (common/driver.py) on a toy script with no network, whose programs compile in moments: the health
check stops on any seed's non-finite update, each seed's row holds its own evaluation, a resume counts its env steps
and its slowest seed's student updates as a fresh run does and continues the earlier run's clock, and each level's
picture label holds its own numbers."""

import csv
import functools
import itertools
from types import SimpleNamespace

import jax.numpy as jnp
import pytest

from algos import dr
from common import driver
from common.config import with_flags
from common.contract import FINITE_METRIC, BatchedOverSeeds
from common.devices import Placement

SCRIPT = "algos/toy.py"
TOY = dict(
    num_seeds=2, num_envs=4, num_steps=8, total_updates=2, log_interval=2, eval_interval=0, checkpoint_interval=2,
    screenshot_interval=0,
)  # fmt: skip


def toy(tmp_path, **flags) -> dr.Config:
    """dr's Config for its run settings (folders, stop criteria, intervals); the functions are `toy_make_train`'s."""
    return with_flags(dr.Config(), **{**TOY, "runs_dir": str(tmp_path), "run_name": "toy", **flags})


def toy_make_train(learns=(1, 2), finite=((True, True), (True, True)), scores=(0.25, 0.75)):
    """A `make_train` whose seed s takes learns[s] student updates per update, reports `finite` ([seeds, updates] of
    every chunk) as its health and scores[s] when evaluated."""

    def make_train(config):
        updates = config.run.log_interval

        def step(runner):
            learned = runner["student_updates"] + updates * jnp.array(learns, jnp.int32)
            metrics = {FINITE_METRIC: jnp.array(finite), "train/loss": jnp.ones((len(learns), updates))}
            return {**runner, "student_updates": learned}, metrics

        return BatchedOverSeeds(
            init=lambda rngs: {"student_updates": jnp.zeros(rngs.shape, jnp.int32), "weights": jnp.zeros(rngs.shape)},
            step=step,
            evaluate=lambda runner: {"eval/score": runner["weights"] + jnp.array(scores)},
            levels=lambda runner: (runner["weights"], {}),
            train=None,  # the driver never calls the pure run
            student_updates=lambda runner: runner["student_updates"],
            policies={"student": lambda runner: runner["weights"]},
            placement=Placement(mesh=None, shard_envs=False),
            one_seed=None,  # only a --sweep reads it
        )

    return make_train


def logged(run_dir) -> list[dict]:
    with open(run_dir / "logs.csv", newline="") as file:
        return list(csv.DictReader(file))


def snapshot(directory) -> dict:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_one_seeds_single_non_finite_update_stops_the_run_naming_that_seed(tmp_path):
    """Seed 1 goes non-finite on the chunk's last update only: the check must look at every update of every seed."""
    make_train = toy_make_train(finite=((True, True), (True, False)))
    with pytest.raises(SystemExit, match=r"non-finite loss or parameters in updates 1-2 \(seeds \[1\]\); last good"):
        driver.run(toy(tmp_path), make_train, SCRIPT, ())


def test_each_seeds_evaluation_lands_in_its_own_row(tmp_path):
    run_dir = driver.run(toy(tmp_path, eval_interval=2), toy_make_train(scores=(0.25, 0.75)), SCRIPT, ())
    assert [(row["seed"], float(row["eval/score"])) for row in logged(run_dir)] == [("0", 0.25), ("1", 0.75)]


def test_a_resume_trains_until_its_slowest_seed_has_the_student_updates(tmp_path, capsys):
    """After 2 updates the seeds have taken 2 and 4 student updates: a budget of 4 is reached by one seed, not by
    all, so the resume must train on, to update 4."""
    run_dir = driver.run(toy(tmp_path), toy_make_train(learns=(1, 2)), SCRIPT, ())
    resumed = toy(tmp_path, resume=True, total_updates=10, total_student_updates=4)
    driver.run(resumed, toy_make_train(learns=(1, 2)), SCRIPT, ())
    assert "reached --total-student-updates 4; " in capsys.readouterr().err
    assert [(row["update"], row["student_updates"]) for row in logged(run_dir)] == [
        ("2", "2"), ("2", "4"), ("4", "4"), ("4", "8"),
    ]  # fmt: skip


def test_a_resume_that_has_its_env_steps_already_trains_nothing_and_writes_nothing(tmp_path, capsys):
    """2 updates of 4 envs x 8 steps are 64 env steps: --total-env-steps 64 is reached before the resume compiles."""
    run_dir = driver.run(toy(tmp_path), toy_make_train(), SCRIPT, ())
    before, _ = snapshot(run_dir), capsys.readouterr()
    driver.run(toy(tmp_path, resume=True, total_updates=10, total_env_steps=64), toy_make_train(), SCRIPT, ())
    stderr = capsys.readouterr().err
    assert "is at update 2 and has reached --total-env-steps 64: nothing to train" in stderr
    assert "compiling" not in stderr and snapshot(run_dir) == before


def test_a_resumed_runs_wall_time_continues_the_earlier_runs(tmp_path, monkeypatch):
    """On a clock that ticks one second per reading, both runs' chunks take the same seconds: the resumed row's
    wall_time is the first run's plus its own, never restarted from 0."""
    clock = SimpleNamespace(perf_counter=functools.partial(next, itertools.count(0.0)))
    monkeypatch.setattr(driver, "time", clock)
    run_dir = driver.run(toy(tmp_path), toy_make_train(), SCRIPT, ())
    first = float(logged(run_dir)[0]["wall_time"])
    driver.run(toy(tmp_path, resume=True, total_updates=4), toy_make_train(), SCRIPT, ())
    assert first > 0 and [float(row["wall_time"]) for row in logged(run_dir)] == [first, first, 2 * first, 2 * first]


def test_each_levels_label_holds_its_own_numbers():
    labels = driver.level_labels({"score": [0.125, 0.5], "mutations": [3, 7]})
    assert labels == ["score 0.125 mutations 3", "score 0.5 mutations 7"]
