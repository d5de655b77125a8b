"""The PLR level buffer as a struct and pure functions (../shared/UED.md), jittable and vmappable over seeds.

Slots hold a level, its score, the running maximum return achieved on it, its age (staleness: draws since
it was last replayed), a filled flag and its number of mutation generations. Replay probabilities are
    P = (1 - staleness_coef) * P_score + staleness_coef * P_staleness
over filled slots, with P_score by rank (the k-th highest score gets (1/k)^(1/temperature)) or
proportional (max(score, 0)^(1/temperature)), and P_staleness = age / sum(age); a distribution with no
mass is uniform over filled slots.
"""

from typing import Literal

import jax
import jax.numpy as jnp
from flax import struct

from envs.levels import levels_equal
from envs.maze import Level

Prioritization = Literal["rank", "proportional"]


@struct.dataclass
class LevelBuffer:
    levels: Level  # leaves [capacity, ...]
    scores: jax.Array  # float32[capacity]
    max_returns: jax.Array  # float32[capacity], running maximum return achieved on the level
    ages: jax.Array  # int32[capacity], draws since the slot was last replayed
    filled: jax.Array  # bool[capacity]
    mutations: jax.Array  # int32[capacity], mutation generations (0 for generated levels)

    @property
    def capacity(self) -> int:
        return self.scores.shape[-1]


def empty_buffer(level: Level, capacity: int) -> LevelBuffer:
    """A buffer of `capacity` empty slots shaped like the single `level`."""
    return LevelBuffer(
        levels=jax.tree.map(lambda x: jnp.zeros((capacity, *x.shape), x.dtype), level),
        scores=jnp.zeros(capacity, jnp.float32),
        max_returns=jnp.zeros(capacity, jnp.float32),
        ages=jnp.zeros(capacity, jnp.int32),
        filled=jnp.zeros(capacity, bool),
        mutations=jnp.zeros(capacity, jnp.int32),
    )


def fill_ratio(buffer: LevelBuffer) -> jax.Array:
    return buffer.filled.mean(dtype=jnp.float32)


def score_weights(
    scores: jax.Array, filled: jax.Array, temperature: float, prioritization: Prioritization
) -> jax.Array:
    """Unnormalized score weights of filled slots (0 for empty ones)."""
    if prioritization == "rank":
        # Rank 1 is the highest score among filled slots; ties keep slot order (a stable sort).
        order = jnp.argsort(jnp.where(filled, -scores, jnp.inf), stable=True)
        ranks = jnp.empty_like(order).at[order].set(jnp.arange(1, scores.shape[0] + 1))
        weights = (1.0 / ranks) ** (1.0 / temperature)
    else:
        weights = jnp.maximum(scores, 0.0) ** (1.0 / temperature)
    return jnp.where(filled, weights, 0.0)


def replay_probabilities(
    buffer: LevelBuffer, temperature: float, staleness_coef: float, prioritization: Prioritization
) -> jax.Array:
    """float32[capacity]: P over filled slots (zeros while the buffer is empty)."""
    weights = score_weights(buffer.scores, buffer.filled, temperature, prioritization)
    # Where a distribution has no mass (all ages 0; proportional with no positive score) it is uniform
    # over filled slots rather than undefined.
    uniform = buffer.filled / jnp.maximum(buffer.filled.sum(), 1)
    score_probs = jnp.where(weights.sum() > 0, weights / jnp.maximum(weights.sum(), 1e-12), uniform)
    ages = jnp.where(buffer.filled, buffer.ages, 0).astype(jnp.float32)
    staleness_probs = jnp.where(ages.sum() > 0, ages / jnp.maximum(ages.sum(), 1e-12), uniform)
    return (1.0 - staleness_coef) * score_probs + staleness_coef * staleness_probs


