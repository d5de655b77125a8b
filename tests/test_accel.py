"""algos/accel.py: a mutation update follows every replay update, mutants enter the buffer one generation
deeper than their parents, only replay updates change the policy, the mutation criteria pick what they
say, and resume (buffer and pending mutation included) is exact."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import accel
from common.config import with_flags
from common.errors import ConfigError
from envs.levels import levels_equal, sample_dr_level
from tests.states import assert_states_close, newest_state, run_script

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
    assert (metrics["buffer/mutant_generation"][mutated == 1] >= 1).all()
    assert (metrics["buffer/max_mutations"][:, -1] >= 1).all(), "mutants must be inserted"
    generations = runner.buffer.mutations[runner.buffer.filled]
    assert generations.max() >= 1 and metrics["buffer/max_mutations"][:, -1].max() == generations.max()
    assert np.isfinite(metrics["ppo/loss"][replayed == 1]).all(), "Robust PLR steps on replay updates only"
    assert np.isnan(metrics["ppo/loss"][replayed == 0]).all(), "new and mutation updates report no step"


@pytest.mark.slow
def test_only_replay_updates_change_the_policy(tmp_path):
    config = tiny_config(tmp_path, num_seeds=2, log_interval=1, total_updates=12, checkpoint_interval=1)
    functions = accel.make_train(config)
    runner = jax.jit(functions.init)(jax.random.split(jax.random.key(1), config.run.num_seeds))
    step = jax.jit(functions.step)
    kinds = set()
    for _ in range(config.run.total_updates):
        before = runner.train_state.params
        runner, metrics = step(runner)
        for seed in range(config.run.num_seeds):
            changed = any(
                bool((x[seed] != y[seed]).any())
                for x, y in zip(jax.tree.leaves(before), jax.tree.leaves(runner.train_state.params), strict=True)
            )
            replay = bool(metrics["buffer/replay_fraction"][seed, 0])
            kinds.add((replay, bool(metrics["buffer/mutation_fraction"][seed, 0])))
            assert changed == replay
    assert kinds == {(False, False), (True, False), (False, True)}, "new, replay and mutation updates all ran"


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
            dict(mutation_criterion="hard", mutation_subsample_size=0),
            "--mutation-subsample-size must be at least 1, got 0",
        ),
    ],
)
def test_invalid_flags(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(tmp_path, **overrides)
