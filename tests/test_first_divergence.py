"""benchmarks/learning/first_divergence.py on synthetic sides: sides drawn alike are never flagged; sides that differ
from a known window on are flagged from that window, by the test that sees the kind of difference; Holm's adjustment
against hand-computed values; window values read as the tool says (chunk means, or the buffer at the window's end);
the table's first windows and means; --span's one test over each seed's mean within the span.
Mutation checked by hand: with Holm replaced by the raw p-values, the alike sides are flagged."""

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.learning import first_divergence as tool
from common.errors import ConfigError

SEEDS, WINDOWS = 12, 20
ENDS = [10 * (index + 1) for index in range(WINDOWS)]


def sides(seed: int, shift_from: int | None = None, shift=0.0, scale_from: int | None = None, scale=1.0, seeds=SEEDS):
    rng = np.random.default_rng(seed)
    cleanued, minimax = rng.normal(size=(seeds, WINDOWS)), rng.normal(size=(seeds, WINDOWS))
    if shift_from is not None:
        minimax[:, shift_from:] += shift
    if scale_from is not None:
        minimax[:, scale_from:] *= scale
    return cleanued, minimax


def test_holm_adjustment_against_hand_computed_values():
    adjusted = tool.holm([0.01, 0.04, 0.03, 0.005, math.nan])
    np.testing.assert_allclose(adjusted[:4], [0.03, 0.06, 0.06, 0.02])
    assert math.isnan(adjusted[4])
    assert tool.holm([0.6, 0.7]) == [1.0, 1.0], "an adjusted p is at most 1"


def test_a_window_that_is_no_multiple_of_the_log_interval_is_refused(tmp_path):
    with pytest.raises(tool.ConfigError, match=r"--window \(15\) must be a multiple of cleanued's log interval"):
        tool.Args(out=tmp_path, window=15)


@pytest.mark.parametrize("seed", range(5))
def test_sides_drawn_alike_are_not_flagged(seed):
    result = tool.divergence(*sides(seed), ENDS, alpha=0.05)
    assert result["location"]["first"] is None and result["spread"]["first"] is None


def test_a_shift_is_flagged_from_the_window_it_starts():
    result = tool.divergence(*sides(0, shift_from=8, shift=4.0), ENDS, alpha=0.05)
    assert result["location"]["first"] == ENDS[8]


def test_a_wider_spread_is_flagged_by_the_spread_test_from_its_window():
    # Brown-Forsythe needs more seeds than a shift does: 36 a side, as three pooled seed sets give.
    result = tool.divergence(*sides(1, scale_from=12, scale=10.0, seeds=36), ENDS, alpha=0.05)
    assert result["spread"]["first"] == ENDS[12]


def test_windows_with_fewer_than_three_seeds_a_side_are_not_tested():
    cleanued, minimax = sides(2, shift_from=0, shift=10.0)
    cleanued[2:, :5] = np.nan
    result = tool.divergence(cleanued, minimax, ENDS, alpha=0.05)
    assert all(math.isnan(p) for p in result["location"]["p"][:5]) and result["location"]["first"] == ENDS[5]


def test_window_values_are_chunk_means_or_the_buffer_at_the_window_end():
    rows = [
        {
            "seed": seed,
            "update": update,
            "ppo/entropy": float(update + seed),
            "buffer/weighted_staleness": 100.0 * update,
        }
        for seed in range(3)
        for update in (10, 20, 30, 40)
    ]
    events = {
        index: [
            {"rollout": tick, "kind": "new", "entropy": float(tick), "plr/weighted_age": 1000.0 * tick}
            for tick in range(1, 41)
        ]
        for index in range(3)
    }
    facts = {"cleanued": rows, "minimax": events}
    windows = [(0, 20), (20, 40)]
    entropy = next(statistic for statistic in tool.STATISTICS if statistic.name == "policy entropy")
    cleanued, minimax = tool.window_values(facts, entropy, 3, windows)
    np.testing.assert_allclose(cleanued[1], [16.0, 36.0])  # seed 1: rows 10 and 20, then 30 and 40
    np.testing.assert_allclose(minimax[0], [10.5, 30.5])  # ticks 1-20, 21-40
    staleness = next(statistic for statistic in tool.STATISTICS if statistic.cleanued == "buffer/weighted_staleness")
    cleanued, minimax = tool.window_values(facts, staleness, 3, windows)
    np.testing.assert_allclose(cleanued[0], [2000.0, 4000.0])
    np.testing.assert_allclose(minimax[0], [20000.0, 40000.0])
    kl = next(statistic for statistic in tool.STATISTICS if statistic.cleanued == "ppo/approx_kl")
    assert tool.window_values(facts, kl, 3, windows)[1] is None


