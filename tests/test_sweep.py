"""--sweep (common/sweep.py): the grid's points; a point of a 2-point x 2-seed sweep equals the same config run alone
with those seeds, in every script; a name a sweep cannot take is refused in one line before a folder is made; a
resumed sweep equals it uninterrupted; evaluate and report name each point; the pieces (the names a sweep may take,
each point's config, the refusal's message, entry keys, per-point stops) are checked alone. Mutation checked by
hand: with `with_values` leaving the config as it is (every point trains the unswept value), the per-script equality
fails for the point whose value differs."""

import csv
import dataclasses
import importlib
import json
import math
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import dr
from common import devices, sweep
from common.config import check_resumable, flag, flags_of, parse_command_line, with_flags
from common.contract import FINITE_METRIC
from common.errors import ConfigError, DoesNotFit
from common.runs import RunLog, WandbLogger
from tests.states import assert_states_close, newest_state, run_script

TINY = dict(
    num_seeds=2,
    num_envs=4,
    num_steps=8,
    max_steps=8,
    maze_size=5,
    n_walls=3,
    lstm_size=8,
    total_updates=4,
    log_interval=2,
    eval_interval=0,
    checkpoint_interval=2,
    screenshot_interval=0,
)
SCRIPTS = {
    "dr": (dict(), "lr", (1e-4, 3e-4)),
    "plr": (dict(buffer_size=8), "temperature", (0.3, 1.0)),
    "accel": (dict(buffer_size=8), "staleness_coef", (0.5, 0.3)),
    "plr_parallel": (dict(buffer_size=8), "temperature", (0.3, 1.0)),
    "accel_parallel": (dict(buffer_size=12), "staleness_coef", (0.5, 0.3)),
    "paired": (dict(teacher_lstm_size=8, teacher_conv_filters=4), "teacher_lr", (1e-4, 3e-4)),
    "sfl": (
        dict(refresh_interval=2, score_batches=1, score_batch_size=8, score_steps=8, buffer_size=4),
        "gamma",
        (0.99, 0.9),
    ),
}
"""Each script's tiny settings and a name it can sweep, with two values."""


def test_points_are_the_product_or_the_zip_of_the_lists():
    grid = sweep.parse_sweep(("lr=1e-4,3e-4", "temperature=0.1,0.3,1"), zipped=False)
    assert grid.names == ("lr", "temperature") and len(grid.points) == 6
    assert grid.points[0] == {"lr": 1e-4, "temperature": 0.1} and grid.points[1] == {"lr": 1e-4, "temperature": 0.3}
    assert grid.label(5) == "lr=0.0003 temperature=1"
    close = sweep.parse_sweep(("lr=1e-4,1.000001e-4", "gamma=0.99,0.995"), zipped=False)
    assert [close.label(point) for point in range(4)] == [
        "lr=0.0001 gamma=0.99",
        "lr=0.0001 gamma=0.995",
        "lr=0.0001000001 gamma=0.99",
        "lr=0.0001000001 gamma=0.995",
    ]
    alone = sweep.parse_sweep(("lr=1.000001e-4,3e-4",), zipped=False)
    assert [alone.label(point) for point in range(2)] == ["lr=0.0001000001", "lr=0.0003"], "a value's own digits"
    paired = sweep.parse_sweep(("lr=1e-4,3e-4", "--ent-coef=0,0.01"), zipped=True)
    assert paired.points == ({"lr": 1e-4, "ent_coef": 0.0}, {"lr": 3e-4, "ent_coef": 0.01})
    assert sweep.parse_sweep((), zipped=False) is None
    np.testing.assert_array_equal(sweep.entry_values(paired, 3)["lr"], np.float32([1e-4] * 3 + [3e-4] * 3))


def test_each_sweep_flag_adds_a_name():
    config = parse_command_line(dr.Config, "", ["--sweep", "lr=1e-4,3e-4", "--sweep", "gamma=0.9,0.99"])
    assert config.run.sweep == ("lr=1e-4,3e-4", "gamma=0.9,0.99")


