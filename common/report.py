"""From run folders to the papers' tables and figures: per-maze solve rates over seeds, aggregates across mazes
with sound intervals, probability of improvement, learning curves and the risk (CVaR) curve.

    python -m common.report runs/dr runs/plr --out reports/small
    python -m common.report --label DR=runs/dr_a --label DR=runs/dr_b --label "Robust PLR=runs/plr" --out reports/small

Run folders are grouped by method: the script named in each config.json (`algos/accel.py` -> `accel`) for a
positional folder, NAME for `--label NAME=RUN_DIR` (the name ends at the first `=`, so any run name, `lr=3e-4`
too, works either way); folders of one method pool their seeds (two 3-seed runs are 6 seeds), and a folder given
twice is refused. Each folder contributes its newest held-out evaluation (`eval/evaluate_<update>_<time>.csv`,
highest update, then latest time: `.venv/bin/python -m common.evaluate` writes them), its logs.csv, and its newest risk
evaluation if it has one (`eval/risk_*.csv`, from `common.evaluate --risk`). A score that is not a
number in [0, 1] is refused, naming its file and line; so are risk evaluations of different configurations. A
last row that a kill cut short (in logs.csv or an evaluation CSV) is dropped with a warning; a row with a wrong number
of fields before the last is refused.

The interval policy, shared with `python -m common.evaluate` (`mean_and_interval`): a mean over seeds gets a
Student-t interval clipped to [0, 1]; aggregates across mazes and the probability of improvement get stratified
bootstrap intervals; nothing gets an interval below MIN_SEEDS_FOR_INTERVAL seeds (its cells are empty).

Writes to --out:
  summary.csv   method, maze, n_seeds, mean, ci_low, ci_high, update: per maze the mean solve rate over seeds with
                its Student-t interval; per method two rows across mazes, `mean` (of all seed-by-maze scores) and
                `IQM` (interquartile mean: scipy.stats.trim_mean(scores, --trim)), with stratified bootstrap
                intervals (seeds resampled within each maze), as in Agarwal et al., 2021, "Deep Reinforcement
                Learning at the Edge of the Statistical Precipice"; `update`: the update the method's runs were
                evaluated at (each of them, `1000;1100`, when they differ)
  summary.md    the same table in markdown, headed by the interval policy (also printed), with a row of the
                updates evaluated; runs not all evaluated at one update are flagged (!) there, named with their
                updates in a note under the table and in a warning on stderr
  improvement.csv  method_x, method_y, probability, ci_low, ci_high: P(X > Y), the chance that a seed of X
                beats a seed of Y on a maze (ties count half), averaged over mazes, stratified bootstrap interval
  risk.csv      method, the risk evaluation's configuration, alpha, n_seeds, mean, ci_low, ci_high
  curves.png, mazes.png, aggregates.png, risk.png (mazes.png and aggregates.png name each method's evaluated update)
A folder not evaluated yet adds its training curves to curves.png and nothing else, and is named in a printed
line (with none evaluated, curves.png is all there is). A file that is not written (improvement.csv with one
evaluated method, risk.csv and risk.png without a risk evaluation) is named in a printed line that says why; every
file written is printed.
"""

import csv
import io
import itertools
import math
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, NamedTuple

import matplotlib
import numpy as np
import tyro
from scipy import stats
from tyro.conf import UseAppendAction, arg

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

# SCAFFOLDING: the repo root on sys.path so `python common/report.py` works like `python -m common.report`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.config import (  # noqa: E402
    AT_LEAST_ONE,
    Range,
    absent_folder_problem,
    flag,
    out_path_problem,
    raise_first,
    range_problems,
    read_saved_config,
)
from common.errors import ConfigError
from common.runs import one_line_errors  # noqa: E402
from common.sweep import parse_sweep, value_text  # noqa: E402

EVALUATION = re.compile(r"^evaluate_(\d+)_(\d{8}-\d{6})\.csv$")
RISK = re.compile(r"^risk_(\d+)_(\d{8}-\d{6})\.csv$")
AGGREGATES = ("mean", "IQM")
MIXED_UPDATES_FLAG = "(!)"
RECORDED_LATER = ("maze_size", "walls", "max_steps")
"""Risk CSV columns that older risk evaluations lack (their setting was not recorded)."""
MIN_SEEDS_FOR_INTERVAL = 3
"""No interval over fewer seeds: a 95% Student-t interval over 2 seeds is the mean +- 6.35 standard errors (wider
than [0, 1] for any spread), and a bootstrap over 2 seeds claims a precision they cannot give."""


def interval_policy(confidence: float) -> str:
    """The interval policy of evaluate's output and of every table and figure of the report, in words."""
    return (
        f"{confidence:.0%} Student-t interval over seeds, clipped to [0, 1]; none below {MIN_SEEDS_FOR_INTERVAL} seeds"
    )


