"""The driver contract (common/contract.py): every script keeps it; a Config missing a declared piece fails in one
line before anything compiles; and the pure `train` of `over_seeds` is the run the command line makes, for every
stop criterion it accepts (a toy's for its slowest seed's budget and its evaluation rows), refusing the wall-clock
one."""

import importlib
import importlib.util
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import dr, plr
from common import driver
from common.config import with_flags
from common.contract import BatchedOverSeeds, check_config, check_functions, whole_run
from common.errors import ConfigError
from tests.states import assert_states_close, newest_state, run_script

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ("dr", "paired", "plr", "accel", "plr_parallel", "accel_parallel", "sfl")
SCHEDULE_PROPERTY = '''    @property
    def schedule_spans_run(self) -> bool:
        """The learning rate anneals over the run: a resume keeps its length."""
        return self.ppo.anneal_lr

'''
TINY = dict(
    num_seeds=2,
    num_envs=4,
    num_steps=8,
    lstm_size=8,
    maze_size=5,
    n_walls=3,
    max_steps=6,
    log_interval=2,
    eval_mazes=("SixteenRooms",),
    eval_episodes=2,
    checkpoint_interval=2,
    screenshot_interval=0,
)


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_keeps_the_contract(name, tmp_path):
    module = importlib.import_module(f"algos.{name}")
    config = with_flags(module.Config(), runs_dir=str(tmp_path), num_envs=4)
    check_config(config, f"algos/{name}.py")
    functions = check_functions(module.make_train(config), f"algos/{name}.py")
    assert "student" in functions.policies and functions.placement.num_devices == 1


def test_a_config_missing_a_declared_piece_fails_in_one_line_before_compiling(tmp_path, monkeypatch, capsys):
    source = (REPO_ROOT / "algos" / "dr.py").read_text()
    assert source.count(SCHEDULE_PROPERTY) == 1, "algos/dr.py no longer declares schedule_spans_run this way"
    path = tmp_path / "algos" / "dr_without_schedule.py"
    path.parent.mkdir(parents=True)
    path.write_text(source.replace(SCHEDULE_PROPERTY, ""))
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts its repo root first
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, path.stem, module)  # tyro reads the Config's source through its module
    spec.loader.exec_module(module)
    runs = tmp_path / "runs"
    monkeypatch.setattr(sys, "argv", [str(path), "--runs-dir", str(runs), "--num-envs", "4", "--total-updates", "20"])
    with pytest.raises(SystemExit) as exit_status:
        driver.main(module.Config, module.make_train, module.__doc__, str(path), module.HEADLINE_METRICS)
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_status.value.code == 2
    assert lines == [
        f"error: algos/{path.name} breaks the driver contract: its Config does not declare schedule_spans_run "
        "(whether a schedule spans the run's length, a bool)"
    ]
    assert not runs.exists(), "no run folder may be made for a script that breaks the contract"


def test_make_train_must_return_over_seeds(tmp_path):
    config = with_flags(dr.Config(), runs_dir=str(tmp_path), num_envs=4)
    functions = dr.make_train(config)
    with pytest.raises(ConfigError, match="make_train must return common.contract.over_seeds"):
        driver.run(config, lambda config: tuple(functions), "algos/dr.py", ())
    with pytest.raises(ConfigError, match="with a 'student' policy"):
        driver.run(config, lambda config: functions._replace(policies={}), "algos/dr.py", ())
    with pytest.raises(ConfigError, match="its Config's env_steps_per_update is 0, not env steps one update"):
        check_config(type("Config", (), {"run": config.run, "env_steps_per_update": 0, "schedule_spans_run": 1})(), "x")
    assert isinstance(functions, BatchedOverSeeds)
    assert not (tmp_path / config.run.run_name).exists()


def drive(functions: BatchedOverSeeds, config, keys):
    """The driver's schedule by hand: chunks until a stop criterion, evaluations at multiples of --eval-interval."""
    run = config.run
    runner, update, metrics, evaluations = jax.jit(functions.init)(keys), 0, [], []
    step, evaluate = jax.jit(functions.step), jax.jit(functions.evaluate)
    while update < run.total_updates and (
        run.total_env_steps is None or update * config.env_steps_per_update < run.total_env_steps
    ):
        if run.total_student_updates and int(np.min(functions.student_updates(runner))) >= run.total_student_updates:
            break
        runner, chunk_metrics = step(runner)
        update += run.log_interval
        metrics.append(chunk_metrics)
        if run.eval_interval and update % run.eval_interval == 0:
            evaluations.append(evaluate(runner))
    return runner, metrics, evaluations


def assert_train_is_the_driven_run(module, config):
    functions = module.make_train(config)
    keys = jax.random.split(jax.random.key(config.run.seed), config.run.num_seeds)
    runner, (metrics, evaluations) = jax.jit(functions.train)(keys)
    driven, driven_metrics, driven_evaluations = drive(functions, config, keys)
    assert_states_close(runner, driven)
    for key, rows in metrics.items():
        np.testing.assert_array_equal(rows[: len(driven_metrics)], np.stack([m[key] for m in driven_metrics]))
        unrun = np.asarray(rows[len(driven_metrics) :])
        assert (np.isnan(unrun) if unrun.dtype.kind == "f" else unrun == 0).all(), key
    for key, rows in evaluations.items():
        np.testing.assert_array_equal(rows[: len(driven_evaluations)], np.stack([e[key] for e in driven_evaluations]))
        assert np.isnan(rows[len(driven_evaluations) :]).all(), key
    return runner, driven_metrics, driven_evaluations


