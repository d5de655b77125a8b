"""The PLR level buffer as a struct and pure functions (docs/methods.md#plr-level-buffer), jittable and vmappable.

Slots hold a level, its score, the highest return achieved on it (MaxMC), its outcome counts over its plays
(successes and failures, earlier plays' decayed, what learnability estimates p from), its age (staleness), a filled
flag and its number of mutation generations. Replay probabilities are
    P = (1 - staleness_coef) * P_score + staleness_coef * P_staleness
over filled slots, with P_score by rank (the k-th highest score gets (1/k)^(1/temperature)) or
proportional (max(score, 0)^(1/temperature)), and P_staleness = age / sum(age). Under rank
prioritization, levels with equal scores share the mean of the weights of the ranks they span, so equal
scores get equal probability (`ties="shared"`); minimax ranks them by slot, the first slot highest
(`ties="slot_order"`, a flagged deviation: docs/deviations.md).

The bookkeeping is minimax-lib 0.2.0's `PLRManager` with `force_unique` (`minimax/util/rl/plr.py`), cycle for
cycle (tests/test_level_buffer.py replays a recorded sequence of its cycles, tests/fixtures/minimax_plr_buffer.npz):
- Ages. A cycle that replays draws its levels one after another (`sample_replay`): after each draw every
  filled slot ages by 1 and the drawn one restarts at 0. A cycle that plays new levels ages every filled
  slot by the number of levels played (`age_filled`), before its levels compete for slots. Ages count
  levels played since a slot was last replayed, as the papers' staleness counts episodes.
- Scores. A level is scored only where its rollout finished an episode; the others are skipped
  (`active`). A replayed level's slot takes the new score and max return (`update_slots`).
- Insertion (`insert_many`, `insert`). Each new level is first matched against the buffer as it was
  before the batch (`match_levels`, walls, goal and start position); a level equal to an earlier one of
  the same batch is skipped, and one equal to a filled slot updates that slot's score and max return
  instead of being inserted. Others take the first empty slot, or, when the buffer is full, the slot
  with the lowest replay probability if their score is at least that slot's; a level written over an
  evicted slot keeps that slot's age (pass `reset_age_on_insert=True` to start it at 0, as the original
  PLR code's insertion did).
- When no filled slot has an age above 0, P_staleness falls back to P_score (minimax).

Deviations kept on purpose (minimax's behaviour is a bug or degenerate there): a score distribution with
no mass (proportional, no positive score) is uniform over filled slots, where minimax's is all zeros;
proportional weights clamp negative scores at 0 and ignore empty slots, where minimax's raise a negative
score to a fractional power (NaN) and multiply the empty slots' -inf scores by 0 (NaN, which makes its
score distribution while the buffer is not full the unnormalised indicator of filled slots); batches of
one or two levels are deduplicated like larger ones (minimax skips deduplication below three).
"""

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from envs.maze import Level

Prioritization = Literal["rank", "proportional"]
Ties = Literal["shared", "slot_order"]


@struct.dataclass
class LevelBuffer:
    levels: Level  # leaves [capacity, ...]
    scores: jax.Array  # float32[capacity]
    max_returns: jax.Array  # float32[capacity], highest return achieved on the level (MaxMC)
    ages: jax.Array  # int32[capacity], levels played since the slot was last replayed (staleness)
    filled: jax.Array  # bool[capacity]
    mutations: jax.Array  # int32[capacity], mutation generations (0 for generated levels)
    successes: jax.Array  # float32[capacity], episodes finished at the goal, earlier plays' decayed per play
    failures: jax.Array  # float32[capacity], episodes finished otherwise (a time-out is a failure), decayed alike

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
        successes=jnp.zeros(capacity, jnp.float32),
        failures=jnp.zeros(capacity, jnp.float32),
    )


class LevelHistory(NamedTuple):
    """What a slot keeps about its level's plays, for a batch of levels (each leaf [n])."""

    max_return: jax.Array  # float32, highest return achieved (MaxMC's R_max)
    successes: jax.Array  # float32, finished episodes that reached the goal (decayed over plays)
    failures: jax.Array  # float32, finished episodes that did not (decayed over plays)


