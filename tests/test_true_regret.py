"""The exact-regret score: `envs.levels.optimal_steps` against a plain-Python breadth-first search over AMaze's
moves, the optimal return against the env's own reward on the shortest action sequence, and
`common.ued_scores.true_regret` against its formula on a recorded rollout."""

from collections import deque

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from common import ued_scores
from envs.levels import level_from_text, optimal_return, optimal_steps, sample_dr_level
from envs.maze import (
    ACTION_LEFT,
    ACTION_RIGHT,
    EnvParams,
    goal_reward,
    reset_to_level,
    step,
    step_and_restart,
)
from tests.plain_maze import FORWARD, TURN_LEFT, TURN_RIGHT, python_step

HAND_MADE = {
    "straight ahead": ([">..G"], 3),
    "turn first": (["<..G"], 5),  # two turns, then three steps
    "around a corner": ([">.#", "#.#", "#.G"], 6),  # forward, right, forward, forward, left, into the goal
    "dead end": (
        [
            "^.....",
            ".####.",
            ".#..#.",
            ".#G.#.",
            ".##.#.",
            "......",
        ],
        None,
    ),
    "walled off": (["v#G", "##.", "..."], -1),
    "goal behind the agent": ([".G>"], 3),  # turn, turn, then forward into the goal
}


def python_shortest(level) -> tuple[int, list[int]]:
    """(steps, actions) of a shortest way to the goal by breadth-first search over (x, y, direction), each move a
    step of the plain-Python maze."""
    walls = np.asarray(level.wall_map)
    goal = tuple(np.asarray(level.goal_pos).tolist())
    start = (tuple(np.asarray(level.agent_pos).tolist()), int(level.agent_dir))
    parents = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        for action in (TURN_LEFT, TURN_RIGHT, FORWARD):
            position, direction, reached = python_step(walls, goal, *state, action)
            if reached:
                actions = [action]
                while parents[state] is not None:
                    state, previous = parents[state]
                    actions.append(previous)
                return len(actions), actions[::-1]
            following = (position, direction)
            if following not in parents:
                parents[following] = (state, action)
                queue.append(following)
    return -1, []


@pytest.mark.parametrize("name", HAND_MADE)
def test_optimal_steps_on_hand_made_levels(name):
    rows, expected = HAND_MADE[name]
    level = level_from_text("\n".join(rows))
    steps, _ = python_shortest(level)
    if expected is not None:
        assert steps == expected
    assert int(optimal_steps(level)) == steps


def test_optimal_steps_match_plain_python_on_random_levels():
    levels = jax.vmap(lambda rng: sample_dr_level(rng, 7, 7, 20))(jax.random.split(jax.random.key(0), 60))
    computed = np.asarray(jax.jit(jax.vmap(optimal_steps))(levels))
    expected = [python_shortest(jax.tree.map(lambda x, i=i: x[i], levels))[0] for i in range(60)]
    np.testing.assert_array_equal(computed, expected)
    assert (computed == -1).any() and (computed > 10).any()


@pytest.mark.parametrize("max_steps", [50, 12])
def test_the_env_pays_the_optimal_return_on_the_shortest_action_sequence(max_steps):
    level = level_from_text("\n".join(HAND_MADE["dead end"][0]))
    steps, actions = python_shortest(level)
    params = EnvParams(max_steps=max_steps)
    _, state = reset_to_level(None, level, params)
    total, done = 0.0, False
    for action in actions:
        _, state, reward, done, _ = step(None, state, jnp.int32(action), params)
        total += float(reward)
        if done:
            break
    expected = 1.0 - 0.9 * steps / max_steps if steps <= max_steps else 0.0
    assert float(optimal_return(level, max_steps)) == pytest.approx(expected)
    assert total == pytest.approx(expected)
    assert bool(done)


def test_unsolvable_and_too_far_levels_have_optimal_return_zero():
    assert float(optimal_return(level_from_text("\n".join(HAND_MADE["walled off"][0])), 250)) == 0.0
    assert float(optimal_return(level_from_text("<..G"), 4)) == 0.0  # 5 steps needed
    assert float(optimal_return(level_from_text("<..G"), 5)) == pytest.approx(0.1)


