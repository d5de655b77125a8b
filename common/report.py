"""From run folders to the papers' tables and figures: per-maze solve rates over seeds, aggregates across mazes
with sound intervals, probability of improvement, learning curves and the risk (CVaR) curve.

    python -m common.report runs/dr runs/plr --out reports/small
    python -m common.report DR=runs/dr_a DR=runs/dr_b "Robust PLR=runs/plr" --out reports/small

Run folders are grouped by method: the script named in each config.json (`algos/accel.py` -> `accel`), or the
LABEL of a LABEL=RUN_DIR argument; folders of one method pool their seeds (two 3-seed runs are 6 seeds). Each
folder contributes its newest held-out evaluation (`eval/evaluate_<update>_<time>.csv`, highest update, then
latest time: `python -m common.evaluate` writes them), its logs.csv, and its newest risk evaluation if it has
one (`eval/risk_*.csv`, from `python -m common.evaluate --risk`).

Writes to --out:
  summary.csv   method, maze, n_seeds, mean, ci_low, ci_high: per maze the mean solve rate over seeds with a
                95% percentile bootstrap interval over seeds; per method two rows across mazes, `mean` (of all
                seed-by-maze scores) and `IQM` (interquartile mean: scipy.stats.trim_mean(scores, 0.25)), with
                stratified bootstrap intervals (seeds resampled within each maze), as in Agarwal et al., 2021,
                "Deep Reinforcement Learning at the Edge of the Statistical Precipice"
  summary.md    the same table in markdown (also printed)
  improvement.csv  method_x, method_y, probability, ci_low, ci_high: P(X > Y), the chance that a seed of X
                beats a seed of Y on a maze (ties count half), averaged over mazes, stratified bootstrap interval
  risk.csv      method, alpha, n_seeds, mean, ci_low, ci_high of the risk evaluation, where one exists
  curves.png, mazes.png, aggregates.png, risk.png (with risk.csv)
Intervals need two seeds at least; with one their cells are empty.
"""

import csv
import itertools
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import matplotlib
import numpy as np
import tyro
from scipy import stats

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402

# SCAFFOLDING: the repo root on sys.path so `python common/report.py` works like `python -m common.report`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.config import AT_LEAST_ONE, FRACTION, Range, raise_first, range_problems, read_saved_config  # noqa: E402
from common.errors import ConfigError  # noqa: E402
from common.runs import one_line_errors  # noqa: E402

EVALUATION = re.compile(r"^evaluate_(\d+)_(\d{8}-\d{6})\.csv$")
RISK = re.compile(r"^risk_(\d+)_(\d{8}-\d{6})\.csv$")
AGGREGATES = ("mean", "IQM")


@dataclass(frozen=True)
class Args:
    runs: tyro.conf.Positional[tuple[str, ...]]
    """Run folders, each optionally as LABEL=RUN_DIR to name its method."""
    out: Path
    """Folder for summary.csv, summary.md, improvement.csv, risk.csv and the figures."""
    resamples: Annotated[int, AT_LEAST_ONE] = 10_000
    """Bootstrap resamples per interval."""
    confidence: Annotated[float, Range(0, 1, above=True)] = 0.95
    """Confidence level of every interval."""
    seed: Annotated[int, Range(0, 2**32 - 1)] = 0
    """Seed of the bootstrap."""
    trim: Annotated[float, FRACTION] = 0.25
    """Fraction cut from each end for the interquartile mean."""

    def __post_init__(self):
        raise_first(range_problems(self))
        if not self.runs:
            raise ConfigError("give at least one run folder")


@dataclass
class Method:
    """One method's pooled results: per maze the solve rates of every seed of every folder."""

    name: str
    folders: list[Path]
    solve_rates: dict[str, list[float]]  # maze -> [seeds]
    curves: list[dict[str, np.ndarray]]  # per seed: env_steps, return, eval (mean in-training solve rate)
    risk: dict[float, list[float]] | None  # alpha -> [seeds], when every folder has a risk evaluation