def slot_history(buffer: LevelBuffer, slots: jax.Array) -> LevelHistory:
    """The history kept in `slots` (int32[n], -1 for a level not in the buffer: zeros)."""
    found = slots >= 0

    def read(values):
        return jnp.where(found, values[jnp.maximum(slots, 0)], 0).astype(values.dtype)

    return LevelHistory(read(buffer.max_returns), read(buffer.successes), read(buffer.failures))


def fill_ratio(buffer: LevelBuffer) -> jax.Array:
    return buffer.filled.mean(dtype=jnp.float32)


class Ranking(NamedTuple):
    """Where each filled slot stands under rank prioritization (int32[capacity] each; meaningless for empty slots)."""

    above: (
        jax.Array
    )  # filled slots ranked above it: a higher score, or (slot_order ties) an equal one in an earlier slot
    ties: jax.Array  # filled slots sharing its score, itself included (shared ties); 1 under slot_order


def rank_slots(scores: jax.Array, filled: jax.Array, ties: Ties = "shared") -> Ranking:
    """The ranking of the filled slots by score, highest first, from one sort (empty slots rank last)."""
    capacity = scores.shape[0]
    sort_keys = jnp.where(filled, -scores, jnp.inf)
    order = jnp.argsort(sort_keys, stable=True)
    unsort = lambda values: jnp.empty(capacity, jnp.int32).at[order].set(values)  # noqa: E731
    positions = jnp.arange(capacity, dtype=jnp.int32)
    if ties == "slot_order":
        return Ranking(unsort(positions), jnp.ones(capacity, jnp.int32))
    sorted_keys = sort_keys[order]
    starts = jnp.concatenate([jnp.ones(1, bool), sorted_keys[1:] != sorted_keys[:-1]])
    group = jnp.cumsum(starts) - 1
    first = jax.ops.segment_min(positions, group, num_segments=capacity)
    sizes = jax.ops.segment_sum(jnp.ones(capacity, jnp.int32), group, num_segments=capacity)
    return Ranking(unsort(first[group]), unsort(sizes[group]))


def rerank(ranking: Ranking, scores: jax.Array, filled: jax.Array, slot: jax.Array, score: jax.Array, ties: Ties):
    """The ranking once `slot` holds a level scoring `score` (`scores` and `filled` as before): every other slot
    moves by the one it gained above or beside it and the one it lost, so no sort is needed."""
    index = jnp.arange(scores.shape[0])
    was_filled = filled[slot]

    def ahead(value):  # a level scoring `value` in `slot` ranks above each slot
        above = value > scores
        return above | ((value == scores) & (slot < index)) if ties == "slot_order" else above

    others = filled & (index != slot)
    above = ranking.above + ahead(score) - (was_filled & ahead(scores[slot]))
    own_above = jnp.sum(others & ((scores > score) | ((scores == score) & (index < slot) & (ties == "slot_order"))))
    if ties == "slot_order":
        tied, own_ties = ranking.ties, 1
    else:
        tied = ranking.ties + (score == scores) - (was_filled & (scores[slot] == scores))
        own_ties = 1 + jnp.sum(others & (scores == score))
    return Ranking(
        jnp.where(index == slot, own_above, above).astype(jnp.int32),
        jnp.where(index == slot, own_ties, tied).astype(jnp.int32),
    )


def rank_weights(ranking: Ranking, temperature: float) -> jax.Array:
    """The k-th highest score weighs (1/k)^(1/temperature); a group of equal scores (shared ties) shares the mean
    weight of the ranks it spans, so it keeps the probability the slot order gave it, spread evenly (learnability
    and exact regret tie often)."""
    capacity = ranking.above.shape[0]
    weights = (1.0 / jnp.arange(1, capacity + 1)) ** (1.0 / temperature)
    cumulative = jnp.concatenate([jnp.zeros(1), jnp.cumsum(weights)])
    shared = (cumulative[ranking.above + ranking.ties] - cumulative[ranking.above]) / ranking.ties
    return jnp.where(ranking.ties == 1, weights[ranking.above], shared)


