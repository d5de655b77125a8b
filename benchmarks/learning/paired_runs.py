"""Two runs, or two sides of learning-comparison folders, whose seeds started pair by pair from the same initial
parameters, compared seed by seed.

Whether a machine, a jax version or a change of code alters how a method learns cannot be told well from two seed
sets: their seeds start from different initial parameters, and a few slow starts move the tail on their own. Start
one run where the other's seeds started (`fork_run.py params --update 0` of the other run's seeds, given through
`--init-from`) and each pair differs only in what happened after the start. Per checkpoint both runs reached: each
run's mean over the paired seeds, the mean of the differences (first - second) with its 95% percentile bootstrap
interval over the pairs, the two-sided Wilcoxon signed-rank p of the differences, and how many pairs have one run
behind the other by more than `--behind`.

Reads each run folder's config.json and evaluations.jsonl (`fork_run.py evaluate --out RUN/evaluations.jsonl`), and
refuses runs of different scripts, settings or evaluations, or two runs neither of which was started from given
parameters. Which seed of the second run each seed of the first started from is the caller's to give
(`--second-seeds`, by default the same index): the .npz does not record where its arrays came from.

    python benchmarks/learning/fork_run.py params --run-dir GPU_RUN --update 0 --seeds $(seq 0 23) --out starts.npz
    python algos/plr.py --runs-dir RUNS --run-name from_gpu_starts --init-from starts.npz --num-seeds 24 ...
    python benchmarks/learning/fork_run.py evaluate --run-dir RUNS/from_gpu_starts \
        --out RUNS/from_gpu_starts/evaluations.jsonl
    python benchmarks/learning/paired_runs.py RUNS/from_gpu_starts GPU_RUN

With `--side`, the two folders are output folders of benchmarks/learning/learning_vs_minimax.py with the same
experiment and settings, and that side's seed i of one is paired with its seed i of the other: the same seed starts
from the same parameters and draws the same random stream in both, so a pair differs only in what differed between
the two folders' runs, such as the stack minimax ran on (`--minimax-venv`; benchmarks/learning/minimax_on_our_jax.py).

    python benchmarks/learning/paired_runs.py --side minimax OUT_ON_OUR_JAX OUT_ON_JAX_0_4_31

With `--across-sides`, the one folder is an output folder of learning_vs_minimax.py whose two sides started from the
same parameters (`--same-init`, or `--init-from`), and cleanued's seed i is paired with minimax's seed i: a pair
differs only in the two libraries' training and random streams.

    python benchmarks/learning/paired_runs.py --across-sides OUT_SAME_INIT --mean-over 400 500 600
    python benchmarks/learning/paired_runs.py --across-sides OUT_SAME_INIT --pooled-with OUT_SAME_INIT_SET2

`--pooled-with` adds the pairs of more such folders, the same experiment with other seed sets (`--first-seed`).

In both folder modes a second table pairs each held-out maze's solve rate, each pair's two members averaged over the
checkpoints at which both were evaluated. Every row also gives the Spearman correlation of the pairs' two members: how
much a seed's start decides where it ends.
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

import numpy as np
import tyro
from scipy import stats
from tyro.conf import Positional

# SCAFFOLDING: put the repo root on sys.path so the script runs as `python benchmarks/learning/paired_runs.py`.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.learning.learning_vs_minimax_outputs import read_jsonl  # noqa: E402
from benchmarks.learning.learning_vs_minimax_report import bootstrap_interval, describe  # noqa: E402
from benchmarks.learning.pool_seed_sets import FORK_RUN_EVALUATION  # noqa: E402
from common.config import AT_LEAST_ONE, config_differences, resumable_fields  # noqa: E402
from common.errors import ConfigError  # noqa: E402
from common.runs import one_line_errors  # noqa: E402

RUN_FIELDS = resumable_fields(schedule_spans_run=False) | {"seed", "num_seeds", "init_from"}
"""Fields two paired runs may differ in: where and how long they ran, how they logged, their seeds and starts."""


@dataclass(frozen=True)
class Args:
    first: Positional[Path]
    """A run folder whose seeds started from the second's (or both from the same .npz); with --side, an output
    folder of learning_vs_minimax.py; with --across-sides, the one such folder."""
    second: Positional[Path | None] = None
    """The other folder (none with --across-sides)."""
    side: Literal["cleanued", "minimax"] | None = None
    """Pair this side's seeds of two learning_vs_minimax.py output folders (of one experiment) instead of two runs."""
    across_sides: bool = False
    """Pair cleanued's seed i with minimax's seed i in one learning_vs_minimax.py output folder whose sides started
    from the same parameters (cleanued first)."""
    pooled_with: tuple[Path, ...] = ()
    """With --across-sides: more such folders of the same experiment (another --first-seed), whose pairs join the
    first folder's."""
    mean_over: tuple[int, ...] = ()
    """Checkpoints whose training-distribution solve rates are also averaged per seed, paired as one more row (the
    seeds evaluated at all of them)."""
    method: str = "plr"
    """With --side or --across-sides: the method whose evaluations are paired."""
    second_seeds: tuple[int, ...] = ()
    """The second run's seed that the first run's seed i started as (default: seed i)."""
    behind: float = 0.2
    """A pair counts as one run behind the other when their solve rates differ by more than this."""
    bootstrap_resamples: Annotated[int, AT_LEAST_ONE] = 10000


