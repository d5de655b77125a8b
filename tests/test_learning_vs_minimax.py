"""The pure parts of benchmarks/learning/learning_vs_minimax.py (its learning_vs_minimax_*.py modules) on synthetic
data: reading minimax's logs, where a minimax run stops and which of its checkpoints stand for which rollout
count, the curriculum windows on both sides, the flag mapping, the bootstrap intervals and the report table.
Nothing here trains, evaluates or runs minimax."""

import dataclasses
import json
import math
import shlex
from pathlib import Path

import pytest

from benchmarks.learning import learning_vs_minimax as harness
from benchmarks.learning import learning_vs_minimax_config as config
from benchmarks.learning import learning_vs_minimax_evaluate as evaluate
from benchmarks.learning import learning_vs_minimax_outputs as outputs
from benchmarks.learning import learning_vs_minimax_report as report
from benchmarks.learning import learning_vs_minimax_run as run
from benchmarks.learning import pool_seed_sets
from common import checkpoint as checkpoints
from common.errors import ConfigError


def minimax_rows(n_updates: list[int], **columns) -> list[dict]:
    """Log rows of ticks 1.. with the given cumulative gradient updates and extra columns (lists per tick)."""
    return [
        {
            "_tick": float(tick),
            "n_updates": float(updates),
            **{key: values[tick - 1] for key, values in columns.items()},
        }
        for tick, updates in enumerate(n_updates, start=1)
    ]


def test_minimax_log_reads_its_header_empty_cells_and_drops_a_torn_row(tmp_path):
    path = tmp_path / "logs.csv"
    path.write_text("# _tick,_time,return,plr/n_walls,n_updates\n1,0.5,0.1,,0\n2,0.9,0.2,7.5,1\n3,1.2,0.3\n")
    rows = outputs.read_minimax_log(path)
    assert [row["_tick"] for row in rows] == [1.0, 2.0]  # the torn row of tick 3 is dropped
    assert math.isnan(rows[0]["plr/n_walls"]) and rows[1]["plr/n_walls"] == 7.5
    assert outputs.read_minimax_log(tmp_path / "missing.csv") == []


def test_accel_stops_when_ticks_plus_replay_ticks_reach_the_target():
    # Replays at ticks 3, 4, 6, 7, 8: rollouts after tick t are t + n_updates.
    rows = minimax_rows([0, 0, 1, 2, 2, 3, 4, 5, 5, 5])
    assert [outputs.minimax_rollouts("accel", int(r["_tick"]), int(r["n_updates"])) for r in rows][-1] == 15
    assert outputs.stop_tick(rows, "accel", target=12, archive_ticks=1) == 8  # 8 + 5 = 13 >= 12 (7 + 4 = 11 < 12)
    assert outputs.stop_tick(rows, "accel", target=12, archive_ticks=5) == 10  # only archived ticks can stop it
    assert outputs.stop_tick(rows, "plr", target=10, archive_ticks=5) == 10  # PLR: a tick is a rollout
    assert outputs.stop_tick(rows, "plr", target=11, archive_ticks=5) is None


def test_minimax_events_place_the_mutant_rollout_after_each_accel_replay():
    rows = minimax_rows([0, 1, 1, 2], **{"plr/n_walls": [math.nan, 3.0, math.nan, 5.0]})
    events = report.minimax_events(rows, "accel")
    assert [(e["rollout"], e["kind"]) for e in events] == [
        (1, "new"),
        (2, "replay"),
        (3, "mutant"),
        (4, "new"),
        (5, "replay"),
        (6, "mutant"),
    ]
    assert report.minimax_window_value(events, 0, 6, "rollout/replay", report.ALL_KINDS) == pytest.approx(2 / 6)
    assert report.minimax_window_value(events, 0, 6, "rollout/mutant", report.ALL_KINDS) == pytest.approx(2 / 6)
    assert report.minimax_window_value(events, 0, 6, "plr/n_walls", ("replay",)) == 4.0
    assert report.minimax_window_value(events, 3, 6, "plr/n_walls", ("replay",)) == 5.0
    assert math.isnan(report.minimax_window_value(events, 0, 6, "plr/n_walls", ("new",)))
    # PLR plays no mutants: the same ticks are four rollouts.
    assert [e["kind"] for e in report.minimax_events(rows, "plr")] == ["new", "replay", "new", "replay"]


def test_cleanued_windows_weight_level_columns_by_the_share_of_updates_that_played_them(tmp_path):
    path = tmp_path / "logs.csv"
    header = "seed,update,student_updates,buffer/replay_fraction,level_replay/walls,train/return\n"
    path.write_text(header + "0,10,0,0,,0.1\n0,20,3,0.3,4,0.2\n0,30,10,0.7,6,0.3\n1,10,0,0,,0.5\n")
    rows = report.read_cleanued_log(path)
    assert rows[1]["rollout/new"] == pytest.approx(0.7)  # PLR logs no mutation fraction: it counts as 0
    walls = report.cleanued_window_value(rows, 0, 0, 30, "level_replay/walls", "rollout/replay")
    assert walls == pytest.approx((0.3 * 4 + 0.7 * 6) / 1.0)
    assert report.cleanued_window_value(rows, 0, 10, 30, "train/return", None) == pytest.approx(0.25)
    assert report.cleanued_window_value(rows, 1, 0, 30, "train/return", None) == 0.5
    assert math.isnan(report.cleanued_window_value(rows, 0, 0, 10, "level_replay/walls", "rollout/replay"))
    assert report.windows(25, 10) == [(0, 10), (10, 20), (20, 25)]


def test_each_grid_point_takes_the_archive_nearest_in_rollouts_and_the_last_the_stop_tick():
    rows = minimax_rows([0] * 4 + [2] * 4 + [5] * 4 + [8] * 4, tick=list(range(1, 17)))
    # ACCEL rollouts at the archived ticks 4, 8, 12, 16: 4, 10, 17, 24.
    chosen = evaluate.minimax_grid_ticks(rows, "accel", grid=[5, 10, 20], last_tick=16, archive_ticks=4)
    assert chosen == {5: (4, 4), 10: (8, 10), 20: (16, 24)}
    chosen = evaluate.minimax_grid_ticks(rows, "dr", grid=[8, 12], last_tick=12, archive_ticks=4)
    assert chosen == {8: (8, 8), 12: (12, 12)}


def test_a_grid_point_halfway_between_two_archives_takes_the_earlier_one():
    """DR (a tick is a rollout), archives every 4 ticks: grid point 6 is 2 rollouts from the archives of ticks 4 and
    8; the tie goes to the earlier (the second item of the choice's key), never to tick 6, which has no archive.
    Mutation checked by hand: the tie to the later tick, or the unarchived ticks not left out, fails this test."""
    rows = minimax_rows(list(range(12)))
    chosen = evaluate.minimax_grid_ticks(rows, "dr", grid=[6, 12], last_tick=12, archive_ticks=4)
    assert chosen == {6: (4, 4), 12: (12, 12)}


def test_cleanued_flags_follow_minimax_values_and_the_table_names_every_mismatch():
    shipped = {"maze_height": 13, "maze_n_walls": 60, "lr": 1e-4, "discount": 0.995, "student_entropy_coef": 0.001}
    shipped |= {"plr_use_score_ranks": False, "plr_use_robust_plr": True, "ued_score": "positive_value_loss"}
    shipped |= {"lr_anneal_steps": 0, "maze_see_agent": True}
    minimax = config.minimax_settings("plr", shipped, config.Args())
    assert minimax["maze_height"] == 7 and minimax["lr"] == 3e-4 and minimax["discount"] == 0.995
    cleanued = config.cleanued_settings("plr", minimax, match_deviations=True)
    assert cleanued["maze_size"] == 7 and cleanued["n_walls"] == 8 and cleanued["anneal_lr"] is False
    assert cleanued["prioritization"] == "proportional" and cleanued["exploratory_grad_updates"] is False
    assert cleanued["score_function"] == "pvl" and cleanued["maxmc_running_max"] is False
    assert "maxmc_running_max" not in config.cleanued_settings("plr", minimax, match_deviations=False)

    defaults = {"gamma": 0.999, "ent_coef": 0.0, "maxmc_running_max": True, "prioritization": "rank"}
    table = config.settings_table("plr", defaults, shipped, minimax, cleanued)
    problems = {
        row["cleanued_flag"] if row["kind"] != "fixed" else row["minimax_flag"]: row["problem"] for row in table
    }
    assert problems["gamma"] is None  # a shared setting: overridden alike on both sides, whatever the defaults
    assert problems["prioritization"] == "cleanued's default differs from minimax's shipped value"
    assert problems["maxmc_running_max"] == "a deliberate deviation, set to minimax's behaviour here"
    assert problems["maze_see_agent"] == "minimax uses a value cleanued cannot take"
    assert config.cli_flags({"lr": 3e-4, "anneal_lr": False, "carry_across_updates": True}) == [
        "--lr",
        "0.0003",
        "--no-anneal-lr",
        "--carry-across-updates",
    ]


