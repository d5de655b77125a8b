"""benchmarks/learning/paired_runs.py on synthetic run folders: the paired differences follow --second-seeds, the
Wilcoxon p is the exact signed-rank p enumerated here, the counts and lowest values are the pairs', and runs that
cannot be paired are refused in one line; with --side, one side of two learning_vs_minimax.py output folders is paired
seed by seed, and folders of other experiments are refused; with --across-sides, cleanued's seed i is paired with
minimax's seed i of one folder whose sides started alike. Every row gives the pairs' Spearman correlation, and the
folder modes pair the held-out mazes' per-seed means."""

import itertools
import json

import numpy as np
import pytest

from benchmarks.learning.paired_runs import Args, paired_table
from common.errors import ConfigError

SIDES = ("cleanued", "minimax")

CONFIG = {"seed": 0, "init_from": None, "lr": 3e-4, "runs_dir": "/tmp/a", "total_updates": 600}
FIRST = {100: [0.30, 0.50, 0.20, 0.62, 0.40, 0.70], 200: [0.40, 0.70, 0.10, 0.84, 0.30, 0.20]}
SECOND = {100: [0.30, 0.50, 0.20, 0.62, 0.40, 0.70, 0.9], 200: [0.45, 0.60, 0.50, 0.81, 0.42, 0.27, 0.9]}


def write_run(folder, rates, script="algos/plr.py", episodes=512, **config):
    folder.mkdir()
    saved = {"script": script, "config": CONFIG | {"num_seeds": len(rates[100])} | config}
    (folder / "config.json").write_text(json.dumps(saved))
    records = [
        {"update": update, "seed": seed, "solve_rate": rate, "episodes": episodes, "eval_seed": 0}
        for update, values in rates.items()
        for seed, rate in enumerate(values)
    ]
    (folder / "evaluations.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    return folder


def exact_signed_rank_p(differences) -> float:
    """Two-sided exact p without ties or zeros: under the null each rank's sign is a fair coin; p is the share of
    the 2^n sign patterns whose positive rank sum lies at least as far from its mean as the observed one."""
    ranks = np.argsort(np.argsort(np.abs(differences))) + 1
    observed = ranks[np.asarray(differences) > 0].sum()
    mean = ranks.sum() / 2
    sums = [
        sum(rank for rank, sign in zip(ranks, signs, strict=True) if sign)
        for signs in itertools.product((0, 1), repeat=len(ranks))
    ]
    return sum(abs(total - mean) >= abs(observed - mean) - 1e-9 for total in sums) / len(sums)


def table_rows(text: str) -> dict[int, list[str]]:
    rows = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    return {int(cells[0]): [cell.strip() for cell in cells[1:]] for cells in rows}


def labelled_rows(text: str) -> dict[str, list[str]]:
    """The rows whose first cell is not a checkpoint: --mean-over's and the held-out mazes'."""
    rows = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("| ") and line[2].isalpha()]
    return {
        cells[0].strip(): [cell.strip() for cell in cells[1:]]
        for cells in rows
        if cells[0].strip() not in ("update", "maze")
    }


@pytest.fixture
def runs(tmp_path):
    first = write_run(tmp_path / "first", FIRST, init_from="/tmp/starts.npz", seed=8000, runs_dir="/tmp/b")
    second = write_run(tmp_path / "second", SECOND)
    return first, second


def test_differences_wilcoxon_counts_and_lowest(runs):
    """Mutation checked by hand: second - first in paired_row, or the asymptotic Wilcoxon, fails this test."""
    rows = table_rows(paired_table(Args(*runs, behind=0.2, bootstrap_resamples=500)))
    assert rows[100] == ["6", "0.453", "0.453", "0.000 [0.000, 0.000]", "1.00", "0", "0", "0.20 / 0.20", "1.00"]
    differences = np.subtract(FIRST[200], SECOND[200][:6])  # -0.05, +0.10, -0.40, +0.03, -0.12, -0.07
    pairs, first, second, difference, wilcoxon, first_behind, second_behind, lowest, spearman = rows[200]
    assert (pairs, first, second) == ("6", "0.423", "0.508")
    assert difference.startswith(f"{differences.mean():.3f} [")
    low, high = (float(bound) for bound in difference.split("[")[1].rstrip("]").split(","))
    assert low <= differences.mean() <= high and low >= differences.min() and high <= differences.max()
    assert wilcoxon == f"{exact_signed_rank_p(differences):.2f}" == "0.31"  # the normal approximation: 0.25
    assert (first_behind, second_behind, lowest) == ("1", "0", "0.10 / 0.27")
    assert spearman == f"{rank_correlation(FIRST[200], SECOND[200][:6]):.2f}" == "0.66"