class Evaluations(NamedTuple):
    rates: dict[int, dict[int, float]]
    """{checkpoint: {seed: training-distribution solve rate}}"""
    heldout: dict[str, dict[int, dict[int, float]]]
    """{held-out maze: {checkpoint: {seed: solve rate}}}"""


class Pairing(NamedTuple):
    first: Evaluations
    second: Evaluations
    pairs: tuple[int, ...]
    """The second's seed for each of the first's."""
    title: str


def one_setting(settings: set, where: str) -> tuple[int, int] | None:
    if len(settings) > 1:
        raise ConfigError(f"{where}: evaluated with several (episodes, seed) settings {sorted(settings)}")
    return settings.pop() if settings else None


def read_run(run: Path) -> tuple[dict, Evaluations]:
    """(saved config.json, the training-distribution evaluations) of a run folder, with the evaluation setting checked
    to be one; held-out records (`fork_run.py evaluate --heldout-mazes`) are not paired here."""
    if not (run / "config.json").is_file() or not (run / "evaluations.jsonl").is_file():
        raise ConfigError(f"{run}: needs config.json and evaluations.jsonl (fork_run.py evaluate)")
    rates, settings = {}, set()
    for record in read_jsonl(run / "evaluations.jsonl"):
        if record.get("kind", "train_levels") != "train_levels":
            continue
        episodes, eval_seed = FORK_RUN_EVALUATION
        settings.add((record.get("episodes", episodes), record.get("eval_seed", eval_seed)))
        rates.setdefault(record["update"], {})[record["seed"]] = record["solve_rate"]
    saved = json.loads((run / "config.json").read_text())
    return saved | {"evaluation": (one_setting(settings, str(run)), None)}, Evaluations(rates, {})


def read_side(folder: Path, side: str, method: str) -> tuple[dict, Evaluations]:
    """(what must match for pairing, the evaluations) of one side of a learning_vs_minimax.py output folder."""
    if not (folder / "experiment.json").is_file() or not (folder / "settings.json").is_file():
        raise ConfigError(
            f"{folder}: needs experiment.json and settings.json (an output folder of learning_vs_minimax.py)"
        )
    settings = json.loads((folder / "settings.json").read_text())
    if method not in settings:
        raise ConfigError(f"{folder} has no {method} runs (it has {', '.join(sorted(settings))})")
    rates, heldout, train_settings, heldout_settings = {}, {}, set(), set()
    for record in read_jsonl(folder / "evaluations.jsonl"):
        if (record["side"], record["method"]) != (side, method):
            continue
        if record["kind"] == "train_levels":
            train_settings.add((record["episodes"], record["eval_seed"]))
            rates.setdefault(record["grid"], {})[record["seed"]] = record["solve_rate"]
        elif record["kind"] == "heldout":
            heldout_settings.add((record["episodes"], record["eval_seed"]))
            heldout.setdefault(record["maze"], {}).setdefault(record["grid"], {})[record["seed"]] = record["solve_rate"]
    where = f"{folder}'s {side} side"
    evaluation = (one_setting(train_settings, where), one_setting(heldout_settings, where + " on held-out mazes"))
    experiment = json.loads((folder / "experiment.json").read_text())
    meta = {"experiment": experiment, "settings": settings[method][side], "evaluation": evaluation}
    return meta, Evaluations(rates, heldout)


