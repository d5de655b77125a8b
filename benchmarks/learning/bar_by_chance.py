"""How often a learning comparison's bar holds by chance alone, and how surprising a measured difference is once
the several checkpoints are counted (issue 42's done-when).

The bar, on the training-distribution solve rates of two sides at every checkpoint from --first-rollouts on:
Mann-Whitney's p and the spread test's p are at least --threshold, and the 95% interval of the difference of the
means covers 0. Each statistic is pool_seed_sets.py's own function, so a draw here is judged as its table is.

`swap` reads learning_vs_minimax.py output folders (pooled as pool_seed_sets.py pools them) and asks what the bar
and the smallest p over the checkpoints would look like if the libraries learned alike. Then the i-th seed of a set
is as likely to be either side's, so each draw gives each pair's two seeds to the sides at random. A pair stays
together because its two seeds meet the same evaluation levels, and a seed's whole curve moves with it. The share of
draws whose smallest p over the checkpoints is at most the measured one is that test's p with every checkpoint
accounted for (Westfall and Young's min-p, as (that count + 1) / (draws + 1), with the count's 95% interval: a
Monte Carlo estimate). The share of draws that meet the bar is how often it holds for sides
drawn from these seeds by chance.

`deal` is `swap` for sides whose seeds are not paired, such as cleanued's side taken from --cleanued-runs (the
hundreds of seeds a GPU trains at once against minimax's seed sets): each draw deals all the seeds of both sides out
at random, each side keeping its number of seeds (a permutation test), and reports the same min-p. The
training-distribution levels are one fixed set for every seed, so any seed may stand on either side.

`split` takes one side's seeds alone (or, with --cleanued-runs, the seeds of cleanued runs such as the 256 a GPU
trains at once) and draws two disjoint groups of --seeds-a-side at random, again and again: two sides of one
library. The share of draws meeting the bar is how often a comparison of that size passes when nothing differs.

    R=benchmarks/results; S=$R/learning_vs_minimax_7x7_plr_12_seeds
    python benchmarks/learning/bar_by_chance.py swap $S ${S}_set2 ${S}_set3
    python benchmarks/learning/bar_by_chance.py deal $S ${S}_set2 ${S}_set3 \\
        --cleanued-runs $R/plr_many_seeds_h100_060c41f/7x7_256_seeds
    python benchmarks/learning/bar_by_chance.py split $S ${S}_set2 ${S}_set3 --side minimax --seeds-a-side 18
    python benchmarks/learning/bar_by_chance.py split $S --side cleanued --seeds-a-side 36 \\
        --cleanued-runs $R/plr_many_seeds_h100_060c41f/7x7_256_seeds
"""

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import tyro
from scipy import stats
from tyro.conf import Positional

# SCAFFOLDING: put the repo root on sys.path so the script runs as `python benchmarks/learning/bar_by_chance.py`.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.learning.learning_vs_minimax_report import mann_whitney_p  # noqa: E402
from benchmarks.learning.pool_seed_sets import (  # noqa: E402
    SIDES,
    difference_interval,
    read_pooled,
    spread_p,
)
from common.config import AT_LEAST_ONE  # noqa: E402
from common.errors import ConfigError  # noqa: E402
from common.runs import one_line_errors  # noqa: E402