def mean_and_interval(values, confidence: float = 0.95, low: float = 0.0, high: float = 1.0):
    """Mean over seeds (the first axis of `values`) and its Student-t interval at `confidence`, clipped to the
    metric's range [low, high]; the interval is None below MIN_SEEDS_FOR_INTERVAL seeds. One value per seed gives
    floats, one curve per seed gives arrays."""
    values = np.asarray(values, dtype=np.float64)
    mean = values.mean(axis=0)
    if len(values) < MIN_SEEDS_FOR_INTERVAL:
        return mean, None
    quantile = stats.t.ppf((1 + confidence) / 2, len(values) - 1)
    half_width = quantile * values.std(axis=0, ddof=1) / np.sqrt(len(values))
    return mean, (np.clip(mean - half_width, low, high), np.clip(mean + half_width, low, high))


class RiskSetup(NamedTuple):
    """What a risk evaluation played (the columns of its CSV besides seed, update, alpha and win rate);
    maze_size, walls and max_steps are None in risk CSVs written before they were recorded, and counting is
    "first" there (every attempt counted its first episode before `--risk-counting` came)."""

    levels: int
    episodes: int  # attempts per level and pass (--risk-episodes); with window counting each can end several
    maze_size: int | None
    walls: int | None
    max_steps: int | None
    counting: str = "first"

    def describe(self) -> str:
        """'10000 solvable 13x13 mazes with 60 walls, at most 250 steps, 10 attempts per pass, every episode counted
        (SFL's)'."""
        if self.maze_size is None:
            mazes = f"{self.levels} solvable mazes (size, walls and step limit not recorded)"
        else:
            size, walls, steps = self.maze_size, self.walls, self.max_steps
            mazes = f"{self.levels} solvable {size}x{size} mazes with {walls} walls, at most {steps} steps"
        counted = "every episode counted (SFL's)" if self.counting == "window" else "the first episode counted"
        return f"{mazes}, {self.episodes} attempts per pass, {counted}"


@dataclass(frozen=True)
class Args:
    out: Path
    """Folder for summary.csv, summary.md, improvement.csv, risk.csv and the figures."""
    runs: tyro.conf.Positional[tuple[Path, ...]] = ()
    """Run folders, each pooled into the method named by the script in its config.json."""
    label: Annotated[tuple[str, ...], UseAppendAction, arg(metavar="NAME=RUN_DIR")] = ()
    """A run folder pooled into method NAME (the name ends at the first '='); repeat for more folders."""
    resamples: Annotated[int, AT_LEAST_ONE] = 10_000
    """Bootstrap resamples per interval."""
    confidence: Annotated[float, Range(0, 1, above=True)] = 0.95
    """Confidence level of every interval."""
    seed: Annotated[int, Range(0, 2**32 - 1)] = 0
    """Seed of the bootstrap."""
    trim: float = 0.25
    """Fraction cut from each end for the interquartile mean, in [0, 0.5)."""

    def __post_init__(self):
        if not 0 <= self.trim < 0.5:  # NaN fails too
            raise ConfigError(f"--trim must be in [0, 0.5), got {self.trim:g} (0.5 would cut every score)")
        raise_first(range_problems(self))
        for text in self.label:
            parse_label(text)
        if not self.runs and not self.label:
            raise ConfigError("give at least one run folder")
        problem, taken = out_path_problem(self.out)
        if problem:
            raise ConfigError(f"--out {self.out}: {problem}")
        if taken and not self.out.is_dir():
            raise ConfigError(f"--out {self.out} is a file; give a folder for the report")


def parse_label(text: str) -> tuple[str, Path]:
    """(method name, run folder) of a --label NAME=RUN_DIR."""
    name, separator, folder = text.partition("=")
    if not separator or not folder:
        raise ConfigError(f"--label {text!r} is not NAME=RUN_DIR")
    if not name.strip():
        raise ConfigError(f"--label {text!r}: the method name before '=' is empty")
    return name, Path(folder)


@dataclass
class Method:
    """One method's pooled results: per maze the solve rates of every seed of every folder."""

    name: str
    evaluated_at: dict[Path, int] = field(default_factory=dict)  # folder -> the update its evaluation is of
    solve_rates: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # maze -> [seeds]
    curves: list[dict[str, np.ndarray]] = field(default_factory=list)  # per seed: env_steps, return, eval/<maze>
    risk: dict[float, list[float]] = field(default_factory=dict)  # alpha -> [seeds], from every folder with one
    risk_setup: RiskSetup | None = None  # the same for every folder of every method (load_methods checks)
    without_risk: list[Path] = field(default_factory=list)  # folders with no risk evaluation
    not_evaluated: list[Path] = field(default_factory=list)  # folders with training curves only (no evaluation yet)
    sweep_point: tuple | None = None  # (name the folder's points share, Sweep, point) for a point of a --sweep run

    @property
    def evaluated(self) -> bool:
        return bool(self.evaluated_at)


def newest(folder: Path, pattern: re.Pattern) -> Path | None:
    """The file of `folder` matching `pattern` with the highest update, then the latest time."""
    found = [(int(m.group(1)), m.group(2), p) for p in folder.glob("*.csv") if (m := pattern.match(p.name))]
    return max(found)[2] if found else None


