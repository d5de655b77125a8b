"""common/report.py on synthetic run folders with known values: per-maze means and seed counts, mean and IQM
across mazes, bootstrap intervals that contain the estimate and shrink with more seeds, the newest evaluation
used, probability of improvement and the risk evaluation's CVaR against plain Python, figures, one-line errors."""

import csv
import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import common.report as report_module
from common.errors import ConfigError
from common.evaluate import cvar, mean_and_interval
from common.report import Args, load_methods, main, probability_of_improvement, summarize
from tests.states import command_in_process

MAZES = ("SixteenRooms", "Labyrinth", "StandardMaze")


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def run_folder(root: Path, name: str, script: str, scores: dict[str, list[float]], update=100, stamp="20260101-000000"):
    """A run folder with config.json, logs.csv and one evaluation CSV of the given per-seed solve rates."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"script": script, "config": {"num_seeds": 3}}))
    seeds = len(next(iter(scores.values())))
    rows = [
        {
            "seed": s,
            "update": u,
            "env_steps": 64 * u,
            "train/return": u / 100 * (s + 1) / seeds,
            "eval/solve_rate/SixteenRooms": u / 200,
        }
        for u in (50, 100)
        for s in range(seeds)
    ]
    write_csv(folder / "logs.csv", rows)
    evaluation = [
        {"maze": maze, "seed": s, "update": update, "episodes": 10, "solve_rate": value, "return": value / 2}
        for maze, values in scores.items()
        for s, value in enumerate(values)
    ]
    write_csv(folder / "eval" / f"evaluate_{update:08d}_{stamp}.csv", evaluation)
    return folder


A = {"SixteenRooms": [0.9, 0.7, 1.0], "Labyrinth": [0.1, 0.0, 0.4], "StandardMaze": [0.5, 0.6, 0.3]}
B = {"SixteenRooms": [0.2, 0.3, 0.1], "Labyrinth": [0.0, 0.0, 0.1], "StandardMaze": [0.2, 0.4, 0.3]}


def args_for(*runs, out: Path, resamples: int = 2000, labels: tuple[str, ...] = ()) -> Args:
    return Args(runs=tuple(str(run) for run in runs), out=out, resamples=resamples, label=labels)


def test_aggregates_match_numpy_and_intervals_behave(tmp_path):
    first = run_folder(tmp_path, "a1", "algos/accel.py", A)
    second = run_folder(tmp_path, "a2", "algos/accel.py", A)
    other = run_folder(tmp_path, "b", "algos/dr.py", B)
    args = args_for(first, other, out=tmp_path / "out")
    rows = {(row["method"], row["maze"]): row for row in summarize(load_methods(args.runs), args)}
    for maze in MAZES:
        row = rows["accel", maze]
        assert row["n_seeds"] == 3 and row["mean"] == pytest.approx(np.mean(A[maze]))
        assert row["ci_low"] <= row["mean"] <= row["ci_high"]
    scores = np.concatenate([A[maze] for maze in MAZES])
    assert rows["accel", "mean"]["mean"] == pytest.approx(scores.mean())
    assert rows["accel", "IQM"]["mean"] == pytest.approx(stats.trim_mean(scores, 0.25))
    assert rows["dr", "IQM"]["mean"] == pytest.approx(stats.trim_mean(np.concatenate([B[m] for m in MAZES]), 0.25))
    for aggregate in ("mean", "IQM"):
        assert (
            rows["accel", aggregate]["ci_low"]
            <= rows["accel", aggregate]["mean"]
            <= rows["accel", aggregate]["ci_high"]
        )
    pooled_args = args_for(first, second, out=tmp_path / "out")
    pooled = {(r["method"], r["maze"]): r for r in summarize(load_methods(pooled_args.runs), pooled_args)}
    assert pooled["accel", "SixteenRooms"]["n_seeds"] == 6, "two 3-seed folders of one method are 6 seeds"
    for key in (("accel", "SixteenRooms"), ("accel", "mean")):
        assert pooled[key]["ci_high"] - pooled[key]["ci_low"] < rows[key]["ci_high"] - rows[key]["ci_low"]


def test_the_newest_evaluation_is_used(tmp_path):
    folder = run_folder(tmp_path, "a", "algos/dr.py", {maze: [0.0, 0.0, 0.0] for maze in MAZES}, update=200)
    run_folder(
        tmp_path, "a", "algos/dr.py", {maze: [1.0, 1.0, 1.0] for maze in MAZES}, update=100, stamp="20270101-000000"
    )
    run_folder(
        tmp_path, "a", "algos/dr.py", {maze: [0.5, 0.5, 0.5] for maze in MAZES}, update=200, stamp="20260102-000000"
    )
    (method,) = load_methods((str(folder),))
    assert method.solve_rates["Labyrinth"] == [0.5, 0.5, 0.5], "highest update, then the latest time"


def test_probability_of_improvement_by_hand():
    assert probability_of_improvement([np.array([1.0, 1.0])], [np.array([0.0, 0.5])]) == 1.0
    assert probability_of_improvement([np.array([0.5, 0.5])], [np.array([0.5, 0.5])]) == 0.5
    x, y = [np.array([0.0, 1.0]), np.array([0.2, 0.4, 0.9])], [np.array([0.5]), np.array([0.3, 0.9])]
    per_maze = []
    for a, b in zip(x, y, strict=True):
        pairs = [(1.0 if u > v else 0.5 if u == v else 0.0) for u in a for v in b]
        per_maze.append(sum(pairs) / len(pairs))
    assert probability_of_improvement(x, y) == pytest.approx(sum(per_maze) / 2)


def test_cvar_selects_by_the_first_pass_and_reports_the_second():
    rng = np.random.default_rng(0)
    for levels in (200, 150):  # 150 at 1%: 1.5 levels, rounded up to 2
        first, second = rng.uniform(size=levels), rng.uniform(size=levels)
        for alpha in (0.01, 1.0, 10.0, 50.0, 100.0):
            count = max(1, math.ceil(alpha / 100 * levels))
            worst = sorted(range(levels), key=lambda i: (first[i], i))[:count]
            assert cvar(first, second, alpha) == pytest.approx(sum(second[i] for i in worst) / count)
    assert cvar(np.array([0.0, 1.0]), np.array([1.0, 0.0]), 50.0) == 1.0, "no selection bias: the second pass"


def test_report_writes_tables_and_figures(tmp_path, capsys):
    a, b = run_folder(tmp_path, "a", "algos/accel.py", A), run_folder(tmp_path, "b", "algos/dr.py", B)
    risk = [
        {"seed": seed, "update": 100, "levels": 10, "episodes": 2, "alpha": alpha, "win_rate": alpha / 200}
        for alpha in (1.0, 10.0, 100.0)
        for seed in range(3)
    ]
    write_csv(a / "eval" / "risk_00000100_20260101-000000.csv", risk)
    main(args_for(b, labels=(f"ACCEL={a}",), out=tmp_path / "out", resamples=500))
    out = tmp_path / "out"
    assert "| **IQM** (across mazes) |" in capsys.readouterr().out
    assert (out / "summary.md").read_text().startswith("Held-out solve rate")
    rows = list(csv.DictReader(open(out / "summary.csv")))
    assert list(rows[0]) == ["method", "maze", "n_seeds", "mean", "ci_low", "ci_high", "update"]
    assert {row["update"] for row in rows} == {"100"}
    assert {row["method"] for row in rows} == {"ACCEL", "dr"} and len(rows) == 2 * (len(MAZES) + 2)
    with open(out / "improvement.csv") as handle:
        improvement = {(r["method_x"], r["method_y"]): float(r["probability"]) for r in csv.DictReader(handle)}
    assert improvement["ACCEL", "dr"] > 0.8
    assert improvement["ACCEL", "dr"] + improvement["dr", "ACCEL"] == pytest.approx(1)
    assert [r["method"] for r in csv.DictReader(open(out / "risk.csv"))] == ["ACCEL"] * 3
    for name in ("curves", "mazes", "aggregates", "risk"):
        assert (out / f"{name}.png").stat().st_size > 5_000


@pytest.mark.parametrize(
    ("setup", "fragment"),
    [
        ("plain", "is not a run folder (no config.json)"),
        ("missing", "it does not exist (there is no 'missing' in"),
        ("other_mazes", "the methods were evaluated on different mazes"),
    ],
)
def test_bad_folders_are_one_line_errors(tmp_path, setup, fragment):
    good = run_folder(tmp_path, "good", "algos/dr.py", B)
    if setup == "plain":
        bad = tmp_path / "plain"
        bad.mkdir()
    elif setup == "missing":
        bad = tmp_path / "missing"
    else:
        bad = run_folder(tmp_path, "other", "algos/plr.py", {"SixteenRooms": [0.5, 0.5, 0.5]})
    result = command_in_process("-m", "common.report", str(good), str(bad), "--out", str(tmp_path / "out"))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], (
        result.stderr
    )


def report(*arguments: str) -> subprocess.CompletedProcess:
    """`python -m common.report <arguments>`, run in this test's process (tests.states.command_in_process)."""
    return command_in_process("-m", "common.report", *arguments)