@pytest.mark.parametrize(
    ("specs", "zipped", "fragment"),
    [
        (("lr",), False, "give NAME=V1,V2"),
        (("lr=1e-4,x",), False, "every value must be a finite number"),
        (("lr=nan,nan",), False, "every value must be a finite number"),
        (("lr=1e-4,inf",), False, "every value must be a finite number"),
        (("lr=1e-4,1e-4",), False, "a value twice"),
        (("lr=1e-4,1.000000001e-4",), False, "a value twice"),
        (("lr=1e-50,1e-4",), False, "--lr must be 0 or .* in size"),
        (("lr=1e-4", "lr=3e-4"), False, "twice: give its values in one list"),
        (("lr=1e-4,3e-4", "gamma=0.9"), True, "they need one length"),
        ((), True, "give --sweep too"),
    ],
)
def test_malformed_sweeps_are_one_line_errors(specs, zipped, fragment):
    with pytest.raises(ConfigError, match=fragment):
        sweep.parse_sweep(specs, zipped)


@dataclasses.dataclass(frozen=True)
class RunGroup:
    train_seconds: float = 60.0
    num_seeds: int = 1


@dataclasses.dataclass(frozen=True)
class PpoGroup:
    lr: float = 3e-4
    num_envs: int = 4
    anneal_lr: bool = True
    max_grad_norm: float | None = None


@dataclasses.dataclass(frozen=True)
class ScriptConfig:
    """A script's config in miniature: a method field, then its PPO and run groups."""

    temperature: float = 0.3
    ppo: PpoGroup = PpoGroup()
    run: RunGroup = RunGroup()


def test_a_sweep_may_name_the_plain_floats_outside_the_run_settings():
    """Of a script's fields, the floats of its own and its PPO settings, in order: not an int, a bool or an optional
    float, and not a float of the run settings (a stop criterion, no hyperparameter)."""
    assert sweep.float_fields(ScriptConfig()) == ["temperature", "lr"]


def test_with_values_sets_the_named_fields_of_a_copy_and_point_configs_validate_each_point():
    """`with_values` returns a copy holding the values in the named fields, the other fields and the config it was
    given unchanged; `point_configs` gives each point its config, or a one-line error naming the point out of range."""
    config = dr.Config()
    unswept = flags_of(config)
    changed = sweep.with_values(config, {"lr": 0.5, "gamma": 0.25})
    assert flags_of(changed) == {**unswept, "lr": 0.5, "gamma": 0.25}
    assert flags_of(config) == unswept, "the config given, and the defaults its groups share, stay as they were"
    grid = sweep.parse_sweep(("lr=1e-4,3e-4", "gamma=0.9,0.99"), zipped=True)
    assert [(point.ppo.lr, point.ppo.gamma) for point in sweep.point_configs(config, grid)] == [
        (1e-4, 0.9),
        (3e-4, 0.99),
    ]
    with pytest.raises(ConfigError, match=r"^--sweep point 1 \(lr=-1\): --lr must be positive"):
        sweep.point_configs(config, sweep.parse_sweep(("lr=1e-4,-1",), zipped=False))


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        (("gamma=0.9,0.99",), "--sweep --gamma changes a shape or a branch, or is not a float"),
        (("lr=1e-4,3e-4", "nope=1,2"), "--sweep --nope is not a setting of this script"),
        (("gamma=0.9,0.99", "nope=1,2"), "--sweep --nope is not a setting of this script"),
        (("num_envs=4,8",), "--sweep --num-envs changes a shape or a branch, or is not a float"),
        (("num_envs=4,8", "nope=1,2"), "--sweep --nope is not a setting of this script"),
        (("gamma=0.9,0.99", "num_envs=4,8"), "--sweep --gamma changes a shape or a branch, or is not a float"),
    ],
)
def test_a_refused_name_is_named_with_every_name_that_traces(monkeypatch, specs, message):
    """With tracing stood in for (every float traces but --gamma), `check_sweepable` passes names that trace and
    refuses the first name that is no setting, or else the first (in the order given) that is no float or does not
    trace, listing every candidate that traces, in order."""
    config = dr.Config()
    monkeypatch.setattr(sweep, "traces", lambda config, make_train, names: "gamma" not in names)
    sweep.check_sweepable(config, None, sweep.parse_sweep(("lr=1e-4,3e-4", "ent_coef=0,0.01"), zipped=False))
    takes = ", ".join(flag(name) for name in sweep.float_fields(config) if name != "gamma")
    with pytest.raises(ConfigError) as refused:
        sweep.check_sweepable(config, None, sweep.parse_sweep(specs, zipped=False))
    assert str(refused.value) == f"{message}; a sweep can take {takes}"


