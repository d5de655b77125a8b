"""algos/accel.py: a mutation update follows every replay update, edits the levels that update replayed and ages no
slot, mutants enter the buffer one generation deeper than their parents, only replay updates change the policy
(with --exploratory-grad-updates new-level updates too, mutation updates never), the mutation criteria pick what
they say, and resume (buffer and pending mutation included) is exact."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import accel
from common import level_buffer
from common.config import with_flags
from common.errors import ConfigError
from envs.levels import levels_equal, sample_dr_level
from tests.states import assert_states_close, for_seed, newest_state, params_changed, run_script, run_update_by_update
from tests.test_plr import same_levels

TINY = dict(
    num_seeds=2,
    num_envs=4,
    num_steps=24,
    max_steps=12,
    maze_size=5,
    lstm_size=16,
    buffer_size=16,
    total_updates=16,
    log_interval=16,
    eval_interval=0,
    checkpoint_interval=16,
    screenshot_interval=0,
)


def tiny_config(tmp_path, **overrides) -> accel.Config:
    return with_flags(accel.Config(), **{**TINY, "runs_dir": str(tmp_path), **overrides})


@pytest.mark.slow
def test_mutation_follows_replay_and_mutants_enter_the_buffer(tmp_path):
    config = tiny_config(tmp_path)
    functions = accel.make_train(config)
    runner = jax.jit(functions.init)(jax.random.split(jax.random.key(0), config.run.num_seeds))
    runner, metrics = jax.device_get(jax.jit(functions.step)(runner))
    replayed, mutated = metrics["buffer/replay_fraction"], metrics["buffer/mutation_fraction"]
    assert (metrics["buffer/fill"][:, 1] >= config.min_fill_ratio).all(), "two updates of 4 new levels warm it up"
    assert replayed.sum(axis=1).min() >= 2, "replay must happen on every seed"
    np.testing.assert_array_equal(mutated[:, 1:], replayed[:, :-1], "a mutation update follows each replay update")
    assert not (replayed * mutated).any() and mutated[:, 0].sum() == 0
    assert (metrics["level_new/walls"][replayed + mutated == 0] == 0).all(), "new levels are empty mazes"
    assert (metrics["level_mutant/walls"][mutated == 1] > 0).all(), "20 edits on a 5x5 maze add walls"
    assert np.isnan(metrics["level_mutant/walls"][mutated == 0]).all()
    assert np.isnan(metrics["level_new/walls"][mutated == 1]).all(), "mutants are not new levels"
    assert (metrics["buffer/mutant_generation"][mutated == 1] >= 1).all()
    assert (metrics["buffer/max_mutations"][:, -1] >= 1).all(), "mutants must be inserted"
    generations = runner.buffer.mutations[runner.buffer.filled]
    assert generations.max() >= 1 and metrics["buffer/max_mutations"][:, -1].max() == generations.max()
    assert np.isfinite(metrics["ppo/loss"][replayed == 1]).all(), "Robust PLR steps on replay updates only"
    assert np.isnan(metrics["ppo/loss"][replayed == 0]).all(), "new and mutation updates report no step"


class Updates(NamedTuple):
    """A tiny run driven one update per chunk, so the state can be compared before and after every update."""

    config: accel.Config
    runners: list  # the runner state before each update, then after the last (host copies)
    metrics: dict  # every metric, [seeds, updates]


@pytest.fixture(scope="module")
def tiny_updates(tmp_path_factory) -> Updates:
    """12 updates of 2 seeds, one update per chunk; 3 edits per mutant (so a mutant stays close to its parent) of the
    2 highest-scoring levels of each replay batch (the hard criterion)."""
    config = tiny_config(
        tmp_path_factory.mktemp("accel"),
        log_interval=1,
        total_updates=12,
        num_edits=3,
        mutation_criterion="hard",
        mutation_subsample_size=2,
    )
    functions = accel.make_train(config)
    runners, metrics = run_update_by_update(functions, config, jax.random.key(0))
    return Updates(config, runners, metrics)


class Cycle(NamedTuple):
    """One update of one seed: its kind ("new", "replay" or "mutation"), the runner states (all seeds) before and
    after it, and that seed's buffer before and after it."""

    seed: int
    update: int
    kind: str
    runner_before: accel.RunnerState
    runner_after: accel.RunnerState
    buffer_before: level_buffer.LevelBuffer
    buffer_after: level_buffer.LevelBuffer

    @property
    def where(self) -> str:
        return f"seed {self.seed} update {self.update} ({self.kind})"