def rank_correlation(a, b) -> float:
    """Spearman's rho without ties: 1 - 6 sum(d^2) / (n (n^2 - 1)) over the rank differences d."""
    d = np.argsort(np.argsort(a)) - np.argsort(np.argsort(b))
    return 1 - 6 * float((d**2).sum()) / (len(a) * (len(a) ** 2 - 1))


def test_second_seeds_pick_the_pairs(tmp_path):
    """The second run holds the first's seeds in another order: paired through --second-seeds every difference is 0.
    Mutation checked by hand: pairing seed i with seed i regardless fails this test."""
    order = (3, 0, 2, 1, 5, 4)
    second = {update: [values[order.index(j)] for j in range(6)] for update, values in FIRST.items()}
    first = write_run(tmp_path / "first", FIRST, init_from="/tmp/starts.npz")
    shuffled = write_run(tmp_path / "second", second)
    rows = table_rows(paired_table(Args(first, shuffled, second_seeds=order, bootstrap_resamples=200)))
    assert all(cells[3] == "0.000 [0.000, 0.000]" and cells[4] == "1.00" for cells in rows.values())
    rows = table_rows(paired_table(Args(first, shuffled, bootstrap_resamples=200)))
    assert rows[200][3] != "0.000 [0.000, 0.000]"


@pytest.mark.parametrize(
    ("first_changes", "message"),
    [
        ({"lr": 1e-3}, "other settings: --lr: saved 0.001, now 0.0003"),
        ({"script": "algos/accel.py"}, "is a run of algos/accel.py"),
        ({"episodes": 256}, "evaluated with (episodes, seed) (256, 0)"),
        ({"init_from": None}, "neither"),
    ],
)
def test_runs_that_cannot_be_paired_are_refused(tmp_path, first_changes, message):
    first = write_run(tmp_path / "first", FIRST, **({"init_from": "/tmp/starts.npz"} | first_changes))
    second = write_run(tmp_path / "second", SECOND)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        paired_table(Args(first, second))


@pytest.mark.parametrize(
    ("second_seeds", "message"),
    [((0, 1, 2), "3 seeds for"), ((0, 1, 2, 3, 4, 9), r"--second-seeds \[9\]"), ((0, 1, 1, 2, 3, 4), "a seed twice")],
)
def test_bad_second_seeds_are_refused(runs, second_seeds, message):
    with pytest.raises(ConfigError, match=message):
        paired_table(Args(*runs, second_seeds=second_seeds))


def test_runs_without_a_shared_update_are_refused(tmp_path):
    first = write_run(tmp_path / "first", {100: FIRST[100]}, init_from="/tmp/starts.npz")
    second = write_run(tmp_path / "second", {100: SECOND[100]})
    (second / "evaluations.jsonl").write_text(
        (second / "evaluations.jsonl").read_text().replace('"update": 100', '"update": 300')
    )
    with pytest.raises(ConfigError, match="share no evaluated update"):
        paired_table(Args(first, second))


EXPERIMENT = {"seeds": 6, "rollouts": 200, "maze_size": 7, "n_walls": 8}
SETTINGS = {"plr": {"cleanued": {"lr": 3e-4}, "minimax": {"lr": 3e-4, "plr_temp": 0.3}}}