def test_entry_p_times_seeds_plus_s_starts_from_seed_s_key_and_stops_with_its_point():
    """A sweep's entries hold point p's seed s at p * num_seeds + s: the keys tiled over points start each entry from
    its seed's key; an entry stops once every seed of its point has reached the budget (3 here)."""
    keys = jax.random.split(jax.random.key(0), 3)
    np.testing.assert_array_equal(
        jax.random.key_data(sweep._tile_keys(keys, 2)), np.concatenate([jax.random.key_data(keys)] * 2)
    )
    updates = np.array([3, 2, 4, 3, 1, 1])  # two seeds per point: point 0 has a seed short of 3, point 1 none
    np.testing.assert_array_equal(sweep.stopped_entries(updates, 3, 2), [False, False, True, True, False, False])


def test_a_stopped_point_keeps_its_state_and_reports_a_chunk_not_run():
    """`stopping_each_point` on a stand-in step that counts updates: a point whose seeds all reached the budget keeps
    its state and reports a chunk not run (NaN for a float metric, 0 for an integer one, True for the finite flag);
    the other point steps and reports the step's own metrics."""

    def counting_step(runner):
        metrics = {"loss": jnp.full(4, 0.5), FINITE_METRIC: jnp.zeros(4, bool), "count": jnp.ones(4, jnp.int32)}
        return runner + 1, metrics

    stepped = sweep.stopping_each_point(counting_step, lambda runner: runner, budget=2, num_seeds=2)
    runner, metrics = stepped(jnp.array([2, 3, 1, 2]))
    np.testing.assert_array_equal(runner, [2, 3, 2, 3])
    np.testing.assert_array_equal(metrics["loss"], [np.nan, np.nan, 0.5, 0.5])
    np.testing.assert_array_equal(metrics[FINITE_METRIC], [True, True, False, False])
    np.testing.assert_array_equal(metrics["count"], [0, 0, 1, 1])


def config_of(name: str, tmp_path, **flags):
    module = importlib.import_module(f"algos.{name}")
    extra, _, _ = SCRIPTS[name]
    return module, with_flags(module.Config(), **{**TINY, **extra, "runs_dir": str(tmp_path), **flags})


@pytest.mark.slow
@pytest.mark.parametrize("name", SCRIPTS)
def test_a_point_equals_its_config_run_alone_and_a_shape_is_refused(name, tmp_path):
    _, swept_name, values = SCRIPTS[name]
    module, config = config_of(name, tmp_path, sweep=(f"{swept_name}={values[0]},{values[1]}",))
    functions = sweep.run_functions(config, module.make_train, f"algos/{name}.py")
    keys = jax.random.split(jax.random.key(config.run.seed), config.run.num_seeds)
    swept, metrics = jax.jit(functions.step)(jax.jit(functions.init)(keys))
    default = flags_of(config)[swept_name]
    for point, value in enumerate(values):
        if value == default:  # equal to the unswept config whatever the sweep does: the other point tells
            continue
        _, alone_config = config_of(name, tmp_path, **{swept_name: value})
        alone = module.make_train(alone_config)
        runner, alone_metrics = jax.jit(alone.step)(jax.jit(alone.init)(keys))
        seeds = slice(point * 2, point * 2 + 2)
        ours = jax.tree.map(lambda leaf, seeds=seeds: leaf[seeds], functions.policies["student"](swept))
        # Four entries vmapped sum in another order than two: equal up to float rounding.
        assert_states_close(ours, alone.policies["student"](runner), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(metrics["train/return"][seeds], alone_metrics["train/return"], rtol=1e-4, atol=1e-6)
    _, refused = config_of(name, tmp_path, run_name="refused", sweep=("num_envs=4,8",))
    with pytest.raises(ConfigError, match=r"--sweep --num-envs changes a shape or a branch.*a sweep can take .*--lr"):
        run_script(module, refused)
    assert not (tmp_path / "refused").exists()


def test_a_name_that_decides_a_branch_in_any_function_is_refused(tmp_path):
    """Not only init and step run with the traced values: evaluate, levels and the refresh before a chunk do too, and
    a Python branch there, once found only after the folder was made, is refused up front."""
    _, config = config_of("dr", tmp_path)

    def branching(config):
        functions = dr.make_train(config)
        one_seed = functions.one_seed

        def evaluate(runner):
            if config.ppo.gamma > 0.5:
                return one_seed.evaluate(runner)
            return one_seed.evaluate(runner)

        return functions._replace(one_seed=one_seed._replace(evaluate=evaluate))

    assert sweep.traces(config, branching, ("lr",)) and not sweep.traces(config, branching, ("gamma",))


def test_the_memory_check_counts_points_times_seeds(tmp_path, monkeypatch):
    """A host with room for the seeds' state but not for two points of them: the sweep is refused in one line
    before a folder is made; without the sweep the same state passes the check."""
    module, config = config_of("dr", tmp_path, run_name="wide", sweep=("lr=1e-4,3e-4",))
    alone = module.make_train(with_flags(config, sweep=()))
    shapes = jax.eval_shape(alone.init, jax.random.split(jax.random.key(0), config.run.num_seeds))
    seeds_bytes = sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(shapes))
    monkeypatch.setattr(devices, "memory_per_device", lambda placement: (1.5 * seeds_bytes, "of this test's host"))
    devices.check_state_fits(shapes, alone.placement)
    with pytest.raises(DoesNotFit, match="the training state alone takes .* of this test's host"):
        run_script(module, config)
    assert not (tmp_path / "wide").exists()