def cycles(updates: Updates):
    """Every update of every seed, as a `Cycle`."""
    replayed, mutated = (updates.metrics[f"buffer/{kind}_fraction"] == 1 for kind in ("replay", "mutation"))
    for seed in range(updates.config.run.num_seeds):
        for update in range(updates.config.run.total_updates):
            kind = "replay" if replayed[seed, update] else "mutation" if mutated[seed, update] else "new"
            before, after = updates.runners[update], updates.runners[update + 1]
            yield Cycle(seed, update, kind, before, after, for_seed(before.buffer, seed), for_seed(after.buffer, seed))


@pytest.mark.slow
def test_only_replay_updates_change_the_policy(tiny_updates):
    kinds = set()
    for cycle in cycles(tiny_updates):
        kinds.add(cycle.kind)
        before, after = cycle.runner_before.train_state.params, cycle.runner_after.train_state.params
        changed = params_changed(before, after, cycle.seed)
        assert changed == (cycle.kind == "replay"), cycle.where
    assert kinds == {"new", "replay", "mutation"}, "new, replay and mutation updates all ran"


@pytest.mark.slow
def test_exploratory_updates_learn_from_new_levels_never_from_mutants(tmp_path):
    """--exploratory-grad-updates (PLR rather than Robust PLR): a PPO step on new and replayed levels, none on
    mutants, whose rollout minimax's PLRRunner only scores; each step counted as a student update."""
    config = tiny_config(tmp_path, log_interval=1, total_updates=12, exploratory_grad_updates=True)
    updates = Updates(config, *run_update_by_update(accel.make_train(config), config, jax.random.key(0)))
    kinds = set()
    for cycle in cycles(updates):
        kinds.add(cycle.kind)
        before, after = cycle.runner_before.train_state.params, cycle.runner_after.train_state.params
        assert params_changed(before, after, cycle.seed) == (cycle.kind != "mutation"), cycle.where
        counted = cycle.runner_after.student_updates[cycle.seed] - cycle.runner_before.student_updates[cycle.seed]
        assert counted == (cycle.kind != "mutation"), cycle.where
    assert kinds == {"new", "replay", "mutation"}, "new, replay and mutation updates all ran"


def slots_holding(buffer, levels) -> list[np.ndarray]:
    """For each of `levels` (numpy leaves [n, ...]), the filled slots of `buffer` holding it (walls, goal, agent)."""
    return [
        np.flatnonzero(
            buffer.filled
            & (buffer.levels.wall_map == levels.wall_map[index]).all((1, 2))
            & (buffer.levels.goal_pos == levels.goal_pos[index]).all(1)
            & (buffer.levels.agent_pos == levels.agent_pos[index]).all(1)
        )
        for index in range(levels.wall_map.shape[0])
    ]