def one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def risk_rows(
    seeds: int, maze_size=13, walls=60, max_steps=250, alphas=(1.0, 2.0, 100.0), counting="window"
) -> list[dict]:
    """A risk CSV as `common.evaluate --risk` writes it (win rate alpha / 200 for every seed); `counting` None: as
    written before the column was."""
    setup = {"levels": 10, "episodes": 2, "maze_size": maze_size, "walls": walls, "max_steps": max_steps}
    setup |= {"counting": counting} if counting else {}
    return [
        {"seed": seed, "update": 100, **setup, "alpha": alpha, "win_rate": alpha / 200}
        for alpha in alphas
        for seed in range(seeds)
    ]


@pytest.mark.parametrize("value", ["nan", "1.5", "-0.1", "", "high", "inf"])
def test_a_score_that_is_not_a_rate_is_refused_naming_file_and_line(tmp_path, value):
    good = run_folder(tmp_path, "good", "algos/plr.py", A)
    bad = run_folder(tmp_path, "bad", "algos/dr.py", B)
    (evaluation,) = (bad / "eval").glob("evaluate_*.csv")
    lines = evaluation.read_text().splitlines()
    fields = lines[3].split(",")
    fields[4] = value  # solve_rate of the third row, on line 4 of the file
    lines[3] = ",".join(fields)
    evaluation.write_text("\n".join(lines) + "\n")
    result = report(str(good), str(bad), "--out", str(tmp_path / "out"))
    one_line_error(result, f"{evaluation} line 4", "solve_rate", "[0, 1]")
    assert not (tmp_path / "out").exists(), "nothing is written from bad input"