def test_a_resume_given_its_sweep_again_reads_it_as_saved_and_another_sweep_is_refused(tmp_path):
    """The command that started a sweep, with --resume added, resumes it: --sweep's values used to be appended to the
    saved ones, so each name came twice and the resume was refused. Another --sweep is refused, naming it; a
    --no-overwrite after --overwrite is no --overwrite. Fails with the saved lists kept under the given ones."""
    saved = with_flags(dr.Config(), **TINY, runs_dir=str(tmp_path), run_name="swept", sweep=("lr=1e-4,3e-4",))
    (tmp_path / "swept").mkdir()
    (tmp_path / "swept" / "config.json").write_text(json.dumps({"script": "algos/dr.py", "config": flags_of(saved)}))
    base = ["--runs-dir", str(tmp_path), "--run-name", "swept", "--resume"]
    again = parse_command_line(dr.Config, "", [*base, "--sweep", "lr=1e-4,3e-4"], "algos/dr.py")
    assert again.run.sweep == ("lr=1e-4,3e-4",)
    check_resumable(flags_of(saved), again, "swept")
    assert parse_command_line(dr.Config, "", base, "algos/dr.py").run.sweep == ("lr=1e-4,3e-4",)
    other = parse_command_line(dr.Config, "", [*base, "--sweep", "lr=1e-3"], "algos/dr.py")
    with pytest.raises(
        ConfigError, match=r"the config differs in --sweep: saved \['lr=1e-4,3e-4'\], now \['lr=1e-3'\]"
    ):
        check_resumable(flags_of(saved), other, "swept")
    zipped = parse_command_line(dr.Config, "", [*base, "--sweep-zip"], "algos/dr.py")
    with pytest.raises(ConfigError, match="the config differs in --sweep-zip: saved False, now True"):
        check_resumable(flags_of(saved), zipped, "swept")  # pairing the lists instead would be another grid
    undone = parse_command_line(dr.Config, "", [*base, "--overwrite", "--no-overwrite"], "algos/dr.py")
    assert undone.run.resume and not undone.run.overwrite