def sample_replay(
    rng: jax.Array,
    buffer: LevelBuffer,
    num_levels: int,
    temperature: float,
    staleness_coef: float,
    prioritization: Prioritization,
) -> tuple[LevelBuffer, jax.Array]:
    """Draw `num_levels` slots one after another; after each draw every filled slot ages by 1 and the drawn
    slot's age resets to 0. Returns (the aged buffer, slot indices [num_levels])."""

    def draw(buffer: LevelBuffer, rng_draw):
        probs = replay_probabilities(buffer, temperature, staleness_coef, prioritization)
        index = jax.random.choice(rng_draw, buffer.capacity, p=probs)
        ages = jnp.where(buffer.filled, buffer.ages + 1, 0).at[index].set(0)
        return buffer.replace(ages=ages), index

    return jax.lax.scan(draw, buffer, jax.random.split(rng, num_levels))


def find_level(buffer: LevelBuffer, level: Level) -> tuple[jax.Array, jax.Array]:
    """(found, slot index) of a filled slot holding an equal level (walls, goal and agent position)."""
    equal = jax.vmap(levels_equal, (0, None))(buffer.levels, level) & buffer.filled
    return equal.any(), jnp.argmax(equal)


def update_slots(buffer: LevelBuffer, indices: jax.Array, scores: jax.Array, max_returns: jax.Array) -> LevelBuffer:
    """Replayed levels update their own slots: the new score and the running maximum return."""
    return buffer.replace(
        scores=buffer.scores.at[indices].set(scores),
        max_returns=buffer.max_returns.at[indices].max(max_returns),
    )


def insert(
    buffer: LevelBuffer,
    level: Level,
    score: jax.Array,
    max_return: jax.Array,
    mutations: jax.Array,
    temperature: float,
    staleness_coef: float,
    prioritization: Prioritization,
) -> tuple[LevelBuffer, jax.Array]:
    """Insert one new level. A duplicate of a filled slot updates that slot instead; otherwise the level
    takes an empty slot, or, when full, replaces the slot with the lowest replay probability if its
    score is at least that slot's. Returns (buffer, the slot written or -1 when rejected)."""
    duplicate, duplicate_index = find_level(buffer, level)
    probs = replay_probabilities(buffer, temperature, staleness_coef, prioritization)
    has_empty = ~buffer.filled.all()
    weakest = jnp.argmin(jnp.where(buffer.filled, probs, jnp.inf))
    target = jnp.where(has_empty, jnp.argmin(buffer.filled), weakest)
    accepted = has_empty | (score >= buffer.scores[weakest])

    updated = update_slots(buffer, duplicate_index[None], score[None], max_return[None])
    written = LevelBuffer(
        levels=jax.tree.map(lambda slots, new: slots.at[target].set(new), buffer.levels, level),
        scores=buffer.scores.at[target].set(score),
        max_returns=buffer.max_returns.at[target].set(max_return),
        ages=buffer.ages.at[target].set(0),
        filled=buffer.filled.at[target].set(True),
        mutations=buffer.mutations.at[target].set(mutations),
    )
    rejected = buffer
    result = jax.tree.map(
        lambda dup, new, old: jnp.where(duplicate, dup, jnp.where(accepted, new, old)), updated, written, rejected
    )
    slot = jnp.where(duplicate, duplicate_index, jnp.where(accepted, target, -1))
    return result, slot


def insert_many(
    buffer: LevelBuffer,
    levels: Level,
    scores: jax.Array,
    max_returns: jax.Array,
    mutations: jax.Array,
    temperature: float,
    staleness_coef: float,
    prioritization: Prioritization,
    active: jax.Array | None = None,
) -> tuple[LevelBuffer, jax.Array]:
    """`insert` for a batch, one level after another (each sees the buffer the previous one left). Levels
    whose `active` entry is False are skipped (slot -1), so a fixed-size batch can insert a varying subset."""
    if active is None:
        active = jnp.ones(scores.shape[0], bool)

    def one(buffer, new):
        level, score, max_return, generation, is_active = new
        inserted, slot = insert(
            buffer, level, score, max_return, generation, temperature, staleness_coef, prioritization
        )
        kept = jax.tree.map(lambda a, b: jnp.where(is_active, a, b), inserted, buffer)
        return kept, jnp.where(is_active, slot, -1)

    return jax.lax.scan(one, buffer, (levels, scores, max_returns, mutations, active))
