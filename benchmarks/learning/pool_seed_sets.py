"""Pool learning-comparison folders that differ only in their seed set (`--first-seed`): one table over all their seeds
(one folder: its own table, with the same statistics).

A difference found on one set of 12 seeds a side can be the spread; the same experiment on other seed sets tells.
For one method, per checkpoint: the training-distribution and held-out solve rates, mean [95% percentile bootstrap
interval] per side and the two-sided Mann-Whitney U p over all seeds; then each held-out maze's solve rate averaged
per seed over the checkpoints it was evaluated at (the harness's primary held-out figure). Beside Mann-Whitney's
p (ranks), each row gives the difference of the means with its interval and a spread test (from 3 seeds a side),
since a few seeds stuck low on one side move the mean and the spread but hardly the ranks. Reads each folder's
experiment.json and evaluations.jsonl (what `benchmarks/results/learning_vs_minimax_*` keep) and prints Markdown.
The evaluation's levels and actions depend on the seed's index only, so the i-th seed of every set meets the same
ones (common random numbers, as between the two sides).

    R=benchmarks/results/learning_vs_minimax_7x7_plr_12_seeds
    python benchmarks/learning/pool_seed_sets.py $R ${R}_set2 ${R}_set3
    python benchmarks/learning/pool_seed_sets.py $R   # one seed set: the spread test and the difference's interval

`--cleanued-runs` takes cleanued's side from other run folders instead, trained with the folders' cleanued settings
(for instance hundreds of seeds vmapped in one process on a GPU) and evaluated by `benchmarks/learning/fork_run.py
evaluate --out RUN/evaluations.jsonl` on the same training-distribution levels, and on the held-out mazes where the
runs were evaluated on them at the folders' checkpoints (`--heldout-mazes ... --heldout-from`, the folders'
--heldout-from); the table then has the rows both sides have. A tail that shows in a few seeds is measured best this
way: minimax's side then comes from every folder.

    python benchmarks/learning/pool_seed_sets.py $R ${R}_set2 --cleanued-runs RUN_A RUN_B
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro
from scipy import stats
from tyro.conf import Positional

# SCAFFOLDING: put the repo root on sys.path so the script runs as `python benchmarks/learning/pool_seed_sets.py`.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.learning.learning_vs_minimax_outputs import read_jsonl  # noqa: E402
from benchmarks.learning.learning_vs_minimax_report import (  # noqa: E402
    bootstrap_interval,
    describe,
    mann_whitney_p,
    overlap,
)
from common.config import AT_LEAST_ONE  # noqa: E402
from common.errors import ConfigError  # noqa: E402
from common.runs import one_line_errors  # noqa: E402

SIDES = ("cleanued", "minimax")


@dataclass(frozen=True)
class Args:
    folders: Positional[tuple[Path, ...]]
    """Output folders of benchmarks/learning/learning_vs_minimax.py, each with its own --first-seed."""
    method: str = "plr"
    """The method whose evaluations are pooled."""
    cleanued_runs: tuple[Path, ...] = ()
    """cleanued run folders (config.json, evaluations.jsonl from fork_run.py evaluate) that replace the folders'
    cleanued side; each with the folders' cleanued settings and its own --seed."""
    bootstrap_resamples: Annotated[int, AT_LEAST_ONE] = 10_000
    """Resamples of the bootstrap intervals over seeds."""


def check_one_experiment(folders: tuple[Path, ...]) -> None:
    """Refuse folders unless every setting but the seed set (first seed and number of seeds) is the same and no
    seed is in two of them (minimax's --seed ranges S+1..S+N must not overlap)."""
    if not folders:
        raise ConfigError("give at least one folder")
    experiments = []
    for folder in folders:
        path = folder / "experiment.json"
        if not path.is_file():
            raise ConfigError(f"{folder} has no experiment.json: not an output folder of learning_vs_minimax.py")
        experiments.append(json.loads(path.read_text()))
    seed_sets = sorted((experiment.pop("first_seed", 0), experiment.pop("seeds")) for experiment in experiments)
    for folder, experiment in zip(folders[1:], experiments[1:], strict=True):
        keys = experiments[0].keys() | experiment.keys()
        differing = sorted(key for key in keys if experiments[0].get(key) != experiment.get(key))
        if differing:
            raise ConfigError(f"{folder} is another experiment than {folders[0]} ({', '.join(differing)} differ)")
    if any(first + seeds > later for (first, seeds), (later, _) in zip(seed_sets, seed_sets[1:], strict=False)):
        ranges = ", ".join(f"{first}-{first + seeds - 1}" for first, seeds in seed_sets)
        raise ConfigError(f"the folders' seed sets overlap (seeds {ranges}): a seed would count twice")


