"""The report stage of benchmarks/learning/learning_vs_minimax.py: both sides' logs read into curriculum statistics over
windows of `--window` rollouts, the evaluations as mean and 95% bootstrap interval over seeds with a Mann-Whitney U
p-value (held-out mazes averaged over the checkpoints from --heldout-from on, and at the final one), and the files
report.md, report.jsonl, curriculum.jsonl and solve_rate.png.
"""

import csv
import json
import math
import textwrap
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy import stats

from benchmarks.learning.learning_vs_minimax_config import KNOWN_DIFFERENCES, PPO_SHARED, SIDES, Args, cleanued_runs
from benchmarks.learning.learning_vs_minimax_outputs import (
    cleanued_run_dir,
    minimax_dir,
    minimax_done,
    minimax_rollouts,
    minimax_seeds,
    read_jsonl,
    read_minimax_log,
    write_jsonl,
)

# ---------------------------------------------------------------------------------------------------------
# Logs and curriculum


class Quantity(NamedTuple):
    """One curriculum statistic and where each side logs it."""

    name: str
    methods: tuple[str, ...]
    cleanued: str  # logs.csv column (rows are means over LOG_INTERVAL updates)
    cleanued_weight: str | None  # the column giving each row's share of updates the value describes
    minimax: str | None  # logs.csv column, or None where minimax does not log it
    minimax_kinds: tuple[str, ...]  # the rollouts (new, replay, mutant) the minimax value describes


ALL_KINDS = ("new", "replay", "mutant")
CURRICULUM = (
    Quantity(
        "replay fraction (per rollout)", ("plr", "accel"), "buffer/replay_fraction", None, "rollout/replay", ALL_KINDS
    ),
    Quantity(
        "walls of replayed levels", ("plr", "accel"), "level_replay/walls", "rollout/replay", "plr/n_walls", ("replay",)
    ),
    Quantity(
        "shortest path of replayed levels",
        ("plr", "accel"),
        "level_replay/shortest_path",
        "rollout/replay",
        "plr/shortest_path_length",
        ("replay",),
    ),
    Quantity("walls of new levels", ("plr", "accel"), "level_new/walls", "rollout/new", "env/n_walls", ("new",)),
    Quantity(
        "staleness (cu weighted_staleness, mm weighted_age)",
        ("plr", "accel"),
        "buffer/weighted_staleness",
        None,
        "plr/weighted_age",
        ALL_KINDS,
    ),
    Quantity(
        "mutation fraction (per rollout)", ("accel",), "buffer/mutation_fraction", None, "rollout/mutant", ALL_KINDS
    ),
    Quantity("walls of mutants", ("accel",), "level_mutant/walls", "rollout/mutant", None, ("mutant",)),
    Quantity("walls of designed levels", ("paired",), "level/walls", None, "env/n_walls", ALL_KINDS),
    Quantity("solvable share of designed levels", ("paired",), "level/solvable", None, "env/passable_ratio", ALL_KINDS),
    Quantity(
        "teacher's score of designed levels (relative regret)",
        ("paired",),
        "ued/score",
        None,
        "mean_return_tch",  # the teacher's episode return is the score, its only reward
        ALL_KINDS,
    ),
)
LOGGED_RETURN = {"cleanued": "train/return", "minimax": "return", "minimax_paired": "mean_return_a0"}
"""Each side's own logged training return (the protagonist's in PAIRED); defined differently (KNOWN_DIFFERENCES)."""


def read_cleanued_log(path: Path) -> list[dict]:
    """cleanued's logs.csv as dicts of floats (NaN where empty), with the per-row shares of rollouts that
    played replayed (`rollout/replay`), mutated (`rollout/mutant`) and new (`rollout/new`) levels."""
    if not path.is_file():
        return []
    rows = []
    with open(path) as handle:
        for raw in csv.DictReader(handle):
            row = {key: float(value) if value not in ("", None) else math.nan for key, value in raw.items()}
            replay = row.get("buffer/replay_fraction", 0.0)
            mutant = row.get("buffer/mutation_fraction", 0.0)
            row |= {"rollout/replay": replay, "rollout/mutant": mutant, "rollout/new": 1.0 - replay - mutant}
            rows.append(row)
    return rows