def test_a_repeated_row_an_empty_risk_file_and_folders_on_other_mazes_are_refused(tmp_path):
    """A seed's row twice in an evaluation, a risk CSV with a header and no row (a traceback under a mutation), and
    two folders of one method evaluated on different mazes are each one line naming the file or folder (the
    mutation trial's survivors of read_evaluation, read_risk and add_folder)."""
    folder = run_folder(tmp_path, "a", "algos/dr.py", A)
    (evaluation,) = (folder / "eval").glob("evaluate_*.csv")
    lines = evaluation.read_text().splitlines()
    evaluation.write_text("\n".join([*lines, lines[1]]) + "\n")
    with pytest.raises(ConfigError, match=rf"line {len(lines) + 1}: maze 'SixteenRooms' seed 0 is empty or repeated"):
        load_methods((str(folder),))
    folder = run_folder(tmp_path, "b", "algos/dr.py", A)
    risk = folder / "eval" / "risk_00000100_20260101-000000.csv"
    risk.write_text(",".join(risk_rows(1)[0]) + "\n")
    with pytest.raises(ConfigError, match=r"mixes risk evaluations of different configurations, or has no rows"):
        load_methods((str(folder),))
    first = run_folder(tmp_path, "c", "algos/dr.py", A)
    other = run_folder(tmp_path, "d", "algos/dr.py", {"SixteenRooms": [0.5, 0.5, 0.5]})
    with pytest.raises(ConfigError, match=f"{other} was evaluated on other mazes than the other dr folders"):
        load_methods((str(first), str(other)))


def test_curves_are_drawn_only_over_the_env_steps_every_seed_covers():
    """Seeds of different lengths (one stopped early, one started late): the grid runs from the latest first step to
    the earliest last one, each seed interpolated there, nothing carried past its end; a seed with one point gives
    no curve. Fails with the grid's bounds widened (the mutation trial's survivor of curves_on_grid)."""
    long = {"env_steps": np.array([0.0, 10, 20, 30]), "return": np.array([0.0, 1, 2, 3])}
    late = {"env_steps": np.array([5.0, 15, 25]), "return": np.array([0.5, 1.5, 2.5])}
    grid, values = report_module.curves_on_grid([long, late], "return")
    np.testing.assert_array_equal(grid, [5, 10, 15, 20, 25])
    np.testing.assert_allclose(values, [[0.5, 1, 1.5, 2, 2.5], [0.5, 1, 1.5, 2, 2.5]])
    single = {"env_steps": np.array([0.0, 10]), "return": np.array([np.nan, 1.0])}
    assert report_module.curves_on_grid([long, single], "return") is None


def test_a_method_with_a_folder_without_risk_is_left_out_of_the_risk_table(tmp_path):
    """Risk is pooled only over a method's every folder: with one of its two folders evaluated for risk, the method
    has no risk rows (its risk would be one folder's seeds standing for all). Fails with the folder's lack of risk
    ignored (the mutation trial's survivor of with_risk)."""
    first, second = run_folder(tmp_path, "a", "algos/dr.py", A), run_folder(tmp_path, "b", "algos/dr.py", A)
    write_csv(first / "eval" / "risk_00000100_20260101-000000.csv", risk_rows(3))
    methods = load_methods((str(first), str(second)))
    assert report_module.with_risk(methods) == [] and methods[0].without_risk == [second]
    assert report_module.risk_summary(methods, args_for(first, second, out=tmp_path / "out")) == []