@pytest.mark.slow
def test_a_resumed_sweep_equals_it_uninterrupted_and_evaluate_and_report_name_its_points(tmp_path):
    module, whole = config_of("plr", tmp_path, run_name="whole", sweep=("temperature=0.3,1", "lr=1e-4,3e-4"))
    run_script(module, whole)
    _, first = config_of("plr", tmp_path, run_name="split", total_updates=2, sweep=whole.run.sweep)
    run_script(module, first)
    resumed = with_flags(first, total_updates=4, resume=True)
    run_script(module, resumed)
    assert_states_close(newest_state_of(whole, tmp_path / "whole"), newest_state_of(resumed, tmp_path / "split"))
    run_dir = tmp_path / "whole"
    with open(run_dir / "points.csv") as handle:
        assert list(csv.DictReader(handle))[3] == {"point": "3", "temperature": "1.0", "lr": "0.0003"}
    with open(run_dir / "logs.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["point"], row["seed"]) for row in rows[:8]] == [(str(p), str(s)) for p in range(4) for s in range(2)]
    from common import evaluate, report

    evaluate.main(evaluate.Args(run_dir=run_dir, mazes=("SixteenRooms",), episodes=2))
    (written,) = (run_dir / "eval").glob("evaluate_*.csv")
    with open(written) as handle:
        assert {(row["point"], row["seed"]) for row in csv.DictReader(handle)} == {
            (str(p), str(s)) for p in range(4) for s in range(2)
        }
    report.main(report.Args(runs=(run_dir,), out=tmp_path / "report"))
    summary = json.dumps(list(csv.DictReader(open(tmp_path / "report" / "summary.csv"))))
    assert "plr temperature=1 lr=0.0003" in summary and "plr temperature=0.3 lr=0.0001" in summary
    assert (tmp_path / "report" / "sweep.png").stat().st_size > 5_000


@pytest.fixture
def wandb_runs(monkeypatch) -> list:
    """A stand-in `wandb` module; the list holds each run `wandb.init` made, with its settings and logged rows."""
    made = []

    class Run:
        def __init__(self, **settings):
            self.settings, self.logged = settings, []
            made.append(self)

        def log(self, row, step):
            self.logged.append((step, row))

        def finish(self):
            pass

    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=lambda **settings: Run(**settings)))
    return made


def test_wandb_has_a_run_per_point_and_seed_holding_the_points_values(tmp_path, wandb_runs):
    """--track in a sweep: each point's seed is its own wandb run whose config has the swept values (a zipped
    sweep's points zipped) and the seed's index; a chunk's rows reach their own runs, also when a stopped point has
    none, without the metrics not measured in that chunk (NaN). Without a sweep a run per seed; every run in the
    project, entity and group (the run name) it was given, under the run folder, each its own. Fails with any of
    these settings dropped (mutmut's survivors of WandbLogger)."""
    _, config = config_of("dr", tmp_path, run_name="tracked", sweep=("lr=1e-4,3e-4",))
    logger = WandbLogger(config, tmp_path / "tracked")
    assert [run.settings["name"] for run in wandb_runs] == [
        f"tracked-point{p}-seed{s}" for p in range(2) for s in range(2)
    ]
    assert [(run.settings["config"]["point"], run.settings["config"]["lr"]) for run in wandb_runs] == [
        (0, 1e-4),
        (0, 1e-4),
        (1, 3e-4),
        (1, 3e-4),
    ]
    logger.log([{"point": 1, "seed": 0, "update": 4, "train/return": 0.5}, {"point": 1, "seed": 1, "update": 4}])
    assert [len(run.logged) for run in wandb_runs] == [0, 0, 1, 1]
    assert wandb_runs[2].logged == [(4, {"update": 4, "train/return": 0.5})]
    logger.log([{"point": 0, "seed": 0, "update": 6, "train/return": 0.1, "eval/return/SixteenRooms": math.nan}])
    assert wandb_runs[0].logged == [(6, {"update": 6, "train/return": 0.1})], (
        "a metric not measured this chunk is left out"
    )
    assert [run.settings["config"]["seed_index"] for run in wandb_runs] == [0, 1, 0, 1]
    shared = {"project": "cleanued", "entity": "lab", "group": "named", "dir": str(tmp_path), "reinit": "create_new"}
    wandb_runs.clear()
    _, alone = config_of("dr", tmp_path, run_name="named", wandb_entity="lab")
    WandbLogger(alone, tmp_path)
    assert [run.settings["name"] for run in wandb_runs] == ["named-seed0", "named-seed1"]
    assert all({key: run.settings[key] for key in shared} == shared for run in wandb_runs)
    wandb_runs.clear()
    zipped = ("lr=1e-4,3e-4", "gamma=0.9,0.99")
    _, config = config_of("dr", tmp_path, run_name="zipped", sweep=zipped, sweep_zip=True)
    WandbLogger(config, tmp_path)
    assert [(run.settings["config"]["lr"], run.settings["config"]["gamma"]) for run in wandb_runs[::2]] == [
        (1e-4, 0.9),
        (3e-4, 0.99),
    ]