def minimax_events(rows: list[dict], method: str) -> list[dict]:
    """One record per rollout a minimax run played, in order: its position (`rollout`, from 1), its kind (new,
    replay, or ACCEL's mutant rollout after a replay) with `rollout/<kind>` indicators, and its tick's log row.
    A tick replayed when its gradient update raised n_updates (Robust PLR learns only on replays)."""
    events, previous_updates = [], 0
    for row in rows:
        n_updates = int(row["n_updates"])
        replay = method in ("plr", "accel") and n_updates > previous_updates
        previous_updates = n_updates
        kinds = ["replay", "mutant"] if replay and method == "accel" else ["replay" if replay else "new"]
        end = minimax_rollouts(method, int(row["_tick"]), n_updates)
        for offset, kind in enumerate(kinds):
            indicators = {f"rollout/{name}": float(name == kind) for name in ALL_KINDS}
            events.append(row | indicators | {"rollout": end - len(kinds) + 1 + offset, "kind": kind})
    return events


def windows(rollouts: int, window: int) -> list[tuple[int, int]]:
    """(start, end] windows of `window` rollouts covering 0..rollouts (the last one may be shorter)."""
    return [(start, min(start + window, rollouts)) for start in range(0, rollouts, window)]


def cleanued_window_value(rows: list[dict], seed: int, start: int, end: int, column: str, weight: str | None) -> float:
    """Mean of `column` over the seed's rows in (start, end], each row weighted by its share of updates the
    value describes; NaN when nothing in the window."""
    values, weights = [], []
    for row in rows:
        if int(row["seed"]) != seed or not start < row["update"] <= end:
            continue
        value, share = row.get(column, math.nan), 1.0 if weight is None else row.get(weight, math.nan)
        if not (math.isnan(value) or math.isnan(share)) and share > 0:
            values.append(value)
            weights.append(share)
    return float(np.average(values, weights=weights)) if values else math.nan


def minimax_window_value(events: list[dict], start: int, end: int, column: str, kinds: tuple[str, ...]) -> float:
    values = [
        event.get(column, math.nan) for event in events if start < event["rollout"] <= end and event["kind"] in kinds
    ]
    values = [value for value in values if not math.isnan(value)]
    return float(np.mean(values)) if values else math.nan


def nanmean(values) -> float:
    kept = [value for value in values if not math.isnan(value)]
    return float(np.mean(kept)) if kept else math.nan


def curriculum_records(args: Args, method: str, cleanued_rows: list[dict], minimax_runs: dict) -> list[dict]:
    """Per quantity, side and window: per-seed values and their mean. `minimax_runs` maps seed index to its
    rollout events."""
    records = []
    quantities = [quantity for quantity in CURRICULUM if method in quantity.methods]
    returned = LOGGED_RETURN["minimax_paired" if method == "paired" else "minimax"]
    quantities.append(
        Quantity(
            "logged training return (own definition)", (method,), LOGGED_RETURN["cleanued"], None, returned, ALL_KINDS
        )
    )
    for quantity in quantities:
        for start, end in windows(args.rollouts, args.window):
            per_seed = {
                "cleanued": [
                    cleanued_window_value(cleanued_rows, seed, start, end, quantity.cleanued, quantity.cleanued_weight)
                    for seed in range(args.seeds)
                    if cleanued_rows
                ],
                "minimax": [
                    minimax_window_value(events, start, end, quantity.minimax, quantity.minimax_kinds)
                    for _, events in sorted(minimax_runs.items())
                    if quantity.minimax is not None
                ],
            }
            for side, values in per_seed.items():
                record = {"method": method, "quantity": quantity.name, "side": side, "window": [start, end]}
                records.append(record | {"per_seed": values, "mean": nanmean(values) if values else None})
    return records


# ---------------------------------------------------------------------------------------------------------
# Statistics and report