def test_a_risk_win_rate_that_is_not_a_rate_is_refused(tmp_path):
    folder = run_folder(tmp_path, "a", "algos/dr.py", A)
    rows = risk_rows(3)
    rows[4]["win_rate"] = "nan"
    write_csv(folder / "eval" / "risk_00000100_20260101-000000.csv", rows)
    with pytest.raises(ConfigError, match=r"risk_00000100_20260101-000000\.csv line 6: win_rate 'nan'"):
        load_methods((str(folder),))


@pytest.mark.parametrize("trim", [0.5, 0.7, -0.1, float("nan")])
def test_trim_must_leave_scores_for_the_iqm(tmp_path, trim):
    with pytest.raises(ConfigError, match=r"^--trim must be in \[0, 0\.5\)"):
        Args(runs=("runs/a",), out=tmp_path, trim=trim)


def test_the_aggregate_rows_follow_the_flags_and_the_stratified_percentile_bootstrap(tmp_path):
    """The mean and IQM rows over mazes: the IQM trims --trim, each interval is scipy's percentile bootstrap at
    --confidence from --seed, resampling each maze's seeds on their own, a maze without spread still leaves the
    others' spread, and n_seeds is the fewest seeds of any maze. Fails with --trim, --confidence or --seed ignored,
    another bootstrap method, a constant maze collapsing the interval, or the most seeds counted (the mutation
    trial's survivors of summarize and interval)."""
    rng = np.random.default_rng(3)
    per_maze = [rng.uniform(size=6), rng.uniform(size=5), np.full(6, 0.5)]
    method = report_module.Method(name="m", evaluated_at={Path("a"): 100})
    method.solve_rates.update({maze: list(values) for maze, values in zip("ABC", per_maze, strict=True)})
    args = Args(runs=("a",), out=tmp_path, trim=0.1, confidence=0.5, seed=7, resamples=500)
    rows = {row["maze"]: row for row in summarize([method], args)}
    statistics = (report_module.mean_of, report_module.iqm_of(0.1))
    for name, statistic in zip(report_module.AGGREGATES, statistics, strict=True):
        expected = stats.bootstrap(
            tuple(per_maze), statistic, n_resamples=500, confidence_level=0.5, method="percentile",
            vectorized=True, paired=False, rng=np.random.default_rng(7),
        ).confidence_interval  # fmt: skip
        row = rows[name]
        assert (row["ci_low"], row["ci_high"]) == (float(expected.low), float(expected.high)), name
        assert row["ci_low"] < row["ci_high"] and row["n_seeds"] == 5, name
    pooled = np.concatenate(per_maze)
    assert rows[report_module.AGGREGATES[0]]["mean"] == pytest.approx(pooled.mean())
    assert rows[report_module.AGGREGATES[1]]["mean"] == pytest.approx(stats.trim_mean(pooled, 0.1))


def test_a_file_not_written_this_time_is_named_as_from_an_earlier_report(tmp_path):
    (tmp_path / "improvement.csv").write_text("old")
    line = report_module.not_written(tmp_path, ("improvement.csv", "risk.csv"), "one method")
    earlier = f"the improvement.csv in {tmp_path} is from an earlier report"
    assert line == f"not written: improvement.csv, risk.csv (one method); {earlier}"
    assert report_module.not_written(tmp_path / "new", ("improvement.csv",), "x") == "not written: improvement.csv (x)"


def test_an_out_that_is_a_file_is_refused_before_anything_is_read(tmp_path):
    """--out names the report's folder: a file there is refused in one line (it used to end in a FileExistsError
    traceback after every run was read), and is left as it was."""
    out = tmp_path / "afile"
    out.write_text("mine")
    with pytest.raises(ConfigError) as raised:
        Args(runs=("runs/a",), out=out)
    assert str(raised.value) == f"--out {out} is a file; give a folder for the report"
    assert out.read_text() == "mine"
    too_long = tmp_path / ("a" * 300)  # Path.exists raised OSError: a traceback
    with pytest.raises(ConfigError, match=r"it has a 300-byte name, 'aaaaaaaaaaaaaaaaaaaa'\.\.\.: file systems take"):
        Args(runs=("runs/a",), out=too_long)