def check_runs_pairable(args: Args, first: dict, second: dict) -> None:
    if first["script"] != second["script"]:
        raise ConfigError(f"{args.first} is a run of {first['script']}, {args.second} of {second['script']}")
    if differing := config_differences(first["config"], second["config"], RUN_FIELDS):
        raise ConfigError(f"{args.first} and {args.second} were trained with other settings: {'; '.join(differing)}")
    check_same_evaluation(str(args.first), str(args.second), first, second)
    if not (first["config"]["init_from"] or second["config"]["init_from"]):
        raise ConfigError(f"neither {args.first} nor {args.second} started from --init-from: their starts differ")


def check_sides_pairable(args: Args, first: dict, second: dict) -> None:
    for part in ("experiment", "settings"):
        if differing := sorted(
            key for key in first[part].keys() | second[part].keys() if first[part].get(key) != second[part].get(key)
        ):
            raise ConfigError(
                f"{args.first} and {args.second} differ in their {part}: "
                + "; ".join(f"{key} {first[part].get(key)!r} and {second[part].get(key)!r}" for key in differing)
            )
    check_same_evaluation(str(args.first), str(args.second), first, second)


def check_across_sides_arguments(args: Args) -> None:
    if args.second is not None or args.side is not None or args.second_seeds:
        raise ConfigError(
            "--across-sides pairs cleanued's seed i with minimax's seed i of one folder: no second folder, --side or "
            "--second-seeds"
        )


def check_sides_started_alike(folder: Path, experiment: dict) -> None:
    if not (experiment.get("same_init") or experiment.get("init_from")):
        raise ConfigError(
            f"{folder} was run without --same-init or --init-from: its cleanued and minimax seeds started apart"
        )


def check_pooled_alike(args: Args, folder: Path, first: dict, pooled: dict) -> None:
    """A --pooled-with folder is the first's experiment with another seed set: the same experiment but --first-seed,
    the same settings and evaluations."""
    differing = [
        key
        for key in first["experiment"].keys() | pooled["experiment"].keys()
        if key != "first_seed" and first["experiment"].get(key) != pooled["experiment"].get(key)
    ]
    differing += [part for part in ("settings", "evaluation") if first[part] != pooled[part]]
    if differing:
        raise ConfigError(f"--pooled-with {folder} differs from {args.first} in {', '.join(sorted(differing))}")


def seed_range(experiment: dict) -> range:
    first_seed = experiment.get("first_seed", 0)
    return range(first_seed, first_seed + experiment["seeds"])


def shifted(evaluations: Evaluations, offset: int) -> Evaluations:
    """The evaluations with every seed index moved up by `offset`, so that pooled folders' seeds stay apart."""
    rates = {
        update: {seed + offset: rate for seed, rate in seeds.items()} for update, seeds in evaluations.rates.items()
    }
    heldout = {
        maze: {update: {seed + offset: rate for seed, rate in seeds.items()} for update, seeds in checkpoints.items()}
        for maze, checkpoints in evaluations.heldout.items()
    }
    return Evaluations(rates, heldout)


def merged(parts: list[Evaluations]) -> Evaluations:
    rates, heldout = {}, {}
    for part in parts:
        for update, seeds in part.rates.items():
            rates.setdefault(update, {}).update(seeds)
        for maze, checkpoints in part.heldout.items():
            for update, seeds in checkpoints.items():
                heldout.setdefault(maze, {}).setdefault(update, {}).update(seeds)
    return Evaluations(rates, heldout)