def newest(folder: Path, pattern: re.Pattern) -> Path | None:
    """The file of `folder` matching `pattern` with the highest update, then the latest time."""
    found = [(int(m.group(1)), m.group(2), p) for p in folder.glob("*.csv") if (m := pattern.match(p.name))]
    return max(found)[2] if found else None


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def method_of(argument: str) -> tuple[str | None, Path]:
    label, separator, folder = argument.rpartition("=")
    return (label, Path(folder)) if separator and label else (None, Path(argument))


def learning_curves(folder: Path) -> list[dict[str, np.ndarray]]:
    """Per seed of a run folder: env steps, training return and the mean in-training eval solve rate."""
    rows = read_rows(folder / "logs.csv") if (folder / "logs.csv").exists() else []
    curves = defaultdict(lambda: defaultdict(list))
    for row in rows:
        solve_rates = [float(v) for k, v in row.items() if k.startswith("eval/solve_rate/") and v]
        curve = curves[int(row["seed"])]
        curve["env_steps"].append(float(row["env_steps"]))
        curve["return"].append(float(row["train/return"]) if row.get("train/return") else np.nan)
        curve["eval"].append(np.mean(solve_rates) if solve_rates else np.nan)
    return [{key: np.asarray(values) for key, values in curve.items()} for _, curve in sorted(curves.items())]


def load_methods(arguments: tuple[str, ...]) -> list[Method]:
    methods: dict[str, Method] = {}
    for argument in arguments:
        label, folder = method_of(argument)
        script = read_saved_config(folder)["script"]
        name = label or Path(script).stem
        evaluation = newest(folder / "eval", EVALUATION)
        if evaluation is None:
            raise ConfigError(
                f"{folder} has no evaluation yet: run `python -m common.evaluate --run-dir {folder}` first"
            )
        method = methods.setdefault(name, Method(name, [], defaultdict(list), [], {}))
        mazes = defaultdict(list)
        for row in read_rows(evaluation):
            mazes[row["maze"]].append(float(row["solve_rate"]))
        if method.folders and set(mazes) != set(method.solve_rates):
            raise ConfigError(f"{folder} was evaluated on other mazes than the other {name} folders")
        for maze, values in mazes.items():
            method.solve_rates[maze] += values
        method.folders.append(folder)
        method.curves += learning_curves(folder)
        risk = newest(folder / "eval", RISK)
        if risk is None or method.risk is None:
            method.risk = None
            continue
        for row in read_rows(risk):
            method.risk.setdefault(float(row["alpha"]), []).append(float(row["win_rate"]))
    maze_sets = {name: tuple(sorted(method.solve_rates)) for name, method in methods.items()}
    if len(set(maze_sets.values())) > 1:
        listed = "; ".join(f"{name}: {', '.join(mazes)}" for name, mazes in maze_sets.items())
        raise ConfigError(f"the methods were evaluated on different mazes ({listed}); evaluate all on the same --mazes")
    return list(methods.values())


