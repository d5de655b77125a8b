"""First divergence: for each training statistic, the first update at which cleanued's and minimax's distributions over
seeds differ, from the training logs of one learning comparison (benchmarks/learning/learning_vs_minimax.py --out).

Two libraries whose random streams differ cannot be followed seed by seed, but each statistic's distribution over seeds
can be compared window by window. A difference in the solve rate is the last link of a chain; the statistics that feed
it (the policy's entropy and PPO's losses, the buffer's scores, staleness and concentration, the levels replayed) can
differ earlier, and the one that differs first points at the cause. Per window of `--window` rollouts, each side's
per-seed value (cleanued: its logs.csv rows, means over 10 updates; minimax: the mean over its per-tick rows, or, for
the statistics of the buffer at a moment, both sides' value at the window's last rollout) is compared by two tests:
Mann-Whitney U (location) and Brown-Forsythe (spread, which a few seeds stuck apart move). Each test's p-values are
adjusted over the windows by Holm's method, so the chance of any false flag for a statistic and a test is at most
`--alpha`. minimax logs some statistics only when run through benchmarks/learning/minimax_train.py (the harness does).

    python benchmarks/learning/first_divergence.py /work/lvm/7x7_plr12 [--window 10] [--out-json FILE]

`--cleanued-runs` takes cleanued's side from other runs trained with the comparison's cleanued settings and
`--log-interval 10` (hundreds of seeds vmapped on a GPU), against the comparison's minimax seeds:

    python benchmarks/learning/first_divergence.py /work/lvm/13x13_plr_256_set6 --window 50 --cleanued-runs RUN_A RUN_B

`--span FROM TO` tests one stretch of rollouts instead of every window: each seed's mean over the stretch's windows,
one test per statistic, so nothing is adjusted over windows. It checks a lead an earlier comparison found (a
statistic that differed there without passing Holm) on seeds that did not suggest it:

    python benchmarks/learning/first_divergence.py /work/lvm/13x13_plr_256_set12 --window 50 --span 150 400 ...
"""

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

import numpy as np
import tyro
from tyro.conf import Positional

# SCAFFOLDING: put the repo root on sys.path so the script runs as `python benchmarks/learning/first_divergence.py`.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.learning.learning_vs_minimax_config import LOG_INTERVAL  # noqa: E402
from benchmarks.learning.learning_vs_minimax_config import Args as HarnessArgs  # noqa: E402
from benchmarks.learning.learning_vs_minimax_outputs import EXPERIMENT_FIELDS, experiment_path  # noqa: E402
from benchmarks.learning.learning_vs_minimax_report import (  # noqa: E402
    ALL_KINDS,
    cleanued_window_value,
    gather_run_facts,
    mann_whitney_p,
    minimax_window_value,
    read_cleanued_log,
)
from benchmarks.learning.pool_seed_sets import check_cleanued_runs, spread_p  # noqa: E402
from common.config import AT_LEAST_ONE, Range, raise_first, range_problems  # noqa: E402
from common.errors import ConfigError  # noqa: E402
from common.runs import one_line_errors  # noqa: E402

MIN_SEEDS = 3
"""Seeds a side a window needs to be tested (`spread_p` gives no p below it)."""


class Statistic(NamedTuple):
    name: str
    cleanued: str  # logs.csv column
    cleanued_weight: str | None  # the column giving each row's share of updates the value describes
    minimax: str | None  # logs.csv column, None where minimax does not log it
    minimax_kinds: tuple[str, ...] = ALL_KINDS  # the rollouts (new, replay) the minimax value describes
    at_end: bool = False  # a state of the buffer: each side's value at the window's last rollout