def read_across_sides(args: Args) -> Pairing:
    """cleanued's seed i against minimax's seed i in `first` and every --pooled-with folder, the folders' seeds one
    after another."""
    check_across_sides_arguments(args)
    cleanued_parts, minimax_parts, seen, offset = [], [], {}, 0
    first_meta = None
    for folder in (args.first, *args.pooled_with):
        (cleanued, cleanued_evaluations), (minimax, minimax_evaluations) = (
            read_side(folder, side, args.method) for side in ("cleanued", "minimax")
        )
        check_sides_started_alike(folder, cleanued["experiment"])
        check_same_evaluation(f"{folder}'s cleanued side", "its minimax side", cleanued, minimax)
        if first_meta is None:
            first_meta = cleanued
        else:
            check_pooled_alike(args, folder, first_meta, cleanued)
        seeds = seed_range(cleanued["experiment"])
        if shared := [other for other, taken in seen.items() if set(taken) & set(seeds)]:
            raise ConfigError(f"--pooled-with {folder}: its seed set overlaps that of {shared[0]} (--first-seed)")
        seen[folder] = seeds
        cleanued_parts.append(shifted(cleanued_evaluations, offset))
        minimax_parts.append(shifted(minimax_evaluations, offset))
        offset += len(seeds)
    folders = " + ".join(str(folder) for folder in (args.first, *args.pooled_with))
    title = f"{args.method} in {folders}, cleanued (first) against minimax (second)"
    return Pairing(merged(cleanued_parts), merged(minimax_parts), tuple(range(offset)), title)


def check_same_evaluation(first_name: str, second_name: str, first: dict, second: dict) -> None:
    """Both members of every pair evaluated alike: (episodes, seed) on the training distribution and on held-out
    mazes."""
    for setting, first_setting, second_setting in zip(
        ("the training distribution", "held-out mazes"), first["evaluation"], second["evaluation"], strict=True
    ):
        if first_setting != second_setting:
            raise ConfigError(
                f"{first_name} was evaluated with (episodes, seed) {first_setting}, {second_name} with "
                f"{second_setting} on {setting}"
            )


def seed_pairs(args: Args, num_first: int, num_second: int, second_name: str) -> tuple[int, ...]:
    """The second folder's seed for each of the first's."""
    pairs = args.second_seeds or tuple(range(num_first))
    if len(pairs) != num_first:
        raise ConfigError(f"--second-seeds: {len(pairs)} seeds for {args.first}'s {num_first}")
    if bad := [seed for seed in pairs if not 0 <= seed < num_second]:
        raise ConfigError(f"--second-seeds {bad}: {second_name} has seeds 0-{num_second - 1}")
    if len(set(pairs)) < len(pairs):
        raise ConfigError(f"--second-seeds {pairs}: a seed twice")
    return pairs


def paired_row(label: int | str, first: list[float], second: list[float], behind: float, resamples: int) -> str:
    a, b = np.asarray(first, np.float64), np.asarray(second, np.float64)
    differences = a - b
    # Wilcoxon drops zero differences: with every pair equal nothing is left to rank.
    wilcoxon = 1.0 if np.all(differences == 0) else float(stats.wilcoxon(a, b, alternative="two-sided").pvalue)
    cells = [
        f"{a.mean():.3f}",
        f"{b.mean():.3f}",
        describe(*bootstrap_interval(differences, resamples)),
        f"{wilcoxon:.2f}",
        str(int((differences < -behind).sum())),
        str(int((differences > behind).sum())),
        f"{a.min():.2f} / {b.min():.2f}",
        spearman(a, b),
    ]
    return f"| {label} | {len(a)} | " + " | ".join(cells) + " |"


def spearman(a: np.ndarray, b: np.ndarray) -> str:
    """Spearman's rank correlation of the pairs' members, '-' where one member is constant (no ranks to compare)."""
    if np.all(a == a[0]) or np.all(b == b[0]):
        return "-"
    return f"{stats.spearmanr(a, b).statistic:.2f}"


def paired_values(pairs: tuple[int, ...], first: dict[int, float], second: dict[int, float]) -> tuple[list, list]:
    """The two members' values of every pair that both folders hold."""
    present = [i for i, j in enumerate(pairs) if i in first and j in second]
    return [first[i] for i in present], [second[pairs[i]] for i in present]


def checkpoint_mean(rates: dict[int, dict[int, float]], checkpoints: tuple[int, ...]) -> dict[int, float]:
    """Each seed's solve rate averaged over `checkpoints`, for the seeds evaluated at all of them."""
    seeds = set.intersection(*(set(rates.get(update, {})) for update in checkpoints))
    return {seed: float(np.mean([rates[update][seed] for update in checkpoints])) for seed in seeds}