def entropy_logs(monkeypatch, cleanued_values, minimax_values, rollouts: int, window: int, missing=None) -> None:
    """Both sides' training logs as the tool reads them, with each seed's policy entropy constant over each window
    ([seeds, windows] values): cleanued's rows every 10 updates (but the (seed, update) `missing`), minimax's events
    every tick."""
    rows = [
        {"seed": seed, "update": update, "ppo/entropy": cleanued_values[seed, (update - 1) // window]}
        for seed in range(SEEDS)
        for update in range(10, rollouts + 1, 10)
        if (seed, update) != missing
    ]
    events = {
        seed: [
            {"rollout": tick, "kind": "new", "entropy": minimax_values[seed, (tick - 1) // window]}
            for tick in range(1, rollouts + 1)
        ]
        for seed in range(SEEDS)
    }
    monkeypatch.setattr(tool, "harness_args", lambda out, method: SimpleNamespace(seeds=SEEDS, rollouts=rollouts))
    monkeypatch.setattr(tool, "gather_run_facts", lambda harness: ({}, {}, {}, {"plr": rows}, {"plr": events}))


def test_the_table_shows_each_statistic_s_first_flagged_window_and_the_sides_means_there(monkeypatch, tmp_path):
    # 50 rollouts in windows of 20: the last window ends at the last rollout, 50. Entropy's location differs from
    # the window ending at 40, its spread from the one ending at 50; the means shown are the earlier window's.
    # minimax's value loss has a column in STATISTICS but is in none of its events.
    rollouts, window = 50, 20
    rng = np.random.default_rng(3)
    cleanued_values, minimax_values = rng.normal(size=(SEEDS, 3)), rng.normal(size=(SEEDS, 3))
    minimax_values[:, 1:] += 5.0
    minimax_values[:, 2] = 5.0 + 20.0 * (minimax_values[:, 2] - 5.0)
    entropy_logs(monkeypatch, cleanued_values, minimax_values, rollouts, window)
    table, records = tool.first_divergence(tool.Args(out=tmp_path, window=window))

    expected = tool.divergence(cleanued_values, minimax_values, [20, 40, 50], alpha=0.05)
    assert expected["location"]["first"] == 40 and expected["spread"]["first"] == 50
    lines = table.splitlines()
    assert lines[0].startswith(f"plr, {SEEDS} seeds a side, windows of 20 rollouts: ")
    location_p, spread_p = expected["location"]["adjusted"][1], expected["spread"]["adjusted"][2]
    means = f"{np.mean(cleanued_values[:, 1]):.4g} | {np.mean(minimax_values[:, 1]):.4g}"
    assert f"| policy entropy | 40 (p {location_p:.3f}) | 50 (p {spread_p:.3f}) | {means} |" in lines
    assert "| value loss | minimax does not log it | | | |" in lines
    entropy_records = [record for record in records if record["statistic"] == "policy entropy"]
    assert [record["window_end"] for record in entropy_records] == [20, 40, 50] * 2
    np.testing.assert_allclose([record["minimax_mean"] for record in entropy_records[:3]], minimax_values.mean(0))


@pytest.mark.parametrize(
    ("span", "message"),
    [
        ((100, 100), r"--span 100 100: give FROM TO with 0 <= FROM < TO"),
        ((150, 400), r"--span 150 400: both ends must be multiples of --window \(100\)"),
    ],
)
def test_a_span_that_is_empty_or_cuts_a_window_is_refused(tmp_path, span, message):
    with pytest.raises(ConfigError, match=message):
        tool.Args(out=tmp_path, window=100, span=span)


def test_a_span_tests_each_seed_s_mean_over_the_windows_inside_it_once(monkeypatch, tmp_path):
    """60 rollouts in windows of 10, --span 20 40: each seed's entropy is the mean of its windows ending at 30 and 40,
    or the one of them it has a row in (seed 0 lacks the window ending at 30). The windows outside differ far more,
    the other way: read with them, the table's means and p would be others. Fails with the span's windows not
    selected, with the seeds' values not averaged over them, or with a missing window counted as a value."""
    rollouts, window = 60, 10
    rng = np.random.default_rng(4)
    cleanued_values, minimax_values = rng.normal(size=(SEEDS, 6)), rng.normal(size=(SEEDS, 6))
    minimax_values[:, 2:4] += 1.0
    minimax_values[:, [0, 1, 4, 5]] -= 30.0
    entropy_logs(monkeypatch, cleanued_values, minimax_values, rollouts, window, missing=(0, 30))
    table, records = tool.first_divergence(tool.Args(out=tmp_path, window=window, span=(20, 40)))

    cleanued_span, minimax_span = cleanued_values[:, 2:4].mean(1), minimax_values[:, 2:4].mean(1)
    cleanued_span[0] = cleanued_values[0, 3]
    location_p = tool.mann_whitney_p(list(cleanued_span), list(minimax_span))
    spread_p = tool.spread_p(list(cleanued_span), list(minimax_span))
    assert table.splitlines()[0].startswith(f"plr, {SEEDS} seeds a side, rollouts 20-40: each seed's mean")
    means = f"{cleanued_span.mean():.4g} | {minimax_span.mean():.4g}"
    assert f"| policy entropy | {location_p:.2g} | {spread_p:.2g} | {means} |" in table.splitlines()
    entropy = [record for record in records if record["statistic"] == "policy entropy"]
    assert [(r["test"], r["window_start"], r["window_end"]) for r in entropy] == [
        ("location", 20, 40),
        ("spread", 20, 40),
    ]
    assert entropy[0]["p"] == entropy[0]["adjusted_p"] == location_p < 0.05
    with pytest.raises(ConfigError, match="--span 20 80: the comparison ran 60 rollouts"):
        tool.first_divergence(tool.Args(out=tmp_path, window=window, span=(20, 80)))


def test_cleanued_runs_replace_the_comparisons_cleanued_side_with_their_seeds_numbered_on(monkeypatch, tmp_path):
    """--cleanued-runs: two runs' seeds (3 and 2) stand for cleanued's side against the comparison's minimax seeds,
    each run's seeds numbered after the previous run's; runs trained otherwise or logged at another interval are
    refused in one line. Fails with the runs' seeds not numbered on (seed 0 twice) or the comparison's own cleanued
    rows kept."""
    rollouts = 20
    out = tmp_path / "comparison"
    out.mkdir()
    (out / "experiment.json").write_text(json.dumps({"seeds": 3, "rollouts": rollouts}))
    table = [{"kind": "shared", "cleanued_flag": "maze_size", "cleanued_used": 13}]
    (out / "settings.json").write_text(json.dumps({"plr": {"table": table}}))
    entropies = {100: [1.0, 2.0, 3.0], 200: [4.0, 5.0]}
    runs = []
    for seed, values in entropies.items():
        run = tmp_path / f"run{seed}"
        run.mkdir()
        config = {
            "maze_size": 13,
            "total_updates": rollouts,
            "seed": seed,
            "num_seeds": len(values),
            "log_interval": 10,
        }
        (run / "config.json").write_text(json.dumps({"script": "algos/plr.py", "config": config}))
        lines = ["seed,update,ppo/entropy"]
        lines += [f"{index},{update},{value}" for index, value in enumerate(values) for update in (10, 20)]
        (run / "logs.csv").write_text("\n".join(lines) + "\n")
        runs.append(run)
    own_rows = [{"seed": 0.0, "update": update, "ppo/entropy": 100.0} for update in (10, 20)]
    events = {
        index: [{"rollout": tick, "kind": "new", "entropy": 10.0 + index} for tick in range(1, rollouts + 1)]
        for index in range(3)
    }
    monkeypatch.setattr(tool, "harness_args", lambda out, method: SimpleNamespace(seeds=3, rollouts=rollouts))
    monkeypatch.setattr(tool, "gather_run_facts", lambda harness: ({}, {}, {}, {"plr": own_rows}, {"plr": events}))
    args = tool.Args(out=out, window=20, cleanued_runs=tuple(runs))
    table, records = tool.first_divergence(args)
    assert "plr, 5 cleanued seeds from 2 other run(s) against 3 of minimax's, windows of 20 rollouts" in table
    entropy = next(r for r in records if r["statistic"] == "policy entropy" and r["test"] == "location")
    assert (entropy["cleanued_mean"], entropy["minimax_mean"]) == (3.0, 11.0)  # the five seeds' mean, not 100
    assert entropy["p"] == tool.mann_whitney_p([1.0, 2.0, 3.0, 4.0, 5.0], [10.0, 11.0, 12.0])
    config_path = runs[1] / "config.json"
    saved = json.loads(config_path.read_text())
    for change, message in (
        ({"log_interval": 20}, "logged every 20 updates, the comparison every 10"),
        ({"maze_size": 11}, "trained with other settings than the folders' cleanued: maze_size 11"),
    ):
        config_path.write_text(json.dumps({**saved, "config": {**saved["config"], **change}}))
        with pytest.raises(ConfigError, match=message):
            tool.first_divergence(args)