def read_rows(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict]]:
    """(line number, row) for every row of a CSV that has the `required` columns. A last row cut short (a kill
    or a full disk while it was written: no line end, or another number of fields than the header) is dropped
    with a warning on stderr; such a row before the last is a one-line error."""
    with open(path, newline="") as handle:
        text = handle.read()
    reader = csv.reader(io.StringIO(text))
    columns = next(reader, [])
    missing = [column for column in required if column not in columns]
    if missing:
        raise ConfigError(f"{path} has no column {', '.join(missing)}")
    records = [(reader.line_num, record) for record in reader if record]  # blank lines are no rows
    rows = []
    for index, (line, record) in enumerate(records):
        is_last = index == len(records) - 1
        problem = None
        if len(record) != len(columns):
            problem = f"{len(record)} fields, expected {len(columns)}"
        elif is_last and not text.endswith("\n"):
            problem = "no line end"
        if problem and is_last:
            print(f"warning: {path}: dropped the torn last row (line {line}: {problem})", file=sys.stderr)
        elif problem:
            raise ConfigError(f"{path} line {line} is malformed ({problem}); fix or delete that line")
        else:
            rows.append((line, dict(zip(columns, record, strict=True))))
    return rows


def number(path: Path, line: int, row: dict, column: str, low: float = 0.0, high: float = 1.0) -> float:
    """row[column] as a number in [low, high], or a one-line error naming the file and line."""
    text = row[column]
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not low <= value <= high:  # NaN fails too
        raise ConfigError(f"{path} line {line}: {column} {text!r} is not a number in [{low:g}, {high:g}]")
    return value


def count(path: Path, line: int, row: dict, column: str, low: int = 0) -> int:
    """row[column] as an integer of at least `low`, or a one-line error naming the file and line."""
    text = row[column]
    if not (isinstance(text, str) and text.strip().isdigit() and int(text) >= low):
        raise ConfigError(f"{path} line {line}: {column} {text!r} is not an integer of at least {low}")
    return int(text)


def of_point(path: Path, line: int, row: dict, point: int | None) -> bool:
    """Whether a row belongs to `point` of a sweep's folder (every row does without one)."""
    return point is None or count(path, line, row, "point") == point


def read_evaluation(path: Path, point: int | None = None) -> dict[str, list[float]]:
    """maze -> solve rate of each seed, from an evaluation CSV of `common.evaluate` (of a sweep: `point`'s rows)."""
    mazes, seen = defaultdict(list), set()
    for line, row in read_rows(path, ("maze", "seed", "solve_rate") + (("point",) if point is not None else ())):
        if not of_point(path, line, row, point):
            continue
        key = (row["maze"], count(path, line, row, "seed"))
        if not row["maze"] or key in seen:
            raise ConfigError(f"{path} line {line}: maze {row['maze']!r} seed {key[1]} is empty or repeated")
        seen.add(key)
        mazes[row["maze"]].append(number(path, line, row, "solve_rate"))
    if not mazes:
        raise ConfigError(f"{path} has no rows")
    return mazes


def read_risk(path: Path, point: int | None = None) -> tuple[RiskSetup, dict[float, list[float]]]:
    """(what it played, alpha -> win rate of each seed), from a risk CSV of `common.evaluate --risk` (of a sweep:
    `point`'s rows)."""
    setups, win_rates = set(), defaultdict(list)
    required = ("seed", "levels", "episodes", "alpha", "win_rate") + (("point",) if point is not None else ())
    for line, row in read_rows(path, required):
        if not of_point(path, line, row, point):
            continue
        count(path, line, row, "seed")
        setups.add(
            RiskSetup(
                *(count(path, line, row, column, 1) for column in ("levels", "episodes")),
                *(count(path, line, row, column, 1) if column in row else None for column in RECORDED_LATER),
                counting(path, line, row),
            )
        )
        win_rates[number(path, line, row, "alpha", 0, 100)].append(number(path, line, row, "win_rate"))
    if len(setups) != 1:
        raise ConfigError(f"{path} mixes risk evaluations of different configurations, or has no rows")
    return setups.pop(), dict(win_rates)


def counting(path: Path, line: int, row: dict) -> str:
    """A risk row's `counting` ("first" in CSVs written before it was recorded)."""
    value = row.get("counting", "first")
    if value not in ("window", "first"):
        raise ConfigError(f"{path}:{line}: counting must be window or first, got {value!r}")
    return value


def learning_curves(folder: Path, point: int | None = None) -> list[dict[str, np.ndarray]]:
    """Per seed of a run folder (of a sweep: of `point`): env steps, training return and the in-training solve rate
    of each maze (`eval/<maze>`, NaN between evaluations)."""
    path = folder / "logs.csv"
    if not path.exists():
        return []
    curves = defaultdict(lambda: defaultdict(list))
    for line, row in read_rows(path, ("seed", "env_steps") + (("point",) if point is not None else ())):
        if not of_point(path, line, row, point):
            continue
        curve = curves[count(path, line, row, "seed")]
        curve["env_steps"].append(number(path, line, row, "env_steps", 0, math.inf))
        for column, value in row.items():
            if column == "train/return" or column.startswith("eval/solve_rate/"):
                key = "return" if column == "train/return" else "eval/" + column.removeprefix("eval/solve_rate/")
                curve[key].append(number(path, line, row, column, -math.inf, math.inf) if value else np.nan)
    return [{key: np.asarray(values) for key, values in curve.items()} for _, curve in sorted(curves.items())]