def test_the_configuration_comes_from_the_flags_on_both_sides():
    args = config.Args(maze_size=11, n_walls=30, max_steps=128, num_envs=16, num_steps=64, lstm_size=32)
    shipped = {"maze_height": 13, "maze_width": 13, "maze_n_walls": 60, "maze_ued_n_walls": 60, "discount": 0.995}
    shipped |= {"lr_anneal_steps": 0, "plr_use_score_ranks": True, "plr_use_robust_plr": True, "ued_score": "max_mc"}
    shipped |= {"teacher_lr_anneal_steps": 0}
    for method in config.METHODS:
        minimax = config.minimax_settings(method, shipped, args)
        assert (minimax["maze_height"], minimax["maze_width"], minimax["maze_max_episode_steps"]) == (11, 11, 128)
        assert (minimax["n_parallel"], minimax["n_rollout_steps"], minimax["student_recurrent_hidden_dim"]) == (
            16,
            64,
            32,
        )
        cleanued = config.cleanued_settings(method, minimax, match_deviations=True)
        assert (cleanued["maze_size"], cleanued["max_steps"], cleanued["num_envs"]) == (11, 128, 16)
        assert (cleanued["num_steps"], cleanued["lstm_size"]) == (64, 32)
        assert cleanued["n_walls"] == {"accel": 0}.get(method, 30)  # ACCEL starts from empty mazes
    assert config.minimax_settings("paired", shipped, args)["maze_ued_n_walls"] == 30
    assert config.minimax_settings("paired", shipped, args)["maze_n_walls"] == 30
    assert "11x11 mazes with 30 walls" in args.describe() and "16 envs x 64 steps, LSTM 32" in args.describe()


def test_the_scripts_own_checks_refuse_a_configuration_before_anything_trains(monkeypatch, tmp_path):
    shipped = {"discount": 0.995, "student_entropy_coef": 0.0, "lr_anneal_steps": 0}
    monkeypatch.setattr(config, "minimax_shipped", lambda method, venv: shipped)
    settings = config.method_settings(config.Args(methods=("dr",), maze_size=9, n_walls=10, out=tmp_path))
    assert settings["dr"]["cleanued"]["maze_size"] == 9
    long_name = tmp_path / ("x" * 300)
    with pytest.raises(ConfigError, match=r"algos/dr.py at this configuration: --runs-dir has a 300-byte name"):
        config.method_settings(config.Args(methods=("dr",), out=long_name))


def test_a_diagnostic_setting_reaches_both_sides(tmp_path):
    shipped = {"discount": 0.995, "student_entropy_coef": 0.0, "lr_anneal_steps": 0, "plr_staleness_coef": 0.3}
    shipped |= {"plr_use_robust_plr": True, "plr_temp": 0.3}
    args = config.Args(
        methods=("dr", "plr"),
        diagnostic=("plr_staleness_coef=0", "plr_use_robust_plr=false", "discount=0.99"),
        out=tmp_path,
    )
    minimax = {method: config.minimax_settings(method, shipped, args) for method in args.methods}
    cleanued = {method: config.cleanued_settings(method, minimax[method], True) for method in args.methods}
    assert minimax["plr"]["plr_staleness_coef"] == 0 and cleanued["plr"]["staleness_coef"] == 0
    assert cleanued["plr"]["exploratory_grad_updates"] is True  # derived: not robust
    assert cleanued["dr"]["gamma"] == 0.99 and cleanued["plr"]["gamma"] == 0.99
    assert minimax["dr"]["plr_staleness_coef"] == 0.3  # only the methods that have the setting take it
    assert "--plr_staleness_coef=0" in run.minimax_command(args, "plr", 1, minimax["plr"])
    assert args.describe().endswith("; diagnostic: plr_staleness_coef=0, plr_use_robust_plr=false, discount=0.99")
    assert outputs.experiment_settings(args)["diagnostic"] == list(args.diagnostic)
    assert "diagnostic" not in outputs.experiment_settings(config.Args())  # as in folders from before the flag
    with pytest.raises(ConfigError, match="--diagnostic plr_temp: not a setting of dr the comparison maps"):
        config.Args(methods=("dr",), diagnostic=("plr_temp=1",))
    with pytest.raises(ConfigError, match="--diagnostic n_rollout_steps: not a setting .* or one with its own flag"):
        config.Args(methods=("dr",), diagnostic=("n_rollout_steps=64",))
    with pytest.raises(ConfigError, match="--diagnostic 'plr_temp': give FLAG=VALUE"):
        config.Args(methods=("plr",), diagnostic=("plr_temp",))


def test_paireds_teachers_train_with_the_students_ppo_settings_on_both_sides():
    """cleanued's PAIRED teacher shares the students' epochs, minibatches, clip and value coefficient; minimax's has
    flags of its own, so a diagnostic of the students' reaches minimax's teacher too, and the settings table checks
    each teacher setting (a mismatch would be named)."""
    shipped = {"discount": 0.995, "student_entropy_coef": 0.0, "lr_anneal_steps": 0, "teacher_lr_anneal_steps": 0}
    shipped |= {"teacher_ppo_n_epochs": 5, "teacher_ppo_n_minibatches": 1, "teacher_ppo_clip_eps": 0.2}
    shipped |= {"teacher_value_loss_coef": 0.5, "teacher_ppo_clip_value_loss": True}
    diagnostic = ("student_ppo_n_epochs=3", "student_ppo_n_minibatches=2", "student_ppo_clip_eps=0.1")
    args = config.Args(methods=("paired",), diagnostic=(*diagnostic, "student_value_loss_coef=0.25"))
    minimax = config.minimax_settings("paired", shipped, args)
    cleanued = config.cleanued_settings("paired", minimax, True)
    teacher = {key: minimax[key] for key in minimax if key.startswith(("teacher_ppo", "teacher_value"))}
    assert teacher == {
        "teacher_ppo_n_epochs": 3,
        "teacher_ppo_n_minibatches": 2,
        "teacher_ppo_clip_eps": 0.1,
        "teacher_value_loss_coef": 0.25,
        "teacher_ppo_clip_value_loss": True,
    }
    assert (cleanued["num_epochs"], cleanued["num_minibatches"], cleanued["clip_eps"], cleanued["vf_coef"]) == (
        3,
        2,
        0.1,
        0.25,
    )
    defaults = {"num_epochs": 5, "num_minibatches": 1, "clip_eps": 0.2, "vf_coef": 0.5}
    table = config.settings_table("paired", defaults, shipped, minimax, cleanued)
    rows = {row["minimax_flag"]: row for row in table if row["kind"] == "teacher"}
    assert sorted(rows) == ["teacher_ppo_clip_eps", "teacher_ppo_n_epochs", "teacher_ppo_n_minibatches"] + [
        "teacher_value_loss_coef"
    ]
    assert all(row["problem"] is None for row in rows.values())
    apart = config.settings_table("paired", defaults, shipped, minimax | {"teacher_ppo_n_epochs": 5}, cleanued)
    (epochs,) = [row for row in apart if row["minimax_flag"] == "teacher_ppo_n_epochs"]
    assert epochs["problem"] == "the sides train with different values"
    fixed = {row["minimax_flag"]: row["problem"] for row in table if row["kind"] == "fixed"}
    assert "teacher_ppo_clip_value_loss" in fixed and fixed["teacher_ppo_clip_value_loss"] is None
    with pytest.raises(ConfigError, match="--diagnostic maze_ued_n_walls: not a setting .* or one with its own flag"):
        config.Args(methods=("paired",), diagnostic=("maze_ued_n_walls=20",))


def test_bad_harness_flags_are_refused_with_one_line():
    """ACCEL alone trains from empty mazes, so only the harness sees the walls its evaluation levels get."""
    with pytest.raises(ConfigError, match=r"--n-walls \(30\) must leave two cells free .* at most 23 in a 5x5 maze"):
        config.Args(methods=("accel",), maze_size=5, n_walls=30)
    with pytest.raises(ConfigError, match="--methods dr plr dr: a method twice"):
        config.Args(methods=("dr", "plr", "dr"))
    with pytest.raises(ConfigError, match="--heldout-mazes SixteenRooms SixteenRooms: a maze twice"):
        config.Args(heldout_mazes=("SixteenRooms", "SixteenRooms"))
    with pytest.raises(ConfigError, match=r"--accel-archive-ticks \(50\) must be under half of --checkpoint-every"):
        config.Args(methods=("accel",), accel_archive_ticks=50, checkpoint_every=100)
    config.Args(methods=("dr",), accel_archive_ticks=50, checkpoint_every=100)  # only ACCEL archives at that grain
    config.Args(methods=("accel",), accel_archive_ticks=49, checkpoint_every=100)


def test_held_out_mazes_are_evaluated_from_heldout_from_on_the_grid():
    args = config.Args(rollouts=600, checkpoint_every=100)
    assert args.heldout_start == 300  # the second half by default
    needed = {point: evaluate.evaluations_needed(args, checkpoint(point)) for point in (200, 300, 600)}
    assert needed[200] == [("train_levels", None, 512)]
    assert [kind for kind, *_ in needed[300]] == ["train_levels", "heldout", "heldout", "heldout"]
    assert needed[600][1] == ("heldout", "SixteenRooms", 200)
    assert config.Args(rollouts=600, checkpoint_every=100, heldout_from=450).heldout_start == 500  # up to the grid
    short = config.Args(methods=("dr",), rollouts=50, checkpoint_every=10)
    assert short.heldout_start == 30  # 25 rounds up to the grid
    with pytest.raises(ConfigError, match=r"--heldout-from \(700\) must be between 1 and --rollouts \(600\)"):
        config.Args(rollouts=600, checkpoint_every=100, heldout_from=700)