def write_comparison(folder, minimax_rates, cleanued_rates, experiment=EXPERIMENT, settings=SETTINGS):
    """A learning_vs_minimax.py output folder with both sides' training-distribution evaluations."""
    folder.mkdir()
    (folder / "experiment.json").write_text(json.dumps(experiment))
    (folder / "settings.json").write_text(json.dumps(settings))
    records = [
        {"side": side, "method": "plr", "seed": seed, "grid": grid, "kind": kind, "maze": maze}
        | {"episodes": 512, "eval_seed": 0, "solve_rate": rate if kind == "train_levels" else rate / 4}
        for side, rates in (("minimax", minimax_rates), ("cleanued", cleanued_rates))
        for grid, values in rates.items()
        for seed, rate in enumerate(values[:6])
        for kind, maze in (("train_levels", None), ("heldout", "SixteenRooms"))
    ]
    (folder / "evaluations.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    return folder


def test_side_pairs_that_sides_seeds_of_two_comparison_folders(tmp_path, runs):
    """The minimax sides hold the two runs' rates and the cleanued sides others: --side minimax gives the runs' table.
    Mutation checked by hand: reading the cleanued side, or the held-out rows, fails this test."""
    constant = {update: [0.5] * 6 for update in FIRST}
    first = write_comparison(tmp_path / "on_our_jax", FIRST, constant)
    second = write_comparison(tmp_path / "on_jax_0_4_31", SECOND, constant)
    by_side = table_rows(paired_table(Args(first, second, side="minimax", bootstrap_resamples=500)))
    assert by_side == table_rows(paired_table(Args(*runs, bootstrap_resamples=500)))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"experiment": EXPERIMENT | {"first_seed": 12}}, "differ in their experiment: first_seed None and 12"),
        ({"settings": {"plr": SETTINGS["plr"] | {"minimax": {"lr": 1e-3}}}}, "differ in their settings: lr"),
        ({"settings": {"accel": SETTINGS["plr"]}}, "has no plr runs"),
    ],
)
def test_comparison_folders_of_other_experiments_are_refused(tmp_path, changes, message):
    first = write_comparison(tmp_path / "first", FIRST, FIRST)
    second = write_comparison(tmp_path / "second", SECOND, SECOND, **changes)
    with pytest.raises(ConfigError, match=message):
        paired_table(Args(first, second, side="minimax"))


def test_side_refuses_run_folders(runs):
    with pytest.raises(ConfigError, match="needs experiment.json and settings.json"):
        paired_table(Args(*runs, side="minimax"))


def test_across_sides_pairs_cleanued_with_minimax_in_one_folder(tmp_path, runs):
    """cleanued's side holds the first run's rates and minimax's the second's: the table is the runs' table, and the
    held-out row and --mean-over's row pair each seed's means. Mutation checked by hand: minimax taken first, the
    held-out means taken over the first checkpoint only, or --mean-over's row from the last checkpoint, fail it."""
    folder = write_comparison(tmp_path / "same_init", SECOND, FIRST, experiment=EXPERIMENT | {"same_init": True})
    text = paired_table(Args(folder, across_sides=True, mean_over=(100, 200), bootstrap_resamples=500))
    assert table_rows(text) == table_rows(paired_table(Args(*runs, bootstrap_resamples=500)))
    labelled = labelled_rows(text)
    assert sorted(labelled) == ["SixteenRooms", "mean 100/200"]
    per_seed = [np.mean([FIRST[u][i] - SECOND[u][i] for u in FIRST]) for i in range(6)]
    for label, scale in (("mean 100/200", 1.0), ("SixteenRooms", 0.25)):
        differences = np.asarray(per_seed) * scale
        assert labelled[label][0] == "6"
        assert labelled[label][3].startswith(f"{differences.mean():.3f} [")
        assert labelled[label][4] == f"{exact_signed_rank_p(differences):.2f}"


def test_side_pairs_the_held_out_mazes_too(tmp_path):
    constant = {update: [0.5] * 6 for update in FIRST}
    first = write_comparison(tmp_path / "first", FIRST, constant)
    second = write_comparison(tmp_path / "second", SECOND, constant)
    row = labelled_rows(paired_table(Args(first, second, side="minimax", bootstrap_resamples=200)))["SixteenRooms"]
    differences = [np.mean([FIRST[u][i] - SECOND[u][i] for u in FIRST]) / 4 for i in range(6)]
    assert row[3].startswith(f"{np.mean(differences):.3f} [")


@pytest.mark.parametrize(
    ("experiment", "arguments", "message"),
    [
        (EXPERIMENT, {}, "without --same-init or --init-from"),
        (EXPERIMENT | {"same_init": True}, {"side": "minimax"}, "of one folder: no second folder, --side or"),
        (EXPERIMENT | {"same_init": True}, {"second_seeds": (1, 0, 2, 3, 4, 5)}, "of one folder: no second folder"),
        (EXPERIMENT | {"init_from": "/tmp/starts.npz"}, {"mean_over": (100, 300)}, r"--mean-over \[300\]"),
    ],
)
def test_across_sides_refusals(tmp_path, experiment, arguments, message):
    folder = write_comparison(tmp_path / "folder", SECOND, FIRST, experiment=experiment)
    with pytest.raises(ConfigError, match=message):
        paired_table(Args(folder, across_sides=True, **arguments))


