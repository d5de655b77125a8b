"""common/level_buffer.py and common/ued_scores.py against plain-Python references and UED.md's check."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from common import level_buffer as lb
from common import ued_scores
from envs.levels import sample_dr_level


def small_levels(count, seed=0):
    return jax.vmap(functools.partial(sample_dr_level, height=4, width=4, n_walls=3))(
        jax.random.split(jax.random.key(seed), count)
    )


def level_at(levels, index):
    return jax.tree.map(lambda x: x[index], levels)


def level_key(level):
    return (np.asarray(level.wall_map).tobytes(), tuple(np.asarray(level.goal_pos)), tuple(np.asarray(level.agent_pos)))


@pytest.mark.parametrize(
    ("prioritization", "expected"), [("rank", (0.382, 0.213, 0.405)), ("proportional", (0.389, 0.164, 0.448))]
)
def test_replay_probabilities_match_the_numeric_check(prioritization, expected):
    buffer = lb.empty_buffer(level_at(small_levels(1), 0), 4)
    buffer = buffer.replace(
        scores=jnp.array([0.5, 0.1, 0.3, 0.9]),
        ages=jnp.array([0, 2, 5, 7]),
        filled=jnp.array([True, True, True, False]),
    )
    probs = lb.replay_probabilities(buffer, temperature=1.0, staleness_coef=0.3, prioritization=prioritization)
    np.testing.assert_allclose(probs, [*expected, 0.0], atol=1e-3)


class PythonBuffer:
    """A plain-Python statement of UED.md's buffer rules."""

    def __init__(self, capacity, temperature, staleness_coef, prioritization):
        self.slots = [None] * capacity
        self.temperature, self.staleness_coef, self.prioritization = temperature, staleness_coef, prioritization

    def filled(self):
        return [i for i, slot in enumerate(self.slots) if slot is not None]

    def probs(self):
        filled = self.filled()
        if not filled:
            return [0.0] * len(self.slots)
        if self.prioritization == "rank":
            order = sorted(filled, key=lambda i: (-self.slots[i]["score"], i))
            weights = {i: (1.0 / (k + 1)) ** (1.0 / self.temperature) for k, i in enumerate(order)}
        else:
            weights = {i: max(self.slots[i]["score"], 0.0) ** (1.0 / self.temperature) for i in filled}
        total_weight = sum(weights.values())
        total_age = sum(self.slots[i]["age"] for i in filled)
        probs = [0.0] * len(self.slots)
        for i in filled:
            staleness = self.slots[i]["age"] / total_age if total_age > 0 else 1.0 / len(filled)
            score = weights[i] / total_weight if total_weight > 0 else 1.0 / len(filled)
            probs[i] = (1 - self.staleness_coef) * score + self.staleness_coef * staleness
        return probs

    def insert(self, key, score, max_return, mutations):
        for i in self.filled():
            if self.slots[i]["key"] == key:
                self.update(i, score, max_return)
                return i
        empty = [i for i, slot in enumerate(self.slots) if slot is None]
        if empty:
            target = empty[0]
        else:
            probs = self.probs()
            target = min(self.filled(), key=lambda i: (probs[i], i))
            if score < self.slots[target]["score"]:
                return -1
        self.slots[target] = {"key": key, "score": score, "max_return": max_return, "age": 0, "mutations": mutations}
        return target

    def update(self, index, score, max_return):
        self.slots[index]["score"] = score
        self.slots[index]["max_return"] = max(self.slots[index]["max_return"], max_return)

    def drawn(self, index):
        for i in self.filled():
            self.slots[i]["age"] += 1
        self.slots[index]["age"] = 0


def assert_same(buffer: lb.LevelBuffer, reference: PythonBuffer):
    np.testing.assert_array_equal(buffer.filled, [slot is not None for slot in reference.slots])
    for i, slot in enumerate(reference.slots):
        if slot is None:
            continue
        assert level_key(level_at(buffer.levels, i)) == slot["key"], i
        assert float(buffer.scores[i]) == pytest.approx(slot["score"], abs=1e-6)
        assert float(buffer.max_returns[i]) == pytest.approx(slot["max_return"], abs=1e-6)
        assert int(buffer.ages[i]) == slot["age"] and int(buffer.mutations[i]) == slot["mutations"]
    probs = lb.replay_probabilities(buffer, reference.temperature, reference.staleness_coef, reference.prioritization)
    np.testing.assert_allclose(probs, reference.probs(), atol=1e-5)
    assert float(probs.sum()) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("prioritization", ["rank", "proportional"])