def checkpoint(grid: int) -> evaluate.Checkpoint:
    return evaluate.Checkpoint("cleanued", "dr", 0, grid, grid, Path("unused"))


def test_bootstrap_intervals_and_overlap():
    assert report.bootstrap_interval([0.4], 100) == (0.4, None)
    assert report.bootstrap_interval([0.5, 0.5, 0.5], 100) == (0.5, (0.5, 0.5))
    mean, (low, high) = report.bootstrap_interval([0.1, 0.2, 0.3, 0.4], 2000)
    assert mean == pytest.approx(0.25) and 0.1 <= low < mean < high <= 0.4
    assert report.overlap((0.1, 0.3), (0.3, 0.5)) is True
    assert report.overlap((0.1, 0.2), (0.3, 0.5)) is False
    assert report.overlap(None, (0.3, 0.5)) is None


def test_the_summary_table_reports_both_sides_and_flags_disjoint_intervals():
    args = config.Args(methods=("dr",), seeds=3, rollouts=20, checkpoint_every=10, heldout_mazes=("SixteenRooms",))
    evaluations = []
    for side, rates in (("cleanued", [0.9, 0.95, 1.0]), ("minimax", [0.1, 0.15, 0.2])):
        for seed, rate in enumerate(rates):
            base = {"side": side, "method": "dr", "seed": seed, "grid": 20}
            evaluations.append(base | {"kind": "train_levels", "maze": None, "solve_rate": rate, "return": rate / 2})
            evaluations.append(base | {"kind": "heldout", "maze": "SixteenRooms", "solve_rate": 0.5, "return": 0.2})
            earlier = base | {"grid": 10}
            evaluations.append(earlier | {"kind": "train_levels", "maze": None, "solve_rate": 0.0, "return": 0.0})
            if (side, seed) != ("minimax", 2):  # a seed without every held-out checkpoint has no mean over them
                held_out = rate if side == "cleanued" else 0.1 * seed
                evaluations.append(earlier | {"kind": "heldout", "maze": "SixteenRooms", "solve_rate": held_out})
    updates = {("dr", "cleanued"): [20.0] * 3, ("dr", "minimax"): [20.0] * 3}
    records = report.summary_records(args, evaluations, updates, {}, {})
    by_metric = {record["metric"]: record for record in records}
    solve = by_metric["training-distribution solve rate"]
    assert solve["cleanued"]["per_seed"] == [0.9, 0.95, 1.0] and solve["overlap"] is False
    assert solve["mann_whitney_p"] == pytest.approx(0.1)  # 3 against 3, fully separated: 2 / C(6, 3)
    assert by_metric["SixteenRooms solve rate, final checkpoint"]["overlap"] is True
    assert by_metric["SixteenRooms solve rate, final checkpoint"]["mann_whitney_p"] == 1.0  # all equal
    over = by_metric["SixteenRooms solve rate, mean over checkpoints 10-20"]
    assert over["cleanued"]["per_seed"] == pytest.approx([0.7, 0.725, 0.75])  # (rate + 0.5) / 2
    assert over["minimax"]["per_seed"] == pytest.approx([0.25, 0.3])  # seed 2 lacks the checkpoint at 10
    table = report.markdown_summary(records, args.seeds)
    assert (
        "| DR | training-distribution solve rate | 0.950 [0.900, 1.000] | 0.150 [0.100, 0.200] | **no** | 0.10 |"
        in table
    )
    assert "| DR | student gradient updates | 20 (20-20) | 20 (20-20) | - | - |" in table
    over_row = next(line for line in table.splitlines() if "mean over checkpoints" in line)
    assert "| 0.725 [0.700, 0.750] | 0.275 [0.250, 0.300] (2 of 3 seeds) |" in over_row
    assert report.curve_points(evaluations, "dr", "minimax") == {10: [0.0, 0.0, 0.0], 20: [0.1, 0.15, 0.2]}
    assert report.curve_points(evaluations, "dr", "minimax", "SixteenRooms") == {10: [0.0, 0.1], 20: [0.5] * 3}
    assert report.mann_whitney_p([0.5], [0.1, 0.2]) is None  # one seed: no test


def test_mann_whitney_is_exact_without_ties_and_the_final_rows_are_the_last_grid_point():
    assert report.mann_whitney_p(list(range(12)), list(range(12, 24))) == pytest.approx(2 / math.comb(24, 12))
    tied = report.mann_whitney_p([0.0, 0.0, 0.1], [0.0, 0.2, 0.3])
    assert 0.2 < tied < 1.0  # the normal approximation: the exact distribution has no ties
    args = config.Args(methods=("dr",), seeds=2, rollouts=20, checkpoint_every=10, heldout_mazes=("SixteenRooms",))
    evaluations = [
        {"side": side, "method": "dr", "seed": seed, "grid": grid, "kind": "train_levels"}
        | {"maze": None, "solve_rate": grid / 100, "return": 0.0}
        for side in ("cleanued", "minimax")
        for seed in range(2)
        for grid in (20, 30)  # 30: the final checkpoint of an earlier, longer run in this --out
    ]
    records = report.summary_records(args, evaluations, {}, {}, {})
    assert records[0]["cleanued"]["per_seed"] == [0.2, 0.2]


def test_minimax_gets_only_the_environment_it_needs(monkeypatch):
    """minimax writes its whole environment into meta.json, which lands in the results folder."""
    monkeypatch.setenv("SOME_API_TOKEN", "secret")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    minimax, cleanued = run.job_environment("minimax"), run.job_environment("cleanued")
    assert "SOME_API_TOKEN" not in minimax and minimax["JAX_PLATFORMS"] == "cpu" and minimax["WANDB_MODE"] == "disabled"
    assert cleanued["SOME_API_TOKEN"] == "secret"


def test_only_accel_archives_finer_than_the_evaluation_grid():
    args = config.Args(rollouts=600, checkpoint_every=100, accel_archive_ticks=10)
    assert [outputs.minimax_archive_ticks(args, method) for method in config.METHODS] == [100, 100, 10, 100]
    command = run.minimax_command(args, "accel", 3, {"lr": 3e-4, "test_env_names": "Maze-SixteenRooms"})
    assert "--archive_interval=10" in command and "--seed=3" in command and "--n_total_updates=600" in command
    assert not any(flag.startswith("--test_env_names") for flag in command)  # None drops the shipped value


def test_every_stage_refuses_an_out_trained_at_another_configuration(monkeypatch, tmp_path):
    """A bare `--stage report` on an 11x11 --out would relabel it with the 7x7 defaults."""
    shipped = {"discount": 0.995, "student_entropy_coef": 0.001, "lr_anneal_steps": 0, "maze_n_walls": 60}
    monkeypatch.setattr(config, "minimax_shipped", lambda method, venv: shipped)
    trained = config.Args(methods=("dr",), seeds=2, maze_size=11, n_walls=30, out=tmp_path)
    settings = config.method_settings(trained)
    (only_run,) = config.cleanued_runs(trained, "dr")
    run_dir = outputs.cleanued_run_dir(tmp_path, only_run.name)
    run_dir.mkdir(parents=True)
    used = {row["cleanued_flag"]: row["cleanued_used"] for row in settings["dr"]["table"] if row["kind"] != "fixed"}
    saved = used | config.cleanued_run_settings(trained, "dr", only_run)
    (run_dir / "config.json").write_text(json.dumps({"script": "algos/dr.py", "config": saved}, default=str))
    run.check_existing_runs(trained, settings)  # the same configuration passes
    defaults = config.Args(methods=("dr",), seeds=2, out=tmp_path, stage="report")
    with pytest.raises(ConfigError, match="was trained with other settings .*maze_size: saved 11, now 7"):
        harness.main(defaults)
    assert not (tmp_path / "settings.json").exists(), "refused before anything in --out changed"
    outputs.experiment_path(tmp_path).write_text(json.dumps(outputs.experiment_settings(trained)))
    longer = config.Args(methods=("dr",), seeds=2, maze_size=11, n_walls=30, rollouts=1200, out=tmp_path)
    with pytest.raises(ConfigError, match="holds another experiment .*rollouts: saved 600, now 1200"):
        run.check_existing_runs(longer, settings)
    diagnosed = config.Args(methods=("dr",), seeds=2, maze_size=11, n_walls=30, diagnostic=("discount=0.9",))
    with pytest.raises(ConfigError, match=r"holds another experiment \(diagnostic: saved None, now \['discount=0.9'\]"):
        run.check_existing_runs(dataclasses.replace(diagnosed, out=tmp_path), settings)
    run_flags = config.cli_flags(config.cleanued_run_settings(trained, "dr", only_run))
    command = run.cleanued_command(trained, "dr", only_run, settings["dr"]["cleanued"])
    assert command[2 : 2 + len(run_flags)] == run_flags  # the run flags the script's checks saw