def add_folder(method: Method, folder: Path, point: int | None, risk_files: dict) -> None:
    """Pool one folder's seeds (of a sweep: one point's) into `method`: its newest evaluation, its training curves
    and its newest risk evaluation (one configuration across every folder of the report, `risk_files`)."""
    evaluation = newest(folder / "eval", EVALUATION)
    if evaluation is None:  # its training curves still tell something: drawn, and named as not evaluated
        method.not_evaluated.append(folder)
        method.curves += learning_curves(folder, point)
        return
    mazes = read_evaluation(evaluation, point)
    if method.evaluated_at and set(mazes) != set(method.solve_rates):
        raise ConfigError(f"{folder} was evaluated on other mazes than the other {method.name} folders")
    for maze, values in mazes.items():
        method.solve_rates[maze] += values
    method.evaluated_at[folder] = int(EVALUATION.match(evaluation.name).group(1))
    method.curves += learning_curves(folder, point)
    risk = newest(folder / "eval", RISK)
    if risk is None:
        method.without_risk.append(folder)
        return
    setup, win_rates = read_risk(risk, point)
    played = (setup, tuple(sorted(win_rates)))
    if risk_files and played not in risk_files:
        (other_played, other), ours = next(iter(risk_files.items())), describe_played(*played)
        raise ConfigError(
            f"risk evaluations differ: {other} has {describe_played(*other_played)}, {risk} has {ours}; "
            "run `.venv/bin/python -m common.evaluate --risk` with the same flags on every folder"
        )
    risk_files.setdefault(played, risk)
    method.risk_setup = setup
    for alpha, values in win_rates.items():
        method.risk.setdefault(alpha, []).extend(values)


def load_methods(runs: tuple, labels: tuple[str, ...] = ()) -> list[Method]:
    """The methods of positional run folders (named by their script) and of --label NAME=RUN_DIR folders, in
    that order; every input is checked before anything is written."""
    methods: dict[str, Method] = {}
    risk_files: dict[tuple, Path] = {}  # (setup, alphas) -> the first risk CSV with them
    given: dict[Path, str] = {}
    arguments = [(str(run), None, Path(run)) for run in runs] + [(text, *parse_label(text)) for text in labels]
    for argument, label, folder in arguments:
        if label is None and "=" in argument and not (folder / "config.json").is_file():
            raise ConfigError(
                f"{argument} is not a run folder (no config.json); name a method with --label NAME=RUN_DIR"
            )
        if folder.resolve() in given:
            raise ConfigError(
                f"{argument} is given twice (first as {given[folder.resolve()]}); its seeds would count twice"
            )
        given[folder.resolve()] = argument
        problem = absent_folder_problem(folder)
        if problem:
            raise ConfigError(f"cannot report on {folder}: {problem}")
        saved = read_saved_config(folder)
        name = label or Path(saved["script"]).stem
        flags = saved["config"]
        sweep = parse_sweep(tuple(flags.get("sweep", ())), bool(flags.get("sweep_zip", False)))
        # A sweep's points are methods of their own, named by their values (pooled with the same point elsewhere).
        members = [(name, None)]
        if sweep is not None:
            members = [(f"{name} {sweep.label(point)}", point) for point in range(len(sweep.points))]
        for member, point in members:
            method = methods.setdefault(member, Method(member))
            if point is not None:
                method.sweep_point = (name, sweep, point)
            add_folder(method, folder, point, risk_files)
    maze_sets = {name: tuple(sorted(method.solve_rates)) for name, method in methods.items() if method.evaluated}
    if len(set(maze_sets.values())) > 1:
        listed = "; ".join(f"{name}: {', '.join(mazes)}" for name, mazes in maze_sets.items())
        raise ConfigError(f"the methods were evaluated on different mazes ({listed}); evaluate all on the same --mazes")
    return list(methods.values())


def describe_played(setup: RiskSetup, alphas: tuple[float, ...]) -> str:
    return f"{setup.describe()} (alpha {', '.join(f'{alpha:g}' for alpha in alphas)} %)"


def evaluated_updates(method: Method) -> str:
    """The update of the method's pooled evaluations, or each of them ('1000;1100') when they differ."""
    return ";".join(str(update) for update in sorted(set(method.evaluated_at.values())))


def mixed_updates(methods: list[Method]) -> str | None:
    """A note naming which run was evaluated at which update ('update 1000: runs/b (dr); update 1100: runs/a
    (dr)') when the runs of one report were not all evaluated at one update, else None."""
    runs_at = defaultdict(list)
    for method in methods:
        for folder, update in method.evaluated_at.items():
            runs_at[update].append(f"{folder} ({method.name})")
    if len(runs_at) < 2:
        return None
    listed = "; ".join(f"update {update}: {', '.join(runs)}" for update, runs in sorted(runs_at.items()))
    return (
        f"the runs were not evaluated at one update ({listed}): the table sets different training lengths side by side"
    )