def pooled_values(folders: tuple[Path, ...], method: str) -> dict:
    """{(kind or maze, grid, side): {(folder index, seed): solve rate}} over every folder's evaluations, refused
    where a folder holds evaluations made with other settings (episodes, evaluation seed) than the first's."""
    values, settings = {}, {}
    for index, folder in enumerate(folders):
        for record in read_jsonl(folder / "evaluations.jsonl"):
            if record["method"] != method:
                continue
            label = "training distribution" if record["kind"] == "train_levels" else record["maze"]
            setting = (record["episodes"], record["eval_seed"])
            if settings.setdefault(label, setting) != setting:
                raise ConfigError(
                    f"{folder} holds {label} evaluations with (episodes, eval seed) {setting}, another folder or "
                    f"record {settings[label]}: pool folders evaluated alike"
                )
            values.setdefault((label, record["grid"], record["side"]), {})[index, record["seed"]] = record["solve_rate"]
    return values


FORK_RUN_EVALUATION = (512, 0)
"""(episodes, evaluation seed) of fork_run.py evaluate's records that do not say: it always evaluated with the
harness's defaults (--train-levels, --eval-seed)."""


def check_cleanued_runs(folder: Path, runs: tuple[Path, ...], method: str, reads: str, made_by: str) -> None:
    """Refuse `--cleanued-runs` that cannot stand for the cleanued side of `folder` (a comparison's output): a run
    without config.json or the file `reads` (which `made_by` writes), of another script, trained with other settings
    or for another length, sharing a seed or given twice, or a folder whose seeds started from given parameters."""
    table = json.loads((folder / "settings.json").read_text())[method]["table"]
    expected = {row["cleanued_flag"]: row["cleanued_used"] for row in table if row["kind"] != "fixed"}
    experiment = json.loads((folder / "experiment.json").read_text())
    if started := [key for key in ("same_init", "init_from") if experiment.get(key)]:
        raise ConfigError(
            f"--cleanued-runs: the folders' seeds started from given parameters ({', '.join(started)}), the runs' from "
            "their own: pool folders of runs started as the runs were"
        )
    if len({run.resolve() for run in runs}) < len(runs):
        raise ConfigError(f"--cleanued-runs {' '.join(map(str, runs))}: a run twice")
    seeds_seen = {}
    for run in runs:
        if not (run / "config.json").is_file() or not (run / reads).is_file():
            raise ConfigError(f"--cleanued-runs {run}: needs config.json and {reads} ({made_by})")
        saved = json.loads((run / "config.json").read_text())
        if saved["script"] != f"algos/{method}.py":
            raise ConfigError(f"--cleanued-runs {run}: a run of {saved['script']}, not of algos/{method}.py")
        config = saved["config"]
        if differing := sorted(key for key, value in expected.items() if config.get(key) != value):
            shown = ", ".join(f"{key} {config.get(key)!r} (folders: {expected[key]!r})" for key in differing)
            raise ConfigError(f"--cleanued-runs {run}: trained with other settings than the folders' cleanued: {shown}")
        if config["total_updates"] != experiment["rollouts"]:
            raise ConfigError(
                f"--cleanued-runs {run}: {config['total_updates']} updates, the folders {experiment['rollouts']}"
            )
        if (earlier := seeds_seen.setdefault(config["seed"], run)) != run:
            raise ConfigError(f"--cleanued-runs {run} and {earlier} share --seed {config['seed']}: seeds would repeat")


def run_values(folders: tuple[Path, ...], runs: tuple[Path, ...], method: str, values: dict) -> dict:
    """`values` with cleanued's side replaced by the runs' evaluations, {(label, grid, "cleanued"): {(run folder,
    seed): rate}}; refused unless the runs pass `check_cleanued_runs` and each was evaluated with the folders'
    evaluation settings and, for each held-out maze it was played on, at the folders' checkpoints of that maze."""
    check_cleanued_runs(folders[0], runs, method, "evaluations.jsonl", "fork_run.py evaluate")
    settings, grids = {"training distribution": FORK_RUN_EVALUATION}, {}
    for (label, grid, _), _ in values.items():
        grids.setdefault(label, set()).add(grid)
    for record in read_jsonl(folders[0] / "evaluations.jsonl"):
        label = "training distribution" if record["kind"] == "train_levels" else record["maze"]
        settings[label] = (record["episodes"], record["eval_seed"])
    replaced = {key: value for key, value in values.items() if key[2] != "cleanued"}
    for run in runs:
        played = {}
        for record in read_jsonl(run / "evaluations.jsonl"):
            # fork_run.py evaluate's records before its held-out mazes were of the training distribution alone.
            label = record["maze"] if record.get("kind", "train_levels") == "heldout" else "training distribution"
            episodes, eval_seed = FORK_RUN_EVALUATION
            evaluated = (record.get("episodes", episodes), record.get("eval_seed", eval_seed))
            if label not in settings:
                raise ConfigError(f"--cleanued-runs {run}: evaluated on {label}, the folders not")
            if evaluated != settings[label]:
                raise ConfigError(
                    f"--cleanued-runs {run}: {label} evaluated with {evaluated}, the folders with {settings[label]}"
                )
            played.setdefault(label, set()).add(record["update"])
            key = (label, record["update"], "cleanued")
            replaced.setdefault(key, {})[str(run), record["seed"]] = record["solve_rate"]
        for label, updates in played.items():
            if label != "training distribution" and updates != grids[label]:
                raise ConfigError(
                    f"--cleanued-runs {run}: {label} evaluated at checkpoints {sorted(updates)}, the folders at "
                    f"{sorted(grids[label])}: evaluate with the folders' --heldout-from"
                )
    return replaced