STATISTICS = (
    Statistic("policy entropy", "ppo/entropy", None, "entropy"),
    Statistic("value loss", "ppo/value_loss", None, "value_loss"),
    Statistic("policy loss", "ppo/policy_loss", None, "actor_loss"),
    Statistic("gradient norm", "ppo/grad_norm", None, "grad_norm"),
    Statistic("mean value prediction", "ppo/mean_value", None, "mean_value"),
    Statistic("mean value target", "ppo/mean_target", None, "mean_target"),
    Statistic("approximate KL", "ppo/approx_kl", None, None),
    Statistic("clip fraction", "ppo/clip_frac", None, None),
    Statistic("replay fraction", "buffer/replay_fraction", None, "rollout/replay"),
    Statistic("score of the played levels", "buffer/level_score", None, None),
    Statistic("buffer: weighted score", "buffer/weighted_score", None, "plr/weighted_ued_score", at_end=True),
    Statistic("buffer: weighted staleness", "buffer/weighted_staleness", None, "plr/weighted_age", at_end=True),
    Statistic(
        "buffer: top replay probability",
        "buffer/top_replay_probability",
        None,
        "plr/top_replay_probability",
        at_end=True,
    ),
    Statistic("buffer: replay entropy", "buffer/replay_entropy", None, "plr/replay_entropy", at_end=True),
    *(
        Statistic(f"buffer: score quantile {q}%", f"buffer/score_q{q}", None, f"plr/score_q{q}", at_end=True)
        for q in (10, 50, 90)
    ),
    Statistic("walls of replayed levels", "level_replay/walls", "rollout/replay", "plr/n_walls", ("replay",)),
    Statistic(
        "shortest path of replayed levels",
        "level_replay/shortest_path",
        "rollout/replay",
        "plr/shortest_path_length",
        ("replay",),
    ),
    Statistic("walls of new levels", "level_new/walls", "rollout/new", "env/n_walls", ("new",)),
    Statistic("logged training return (own definitions)", "train/return", None, "return"),
)


@dataclass(frozen=True)
class Args:
    out: Positional[Path]
    """A learning comparison's --out: its runs/ and minimax/ hold both sides' training logs."""
    method: Literal["plr", "accel"] = "plr"
    """The replay method whose logs are compared."""
    window: Annotated[int, AT_LEAST_ONE] = LOG_INTERVAL
    """Rollouts per compared window (a multiple of cleanued's log interval, 10)."""
    alpha: Annotated[float, Range(0, 1, above=True)] = 0.05
    """Family-wise error rate per statistic and test over all windows (Holm); a --span table shows p instead."""
    out_json: Path | None = None
    """Also write one JSON line per statistic, test and window here."""
    cleanued_runs: tuple[Path, ...] = ()
    """cleanued run folders (config.json, logs.csv) whose seeds replace the comparison's cleanued side, trained with
    its cleanued settings (for instance hundreds of seeds vmapped on a GPU), as pool_seed_sets.py's --cleanued-runs."""
    span: tuple[int, int] | None = None
    """FROM TO: test only rollouts FROM to TO, once per statistic: each seed's mean over the windows between them that
    it has a value in (a seed with none is left out)."""

    def __post_init__(self):
        raise_first(range_problems(self))
        problems = [
            (
                self.window % LOG_INTERVAL != 0,
                f"--window ({self.window}) must be a multiple of cleanued's log interval ({LOG_INTERVAL})",
            )
        ]
        if self.span is not None:
            start, end = self.span
            problems += [
                (not 0 <= start < end, f"--span {start} {end}: give FROM TO with 0 <= FROM < TO"),
                (
                    bool(start % self.window or end % self.window),
                    f"--span {start} {end}: both ends must be multiples of --window ({self.window})",
                ),
            ]
        raise_first(problems)


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment of `p_values` (NaN: not tested, kept NaN and not counted)."""
    tested = [(p, i) for i, p in enumerate(p_values) if not math.isnan(p)]
    adjusted, running = [math.nan] * len(p_values), 0.0
    for rank, (p, i) in enumerate(sorted(tested)):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[i] = running
    return adjusted


TESTS = {"location": mann_whitney_p, "spread": spread_p}


def divergence(cleanued: np.ndarray, minimax: np.ndarray, ends: list[int], alpha: float) -> dict:
    """Per test, the windows' p-values, Holm-adjusted p-values and the first window end whose adjusted p is below
    `alpha` (None if none is). `cleanued`, `minimax`: [seeds, windows] values, NaN where a seed has none."""
    result = {}
    for test, p_of in TESTS.items():
        raw = []
        for column in range(len(ends)):
            a = [value for value in cleanued[:, column] if not math.isnan(value)]
            b = [value for value in minimax[:, column] if not math.isnan(value)]
            p = p_of(a, b) if min(len(a), len(b)) >= MIN_SEEDS else None
            raw.append(math.nan if p is None else p)
        adjusted = holm(raw)
        first = next((end for end, p in zip(ends, adjusted, strict=True) if p < alpha), None)
        result[test] = {"p": raw, "adjusted": adjusted, "first": first}
    return result


def window_values(facts: dict, statistic: Statistic, seeds: int, windows: list[tuple[int, int]]) -> tuple:
    """([seeds, windows] cleanued values, the same for minimax or None where minimax does not log it)."""
    events, rows_of = facts["minimax"], {}
    for row in facts["cleanued"]:  # each seed's rows once, not every row for every seed and window
        rows_of.setdefault(int(row["seed"]), []).append(row)

    def cleanued_value(seed, start, end):
        if statistic.at_end:
            start = end - LOG_INTERVAL  # the row of the chunk ending at `end` holds the buffer's state there
        rows = rows_of.get(seed, [])
        return cleanued_window_value(rows, seed, start, end, statistic.cleanued, statistic.cleanued_weight)

    def minimax_value(seed_events, start, end):
        if statistic.at_end:
            start = end - 1
        return minimax_window_value(seed_events, start, end, statistic.minimax, statistic.minimax_kinds)

    cleanued = np.array([[cleanued_value(seed, *window) for window in windows] for seed in range(seeds)])
    if statistic.minimax is None or not any(statistic.minimax in event for run in events.values() for event in run):
        return cleanued, None
    minimax = np.array([[minimax_value(run, *window) for window in windows] for _, run in sorted(events.items())])
    return cleanued, minimax


def span_means(values: np.ndarray) -> np.ndarray:
    """[seeds, windows] -> [seeds, 1]: each seed's mean over the windows it has a value in (NaN if none)."""
    present = ~np.isnan(values)
    totals = np.where(present, values, 0.0).sum(axis=1, keepdims=True)
    counts = present.sum(axis=1, keepdims=True)
    return np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)