def with_risk(methods: list[Method]) -> list[Method]:
    """The methods whose every folder has a risk evaluation (all of one configuration)."""
    return [method for method in methods if method.risk_setup is not None and not method.without_risk]


def interval(samples: tuple[np.ndarray, ...], statistic, args: Args) -> tuple[float, float] | None:
    """A bootstrap interval of `statistic(*samples, axis)`, resampling each sample on its own (one sample per
    maze: the stratified bootstrap). None when a sample has fewer than MIN_SEEDS_FOR_INTERVAL seeds."""
    if min(len(sample) for sample in samples) < MIN_SEEDS_FOR_INTERVAL:
        return None
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


def interval_cells(bounds: tuple[float, float] | None) -> dict:
    """ci_low and ci_high, None (an empty cell) where the policy gives no interval."""
    low, high = bounds if bounds is not None else (None, None)
    return dict(ci_low=None if low is None else float(low), ci_high=None if high is None else float(high))


def summarize(methods: list[Method], args: Args) -> list[dict]:
    rows = []
    for method in methods:
        mazes = sorted(method.solve_rates)
        per_maze = [np.asarray(method.solve_rates[maze]) for maze in mazes]
        update = evaluated_updates(method)
        for maze, values in zip(mazes, per_maze, strict=True):
            mean, bounds = mean_and_interval(values, args.confidence)
            row = dict(method=method.name, maze=maze, n_seeds=len(values), mean=float(mean))
            rows.append(row | interval_cells(bounds) | dict(update=update))
        for name, statistic in zip(AGGREGATES, (mean_of, iqm_of(args.trim)), strict=True):
            bounds = interval(tuple(per_maze), statistic, args)
            seeds = min(len(values) for values in per_maze)
            row = dict(method=method.name, maze=name, n_seeds=seeds, mean=float(statistic(*per_maze)))
            rows.append(row | interval_cells(bounds) | dict(update=update))
    return rows


def improvements(methods: list[Method], args: Args) -> list[dict]:
    rows = []
    for x, y in itertools.permutations(methods, 2):
        mazes = sorted(x.solve_rates)
        samples = tuple(np.asarray(m.solve_rates[maze]) for m in (x, y) for maze in mazes)
        statistic = improvement_statistic(len(mazes))
        bounds = interval(samples, statistic, args)
        value = float(statistic(*samples))
        rows.append(dict(method_x=x.name, method_y=y.name, probability=value, **interval_cells(bounds)))
    return rows


def risk_summary(methods: list[Method], args: Args) -> list[dict]:
    rows = []
    for method in with_risk(methods):
        for alpha, values in sorted(method.risk.items()):
            mean, bounds = mean_and_interval(values, args.confidence)
            rows.append(
                dict(method=method.name, **method.risk_setup._asdict(), alpha=alpha, n_seeds=len(values))
                | dict(mean=float(mean), **interval_cells(bounds))
            )
    return rows


def write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows({key: formatted(value) for key, value in row.items()} for row in rows)


def formatted(value):
    """Floats to 6 significant digits; None (no interval, a setting not recorded) as an empty cell."""
    if value is None:
        return ""
    return f"{value:.6g}" if isinstance(value, float) else value


def cell(row: dict) -> str:
    if row["ci_low"] is None:
        return f"{row['mean']:.3f} (n={row['n_seeds']})"
    return f"{row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}] (n={row['n_seeds']})"