def test_a_tracked_sweeps_log_names_each_rows_point_and_sends_the_rows_to_wandb(tmp_path, wandb_runs):
    """What a run's log step writes, through `RunLog`: a sweep's logs.csv starts with the point column, and with
    --track the rows reach the wandb run of their point and seed, under the run folder; without --track no wandb
    run is made. Fails with the point column dropped or renamed, wandb left out or given other arguments, or the
    rows not passed on (mutmut's survivors of RunLog)."""
    _, config = config_of("dr", tmp_path, run_name="tracked", sweep=("lr=1e-4,3e-4",), track=True)
    log = RunLog(config, tmp_path, ["train/return"], 0, ("train/return",), None)
    assert [run.settings["dir"] for run in wandb_runs] == [str(tmp_path)] * 4
    rows = [
        {"point": point, "seed": seed, "update": 2, "student_updates": 2, "env_steps": 64, "train/return": 0.25}
        for point in range(2)
        for seed in range(2)
    ]
    log.write(rows, 100.0)
    log.close()
    with open(tmp_path / "logs.csv") as handle:
        header = next(csv.reader(handle))
    assert header[:2] == ["point", "seed"]
    assert [run.logged for run in wandb_runs] == [
        [(2, {"update": 2, "student_updates": 2, "env_steps": 64, "train/return": 0.25})]
    ] * 4
    wandb_runs.clear()
    _, untracked = config_of("dr", tmp_path / "plain", run_name="plain")
    (tmp_path / "plain").mkdir()
    RunLog(untracked, tmp_path / "plain", ["train/return"], 0, ("train/return",), None).close()
    assert wandb_runs == []


@pytest.mark.slow
def test_each_point_stops_at_its_own_student_update_budget_as_it_would_alone(tmp_path):
    """Robust PLR trains the student only on replay updates, so a replay probability sets when a point reaches
    --total-student-updates: each point keeps its state from its own stop on (the run goes on for the other), logs
    rows only while it trains, and ends as the same config run alone. Mutation checked by hand: without
    `stopping_each_point` the low-probability point's state, logs and updates differ from its run alone."""
    flags = dict(total_student_updates=3, total_updates=40, log_interval=1, checkpoint_interval=1)
    module, swept = config_of("plr", tmp_path, run_name="swept", sweep=("replay_prob=0.2,0.9",), **flags)
    run_script(module, swept)
    with open(tmp_path / "swept" / "logs.csv") as handle:
        swept_rows = list(csv.DictReader(handle))
    final_updates = []
    for point, value in enumerate((0.2, 0.9)):
        _, alone = config_of("plr", tmp_path, run_name=f"alone{point}", replay_prob=value, **flags)
        run_script(module, alone)
        with open(tmp_path / f"alone{point}" / "logs.csv") as handle:
            alone_rows = list(csv.DictReader(handle))
        final_updates.append(int(alone_rows[-1]["update"]))
        rows = [row for row in swept_rows if row["point"] == str(point)]
        assert [(row["update"], row["seed"], row["student_updates"]) for row in rows] == [
            (row["update"], row["seed"], row["student_updates"]) for row in alone_rows
        ]
        state = newest_state_of(swept, tmp_path / "swept")
        ours = jax.tree.map(lambda leaf, point=point: leaf[point * 2 : point * 2 + 2], state)
        assert_states_close(ours, newest_state(module, alone, tmp_path / f"alone{point}"), rtol=1e-4, atol=1e-5)
    assert final_updates[0] > final_updates[1], "the points must stop at different updates for this to test anything"


def newest_state_of(config, run_dir):
    """The newest checkpoint of a sweep's run folder, read with the sweep's runner shapes."""
    module = importlib.import_module("algos.plr")

    class Swept:
        @staticmethod
        def make_train(config):
            return sweep.run_functions(config, module.make_train, "algos/plr.py")

    return newest_state(Swept, with_flags(config, resume=False), run_dir)