def score_weights(
    scores: jax.Array,
    filled: jax.Array,
    temperature: float,
    prioritization: Prioritization,
    ties: Ties = "shared",
    ranking: Ranking | None = None,
) -> jax.Array:
    """Unnormalized score weights of filled slots (0 for empty ones); rank prioritization reads `ranking` when given
    (kept up to date by `rerank`), else ranks the slots."""
    if prioritization == "rank":
        weights = rank_weights(rank_slots(scores, filled, ties) if ranking is None else ranking, temperature)
    else:
        weights = jnp.maximum(scores, 0.0) ** (1.0 / temperature)
    return jnp.where(filled, weights, 0.0)


def score_probabilities(
    buffer: LevelBuffer,
    temperature: float,
    prioritization: Prioritization,
    ties: Ties = "shared",
    ranking: Ranking | None = None,
) -> jax.Array:
    """float32[capacity]: P_score over filled slots. A score distribution with no mass (proportional with no positive
    score) is uniform over filled slots rather than undefined."""
    weights = score_weights(buffer.scores, buffer.filled, temperature, prioritization, ties, ranking)
    uniform = buffer.filled / jnp.maximum(buffer.filled.sum(), 1)
    return jnp.where(weights.sum() > 0, weights / jnp.maximum(weights.sum(), 1e-12), uniform)


def with_staleness(score_probs: jax.Array, buffer: LevelBuffer, staleness_coef: float) -> jax.Array:
    """The replay distribution from P_score and the slots' ages; with no stale slot the staleness term is P_score
    (minimax)."""
    ages = jnp.where(buffer.filled, buffer.ages, 0).astype(jnp.float32)
    staleness_probs = jnp.where(ages.sum() > 0, ages / jnp.maximum(ages.sum(), 1e-12), score_probs)
    return (1.0 - staleness_coef) * score_probs + staleness_coef * staleness_probs


def replay_probabilities(
    buffer: LevelBuffer,
    temperature: float,
    staleness_coef: float,
    prioritization: Prioritization,
    ties: Ties = "shared",
    ranking: Ranking | None = None,
) -> jax.Array:
    """float32[capacity]: P over filled slots (zeros while the buffer is empty); `ranking` as in `score_weights`."""
    score_probs = score_probabilities(buffer, temperature, prioritization, ties, ranking)
    return with_staleness(score_probs, buffer, staleness_coef)


def record_draw(buffer: LevelBuffer, index: jax.Array) -> LevelBuffer:
    """After one replay draw: every filled slot ages by 1 and the drawn slot restarts at 0."""
    return buffer.replace(ages=jnp.where(buffer.filled, buffer.ages + 1, 0).at[index].set(0))


def age_filled(buffer: LevelBuffer, num_levels: int | jax.Array) -> LevelBuffer:
    """A cycle that plays `num_levels` new levels instead of replaying: every filled slot ages by that many
    (minimax's `PLRManager.sample` on a non-replay cycle). Call it before inserting that cycle's levels."""
    return buffer.replace(ages=jnp.where(buffer.filled, buffer.ages + num_levels, 0))


def sample_replay(
    rng: jax.Array,
    buffer: LevelBuffer,
    num_levels: int,
    temperature: float,
    staleness_coef: float,
    prioritization: Prioritization,
    ties: Ties = "shared",
) -> tuple[LevelBuffer, jax.Array]:
    """Draw `num_levels` slots one after another, each from the replay distribution of the buffer as the
    previous draws left it (`record_draw`). Returns (the aged buffer, slot indices [num_levels]). The keys
    are minimax's (`rng, *keys = split(rng, num_levels + 1)`), so the same key draws the same slots.
    Draws change only ages, so the score ranking is computed once and each draw redoes only the staleness term."""
    score_probs = score_probabilities(buffer, temperature, prioritization, ties)

    def draw(buffer: LevelBuffer, rng_draw):
        probs = with_staleness(score_probs, buffer, staleness_coef)
        index = jax.random.choice(rng_draw, buffer.capacity, p=probs)
        return record_draw(buffer, index), index

    return jax.lax.scan(draw, buffer, jax.random.split(rng, num_levels + 1)[1:])


