"""common/report.py on synthetic run folders with known values: per-maze means and seed counts, mean and IQM
across mazes, bootstrap intervals that contain the estimate and shrink with more seeds, the newest evaluation
used, probability of improvement and the risk evaluation's CVaR against plain Python, figures, one-line errors."""

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from common.evaluate import cvar
from common.report import Args, load_methods, main, probability_of_improvement, summarize

REPO_ROOT = Path(__file__).resolve().parents[1]
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


def args_for(*runs, out: Path, resamples: int = 2000) -> Args:
    return Args(runs=tuple(str(run) for run in runs), out=out, resamples=resamples)


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
    first, second = rng.uniform(size=200), rng.uniform(size=200)
    for alpha in (0.01, 1.0, 10.0, 50.0, 100.0):
        count = max(1, math.ceil(alpha / 100 * 200))
        worst = sorted(range(200), key=lambda i: (first[i], i))[:count]
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
    main(args_for(f"ACCEL={a}", b, out=tmp_path / "out", resamples=500))
    out = tmp_path / "out"
    assert "| **IQM** (across mazes) |" in capsys.readouterr().out
    assert (out / "summary.md").read_text().startswith("Held-out solve rate")
    rows = list(csv.DictReader(open(out / "summary.csv")))
    assert list(rows[0]) == ["method", "maze", "n_seeds", "mean", "ci_low", "ci_high"]
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
        ("unevaluated", "has no evaluation yet: run `python -m common.evaluate --run-dir"),
        ("other_mazes", "the methods were evaluated on different mazes"),
    ],
)
def test_bad_folders_are_one_line_errors(tmp_path, setup, fragment):
    good = run_folder(tmp_path, "good", "algos/dr.py", B)
    if setup == "plain":
        bad = tmp_path / "plain"
        bad.mkdir()
    elif setup == "unevaluated":
        bad = run_folder(tmp_path, "unevaluated", "algos/plr.py", A)
        for path in (bad / "eval").iterdir():
            path.unlink()
    else:
        bad = run_folder(tmp_path, "other", "algos/plr.py", {"SixteenRooms": [0.5, 0.5, 0.5]})
    result = subprocess.run(
        [sys.executable, "-m", "common.report", str(good), str(bad), "--out", str(tmp_path / "out")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], (
        result.stderr
    )
