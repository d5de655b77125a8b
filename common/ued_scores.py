"""UED level scores from one rollout on each level (docs/methods.md#ued-scores), jittable and vmappable.

Inputs are per env over the rollout's time axis: `rewards`, `dones`, `values`, `advantages`, each [T].
Only episodes that end inside the rollout count; a level's score is the mean over its completed
episodes (0 where none completed: callers check `dones.any()`).
"""

import jax
import jax.numpy as jnp

from envs.maze import goal_reward


def _episode_means(per_step: jax.Array, dones: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(mean over completed episodes of the per-episode time-average of `per_step`, completed count).

    Step t belongs to episode `number of dones before t`; episodes numbered below the total number of
    dones ended inside the rollout."""
    num_steps = dones.shape[0]
    dones = dones.astype(jnp.int32)
    episode = jnp.cumsum(dones) - dones  # [T]: index of the episode each step belongs to
    completed = jnp.sum(dones)
    in_completed = episode < completed
    sums = jax.ops.segment_sum(jnp.where(in_completed, per_step, 0.0), episode, num_segments=num_steps)
    lengths = jax.ops.segment_sum(in_completed.astype(jnp.float32), episode, num_segments=num_steps)
    per_episode = sums / jnp.maximum(lengths, 1.0)
    mean = jnp.sum(jnp.where(jnp.arange(num_steps) < completed, per_episode, 0.0)) / jnp.maximum(completed, 1)
    return mean, completed


def positive_value_loss(advantages: jax.Array, dones: jax.Array) -> jax.Array:
    """PVL: time-average of max(A_t, 0) over each completed episode, averaged over episodes."""
    return _episode_means(jnp.maximum(advantages, 0.0), dones)[0]


def l1_value_loss(advantages: jax.Array, dones: jax.Array) -> jax.Array:
    """Time-average of |A_t| over each completed episode, averaged over episodes."""
    return _episode_means(jnp.abs(advantages), dones)[0]


def episode_returns(rewards: jax.Array, dones: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(mean, max) undiscounted return over completed episodes (0 where none completed)."""
    num_steps = dones.shape[0]
    dones = dones.astype(jnp.int32)
    episode = jnp.cumsum(dones) - dones
    completed = jnp.sum(dones)
    returns = jax.ops.segment_sum(rewards, episode, num_segments=num_steps)
    valid = jnp.arange(num_steps) < completed
    mean = jnp.sum(jnp.where(valid, returns, 0.0)) / jnp.maximum(completed, 1)
    best = jnp.where(completed > 0, jnp.max(jnp.where(valid, returns, -jnp.inf)), 0.0)
    return mean, best


def max_mc(
    rewards: jax.Array, dones: jax.Array, values: jax.Array, max_return: jax.Array, running_max: bool = False
) -> tuple[jax.Array, jax.Array]:
    """MaxMC: time-average of R_max - V(s_t) over each completed episode, averaged over episodes, where
    R_max is the highest return achieved on the level: the larger of `max_return` (stored in the level's
    buffer slot) and this rollout's best. Can be negative: use rank prioritization.

    Returns (score, the max return to store in the slot). By default that is this rollout's best return, as
    minimax-lib 0.2.0 stores (`compute_max_mc`), so R_max spans the level's last two rollouts. With
    `running_max` it is R_max itself, so R_max is the highest return ever achieved on the level, the
    papers' definition (a documented deviation from minimax; the score of one rollout is the same either
    way, only what the slot keeps differs). Where no episode completed, `max_return` is returned unchanged
    (minimax does not update such a level at all: pass `active` to the buffer)."""
    _, best = episode_returns(rewards, dones)
    completed = jnp.sum(dones.astype(jnp.int32)) > 0
    highest = jnp.where(completed, jnp.maximum(max_return, best), max_return)
    stored = highest if running_max else jnp.where(completed, best, max_return)
    return _episode_means(highest - values, dones)[0], stored


def outcome_counts(rewards: jax.Array, dones: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(float32 successes, float32 failures): the finished episodes of this rollout that reached the goal and those
    that did not (a time-out is a failure). Floats, as a buffer slot adds them to its decayed counts."""
    successes = jnp.sum(dones & (rewards > 0), dtype=jnp.float32)
    return successes, jnp.sum(dones, dtype=jnp.float32) - successes


def learnability(successes: jax.Array, failures: jax.Array) -> jax.Array:
    """SFL's learnability p (1 - p), with p = successes / (successes + failures): the level's success rate over the
    episodes finished on it (the counts its buffer slot keeps over its plays, `LevelBuffer.successes` and
    `.failures`). 0 where no episode finished yet; such a level never enters a buffer (no finished episode:
    inactive).

    Computed as s f / (s + f)^2 from the two counts, which is symmetric in them operation by operation, so p and
    1 - p give the same float exactly (p * (1 - p) in float32 does not, nor does s (e - s) once the counts are
    decayed): levels with mirrored success rates tie, as the rank prioritization's shared ties expect."""
    successes, failures = jnp.asarray(successes, jnp.float32), jnp.asarray(failures, jnp.float32)
    total = successes + failures
    return jnp.where(total > 0, successes * failures / jnp.where(total > 0, total * total, 1.0), 0.0)


def true_regret(rewards: jax.Array, dones: jax.Array, optimal_steps: jax.Array, max_steps: int) -> jax.Array:
    """Exact regret: over the episodes completed in this rollout (which starts at an episode's start, as every
    script's does), the mean of the level's optimal return minus the episode's return. `optimal_steps` is the
    fewest steps to the goal (`envs.levels.optimal_steps`, -1: unreachable; the optimal return is then 0).

    An episode that reached the goal in the optimal number of steps contributes exactly 0, by its length rather
    than by subtracting two floats (XLA may round the same reward formula differently in two programs); any
    other contributes at least 0.9 / max_steps less a rounding error, or the whole optimal return when it failed.
    So the score is never negative, and 0 exactly on a level solved optimally every time, or on one no policy
    can solve within the episode limit."""
    num_steps = dones.shape[0]
    dones = dones.astype(jnp.int32)
    episode = jnp.cumsum(dones) - dones
    completed = jnp.sum(dones)
    returns = jax.ops.segment_sum(rewards, episode, num_segments=num_steps)
    lengths = jax.ops.segment_sum(jnp.ones(num_steps, jnp.int32), episode, num_segments=num_steps)
    optimal = jnp.where(optimal_steps >= 0, goal_reward(optimal_steps, max_steps), 0.0)
    optimal_play = (returns > 0) & (lengths == optimal_steps)
    regrets = jnp.where(optimal_play, 0.0, optimal - returns)
    return jnp.sum(jnp.where(jnp.arange(num_steps) < completed, regrets, 0.0)) / jnp.maximum(completed, 1)