def test_true_regret_on_a_recorded_rollout():
    """A random policy on a small level for 40 steps with restarts; the score is the optimal return minus the mean
    return of the episodes that finished (not the last, cut off), computed here by hand from the recorded rewards."""
    level = level_from_text("^..G")
    params = EnvParams(max_steps=8)
    _, state = reset_to_level(None, level, params)
    rewards, dones = [], []
    rng = np.random.default_rng(0)
    for _ in range(40):
        _, state, reward, done, _ = step(None, state, jnp.int32(rng.choice(3, p=[0.2, 0.2, 0.6])), params)
        rewards.append(float(reward))
        dones.append(bool(done))
        if done:
            _, state = reset_to_level(None, level, params)
    finished_returns, running = [], 0.0
    for reward, done in zip(rewards, dones, strict=True):
        running += reward
        if done:
            finished_returns.append(running)
            running = 0.0
    assert 0 < sum(r > 0 for r in finished_returns) < len(finished_returns), "the recording mixes outcomes"
    best = float(optimal_return(level, 8))
    score = ued_scores.true_regret(jnp.array(rewards), jnp.array(dones), optimal_steps(level), 8)
    assert float(score) == pytest.approx(best - np.mean(finished_returns), rel=1e-6)


@pytest.mark.parametrize("toward", [np.inf, -np.inf], ids=["1 ulp above", "1 ulp below"])
def test_an_episode_of_optimal_length_scores_exactly_zero_whatever_its_reward_rounds_to(toward):
    """Two episodes reach the goal in `optimal_steps` steps, each paid 1 ulp off the optimal return's float (as the
    env, compiled into another program, may round the same formula): the regret is still 0.0 exactly, not -1 or
    +1 ulp, since optimal play is told by the episode's length. Mutation checked by hand: replacing
    `jnp.where(optimal_play, 0.0, optimal - returns)` with `optimal - returns` in true_regret fails this test."""
    level = level_from_text(">..G")
    steps = optimal_steps(level)
    assert int(steps) == 3
    reward = np.nextafter(np.float32(goal_reward(3, 8)), np.float32(toward))
    rewards = jnp.array([0.0, 0.0, reward, 0.0, 0.0, reward], jnp.float32)
    dones = jnp.array([False, False, True, False, False, True])
    assert float(ued_scores.true_regret(rewards, dones, steps, 8)) == 0.0


def test_one_finished_episode_is_its_own_mean_and_a_time_out_at_the_optimal_length_is_a_failure():
    """A rollout with one finished episode scores that episode's regret (not half of it: the mean divides by the
    number finished, at least 1), and the unfinished tail counts for nothing. A level whose goal takes every step
    the episode has (optimal return 0.1) played to a time-out, return 0 and as long as the optimal path, scores the
    whole 0.1: reaching the goal is part of optimal play. Fails with the divisor's floor at 2, or with a return of
    0 taken as optimal play (mutmut's survivors of true_regret)."""
    rewards = jnp.array([0.0, 0.0, 0.0, 0.0, 0.0], jnp.float32)
    dones = jnp.array([False, False, False, True, False])  # a 4-step time-out, then a step of the next episode
    score = ued_scores.true_regret(rewards, dones, jnp.int32(4), 4)
    assert float(score) == pytest.approx(float(goal_reward(4, 4))) and float(goal_reward(4, 4)) == pytest.approx(0.1)
    late = jnp.array([0.0, 0.0, float(goal_reward(3, 8)), 0.0, 0.0], jnp.float32)  # 3 steps where 2 would do
    dones = jnp.array([False, False, True, False, False])
    assert float(ued_scores.true_regret(late, dones, jnp.int32(2), 8)) == pytest.approx(0.9 / 8)


def test_episode_returns_of_one_finished_episode_and_of_none():
    """(mean, best) return: one finished episode is both (the unfinished tail left out); a rollout with no finished
    episode gives (0, 0), not the max of nothing. Fails with the mean's divisor floored at 2 or the empty case's
    best taken from the returns or set to 1 (mutmut's survivors of episode_returns)."""
    rewards = jnp.array([0.0, 0.0, 0.8, 0.0, 0.0], jnp.float32)
    mean, best = ued_scores.episode_returns(rewards, jnp.array([False, False, True, False, False]))
    assert (float(mean), float(best)) == (pytest.approx(0.8), pytest.approx(0.8))
    mean, best = ued_scores.episode_returns(jnp.zeros(5), jnp.zeros(5, bool))
    assert (float(mean), float(best)) == (0.0, 0.0)