TRAINING = "training distribution"
TESTS = ("Mann-Whitney", "spread", "interval")
Redraw = Callable[[np.random.Generator, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Bar:
    folders: Positional[tuple[Path, ...]] = ()
    """learning_vs_minimax.py output folders of one experiment, each with its own seed set."""
    method: str = "plr"
    """The method whose evaluations are read."""
    first_rollouts: Annotated[int, AT_LEAST_ONE] = 300
    """The bar holds at every evaluated checkpoint from this many rollouts on."""
    threshold: float = 0.2
    """The smallest Mann-Whitney and spread p that passes."""
    draws: Annotated[int, AT_LEAST_ONE] = 2000
    """Random draws of the sides."""
    draw_seed: int = 0
    """Seed of the draws."""
    bootstrap_resamples: Annotated[int, AT_LEAST_ONE] = 10_000
    """Resamples of each difference-of-the-means interval (pool_seed_sets.py's number)."""

    def __post_init__(self):
        if not 0 < self.threshold < 1:
            raise ConfigError(f"--threshold {self.threshold}: a p-value threshold lies between 0 and 1")


@dataclass(frozen=True)
class Swap(Bar):
    """Each pair's two seeds dealt to the sides at random."""


@dataclass(frozen=True)
class Deal(Bar):
    """All seeds of both sides dealt to the sides at random, each side keeping its size."""

    cleanued_runs: tuple[Path, ...] = ()
    """cleanued run folders that replace the folders' cleanued side, as pool_seed_sets.py --cleanued-runs reads them."""


@dataclass(frozen=True)
class Split(Bar):
    """Two disjoint groups of one library's seeds drawn at random."""

    side: Literal["cleanued", "minimax"] = "minimax"
    """The library whose seeds are split into two groups."""
    seeds_a_side: Annotated[int, AT_LEAST_ONE] = 36
    """Seeds in each group (twice this many must be at hand)."""
    cleanued_runs: tuple[Path, ...] = ()
    """cleanued run folders that replace the folders' cleanued side, as pool_seed_sets.py --cleanued-runs reads them."""

    def __post_init__(self):
        super().__post_init__()
        if self.seeds_a_side < 3:
            raise ConfigError(f"--seeds-a-side {self.seeds_a_side}: the spread test needs at least 3")
        if self.cleanued_runs and self.side != "cleanued":
            raise ConfigError(f"--cleanued-runs replaces cleanued's seeds: it needs --side cleanued, not {self.side}")


def checkpoints(values: dict, first_rollouts: int, sides: tuple[str, ...]) -> list[int]:
    """The training-distribution checkpoints from first_rollouts on at which the sides' seeds were evaluated."""
    grids = sorted(
        {grid for label, grid, side in values if label == TRAINING and grid >= first_rollouts and side in sides}
    )
    if not grids:
        raise ConfigError(
            f"no training-distribution evaluation of {'/'.join(sides)} at {first_rollouts} rollouts or later"
        )
    return grids


def curves(values: dict, side: str, grids: list[int]) -> dict:
    """{seed key: [solve rate per checkpoint]} of one side's seeds evaluated at every checkpoint."""
    per_grid = [values.get((TRAINING, grid, side), {}) for grid in grids]
    complete = set.intersection(*(set(rates) for rates in per_grid))
    return {key: [rates[key] for rates in per_grid] for key in sorted(complete, key=str)}


def swap_pairs(rng: np.random.Generator, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two sides' [seeds, checkpoints] rates with each pair's two seeds given to the sides by a fair coin."""
    swapped = rng.random(len(first))[:, None] < 0.5
    return np.where(swapped, second, first), np.where(swapped, first, second)


def deal_seeds(rng: np.random.Generator, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two sides' [seeds, checkpoints] rates pooled and dealt out at random, len(first) rows to the first side."""
    pooled = np.concatenate([first, second])
    order = rng.permutation(len(pooled))
    return pooled[order[: len(first)]], pooled[order[len(first) :]]


def split_groups(rng: np.random.Generator, seeds: int, seeds_a_side: int) -> tuple[np.ndarray, np.ndarray]:
    """Two disjoint groups of seeds_a_side indices drawn at random from range(seeds)."""
    chosen = rng.permutation(seeds)[: 2 * seeds_a_side]
    return chosen[:seeds_a_side], chosen[seeds_a_side:]


def judge(first: np.ndarray, second: np.ndarray, bar: Bar) -> dict[str, np.ndarray]:
    """Per test, per checkpoint: the p-values of two sides' [seeds, checkpoints] solve rates, and whether the
    difference of the means' interval covers 0."""
    columns = range(first.shape[1])
    intervals = [difference_interval(first[:, j], second[:, j], bar.bootstrap_resamples)[1] for j in columns]
    return {
        "Mann-Whitney": np.array([mann_whitney_p(first[:, j], second[:, j]) for j in columns]),
        "spread": np.array([spread_p(first[:, j], second[:, j]) for j in columns]),
        "interval": np.array([low <= 0 <= high for low, high in intervals]),
    }


def failing(verdict: dict[str, np.ndarray], threshold: float) -> dict[str, bool]:
    """Per test, whether it fails the bar at some checkpoint."""
    return {
        "Mann-Whitney": bool(np.any(verdict["Mann-Whitney"] < threshold)),
        "spread": bool(np.any(verdict["spread"] < threshold)),
        "interval": not np.all(verdict["interval"]),
    }


def share(count: int, total: int) -> str:
    """count of total draws, with the share's 95% Clopper-Pearson interval."""
    interval = stats.binomtest(count, total).proportion_ci()
    return f"{count} of {total} draws ({count / total:.1%}, 95% interval {interval.low:.1%}-{interval.high:.1%})"


def draw_table(verdicts: list[dict], bar: Bar, measured: dict | None) -> list[str]:
    """How often the draws meet the bar and fail each test; with a measured verdict, each p-value test's min-p."""
    fails = [failing(verdict, bar.threshold) for verdict in verdicts]
    met = sum(not any(fail.values()) for fail in fails)
    lines = [f"- the bar is met in {share(met, len(verdicts))}"]
    lines += [f"- {test} fails it in {share(sum(fail[test] for fail in fails), len(verdicts))}" for test in TESTS]
    if measured is not None:
        lines += [
            "",
            "| test | smallest p measured | draws with a smallest p as small | min-p (every checkpoint counted) |",
        ]
        lines.append("|---|---|---|---|")
        for test in ("Mann-Whitney", "spread"):
            smallest = measured[test].min()
            as_small = sum(verdict[test].min() <= smallest for verdict in verdicts)
            min_p = (as_small + 1) / (len(verdicts) + 1)
            lines.append(f"| {test} | {smallest:.3f} | {share(as_small, len(verdicts))} | {min_p:.3f} |")
    return lines


def measured_table(verdict: dict, grids: list[int], seeds: tuple[int, int], bar: Bar) -> list[str]:
    """The measured comparison's p-values and intervals per checkpoint, and whether it meets the bar."""
    outcome = "not met" if any(failing(verdict, bar.threshold).values()) else "met"
    lines = [
        f"Measured, {seeds[0]}/{seeds[1]} seeds (cleanued/minimax), training distribution: the bar (p >="
        f" {bar.threshold} at every checkpoint from {grids[0]} rollouts, the interval covering 0) is {outcome}",
        "",
        "| rollouts | Mann-Whitney p | spread p | difference's interval covers 0 |",
        "|---|---|---|---|",
    ]
    for j, grid in enumerate(grids):
        covers = "yes" if verdict["interval"][j] else "**no**"
        lines.append(f"| {grid} | {verdict['Mann-Whitney'][j]:.2f} | {verdict['spread'][j]:.2f} | {covers} |")
    return lines


def swap_report(args: Swap) -> str:
    values = read_pooled(args.folders, args.method)
    grids = checkpoints(values, args.first_rollouts, SIDES)
    cleanued, minimax = (curves(values, side, grids) for side in SIDES)
    if unpaired := sorted(cleanued.keys() ^ minimax.keys()):
        folder, seed = unpaired[0]
        side = "cleanued" if (folder, seed) in minimax else "minimax"
        raise ConfigError(
            f"{args.folders[folder]}: seed {seed} has no {side} evaluation at some checkpoint from {grids[0]} "
            f"({len(unpaired)} seed(s) unpaired): swap pairs seed i of one side with seed i of the other"
        )
    if len(cleanued) < 3:
        raise ConfigError(f"{len(cleanued)} seeds a side: the spread test needs at least 3")
    first, second = np.array(list(cleanued.values())), np.array(list(minimax.values()))
    return permutation_report(args, first, second, grids, swap_pairs, "giving each pair's two seeds to the sides")


def deal_report(args: Deal) -> str:
    values = read_pooled(args.folders, args.method, args.cleanued_runs)
    grids = checkpoints(values, args.first_rollouts, SIDES)
    first, second = (np.array(list(curves(values, side, grids).values())) for side in SIDES)
    if min(len(first), len(second)) < 3:
        raise ConfigError(
            f"{len(first)}/{len(second)} seeds (cleanued/minimax) evaluated at every checkpoint from {grids[0]}: the "
            "spread test needs at least 3 a side"
        )
    return permutation_report(args, first, second, grids, deal_seeds, "dealing all the seeds out to the sides")


def permutation_report(
    args: Bar, first: np.ndarray, second: np.ndarray, grids: list[int], redraw: Redraw, how: str
) -> str:
    """The measured comparison's table, then the draws' shares and min-p, each draw's sides given by
    redraw(rng, first, second)."""
    measured = judge(first, second, args)
    rng = np.random.default_rng(args.draw_seed)
    verdicts = [judge(*redraw(rng, first, second), args) for _ in range(args.draws)]
    lines = measured_table(measured, grids, (len(first), len(second)), args)
    lines += ["", f"{args.draws} draws {how} at random (seed {args.draw_seed}):"]
    return "\n".join(lines + draw_table(verdicts, args, measured))


def split_report(args: Split) -> str:
    values = read_pooled(args.folders, args.method, args.cleanued_runs)
    grids = checkpoints(values, args.first_rollouts, (args.side,))
    seeds = np.array(list(curves(values, args.side, grids).values()))
    if len(seeds) < 2 * args.seeds_a_side:
        raise ConfigError(
            f"--seeds-a-side {args.seeds_a_side}: {len(seeds)} {args.side} seeds evaluated at every checkpoint from "
            f"{grids[0]}, two groups need {2 * args.seeds_a_side}"
        )
    rng = np.random.default_rng(args.draw_seed)
    verdicts = []
    for _ in range(args.draws):
        first, second = split_groups(rng, len(seeds), args.seeds_a_side)
        verdicts.append(judge(seeds[first], seeds[second], args))
    lines = [
        f"{args.draws} draws of two disjoint groups of {args.seeds_a_side} from {len(seeds)} {args.side} seeds "
        f"(seed {args.draw_seed}), judged at checkpoints {', '.join(map(str, grids))} (p >= {args.threshold}, the "
        "interval covering 0):"
    ]
    return "\n".join(lines + draw_table(verdicts, args, None))


def main() -> None:
    command = tyro.extras.subcommand_cli_from_dict({"swap": Swap, "deal": Deal, "split": Split}, description=__doc__)
    reports = {Swap: swap_report, Deal: deal_report, Split: split_report}
    print(reports[type(command)](command))


if __name__ == "__main__":
    with one_line_errors():
        main()