def test_across_sides_refuses_a_second_folder_and_sides_evaluated_apart(tmp_path):
    folder = write_comparison(tmp_path / "folder", SECOND, FIRST, experiment=EXPERIMENT | {"same_init": True})
    with pytest.raises(ConfigError, match="of one folder: no second folder"):
        paired_table(Args(folder, folder, across_sides=True))
    records = [json.loads(line) for line in (folder / "evaluations.jsonl").read_text().splitlines()]
    for held_out in (False, True):
        changed = [
            record | {"episodes": 256}
            if record["side"] == "minimax" and (record["kind"] == "heldout") == held_out
            else record
            for record in records
        ]
        (folder / "evaluations.jsonl").write_text("".join(json.dumps(record) + "\n" for record in changed))
        with pytest.raises(
            ConfigError, match=r"its minimax side with \(256, 0\) on " + ("held-out" if held_out else "the")
        ):
            paired_table(Args(folder, across_sides=True))


def append_records(folder, records):
    with open(folder / "evaluations.jsonl", "a") as file:
        file.write("".join(json.dumps(record) + "\n" for record in records))


def test_held_out_pairs_average_the_checkpoints_both_members_have_of_their_own_method(tmp_path):
    """minimax lacks seed 0's SixteenRooms evaluation at 200 and another method's records differ: each pair still
    averages what both members have, of plr alone, so equal rates give 0; a maze every seed fails has no Spearman.
    Mutation checked by hand: averaging each member over its own checkpoints, dropping the method filter, or the
    Spearman's constant case, fails this test."""
    folder = write_comparison(tmp_path / "folder", FIRST, FIRST, experiment=EXPERIMENT | {"same_init": True})
    records = [json.loads(line) for line in (folder / "evaluations.jsonl").read_text().splitlines()]
    kept = [
        record
        for record in records
        if not (record["side"], record["kind"], record["grid"], record["seed"]) == ("minimax", "heldout", 200, 0)
    ]
    (folder / "evaluations.jsonl").write_text("".join(json.dumps(record) + "\n" for record in kept))
    base = {"method": "plr", "kind": "heldout", "maze": "Labyrinth", "episodes": 512, "eval_seed": 0, "solve_rate": 0.0}
    append_records(folder, [base | {"side": side, "seed": seed, "grid": 100} for side in SIDES for seed in range(6)])
    other = {"method": "accel", "kind": "heldout", "maze": "SixteenRooms", "episodes": 512, "eval_seed": 0}
    append_records(folder, [other | {"side": "cleanued", "seed": 1, "grid": 100, "solve_rate": 0.9}])
    rows = labelled_rows(paired_table(Args(folder, across_sides=True, bootstrap_resamples=200)))
    assert rows["SixteenRooms"][3] == "0.000 [0.000, 0.000]" and rows["SixteenRooms"][-1] == "1.00"
    assert rows["Labyrinth"][3] == "0.000 [0.000, 0.000]" and rows["Labyrinth"][-1] == "-"


def test_side_pairs_the_held_out_mazes_through_second_seeds(tmp_path):
    """The second folder's minimax seeds are the first's in another order: through --second-seeds every held-out
    difference is 0, and without it not."""
    order = (3, 0, 2, 1, 5, 4)
    shuffled = {update: [values[order.index(j)] for j in range(6)] for update, values in FIRST.items()}
    constant = {update: [0.5] * 6 for update in FIRST}
    first = write_comparison(tmp_path / "first", FIRST, constant)
    second = write_comparison(tmp_path / "second", shuffled, constant)
    row = labelled_rows(paired_table(Args(first, second, side="minimax", second_seeds=order)))["SixteenRooms"]
    assert row[3] == "0.000 [0.000, 0.000]"
    row = labelled_rows(paired_table(Args(first, second, side="minimax")))["SixteenRooms"]
    assert row[3] != "0.000 [0.000, 0.000]"


def test_one_folder_without_across_sides_is_refused(tmp_path):
    folder = write_comparison(tmp_path / "folder", SECOND, FIRST)
    with pytest.raises(ConfigError, match="give the second folder"):
        paired_table(Args(folder, side="minimax"))