def test_another_seed_set_trains_other_seeds_and_keeps_to_its_own_out(monkeypatch, tmp_path):
    """--first-seed S: cleanued's keys split(key(S), N), minimax's --seed=S+1..S+N, evaluated as seed indices
    0..N-1; an --out made with another seed set is refused."""
    monkeypatch.setattr(config, "minimax_shipped", lambda method, venv: {"lr_anneal_steps": 0})
    args = config.Args(methods=("dr",), seeds=2, first_seed=12, rollouts=20, checkpoint_every=10, out=tmp_path)
    settings = config.method_settings(args)
    jobs = run.make_jobs(args, settings)
    assert [job.seeds for job in jobs] == [(0, 1), (13,), (14,)]
    assert "--seed=13" in jobs[1].command and "--seed=14" in jobs[2].command
    cleanued = jobs[0].command
    assert cleanued[cleanued.index("--seed") + 1] == "12" and cleanued[cleanued.index("--num-seeds") + 1] == "2"
    for seed in (13, 14):
        directory = outputs.minimax_dir(tmp_path, "dr", seed)
        directory.mkdir(parents=True)
        (directory / "stopped.json").write_text(json.dumps({"target": 20, "stop_tick": 20}))
        ticks = "\n".join(f"{tick},{tick}" for tick in range(1, 21))
        (directory / "logs.csv").write_text(f"# _tick,n_updates\n{ticks}\n")
    found = evaluate.minimax_checkpoints(args, "dr")
    assert sorted({(item.seed, item.path.parents[1].name) for item in found}) == [(0, "dr_13"), (1, "dr_14")]
    assert outputs.experiment_settings(args)["first_seed"] == 12
    assert "first_seed" not in outputs.experiment_settings(config.Args())  # as in folders from before the flag
    outputs.experiment_path(tmp_path).write_text(json.dumps(outputs.experiment_settings(args)))
    with pytest.raises(ConfigError, match=r"holds another experiment \(first_seed: saved 12, now None\)"):
        run.check_existing_runs(dataclasses.replace(args, first_seed=0), settings)


def test_same_init_starts_cleanued_from_minimax_initial_parameters_and_keeps_minimax_as_it_was(monkeypatch, tmp_path):
    """--same-init: cleanued's run reads the stacked minimax initial parameters with --init-from; minimax's training
    command is unchanged (its initial-only run writes checkpoint_0.pkl under init/ and stops before any update), so
    minimax's runs of an --out without the flag stay comparable; PAIRED is refused."""
    monkeypatch.setattr(config, "minimax_shipped", lambda method, venv: {"lr_anneal_steps": 0})
    args = config.Args(methods=("dr",), seeds=2, rollouts=20, checkpoint_every=10, out=tmp_path, same_init=True)
    settings = config.method_settings(args)
    jobs = run.make_jobs(args, settings)
    cleanued = jobs[0].command
    assert cleanued[cleanued.index("--init-from") + 1] == str(tmp_path / "init" / "minimax_dr.npz")
    plain = dataclasses.replace(args, same_init=False)
    assert "--init-from" not in run.make_jobs(plain, config.method_settings(plain))[0].command
    assert jobs[1].command == run.minimax_command(plain, "dr", 1, settings["dr"]["minimax"])
    initial = run.minimax_command(args, "dr", 1, settings["dr"]["minimax"], initial_only=True)
    assert {"--archive_init_checkpoint=True", "--n_total_updates=0", f"--log_dir={tmp_path / 'init'}"} <= set(initial)
    assert outputs.experiment_settings(args)["same_init"] is True
    assert "same_init" not in outputs.experiment_settings(plain)  # as in folders from before the flag
    with pytest.raises(ConfigError, match="--same-init covers the student alone"):
        config.Args(methods=("paired",), same_init=True)


def test_init_from_starts_both_sides_from_the_file_each_minimax_seed_from_its_own_item(monkeypatch, tmp_path):
    """--init-from: cleanued's run reads the file with --init-from, minimax seed index i gets it through the trainer's
    --init_params with --init_params_index=i; the experiment records the file; combinations that would start a side
    elsewhere are refused, as is a stack of another number of seeds. Mutation checked by hand: with the index counted
    from --first-seed's seed itself (seed - first_seed), the index check fails; with the file's path recorded instead of
    its digest, the moved-file check fails; without the stack's count checked, its refusal does not come."""
    import numpy as np

    monkeypatch.setattr(config, "minimax_shipped", lambda method, venv: {"lr_anneal_steps": 0})
    start = tmp_path / "start.npz"
    np.savez(start, **{"params/Dense_3/bias": np.zeros((2, 1), np.float32)})
    args = config.Args(methods=("dr",), seeds=2, first_seed=12, rollouts=20, checkpoint_every=10, out=tmp_path,
                       init_from=start)  # fmt: skip
    jobs = run.make_jobs(args, config.method_settings(args))
    cleanued = jobs[0].command
    assert cleanued[cleanued.index("--init-from") + 1] == str(start)
    for index, job in enumerate(jobs[1:]):
        assert job.seeds == (13 + index,)
        assert {f"--init_params={start}", f"--init_params_index={index}"} <= set(job.command)
    digest = outputs.experiment_settings(args)["init_from"]
    moved = tmp_path / "moved.npz"
    moved.write_bytes(start.read_bytes())
    assert digest.startswith("sha256:") and outputs.experiment_settings(dataclasses.replace(args, init_from=moved)) == (
        outputs.experiment_settings(args)
    )  # the file's contents, not where it is kept
    np.savez(moved, **{"params/Dense_3/bias": np.ones((2, 1), np.float32)})
    assert outputs.experiment_settings(dataclasses.replace(args, init_from=moved))["init_from"] != digest
    plain = dataclasses.replace(args, init_from=None)
    assert "init_from" not in outputs.experiment_settings(plain)
    assert not any("init_params" in flag for job in run.make_jobs(plain, config.method_settings(plain)) for flag in
                   job.command)  # fmt: skip
    for fields, message in (
        (dict(same_init=True), "not with --same-init, nor --cleanued-per-seed"),
        (dict(cleanued_per_seed=True), "not with --same-init, nor --cleanued-per-seed"),
        (dict(methods=("paired",)), "--init-from covers the student alone"),
        (dict(init_from=tmp_path / "missing.npz"), "missing.npz: no such .npz"),
        (dict(seeds=3), "holds 2 seeds' parameters: give one seed's or --seeds \\(3\\)"),
    ):
        with pytest.raises(ConfigError, match=message):
            config.Args(**{"methods": ("dr",), "init_from": start, **fields})
    for shape in ((1,), (1, 1)):  # one seed's, or a stack of one: every seed starts from it
        np.savez(moved, **{"params/Dense_3/bias": np.zeros(shape, np.float32)})
        config.Args(methods=("dr",), seeds=3, init_from=moved)
    np.savez(moved, **{"params/Dense_2/bias": np.zeros(1, np.float32)})
    with pytest.raises(ConfigError, match="no params/Dense_3/bias, so not a student's parameters"):
        config.Args(methods=("dr",), init_from=moved)


def test_cleanued_parameters_fill_minimax_tree_and_read_back_the_same():
    """minimax_params: minimax_tree puts one seed's cleanued-named arrays (or item i of stacked ones) into every
    student of a minimax-shaped tree, and flat_params reads them back under the same names; a missing, extra or
    misshapen parameter is refused naming it. Mutation checked by hand: with item 0 taken whatever the index, the
    stacked check fails; without the broadcast over students, the second student's check fails; without a stack of one
    read as one seed's, the stack-of-one check fails."""
    import numpy as np

    from benchmarks.learning.minimax_params import PARAM_NAMES, flat_params, minimax_tree

    shapes = {"kernel": (3, 2), "bias": (2,)}
    template = {"params": {}}
    for theirs in PARAM_NAMES:
        node = template["params"]
        for name in theirs.split("/"):
            node = node.setdefault(name, {})
        node.update({leaf: np.zeros((2, *shape), np.float32) for leaf, shape in shapes.items()})
    rng = np.random.default_rng(0)
    one = {f"params/{ours}/{leaf}": rng.normal(size=shape).astype(np.float32) for ours in PARAM_NAMES.values()
           for leaf, shape in shapes.items()}  # fmt: skip
    filled = minimax_tree(template, one)
    assert flat_params("params/", filled).keys() == one.keys()
    for student in (0, 1):
        second = {
            key: np.asarray(value) for key, value in flat_params("params/", jax_tree_item(filled, student)).items()
        }
        for key, value in one.items():
            np.testing.assert_array_equal(second[key], value)
    stacked = {key: np.stack([value, value + 1.0, value + 2.0]) for key, value in one.items()}
    picked = flat_params("params/", minimax_tree(template, stacked, index=2))
    for key, value in one.items():
        np.testing.assert_array_equal(picked[key], value + 2.0)
    with pytest.raises(ValueError, match="holds 3 seeds, so it has no seed 3"):
        minimax_tree(template, stacked, index=3)
    for given in (one, {key: value[None] for key, value in one.items()}):  # one seed's, as is or as a stack of one
        read = flat_params("params/", minimax_tree(template, given, index=4))
        for key, value in one.items():
            np.testing.assert_array_equal(read[key], value)
    with pytest.raises(ValueError, match="lack Conv3x3_0/bias"):
        minimax_tree(template, {key: value for key, value in one.items() if key != "params/Conv3x3_0/bias"})
    with pytest.raises(ValueError, match="hold Head/bias, which minimax's student has not"):
        minimax_tree(template, {**one, "params/Head/bias": np.zeros(2)})
    with pytest.raises(ValueError, match="Dense_1/kernel is \\(2, 3\\) there and \\(3, 2\\)"):
        minimax_tree(template, {**one, "params/Dense_1/kernel": np.zeros((2, 3))})


