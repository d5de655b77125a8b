"""Pool learning-comparison folders that differ only in their seed set (`--first-seed`): one table over all their seeds.

A difference found on one set of 12 seeds a side can be the spread; the same experiment on other seed sets tells.
For one method, per checkpoint: the training-distribution and held-out solve rates, mean [95% percentile bootstrap
interval] per side and the two-sided Mann-Whitney U p over all seeds; then each held-out maze's solve rate averaged
per seed over the checkpoints it was evaluated at (the harness's primary held-out figure). Reads each folder's
experiment.json and evaluations.jsonl (what `benchmarks/results/learning_vs_minimax_*` keep) and prints Markdown.

    R=benchmarks/results/learning_vs_minimax_7x7_plr_12_seeds
    python benchmarks/learning/pool_seed_sets.py $R ${R}_set2 ${R}_set3
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro
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
    bootstrap_resamples: Annotated[int, AT_LEAST_ONE] = 10_000
    """Resamples of the bootstrap intervals over seeds."""


def read_experiments(folders: tuple[Path, ...]) -> list[dict]:
    """Each folder's experiment.json; refused unless every setting but the seed set is the same and the seed sets
    differ."""
    if len(folders) < 2:
        raise ConfigError("give at least two folders to pool")
    experiments = []
    for folder in folders:
        path = folder / "experiment.json"
        if not path.is_file():
            raise ConfigError(f"{folder} has no experiment.json: not an output folder of learning_vs_minimax.py")
        experiments.append(json.loads(path.read_text()))
    first_seeds = [experiment.pop("first_seed", 0) for experiment in experiments]
    for folder, experiment in zip(folders[1:], experiments[1:], strict=True):
        differing = sorted(
            key for key in experiments[0].keys() | experiment.keys() if experiments[0].get(key) != experiment.get(key)
        )
        if differing:
            raise ConfigError(f"{folder} is another experiment than {folders[0]} ({', '.join(differing)} differ)")
    if len(set(first_seeds)) < len(first_seeds):
        raise ConfigError(f"the folders share a seed set (first seeds {first_seeds}): each seed would count twice")
    return experiments


def pooled_values(folders: tuple[Path, ...], method: str) -> dict:
    """{(kind or maze, grid, side): {(folder index, seed): solve rate}} over every folder's evaluations."""
    values = {}
    for index, folder in enumerate(folders):
        for record in read_jsonl(folder / "evaluations.jsonl"):
            if record["method"] == method:
                label = "training distribution" if record["kind"] == "train_levels" else record["maze"]
                values.setdefault((label, record["grid"], record["side"]), {})[index, record["seed"]] = record[
                    "solve_rate"
                ]
    return values


def row(label: str, per_side: dict, resamples: int) -> str:
    summaries = {side: bootstrap_interval(per_side[side], resamples) for side in SIDES}
    overlapping = overlap(summaries["cleanued"][1], summaries["minimax"][1])
    p = mann_whitney_p(per_side["cleanued"], per_side["minimax"])
    cells = [describe(*summaries[side]) for side in SIDES]
    seeds = "/".join(str(len(per_side[side])) for side in SIDES)
    overlap_cell = "-" if overlapping is None else "yes" if overlapping else "**no**"
    return f"| {label} | {seeds} | {cells[0]} | {cells[1]} | {overlap_cell} | {'-' if p is None else f'{p:.2f}'} |"


def pooled_table(args: Args) -> str:
    read_experiments(args.folders)
    values = pooled_values(args.folders, args.method)
    if not values:
        raise ConfigError(f"no evaluations of {args.method} in the folders")
    labels = ["training distribution"] + sorted({label for label, _, _ in values} - {"training distribution"})
    lines = [
        f"{args.method}, {len(args.folders)} seed sets pooled: solve rates, mean [95% bootstrap interval] per side",
        "",
        "| quantity | seeds (cleanued/minimax) | cleanued | minimax | intervals overlap | Mann-Whitney p |",
        "|---|---|---|---|---|---|",
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