def difference_interval(cleanued: list[float], minimax: list[float], resamples: int) -> tuple[float, tuple]:
    """cleanued's mean minus minimax's, with its 95% percentile bootstrap interval (each side resampled alone)."""
    a, b = np.asarray(cleanued, np.float64), np.asarray(minimax, np.float64)
    result = stats.bootstrap(
        (a, b),
        lambda x, y, axis: x.mean(axis) - y.mean(axis),
        n_resamples=resamples,
        confidence_level=0.95,
        method="percentile",
        rng=np.random.default_rng(0),
    )
    return float(a.mean() - b.mean()), (float(result.confidence_interval.low), float(result.confidence_interval.high))


def spread_p(cleanued: list[float], minimax: list[float]) -> float | None:
    """Brown-Forsythe p (Levene's test about the medians): do the sides' seeds spread alike? Mann-Whitney compares
    ranks, so it hardly sees one side's lower tail; this does. None with fewer than 3 seeds a side: a side's 2
    seeds lie equally far from their median, so the within-side variance is 0 and p comes out near 0 whatever the
    values."""
    if min(len(cleanued), len(minimax)) < 3:
        return None
    if np.ptp(cleanued) == 0 and np.ptp(minimax) == 0:
        return 1.0
    return float(stats.levene(cleanued, minimax, center="median").pvalue)


def row(label: str, per_side: dict, resamples: int) -> str:
    summaries = {side: bootstrap_interval(per_side[side], resamples) for side in SIDES}
    cells = [describe(*summaries[side]) for side in SIDES]
    seeds = "/".join(str(len(per_side[side])) for side in SIDES)
    if min(len(per_side[side]) for side in SIDES) < 2:
        return f"| {label} | {seeds} | {cells[0]} | {cells[1]} | - | - | - | - |"
    overlapping = overlap(summaries["cleanued"][1], summaries["minimax"][1])
    difference = describe(*difference_interval(per_side["cleanued"], per_side["minimax"], resamples))
    mann_whitney = mann_whitney_p(per_side["cleanued"], per_side["minimax"])
    spread = spread_p(per_side["cleanued"], per_side["minimax"])
    overlap_cell = "yes" if overlapping else "**no**"
    spread_cell = "-" if spread is None else f"{spread:.2f}"
    return (
        f"| {label} | {seeds} | {cells[0]} | {cells[1]} | {overlap_cell} | {difference} | {mann_whitney:.2f} |"
        f" {spread_cell} |"
    )


def read_pooled(folders: tuple[Path, ...], method: str, cleanued_runs: tuple[Path, ...] = ()) -> dict:
    """The folders' evaluations of one experiment as pooled_values gives them, cleanued's side from the runs if
    given (run_values); refused without an evaluation of the method."""
    check_one_experiment(folders)
    values = pooled_values(folders, method)
    if not values:
        raise ConfigError(f"no evaluations of {method} in the folders")
    return run_values(folders, cleanued_runs, method, values) if cleanued_runs else values


def pooled_table(args: Args) -> str:
    values = read_pooled(args.folders, args.method, args.cleanued_runs)
    # Rows both sides have: runs evaluated on the training distribution alone give its rows alone.
    labels = ["training distribution"]
    labels += sorted({label for label, _, side in values if side == "cleanued"} - {"training distribution"})
    cleanued_from = f"; cleanued's side from {len(args.cleanued_runs)} other run(s)" if args.cleanued_runs else ""
    lines = [
        f"{args.method}, {len(args.folders)} seed set(s) pooled{cleanued_from}: solve rates, mean [95% bootstrap"
        " interval] per side, the difference of the means (cleanued - minimax) with its interval, and the p-values of"
        " Mann-Whitney U (ranks) and Brown-Forsythe (spread; - with fewer than 3 seeds a side)",
        "",
        "| quantity | seeds (cleanued/minimax) | cleanued | minimax | intervals overlap | difference | Mann-Whitney p"
        " | spread p |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label in labels:
        grids = sorted({grid for name, grid, _ in values if name == label})
        for grid in grids:
            per_side = {side: list(values.get((label, grid, side), {}).values()) for side in SIDES}
            lines.append(row(f"{label}, {grid} rollouts", per_side, args.bootstrap_resamples))
        if label == "training distribution":
            continue
        # A seed counts only with every held-out checkpoint, as in the harness's report.
        means = {}
        for side in SIDES:
            by_seed = {}
            for grid in grids:
                for seed, rate in values.get((label, grid, side), {}).items():
                    by_seed.setdefault(seed, []).append(rate)
            means[side] = [float(np.mean(rates)) for rates in by_seed.values() if len(rates) == len(grids)]
        lines.append(row(f"{label}, mean over checkpoints {grids[0]}-{grids[-1]}", means, args.bootstrap_resamples))
    return "\n".join(lines)


def main(args: Args) -> None:
    print(pooled_table(args))


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args, description=__doc__))