def test_random_sequences_match_plain_python(prioritization):
    capacity, temperature, staleness_coef = 6, 0.3, 0.3
    pool = small_levels(10, seed=1)  # few distinct levels, so duplicates are frequent
    rng = np.random.default_rng(2)
    settings = dict(temperature=temperature, staleness_coef=staleness_coef, prioritization=prioritization)
    insert = jax.jit(functools.partial(lb.insert, **settings))
    sample = jax.jit(functools.partial(lb.sample_replay, num_levels=1, **settings))
    update = jax.jit(lb.update_slots)
    buffer = lb.empty_buffer(level_at(pool, 0), capacity)
    reference = PythonBuffer(capacity, temperature, staleness_coef, prioritization)
    key = jax.random.key(3)
    operations = {"insert": 0, "update": 0, "sample": 0, "rejected": 0, "duplicate": 0}
    for _ in range(120):
        operation = rng.choice(["insert", "insert", "update", "sample"]) if reference.filled() else "insert"
        if operation == "insert":
            index = int(rng.integers(10))
            score, max_return, mutations = float(rng.uniform(-0.5, 1)), float(rng.uniform(0, 1)), int(rng.integers(3))
            level = level_at(pool, index)
            was_duplicate = any(reference.slots[i]["key"] == level_key(level) for i in reference.filled())
            expected_slot = reference.insert(level_key(level), score, max_return, mutations)
            buffer, slot = insert(buffer, level, jnp.float32(score), jnp.float32(max_return), jnp.int32(mutations))
            assert int(slot) == expected_slot
            operations["rejected"] += expected_slot == -1
            operations["duplicate"] += was_duplicate
        elif operation == "update":
            index = int(rng.choice(reference.filled()))
            score, max_return = float(rng.uniform(-0.5, 1)), float(rng.uniform(0, 1))
            reference.update(index, score, max_return)
            buffer = update(
                buffer, jnp.array([index]), jnp.array([score], jnp.float32), jnp.array([max_return], jnp.float32)
            )
        else:
            key, draw_key = jax.random.split(key)
            probs = reference.probs()
            buffer, (index,) = sample(draw_key, buffer)
            assert probs[int(index)] > 0, "drew a slot with zero replay probability"
            reference.drawn(int(index))
        operations[operation] += 1
        assert_same(buffer, reference)
    assert min(operations.values()) > 0, operations


def test_full_buffer_replaces_the_least_likely_slot_only_when_the_score_is_high_enough():
    settings = dict(temperature=1.0, staleness_coef=0.0, prioritization="rank")
    levels = small_levels(4, seed=4)
    buffer = lb.empty_buffer(level_at(levels, 0), 2)
    for index, score in ((0, 0.5), (1, 0.2)):
        buffer, _ = lb.insert(
            buffer, level_at(levels, index), jnp.float32(score), jnp.float32(0), jnp.int32(0), **settings
        )
    buffer, slot = lb.insert(buffer, level_at(levels, 2), jnp.float32(0.1), jnp.float32(0), jnp.int32(0), **settings)
    assert int(slot) == -1, "a score below the weakest slot's is rejected"
    buffer, slot = lb.insert(buffer, level_at(levels, 3), jnp.float32(0.2), jnp.float32(0), jnp.int32(1), **settings)
    assert int(slot) == 1 and float(buffer.scores[1]) == pytest.approx(0.2) and int(buffer.mutations[1]) == 1