def markdown(rows: list[dict], methods: list[Method], confidence: float) -> str:
    by_key = {(row["method"], row["maze"]): row for row in rows}
    mazes = sorted({row["maze"] for row in rows} - set(AGGREGATES)) + list(AGGREGATES)
    names = [method.name for method in methods]
    lines = [
        "Held-out solve rate: mean over seeds [interval] (n = seeds). Per maze: "
        f"{interval_policy(confidence)}. Across mazes: {confidence:.0%} stratified bootstrap interval "
        f"(Agarwal et al., 2021), none below {MIN_SEEDS_FOR_INTERVAL} seeds on a maze.",
        "",
        "| maze | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    mixed = mixed_updates(methods)
    flag = f" {MIXED_UPDATES_FLAG}" if mixed else ""
    updates = [evaluated_updates(method).replace(";", ", ") + flag for method in methods]
    lines.append("| evaluated at update | " + " | ".join(updates) + " |")
    for maze in mazes:
        label = f"**{maze}** (across mazes)" if maze in AGGREGATES else maze
        lines.append(f"| {label} | " + " | ".join(cell(by_key[name, maze]) for name in names) + " |")
    if mixed:
        lines += ["", f"{MIXED_UPDATES_FLAG} {mixed}"]
    return "\n".join(lines) + "\n"


def curves_on_grid(curves: list[dict], column: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(x, values [seeds, x]) of one method's curves of `column`, interpolated on the env steps every seed
    covers; None when a seed has fewer than two points."""
    grid = np.unique(np.concatenate([curve["env_steps"] for curve in curves]))
    grid = grid[
        (grid >= max(c["env_steps"].min() for c in curves)) & (grid <= min(c["env_steps"].max() for c in curves))
    ]
    values = []
    for curve in curves:
        valid = ~np.isnan(curve[column])
        if valid.sum() < 2:
            return None
        values.append(np.interp(grid, curve["env_steps"][valid], curve[column][valid]))
    return grid, np.asarray(values)


def evaluated_points(curves: list[dict], columns: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray] | None:
    """(x, values [seeds, x]) of one method's held-out solve rate (the mean of `columns`) at the env steps where
    every seed was evaluated on every maze, and nowhere else: a value carried back to the first update or across
    updates without an evaluation would show results that were never measured. None when there is no such step."""
    measured = []  # per seed: env steps -> solve rate
    for curve in curves:
        series = np.mean([curve[column] for column in columns], axis=0)
        valid = ~np.isnan(series)
        measured.append(dict(zip(curve["env_steps"][valid].tolist(), series[valid].tolist(), strict=True)))
    steps = sorted(set.intersection(*(set(seed) for seed in measured)))
    if not steps:
        return None
    return np.asarray(steps), np.asarray([[seed[step] for step in steps] for seed in measured])


def plot_over_seeds(axis, x, values: np.ndarray, label: str, confidence: float, marker=None) -> str:
    """The mean over seeds with its interval as a band, or, below MIN_SEEDS_FOR_INTERVAL seeds, each seed as a
    thin line; returns which ('interval' or 'seeds') for the legend."""
    mean, bounds = mean_and_interval(values, confidence)
    (line,) = axis.plot(x, mean, marker=marker, label=f"{label} ({len(values)} seeds)")
    if bounds is not None:
        axis.fill_between(x, *bounds, color=line.get_color(), alpha=0.2)
        return "interval"
    for seed_values in values:
        axis.plot(x, seed_values, color=line.get_color(), linewidth=0.6, alpha=0.6)
    return "seeds"


def legend(axis, shown: set[str], confidence: float) -> None:
    """The methods' legend, plus what the shading and thin lines are."""
    handles, labels = axis.get_legend_handles_labels()
    if "interval" in shown:
        handles.append(Patch(color="grey", alpha=0.3))
        labels.append(f"shaded: {confidence:.0%} Student-t interval over seeds")
    if "seeds" in shown:
        handles.append(Line2D([], [], color="grey", linewidth=0.6))
        labels.append(f"thin lines: each seed (no interval below {MIN_SEEDS_FOR_INTERVAL} seeds)")
    axis.legend(handles, labels, fontsize=7)


def common_eval_mazes(methods: list[Method]) -> list[str]:
    """The mazes evaluated during training in every seed's logs.csv of every method."""
    keys = [{key for key in curve if key.startswith("eval/")} for method in methods for curve in method.curves]
    return sorted(key.removeprefix("eval/") for key in set.intersection(*keys)) if keys else []


def figures(out: Path, methods: list[Method], rows: list[dict], confidence: float) -> list[Path]:
    """curves.png of every method, then the evaluation's figures of the evaluated methods (none: curves.png only)."""
    written = [curves_figure(out, methods, confidence)]
    evaluated = [method for method in methods if method.evaluated]
    return written + (evaluation_figures(out, evaluated, rows, confidence) if evaluated else [])


def curves_figure(out: Path, methods: list[Method], confidence: float) -> Path:
    # One x range for both panels: the updates before the first evaluation show as the gap they are.
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharex=True)
    mazes_in_training = common_eval_mazes(methods)
    solve_rate = "solve rate (mean over mazes)" if len(mazes_in_training) > 1 else "solve rate"
    held_out = (
        "held-out solve rate in training, a marker per evaluation: "
        f"{', '.join(mazes_in_training) or 'no maze in every logs.csv'}"
    )
    panels = (
        (evaluated_points, tuple(f"eval/{maze}" for maze in mazes_in_training), "o", solve_rate, held_out),
        (curves_on_grid, "return", None, "mean episode return", "training return"),
    )
    for axis, (points, key, marker, ylabel, title) in zip(axes, panels, strict=True):
        shown = set()
        for method in methods:
            curve = points(method.curves, key) if method.curves and key else None
            if curve is not None:
                shown.add(plot_over_seeds(axis, *curve, method.name, confidence, marker=marker))
        axis.set(title=fill(title), xlabel="env steps per seed", ylabel=ylabel, ylim=(0, 1))
        legend(axis, shown, confidence)
    return save(figure, out / "curves.png")


def evaluation_figures(out: Path, methods: list[Method], rows: list[dict], confidence: float) -> list[Path]:
    written = []
    by_key = {(row["method"], row["maze"]): row for row in rows}
    mazes = sorted({row["maze"] for row in rows} - set(AGGREGATES))
    figure, axis = plt.subplots(figsize=(min(12, max(6, 0.8 * len(mazes) * len(methods) + 2)), 4.5))
    width = 0.8 / len(methods)
    for index, method in enumerate(methods):
        cells = [by_key[method.name, maze] for maze in mazes]
        positions = np.arange(len(mazes)) + (index - (len(methods) - 1) / 2) * width
        label = f"{method.name} ({cells[0]['n_seeds']} seeds, update {evaluated_updates(method)})"
        axis.bar(positions, [c["mean"] for c in cells], width, label=label)
        for position, c in zip(positions, cells, strict=True):
            if c["ci_low"] is not None:
                whiskers = [[c["mean"] - c["ci_low"]], [c["ci_high"] - c["mean"]]]
                axis.errorbar(position, c["mean"], whiskers, color="k", capsize=3)
    axis.set(xticks=np.arange(len(mazes)), xlabel="held-out maze", ylabel="solve rate (mean over seeds)", ylim=(0, 1))
    axis.set_title(fill(f"held-out solve rate per maze; whiskers: {interval_policy(confidence)}"))
    axis.set_xticklabels(mazes, rotation=30, ha="right")
    axis.legend(fontsize=8)
    written.append(save(figure, out / "mazes.png"))

    figure, axes = plt.subplots(1, 2, figsize=(10, 0.6 * len(methods) + 2.4), sharey=True)
    for axis, aggregate in zip(axes, AGGREGATES, strict=True):
        for index, method in enumerate(methods):
            row = by_key[method.name, aggregate]
            error = None if row["ci_low"] is None else [[row["mean"] - row["ci_low"]], [row["ci_high"] - row["mean"]]]
            axis.errorbar(row["mean"], index, xerr=error, fmt="o", capsize=4)
        axis.set(title=f"{aggregate} across mazes", xlabel="solve rate", xlim=(0, 1), yticks=range(len(methods)))
        axis.set_yticklabels(
            [
                f"{method.name} ({by_key[method.name, aggregate]['n_seeds']} seeds, update {evaluated_updates(method)})"
                for method in methods
            ]
        )
    axes[0].set_ylabel("method")
    figure.suptitle(
        fill(f"mazes: {', '.join(mazes)}; whiskers: {confidence:.0%} stratified bootstrap interval, none below "
             f"{MIN_SEEDS_FOR_INTERVAL} seeds", 110), fontsize=9)  # fmt: skip
    written.append(save(figure, out / "aggregates.png"))

    if with_risk(methods):
        figure, axis = plt.subplots(figsize=(7, 4.5))
        shown = set()
        for method in with_risk(methods):
            alphas = sorted(method.risk)
            values = np.asarray([method.risk[alpha] for alpha in alphas]).T  # [seeds, alphas]
            shown.add(plot_over_seeds(axis, alphas, values, method.name, confidence, marker="o"))
        axis.set(xscale="log", xlabel="alpha: the worst alpha % of levels, ranked by a first pass")
        axis.set(ylabel="win rate on them (second pass)", ylim=(0, 1))
        axis.set_xticks(alphas, [f"{alpha:g}%" for alpha in alphas], fontsize=7)
        axis.minorticks_off()
        risk_setup = with_risk(methods)[0].risk_setup
        axis.set_title(fill(f"risk evaluation (CVaR of the win rate): {risk_setup.describe()}", 70), fontsize=9)
        legend(axis, shown, confidence)
        written.append(save(figure, out / "risk.png"))
    return written


def sweep_figure(out: Path, methods: list[Method], confidence: float) -> tuple[Path, list[str]] | None:
    """sweep.png: each point's held-out solve rate (per seed the mean over mazes; the mean over seeds with its
    interval) against each swept value, one panel per swept name, a line per script (or --label) and values of the
    other names; and the notes: the best point, and the sweeps of other names left out. None without an evaluated
    sweep (the first sweep's names decide)."""
    swept = [method for method in methods if method.evaluated and method.sweep_point is not None]
    if not swept:
        return None
    names = swept[0].sweep_point[1].names
    left_out = sorted({method.sweep_point[0] for method in swept if method.sweep_point[1].names != names})
    swept = [method for method in swept if method.sweep_point[1].names == names]
    results = []
    for method in swept:
        base, sweep, point = method.sweep_point
        per_seed = np.mean([method.solve_rates[maze] for maze in sorted(method.solve_rates)], axis=0)
        mean, bounds = mean_and_interval(per_seed, confidence)
        results.append((base, sweep.points[point], float(mean), bounds, len(per_seed)))
    best = max(range(len(results)), key=lambda index: results[index][2])
    figure, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    for axis, name in zip(axes[0], names, strict=True):
        others = [other for other in names if other != name]
        groups = defaultdict(list)
        for base, values, mean, bounds, _ in results:
            groups[(base, *(values[other] for other in others))].append((values[name], mean, bounds))
        for (base, *key), entries in sorted(groups.items()):
            entries.sort(key=lambda entry: entry[0])
            x = [value for value, _, _ in entries]
            y = [mean for _, mean, _ in entries]
            low = [mean - (bounds[0] if bounds else mean) for _, mean, bounds in entries]
            high = [(bounds[1] if bounds else mean) - mean for _, mean, bounds in entries]
            label = " ".join(
                [base, *(f"{other}={value_text(value)}" for other, value in zip(others, key, strict=True))]
            )
            axis.errorbar(x, y, yerr=[low, high], marker="o", capsize=3, label=label)
        swept_values = sorted({values[name] for _, values, *_ in results})
        if min(swept_values) > 0 and max(swept_values) / min(swept_values) >= 10:
            axis.set_xscale("log")
            axis.minorticks_off()
        axis.set_xticks(swept_values, [value_text(value) for value in swept_values], fontsize=8)
        axis.set(xlabel=flag(name), ylabel="held-out solve rate (mean over mazes)", ylim=(0, 1))
        axis.legend(fontsize=8)
    base, best_sweep, best_point = swept[best].sweep_point
    _, _, mean, _, seeds = results[best]
    best_line = (
        f"best point: {base} {best_sweep.label(best_point)}, held-out solve rate "
        f"{mean:.3f} (mean over mazes and {seeds} seeds)"
    )
    # About 70 characters of 9-point text fit across a 5-inch panel.
    figure.suptitle(fill(f"{best_line}; whiskers: {interval_policy(confidence)}", 70 * len(names)), fontsize=9)
    notes = [best_line]
    if left_out:
        swept_names = " ".join(flag(name) for name in names)
        notes.append(f"sweep.png: {', '.join(left_out)} swept other names than {swept_names}; left out")
    return save(figure, out / "sweep.png"), notes


def fill(text: str, width: int = 80) -> str:
    """`text` broken into lines of at most `width` characters, at spaces."""
    lines, current = [], ""
    for word in text.split(" "):
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    return "\n".join([*lines, current])


def save(figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def not_written(out: Path, names: tuple[str, ...], why: str) -> str:
    """The line saying which files were not written and why, and that files of those names in --out are older."""
    line = f"not written: {', '.join(names)} ({why})"
    stale = [name for name in names if (out / name).exists()]
    if stale:
        line += f"; the {', '.join(stale)} in {out} {'is' if len(stale) == 1 else 'are'} from an earlier report"
    return line


def main(args: Args) -> None:
    methods = load_methods(args.runs, args.label)
    evaluated = [method for method in methods if method.evaluated]
    args.out.mkdir(parents=True, exist_ok=True)
    written, notes = [], []
    for method in methods:
        if method.not_evaluated:
            folders = ", ".join(str(folder) for folder in method.not_evaluated)
            notes.append(
                f"not evaluated yet: {folders} ({method.name}): only its training curves are in curves.png; "
                f"`.venv/bin/python -m common.evaluate --run-dir FOLDER` adds it to the rest"
            )
    rows = summarize(evaluated, args)
    if evaluated:
        write_csv(args.out / "summary.csv", rows)
        table = markdown(rows, evaluated, args.confidence)
        (args.out / "summary.md").write_text(table)
        written += [args.out / "summary.csv", args.out / "summary.md"]
        print(table)
        mixed = mixed_updates(evaluated)
        if mixed:
            print(f"warning: {mixed}; summary.md flags it {MIXED_UPDATES_FLAG}", file=sys.stderr)
    else:
        names = ("summary.csv", "summary.md", "mazes.png", "aggregates.png")
        notes.append(not_written(args.out, names, "no run folder has an evaluation yet"))
    if len(evaluated) > 1:
        write_csv(args.out / "improvement.csv", improvements(evaluated, args))
        written.append(args.out / "improvement.csv")
    else:
        why = "one evaluated method: nothing to compare" if evaluated else "no run folder has an evaluation yet"
        notes.append(not_written(args.out, ("improvement.csv",), why))
    risk_rows = risk_summary(evaluated, args)
    if risk_rows:
        print(f"risk evaluation: {with_risk(evaluated)[0].risk_setup.describe()}")
        write_csv(args.out / "risk.csv", risk_rows)
        written.append(args.out / "risk.csv")
    some_risk = any(method.risk_setup is not None for method in evaluated)
    if not risk_rows:
        why = "no method has a risk evaluation in every folder" if some_risk else "no run folder has a risk evaluation"
        risk_command = "`.venv/bin/python -m common.evaluate --risk`"
        notes.append(not_written(args.out, ("risk.csv", "risk.png"), f"{why}: {risk_command}"))
    for method in evaluated:
        if method.without_risk and some_risk:
            folders = ", ".join(str(folder) for folder in method.without_risk)
            notes.append(f"risk: {method.name} has no risk evaluation ({folders}); left out of risk.csv and risk.png")
    written += figures(args.out, methods, rows, args.confidence)
    drawn = sweep_figure(args.out, methods, args.confidence)
    if drawn is not None:
        written.append(drawn[0])
        notes += drawn[1]
    for path in written:
        print(f"wrote {path}")
    for note in notes:
        print(note)


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args, prog="python -m common.report", description="\n\n".join(__doc__.split("\n\n")[:2])))