def harness_args(out: Path, method: str) -> HarnessArgs:
    path = experiment_path(out)
    if not path.is_file():
        raise ConfigError(f"{out} has no experiment.json: not an --out of learning_vs_minimax.py")
    experiment = json.loads(path.read_text())
    fields = {key: value for key, value in experiment.items() if key in EXPERIMENT_FIELDS}
    fields["diagnostic"] = tuple(fields.get("diagnostic", ()))
    return HarnessArgs(methods=(method,), out=out, **fields)


def runs_logs(args: Args) -> tuple[list[dict], int]:
    """The --cleanued-runs' log rows, their seeds numbered on from run to run, and the number of seeds."""
    check_cleanued_runs(args.out, args.cleanued_runs, args.method, "logs.csv", f"algos/{args.method}.py")
    rows, seeds = [], 0
    for run in args.cleanued_runs:
        config = json.loads((run / "config.json").read_text())["config"]
        if config["log_interval"] != LOG_INTERVAL:  # a window's rows, and the row at its end, are the comparison's
            raise ConfigError(
                f"--cleanued-runs {run}: logged every {config['log_interval']} updates, the comparison every "
                f"{LOG_INTERVAL}"
            )
        rows += [row | {"seed": float(seeds + int(row["seed"]))} for row in read_cleanued_log(run / "logs.csv")]
        seeds += config["num_seeds"]
    return rows, seeds