@pytest.mark.slow
def test_a_replay_update_leaves_its_hardest_levels_as_parents(tiny_updates):
    """The hard criterion (2 of 4): after each replay update the pending parents are levels it drew from the buffer
    (their slots restarted their ages), with those slots' generations, 2 distinct levels repeated in turn; where the
    4 draws were 4 distinct slots (each slot's stored score is then its one play's), they are the 2 highest-scoring."""
    config = tiny_updates.config
    num_envs, subsample = config.ppo.num_envs, config.mutation_subsample_size
    distinct_draws = 0
    for cycle in cycles(tiny_updates):
        if cycle.kind != "replay":
            continue
        seed, after, buffer, where = cycle.seed, cycle.runner_after, cycle.buffer_after, cycle.where
        slots = slots_holding(buffer, for_seed(after.mutation_parents, seed))
        assert all(len(slot) == 1 for slot in slots), f"{where}: a parent is not a buffer level"
        parent_slots = np.concatenate(slots)
        drawn = cycle.buffer_before.filled & (buffer.ages < num_envs)
        assert drawn[parent_slots].all(), f"{where}: a parent was not drawn"
        np.testing.assert_array_equal(after.mutation_parent_generations[seed], buffer.mutations[parent_slots], where)
        np.testing.assert_array_equal(parent_slots, np.tile(parent_slots[:subsample], num_envs // subsample), where)
        if drawn.sum() == num_envs:
            distinct_draws += 1
            others = np.flatnonzero(drawn & ~np.isin(np.arange(drawn.size), parent_slots))
            assert buffer.scores[parent_slots].min() >= buffer.scores[others].max(), where
    assert distinct_draws > 0, "some replay update drew 4 distinct slots"


@pytest.mark.slow
def test_mutants_edit_the_parents_and_go_one_generation_deeper(tiny_updates):
    """A mutation update plays edits of the parents the replay update before it left: every slot it writes holds a
    level with a parent's agent position and direction, walls at most --num-edits cells apart from that parent's,
    and that parent's generation plus 1; buffer/mutant_generation is the parents' mean generation plus 1."""
    config, metrics = tiny_updates.config, tiny_updates.metrics
    mutants = deep_mutants = 0
    for cycle in cycles(tiny_updates):
        if cycle.kind != "mutation":
            continue
        buffer_before, buffer_after, where = cycle.buffer_before, cycle.buffer_after, cycle.where
        parents = for_seed(cycle.runner_before.mutation_parents, cycle.seed)
        generations = cycle.runner_before.mutation_parent_generations[cycle.seed]
        np.testing.assert_allclose(
            metrics["buffer/mutant_generation"][cycle.seed, cycle.update], generations.mean() + 1
        )
        for slot in np.flatnonzero(buffer_after.filled & ~same_levels(buffer_before, buffer_after)):
            mutants += 1
            deep_mutants += int(buffer_after.mutations[slot] >= 2)
            edited_from = (
                (parents.agent_pos == buffer_after.levels.agent_pos[slot]).all(1)
                & (parents.agent_dir == buffer_after.levels.agent_dir[slot])
                & ((parents.wall_map != buffer_after.levels.wall_map[slot]).sum((1, 2)) <= config.num_edits)
                & (generations + 1 == buffer_after.mutations[slot])
            )
            assert edited_from.any(), f"{where}: slot {slot} holds no mutant of a parent"
    assert mutants > 0 and deep_mutants > 0, "mutants entered the buffer, some of them mutants of mutants"


@pytest.mark.slow
def test_a_mutation_update_ages_no_slot(tiny_updates):
    """A mutation cycle does not age the buffer (minimax samples no levels for it); a new-level cycle ages every
    filled slot by the num_envs levels it plays."""
    num_envs = tiny_updates.config.ppo.num_envs
    for cycle in cycles(tiny_updates):
        before, after = cycle.buffer_before, cycle.buffer_after
        if cycle.kind != "replay":
            aged = before.ages + (num_envs if cycle.kind == "new" else 0)
            np.testing.assert_array_equal(after.ages[before.filled], aged[before.filled], cycle.where)


@pytest.mark.slow
def test_mutation_metrics_describe_the_filled_slots(tiny_updates):
    for cycle in cycles(tiny_updates):
        generations = cycle.buffer_after.mutations[cycle.buffer_after.filled]
        for key, value in (("mean_mutations", generations.mean()), ("max_mutations", generations.max())):
            logged = tiny_updates.metrics[f"buffer/{key}"][cycle.seed, cycle.update]
            np.testing.assert_allclose(logged, value, rtol=1e-6, err_msg=f"{key} {cycle.where}")


def test_mutation_criteria_pick_by_score():
    levels = jax.vmap(sample_dr_level, (0, None, None, None))(jax.random.split(jax.random.key(2), 4), 7, 7, 10)
    scores = jnp.array([0.3, -0.5, 0.9, 0.1])
    generations = jnp.array([0, 1, 2, 3])
    for criterion, subsample, expected in [("batch", 1, [0, 1, 2, 3]), ("easy", 2, [1, 3, 1, 3]), ("hard", 1, [2] * 4)]:
        parents, parent_generations = accel.mutation_parents(levels, scores, generations, criterion, subsample)
        np.testing.assert_array_equal(parent_generations, generations[jnp.array(expected)])
        for parent, source in zip(range(4), expected, strict=True):
            pick = lambda tree, i: jax.tree.map(lambda x: x[i], tree)  # noqa: E731
            assert levels_equal(pick(parents, parent), pick(levels, source))


@pytest.mark.slow
def test_resume_with_a_pending_mutation_equals_uninterrupted(tmp_path):
    common = dict(total_updates=8, log_interval=2, checkpoint_interval=2)
    straight = tiny_config(tmp_path, run_name="straight", **common)
    run_script(accel, straight)
    run_script(accel, tiny_config(tmp_path, run_name="split", **{**common, "total_updates": 4}))
    run_script(accel, tiny_config(tmp_path, run_name="split", resume=True, **common))
    state_a, state_b = (newest_state(accel, straight, tmp_path / name) for name in ("straight", "split"))
    assert int(state_a.buffer.mutations.max()) >= 1
    assert_states_close(state_a, state_b)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(num_edits=0), "--num-edits must be at least 1"),
        (
            dict(mutation_criterion="easy", mutation_subsample_size=3),
            "--mutation-subsample-size \\(3\\) must divide --num-envs \\(4\\) for the easy criterion",
        ),
        (
            dict(mutation_criterion="hard", mutation_subsample_size=3),
            "--mutation-subsample-size \\(3\\) must divide --num-envs \\(4\\) for the hard criterion",
        ),
        (
            dict(mutation_criterion="hard", mutation_subsample_size=0),
            "--mutation-subsample-size must be at least 1, got 0",
        ),
    ],
)
def test_invalid_flags(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(tmp_path, **overrides)