def level_keys(levels: Level) -> jax.Array:
    """uint32[..., K]: what `levels_equal` compares, packed (walls 32 cells to a word, then goal and agent
    positions), so two levels are equal exactly when their keys are."""
    walls = levels.wall_map.reshape(*levels.wall_map.shape[:-2], -1)
    walls = jnp.pad(walls, [(0, 0)] * (walls.ndim - 1) + [(0, -walls.shape[-1] % 32)])
    bits = walls.reshape(*walls.shape[:-1], -1, 32).astype(jnp.uint32) << jnp.arange(32, dtype=jnp.uint32)
    words = bits.sum(-1, dtype=jnp.uint32)  # distinct powers of two: the sum is the bitwise or
    positions = jnp.concatenate([levels.goal_pos, levels.agent_pos], -1).astype(jnp.uint32)
    return jnp.concatenate([words, positions], -1)


def match_levels(buffer: LevelBuffer, levels: Level) -> tuple[jax.Array, jax.Array]:
    """For a batch of levels: (int32[n] the first filled slot holding an equal level, or -1; bool[n] equal to
    an earlier level of the batch). minimax's `dedupe_levels`, against the buffer before the batch, as one batched
    comparison of packed keys (`level_keys`)."""
    held, offered = level_keys(buffer.levels), level_keys(levels)
    equal = (offered[:, None, :] == held[None, :, :]).all(-1) & buffer.filled  # [n, capacity]
    same = (offered[:, None, :] == offered[None, :, :]).all(-1)  # [n, n]
    count = offered.shape[0]
    earlier = jnp.arange(count)[None, :] < jnp.arange(count)[:, None]
    matched = jnp.where(equal.any(1), jnp.argmax(equal, 1), -1).astype(jnp.int32)
    return matched, (same & earlier).any(1)


def first_occurrences(indices: jax.Array) -> jax.Array:
    """bool[n]: no earlier entry has the same index."""
    count = indices.shape[0]
    earlier = jnp.arange(count)[None, :] < jnp.arange(count)[:, None]
    return ~((indices[:, None] == indices[None, :]) & earlier).any(1)


def update_slots(
    buffer: LevelBuffer,
    indices: jax.Array,
    scores: jax.Array,
    max_returns: jax.Array,
    active: jax.Array | None = None,
) -> LevelBuffer:
    """Replayed levels update their own slots: the new score and max return (what the scorer returns to
    store, `common/ued_scores.py`). Only active entries count (pass whether each rollout finished an
    episode), and of entries naming the same slot only the first, whether active or not (minimax
    deduplicates a replay batch too)."""
    keep = first_occurrences(indices)
    if active is not None:
        keep = keep & active
    target = jnp.where(keep, indices, buffer.capacity)  # out of range: dropped
    return buffer.replace(
        scores=buffer.scores.at[target].set(scores, mode="drop"),
        max_returns=buffer.max_returns.at[target].set(max_returns, mode="drop"),
    )


def next_slot(
    buffer: LevelBuffer,
    temperature: float,
    staleness_coef: float,
    prioritization: Prioritization,
    ties: Ties = "shared",
    ranking: Ranking | None = None,
):
    """The slot a new level would take: the first empty one, else the filled one least likely to be replayed."""
    probs = replay_probabilities(buffer, temperature, staleness_coef, prioritization, ties, ranking)
    weakest = jnp.argmin(jnp.where(buffer.filled, probs, jnp.inf))
    return jnp.where(buffer.filled.all(), weakest, jnp.argmin(buffer.filled))


