"""benchmarks/learning/bar_by_chance.py on synthetic comparison folders: `swap` keeps each pair's two seeds together
and its min-p share agrees with every swap pattern enumerated here; `deal` deals unpaired sides' seeds out, its min-p
shares agreeing with every deal enumerated here, cleanued's side from --cleanued-runs; `split` draws disjoint groups,
its shares (bar met, each test failing) agreeing with every partition enumerated here; bad input is refused in one
line."""

import itertools
import json

import numpy as np
import pytest

from benchmarks.learning.bar_by_chance import (
    Deal,
    Split,
    Swap,
    deal_report,
    deal_seeds,
    split_groups,
    split_report,
    swap_pairs,
    swap_report,
)
from benchmarks.learning.learning_vs_minimax_report import mann_whitney_p
from benchmarks.learning.pool_seed_sets import difference_interval, spread_p
from common.errors import ConfigError

GRIDS = (300, 400)
CHEAP = {"bootstrap_resamples": 50, "draws": 400}


def write_folder(folder, first_seed: int, rates: dict[str, list[list[float]]]):
    """rates[side][seed] holds a seed's training-distribution solve rate at each of GRIDS (a held-out maze too)."""
    folder.mkdir()
    experiment = {"seeds": len(rates["minimax"]), "rollouts": GRIDS[-1], "maze_size": 7, "first_seed": first_seed}
    (folder / "experiment.json").write_text(json.dumps(experiment))
    records = []
    for side, seeds in rates.items():
        for seed, curve in enumerate(seeds):
            for grid, rate in zip(GRIDS, curve, strict=True):
                base = {"side": side, "method": "plr", "seed": seed, "grid": grid, "eval_seed": 0, "solve_rate": rate}
                records.append(base | {"kind": "train_levels", "maze": None, "episodes": 512})
                records.append(base | {"kind": "heldout", "maze": "SixteenRooms", "episodes": 200, "solve_rate": 0.0})
    (folder / "evaluations.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    return folder


def table_value(report: str, prefix: str) -> str:
    return next(line for line in report.splitlines() if line.startswith(prefix))


def draws_as_small(report: str, test: str) -> tuple[int, float]:
    """The count of draws whose smallest p is at most the measured one, and the min-p, from the min-p table's row."""
    cells = table_value(report, f"| {test} |").split("|")
    return int(cells[3].split(" of ")[0]), float(cells[4])


def count_of(report: str, prefix: str) -> int:
    """The draws counted on the report's line that starts with prefix ("- the bar is met in 12 of 400 draws ...")."""
    return int(table_value(report, prefix).removeprefix(prefix).split(" of ")[0])


def test_swap_pairs_moves_whole_curves_of_one_pair():
    """Each row of the result holds the same pair's two curves, one per side, and both orders occur."""
    rng = np.random.default_rng(1)
    first, second = np.arange(20.0).reshape(10, 2), -np.arange(20.0).reshape(10, 2) - 1
    orders = set()
    for _ in range(20):
        swapped_first, swapped_second = swap_pairs(rng, first, second)
        for row in range(10):
            pair = {tuple(swapped_first[row]), tuple(swapped_second[row])}
            assert pair == {tuple(first[row]), tuple(second[row])}
            orders.add(tuple(swapped_first[row]) == tuple(first[row]))
    assert orders == {True, False}


def test_deal_seeds_keeps_each_sides_size_and_deals_every_curve_once():
    """Mutation checked by hand: drawing the rows with replacement, dealing each side's rows among themselves, or
    giving the sides each other's sizes fails this test."""
    rng = np.random.default_rng(3)
    first, second = np.arange(10.0).reshape(5, 2), -np.arange(6.0).reshape(3, 2) - 1
    pooled = sorted(map(tuple, np.concatenate([first, second])))
    moved = set()
    for _ in range(30):
        dealt_first, dealt_second = deal_seeds(rng, first, second)
        assert dealt_first.shape == first.shape and dealt_second.shape == second.shape
        assert sorted(map(tuple, np.concatenate([dealt_first, dealt_second]))) == pooled
        moved |= {row for row in map(tuple, dealt_second) if row in set(map(tuple, first))}
    assert moved == set(map(tuple, first))


def test_split_groups_are_disjoint_and_reach_every_seed():
    """Mutation checked by hand: drawing the indices with replacement fails this test."""
    rng = np.random.default_rng(2)
    reached = set()
    for _ in range(50):
        first, second = split_groups(rng, 9, 4)
        assert len(first) == len(second) == 4 and len(set(first) | set(second)) == 8
        reached |= set(first) | set(second)
    assert reached == set(range(9))


def test_swap_keeps_pairs_together(tmp_path):
    """Each pair's two seeds learn alike while the pairs differ widely: every swap leaves both sides as measured,
    so every draw's smallest p equals the measured one; dealing the pooled seeds out would mix the pairs and lower it.
    Mutation checked by hand: dealing the 12 pooled seeds to the sides at random fails this test."""
    curves = [[0.1 * seed, 0.1 * seed + 0.05] for seed in range(1, 7)]
    folders = [
        write_folder(tmp_path / "set0", 0, {"cleanued": curves[:3], "minimax": curves[:3]}),
        write_folder(tmp_path / "set12", 12, {"cleanued": curves[3:], "minimax": curves[3:]}),
    ]
    report = swap_report(Swap(folders=tuple(folders), draws=50, bootstrap_resamples=50))
    assert "6/6 seeds" in report and "is met" in report
    assert table_value(report, "| 300 |") == "| 300 | 1.00 | 1.00 | yes |"
    assert draws_as_small(report, "Mann-Whitney") == (50, 1.0) and draws_as_small(report, "spread") == (50, 1.0)
    assert "the bar is met in 50 of 50 draws" in report


def test_swap_min_p_agrees_with_every_swap_pattern(tmp_path):
    """cleanued's seeds sit mostly below minimax's: the share of random draws whose smallest Mann-Whitney p is at most
    the measured one agrees with the share over all 2^6 swap patterns, each computed here from mann_whitney_p.
    Mutation checked by hand: counting only draws with a strictly smaller p, the largest p over the checkpoints
    instead of the smallest, or a min-p without the measured comparison's own count, fails this test."""
    cleanued = [[0.10, 0.31], [0.22, 0.40], [0.35, 0.43], [0.18, 0.52], [0.41, 0.47], [0.27, 0.36]]
    minimax = [[0.30, 0.55], [0.25, 0.61], [0.44, 0.58], [0.50, 0.49], [0.38, 0.66], [0.47, 0.70]]
    folders = [
        write_folder(tmp_path / "set0", 0, {"cleanued": cleanued[:3], "minimax": minimax[:3]}),
        write_folder(tmp_path / "set12", 12, {"cleanued": cleanued[3:], "minimax": minimax[3:]}),
    ]
    report = swap_report(Swap(folders=tuple(folders), **CHEAP))
    first, second = np.array(cleanued), np.array(minimax)

    def smallest_p(a, b):
        return min(mann_whitney_p(a[:, j], b[:, j]) for j in range(len(GRIDS)))

    measured = smallest_p(first, second)
    as_small = 0
    for pattern in itertools.product((False, True), repeat=len(first)):
        swapped = np.array(pattern)[:, None]
        as_small += smallest_p(np.where(swapped, second, first), np.where(swapped, first, second)) <= measured
    exact = as_small / 2 ** len(first)
    assert 0.02 < exact < 0.3  # a share that a wrong count would miss
    count, min_p = draws_as_small(report, "Mann-Whitney")
    assert abs(count / CHEAP["draws"] - exact) < 4 * np.sqrt(exact * (1 - exact) / CHEAP["draws"])
    assert min_p == round((count + 1) / (CHEAP["draws"] + 1), 3)
    assert f"| Mann-Whitney | {measured:.3f} |" in report


def smallest_p_share_over_every_deal(first: np.ndarray, second: np.ndarray, test) -> tuple[float, float]:
    """The measured smallest p over the checkpoints of `test`, and the share of all deals of the pooled seeds (each
    side keeping its size) whose smallest p is at most it."""

    def smallest_p(a, b):
        return min(test(a[:, j], b[:, j]) for j in range(a.shape[1]))

    pooled, measured, as_small = np.concatenate([first, second]), smallest_p(first, second), []
    for chosen in itertools.combinations(range(len(pooled)), len(first)):
        rest = [seed for seed in range(len(pooled)) if seed not in chosen]
        as_small.append(smallest_p(pooled[list(chosen)], pooled[rest]) <= measured)
    return measured, float(np.mean(as_small))


def test_deal_min_p_agrees_with_every_deal_of_unpaired_sides(tmp_path):
    """Four cleanued seeds against three of minimax's, which swap refuses as unpaired: the shares of random deals whose
    smallest Mann-Whitney and spread p are at most the measured ones agree with the shares over all 35 deals.
    Mutation checked by hand: dealing each side's seeds among themselves (no seed changes side) fails this test."""
    cleanued = [[0.10, 0.31], [0.22, 0.40], [0.35, 0.43], [0.05, 0.12]]
    minimax = [[0.30, 0.55], [0.25, 0.61], [0.44, 0.58]]
    folder = write_folder(tmp_path / "set0", 0, {"cleanued": cleanued, "minimax": minimax})
    with pytest.raises(ConfigError, match="unpaired"):
        swap_report(Swap(folders=(folder,), **CHEAP))
    report = deal_report(Deal(folders=(folder,), **CHEAP))
    assert "4/3 seeds" in report and "dealing all the seeds out to the sides" in report
    first, second = np.array(cleanued), np.array(minimax)
    for name, test in (("Mann-Whitney", mann_whitney_p), ("spread", spread_p)):
        measured, exact = smallest_p_share_over_every_deal(first, second, test)
        assert 0.02 < exact < 0.5, name  # a share that a wrong deal would miss
        count, min_p = draws_as_small(report, name)
        assert abs(count / CHEAP["draws"] - exact) < 4 * np.sqrt(exact * (1 - exact) / CHEAP["draws"]), name
        assert min_p == round((count + 1) / (CHEAP["draws"] + 1), 3)
        assert f"| {name} | {measured:.3f} |" in report


def test_deal_takes_cleanueds_side_from_the_runs(tmp_path):
    """With --cleanued-runs the runs' seeds (here five, from two runs) stand for cleanued's side and the folder's
    cleanued records are left out: the measured table is the runs' against the folder's minimax seeds.
    Mutation checked by hand: reading the folders without the runs fails this test."""
    runs_rates = {100: [[0.1, 0.2], [0.2, 0.3], [0.15, 0.25]], 200: [[0.12, 0.22], [0.3, 0.31]]}
    minimax = [[0.5, 0.6], [0.45, 0.7], [0.55, 0.65]]
    folder = write_folder(tmp_path / "set0", 0, {"cleanued": [[0.9, 0.9]] * 3, "minimax": minimax})
    table = [{"kind": "shared", "cleanued_flag": "maze_size", "cleanued_used": 7}]
    (folder / "settings.json").write_text(json.dumps({"plr": {"cleanued": {"maze_size": 7}, "table": table}}))
    runs = []
    for seed, rates in runs_rates.items():
        run = tmp_path / f"run{seed}"
        run.mkdir()
        config = {"maze_size": 7, "total_updates": GRIDS[-1], "seed": seed}
        (run / "config.json").write_text(json.dumps({"script": "algos/plr.py", "config": config}))
        records = [
            {"update": grid, "seed": index, "solve_rate": rate}
            for index, curve in enumerate(rates)
            for grid, rate in zip(GRIDS, curve, strict=True)
        ]
        (run / "evaluations.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
        runs.append(run)
    report = deal_report(Deal(folders=(folder,), cleanued_runs=tuple(runs), **CHEAP))
    first = np.array(runs_rates[100] + runs_rates[200])
    assert "5/3 seeds" in report
    expected = mann_whitney_p(first[:, 0], np.array(minimax)[:, 0])
    assert table_value(report, "| 300 |").startswith(f"| 300 | {expected:.2f} |")


def test_split_shares_agree_with_every_partition(tmp_path):
    """Eight minimax seeds split four against four: each draw is one of the 70 partitions, so the shares of draws that
    meet the bar and in which each test fails it agree with the shares of partitions, enumerated here.
    Mutation checked by hand: failing a test only where it fails at every checkpoint, or leaving the interval out of
    the bar, fails this test."""
    minimax = [[0.05 * seed, 0.3 + 0.07 * (3 * seed % 8)] for seed in range(8)]  # another order at 400
    folder = write_folder(tmp_path / "set0", 0, {"cleanued": minimax, "minimax": minimax})
    report = split_report(Split(folders=(folder,), side="minimax", seeds_a_side=4, **CHEAP))
    assert "two disjoint groups of 4 from 8 minimax seeds" in report
    seeds = np.array(minimax)
    partitions = {"Mann-Whitney": [], "spread": [], "interval": [], "met": []}
    for group in itertools.combinations(range(8), 4):
        first = seeds[list(group)]
        second = seeds[[seed for seed in range(8) if seed not in group]]
        columns = [(first[:, j], second[:, j]) for j in range(len(GRIDS))]
        partitions["Mann-Whitney"].append(any(mann_whitney_p(*column) < 0.2 for column in columns))
        partitions["spread"].append(any(spread_p(*column) < 0.2 for column in columns))
        intervals = [difference_interval(*column, CHEAP["bootstrap_resamples"])[1] for column in columns]
        partitions["interval"].append(any(not low <= 0 <= high for low, high in intervals))
        partitions["met"].append(
            not (partitions["Mann-Whitney"][-1] or partitions["spread"][-1] or partitions["interval"][-1])
        )
    prefixes = {test: f"- {test} fails it in " for test in ("Mann-Whitney", "spread", "interval")}
    prefixes["met"] = "- the bar is met in "
    for outcome, prefix in prefixes.items():
        exact = np.mean(partitions[outcome])
        assert 0.1 < exact < 0.9, outcome  # a share that a wrong count would miss
        drawn = count_of(report, prefix) / CHEAP["draws"]
        assert abs(drawn - exact) < 4 * np.sqrt(exact * (1 - exact) / CHEAP["draws"]), outcome


def test_bad_input_is_refused_in_one_line(tmp_path):
    curves = [[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]]
    folder = write_folder(tmp_path / "set0", 0, {"cleanued": curves, "minimax": curves[:2]})
    with pytest.raises(
        ConfigError, match=r"set0: seed 2 has no minimax evaluation at some checkpoint from 300 \(1 seed"
    ):
        swap_report(Swap(folders=(folder,), draws=1))
    with pytest.raises(ConfigError, match="no training-distribution evaluation of cleanued/minimax at 500 rollouts"):
        swap_report(Swap(folders=(folder,), draws=1, first_rollouts=500))
    with pytest.raises(ConfigError, match="no evaluations of accel in the folders"):
        swap_report(Swap(folders=(folder,), draws=1, method="accel"))
    with pytest.raises(ConfigError, match=r"--seeds-a-side 3: 3 cleanued seeds .* two groups need 6"):
        split_report(Split(folders=(folder,), side="cleanued", seeds_a_side=3, draws=1))
    with pytest.raises(ConfigError, match="--seeds-a-side 2: the spread test needs at least 3"):
        Split(folders=(folder,), seeds_a_side=2)
    with pytest.raises(ConfigError, match="--cleanued-runs replaces cleanued's seeds: it needs --side cleanued"):
        Split(folders=(folder,), side="minimax", cleanued_runs=(tmp_path,))
    with pytest.raises(ConfigError, match=r"3/2 seeds \(cleanued/minimax\) .* the spread test needs at least 3 a side"):
        deal_report(Deal(folders=(folder,), draws=1))
    with pytest.raises(ConfigError, match="--threshold 1.5: a p-value threshold lies between 0 and 1"):
        Swap(folders=(folder,), threshold=1.5)
    two = write_folder(tmp_path / "two", 0, {"cleanued": curves[:2], "minimax": curves[:2]})
    with pytest.raises(ConfigError, match="2 seeds a side: the spread test needs at least 3"):
        swap_report(Swap(folders=(two,), draws=1))
