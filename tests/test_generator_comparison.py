"""benchmarks/learning/generator_comparison.py on cleanued's own generator: two independent draws pass, a
deliberately changed generator is flagged on the statistic it changes, each statistic is what its name says, and
`main` counts every test of every configuration in one threshold. Nothing here runs minimax."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from benchmarks.learning import generator_comparison as comparison
from common.errors import ConfigError
from envs.levels import sample_cell, sample_dr_level
from envs.maze import make_level

LEVELS = 20_000
SIZE, WALLS = 7, 8


def statistics_of(generator=sample_dr_level, seed=0) -> dict:
    return comparison.level_statistics(comparison.cleanued_levels(SIZE, WALLS, LEVELS, seed, generator))


@pytest.fixture(scope="module")
def reference():
    return statistics_of(seed=0)


def flagged(rows: list[dict]) -> set[str]:
    return {row["statistic"] for row in rows if row["flagged"]}


def test_two_draws_of_one_generator_are_not_flagged(reference):
    rows = comparison.compare(reference, statistics_of(seed=1), tests=len(comparison.STATISTICS))
    assert flagged(rows) == set()
    assert [row["statistic"] for row in rows] == list(comparison.STATISTICS)


def walls_without_replacement(rng, height, width, n_walls):
    """The generator with distinct wall cells (what `maze_replace_wall_pos=False` would draw)."""
    level = sample_dr_level(rng, height, width, n_walls)
    cells = jax.random.choice(jax.random.fold_in(rng, 1), height * width, (n_walls,), replace=False)
    walls = jnp.zeros(height * width, bool).at[cells].set(True)
    agent = sample_cell(jax.random.fold_in(rng, 2), ~walls)
    goal = sample_cell(jax.random.fold_in(rng, 3), ~walls & (jnp.arange(height * width) != agent))
    to_pos = lambda cell: jnp.stack([cell % width, cell // width])  # noqa: E731
    return make_level(walls.reshape(height, width), to_pos(goal), to_pos(agent), level.agent_dir)


def start_facing_right(rng, height, width, n_walls):
    return sample_dr_level(rng, height, width, n_walls).replace(agent_dir=jnp.int32(0))


def goal_next_to_the_agent_more_often(rng, height, width, n_walls):
    """One level in four keeps its goal but starts the agent on the goal's free neighbour (where there is one)."""
    level = sample_dr_level(rng, height, width, n_walls)
    moved = level.goal_pos + jnp.array([1, 0])
    free = (moved[0] < width) & ~level.wall_map[level.goal_pos[1], jnp.minimum(moved[0], width - 1)]
    move = free & (jax.random.uniform(jax.random.fold_in(rng, 7)) < 0.25)
    return level.replace(agent_pos=jnp.where(move, moved, level.agent_pos))


@pytest.mark.parametrize(
    "generator, expected",
    [
        (walls_without_replacement, "walls"),
        (start_facing_right, "agent_dir"),
        (goal_next_to_the_agent_more_often, "agent_goal_distance"),
    ],
)
def test_a_changed_generator_is_flagged_on_what_it_changes(reference, generator, expected):
    rows = comparison.compare(reference, statistics_of(generator, seed=1), tests=len(comparison.STATISTICS))
    assert expected in flagged(rows)
    if expected == "agent_dir":  # only the direction changed
        assert flagged(rows) == {"agent_dir"}


def test_statistics_are_what_they_say_on_a_hand_made_level():
    text_walls = np.array([[0, 1, 0], [0, 1, 0], [0, 0, 0]], bool)  # a wall down the middle, open at the bottom
    levels = {
        "walls": text_walls[None],
        "agent_pos": np.array([[0, 0]]),  # (x, y): top left
        "goal_pos": np.array([[2, 0]]),  # top right: round the wall, 6 moves
        "agent_dir": np.array([3]),
    }
    measured = comparison.level_statistics(levels)
    assert {name: int(values[0]) for name, values in measured.items()} == {
        "walls": 2,
        "solvable": 1,
        "shortest_path": 6,
        "agent_goal_distance": 2,
        "agent_dir": 3,
        "agent_cell": 0,
        "goal_cell": 2,
    }
    diagonal = {**levels, "goal_pos": np.array([[2, 2]])}  # apart in x and y: |dx| + |dy|, not the larger
    measured = comparison.level_statistics(diagonal)
    assert (int(measured["agent_goal_distance"][0]), int(measured["shortest_path"][0])) == (4, 4)
    levels["walls"] = np.array([[[0, 1, 0], [0, 1, 0], [0, 1, 0]]], bool)
    assert comparison.level_statistics(levels)["solvable"][0] == 0