def test_sequential_sampling_ages_and_vmaps_over_seeds():
    settings = dict(temperature=0.3, staleness_coef=0.5, prioritization="rank")
    levels = small_levels(8, seed=5)

    def fill_and_sample(rng):
        buffer = lb.empty_buffer(level_at(levels, 0), 8)
        buffer, _ = lb.insert_many(
            buffer, levels, jnp.linspace(0, 1, 8), jnp.zeros(8), jnp.zeros(8, jnp.int32), **settings
        )
        return lb.sample_replay(rng, buffer, 5, **settings)

    buffers, indices = jax.jit(jax.vmap(fill_and_sample))(jax.random.split(jax.random.key(6), 3))
    assert indices.shape == (3, 5) and buffers.ages.shape == (3, 8)
    for seed in range(3):
        ages = np.zeros(8, int)
        for index in np.asarray(indices[seed]):
            ages += 1
            ages[index] = 0
        np.testing.assert_array_equal(buffers.ages[seed], ages)
    assert float(lb.fill_ratio(jax.tree.map(lambda x: x[0], buffers))) == 1.0


def test_insert_many_skips_inactive_levels():
    settings = dict(temperature=0.3, staleness_coef=0.5, prioritization="rank")
    levels = small_levels(6, seed=8)
    buffer = lb.empty_buffer(level_at(levels, 0), 6)
    scores = jnp.linspace(0.1, 0.6, 6)
    active = jnp.array([True, False, True, False, False, True])
    masked, slots = lb.insert_many(
        buffer, levels, scores, jnp.zeros(6), jnp.arange(6, dtype=jnp.int32), **settings, active=active
    )
    chosen = jax.tree.map(lambda x: x[np.flatnonzero(active)], levels)
    expected, expected_slots = lb.insert_many(
        buffer, chosen, scores[active], jnp.zeros(3), jnp.arange(6, dtype=jnp.int32)[active], **settings
    )
    np.testing.assert_array_equal(slots, [0, -1, 1, -1, -1, 2])
    np.testing.assert_array_equal(expected_slots, [0, 1, 2])
    for leaf, expected_leaf in zip(jax.tree.leaves(masked), jax.tree.leaves(expected), strict=True):
        np.testing.assert_array_equal(leaf, expected_leaf)


def python_episodes(values, dones):
    """Per-step values grouped into the episodes that ended inside the rollout."""
    episodes, current = [], []
    for value, done in zip(values, dones, strict=True):
        current.append(value)
        if done:
            episodes.append(current)
            current = []
    return episodes


def mean_over_episodes(per_step, episodes):
    return np.mean([np.mean([per_step[t] for t in episode]) for episode in episodes]) if episodes else 0.0


def test_scores_match_plain_python_loops():
    rng = np.random.default_rng(7)
    for _ in range(20):
        steps = 30
        dones = rng.uniform(size=steps) < 0.15
        rewards = np.where(dones, rng.uniform(0, 1, steps), 0.0).astype(np.float32)
        advantages = rng.normal(size=steps).astype(np.float32)
        values = rng.uniform(0, 1, steps).astype(np.float32)
        previous_max = float(rng.uniform(0, 1))
        episodes = python_episodes(range(steps), dones)
        mean_of = functools.partial(mean_over_episodes, episodes=episodes)
        returns = [sum(rewards[t] for t in e) for e in episodes]
        running_max = max([previous_max, *returns])
        assert float(ued_scores.positive_value_loss(advantages, dones)) == pytest.approx(
            mean_of(np.maximum(advantages, 0)), abs=1e-5
        )
        assert float(ued_scores.l1_value_loss(advantages, dones)) == pytest.approx(
            mean_of(np.abs(advantages)), abs=1e-5
        )
        mean_return, max_return = ued_scores.episode_returns(rewards, dones)
        assert float(mean_return) == pytest.approx(np.mean(returns) if returns else 0.0, abs=1e-6)
        assert float(max_return) == pytest.approx(max(returns) if returns else 0.0, abs=1e-6)
        score, new_max = ued_scores.max_mc(rewards, dones, values, jnp.float32(previous_max))
        assert float(new_max) == pytest.approx(running_max, abs=1e-6)
        assert float(score) == pytest.approx(mean_of(running_max - values) if episodes else 0.0, abs=1e-5)