def insert_many(
    buffer: LevelBuffer,
    levels: Level,
    scores: jax.Array,
    max_returns: jax.Array,
    mutations: jax.Array,
    temperature: float,
    staleness_coef: float,
    prioritization: Prioritization,
    ties: Ties = "shared",
    active: jax.Array | None = None,
    reset_age_on_insert: bool = False,
    successes: jax.Array | None = None,
    failures: jax.Array | None = None,
) -> tuple[LevelBuffer, jax.Array]:
    """Offer a batch of new levels to the buffer, one after another (minimax's `PLRManager.update` after
    `dedupe_levels`). Inactive levels (no finished episode) and repeats of an earlier level of the batch are
    skipped; a level equal to a filled slot (in the buffer before the batch) updates that slot's score and
    max return; any other takes `next_slot` if that slot is empty or its score is at most the level's.
    A level written over an evicted slot keeps that slot's age unless `reset_age_on_insert`. A replay batch
    can go through it too (each replayed level matches its own slot and updates it, the first copy of a
    slot drawn twice counting), which is how minimax updates both kinds of cycle with one call.
    `successes` and `failures` (float32[n], default 0) are the outcome counts to keep with each level, like
    `max_returns`: its slot's counts before this play plus this rollout's (`slot_history`).
    The buffer is ranked once (`rank_slots`); each level then moves the ranks by what it changed (`rerank`), so
    each `next_slot` costs elementwise work over the slots rather than a sort.
    Returns (buffer, int32[n] the slot each level wrote or updated, -1 where none)."""
    count = scores.shape[0]
    if active is None:
        active = jnp.ones(count, bool)
    successes = jnp.zeros(count, jnp.float32) if successes is None else successes
    failures = jnp.zeros(count, jnp.float32) if failures is None else failures
    matched, repeated = match_levels(buffer, levels)
    counts = active & ~repeated
    settings = (temperature, staleness_coef, prioritization, ties)

    def one(carry, new):
        buffer, written, ranking = carry  # written: bool[capacity], slots a level of this batch was written to
        level, score, max_return, generation, solved, failed, match, counts = new
        is_new = match < 0
        target = jnp.where(is_new, next_slot(buffer, *settings, ranking=ranking), match)
        update = counts & ~is_new & ~written[target]
        # minimax's edge case: a copy of a slot that an earlier level of this batch evicted competes for it.
        write = counts & (~buffer.filled[target] | (score >= buffer.scores[target])) & ~update
        touched = update | write
        reranked = rerank(ranking, buffer.scores, buffer.filled, target, score, ties)
        ranking = jax.tree.map(lambda after, before: jnp.where(touched, after, before), reranked, ranking)
        age = jnp.where(reset_age_on_insert, 0, buffer.ages[target])
        buffer = LevelBuffer(
            levels=jax.tree.map(
                lambda slots, new: slots.at[target].set(jnp.where(write, new, slots[target])), buffer.levels, level
            ),
            scores=buffer.scores.at[target].set(jnp.where(touched, score, buffer.scores[target])),
            max_returns=buffer.max_returns.at[target].set(jnp.where(touched, max_return, buffer.max_returns[target])),
            ages=buffer.ages.at[target].set(jnp.where(write, age, buffer.ages[target])),
            filled=buffer.filled.at[target].set(buffer.filled[target] | write),
            mutations=buffer.mutations.at[target].set(jnp.where(write, generation, buffer.mutations[target])),
            successes=buffer.successes.at[target].set(jnp.where(touched, solved, buffer.successes[target])),
            failures=buffer.failures.at[target].set(jnp.where(touched, failed, buffer.failures[target])),
        )
        written = written.at[target].set(written[target] | write)
        return (buffer, written, ranking), jnp.where(touched, target, -1).astype(jnp.int32)

    start = (buffer, jnp.zeros(buffer.capacity, bool), rank_slots(buffer.scores, buffer.filled, ties))
    (buffer, _, _), slots = jax.lax.scan(
        one, start, (levels, scores, max_returns, mutations, successes, failures, matched, counts)
    )
    return buffer, slots


def insert(
    buffer: LevelBuffer,
    level: Level,
    score: jax.Array,
    max_return: jax.Array,
    mutations: jax.Array,
    temperature: float,
    staleness_coef: float,
    prioritization: Prioritization,
    ties: Ties = "shared",
    reset_age_on_insert: bool = False,
) -> tuple[LevelBuffer, jax.Array]:
    """`insert_many` of one level. Returns (buffer, the slot written or updated, or -1 when rejected)."""
    batch = jax.tree.map(lambda x: jnp.asarray(x)[None], (level, score, max_return, mutations))
    buffer, slots = insert_many(
        buffer, *batch, temperature, staleness_coef, prioritization, ties, reset_age_on_insert=reset_age_on_insert
    )
    return buffer, slots[0]