def jax_tree_item(tree, index):
    """The tree of student `index`, with the student axis kept (flat_params drops the first item of it)."""
    import jax

    return jax.tree.map(lambda leaf: leaf[index : index + 1], tree)


def test_minimax_runs_through_the_logging_trainer_and_earlier_runs_of_minimax_train_still_count(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "minimax_shipped", lambda method, venv: {"lr_anneal_steps": 0})
    args = config.Args(methods=("dr",), seeds=1, rollouts=20, checkpoint_every=10, out=tmp_path)
    settings = config.method_settings(args)
    command = run.minimax_command(args, "dr", 1, settings["dr"]["minimax"])
    assert command[1].endswith("benchmarks/learning/minimax_train.py")
    directory = outputs.minimax_dir(tmp_path, "dr", 1)
    directory.mkdir(parents=True)
    earlier = [command[0], "-m", "minimax.train", *command[2:]]
    (directory / "stopped.json").write_text(json.dumps({"target": 20, "command": shlex.join(earlier)}))
    run.check_existing_runs(args, settings)  # the same flags: the same run
    moved = [flag if not flag.startswith("--log_dir=") else "--log_dir=/elsewhere/minimax" for flag in earlier]
    (directory / "stopped.json").write_text(json.dumps({"target": 20, "command": shlex.join(moved)}))
    run.check_existing_runs(args, settings)  # copied from another --out of the experiment: still the same run
    other = [*earlier[:-1], "--seed=9"]
    (directory / "stopped.json").write_text(json.dumps({"target": 20, "command": shlex.join(other)}))
    with pytest.raises(ConfigError, match="trained by another command"):
        run.check_existing_runs(args, settings)


def test_cleanued_per_seed_trains_one_process_per_seed_and_evaluates_and_reports_them_as_seed_indices(
    monkeypatch, tmp_path
):
    """--cleanued-per-seed: seed i is its own run (--num-seeds 1, --seed S + i), started with --same-init from its
    own minimax seed's initial parameters; its checkpoints count as seed i and its log rows are renumbered i."""
    monkeypatch.setattr(config, "minimax_shipped", lambda method, venv: {"lr_anneal_steps": 0})
    args = config.Args(
        methods=("dr",), seeds=3, first_seed=12, rollouts=20, checkpoint_every=10, out=tmp_path, same_init=True
    )
    args = dataclasses.replace(args, cleanued_per_seed=True)
    settings = config.method_settings(args)
    cleanued = [job for job in run.make_jobs(args, settings) if job.side == "cleanued"]
    assert [(job.name, job.seeds) for job in cleanued] == [(f"cleanued_dr_seed{i}", (i,)) for i in range(3)]
    for index, job in enumerate(cleanued):
        flag = lambda name, command=job.command: command[command.index(name) + 1]  # noqa: E731
        assert (flag("--num-seeds"), flag("--seed")) == ("1", str(12 + index))
        assert flag("--init-from") == str(tmp_path / "init" / f"dr_{13 + index}" / "initial.npz")  # minimax seed
    assert outputs.experiment_settings(args)["cleanued_per_seed"] is True
    for index in (0, 2):  # seed 1 has not finished: only the others' checkpoints count
        directory = outputs.cleanued_run_dir(tmp_path, f"cleanued_dr_seed{index}")
        for grid in (10, 20):
            path = checkpoints.checkpoint_path(directory / "checkpoints" / "archive", grid)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
        (directory / "logs.csv").write_text(f"seed,update,train/return\n0,10,{index}.5\n0,20,{index}.75\n")
    found = evaluate.cleanued_checkpoints(args, "dr")
    assert sorted((item.seed, item.grid, item.in_file) for item in found) == [
        (seed, grid, 0) for seed in (0, 2) for grid in (10, 20)
    ]
    rows = report.gather_run_facts(args)[3]["dr"]
    assert sorted((row["seed"], row["update"], row["train/return"]) for row in rows) == [
        (0.0, 10.0, 0.5), (0.0, 20.0, 0.75), (2.0, 10.0, 2.5), (2.0, 20.0, 2.75)
    ]  # fmt: skip
    vmapped = dataclasses.replace(args, cleanued_per_seed=False)
    assert [job.name for job in run.make_jobs(vmapped, settings) if job.side == "cleanued"] == ["cleanued_dr"]


def test_a_report_needs_the_training_logs(monkeypatch, tmp_path):
    """A kept results folder (evaluations and reports, no runs) is not reported again: the curriculum and the
    counts would come out empty, and other flags would relabel it."""
    monkeypatch.setattr(config, "minimax_shipped", lambda method, venv: {"lr_anneal_steps": 0})
    (tmp_path / "evaluations.jsonl").write_text("")
    args = config.Args(methods=("dr",), seeds=2, out=tmp_path, stage="report")
    with pytest.raises(ConfigError, match="holds no training logs of dr: nothing to report from"):
        harness.main(args)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["evaluations.jsonl"]
    minimax_log = outputs.minimax_dir(tmp_path, "dr", 2) / "logs.csv"
    minimax_log.parent.mkdir(parents=True)
    minimax_log.write_text("# _tick,n_updates\n")
    assert outputs.has_training_logs(args)


def test_seed_sets_pool_into_one_table_and_only_of_one_experiment(tmp_path):
    """Two folders of one experiment with other seed sets (of any sizes): every checkpoint over both folders' seeds,
    and the held-out mean over checkpoints per seed; folders of another experiment, with seeds in common or evaluated
    otherwise are refused; one folder gives its own table."""
    experiment = {"seeds": 2, "rollouts": 20, "maze_size": 7}
    rates = {0: {"cleanued": [0.1, 0.2], "minimax": [0.5, 0.6]}, 12: {"cleanued": [0.3, 0.4], "minimax": [0.7, 0.8]}}
    folders = []
    for first_seed, per_side in rates.items():
        folder = tmp_path / f"set{first_seed}"
        folder.mkdir()
        (folder / "experiment.json").write_text(
            json.dumps(experiment | ({"first_seed": first_seed} if first_seed else {}))
        )
        records = []
        for side, values in per_side.items():
            for seed, rate in enumerate(values):
                base = {"side": side, "method": "plr", "seed": seed, "eval_seed": 0}
                training = {"grid": 20, "kind": "train_levels", "maze": None, "episodes": 512, "solve_rate": rate}
                records.append(base | training)
                for grid, offset in ((10, 0.0), (20, 0.1)):
                    held_out = {"grid": grid, "kind": "heldout", "maze": "SixteenRooms", "episodes": 200}
                    records.append(base | held_out | {"solve_rate": rate + offset})
        outputs.write_jsonl(folder / "evaluations.jsonl", records)
        folders.append(folder)
    table = pool_seed_sets.pooled_table(pool_seed_sets.Args(folders=tuple(folders), bootstrap_resamples=200))
    training = next(line for line in table.splitlines() if line.startswith("| training distribution, 20 rollouts"))
    assert "| 4/4 | 0.250 [" in training and "| **no** | -0.400 [" in training
    assert "| 0.03 | 1.00 |" in training  # exact p of 4 against 4, all apart; both sides spread alike
    heldout = next(line for line in table.splitlines() if "mean over checkpoints 10-20" in line)
    assert "| 0.300 [" in heldout and "| 0.700 [" in heldout  # (rate + rate + 0.1) / 2 per seed, then the mean
    (folders[1] / "experiment.json").write_text(json.dumps(experiment | {"first_seed": 1}))
    with pytest.raises(ConfigError, match=r"seed sets overlap \(seeds 0-1, 1-2\)"):
        pool_seed_sets.pooled_table(pool_seed_sets.Args(folders=tuple(folders)))
    (folders[1] / "experiment.json").write_text(json.dumps(experiment | {"first_seed": 2, "seeds": 24}))
    assert "| 4/4 |" in pool_seed_sets.pooled_table(pool_seed_sets.Args(folders=tuple(folders)))  # sets of any size
    (folders[0] / "experiment.json").write_text(json.dumps(experiment | {"seeds": 3}))
    with pytest.raises(ConfigError, match=r"seed sets overlap \(seeds 0-2, 2-25\)"):
        pool_seed_sets.pooled_table(pool_seed_sets.Args(folders=tuple(folders)))
    (folders[0] / "experiment.json").write_text(json.dumps(experiment))
    (folders[1] / "experiment.json").write_text(json.dumps(experiment | {"first_seed": 12}))
    evaluations = folders[1] / "evaluations.jsonl"
    evaluations.write_text(evaluations.read_text().replace('"episodes": 200', '"episodes": 100'))
    with pytest.raises(ConfigError, match=r"SixteenRooms evaluations with \(episodes, eval seed\) \(100, 0\)"):
        pool_seed_sets.pooled_table(pool_seed_sets.Args(folders=tuple(folders)))
    (folders[1] / "experiment.json").write_text(json.dumps(experiment | {"first_seed": 12, "maze_size": 11}))
    with pytest.raises(ConfigError, match="is another experiment than .* \\(maze_size differ\\)"):
        pool_seed_sets.pooled_table(pool_seed_sets.Args(folders=tuple(folders)))
    with pytest.raises(ConfigError, match="seed sets overlap"):
        pool_seed_sets.pooled_table(pool_seed_sets.Args(folders=(folders[0], folders[0])))
    alone = pool_seed_sets.pooled_table(pool_seed_sets.Args(folders=(folders[0],), bootstrap_resamples=200))
    training = next(line for line in alone.splitlines() if line.startswith("| training distribution, 20 rollouts"))
    assert "| 2/2 | 0.150 [" in training and "| -0.400 [" in training and training.endswith("| 0.33 | - |")
    with pytest.raises(ConfigError, match="give at least one folder"):
        pool_seed_sets.pooled_table(pool_seed_sets.Args(folders=()))