@pytest.mark.slow
def test_train_runs_to_total_updates_when_it_is_no_multiple_of_the_evaluation_interval(tmp_path):
    """--total-updates 6, --eval-interval 4: three chunks and one evaluation, as the command line makes them (the
    run folder's checkpoint at update 6 is train's state), where evaluation periods alone would stop at update 4."""
    config = with_flags(dr.Config(), **TINY, runs_dir=str(tmp_path), total_updates=6, eval_interval=4)
    runner, metrics, evaluations = assert_train_is_the_driven_run(dr, config)
    assert len(metrics) == 3 and len(evaluations) == 1
    assert_states_close(runner, newest_state(dr, config, run_script(dr, config)))


@pytest.mark.slow
def test_train_stops_on_the_student_update_budget_and_on_env_steps(tmp_path):
    """Robust PLR learns only on replay updates: a budget of 3 student updates ends it, at a chunk that depends on
    its replay decisions, with the command line's chunks; --total-env-steps ends DR after the chunk that reaches it."""
    config = with_flags(
        plr.Config(),
        **TINY,
        runs_dir=str(tmp_path),
        buffer_size=8,
        total_updates=20,
        eval_interval=4,
        total_student_updates=3,
    )
    runner, metrics, _ = assert_train_is_the_driven_run(plr, config)
    assert 0 < len(metrics) < 10 and np.min(runner.student_updates) >= 3
    assert_states_close(runner, newest_state(plr, config, run_script(plr, config)))
    dr_config = with_flags(dr.Config(), **TINY, runs_dir=str(tmp_path), total_updates=10, eval_interval=4)
    steps = dr_config.env_steps_per_update
    _, metrics, evaluations = assert_train_is_the_driven_run(dr, with_flags(dr_config, total_env_steps=3 * steps))
    assert len(metrics) == 2 and len(evaluations) == 1


def test_train_refuses_a_wall_clock_limit(tmp_path):
    config = with_flags(dr.Config(), **TINY, runs_dir=str(tmp_path), total_updates=2, train_seconds=60.0)
    keys = jax.random.split(jax.random.key(0), 2)
    with pytest.raises(ConfigError, match="train cannot stop on --train-seconds"):
        jax.eval_shape(dr.make_train(config).train, keys)  # traced only: refused before anything compiles


def test_a_step_without_the_health_metric_is_named_before_the_run_folder_is_made(tmp_path):
    """The step's metrics must carry health/finite; tracing the step (a toy one) finds out before any folder exists."""
    config = with_flags(dr.Config(), runs_dir=str(tmp_path), num_envs=4, total_updates=2, log_interval=1)
    functions = dr.make_train(config)

    def make_train(config):
        return functions._replace(step=lambda runner: (runner, {"train/return": jnp.zeros((1, 1))}))

    with pytest.raises(ConfigError, match="algos/toy.py breaks the driver contract: its step's metrics have no health"):
        driver.run(with_flags(config, eval_interval=0, screenshot_interval=0), make_train, "algos/toy.py", ())
    assert not (tmp_path / config.run.run_name).exists()


def toy_run(config, first_student_updates):
    """`whole_run` of a toy without a network: every seed takes one student update per update, from
    `first_student_updates` ([seeds]), and evaluates to its count."""

    def step(runner):
        updates = config.run.log_interval
        return runner + updates, {"train/loss": jnp.zeros((len(first_student_updates), updates))}

    return whole_run(
        config,
        init=lambda rngs: jnp.array(first_student_updates, jnp.int32),
        step=step,
        evaluate=lambda runner: {"eval/score": runner.astype(jnp.float32)},
        student_updates=lambda runner: runner,
    )


def test_train_runs_until_its_slowest_seed_has_the_student_updates(tmp_path):
    """Seeds at 3 and 0 student updates with a budget of 3: one seed has it, the other not, so training goes on
    (chunks of 2 updates) until both have it."""
    config = with_flags(dr.Config(), runs_dir=str(tmp_path), total_updates=10, log_interval=2, eval_interval=0)
    train = toy_run(with_flags(config, total_student_updates=3), [3, 0])
    runner, (metrics, _) = train(jax.random.split(jax.random.key(0), 2))
    assert runner.tolist() == [7, 4]
    assert np.isfinite(metrics["train/loss"]).all(axis=(1, 2)).tolist() == [True, True, False, False, False]


def test_train_holds_one_row_per_evaluation_the_run_reaches(tmp_path):
    """--total-updates 6, --eval-interval 4, --log-interval 2: three chunks, an evaluation after the second only, and
    no row for one the run never reaches."""
    config = with_flags(dr.Config(), runs_dir=str(tmp_path), total_updates=6, eval_interval=4, log_interval=2)
    _, (metrics, evaluations) = toy_run(config, [0, 0])(jax.random.split(jax.random.key(0), 2))
    assert metrics["train/loss"].shape == (3, 2, 2)
    np.testing.assert_array_equal(evaluations["eval/score"], [[4.0, 4.0]])


@pytest.mark.parametrize(
    ("steps", "spans", "wrong"),
    [(True, False, "env_steps_per_update is True"), (32, 1, "schedule_spans_run is 1, not whether a schedule")],
)
def test_a_config_piece_of_the_wrong_type_is_refused(tmp_path, steps, spans, wrong):
    """A bool is an int to Python but no count of env steps; 1 is no bool. Each is refused with the others valid."""
    run = with_flags(dr.Config(), runs_dir=str(tmp_path)).run
    config = type("Config", (), {"run": run, "env_steps_per_update": steps, "schedule_spans_run": spans})()
    with pytest.raises(ConfigError, match=f"algos/toy.py breaks the driver contract: its Config's {wrong}"):
        check_config(config, "algos/toy.py")