def test_a_runs_held_out_records_are_left_out(runs):
    """fork_run.py evaluate --heldout-mazes adds held-out records to a run's evaluations.jsonl: the run mode pairs the
    training distribution alone, neither refusing the other setting nor mixing its rates in."""
    first, second = runs
    before = paired_table(Args(first, second, bootstrap_resamples=200))
    held_out = {"kind": "heldout", "maze": "SixteenRooms", "episodes": 200, "eval_seed": 0, "solve_rate": 0.99}
    append_records(first, [held_out | {"update": update, "seed": seed} for update in FIRST for seed in range(6)])
    assert paired_table(Args(first, second, bootstrap_resamples=200)) == before


def test_mean_over_pairs_the_seeds_evaluated_at_every_checkpoint_named(tmp_path):
    """cleanued's seed 2 lacks its 200-update evaluation: --mean-over 100 200 pairs the other five."""
    folder = write_comparison(tmp_path / "folder", SECOND, FIRST, experiment=EXPERIMENT | {"init_from": "/tmp/s.npz"})
    records = [json.loads(line) for line in (folder / "evaluations.jsonl").read_text().splitlines()]
    missing = ("cleanued", "train_levels", 200, 2)
    kept = [record for record in records if (record["side"], record["kind"], record["grid"], record["seed"]) != missing]
    (folder / "evaluations.jsonl").write_text("".join(json.dumps(record) + "\n" for record in kept))
    row = labelled_rows(paired_table(Args(folder, across_sides=True, mean_over=(100, 200), bootstrap_resamples=200)))
    differences = [np.mean([FIRST[u][i] - SECOND[u][i] for u in FIRST]) for i in (0, 1, 3, 4, 5)]
    assert row["mean 100/200"][0] == "5" and row["mean 100/200"][3].startswith(f"{np.mean(differences):.3f} [")


LATER = {100: [0.10, 0.35, 0.22, 0.41, 0.50, 0.33], 200: [0.52, 0.44, 0.61, 0.28, 0.47, 0.39]}


def test_pooled_with_adds_another_seed_sets_pairs(tmp_path):
    """Two same-init folders of one experiment: the pooled rows hold all 12 pairs, the first folder's seeds and the
    second's kept apart. Mutation checked by hand: the second folder's seeds not moved past the first's (its pairs
    overwrite the first's), or the second folder left out, fails this test."""
    experiment = EXPERIMENT | {"same_init": True}
    first = write_comparison(tmp_path / "first", SECOND, FIRST, experiment=experiment)
    later = write_comparison(tmp_path / "later", FIRST, LATER, experiment=experiment | {"first_seed": 6})
    text = paired_table(Args(first, across_sides=True, pooled_with=(later,), bootstrap_resamples=200))
    for update in FIRST:
        differences = np.concatenate(
            [np.subtract(FIRST[update], SECOND[update][:6]), np.subtract(LATER[update], FIRST[update])]
        )
        row = table_rows(text)[update]
        assert row[0] == "12" and row[3].startswith(f"{differences.mean():.3f} [")
    per_seed = np.concatenate(
        [
            np.mean([np.subtract(FIRST[u], SECOND[u][:6]) for u in FIRST], axis=0),
            np.mean([np.subtract(LATER[u], FIRST[u]) for u in FIRST], axis=0),
        ]
    )
    row = labelled_rows(text)["SixteenRooms"]
    assert row[0] == "12" and row[3].startswith(f"{per_seed.mean() / 4:.3f} [")


@pytest.mark.parametrize(
    ("later_experiment", "arguments", "message"),
    [
        (EXPERIMENT | {"same_init": True, "first_seed": 6}, {"across_sides": False}, "pools folders of --across-sides"),
        (EXPERIMENT | {"same_init": True}, {}, "overlaps that of"),
        (EXPERIMENT | {"same_init": True, "first_seed": 3}, {}, "overlaps that of"),
        (EXPERIMENT | {"same_init": True, "first_seed": 6, "n_walls": 9}, {}, "differs from .* in n_walls"),
        (EXPERIMENT | {"first_seed": 6}, {}, "started apart"),
    ],
)
def test_pooled_with_refusals(tmp_path, later_experiment, arguments, message):
    first = write_comparison(tmp_path / "first", SECOND, FIRST, experiment=EXPERIMENT | {"same_init": True})
    later = write_comparison(tmp_path / "later", FIRST, LATER, experiment=later_experiment)
    with pytest.raises(ConfigError, match=message):
        paired_table(Args(first, pooled_with=(later,), **({"across_sides": True} | arguments)))
