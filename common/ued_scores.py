"""UED level scores from one rollout on each level (../shared/UED.md), jittable and vmappable.

Inputs are per env over the rollout's time axis: `rewards`, `dones`, `values`, `advantages`, each [T].
Only episodes that end inside the rollout count; a level's score is the mean over its completed
episodes (0 where none completed: callers check `dones.any()`).
"""

import jax
import jax.numpy as jnp


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
    rewards: jax.Array, dones: jax.Array, values: jax.Array, max_return: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """MaxMC: time-average of R_max - V(s_t) over each completed episode, averaged over episodes, where
    R_max is the highest return ever achieved on the level: the running maximum `max_return` kept in the
    buffer, raised by this rollout's episodes first (minimax uses this rollout's best alone, a bug we
    do not copy). Returns (score, the updated running maximum). Can be negative: use rank prioritization."""
    _, best = episode_returns(rewards, dones)
    completed = jnp.sum(dones.astype(jnp.int32))
    running_max = jnp.where(completed > 0, jnp.maximum(max_return, best), max_return)
    return _episode_means(running_max - values, dones)[0], running_max