def test_the_pooled_table_keeps_to_its_method_and_to_seeds_with_every_held_out_checkpoint(tmp_path):
    """Another method's records in the folder change nothing; a seed without one held-out checkpoint is left out of
    the mean over checkpoints (3 of 4 cleanued seeds); a method with no records is refused. Fails with the method
    filter, the every-checkpoint rule or the refusal dropped (the mutation trial's survivors of pool_seed_sets)."""
    folder = tmp_path / "set0"
    folder.mkdir()
    (folder / "experiment.json").write_text(json.dumps({"seeds": 4, "rollouts": 20, "maze_size": 7}))
    records = []
    for side, values in {"cleanued": [0.1, 0.2, 0.3, 0.4], "minimax": [0.5, 0.6, 0.7, 0.8]}.items():
        for seed, rate in enumerate(values):
            base = {"side": side, "method": "plr", "seed": seed, "eval_seed": 0}
            records.append(
                base | {"grid": 20, "kind": "train_levels", "maze": None, "episodes": 512, "solve_rate": rate}
            )
            for grid in (10, 20):
                if (side, seed, grid) != ("cleanued", 0, 10):
                    held_out = {"grid": grid, "kind": "heldout", "maze": "SixteenRooms", "episodes": 200}
                    records.append(base | held_out | {"solve_rate": rate})
    accel = {"side": "cleanued", "method": "accel", "seed": 9, "eval_seed": 0, "grid": 20, "kind": "train_levels"}
    records.append(accel | {"maze": None, "episodes": 512, "solve_rate": 1.0})
    outputs.write_jsonl(folder / "evaluations.jsonl", records)
    table = pool_seed_sets.pooled_table(pool_seed_sets.Args(folders=(folder,), bootstrap_resamples=200))
    training = next(line for line in table.splitlines() if line.startswith("| training distribution, 20 rollouts"))
    assert "| 4/4 | 0.250 [" in training, training
    heldout = next(line for line in table.splitlines() if "mean over checkpoints 10-20" in line)
    assert "| 3/4 | 0.300 [" in heldout, heldout
    with pytest.raises(ConfigError, match="no evaluations of plr in the folders"):
        (folder / "evaluations.jsonl").write_text("")
        pool_seed_sets.pooled_table(pool_seed_sets.Args(folders=(folder,)))


def test_cleanued_runs_replace_the_folders_cleanued_side_when_trained_alike(tmp_path):
    """--cleanued-runs: cleanued's side comes from the runs' fork_run.py evaluations (minimax's from the folder); the
    table keeps the training distribution's rows, and a held-out maze's where the runs were played on it at the
    folders' checkpoints; runs trained otherwise, sharing a seed, evaluated otherwise or at other checkpoints are
    refused, as are runs of another script, a run twice and folders whose seeds started from given parameters.
    Mutation checked by hand: with the folders' cleanued records kept, the seed count check fails; without the settings
    comparison, the first refusal does not come, and with settings.json's passed flags for the settings (no defaults),
    the temperature refusal does not; without the script, twice or started-from checks, their refusals do not."""
    folder = tmp_path / "set0"
    folder.mkdir()
    (folder / "experiment.json").write_text(json.dumps({"seeds": 2, "rollouts": 20, "maze_size": 7}))
    table = [
        {"kind": "shared", "cleanued_flag": "maze_size", "cleanued_used": 7},
        {"kind": "deviation", "cleanued_flag": "temperature", "cleanued_used": 0.3},
        {"kind": "fixed", "cleanued_flag": "(fixed)", "minimax_flag": "n_students"},
    ]
    (folder / "settings.json").write_text(json.dumps({"plr": {"cleanued": {"maze_size": 7}, "table": table}}))
    records = []
    for side, values in {"cleanued": [0.1, 0.2], "minimax": [0.5, 0.6]}.items():
        for seed, rate in enumerate(values):
            base = {"side": side, "method": "plr", "seed": seed, "eval_seed": 0, "grid": 20, "episodes": 512}
            records += [base | {"kind": "train_levels", "maze": None, "solve_rate": rate}]
            records += [base | {"kind": "heldout", "maze": "SixteenRooms", "episodes": 200, "solve_rate": rate}]
    outputs.write_jsonl(folder / "evaluations.jsonl", records)
    runs = []
    for seed, rates in ((100, [0.7, 0.8, 0.9]), (200, [0.4])):
        run_dir = tmp_path / f"run{seed}"
        run_dir.mkdir()
        config_json = {"maze_size": 7, "temperature": 0.3, "total_updates": 20, "seed": seed}
        (run_dir / "config.json").write_text(json.dumps({"script": "algos/plr.py", "config": config_json}))
        outputs.write_jsonl(
            run_dir / "evaluations.jsonl",
            [{"update": 20, "seed": index, "source": index, "solve_rate": rate} for index, rate in enumerate(rates)],
        )
        runs.append(run_dir)
    arguments = dict(folders=(folder,), bootstrap_resamples=200, cleanued_runs=tuple(runs))
    table = pool_seed_sets.pooled_table(pool_seed_sets.Args(**arguments))
    training = next(line for line in table.splitlines() if line.startswith("| training distribution, 20 rollouts"))
    assert "| 4/2 | 0.700 [" in training and "| 0.550 [" in training, training
    assert "SixteenRooms" not in table and "from 2 other run(s)" in table
    heldout = {"kind": "heldout", "maze": "SixteenRooms", "episodes": 200, "eval_seed": 0, "update": 20}
    for run_dir, rates in zip(runs, ([0.0, 0.3, 0.3], [0.6]), strict=True):
        trained = (run_dir / "evaluations.jsonl").read_text()
        extra = [heldout | {"seed": index, "solve_rate": rate} for index, rate in enumerate(rates)]
        outputs.write_jsonl(run_dir / "evaluations.jsonl", extra)
        (run_dir / "evaluations.jsonl").write_text(trained + (run_dir / "evaluations.jsonl").read_text())
    table = pool_seed_sets.pooled_table(pool_seed_sets.Args(**arguments))
    row = next(line for line in table.splitlines() if line.startswith("| SixteenRooms, 20 rollouts"))
    assert "| 4/2 | 0.300 [" in row and "| 0.550 [" in row, row  # the runs' four seeds against the folder's minimax
    assert "| SixteenRooms, mean over checkpoints 20-20 | 4/2 | 0.300 [" in table
    good = (runs[1] / "evaluations.jsonl").read_text()
    for change, message in (
        ({"update": 10}, "SixteenRooms evaluated at checkpoints \\[10\\], the folders at \\[20\\]"),
        ({"episodes": 100}, "SixteenRooms evaluated with \\(100, 0\\), the folders with \\(200, 0\\)"),
        ({"maze": "Labyrinth"}, "evaluated on Labyrinth, the folders not"),
    ):
        outputs.write_jsonl(runs[1] / "evaluations.jsonl", [heldout | {"seed": 0, "solve_rate": 0.6} | change])
        with pytest.raises(ConfigError, match=message):
            pool_seed_sets.pooled_table(pool_seed_sets.Args(**arguments))
    (runs[1] / "evaluations.jsonl").write_text(good)
    config_path = runs[1] / "config.json"
    for change, message in (
        ({"temperature": 1.0}, "trained with other settings than the folders' cleanued: temperature 1.0"),
        ({"maze_size": 9}, "trained with other settings than the folders' cleanued: maze_size 9"),
        ({"total_updates": 40}, "40 updates, the folders 20"),
        ({"seed": 100}, "share --seed 100: seeds would repeat"),
    ):
        config_path.write_text(json.dumps({"script": "algos/plr.py", "config": {**config_json, **change}}))
        with pytest.raises(ConfigError, match=message):
            pool_seed_sets.pooled_table(pool_seed_sets.Args(**arguments))
    config_path.write_text(json.dumps({"script": "algos/accel.py", "config": config_json}))
    with pytest.raises(ConfigError, match="a run of algos/accel.py, not of algos/plr.py"):
        pool_seed_sets.pooled_table(pool_seed_sets.Args(**arguments))
    config_path.write_text(json.dumps({"script": "algos/plr.py", "config": config_json}))
    with pytest.raises(ConfigError, match="a run twice"):
        pool_seed_sets.pooled_table(pool_seed_sets.Args(**{**arguments, "cleanued_runs": (runs[0], runs[0])}))
    experiment = json.loads((folder / "experiment.json").read_text())
    (folder / "experiment.json").write_text(json.dumps({**experiment, "init_from": "sha256:0"}))
    with pytest.raises(ConfigError, match="the folders' seeds started from given parameters \\(init_from\\)"):
        pool_seed_sets.pooled_table(pool_seed_sets.Args(**arguments))
    (folder / "experiment.json").write_text(json.dumps({**experiment, "same_init": True}))
    with pytest.raises(ConfigError, match="the folders' seeds started from given parameters \\(same_init\\)"):
        pool_seed_sets.pooled_table(pool_seed_sets.Args(**arguments))
    (folder / "experiment.json").write_text(json.dumps(experiment))
    outputs.write_jsonl(runs[1] / "evaluations.jsonl", [{"update": 20, "seed": 0, "solve_rate": 0.4, "episodes": 64}])
    with pytest.raises(ConfigError, match="evaluated with \\(64, 0\\), the folders with \\(512, 0\\)"):
        pool_seed_sets.pooled_table(pool_seed_sets.Args(**arguments))
    (runs[1] / "evaluations.jsonl").unlink()
    with pytest.raises(ConfigError, match="needs config.json and evaluations.jsonl"):
        pool_seed_sets.pooled_table(pool_seed_sets.Args(**arguments))


