"""Zero-shot evaluation of a recurrent policy on held-out mazes, the same protocol for every method (so a
variant author cannot change it by accident): actions are sampled, and each attempt counts its first
episode. Jittable and vmappable; the policy is passed in as its network's `apply`. `play_levels_restarting`
counts as SFL's risk evaluation does instead: every episode a window of steps ends, the level restarted.
"""

import functools
from collections.abc import Callable
from typing import NamedTuple

import distrax
import jax
import jax.numpy as jnp

from common.devices import scan_unroll
from envs.heldout import HELDOUT_MAZES, HeldoutMaze
from envs.maze import EnvParams, Level, Observation, reset_to_level, step, step_and_restart


class EvalState(NamedTuple):  # leaves [num_episodes, ...]
    obs: Observation
    env_state: object
    carry: object
    finished: jax.Array  # the first episode has ended
    returns: jax.Array
    lengths: jax.Array


class EvalResult(NamedTuple):
    returns: jax.Array  # [E], first episode of each attempt
    episode_length: jax.Array  # [E], steps of that episode
    levels: Level  # [E]
    agent_pos: jax.Array  # [T, E, 2]
    agent_dir: jax.Array  # [T, E]


def evaluate_policy(
    rng, apply: Callable, params, carry, maze: HeldoutMaze, env_params: EnvParams, num_episodes: int, unroll: int = 1
) -> EvalResult:
    """Sampled-action rollouts on `num_episodes` levels of `maze`, counting each one's first episode.

    `apply(params, carry, obs [1, E, ...], reset [1, E]) -> (carry, logits [1, E, A], value)` is the policy
    network's apply and `carry` its initial carry for E envs. Trajectories cover the maze's max_steps; they
    feed GIFs, and jit drops them when unused. `unroll`: steps per iteration of the rollout's scan."""
    rng_levels, rng_play = jax.random.split(rng)
    levels = jax.vmap(maze.sample)(jax.random.split(rng_levels, num_episodes))
    return play_levels(rng_play, apply, params, carry, levels, maze.env_params(env_params), maze.max_steps, unroll)


def play_levels(
    rng, apply: Callable, params, carry, levels: Level, env_params: EnvParams, max_steps: int, unroll: int = 1
) -> EvalResult:
    """One attempt on each of the levels (leading axis E): sampled actions for `max_steps` steps (`unroll` per
    loop iteration), the first episode counted."""
    num_episodes = levels.wall_map.shape[0]
    rng_reset, rng_steps = jax.random.split(rng)
    obs, env_state = jax.vmap(reset_to_level, (None, 0, None))(rng_reset, levels, env_params)
    step_env = jax.vmap(functools.partial(step, params=env_params))
    no_reset = jnp.zeros((1, num_episodes), bool)

    def one_step(state: EvalState, rng_step):
        rng_action, rng_env = jax.random.split(rng_step)
        carry, logits, _ = apply(params, state.carry, jax.tree.map(lambda x: x[None], state.obs), no_reset)
        action = distrax.Categorical(logits=logits[0]).sample(seed=rng_action)
        obs, env_state, reward, done, _ = step_env(jax.random.split(rng_env, num_episodes), state.env_state, action)
        state = EvalState(
            obs=obs,
            env_state=env_state,
            carry=carry,
            finished=state.finished | done,
            returns=state.returns + jnp.where(state.finished, 0.0, reward),
            lengths=state.lengths + ~state.finished,
        )
        return state, (env_state.agent_pos, env_state.agent_dir)

    zeros = jnp.zeros(num_episodes, jnp.int32)
    start = EvalState(obs, env_state, carry, zeros.astype(bool), zeros * 0.0, zeros)
    end, (positions, directions) = jax.lax.scan(one_step, start, jax.random.split(rng_steps, max_steps), unroll=unroll)
    return EvalResult(end.returns, end.lengths, levels, positions, directions)


class WindowCounts(NamedTuple):
    successes: jax.Array  # [E] episodes that reached the goal within the window
    episodes: jax.Array  # [E] episodes that ended within the window (the goal or the time limit)


def play_levels_restarting(
    rng, apply: Callable, params, carry, levels: Level, env_params: EnvParams, window: int, unroll: int = 1
) -> WindowCounts:
    """One attempt on each of the levels (leading axis E) as SFL's evaluation runner plays it (Rutherford et al.,
    2024: `AutoReplay` for the episode limit's number of steps): sampled actions for `window` steps, the level
    restarted after each episode with the carry zeroed, every episode that ends in the window counted. A policy that
    solves a level fast counts many successes there, and one that times out a single failure."""
    num_envs = levels.wall_map.shape[0]
    rng_reset, rng_steps = jax.random.split(rng)
    obs, env_state = jax.vmap(reset_to_level, (None, 0, None))(rng_reset, levels, env_params)
    step_env = jax.vmap(functools.partial(step_and_restart, params=env_params))

    def one_step(state, rng_step):
        obs, env_state, carry, reset, counts = state
        rng_action, rng_env = jax.random.split(rng_step)
        carry, logits, _ = apply(params, carry, jax.tree.map(lambda x: x[None], obs), reset[None])
        action = distrax.Categorical(logits=logits[0]).sample(seed=rng_action)
        obs, env_state, reward, done, _ = step_env(jax.random.split(rng_env, num_envs), env_state, action)
        counts = WindowCounts(counts.successes + (done & (reward > 0)), counts.episodes + done)
        return (obs, env_state, carry, done, counts), None

    zeros = jnp.zeros(num_envs, jnp.int32)
    start = (obs, env_state, carry, zeros.astype(bool), WindowCounts(zeros, zeros))
    (*_, counts), _ = jax.lax.scan(one_step, start, jax.random.split(rng_steps, window), unroll=unroll)
    return counts


def heldout_metrics(
    rng,
    apply: Callable,
    params,
    carry,
    mazes: dict[str, HeldoutMaze],
    env_params: EnvParams,
    num_episodes: int,
    unroll: int = 1,
) -> dict:
    """`eval/solve_rate/<maze>` and `eval/return/<maze>` over `num_episodes` attempts on each maze (each maze
    with its own key, folded from `rng`)."""
    metrics = {}
    for index, (name, maze) in enumerate(mazes.items()):
        returns = evaluate_policy(
            jax.random.fold_in(rng, index), apply, params, carry, maze, env_params, num_episodes, unroll
        ).returns
        metrics[f"eval/solve_rate/{name}"] = (returns > 0).mean()
        metrics[f"eval/return/{name}"] = returns.mean()
    return metrics


def heldout_evaluator(apply: Callable, params_of: Callable, carry, run, env_params: EnvParams) -> Callable:
    """A script's one-seed `evaluate(runner)`: `heldout_metrics` of `params_of(runner)` with --eval-episodes
    attempts on each of --eval-mazes (`run`: a common.config.RunConfig; `carry`: the network's initial carry for
    that many envs). Keys are folded from the runner's fixed `rng_eval` with its `update`, so evaluating never
    changes training. The rollouts unroll as --unroll says (`common.devices.scan_unroll`)."""
    mazes = {name: HELDOUT_MAZES[name] for name in run.eval_mazes}
    unroll = scan_unroll(run.devices)

    def evaluate(runner) -> dict:
        rng = jax.random.fold_in(runner.rng_eval, runner.update)
        return heldout_metrics(rng, apply, params_of(runner), carry, mazes, env_params, run.eval_episodes, unroll)

    return evaluate
