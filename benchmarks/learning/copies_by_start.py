"""Two cleanued runs that trained copies of the same starts, compared start by start: does one of them (another
machine, jax version or change of code) continue a start into a stall more or less often than the other?

A start is a seed's initial parameters, given to many seeds through `--init-from` (`fork_run.py params` with a seed
repeated); each copy draws the rest of its random stream itself. Two such runs cannot be paired seed by seed
(`paired_runs.py`), since no copy of one continues a copy of the other, but their copies of each start can be set
side by side. Per checkpoint both runs reached and per start: each run's copies, mean and lowest, the two-sided
Mann-Whitney p of the two runs' copies and the spread p (Brown-Forsythe), and with `--below` how many copies of each
run are under that checkpoint's line (for instance the lowest of a reference's own-start seeds), with Fisher's exact
p of the two counts. The last row of each checkpoint pools the starts that both runs evaluated there.

Reads each run folder's config.json and evaluations.jsonl (`fork_run.py evaluate --out RUN/evaluations.jsonl`) and
refuses runs of different scripts, settings or evaluations, and a run not started from `--init-from`. Which start
each seed holds is the caller's to give (`--first-starts`, `--second-starts`, one label per seed): the .npz does not
record where its arrays came from.

    python benchmarks/learning/copies_by_start.py GPU_RUN CPU_RUN \
        --first-starts $(printf 'a %.0s' {1..32}) $(printf 'b %.0s' {1..32}) \
        --second-starts $(printf 'a %.0s' {1..12}) $(printf 'b %.0s' {1..12}) --below 400=0.47 500=0.61
"""

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro
from scipy import stats
from tyro.conf import Positional

# SCAFFOLDING: put the repo root on sys.path so the script runs as `python benchmarks/learning/copies_by_start.py`.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.learning.learning_vs_minimax_report import mann_whitney_p  # noqa: E402
from benchmarks.learning.paired_runs import check_runs_pairable, read_run  # noqa: E402
from benchmarks.learning.pool_seed_sets import spread_p  # noqa: E402
from common.errors import ConfigError  # noqa: E402
from common.runs import one_line_errors  # noqa: E402


@dataclass(frozen=True)
class Args:
    first: Positional[Path]
    """A run folder whose seeds are copies of some starts (`--init-from`)."""
    second: Positional[Path]
    """A run folder with copies of the same starts."""
    first_starts: tuple[str, ...]
    """The start each of the first run's seeds holds, one label per seed in seed order."""
    second_starts: tuple[str, ...]
    """The start each of the second run's seeds holds, with the first's labels."""
    below: tuple[str, ...] = ()
    """UPDATE=RATE: count the copies whose solve rate at that checkpoint is under RATE."""


def parse_lines(below: tuple[str, ...]) -> dict[int, float]:
    lines = {}
    for text in below:
        update, _, rate = text.partition("=")
        try:
            lines[int(update)] = float(rate)
        except ValueError:
            raise ConfigError(f"--below {text}: expected UPDATE=RATE, such as 500=0.61") from None
    return lines


def check_starts(args: Args, first: dict, second: dict) -> None:
    for run, config, starts, flag in (
        (args.first, first, args.first_starts, "--first-starts"),
        (args.second, second, args.second_starts, "--second-starts"),
    ):
        if not config["config"]["init_from"]:
            raise ConfigError(f"{run} did not start from --init-from: its seeds are no copies of given starts")
        if len(starts) != config["config"]["num_seeds"]:
            raise ConfigError(f"{flag}: {len(starts)} labels for {run}'s {config['config']['num_seeds']} seeds")
    if only := sorted(set(args.first_starts) ^ set(args.second_starts)):
        raise ConfigError(f"start {', '.join(only)} has copies in one run only")


def summary_row(update: int, start: str, first: list[float], second: list[float], line: float | None) -> str:
    mann_whitney, spread = mann_whitney_p(first, second), spread_p(first, second)
    cells = [
        f"{len(first)} / {len(second)}",
        f"{np.mean(first):.3f}",
        f"{np.mean(second):.3f}",
        "-" if mann_whitney is None else f"{mann_whitney:.2f}",
        "-" if spread is None else f"{spread:.2f}",
        f"{min(first):.2f} / {min(second):.2f}",
    ]
    if line is None:
        cells += ["-", "-"]
    else:
        under = [sum(rate < line for rate in rates) for rates in (first, second)]
        table = [[under[0], len(first) - under[0]], [under[1], len(second) - under[1]]]
        cells += [f"{under[0]} / {under[1]}", f"{stats.fisher_exact(table).pvalue:.2f}"]
    return f"| {update} | {start} | " + " | ".join(cells) + " |"


def copies_table(args: Args) -> str:
    lines = parse_lines(args.below)
    (first, first_evaluations), (second, second_evaluations) = read_run(args.first), read_run(args.second)
    first_rates, second_rates = first_evaluations.rates, second_evaluations.rates
    check_runs_pairable(args, first, second)
    check_starts(args, first, second)
    shared_updates = first_rates.keys() & second_rates.keys()
    if missing := sorted(set(lines) - shared_updates):
        raise ConfigError(f"--below names updates {missing} that both runs did not evaluate")
    starts = list(dict.fromkeys(args.first_starts))
    header = [
        f"{args.first} (first) against {args.second} (second), copies of each start: training-distribution solve"
        " rate, each run's copies and mean, Mann-Whitney's p and the spread p (Brown-Forsythe) of the two runs'"
        " copies, each run's lowest, and the copies under --below's line with Fisher's exact p",
        "",
        "| update | start | copies | first mean | second mean | Mann-Whitney p | spread p | lowest (first / second)"
        " | under the line (first / second) | Fisher p |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    for update in sorted(shared_updates):
        by_start = {start: ([], []) for start in starts}
        for run_rates, labels, side in ((first_rates, args.first_starts, 0), (second_rates, args.second_starts, 1)):
            for seed, rate in sorted(run_rates[update].items()):
                by_start[labels[seed]][side].append(rate)
        both = {start: pair for start, pair in by_start.items() if all(pair)}
        for start, (a, b) in both.items():
            rows.append(summary_row(update, start, a, b, lines.get(update)))
        if len(starts) > 1 and both:
            pooled = [rate for a, _ in both.values() for rate in a], [rate for _, b in both.values() for rate in b]
            rows.append(summary_row(update, "all", *pooled, lines.get(update)))
    if not rows:
        raise ConfigError(f"{args.first} and {args.second} share no evaluated update")
    return "\n".join(header + rows)


def main(args: Args) -> None:
    print(copies_table(args))


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args, description=__doc__))
