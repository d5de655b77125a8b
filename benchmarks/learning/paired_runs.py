"""Two cleanued runs whose seeds started pair by pair from the same initial parameters, compared seed by seed.

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
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

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
    folder of learning_vs_minimax.py."""
    second: Positional[Path]
    """The other folder."""
    side: Literal["cleanued", "minimax"] | None = None
    """Pair this side's seeds of two learning_vs_minimax.py output folders (of one experiment) instead of two runs."""
    method: str = "plr"
    """With --side: the method whose evaluations are paired."""
    second_seeds: tuple[int, ...] = ()
    """The second run's seed that the first run's seed i started as (default: seed i)."""
    behind: float = 0.2
    """A pair counts as one run behind the other when their solve rates differ by more than this."""
    bootstrap_resamples: Annotated[int, AT_LEAST_ONE] = 10000


def read_run(run: Path) -> tuple[dict, dict[int, dict[int, float]]]:
    """(saved config.json, {update: {seed: training-distribution solve rate}}) of a run folder, with the
    evaluation setting checked to be one."""
    if not (run / "config.json").is_file() or not (run / "evaluations.jsonl").is_file():
        raise ConfigError(f"{run}: needs config.json and evaluations.jsonl (fork_run.py evaluate)")
    rates, settings = {}, set()
    for record in read_jsonl(run / "evaluations.jsonl"):
        episodes, eval_seed = FORK_RUN_EVALUATION
        settings.add((record.get("episodes", episodes), record.get("eval_seed", eval_seed)))
        rates.setdefault(record["update"], {})[record["seed"]] = record["solve_rate"]
    if len(settings) > 1:
        raise ConfigError(f"{run}: evaluated with several (episodes, seed) settings {sorted(settings)}")
    return json.loads((run / "config.json").read_text()) | {"evaluation": settings.pop() if settings else None}, rates


def read_side(folder: Path, side: str, method: str) -> tuple[dict, dict[int, dict[int, float]]]:
    """(what must match for pairing, {checkpoint: {seed: training-distribution solve rate}}) of one side of a
    learning_vs_minimax.py output folder."""
    if not (folder / "experiment.json").is_file() or not (folder / "settings.json").is_file():
        raise ConfigError(
            f"{folder}: needs experiment.json and settings.json (an output folder of learning_vs_minimax.py)"
        )
    settings = json.loads((folder / "settings.json").read_text())
    if method not in settings:
        raise ConfigError(f"{folder} has no {method} runs (it has {', '.join(sorted(settings))})")
    rates, evaluations = {}, set()
    for record in read_jsonl(folder / "evaluations.jsonl"):
        if (record["side"], record["method"], record["kind"]) == (side, method, "train_levels"):
            evaluations.add((record["episodes"], record["eval_seed"]))
            rates.setdefault(record["grid"], {})[record["seed"]] = record["solve_rate"]
    if len(evaluations) > 1:
        raise ConfigError(f"{folder}: evaluated with several (episodes, seed) settings {sorted(evaluations)}")
    experiment = json.loads((folder / "experiment.json").read_text())
    return {
        "experiment": experiment,
        "settings": settings[method][side],
        "evaluation": evaluations.pop() if evaluations else None,
    }, rates


def check_runs_pairable(args: Args, first: dict, second: dict) -> None:
    if first["script"] != second["script"]:
        raise ConfigError(f"{args.first} is a run of {first['script']}, {args.second} of {second['script']}")
    if differing := config_differences(first["config"], second["config"], RUN_FIELDS):
        raise ConfigError(f"{args.first} and {args.second} were trained with other settings: {'; '.join(differing)}")
    check_same_evaluation(args, first, second)
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
    check_same_evaluation(args, first, second)


def check_same_evaluation(args: Args, first: dict, second: dict) -> None:
    if first["evaluation"] != second["evaluation"]:
        raise ConfigError(
            f"{args.first} was evaluated with (episodes, seed) {first['evaluation']}, {args.second} with "
            f"{second['evaluation']}"
        )


def seed_pairs(args: Args, num_first: int, num_second: int) -> tuple[int, ...]:
    """The second folder's seed for each of the first's."""
    pairs = args.second_seeds or tuple(range(num_first))
    if len(pairs) != num_first:
        raise ConfigError(f"--second-seeds: {len(pairs)} seeds for {args.first}'s {num_first}")
    if bad := [seed for seed in pairs if not 0 <= seed < num_second]:
        raise ConfigError(f"--second-seeds {bad}: {args.second} has seeds 0-{num_second - 1}")
    if len(set(pairs)) < len(pairs):
        raise ConfigError(f"--second-seeds {pairs}: a seed twice")
    return pairs


def paired_row(update: int, first: list[float], second: list[float], behind: float, resamples: int) -> str:
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
    ]
    return f"| {update} | {len(a)} | " + " | ".join(cells) + " |"


def paired_table(args: Args) -> str:
    if args.side is None:
        (first, first_rates), (second, second_rates) = read_run(args.first), read_run(args.second)
        check_runs_pairable(args, first, second)
        pairs = seed_pairs(args, first["config"]["num_seeds"], second["config"]["num_seeds"])
        names = f"{args.first} (first) against {args.second} (second)"
    else:
        (first, first_rates), (second, second_rates) = (
            read_side(folder, args.side, args.method) for folder in (args.first, args.second)
        )
        check_sides_pairable(args, first, second)
        pairs = seed_pairs(args, first["experiment"]["seeds"], second["experiment"]["seeds"])
        names = f"{args.side}'s {args.method} in {args.first} (first) against {args.second} (second)"
    header = [
        f"{names}, seed i against seed {pairs[0]}, ... of the second:"
        " training-distribution solve rate, each run's mean, the mean of the paired differences (first - second) with"
        " its 95% bootstrap interval, the Wilcoxon signed-rank p, the pairs with each run behind by more than"
        f" {args.behind}, and each run's lowest",
        "",
        "| update | pairs | first | second | difference | Wilcoxon p | first behind | second behind | lowest |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    for update in sorted(first_rates.keys() & second_rates.keys()):
        present = [i for i, j in enumerate(pairs) if i in first_rates[update] and j in second_rates[update]]
        if len(present) < 2:
            continue
        a = [first_rates[update][i] for i in present]
        b = [second_rates[update][pairs[i]] for i in present]
        rows.append(paired_row(update, a, b, args.behind, args.bootstrap_resamples))
    if not rows:
        raise ConfigError(f"{args.first} and {args.second} share no evaluated update with two or more pairs")
    return "\n".join(header + rows)


def main(args: Args) -> None:
    print(paired_table(args))


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args, description=__doc__))