@pytest.mark.slow
def test_any_run_name_is_a_folder_and_labels_name_methods(tmp_path):
    """`lr=3e-4` is a legal run name: a positional argument is always a folder; --label NAME=RUN_DIR names a
    method (the label ends at the first `=`, so the folder may hold more)."""
    odd = run_folder(tmp_path, "lr=3e-4", "algos/dr.py", B)
    plr = run_folder(tmp_path, "plr", "algos/plr.py", A)
    also_odd = run_folder(tmp_path, "plr lr=1e-3", "algos/plr.py", A)
    out = tmp_path / "out"
    result = report(str(odd), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "| maze | dr |" in result.stdout, "the folder named lr=3e-4 is read as a folder, not as LABEL=DIR"
    result = report(str(odd), "--label", f"Robust PLR={plr}", "--label", f"Robust PLR={also_odd}", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(open(out / "summary.csv")))
    assert {(row["method"], row["maze"], row["n_seeds"]) for row in rows if row["maze"] == "Labyrinth"} == {
        ("dr", "Labyrinth", "3"),
        ("Robust PLR", "Labyrinth", "6"),
    }
    one_line_error(report(f"x={odd}", "--out", str(out)), f"x={odd} is not a run folder", "--label NAME=RUN_DIR")
    one_line_error(report(str(odd), "--label", str(plr), "--out", str(out)), "--label", "NAME=RUN_DIR")
    one_line_error(report(str(odd), "--label", f"={plr}", "--out", str(out)), "--label", "empty")


def test_a_folder_given_twice_is_refused(tmp_path):
    folder = run_folder(tmp_path, "a", "algos/dr.py", A)
    with pytest.raises(ConfigError, match="given twice"):
        load_methods((str(folder), str(tmp_path / "." / "a")))
    with pytest.raises(ConfigError, match="given twice"):
        load_methods((str(folder),), (f"DR={folder}",))


def test_report_and_evaluate_share_one_interval_policy(tmp_path, capsys):
    """Two seeds: no interval anywhere, as evaluate says; three seeds: the per-maze interval is evaluate's."""
    two = run_folder(tmp_path, "two", "algos/dr.py", {maze: [0.0, 0.99] for maze in MAZES})
    three = run_folder(tmp_path, "three", "algos/plr.py", A)
    out = tmp_path / "out"
    main(args_for(two, three, out=out, resamples=500))
    printed = capsys.readouterr().out
    rows = {(row["method"], row["maze"]): row for row in csv.DictReader(open(out / "summary.csv"))}
    for maze in (*MAZES, "mean", "IQM"):
        assert rows["dr", maze]["ci_low"] == rows["dr", maze]["ci_high"] == "", rows["dr", maze]
    assert "| 0.495 (n=2) |" in printed
    for maze in MAZES:
        mean, (low, high) = mean_and_interval(A[maze])
        assert float(rows["plr", maze]["ci_low"]) == pytest.approx(low, abs=1e-5)
        assert float(rows["plr", maze]["ci_high"]) == pytest.approx(high, abs=1e-5)
    policy = report_module.interval_policy(0.95)
    assert f"none below {report_module.MIN_SEEDS_FOR_INTERVAL} seeds" in policy and policy in printed
    assert policy in (out / "summary.md").read_text()
    with open(out / "improvement.csv") as handle:
        assert all(row["ci_low"] == row["ci_high"] == "" for row in csv.DictReader(handle)), "dr has 2 seeds"


@pytest.mark.slow
def test_report_says_which_files_it_did_not_write_and_why(tmp_path):
    folder = run_folder(tmp_path, "a", "algos/dr.py", A)
    result = report(str(folder), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "not written: improvement.csv (one evaluated method: nothing to compare)" in result.stdout
    assert "not written: risk.csv, risk.png (no run folder has a risk evaluation" in result.stdout, result.stdout
    other = run_folder(tmp_path, "b", "algos/plr.py", B)
    write_csv(other / "eval" / "risk_00000100_20260101-000000.csv", risk_rows(3))
    result = report(str(folder), str(other), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert f"risk: dr has no risk evaluation ({folder})" in result.stdout
    assert "not written" not in result.stdout and (tmp_path / "out" / "risk.png").exists()


def test_risk_configuration_is_reported_and_never_mixed(tmp_path, capsys):
    a = run_folder(tmp_path, "a", "algos/dr.py", A)
    b = run_folder(tmp_path, "b", "algos/plr.py", B)
    write_csv(a / "eval" / "risk_00000100_20260101-000000.csv", risk_rows(3))
    write_csv(b / "eval" / "risk_00000100_20260101-000000.csv", risk_rows(3, max_steps=64))
    with pytest.raises(ConfigError, match="risk evaluations differ") as error:
        load_methods((str(a), str(b)))
    assert "at most 250 steps" in str(error.value) and "at most 64 steps" in str(error.value)
    write_csv(b / "eval" / "risk_00000100_20260102-000000.csv", risk_rows(3))
    out = tmp_path / "out"
    main(args_for(a, b, out=out, resamples=500))
    rows = list(csv.DictReader(open(out / "risk.csv")))
    assert {(row["maze_size"], row["walls"], row["max_steps"], row["levels"], row["episodes"]) for row in rows} == {
        ("13", "60", "250", "10", "2")
    }
    assert "13x13 mazes with 60 walls, at most 250 steps" in capsys.readouterr().out


def test_risk_win_rates_counted_otherwise_are_never_mixed(tmp_path):
    """A risk CSV from before `counting` was recorded counted each attempt's first episode; SFL's count (every
    episode of the window) gives other win rates, so the two never pool."""
    a = run_folder(tmp_path, "a", "algos/dr.py", A)
    b = run_folder(tmp_path, "b", "algos/plr.py", B)
    write_csv(a / "eval" / "risk_00000100_20260101-000000.csv", risk_rows(3))
    write_csv(b / "eval" / "risk_00000100_20260101-000000.csv", risk_rows(3, counting=None))
    with pytest.raises(ConfigError, match="risk evaluations differ") as error:
        load_methods((str(a), str(b)))
    assert "every episode counted (SFL's)" in str(error.value) and "the first episode counted" in str(error.value)
    write_csv(a / "eval" / "risk_00000100_20260102-000000.csv", risk_rows(3, counting="first"))
    assert {method.risk_setup.counting for method in load_methods((str(a), str(b)))} == {"first"}
    write_csv(b / "eval" / "risk_00000100_20260102-000000.csv", risk_rows(3, counting="all"))
    with pytest.raises(ConfigError, match="counting must be window or first, got 'all'"):
        load_methods((str(a), str(b)))


def keep_figures(monkeypatch) -> dict:
    """File name -> figure of every figure the report saves from now on."""
    saved = {}
    save = report_module.save

    def keep(figure, path):
        saved[path.name] = figure
        return save(figure, path)

    monkeypatch.setattr(report_module, "save", keep)
    return saved


def test_figures_name_their_axes_mazes_and_bands(tmp_path, monkeypatch):
    a, b = run_folder(tmp_path, "a", "algos/accel.py", A), run_folder(tmp_path, "b", "algos/dr.py", B)
    write_csv(a / "eval" / "risk_00000100_20260101-000000.csv", risk_rows(3))
    saved = keep_figures(monkeypatch)
    main(args_for(a, b, out=tmp_path / "out", resamples=200))
    assert set(saved) == {"curves.png", "mazes.png", "aggregates.png", "risk.png"}
    for name, figure in saved.items():
        assert all(axis.get_xlabel() and axis.get_title() for axis in figure.axes), name
        assert figure.axes[0].get_ylabel(), name
    held_out, training = saved["curves.png"].axes
    assert "SixteenRooms" in held_out.get_title() and held_out.get_ylabel() and training.get_ylabel()
    for axis in (held_out, training, *saved["risk.png"].axes):
        legend = " ".join(text.get_text() for text in axis.get_legend().get_texts())
        assert "95% Student-t interval over seeds" in legend, legend
    assert "13x13" in saved["risk.png"].axes[0].get_title()


def cut_csv(folder: Path, kind: str) -> Path:
    """The run folder's logs.csv or evaluation CSV, as `kind` says."""
    return folder / "logs.csv" if kind == "logs" else next((folder / "eval").glob("evaluate_*.csv"))


@pytest.mark.parametrize("kind", ["logs", "evaluation"])
def test_a_torn_last_row_is_dropped_with_a_warning(tmp_path, capsys, kind):
    folder = run_folder(tmp_path, "a", "algos/dr.py", A)
    path = cut_csv(folder, kind)
    text = path.read_text()
    path.write_text(text[:-4])  # a kill in the middle of the last row
    (method,) = load_methods((str(folder),))
    last_line = len(text.splitlines())
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {path}: dropped the torn last row (line {last_line}: no line end)"
    ]
    if kind == "logs":
        assert [len(curve["env_steps"]) for curve in method.curves] == [2, 2, 1], "seed 2 lost its last row"
    else:
        assert method.solve_rates["StandardMaze"] == A["StandardMaze"][:2], "its last seed's row is dropped"
        assert method.solve_rates["Labyrinth"] == A["Labyrinth"]


@pytest.mark.parametrize("kind", ["logs", "evaluation"])
def test_a_malformed_row_before_the_last_is_a_one_line_error(tmp_path, kind):
    folder = run_folder(tmp_path, "a", "algos/dr.py", A)
    path = cut_csv(folder, kind)
    lines = path.read_text().splitlines()
    lines[2] += ",0.5"  # line 3 got a field too many
    path.write_text("\n".join(lines) + "\n")
    fields = len(lines[0].split(","))
    one_line_error(
        report(str(folder), "--out", str(tmp_path / "out")),
        f"{path} line 3 is malformed ({fields + 1} fields, expected {fields})",
    )
    assert not (tmp_path / "out").exists(), "nothing is written from bad input"


def test_held_out_curves_show_only_the_evaluated_updates_with_markers(tmp_path, monkeypatch):
    folder = run_folder(tmp_path, "a", "algos/dr.py", A)
    rows = [
        {
            "seed": seed,
            "update": update,
            "env_steps": 64 * update,
            "train/return": update / 100,
            "eval/solve_rate/SixteenRooms": update / 200 if update in (40, 80) else "",
        }
        for update in range(10, 101, 10)
        for seed in range(3)
    ]
    write_csv(folder / "logs.csv", rows)
    saved = keep_figures(monkeypatch)
    main(args_for(folder, out=tmp_path / "out", resamples=200))
    held_out, training = saved["curves.png"].axes
    (evaluated,) = [line for line in held_out.get_lines() if line.get_label().startswith("dr ")]
    assert list(evaluated.get_xdata()) == [64 * 40, 64 * 80], "neither drawn back to update 10 nor on to 100"
    assert list(evaluated.get_ydata()) == pytest.approx([0.2, 0.4])
    assert evaluated.get_marker() == "o"
    (trained,) = [line for line in training.get_lines() if line.get_label().startswith("dr ")]
    assert list(trained.get_xdata()) == [64 * update for update in range(10, 101, 10)]
    assert held_out.get_xlim() == training.get_xlim(), "the steps before the first evaluation show as a gap"


@pytest.mark.parametrize("pooled", [False, True], ids=["methods_differ", "one_method_pools_two_updates"])
def test_the_evaluated_update_is_shown_and_a_mix_is_flagged(tmp_path, capsys, monkeypatch, pooled):
    late = run_folder(tmp_path, "late", "algos/accel.py", A, update=1100)
    early = run_folder(tmp_path, "early", "algos/accel.py" if pooled else "algos/dr.py", A, update=1000)
    other = run_folder(tmp_path, "other", "algos/plr.py", B, update=1000)
    out = tmp_path / "out"
    saved = keep_figures(monkeypatch)
    main(args_for(late, early, other, out=out, resamples=200))
    captured = capsys.readouterr()
    rows = {(row["method"], row["maze"]): row["update"] for row in csv.DictReader(open(out / "summary.csv"))}
    accel = "1000;1100" if pooled else "1100"
    assert rows["accel", "Labyrinth"] == rows["accel", "IQM"] == accel and rows["plr", "mean"] == "1000"
    runs_at = f"update 1000: {early} ({'accel' if pooled else 'dr'}), {other} (plr); update 1100: {late} (accel)"
    shown = "1000, 1100 (!)" if pooled else "1100 (!) | 1000 (!)"
    table = (out / "summary.md").read_text()
    assert f"| evaluated at update | {shown} | 1000 (!) |" in table and runs_at in table.splitlines()[-1]
    assert table in captured.out
    (warning,) = captured.err.splitlines()
    assert warning.startswith("warning: the runs were not evaluated at one update") and runs_at in warning
    legend = [text.get_text() for text in saved["mazes.png"].axes[0].get_legend().get_texts()]
    assert any(label.startswith("accel (") and f"update {accel})" in label for label in legend), legend
    assert any(label.startswith("plr (") and label.endswith("update 1000)") for label in legend), legend
    ticks = [tick.get_text() for tick in saved["aggregates.png"].axes[0].get_yticklabels()]  # shared by both
    assert any(f"update {accel})" in tick for tick in ticks) and any("update 1000)" in tick for tick in ticks), ticks


def test_runs_evaluated_at_one_update_are_not_flagged(tmp_path, capsys):
    a, b = (
        run_folder(tmp_path, "a", "algos/accel.py", A, update=1000),
        run_folder(tmp_path, "b", "algos/dr.py", B, update=1000),
    )
    main(args_for(a, b, out=tmp_path / "out", resamples=200))
    captured = capsys.readouterr()
    assert "| evaluated at update | 1000 | 1000 |" in captured.out and "(!)" not in captured.out
    assert captured.err == ""


def test_runs_not_evaluated_yet_are_drawn_from_their_logs_and_named(tmp_path):
    """The report refused a run without an evaluation although its training curves could be drawn: now curves.png
    shows every run, the tables and the other figures the evaluated ones, a line names what is not evaluated yet and
    says how to evaluate it, and every file written is printed."""
    good = run_folder(tmp_path, "good", "algos/dr.py", B)
    pending = run_folder(tmp_path, "pending", "algos/plr.py", A)
    for path in (pending / "eval").iterdir():
        path.unlink()
    out = tmp_path / "out"
    result = report(str(good), str(pending), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert f"not evaluated yet: {pending} (plr)" in result.stdout
    assert "`.venv/bin/python -m common.evaluate --run-dir FOLDER`" in result.stdout
    with open(out / "summary.csv") as handle:
        assert {row["method"] for row in csv.DictReader(handle)} == {"dr"}, "only the evaluated method in the table"
    for name in ("summary.csv", "summary.md", "curves.png", "mazes.png", "aggregates.png"):
        assert f"wrote {out / name}" in result.stdout, name
    alone = report(str(pending), "--out", str(tmp_path / "alone"))
    assert alone.returncode == 0, alone.stderr
    assert sorted(path.name for path in (tmp_path / "alone").iterdir()) == ["curves.png"]
    assert "not written: summary.csv, summary.md, mazes.png, aggregates.png (no run folder has an evaluation yet)" in (
        alone.stdout
    )


def sweep_folder(root: Path, name: str, script: str, spec: str, solve_rates: list[list[float]]) -> Path:
    """A --sweep run folder of 2 seeds a point: `solve_rates[point]` per seed on every maze."""
    folder = root / name
    folder.mkdir(parents=True)
    config = {"num_seeds": 2, "sweep": [spec], "sweep_zip": False}
    (folder / "config.json").write_text(json.dumps({"script": script, "config": config}))
    cells = [(point, seed) for point in range(len(solve_rates)) for seed in range(2)]
    logs = [
        {"point": p, "seed": s, "update": u, "env_steps": 64 * u, "train/return": 0.5}
        for p, s in cells
        for u in (5, 10)
    ]
    write_csv(folder / "logs.csv", logs)
    evaluation = [
        {
            "maze": maze,
            "point": p,
            "seed": s,
            "update": 10,
            "episodes": 10,
            "solve_rate": solve_rates[p][s],
            "return": 0.5,
        }
        for maze in MAZES
        for p, s in cells
    ]
    write_csv(folder / "eval" / "evaluate_00000010_20260101-000000.csv", evaluation)
    return folder


def test_sweep_points_that_agree_in_six_digits_stay_two_methods(tmp_path, monkeypatch, capsys):
    """A sweep of lr=1e-4 and 1.000001e-4 (distinct float32 values that `:g` prints alike) reports two methods with
    their own seeds' solve rates, the figure's ticks tell them apart, and the best point's line names the better
    one."""
    folder = sweep_folder(tmp_path, "dr_close", "algos/dr.py", "lr=1e-4,1.000001e-4", [[0.2, 0.4], [0.6, 0.8]])
    out = tmp_path / "out"
    saved = keep_figures(monkeypatch)
    main(args_for(folder, out=out, resamples=200))
    (axis,) = saved["sweep.png"].axes
    assert [tick.get_text() for tick in axis.get_xticklabels()] == ["0.0001", "0.0001000001"]
    rows = [row for row in csv.DictReader(open(out / "summary.csv")) if row["maze"] == MAZES[0]]
    assert {row["method"]: float(row["mean"]) for row in rows} == pytest.approx(
        {"dr lr=0.0001": 0.3, "dr lr=0.0001000001": 0.7}
    )
    assert "best point: dr lr=0.0001000001, held-out solve rate 0.700" in capsys.readouterr().out


def test_the_sweep_figure_draws_a_line_per_script_and_names_the_best_points_script(tmp_path, monkeypatch, capsys):
    """Two scripts sweeping one name are two lines, not one zig-zag through both, and the best point says whose it
    is; a sweep of another name is left out and said so. Mutation checked by hand: grouped by the other names only,
    the figure has one line and the best point no script."""
    plr = sweep_folder(tmp_path, "plr_t", "algos/plr.py", "temperature=0.3,1", [[0.2, 0.4], [0.5, 0.7]])
    accel = sweep_folder(tmp_path, "accel_t", "algos/accel.py", "temperature=0.3,1", [[0.8, 0.9], [0.6, 0.6]])
    dr = sweep_folder(tmp_path, "dr_lr", "algos/dr.py", "lr=1e-4,3e-4", [[1.0, 1.0], [1.0, 1.0]])
    saved = keep_figures(monkeypatch)
    main(args_for(plr, accel, dr, out=tmp_path / "out", resamples=200))
    (axis,) = saved["sweep.png"].axes
    lines = {text.get_text(): line for text, line in zip(axis.get_legend().get_texts(), axis.containers, strict=True)}
    assert set(lines) == {"plr", "accel"}
    np.testing.assert_allclose(np.asarray(lines["accel"].lines[0].get_ydata(), float), [0.85, 0.6])
    out = capsys.readouterr().out
    assert "best point: accel temperature=0.3, held-out solve rate 0.850 (mean over mazes and 2 seeds)" in out
    assert "sweep.png: dr swept other names than --temperature; left out" in out