def test_compare_flags_at_the_family_level_over_the_tests_and_averages_paths_over_solvable_levels(monkeypatch):
    """A p of 0.005 is flagged when it is the only test and not among seven (Bonferroni at FAMILY_ALPHA 0.01); the
    shortest path's means leave out unsolvable levels (-1). Fails with the division by the tests dropped or the -1
    kept (the mutation trial's survivors of compare)."""
    monkeypatch.setattr(comparison, "homogeneity_p", lambda a, b: 0.005)
    side = {name: np.array([1, 2, 3]) for name in comparison.STATISTICS}
    cleanued = {**side, "shortest_path": np.array([4, -1, 6, -1])}
    assert all(row["flagged"] for row in comparison.compare(cleanued, side, tests=1))
    rows = {row["statistic"]: row for row in comparison.compare(cleanued, side, tests=7)}
    assert not any(row["flagged"] for row in rows.values())
    assert rows["shortest_path"]["cleanued_mean"] == 5.0


def test_homogeneity_pools_rare_values_and_needs_two_bins():
    rng = np.random.default_rng(0)
    same = rng.integers(0, 5, 5000), rng.integers(0, 5, 5000)
    assert comparison.homogeneity_p(*same) > 0.01
    shifted = rng.integers(0, 5, 5000), rng.integers(1, 6, 5000)
    assert comparison.homogeneity_p(*shifted) < 1e-6
    assert comparison.homogeneity_p(np.zeros(100), np.zeros(100)) == 1.0
    # Values seen fewer than MIN_BIN times on both sides together share one bin, so single outliers do not decide.
    assert comparison.homogeneity_p(np.r_[np.zeros(500), 7], np.r_[np.zeros(500), 9]) == 1.0
    # Many rare values on one side only add up in that bin: flagged (without the bin, one row is left and p is 1).
    assert comparison.homogeneity_p(np.r_[np.zeros(500), np.arange(1, 51)], np.zeros(550)) < 1e-6
    # Two values: the uncorrected chi-square (no Yates correction), as for every other table.
    two = np.r_[np.zeros(60), np.ones(40)], np.r_[np.zeros(45), np.ones(55)]
    table = [[60, 45], [40, 55]]
    expected = stats.chi2_contingency(np.array(table).T, correction=False).pvalue
    assert comparison.homogeneity_p(*two) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["13", "13:x", "1:0", "5:24"])
def test_bad_configurations_are_refused_in_one_line(text):
    with pytest.raises(ConfigError, match="--configurations"):
        comparison.parse_configuration(text)


def test_results_are_written_as_the_table_and_one_record_a_line_with_provenance(tmp_path):
    comparison.write_results(tmp_path / "out", "name", "| table |", [{"p": 0.5}, {"p": 0.01}])
    assert (tmp_path / "out" / "name.md").read_text() == "| table |\n"
    records = [json.loads(line) for line in (tmp_path / "out" / "name.jsonl").read_text().splitlines()]
    assert [record["p"] for record in records] == [0.5, 0.01] and all("commit" in record for record in records)


def test_main_tests_every_statistic_of_every_configuration_at_one_family_threshold_and_bolds_the_flagged(
    monkeypatch, capsys, tmp_path
):
    """Two configurations are twice the statistics in tests: compare gets that count for each, the header names it,
    only the changed statistic's p is bold, and --out holds the printed table."""
    monkeypatch.setattr(
        comparison,
        "minimax_levels",
        lambda size, n_walls, count, seed, venv: comparison.cleanued_levels(
            size, n_walls, count, seed + 1, start_facing_right
        ),
    )
    counts = []
    compare = comparison.compare
    monkeypatch.setattr(comparison, "compare", lambda a, b, tests: counts.append(tests) or compare(a, b, tests))
    comparison.main(comparison.Args(configurations=("5:3", "7:8"), levels=2_000, out=tmp_path))
    table = capsys.readouterr().out
    tests = 2 * len(comparison.STATISTICS)
    assert counts == [tests, tests]
    assert f"flagged (**) below {comparison.FAMILY_ALPHA} / {tests} tests" in table
    rows = [line for line in table.splitlines() if line.startswith("| 5x5") or line.startswith("| 7x7")]
    assert len(rows) == tests
    assert {row.split(" | ")[1] for row in rows if row.endswith("** |")} == {"agent_dir"}
    assert sum(row.endswith("** |") for row in rows) == 2
    assert (tmp_path / "generator_comparison.md").read_text() == table