def test_learnability_counts_every_finished_episode():
    rewards = jnp.array([0.0, 0.9, 0.0, 0.0, 0.0, 0.8, 0.0])
    dones = jnp.array([False, True, False, False, True, True, False])
    successes, failures = ued_scores.outcome_counts(rewards, dones)
    assert (float(successes), float(failures)) == (2.0, 1.0)
    assert successes.dtype == failures.dtype == jnp.float32, "floats, as a buffer slot decays them"
    assert float(ued_scores.learnability(successes, failures)) == pytest.approx(2 / 9)
    assert float(ued_scores.learnability(0.0, 0.0)) == 0.0
    assert float(ued_scores.learnability(successes, failures + 1)) == pytest.approx(0.25)


def play_actions(levels, actions, max_steps: int):
    """Rewards and dones [N, T] of each level played with its own action sequence (int32[N, T]), restarting on done."""
    params = EnvParams(max_steps=max_steps)

    def play(level, level_actions):
        _, state = reset_to_level(None, level, params)

        def one_step(state, action):
            _, state, reward, done, _ = step_and_restart(None, state, action, params)
            return state, (reward, done)

        return jax.lax.scan(one_step, state, level_actions)[1]

    return jax.jit(jax.vmap(play))(levels, jnp.asarray(actions, jnp.int32))


def test_regret_is_exactly_zero_on_optimal_play_and_never_negative():
    """13x13 levels with 60 walls, each played for 256 steps by repeating its shortest action sequence (every
    episode optimal): the regret is 0.0 exactly. The same levels with a wasted turn every few episodes: never
    below 0.0, and above it wherever an episode came out longer."""
    max_steps, num_steps = 250, 256
    levels = jax.vmap(lambda rng: sample_dr_level(rng, 13, 13, 60))(jax.random.split(jax.random.key(3), 160))
    solutions = [python_shortest(jax.tree.map(lambda x, i=i: x[i], levels))[1] for i in range(160)]
    solvable = np.flatnonzero([len(actions) > 0 for actions in solutions])
    assert len(solvable) >= 100
    levels = jax.tree.map(lambda x: x[solvable], levels)
    steps = jax.vmap(optimal_steps)(levels)
    regret = jax.jit(jax.vmap(ued_scores.true_regret, (0, 0, 0, None)), static_argnums=3)

    repeated = np.stack([np.resize(solutions[i], num_steps) for i in solvable])
    rewards, dones = play_actions(levels, repeated, max_steps)
    assert np.asarray(dones).sum(1).min() >= 1
    np.testing.assert_array_equal(np.asarray(regret(rewards, dones, steps, max_steps)), 0.0)

    detoured = np.stack(
        [np.resize([ACTION_LEFT, ACTION_RIGHT, *solutions[i]] + solutions[i] * 2, num_steps) for i in solvable]
    )
    rewards, dones = play_actions(levels, detoured, max_steps)
    scores = np.asarray(regret(rewards, dones, steps, max_steps))
    assert (scores >= 0.0).all()
    assert (scores > 0.0).sum() >= len(solvable) // 2


def test_learnability_is_symmetric_in_successes_and_failures():
    episodes = np.repeat(np.arange(1, 80), np.arange(2, 81))
    successes = np.concatenate([np.arange(count + 1) for count in range(1, 80)])
    failures = episodes - successes
    decay = np.random.default_rng(0).choice([1.0, 0.9, 0.5, 0.37], len(episodes))  # decayed counts: not integers
    for s, f in ((successes, failures), (successes * decay, failures * decay + successes * (1 - decay) ** 3)):
        s, f = s.astype(np.float32), f.astype(np.float32)
        score = np.asarray(ued_scores.learnability(jnp.asarray(s), jnp.asarray(f)))
        mirrored = np.asarray(ued_scores.learnability(jnp.asarray(f), jnp.asarray(s)))
        np.testing.assert_array_equal(score, mirrored)
        p = s.astype(np.float64) / (s.astype(np.float64) + f)
        np.testing.assert_allclose(score, p * (1 - p), rtol=1e-5, atol=1e-7)