def first_divergence(args: Args) -> tuple[str, list[dict]]:
    harness = harness_args(args.out, args.method)
    _, _, _, cleanued_logs, minimax_logs = gather_run_facts(harness)
    facts = {"cleanued": cleanued_logs[args.method], "minimax": minimax_logs[args.method]}
    seeds = harness.seeds
    if args.cleanued_runs:
        facts["cleanued"], seeds = runs_logs(args)
    if not facts["cleanued"] or not facts["minimax"]:
        raise ConfigError(f"{args.out} lacks {args.method}'s training logs on a side (run the comparison's run stage)")
    windows = [(start, min(start + args.window, harness.rollouts)) for start in range(0, harness.rollouts, args.window)]
    if args.span is not None:
        if args.span[1] > harness.rollouts:
            raise ConfigError(f"--span {args.span[0]} {args.span[1]}: the comparison ran {harness.rollouts} rollouts")
        windows = [(start, end) for start, end in windows if args.span[0] <= start and end <= args.span[1]]
    ends = [end for _, end in windows] if args.span is None else [args.span[1]]
    minimax_seeds = len(facts["minimax"])  # the finished runs
    sides = f"{seeds} seeds a side"
    if args.cleanued_runs or seeds != minimax_seeds:
        runs = f" from {len(args.cleanued_runs)} other run(s)" if args.cleanued_runs else ""
        sides = f"{seeds} cleanued seeds{runs} against {minimax_seeds} of minimax's"
    if args.span is None:
        lines = [
            f"{args.method}, {sides}, windows of {args.window} rollouts: the first window end where "
            f"the sides' distributions over seeds differ (Holm-adjusted p < {args.alpha} over {len(windows)} "
            "windows), with each side's mean there",
            "",
            "| statistic | location differs from | spread differs from | cleanued mean | minimax mean |",
            "|---|---|---|---|---|",
        ]
    else:
        lines = [
            f"{args.method}, {sides}, rollouts {args.span[0]}-{args.span[1]}: each seed's mean over its windows "
            f"of {args.window} rollouts, one test per statistic (nothing adjusted), and each side's mean",
            "",
            "| statistic | location p | spread p | cleanued mean | minimax mean |",
            "|---|---|---|---|---|",
        ]
    records = []
    for statistic in STATISTICS:
        cleanued, minimax = window_values(facts, statistic, seeds, windows)
        if minimax is None:
            lines.append(f"| {statistic.name} | minimax does not log it | | | |")
            continue
        if args.span is not None:
            cleanued, minimax = span_means(cleanued), span_means(minimax)
        result = divergence(cleanued, minimax, ends, args.alpha)
        row = span_row if args.span is not None else window_row
        lines.append(row(statistic.name, result, cleanued, minimax, ends))
        for test in TESTS:
            for index, end in enumerate(ends):
                start = args.span[0] if args.span is not None else windows[index][0]
                record = {"statistic": statistic.name, "test": test, "window_start": start, "window_end": end}
                record |= {"p": result[test]["p"][index], "adjusted_p": result[test]["adjusted"][index]}
                for side, values in (("cleanued", cleanued[:, index]), ("minimax", minimax[:, index])):
                    record[f"{side}_mean"] = float(np.nanmean(values)) if np.isfinite(values).any() else None
                records.append(record)
    if args.span is None:
        lines += ["", "A dash: no window differs. The means are at the first window either test flags."]
    else:
        lines += ["", f"A dash: fewer than {MIN_SEEDS} seeds a side have a value in the span."]
    return "\n".join(lines), records


def side_mean(values: np.ndarray) -> str:
    return f"{np.nanmean(values):.4g}" if np.isfinite(values).any() else ""


def span_row(name: str, result: dict, cleanued: np.ndarray, minimax: np.ndarray, ends: list[int]) -> str:
    """A statistic's row over a span: each test's p and each side's mean."""
    cells = ["-" if math.isnan(result[test]["p"][0]) else f"{result[test]['p'][0]:.2g}" for test in TESTS]
    return f"| {name} | {cells[0]} | {cells[1]} | {side_mean(cleanued[:, 0])} | {side_mean(minimax[:, 0])} |"


def window_row(name: str, result: dict, cleanued: np.ndarray, minimax: np.ndarray, ends: list[int]) -> str:
    """A statistic's row over windows: each test's first flagged window end, and the means at the earlier one."""
    cells, shown = [], None
    for test in TESTS:
        first = result[test]["first"]
        if first is None:
            cells.append("-")
            continue
        index = ends.index(first)
        cells.append(f"{first} (p {result[test]['adjusted'][index]:.3f})")
        shown = index if shown is None else min(shown, index)
    means = ["" if shown is None else side_mean(side[:, shown]) for side in (cleanued, minimax)]
    return f"| {name} | {cells[0]} | {cells[1]} | {means[0]} | {means[1]} |"


def main(args: Args) -> None:
    table, records = first_divergence(args)
    print(table)
    if args.out_json is not None:
        args.out_json.write_text("".join(json.dumps(record) + "\n" for record in records))


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args, description=__doc__))