def interval(samples: tuple[np.ndarray, ...], statistic, args: Args) -> tuple[float, float]:
    """A bootstrap interval of `statistic(*samples, axis)`, resampling each sample on its own (one sample: plain
    bootstrap over seeds; one sample per maze: the stratified bootstrap). NaN with fewer than two seeds."""
    if min(len(sample) for sample in samples) < 2:
        return float("nan"), float("nan")
    if all(np.ptp(sample) == 0 for sample in samples):  # no spread to resample: the interval is the value
        value = float(statistic(*samples, axis=-1))
        return value, value
    result = stats.bootstrap(
        samples,
        statistic,
        n_resamples=args.resamples,
        confidence_level=args.confidence,
        method="percentile",
        vectorized=True,
        paired=False,
        rng=np.random.default_rng(args.seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def mean_of(*samples, axis=-1):
    return np.mean(np.concatenate(samples, axis=axis), axis=axis)


def iqm_of(trim: float):
    def iqm(*samples, axis=-1):
        return stats.trim_mean(np.concatenate(samples, axis=axis), trim, axis=axis)

    return iqm


def probability_of_improvement(x: list[np.ndarray], y: list[np.ndarray]) -> float:
    """P(X > Y) over mazes: per maze the share of seed pairs where X beats Y (ties half), averaged."""
    return float(improvement_statistic(len(x))(*x, *y))


def improvement_statistic(num_mazes: int):
    def statistic(*samples, axis=-1):
        x, y = samples[:num_mazes], samples[num_mazes:]
        per_maze = [
            np.mean((a[..., :, None] > b[..., None, :]) + 0.5 * (a[..., :, None] == b[..., None, :]), axis=(-2, -1))
            for a, b in zip(x, y, strict=True)
        ]
        return np.mean(per_maze, axis=0)

    return statistic


def summarize(methods: list[Method], args: Args) -> list[dict]:
    rows = []
    for method in methods:
        mazes = sorted(method.solve_rates)
        per_maze = [np.asarray(method.solve_rates[maze]) for maze in mazes]
        for maze, values in zip(mazes, per_maze, strict=True):
            low, high = interval((values,), mean_of, args)
            mean = float(values.mean())
            rows.append(dict(method=method.name, maze=maze, n_seeds=len(values), mean=mean, ci_low=low, ci_high=high))
        for name, statistic in zip(AGGREGATES, (mean_of, iqm_of(args.trim)), strict=True):
            low, high = interval(tuple(per_maze), statistic, args)
            seeds = min(len(values) for values in per_maze)
            value = float(statistic(*per_maze))
            rows.append(dict(method=method.name, maze=name, n_seeds=seeds, mean=value, ci_low=low, ci_high=high))
    return rows


def improvements(methods: list[Method], args: Args) -> list[dict]:
    rows = []
    for x, y in itertools.permutations(methods, 2):
        mazes = sorted(x.solve_rates)
        samples = tuple(np.asarray(m.solve_rates[maze]) for m in (x, y) for maze in mazes)
        statistic = improvement_statistic(len(mazes))
        low, high = interval(samples, statistic, args)
        value = float(statistic(*samples))
        rows.append(dict(method_x=x.name, method_y=y.name, probability=value, ci_low=low, ci_high=high))
    return rows


def risk_summary(methods: list[Method], args: Args) -> list[dict]:
    rows = []
    for method in methods:
        for alpha, values in sorted((method.risk or {}).items()):
            values = np.asarray(values)
            low, high = interval((values,), mean_of, args)
            mean = float(values.mean())
            rows.append(dict(method=method.name, alpha=alpha, n_seeds=len(values), mean=mean, ci_low=low, ci_high=high))
    return rows


def write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows({key: formatted(value) for key, value in row.items()} for row in rows)


def formatted(value):
    """Floats to 6 significant digits; NaN (no interval) as an empty cell."""
    if isinstance(value, float):
        return "" if np.isnan(value) else f"{value:.6g}"
    return value


def cell(row: dict) -> str:
    if np.isnan(row["ci_low"]):
        return f"{row['mean']:.3f} (n={row['n_seeds']})"
    return f"{row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}] (n={row['n_seeds']})"


def markdown(rows: list[dict], methods: list[Method], confidence: float) -> str:
    by_key = {(row["method"], row["maze"]): row for row in rows}
    mazes = sorted({row["maze"] for row in rows} - set(AGGREGATES)) + list(AGGREGATES)
    names = [method.name for method in methods]
    lines = [
        f"Held-out solve rate: mean over seeds [{confidence:.0%} bootstrap interval] (n = seeds)",
        "",
        "| maze | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for maze in mazes:
        label = f"**{maze}** (across mazes)" if maze in AGGREGATES else maze
        lines.append(f"| {label} | " + " | ".join(cell(by_key[name, maze]) for name in names) + " |")
    return "\n".join(lines) + "\n"


def band(curves: list[dict], key: str):
    """(x, mean, low, high) of one method's curves on their common x grid: a 95% Student-t band over seeds
    clipped to [0, 1] with 3 seeds or more, the range of the seeds below that."""
    grid = np.unique(np.concatenate([curve["env_steps"] for curve in curves]))
    grid = grid[
        (grid >= max(c["env_steps"].min() for c in curves)) & (grid <= min(c["env_steps"].max() for c in curves))
    ]
    values = []
    for curve in curves:
        valid = ~np.isnan(curve[key])
        if valid.sum() < 2:
            return None
        values.append(np.interp(grid, curve["env_steps"][valid], curve[key][valid]))
    values = np.asarray(values)
    mean = values.mean(axis=0)
    if len(values) < 3:
        return grid, mean, values.min(axis=0), values.max(axis=0)
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(axis=0, ddof=1) / np.sqrt(len(values))
    return grid, mean, np.clip(mean - half, 0, 1), np.clip(mean + half, 0, 1)


def figures(out: Path, methods: list[Method], rows: list[dict], risk_rows: list[dict]) -> list[Path]:
    written = []
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    panels = (("eval", "held-out solve rate (in training)"), ("return", "training return"))
    for axis, (key, title) in zip(axes, panels, strict=True):
        for method in methods:
            curve = band(method.curves, key) if method.curves else None
            if curve is None:
                continue
            grid, mean, low, high = curve
            axis.plot(grid, mean, label=f"{method.name} ({len(method.curves)} seeds)")
            axis.fill_between(grid, low, high, alpha=0.2)
        axis.set(title=title, xlabel="env steps per seed", ylim=(0, 1))
        axis.legend(fontsize=8)
    written.append(save(figure, out / "curves.png"))

    by_key = {(row["method"], row["maze"]): row for row in rows}
    mazes = sorted({row["maze"] for row in rows} - set(AGGREGATES))
    figure, axis = plt.subplots(figsize=(min(12, max(6, 0.8 * len(mazes) * len(methods) + 2)), 4))
    width = 0.8 / len(methods)
    for index, method in enumerate(methods):
        cells = [by_key[method.name, maze] for maze in mazes]
        means = np.array([c["mean"] for c in cells])
        errors = np.array([[c["mean"] - c["ci_low"], c["ci_high"] - c["mean"]] for c in cells]).T
        positions = np.arange(len(mazes)) + (index - (len(methods) - 1) / 2) * width
        axis.bar(positions, means, width, yerr=np.nan_to_num(errors), capsize=3, label=method.name)
    axis.set(xticks=np.arange(len(mazes)), ylabel="solve rate", ylim=(0, 1), title="held-out solve rate per maze")
    axis.set_xticklabels(mazes, rotation=30, ha="right")
    axis.legend(fontsize=8)
    written.append(save(figure, out / "mazes.png"))

    figure, axes = plt.subplots(1, 2, figsize=(9, 0.6 * len(methods) + 1.8), sharey=True)
    for axis, aggregate in zip(axes, AGGREGATES, strict=True):
        for index, method in enumerate(methods):
            row = by_key[method.name, aggregate]
            error = [[row["mean"] - row["ci_low"]], [row["ci_high"] - row["mean"]]]
            axis.errorbar(row["mean"], index, xerr=np.nan_to_num(error), fmt="o", capsize=4)
        axis.set(title=f"{aggregate} across mazes", xlim=(0, 1), yticks=range(len(methods)))
        axis.set_yticklabels([method.name for method in methods])
    written.append(save(figure, out / "aggregates.png"))

    if risk_rows:
        figure, axis = plt.subplots(figsize=(6, 4))
        for method in methods:
            points = [row for row in risk_rows if row["method"] == method.name]
            if not points:
                continue
            alphas = [row["alpha"] for row in points]
            axis.plot(alphas, [row["mean"] for row in points], marker="o", label=method.name)
            axis.fill_between(alphas, [row["ci_low"] for row in points], [row["ci_high"] for row in points], alpha=0.2)
        axis.set(xscale="log", xlabel="worst alpha % of levels (by a first pass)", ylabel="win rate (second pass)")
        axis.set(title="risk evaluation: CVaR of the win rate", ylim=(0, 1))
        axis.legend(fontsize=8)
        written.append(save(figure, out / "risk.png"))
    return written


def save(figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def main(args: Args) -> None:
    methods = load_methods(args.runs)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = summarize(methods, args)
    write_csv(args.out / "summary.csv", rows)
    table = markdown(rows, methods, args.confidence)
    (args.out / "summary.md").write_text(table)
    print(table)
    if len(methods) > 1:
        write_csv(args.out / "improvement.csv", improvements(methods, args))
    risk_rows = risk_summary(methods, args)
    if risk_rows:
        write_csv(args.out / "risk.csv", risk_rows)
    for path in figures(args.out, methods, rows, risk_rows):
        print(f"wrote {path}")


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args))