def heldout_means(pairs: tuple[int, ...], first: dict[int, dict], second: dict[int, dict]) -> tuple[list, list]:
    """Each pair's two held-out solve rates, both averaged over the checkpoints at which both members were evaluated
    (so a checkpoint one side lacks moves neither)."""
    a, b = [], []
    for i, j in enumerate(pairs):
        shared = sorted(c for c in first.keys() & second.keys() if i in first[c] and j in second[c])
        if shared:
            a.append(float(np.mean([first[c][i] for c in shared])))
            b.append(float(np.mean([second[c][j] for c in shared])))
    return a, b


def read_pairs(args: Args) -> Pairing:
    if args.across_sides:
        return read_across_sides(args)
    if args.pooled_with:
        raise ConfigError("--pooled-with pools folders of --across-sides")
    if args.second is None:
        raise ConfigError(f"{args.first}: give the second folder to pair it with (or --across-sides)")
    if args.side is None:
        (first, first_evaluations), (second, second_evaluations) = read_run(args.first), read_run(args.second)
        check_runs_pairable(args, first, second)
        pairs = seed_pairs(args, first["config"]["num_seeds"], second["config"]["num_seeds"], str(args.second))
        title = f"{args.first} (first) against {args.second} (second)"
        return Pairing(first_evaluations, second_evaluations, pairs, title)
    (first, first_evaluations), (second, second_evaluations) = (
        read_side(folder, args.side, args.method) for folder in (args.first, args.second)
    )
    check_sides_pairable(args, first, second)
    pairs = seed_pairs(args, first["experiment"]["seeds"], second["experiment"]["seeds"], str(args.second))
    title = f"{args.side}'s {args.method} in {args.first} (first) against {args.second} (second)"
    return Pairing(first_evaluations, second_evaluations, pairs, title)


def paired_table(args: Args) -> str:
    first, second, pairs, title = read_pairs(args)
    if len(set(args.mean_over)) < len(args.mean_over):
        raise ConfigError(f"--mean-over {args.mean_over}: a checkpoint twice")
    if missing := [update for update in args.mean_over if update not in first.rates.keys() & second.rates.keys()]:
        raise ConfigError(f"--mean-over {missing}: not evaluated in both folders")
    columns = "first | second | difference | Wilcoxon p | first behind | second behind | lowest | Spearman"
    separator = "|---" * (columns.count("|") + 3) + "|"
    header = [
        f"{title}, seed i against seed {pairs[0]}, ... of the second:"
        " training-distribution solve rate, each run's mean, the mean of the paired differences (first - second) with"
        " its 95% bootstrap interval, the Wilcoxon signed-rank p, the pairs with each run behind by more than"
        f" {args.behind}, each run's lowest and the Spearman correlation of the pairs' members",
        "",
        f"| update | pairs | {columns} |",
        separator,
    ]
    labelled = [
        (update, first.rates[update], second.rates[update])
        for update in sorted(first.rates.keys() & second.rates.keys())
    ]
    if args.mean_over:
        label = "mean " + "/".join(str(update) for update in args.mean_over)
        labelled.append(
            (label, checkpoint_mean(first.rates, args.mean_over), checkpoint_mean(second.rates, args.mean_over))
        )
    rows = []
    for label, first_values, second_values in labelled:
        a, b = paired_values(pairs, first_values, second_values)
        if len(a) >= 2:
            rows.append(paired_row(label, a, b, args.behind, args.bootstrap_resamples))
    if not rows:
        raise ConfigError(f"{title}: the two share no evaluated update with two or more pairs")
    heldout = []
    for maze in sorted(first.heldout.keys() & second.heldout.keys()):
        a, b = heldout_means(pairs, first.heldout[maze], second.heldout[maze])
        if len(a) >= 2:
            heldout.append(paired_row(maze, a, b, args.behind, args.bootstrap_resamples))
    if heldout:
        heldout = [
            "",
            "Each held-out maze's solve rate, a pair's members averaged over the checkpoints both were evaluated at:",
            "",
            f"| maze | pairs | {columns} |",
            separator,
            *heldout,
        ]
    return "\n".join(header + rows + heldout)


def main(args: Args) -> None:
    print(paired_table(args))


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args, description=__doc__))