def bootstrap_interval(values, resamples: int, seed: int = 0) -> tuple[float, tuple[float, float] | None]:
    """Mean over seeds and its 95% bootstrap interval (percentile: with a handful of seeds BCa's corrections are
    themselves too noisy); no interval for one seed, a point interval when every seed agrees."""
    values = np.asarray(values, dtype=np.float64)
    mean = float(values.mean())
    if len(values) < 2:
        return mean, None
    if np.all(values == values[0]):
        return mean, (mean, mean)
    result = stats.bootstrap(
        (values,),
        np.mean,
        n_resamples=resamples,
        confidence_level=0.95,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return mean, (float(result.confidence_interval.low), float(result.confidence_interval.high))


def overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool | None:
    if a is None or b is None:
        return None
    return a[0] <= b[1] and b[0] <= a[1]


def describe(mean: float | None, interval: tuple[float, float] | None, digits: int = 3) -> str:
    if mean is None or math.isnan(mean):
        return "-"
    if interval is None:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def mann_whitney_p(a, b) -> float | None:
    """Two-sided Mann-Whitney U p-value of two sides' per-seed values (None with fewer than two seeds a side):
    exact when no two values tie, else the normal approximation with the tie correction, since the exact null
    distribution assumes no ties (scipy's "auto" would approximate from 9 seeds a side even without ties)."""
    if len(a) < 2 or len(b) < 2:
        return None
    distinct = len(set(a) | set(b))
    if distinct == 1:  # every seed of both sides equal: nothing tells them apart
        return 1.0
    method = "asymptotic" if distinct < len(a) + len(b) else "exact"
    return float(stats.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)


def final_rows(mazes: tuple[str, ...]) -> list[tuple[str, str, str | None, str]]:
    """(label, kind, maze, field) of the final checkpoint's evaluation rows, in order."""
    rows = [("training-distribution solve rate", "train_levels", None, "solve_rate")]
    rows.append(("training-distribution return", "train_levels", None, "return"))
    rows += [(f"{maze} solve rate, final checkpoint", "heldout", maze, "solve_rate") for maze in mazes]
    return rows


def heldout_over_checkpoints(args: Args, evaluations: list[dict], method: str, side: str, maze: str) -> list[float]:
    """Per seed, the held-out solve rate on `maze` averaged over every checkpoint from --heldout-from on; a seed
    missing any of those checkpoints is left out (its mean would stand for other checkpoints)."""
    grid = range(args.heldout_start, args.rollouts + 1, args.checkpoint_every)
    by_seed = {}
    for record in evaluations:
        if (record["method"], record["side"], record["kind"], record["maze"]) == (method, side, "heldout", maze):
            by_seed.setdefault(record["seed"], {})[record["grid"]] = record["solve_rate"]
    return [
        float(np.mean([rates[point] for point in grid]))
        for _, rates in sorted(by_seed.items())
        if all(point in rates for point in grid)
    ]


def summary_records(
    args: Args, evaluations: list[dict], updates: dict, rollouts_played: dict, logged: dict
) -> list[dict]:
    """One record per method and metric: per side the per-seed values, mean and interval, the overlap and the
    Mann-Whitney U p-value."""
    records = []
    checkpoints = f"mean over checkpoints {args.heldout_start}-{args.rollouts}"
    for method in args.methods:
        final = sorted(
            (r for r in evaluations if r["method"] == method and r["grid"] == args.rollouts), key=lambda r: r["seed"]
        )
        sources = {
            label: {
                side: [r[field] for r in final if r["side"] == side and r["kind"] == kind and r["maze"] == maze]
                for side in SIDES
            }
            for label, kind, maze, field in final_rows(args.heldout_mazes)
        }
        over_checkpoints = {
            f"{maze} solve rate, {checkpoints}": {
                side: heldout_over_checkpoints(args, evaluations, method, side, maze) for side in SIDES
            }
            for maze in args.heldout_mazes
        }
        sources = dict(list(sources.items())[:2]) | over_checkpoints | dict(list(sources.items())[2:])
        sources["student gradient updates"] = {side: updates.get((method, side), []) for side in SIDES}
        sources["rollouts played"] = {side: rollouts_played.get((method, side), []) for side in SIDES}
        sources[f"logged training return, last {min(args.window, args.rollouts)} rollouts (own definition)"] = {
            side: logged.get((method, side), []) for side in SIDES
        }
        for label, per_side in sources.items():
            record = {"method": method, "metric": label}
            intervals = {}
            for side, values in per_side.items():
                values = [value for value in values if not math.isnan(value)]
                mean, interval = bootstrap_interval(values, args.bootstrap_resamples) if values else (None, None)
                intervals[side] = interval
                record[side] = {"per_seed": values, "mean": mean, "interval": interval}
            record["overlap"] = overlap(intervals["cleanued"], intervals["minimax"])
            record["mann_whitney_p"] = mann_whitney_p(record["cleanued"]["per_seed"], record["minimax"]["per_seed"])
            records.append(record)
    return records


METHOD_NAMES = {"dr": "DR", "plr": "Robust PLR", "accel": "ACCEL", "paired": "PAIRED"}


def markdown_summary(records: list[dict], seeds: int) -> str:
    """The summary table; a cell averaged over fewer than `seeds` seeds (a seed without every evaluated
    checkpoint) says how many it has."""
    lines = [
        "| method | metric | cleanued | minimax | intervals overlap | Mann-Whitney p |",
        "|---|---|---|---|---|---|",
    ]
    for record in records:
        counts = record["metric"] in ("student gradient updates", "rollouts played")
        cells = []
        for side in SIDES:
            values, mean = record[side]["per_seed"], record[side]["mean"]
            if counts:
                cells.append(f"{mean:.0f} ({min(values):.0f}-{max(values):.0f})" if values else "-")
            else:
                missing = f" ({len(values)} of {seeds} seeds)" if values and len(values) < seeds else ""
                cells.append(describe(mean, record[side]["interval"]) + missing)
        verdict = {True: "yes", False: "**no**", None: "-"}[None if counts else record["overlap"]]
        p_value = record["mann_whitney_p"]
        p_cell = "-" if counts or p_value is None else f"{p_value:.2f}"
        name = METHOD_NAMES[record["method"]]
        lines.append(f"| {name} | {record['metric']} | {cells[0]} | {cells[1]} | {verdict} | {p_cell} |")
    return "\n".join(lines)


def markdown_curriculum(records: list[dict]) -> str:
    if not records:
        return ""
    ends = sorted({record["window"][1] for record in records})
    header = "| method | quantity | side | " + " | ".join(str(end) for end in ends) + " |"
    lines = [header, "|---|---|---|" + "---:|" * len(ends)]
    grouped = {}
    for record in records:
        key = (record["method"], record["quantity"], record["side"])
        grouped.setdefault(key, {})[record["window"][1]] = record["mean"]
    for (method, quantity, side), by_end in grouped.items():
        cells = [format_value(by_end.get(end)) for end in ends]
        lines.append(f"| {METHOD_NAMES[method]} | {quantity} | {side} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_value(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.3g}" if abs(value) >= 10 else f"{value:.3f}"  # staleness runs into the thousands


def curve_points(evaluations: list[dict], method: str, side: str, maze: str | None = None) -> dict:
    """{grid rollouts: per-seed solve rates} on the training levels (`maze` None) or on one held-out maze."""
    points = {}
    kind = "train_levels" if maze is None else "heldout"
    for record in evaluations:
        if (record["method"], record["side"], record["kind"], record["maze"]) == (method, side, kind, maze):
            points.setdefault(record["grid"], []).append(record["solve_rate"])
    return dict(sorted(points.items()))


def plot_curves(args: Args, evaluations: list[dict], path: Path) -> None:
    """One column per method; the first row the training-distribution solve rate, then one row per held-out maze."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    rows = (None, *args.heldout_mazes)
    figure, axes = plt.subplots(
        len(rows), len(args.methods), figsize=(max(4 * len(args.methods), 7), 2.9 * len(rows)), squeeze=False
    )
    for row, maze in enumerate(rows):
        for axis, method in zip(axes[row], args.methods, strict=True):
            for side, color in zip(SIDES, ("tab:blue", "tab:orange"), strict=True):
                points = curve_points(evaluations, method, side, maze)
                if not points:
                    continue
                x = list(points)
                summaries = [bootstrap_interval(values, args.bootstrap_resamples) for values in points.values()]
                means = [mean for mean, _ in summaries]
                seeds = max(len(values) for values in points.values())
                label = f"{side} ({seeds} seed{'s' if seeds > 1 else ''})"
                axis.plot(x, means, marker="o", color=color, label=label)
                if all(interval is not None for _, interval in summaries):
                    low, high = zip(*(interval for _, interval in summaries), strict=True)
                    axis.fill_between(x, low, high, color=color, alpha=0.2)
            axis.set_title(f"{METHOD_NAMES[method]}: {'training levels' if maze is None else maze}", fontsize=9)
            axis.set_xlim(0, args.rollouts * 1.02)
            axis.set_ylim(-0.02, 1.02)
            axis.grid(alpha=0.3)
            axis.legend(loc="upper left", fontsize=7)  # learning curves rise: the top left stays empty
        axes[row][0].set_ylabel("solve rate")
    for axis in axes[-1]:
        axis.set_xlabel("rollouts")
    title = (
        f"Solve rate, mean and 95% bootstrap band over seeds: {args.train_levels} fresh training levels, "
        f"{args.heldout_episodes} episodes per held-out maze. {args.describe()}"
    )
    width = figure.get_figwidth()
    figure.suptitle(textwrap.fill(title, int(width * 15)), fontsize=8)  # about 15 characters an inch at 8 points
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def gather_run_facts(args: Args) -> tuple[dict, dict, dict, dict, dict]:
    """From the logs: per (method, side) the final student gradient updates, the rollouts played and the last
    window's logged training return per seed; per method the cleanued rows and minimax events by seed."""
    updates, played, logged, cleanued_logs, minimax_logs = {}, {}, {}, {}, {}
    last = (args.rollouts - args.window, args.rollouts)
    for method in args.methods:
        rows = []
        for run in cleanued_runs(args, method):  # rows of every run, seeds numbered as evaluated
            for row in read_cleanued_log(cleanued_run_dir(args.out, run.name) / "logs.csv"):
                rows.append(row | {"seed": float(run.seeds[int(row["seed"])])})
        cleanued_logs[method] = rows
        finals = [row for row in rows if int(row["update"]) == args.rollouts]
        if len(finals) == args.seeds:
            updates[method, "cleanued"] = [row["student_updates"] for row in sorted(finals, key=lambda r: r["seed"])]
            played[method, "cleanued"] = [float(args.rollouts)] * args.seeds
            logged[method, "cleanued"] = [
                cleanued_window_value(rows, seed, *last, LOGGED_RETURN["cleanued"], None) for seed in range(args.seeds)
            ]
        minimax_logs[method] = {}
        returned = LOGGED_RETURN["minimax_paired" if method == "paired" else "minimax"]
        for index, seed in enumerate(minimax_seeds(args)):
            if not minimax_done(args, method, seed):
                continue
            directory = minimax_dir(args.out, method, seed)
            stopped = json.loads((directory / "stopped.json").read_text())
            rows = [row for row in read_minimax_log(directory / "logs.csv") if row["_tick"] <= stopped["stop_tick"]]
            events = minimax_events(rows, method)
            minimax_logs[method][index] = events
            updates.setdefault((method, "minimax"), []).append(float(stopped["n_updates"]))
            played.setdefault((method, "minimax"), []).append(float(stopped["rollouts"]))
            end = stopped["rollouts"]
            logged.setdefault((method, "minimax"), []).append(
                minimax_window_value(events, end - args.window, end, returned, ALL_KINDS)
            )
    return updates, played, logged, cleanued_logs, minimax_logs


def time_table(jobs: list[dict]) -> str:
    totals = {}
    for job in jobs:
        key = (job.get("method", "-"), job.get("side", job["job"]))
        wall, cpu, count = totals.get(key, (0.0, 0.0, 0))
        totals[key] = (wall + job["wall_s"], cpu + job["cpu_s"], count + 1)
    lines = ["| method | side | processes | wall s (sum) | CPU s (sum) |", "|---|---|---:|---:|---:|"]
    for (method, side), (wall, cpu, count) in totals.items():
        lines.append(f"| {METHOD_NAMES.get(method, method)} | {side} | {count} | {wall:,.0f} | {cpu:,.0f} |")
    return "\n".join(lines)


def report_stage(args: Args, settings: dict) -> str:
    evaluations = [
        record
        for record in read_jsonl(args.out / "evaluations.jsonl")
        if record["method"] in args.methods
        and record["eval_seed"] == args.eval_seed
        and record["episodes"] == (args.train_levels if record["kind"] == "train_levels" else args.heldout_episodes)
        and record["seed"] < args.seeds
    ]
    updates, played, logged, cleanued_logs, minimax_logs = gather_run_facts(args)
    summaries = summary_records(args, evaluations, updates, played, logged)
    curriculum = [
        record
        for method in args.methods
        for record in curriculum_records(args, method, cleanued_logs[method], minimax_logs[method])
    ]
    write_jsonl(args.out / "report.jsonl", summaries)
    write_jsonl(args.out / "curriculum.jsonl", curriculum)
    figure = args.out / "solve_rate.png"
    if evaluations:
        plot_curves(args, evaluations, figure)
    # Where the training ran: the last invocation with a run stage (a report may be made anywhere).
    invocations = read_jsonl(args.out / "invocations.jsonl")
    trained = [invocation for invocation in invocations if invocation["args"]["stage"] in ("run", "all")]
    environment = (trained or invocations or [{}])[-1]
    jobs = [job for job in read_jsonl(args.out / "jobs.jsonl") if job.get("ok", True)]
    solvable = next((record["solvable_share"] for record in evaluations if "solvable_share" in record), None)
    parts = [
        "# cleanued vs minimax-lib 0.2.0: learning at one equal configuration",
        f"{args.seeds} seed(s) per side, {args.rollouts} rollouts per run; {args.describe()}, lr "
        f"{PPO_SHARED['lr']} (settings.json lists every setting).",
        "cleanued: "
        + ", ".join(f"{k} {environment.get('cleanued', {}).get(k)}" for k in ("device", "jax", "commit"))
        + "; minimax: "
        + ", ".join(f"{k} {environment.get('minimax', {}).get(k)}" for k in ("device", "minimax-lib", "jax")),
        "## Solve rates",
        f"Mean over seeds [95% percentile bootstrap interval, {args.bootstrap_resamples} resamples] and the "
        "two-sided Mann-Whitney U p-value of the per-seed values (exact; where values tie, the normal approximation "
        "with the tie correction). Both sides' checkpoints are evaluated by "
        "cleanued's evaluator (sampled actions, first episode): training-distribution rows at the final checkpoint "
        f"on {args.train_levels} fixed fresh {args.maze_size}x{args.maze_size} {args.n_walls}-wall DR levels "
        f"(solvable share {solvable if solvable is None else round(solvable, 3)}, at most {args.max_steps} steps); "
        f"held-out rows {args.heldout_episodes} episodes per seed and checkpoint with each maze's own episode "
        f"length, first per seed averaged over the checkpoints from {args.heldout_start} rollouts on (the primary "
        "figure: one checkpoint's held-out rate swings widely), then at the final checkpoint. The last rows are "
        "counts (mean and range) and each side's own logged return, which the two libraries define differently.",
        markdown_summary(summaries, args.seeds),
        f"![training-distribution and held-out solve rates]({figure.name})",
        f"## Curriculum (windows of {args.window} rollouts; the column is the window's last rollout)",
        "Means over seeds. cleanued: logs.csv rows (means over 10 updates), level columns weighted by the share "
        "of updates that played such levels; minimax: one value per rollout from its per-tick logs.csv (an ACCEL "
        "replay tick is a replay and a mutant rollout); '-': not logged by that side or nothing in the window.",
        markdown_curriculum(curriculum),
        "## Settings",
        settings_markdown(settings),
        "## What is not equal",
        "\n".join(
            f"- {', '.join(METHOD_NAMES[method] for method in methods if method in args.methods)}: {text}"
            for methods, text in KNOWN_DIFFERENCES
            if set(methods) & set(args.methods)
        ),
        "## Time",
        time_table(jobs) if jobs else "(no finished jobs recorded)",
    ]
    text = "\n\n".join(parts) + "\n"
    (args.out / "report.md").write_text(text)
    return text


def settings_markdown(settings: dict) -> str:
    lines = []
    for method, entry in settings.items():
        problems = [row for row in entry["table"] if row["problem"]]
        if not problems:
            lines.append(
                f"- {METHOD_NAMES[method]}: every setting equal, and cleanued's defaults are minimax's shipped values"
            )
        lines += [f"- {METHOD_NAMES[method]}: {settings_line(row)}" for row in problems]
    return "\n".join(lines)


def settings_line(row: dict) -> str:
    return (
        f"{row['problem']}: cleanued `{row['cleanued_flag']}` default {row['cleanued_default']!r}, used "
        f"{row['cleanued_used']!r}; minimax `{row['minimax_flag']}` shipped {row['minimax_shipped']!r}, used "
        f"{row['minimax_used']!r}"
    )