STUDENT_FLAGS_AT_11X11 = {
    "maze_size": 11,
    "max_steps": 128,
    "num_envs": 16,
    "num_steps": 64,
    "lstm_size": 32,
    "lr": 3e-4,
    "anneal_lr": False,
    "adam_eps": 1e-5,
    "gamma": 0.995,
    "gae_lambda": 0.98,
    "num_epochs": 5,
    "num_minibatches": 1,
    "clip_eps": 0.2,
    "ent_coef": 0.001,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
}
"""cleanued's student flags at the 11x11 configuration below: the sizes from the harness flags, the PPO settings from
PPO_SHARED, discount and entropy from the shipped values."""


def test_every_mapped_flag_takes_its_own_minimax_value_for_each_method():
    """The whole flag table, method by method, against a hand-written expectation. The flags a mapping could take for
    one another hold different values (student against teacher, replay probability against fill ratio, temperature
    against staleness, epochs against minibatches, the mutation count against the subsample size), so a cleanued
    flag read from the wrong minimax flag, converted wrongly or dropped changes the dict; with --no-match-deviations
    exactly the deviation flags are left to cleanued's defaults."""
    args = config.Args(maze_size=11, n_walls=30, max_steps=128, num_envs=16, num_steps=64, lstm_size=32)
    shipped = {"lr": 1e-4, "lr_anneal_steps": 0, "discount": 0.995, "student_entropy_coef": 0.001}
    shipped |= {"plr_replay_prob": 0.8, "plr_buffer_size": 4000, "plr_min_fill_ratio": 0.6, "plr_temp": 0.3}
    shipped |= {"plr_staleness_coef": 0.7, "plr_use_score_ranks": True, "plr_use_robust_plr": True}
    shipped |= {"ued_score": "positive_value_loss", "plr_n_mutations": 20, "plr_mutation_criterion": "batch"}
    shipped |= {"plr_mutation_subsample_size": 4, "teacher_lr_anneal_steps": 100, "teacher_entropy_coef": 0.05}
    shipped |= {"teacher_discount": 0.99, "teacher_gae_lambda": 0.9, "teacher_recurrent_hidden_dim": 256}
    shipped |= {"teacher_n_conv_filters": 128, "maze_ued_noise_dim": 50, "n_students": 2}
    replay = {"replay_prob": 0.8, "buffer_size": 4000, "min_fill_ratio": 0.6, "score_function": "pvl"}
    replay |= {"prioritization": "rank", "temperature": 0.3, "staleness_coef": 0.7, "exploratory_grad_updates": False}
    replay_deviations = {"maxmc_running_max": False, "rank_ties": "slot_order"}
    expected = {
        "dr": ({"n_walls": 30}, {"carry_across_updates": True}),
        "plr": ({"n_walls": 30, **replay}, replay_deviations),
        "accel": (
            {"n_walls": 0, **replay, "num_edits": 20, "mutation_criterion": "batch", "mutation_subsample_size": 4},
            replay_deviations,
        ),
        "paired": (
            {"n_walls": 30, "ued_score": "relative_regret", "num_students": 2, "teacher_anneal_lr": True}
            | {"teacher_ent_coef": 0.05, "teacher_gamma": 0.99, "teacher_gae_lambda": 0.9, "teacher_lstm_size": 256}
            | {"teacher_conv_filters": 128, "noise_dim": 50},
            {"teacher_lr": 3e-4},  # paired_runner.py: the teacher trains at --lr, which PPO_SHARED sets
        ),
    }
    for method, (method_flags, deviations) in expected.items():
        method_shipped = shipped | ({"ued_score": "relative_regret"} if method == "paired" else {})
        minimax = config.minimax_settings(method, method_shipped, args)
        matched = config.cleanued_settings(method, minimax, match_deviations=True)
        assert matched == STUDENT_FLAGS_AT_11X11 | method_flags | deviations, method
        assert config.cleanued_settings(method, minimax, match_deviations=False) == (
            STUDENT_FLAGS_AT_11X11 | method_flags
        ), method


def test_match_deviations_is_on_by_default_and_reaches_the_flags_cleanued_trains_with(monkeypatch, tmp_path):
    """The harness runs cleanued's flagged deviations as minimax unless told not to: DR's carry across updates is
    in the flags method_settings hands the run stage, and without --match-deviations the settings table names the
    carry as a setting the sides train with differently."""
    monkeypatch.setattr(config, "minimax_shipped", lambda method, venv: {"lr_anneal_steps": 0})
    assert config.Args().match_deviations is True
    matched = config.method_settings(config.Args(methods=("dr",), out=tmp_path))["dr"]
    assert matched["cleanued"]["carry_across_updates"] is True
    unmatched = config.method_settings(config.Args(methods=("dr",), out=tmp_path, match_deviations=False))["dr"]
    assert "carry_across_updates" not in unmatched["cleanued"]
    (carry,) = [row for row in unmatched["table"] if row["cleanued_flag"] == "carry_across_updates"]
    assert (carry["cleanued_used"], carry["minimax_used"]) == (False, True)
    assert carry["problem"] == "the sides train with different values"


def test_a_diagnostic_ppo_setting_replaces_the_shared_value_on_both_sides():
    """A --diagnostic of a setting PPO_SHARED fixes (the learning rate) is what both sides train with, not the
    shared value it diagnoses."""
    args = config.Args(methods=("dr",), diagnostic=("lr=0.001",))
    minimax = config.minimax_settings("dr", {"lr": 1e-4, "lr_anneal_steps": 0}, args)
    assert minimax["lr"] == 0.001
    assert config.cleanued_settings("dr", minimax, match_deviations=True)["lr"] == 0.001


def test_the_settings_table_names_a_learning_rate_mismatch_and_the_teacher_lr_deviation():
    """Values compare with a relative tolerance (as math.isclose), so learning rates 1e-4 and 3e-4 differ; PAIRED's
    teacher_lr is a deviation because cleanued's default (1e-4) is not the value minimax trains with (--lr, 3e-4),
    although it equals minimax's shipped --lr."""
    assert config.same(3e-4, 3e-4 * (1 + 1e-12)) and not config.same(1e-4, 3e-4)
    shipped = {"lr": 1e-4, "lr_anneal_steps": 0, "teacher_lr_anneal_steps": 0, "ued_score": "relative_regret"}
    minimax = config.minimax_settings("paired", shipped, config.Args(methods=("paired",)))
    cleanued = config.cleanued_settings("paired", minimax, match_deviations=True) | {"lr": 1e-4}
    defaults = {"lr": 1e-4, "teacher_lr": 1e-4}
    table = config.settings_table("paired", defaults, shipped, minimax, cleanued)
    problems = {row["cleanued_flag"]: row["problem"] for row in table if row["kind"] != "fixed"}
    assert problems["lr"] == "the sides train with different values"
    assert problems["teacher_lr"] == "a deliberate deviation, set to minimax's behaviour here"


def test_a_grid_off_the_log_interval_or_the_run_length_is_refused():
    """Checkpoints fall on multiples of cleanued's --log-interval (10) and the run ends on a checkpoint."""
    with pytest.raises(ConfigError, match=r"--rollouts \(250\) must be a multiple of --checkpoint-every \(100\)"):
        config.Args(rollouts=250, checkpoint_every=100)
    with pytest.raises(ConfigError, match=r"--checkpoint-every \(25\) must be a multiple of 10"):
        config.Args(methods=("dr",), rollouts=100, checkpoint_every=25)


