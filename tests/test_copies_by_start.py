"""benchmarks/learning/copies_by_start.py on synthetic run folders: each start's copies are the seeds its labels name,
the Mann-Whitney, spread and Fisher p-values equal plain-Python enumerations and formulas, the pooled row holds every
copy, and bad labels, lines and runs are refused in one line."""

import itertools
import json
import math

import numpy as np
import pytest

from benchmarks.learning.copies_by_start import Args, copies_table
from common.errors import ConfigError

CONFIG = {"seed": 0, "init_from": "/tmp/starts.npz", "lr": 3e-4, "runs_dir": "/tmp/a", "total_updates": 600}
FIRST_STARTS = ("a", "b", "a", "b", "a", "b", "a")
SECOND_STARTS = ("b", "b", "a", "a", "a", "b")
FIRST = {100: [0.31, 0.12, 0.52, 0.27, 0.44, 0.18, 0.63], 200: [0.71, 0.22, 0.81, 0.64, 0.77, 0.33, 0.92]}
SECOND = {100: [0.25, 0.15, 0.36, 0.58, 0.47, 0.21], 200: [0.24, 0.20, 0.66, 0.83, 0.74, 0.28]}


def write_run(folder, rates, **config):
    folder.mkdir()
    saved = {"script": "algos/plr.py", "config": CONFIG | {"num_seeds": len(rates[100])} | config}
    (folder / "config.json").write_text(json.dumps(saved))
    records = [
        {"update": update, "seed": seed, "solve_rate": rate, "episodes": 512, "eval_seed": 0}
        for update, values in rates.items()
        for seed, rate in enumerate(values)
    ]
    (folder / "evaluations.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    return folder


@pytest.fixture
def runs(tmp_path):
    return write_run(tmp_path / "first", FIRST, seed=7000), write_run(tmp_path / "second", SECOND)


def rows_of(text: str) -> dict[tuple[int, str], list[str]]:
    rows = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    return {(int(cells[0]), cells[1].strip()): [cell.strip() for cell in cells[2:]] for cells in rows}


def exact_rank_sum_p(a, b) -> float:
    """Two-sided exact Mann-Whitney p without ties: the share of the ways to split the pooled values into groups of
    a's and b's sizes whose U lies at least as far from its mean as the observed one."""
    pooled = list(a) + list(b)

    def u_of(group):
        return sum(x > y for x in group for y in pooled if y not in group)

    mean = len(a) * len(b) / 2
    observed = abs(u_of(a) - mean)
    splits = list(itertools.combinations(pooled, len(a)))
    return sum(abs(u_of(group) - mean) >= observed - 1e-9 for group in splits) / len(splits)


def brown_forsythe_p(a, b) -> float:
    """One-way ANOVA on the absolute deviations from each group's median, its p from the F distribution."""
    from scipy.stats import f

    groups = [np.abs(np.asarray(g) - np.median(g)) for g in (a, b)]
    grand = np.concatenate(groups).mean()
    between = sum(len(g) * (g.mean() - grand) ** 2 for g in groups)
    within = sum(((g - g.mean()) ** 2).sum() for g in groups)
    n = sum(len(g) for g in groups)
    return float(f.sf(between / (within / (n - 2)), 1, n - 2))


def fisher_p(under_a, n_a, under_b, n_b) -> float:
    """Two-sided Fisher's exact p: the hypergeometric tables with the same margins no likelier than the observed."""
    total_under, n = under_a + under_b, n_a + n_b

    def probability(k):
        return math.comb(n_a, k) * math.comb(n_b, total_under - k) / math.comb(n, total_under)

    observed = probability(under_a)
    ks = range(max(0, total_under - n_b), min(n_a, total_under) + 1)
    return sum(probability(k) for k in ks if probability(k) <= observed * (1 + 1e-7))


def copies(rates, starts, start):
    return [rate for rate, label in zip(rates, starts, strict=True) if label == start]


def test_each_starts_copies_and_their_statistics(runs):
    """Mutation checked by hand: grouping by the other run's labels, Fisher's counts with <= for <, or the pooled row
    over the first start alone fails this test."""
    rows = rows_of(copies_table(Args(*runs, FIRST_STARTS, SECOND_STARTS, below=("200=0.5",))))
    assert set(rows) == {(update, start) for update in (100, 200) for start in ("a", "b", "all")}
    for update in (100, 200):
        for start in ("a", "b", "all"):
            a = FIRST[update] if start == "all" else copies(FIRST[update], FIRST_STARTS, start)
            b = SECOND[update] if start == "all" else copies(SECOND[update], SECOND_STARTS, start)
            count, first_mean, second_mean, mann_whitney, spread, lowest, under, fisher = rows[update, start]
            assert count == f"{len(a)} / {len(b)}"
            assert (first_mean, second_mean) == (f"{np.mean(a):.3f}", f"{np.mean(b):.3f}")
            assert mann_whitney == f"{exact_rank_sum_p(a, b):.2f}"
            assert spread == f"{brown_forsythe_p(a, b):.2f}"
            assert lowest == f"{min(a):.2f} / {min(b):.2f}"
            if update == 100:
                assert (under, fisher) == ("-", "-")
            else:
                under_a, under_b = sum(r < 0.5 for r in a), sum(r < 0.5 for r in b)
                assert under == f"{under_a} / {under_b}"
                assert fisher == f"{fisher_p(under_a, len(a), under_b, len(b)):.2f}"
    assert rows[200, "b"][6] == "2 / 3" and rows[200, "all"][6] == "2 / 3"


def test_a_line_on_a_rate_counts_no_copy_at_it(tmp_path):
    """A copy exactly on the line is not under it. Mutation checked by hand: <= in the count fails this test."""
    first = write_run(tmp_path / "first", {100: [0.5, 0.4, 0.6], 200: [0.5, 0.5, 0.7]})
    second = write_run(tmp_path / "second", {100: [0.5, 0.3, 0.6], 200: [0.2, 0.5, 0.9]})
    rows = rows_of(copies_table(Args(first, second, ("a",) * 3, ("a",) * 3, below=("200=0.5",))))
    assert rows[200, "a"][6] == "0 / 1"
    assert (200, "all") not in rows


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"first_starts": FIRST_STARTS[:-1]}, "--first-starts: 6 labels for"),
        ({"second_starts": ("b",) * 6}, "start a has copies in one run only"),
        ({"second_starts": ("a", "b", "c", "a", "b", "c")}, "start c has copies in one run only"),
        ({"below": ("500=0.6",)}, "--below names updates [500] that both runs did not evaluate"),
        ({"below": ("half=0.6",)}, "--below half=0.6: expected UPDATE=RATE"),
        ({"below": ("200",)}, "--below 200: expected UPDATE=RATE"),
    ],
)
def test_bad_labels_and_lines_are_refused(runs, change, message):
    arguments = {"first_starts": FIRST_STARTS, "second_starts": SECOND_STARTS} | change
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        copies_table(Args(*runs, **arguments))


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"init_from": None}, "did not start from --init-from: its seeds are no copies"),
        ({"lr": 1e-3}, "were trained with other settings: --lr: saved 0.0003, now 0.001"),
    ],
)
def test_runs_that_hold_no_copies_of_the_same_starts_are_refused(tmp_path, config, message):
    first = write_run(tmp_path / "first", FIRST)
    second = write_run(tmp_path / "second", SECOND, **config)
    with pytest.raises(ConfigError, match=message):
        copies_table(Args(first, second, FIRST_STARTS, SECOND_STARTS))


def test_a_start_evaluated_in_one_run_only_gets_no_row(runs):
    """The second run's checkpoint 200 evaluated for start b's seeds alone (`fork_run.py evaluate --seeds`): start a
    has no row there, and the pooled row holds the starts both runs evaluated. Mutation checked by hand: a row for a
    start with copies in the first run alone, or pooling the first run's every copy, fails this test."""
    evaluations = runs[1] / "evaluations.jsonl"
    records = [json.loads(line) for line in evaluations.read_text().splitlines()]
    kept = [r for r in records if r["update"] == 100 or SECOND_STARTS[r["seed"]] == "b"]
    evaluations.write_text("".join(json.dumps(record) + "\n" for record in kept))
    rows = rows_of(copies_table(Args(*runs, FIRST_STARTS, SECOND_STARTS)))
    assert (200, "a") not in rows and (100, "a") in rows
    assert rows[200, "b"][0] == rows[200, "all"][0] == "3 / 3"
    assert rows[200, "all"][1] == f"{np.mean(copies(FIRST[200], FIRST_STARTS, 'b')):.3f}"