def test_cleanued_runs_log_every_ten_updates_and_checkpoint_on_the_grid_without_evaluating(tmp_path):
    """cleanued's run flags: the run length, logs every LOG_INTERVAL updates, checkpoints and archives on the
    evaluation grid, and no evaluation or screenshots of its own (the harness evaluates both sides alike)."""
    args = config.Args(methods=("dr",), seeds=3, first_seed=5, rollouts=300, checkpoint_every=50, out=tmp_path)
    (only_run,) = config.cleanued_runs(args, "dr")
    assert config.cleanued_run_settings(args, "dr", only_run) == {
        "runs_dir": tmp_path / "runs",
        "run_name": "cleanued_dr",
        "num_seeds": 3,
        "seed": 5,
        "total_updates": 300,
        "log_interval": 10,
        "eval_interval": 0,
        "screenshot_interval": 0,
        "checkpoint_interval": 50,
        "archive_interval": 50,
    }


def test_the_percentile_interval_of_skewed_seeds_stays_within_their_range():
    """Seeds 0, 0, 1: resample means 0, 1/3, 2/3, 1 with chances 8, 12, 6, 1 in 27, so the 2.5% and 97.5% points
    are 0 and 1 (1 keeps 3.7% > 2.5% of the mass); a basic (reflected) interval would reach below 0."""
    assert report.bootstrap_interval([0.0, 0.0, 1.0], 10_000) == (pytest.approx(1 / 3), (0.0, 1.0))


def test_summary_rows_read_their_own_field_and_the_held_out_mean_starts_at_heldout_from():
    """Each row's values against the records they come from: the return row from `return`, the final held-out row from
    the held-out solve rate, the held-out mean over the checkpoints from --heldout-from (20) on, not the one at 10; a
    NaN logged return (a seed with nothing logged in the window) is left out, and the count cells give min-max."""
    args = config.Args(methods=("dr",), seeds=2, rollouts=30, checkpoint_every=10, heldout_from=20,
                       heldout_mazes=("SixteenRooms",))  # fmt: skip
    solve = {"cleanued": [0.6, 0.8], "minimax": [0.1, 0.3]}
    evaluations = []
    for side, rates in solve.items():
        for seed, rate in enumerate(rates):
            base = {"side": side, "method": "dr", "seed": seed}
            training = {"grid": 30, "kind": "train_levels", "maze": None, "solve_rate": rate, "return": rate / 2}
            evaluations.append(base | training)
            for grid, held_out in ((10, 0.0), (20, rate - 0.2), (30, rate)):
                held_out_record = {"grid": grid, "kind": "heldout", "maze": "SixteenRooms", "return": 0.9}
                evaluations.append(base | held_out_record | {"solve_rate": held_out})
    updates = {("dr", "cleanued"): [10.0, 30.0], ("dr", "minimax"): [20.0, 20.0]}
    logged = {("dr", "cleanued"): [0.5, math.nan], ("dr", "minimax"): [0.1, 0.2]}
    records = report.summary_records(args, evaluations, updates, {}, logged)
    by_metric = {record["metric"]: record for record in records}
    assert by_metric["training-distribution return"]["cleanued"]["per_seed"] == [0.3, 0.4]
    assert by_metric["SixteenRooms solve rate, final checkpoint"]["minimax"]["per_seed"] == [0.1, 0.3]
    over = by_metric["SixteenRooms solve rate, mean over checkpoints 20-30"]
    assert over["cleanued"]["per_seed"] == pytest.approx([0.5, 0.7])  # (rate - 0.2 + rate) / 2
    own = by_metric["logged training return, last 30 rollouts (own definition)"]
    assert own["cleanued"]["per_seed"] == [0.5] and own["cleanued"]["mean"] == 0.5
    table = report.markdown_summary(records, args.seeds)
    assert "| DR | student gradient updates | 20 (10-30) | 20 (20-20) | - | - |" in table


def test_curriculum_windows_take_each_quantity_from_its_own_columns_and_rollouts(tmp_path):
    """ACCEL's curriculum rows against hand sums. cleanued: the new levels' walls weighted by the share of new rollouts
    (1 - replay - mutation fraction: 0.25 and 1), the replayed levels' by the replay share. minimax: the new levels'
    walls from env/n_walls on new rollouts only (ticks 1 and 3; tick 2 is a replay and a mutant rollout). PAIRED's
    minimax return is the protagonist's (mean_return_a0), not `return`."""
    path = tmp_path / "logs.csv"
    header = "seed,update,buffer/replay_fraction,buffer/mutation_fraction,level_new/walls,level_replay/walls\n"
    path.write_text(header + "0,10,0.5,0.25,2,6\n0,20,0.4,0,4,9\n")
    cleanued_rows = report.read_cleanued_log(path)
    ticks = minimax_rows([0, 1, 1], **{"env/n_walls": [5.0, 9.0, 7.0], "plr/n_walls": [math.nan, 11.0, math.nan]})
    args = config.Args(methods=("accel",), seeds=1, rollouts=40, checkpoint_every=40, window=40)
    records = report.curriculum_records(args, "accel", cleanued_rows, {0: report.minimax_events(ticks, "accel")})
    mean = {(record["quantity"], record["side"]): record["mean"] for record in records}
    assert mean["walls of new levels", "cleanued"] == pytest.approx((0.25 * 2 + 0.6 * 4) / 0.85)
    assert mean["walls of replayed levels", "cleanued"] == pytest.approx((0.5 * 6 + 0.4 * 9) / 0.9)
    assert mean["walls of new levels", "minimax"] == 6.0
    assert mean["walls of replayed levels", "minimax"] == 11.0
    paired_ticks = minimax_rows([0, 0], **{"return": [0.1, 0.3], "mean_return_a0": [0.5, 0.7]})
    paired_args = config.Args(methods=("paired",), seeds=1, rollouts=20, checkpoint_every=10, window=20)
    paired = report.curriculum_records(paired_args, "paired", [], {0: report.minimax_events(paired_ticks, "paired")})
    (own,) = [
        r for r in paired if r["quantity"] == "logged training return (own definition)" and r["side"] == "minimax"
    ]
    assert own["mean"] == pytest.approx(0.6)


def test_the_report_counts_updates_and_returns_from_the_logs_and_keeps_to_its_seeds_and_eval_seed(
    monkeypatch, tmp_path
):
    """report.jsonl of one PLR seed a side: cleanued's gradient updates from student_updates (7 of 20 updates),
    minimax's from stopped.json's n_updates (8 of 20 ticks); each side's logged return over the last --window
    rollouts (cleanued the row at 20: 0.5; minimax ticks 11-20 up to and with the stop tick, not tick 21: 0.155); an
    evaluation of another --eval-seed or of a seed index past --seeds stays out of the solve rates."""
    monkeypatch.setattr(report, "plot_curves", lambda args, evaluations, path: None)  # the figure is not checked here
    args = config.Args(methods=("plr",), seeds=1, rollouts=20, checkpoint_every=10, window=10, out=tmp_path,
                       heldout_mazes=("SixteenRooms",), bootstrap_resamples=100)  # fmt: skip
    cleanued_log = outputs.cleanued_run_dir(tmp_path, "cleanued_plr") / "logs.csv"
    cleanued_log.parent.mkdir(parents=True)
    cleanued_log.write_text("seed,update,student_updates,train/return\n0,10,4,0.1\n0,20,7,0.5\n")
    directory = outputs.minimax_dir(tmp_path, "plr", 1)
    directory.mkdir(parents=True)
    (directory / "stopped.json").write_text(json.dumps({"target": 20, "stop_tick": 20, "n_updates": 8, "rollouts": 20}))
    ticks = "\n".join(f"{tick},{min(tick // 2, 8)},{tick / 100}" for tick in range(1, 22))
    (directory / "logs.csv").write_text(f"# _tick,n_updates,return\n{ticks}\n")
    evaluations = []
    for side, rate in (("cleanued", 0.5), ("minimax", 0.25)):
        base = {"side": side, "method": "plr", "grid": 20, "kind": "train_levels", "maze": None, "episodes": 512}
        evaluations.append(base | {"seed": 0, "eval_seed": 0, "solve_rate": rate, "return": 0.0})
        evaluations.append(base | {"seed": 0, "eval_seed": 1, "solve_rate": 0.9, "return": 0.0})
        evaluations.append(base | {"seed": 1, "eval_seed": 0, "solve_rate": 0.9, "return": 0.0})
    outputs.write_jsonl(tmp_path / "evaluations.jsonl", evaluations)
    report.report_stage(args, {})
    by_metric = {record["metric"]: record for record in outputs.read_jsonl(tmp_path / "report.jsonl")}
    per_seed = {metric: (r["cleanued"]["per_seed"], r["minimax"]["per_seed"]) for metric, r in by_metric.items()}
    assert per_seed["training-distribution solve rate"] == ([0.5], [0.25])
    assert per_seed["student gradient updates"] == ([7.0], [8.0])
    assert per_seed["rollouts played"] == ([20.0], [20.0])
    (cleanued_return,), (minimax_return,) = per_seed["logged training return, last 10 rollouts (own definition)"]
    assert cleanued_return == 0.5 and minimax_return == pytest.approx(0.155)
