"""Domain Randomization (DR) on AMaze: PPO with a CNN+LSTM student on fresh random mazes every update.

The UED baseline of PAIRED (Dennis et al., 2020) and Robust PLR (Jiang et al., 2021); reference
implementation: minimax-lib 0.2.0 `DRRunner` with the shipped maze config (../shared/UED.md).
Every update resets all envs to fresh 60-wall levels, rolls out 256 steps with auto-reset to new random
levels, and takes one PPO update (5 epochs of full-rollout BPTT).

This file is the template the other algos/ scripts copy; their docstrings say "diff against: algos/dr.py".
Deviation from minimax, on purpose: the LSTM carry starts at zero with each update's fresh levels
(minimax carries the previous rollout's memory into them).

    python algos/dr.py --num-seeds 2 --run-name dr_demo
"""

import functools
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import tyro
from flax import struct
from flax.training.train_state import TrainState

# SCAFFOLDING: put the repo root on sys.path so `python algos/dr.py` can import envs and common.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.checkpoint import Checkpoints  # noqa: E402
from common.devices import initialize_distributed, make_placement, vmap_seeds  # noqa: E402
from common.runs import (  # noqa: E402
    ConfigError,
    RunLog,
    StopSignal,
    chunk_rows,
    compile_timed,
    config_to_dict,
    one_line_errors,
    prepare_run_dir,
    raise_first,
    record_config,
    run_config_problems,
    stop_reason,
)
from envs.heldout import HELDOUT_MAZES, HeldoutMaze  # noqa: E402
from envs.levels import sample_dr_level, shortest_path_length, wall_count  # noqa: E402
from envs.maze import NUM_ACTIONS, EnvParams, Level, Observation, reset_to_level, step, step_and_resample_batch  # noqa: E402
from envs.render import render_grid, save_png  # noqa: E402


@dataclass(frozen=True)
class Config:
    # Run
    seed: int = 0
    """Base seed; seed i of the run uses jax.random.split(key(seed), num_seeds)[i]."""
    num_seeds: int = 1
    """Independent runs vmapped in one process."""
    num_devices: int | None = None
    """Devices to use (default: all, if seeds or envs split evenly over them, else 1). Seeds are split across
    devices when they divide evenly, otherwise each seed's envs are (common/devices.py)."""
    shard_envs: bool = False
    """Split each seed's env batch across the devices (PPO gradients averaged) even when the seeds divide."""
    coordinator_address: str | None = None
    """host:port of process 0 in a multi-host run (jax.distributed; default: $JAX_COORDINATOR_ADDRESS)."""
    num_processes: int = 1
    """Processes in a multi-host run, one per host (default: $JAX_NUM_PROCESSES or 1)."""
    process_id: int | None = None
    """This process's index in a multi-host run (default: $JAX_PROCESS_ID); process 0 writes all files."""
    run_name: str = "dr"
    """Folder name under --runs-dir for config, logs, checkpoints, evaluations and images."""
    runs_dir: str = "runs"
    """Where run folders live."""
    resume: bool = False
    """Continue the run folder from its newest checkpoint (the config may differ only in run length and logging)."""
    overwrite: bool = False
    """Delete an existing run folder of the same name and start over."""
    total_updates: int = 30_000
    """Stop after this many PPO updates (UED.md: 30,000)."""
    total_env_steps: int | None = None
    """Also stop once each seed has taken this many env steps."""
    train_seconds: float | None = None
    """Also stop after this much wall-clock training time in this process."""
    log_interval: int = 10
    """Updates per jitted chunk: logs.csv, progress and stop checks happen between chunks."""
    eval_interval: int = 100
    """Updates between held-out evaluations (a multiple of --log-interval; 0 disables)."""
    eval_mazes: tuple[str, ...] = ("SixteenRooms", "Labyrinth", "StandardMaze")
    """Held-out mazes evaluated during training (UED.md)."""
    eval_episodes: int = 10
    """Episodes per maze per seed at each evaluation; actions are sampled, first episode counts."""
    checkpoint_interval: int = 100
    """Updates between checkpoints (a multiple of --log-interval)."""
    keep_checkpoints: int = 2
    """Newest checkpoints kept in checkpoints/."""
    archive_interval: int = 0
    """Updates between checkpoints copied to checkpoints/archive/ and never pruned (0 disables)."""
    screenshot_interval: int = 1000
    """Updates between PNG grids of current training levels in images/ (0 disables)."""
    track: bool = False
    """Log to Weights & Biases (one run per seed, grouped by run name; WANDB_MODE=offline works)."""
    wandb_project: str = "cleanued"
    """wandb project."""
    wandb_entity: str | None = None
    """wandb entity (team or user); default: your wandb default."""
    # Environment
    maze_size: int = 13
    """Interior height and width of training mazes."""
    n_walls: int = 60
    """Wall cells drawn with replacement per training level."""
    max_steps: int = 250
    """Episode length limit on training levels."""
    agent_view_size: int = 5
    """Side of the agent's egocentric view."""
    # PPO (UED.md, DR column)
    num_envs: int = 32
    """Parallel envs per seed."""
    num_steps: int = 256
    """Rollout length per update; PPO back-propagates through all of it."""
    lr: float = 1e-4
    """Adam learning rate."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over --total-updates (minimax's DR runs did not)."""
    adam_eps: float = 1e-5
    """Adam epsilon."""
    gamma: float = 0.995
    """Discount."""
    gae_lambda: float = 0.98
    """GAE lambda."""
    num_epochs: int = 5
    """PPO epochs per update."""
    num_minibatches: int = 1
    """Minibatches per epoch, split along envs (1: the whole rollout is one minibatch)."""
    clip_eps: float = 0.2
    """PPO clip range for the ratio and the value."""
    ent_coef: float = 1e-3
    """Entropy bonus coefficient."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    max_grad_norm: float = 0.5
    """Global gradient norm clip."""
    lstm_size: int = 256
    """LSTM units of the student."""

    def __post_init__(self):
        raise_first(
            [
                *run_config_problems(self),
                (
                    self.num_envs % self.num_minibatches != 0,
                    f"--num-envs ({self.num_envs}) must be divisible by --num-minibatches ({self.num_minibatches})",
                ),
                (not 0 <= self.n_walls, "--n-walls must be non-negative"),
                (self.maze_size < 2, "--maze-size must be at least 2"),
                (
                    self.agent_view_size % 2 == 0 or self.agent_view_size < 3,
                    "--agent-view-size must be odd and at least 3",
                ),
            ]
        )

    @property
    def env_steps_per_update(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def env_params(self) -> EnvParams:
        return EnvParams(max_steps=self.max_steps, agent_view_size=self.agent_view_size)


HEADLINE_METRICS = ("train/return",)
"""Metrics shown on the progress line (with the evaluation solve rates)."""


class Conv3x3(nn.Module):
    """nn.Conv(features, (3, 3), padding="VALID") written as one matmul over each cell's 3x3 patch: the
    same function, parameters and initial values. XLA:CPU runs a convolution's weight gradient inside a
    loop (the PPO epochs) 20-100x slower than outside (jaxlib 0.10.2); as a matmul it stays fast."""

    features: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:  # [..., H, W, C] -> [..., H - 2, W - 2, features]
        kernel = self.param("kernel", nn.initializers.orthogonal(np.sqrt(2)), (3, 3, x.shape[-1], self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        height, width = x.shape[-3] - 2, x.shape[-2] - 2
        patches = [x[..., row : row + height, col : col + width, :] for row in range(3) for col in range(3)]
        return jnp.concatenate(patches, -1) @ kernel.reshape(-1, self.features) + bias


class ScannedLSTM(nn.Module):
    """An LSTM over the time axis whose carry is zeroed where the previous step ended an episode."""

    @functools.partial(nn.scan, variable_broadcast="params", in_axes=0, out_axes=0, split_rngs={"params": False})
    @nn.compact
    def __call__(self, carry, inputs):
        features, reset = inputs
        carry = jax.tree.map(lambda c: jnp.where(reset[:, None], 0.0, c), carry)
        return nn.OptimizedLSTMCell(carry[0].shape[-1])(carry, features)


class ActorCritic(nn.Module):
    """UED.md's student: 3x3 conv (16) on the view + direction embedding (4 -> 5) -> LSTM -> policy and
    value heads Dense(32)+tanh. About 433k parameters at lstm_size 256."""

    num_actions: int = NUM_ACTIONS

    @nn.compact
    def __call__(self, carry, obs: Observation, reset: jax.Array):  # obs leaves [T, B, ...], reset [T, B]
        image = Conv3x3(16)(obs.image)
        image = nn.relu(image).reshape(*image.shape[:-3], -1)  # [T, B, 144]
        direction = nn.Embed(4, 5)(obs.agent_dir)  # [T, B, 5]
        carry, hidden = ScannedLSTM()(carry, (jnp.concatenate([image, direction], -1), reset))

        def head(outputs: int, scale: float):
            layer = nn.Dense(32, kernel_init=nn.initializers.orthogonal(np.sqrt(2)))(hidden)
            return nn.Dense(outputs, kernel_init=nn.initializers.orthogonal(scale))(nn.tanh(layer))

        # A small last policy layer makes the first policy near uniform (PPO implementation details).
        return carry, head(self.num_actions, 0.01), head(1, 1.0)[..., 0]


def initial_carry(batch_size: int, lstm_size: int) -> tuple[jax.Array, jax.Array]:
    return jnp.zeros((batch_size, lstm_size)), jnp.zeros((batch_size, lstm_size))


class Transition(NamedTuple):  # leaves [num_steps, num_envs, ...]
    obs: Observation
    reset: jax.Array  # the previous step ended an episode: the LSTM carry is zeroed before this step
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    reward: jax.Array
    done: jax.Array


@struct.dataclass
class RunnerState:
    train_state: TrainState
    rng: jax.Array
    rng_eval: jax.Array  # fixed per seed; evaluation keys are folded with the update so training never depends on them
    update: jax.Array  # int32[], PPO updates done


class RolloutState(NamedTuple):  # leaves [num_envs, ...]
    obs: Observation
    env_state: object
    carry: tuple[jax.Array, jax.Array]
    reset: jax.Array  # the last step ended an episode


class EvalState(NamedTuple):  # leaves [num_episodes, ...]
    obs: Observation
    env_state: object
    carry: tuple[jax.Array, jax.Array]
    finished: jax.Array  # the first episode has ended
    returns: jax.Array
    lengths: jax.Array


class EvalResult(NamedTuple):
    returns: jax.Array  # [E], first episode of each attempt
    episode_length: jax.Array  # [E], steps of that episode
    levels: Level  # [E]
    agent_pos: jax.Array  # [T, E, 2]
    agent_dir: jax.Array  # [T, E]


def add_time_axis(tree):
    return jax.tree.map(lambda x: x[None], tree)


def rollout(rng, network, params, start: RolloutState, step_env, num_steps) -> tuple[Transition, RolloutState]:
    """`num_steps` policy steps in every env; returns the transitions and the state after the last step."""

    def one_step(state: RolloutState, rng_step):
        obs, env_state, carry, reset = state
        rng_action, rng_env = jax.random.split(rng_step)
        next_carry, logits, value = network.apply(params, carry, add_time_axis(obs), reset[None])
        logits, value = logits[0], value[0]
        action = jax.random.categorical(rng_action, logits)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
        rng_envs = jax.random.split(rng_env, action.shape[0])
        next_obs, env_state, reward, done, _ = step_env(rng_envs, env_state, action)
        transition = Transition(obs, reset, action, log_prob, value, reward, done)
        return RolloutState(next_obs, env_state, next_carry, done), transition

    end, transitions = jax.lax.scan(one_step, start, jax.random.split(rng, num_steps))
    return transitions, end


def compute_gae(transitions: Transition, last_value: jax.Array, gamma: float, gae_lambda: float):
    """GAE(gamma, lambda) by a reverse scan; episode ends (goal or time limit) are terminal, as in minimax.
    Returns (advantages, value targets), each [num_steps, num_envs]."""

    def backward(carry, transition):
        gae, next_value = carry
        not_done = 1.0 - transition.done
        delta = transition.reward + gamma * next_value * not_done - transition.value
        gae = delta + gamma * gae_lambda * not_done * gae
        return (gae, transition.value), gae

    _, advantages = jax.lax.scan(backward, (jnp.zeros_like(last_value), last_value), transitions, reverse=True)
    return advantages, advantages + transitions.value


def ppo_loss(params, network, carry, transitions: Transition, advantages, targets, config):
    _, logits, value = network.apply(params, carry, transitions.obs, transitions.reset)
    log_probs = jax.nn.log_softmax(logits)
    log_prob = jnp.take_along_axis(log_probs, transitions.action[..., None], -1)[..., 0]
    entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
    log_ratio = log_prob - transitions.log_prob
    ratio = jnp.exp(log_ratio)
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    clipped_ratio = jnp.clip(ratio, 1.0 - config.clip_eps, 1.0 + config.clip_eps)
    policy_loss = -jnp.minimum(ratio * advantages, clipped_ratio * advantages).mean()
    clipped_value = transitions.value + jnp.clip(value - transitions.value, -config.clip_eps, config.clip_eps)
    value_loss = 0.5 * jnp.maximum((value - targets) ** 2, (clipped_value - targets) ** 2).mean()
    loss = policy_loss + config.vf_coef * value_loss - config.ent_coef * entropy
    metrics = {
        "ppo/loss": loss,
        "ppo/policy_loss": policy_loss,
        "ppo/value_loss": value_loss,
        "ppo/entropy": entropy,
        "ppo/approx_kl": ((ratio - 1.0) - log_ratio).mean(),
        "ppo/clip_frac": (jnp.abs(ratio - 1.0) > config.clip_eps).mean(),
    }
    return loss, metrics


def ppo_update(rng, train_state: TrainState, network, carry, transitions: Transition, advantages, targets, config):
    """`num_epochs` epochs of `num_minibatches` minibatches split along envs, each back-propagating through
    the whole rollout from its initial LSTM carry. Returns (train_state, metrics averaged over minibatches)."""
    num_envs = transitions.reward.shape[1]

    def epoch(train_state, rng_epoch):
        order = jax.random.permutation(rng_epoch, num_envs).reshape(config.num_minibatches, -1)  # [M, B/M]
        batches = (
            jax.tree.map(lambda x: x[order], carry),  # [M, B/M, H]
            jax.tree.map(lambda x: jnp.moveaxis(x[:, order], 1, 0), (transitions, advantages, targets)),  # [M, T, B/M]
        )

        def minibatch(train_state, batch):
            batch_carry, (batch_transitions, batch_advantages, batch_targets) = batch
            grads, metrics = jax.grad(ppo_loss, has_aux=True)(
                train_state.params, network, batch_carry, batch_transitions, batch_advantages, batch_targets, config
            )
            metrics["ppo/grad_norm"] = optax.tree.norm(grads)
            return train_state.apply_gradients(grads=grads), metrics

        return jax.lax.scan(minibatch, train_state, batches)

    train_state, metrics = jax.lax.scan(epoch, train_state, jax.random.split(rng, config.num_epochs))
    return train_state, jax.tree.map(jnp.mean, metrics)


def episode_metrics(transitions: Transition) -> dict:
    """Mean return and solve rate over episodes that ended in this rollout. AMaze pays reward only on the
    step that reaches the goal, so an episode's return is the reward of its last step."""
    finished = transitions.done.sum()
    episode_return = jnp.where(transitions.done, transitions.reward, 0.0).sum() / finished
    solved = (transitions.done & (transitions.reward > 0)).sum() / finished
    return {"train/return": episode_return, "train/solve_rate": solved, "train/episodes": finished.astype(jnp.float32)}


def level_metrics(levels: Level, prefix: str) -> dict:
    """Walls, solvable fraction and mean shortest path (over solvable levels) of a batch of levels."""
    lengths = jax.vmap(shortest_path_length)(levels)
    solvable = lengths >= 0
    return {
        f"{prefix}/walls": jax.vmap(wall_count)(levels).mean(dtype=jnp.float32),
        f"{prefix}/solvable": solvable.mean(dtype=jnp.float32),
        f"{prefix}/shortest_path": jnp.where(solvable, lengths, 0).sum() / solvable.sum(),
    }


def evaluate(
    rng, network, params, maze: HeldoutMaze, env_params: EnvParams, num_episodes: int, lstm_size: int
) -> EvalResult:
    """Sampled-action rollouts on `num_episodes` levels of `maze`, counting each one's first episode.

    Trajectories cover the maze's max_steps; they feed GIFs and jit drops them when unused."""
    rng_levels, rng_steps = jax.random.split(rng)
    env_params = maze.env_params(env_params)
    levels = jax.vmap(maze.sample)(jax.random.split(rng_levels, num_episodes))
    obs, env_state = jax.vmap(reset_to_level, (None, 0, None))(rng_levels, levels, env_params)
    step_env = jax.vmap(functools.partial(step, params=env_params))

    def one_step(state: EvalState, rng_step):
        rng_action, rng_env = jax.random.split(rng_step)
        no_reset = jnp.zeros((1, num_episodes), bool)
        carry, logits, _ = network.apply(params, state.carry, add_time_axis(state.obs), no_reset)
        action = jax.random.categorical(rng_action, logits[0])
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
    start = EvalState(obs, env_state, initial_carry(num_episodes, lstm_size), zeros.astype(bool), zeros * 0.0, zeros)
    end, (positions, directions) = jax.lax.scan(one_step, start, jax.random.split(rng_steps, maze.max_steps))
    return EvalResult(end.returns, end.lengths, levels, positions, directions)


def make_optimizer(config: Config):
    learning_rate = (
        optax.linear_schedule(config.lr, 0.0, config.total_updates * config.num_epochs * config.num_minibatches)
        if config.anneal_lr
        else config.lr
    )
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.adam(learning_rate, eps=config.adam_eps))


class TrainFunctions(NamedTuple):
    init: callable  # rngs [num_seeds] -> RunnerState of all seeds
    step: callable  # RunnerState -> (RunnerState, metrics {key: [log_interval]})
    evaluate: callable  # RunnerState -> metrics {key: scalar}
    training_levels: callable  # RunnerState -> Level batch, for pictures
    train: callable  # rngs [num_seeds] -> (RunnerState, (metrics, eval metrics)): the whole run, pure


def make_train(config: Config) -> TrainFunctions:
    env_params = config.env_params
    network = ActorCritic()
    sample_level = functools.partial(
        sample_dr_level, height=config.maze_size, width=config.maze_size, n_walls=config.n_walls
    )
    step_env = functools.partial(step_and_resample_batch, params=env_params, sample_level=sample_level)
    reset_env = jax.vmap(reset_to_level, (None, 0, None))
    eval_mazes = {name: HELDOUT_MAZES[name] for name in config.eval_mazes}
    placement = make_placement(config)

    def init(rng) -> RunnerState:
        rng, rng_params, rng_eval = jax.random.split(rng, 3)
        dummy_obs, _ = reset_env(rng, jax.vmap(sample_level)(jax.random.split(rng, 1)), env_params)
        params = network.init(
            rng_params, initial_carry(1, config.lstm_size), add_time_axis(dummy_obs), jnp.zeros((1, 1), bool)
        )
        train_state = TrainState.create(apply_fn=network.apply, params=params, tx=make_optimizer(config))
        return RunnerState(train_state=train_state, rng=rng, rng_eval=rng_eval, update=jnp.int32(0))

    def init_seeds(rngs) -> RunnerState:
        # lax.map, not vmap: a batch of LAPACK QRs (the orthogonal initializer) can deadlock XLA's CPU
        # thread pool on 2 cores (jaxlib 0.10.2); one seed at a time gives the same values.
        return jax.lax.map(init, rngs)

    def update(runner: RunnerState, _):
        rng, rng_levels, rng_rollout, rng_ppo = jax.random.split(runner.rng, 4)
        params = runner.train_state.params
        # CURRICULUM: DR has no teacher; every update starts all envs on fresh random levels.
        levels = jax.vmap(sample_level)(jax.random.split(rng_levels, config.num_envs))
        obs, env_state = reset_env(rng_levels, levels, env_params)
        carry = initial_carry(config.num_envs, config.lstm_size)
        # ROLLOUT
        start = placement.split_envs(RolloutState(obs, env_state, carry, reset=jnp.ones(config.num_envs, bool)))
        transitions, end = rollout(rng_rollout, network, params, start, step_env, config.num_steps)
        # ADVANTAGES
        _, _, last_value = network.apply(params, end.carry, add_time_axis(end.obs), end.reset[None])
        advantages, targets = compute_gae(transitions, last_value[0], config.gamma, config.gae_lambda)
        # PPO UPDATE
        train_state, ppo_metrics = ppo_update(
            rng_ppo, runner.train_state, network, carry, transitions, advantages, targets, config
        )
        finite = jnp.isfinite(ppo_metrics["ppo/loss"]) & jnp.all(
            jnp.array([jnp.isfinite(leaf).all() for leaf in jax.tree.leaves(train_state.params)])
        )
        metrics = {
            **episode_metrics(transitions),
            **level_metrics(levels, "level"),
            **ppo_metrics,
            "health/finite": finite,
        }
        runner = runner.replace(train_state=train_state, rng=rng, update=runner.update + 1)
        return runner, metrics

    def step_chunk(runner: RunnerState):
        return jax.lax.scan(update, runner, None, config.log_interval)

    def evaluate_runner(runner: RunnerState) -> dict:
        # EVAL
        rng = jax.random.fold_in(runner.rng_eval, runner.update)
        metrics = {}
        for index, (name, maze) in enumerate(eval_mazes.items()):
            returns = evaluate(
                jax.random.fold_in(rng, index),
                network,
                runner.train_state.params,
                maze,
                env_params,
                config.eval_episodes,
                config.lstm_size,
            ).returns
            metrics[f"eval/solve_rate/{name}"] = (returns > 0).mean()
            metrics[f"eval/return/{name}"] = returns.mean()
        return metrics

    def training_levels(runner: RunnerState) -> Level:
        rng = jax.random.fold_in(runner.rng_eval, -1 - runner.update)
        return jax.vmap(sample_level)(jax.random.split(rng, config.num_envs))

    def train(rngs):
        """The whole run for all seeds as one pure function (`jax.jit(train)(rngs)`): periods of
        eval_interval updates > chunks of log_interval > updates, evaluating after each period. Seeds are
        vmapped inside the chunk loop, exactly as main() drives them, so chunked driving is bitwise equal
        to this; vmapping the outer loops instead lets XLA reorder float reductions."""
        step_seeds, evaluate_seeds = vmap_seeds(step_chunk), jax.vmap(evaluate_runner)
        chunks = lambda runner, num_chunks: jax.lax.scan(lambda r, _: step_seeds(r), runner, None, num_chunks)  # noqa: E731
        runner = init_seeds(rngs)
        if config.eval_interval == 0:
            runner, metrics = chunks(runner, config.total_updates // config.log_interval)
            return runner, (metrics, {})

        def period(runner, _):
            runner, metrics = chunks(runner, config.eval_interval // config.log_interval)
            return runner, (metrics, evaluate_seeds(runner))

        return jax.lax.scan(period, runner, None, config.total_updates // config.eval_interval)

    return TrainFunctions(init_seeds, step_chunk, evaluate_runner, training_levels, train)


def policy_params(runner: RunnerState, policy: str):
    """The parameters of a named policy in the runner state (the evaluate command's --policy)."""
    if policy != "student":
        raise ConfigError(f"unknown policy {policy!r} for DR; choose from: student")
    return runner.train_state.params


def main(config: Config) -> None:
    initialize_distributed(config)
    placement = make_placement(config)
    writer = placement.is_main_process  # in a multi-host run only process 0 writes files
    run_dir = prepare_run_dir(config) if writer else Path(config.runs_dir) / config.run_name
    functions = make_train(config)
    init = jax.jit(functions.init)
    rngs = jax.random.split(jax.random.key(config.seed), config.num_seeds)
    checkpoints = Checkpoints(run_dir, config.keep_checkpoints, config.archive_interval, config_to_dict(config))
    restored = checkpoints.restore(jax.eval_shape(init, rngs)) if config.resume else None
    runner, update = restored if restored else (init(rngs), 0)
    runner = placement.place(runner)
    if writer:
        record_config(run_dir, config, script=f"algos/{Path(__file__).name}")
    if restored:
        print(f"resumed {run_dir} at update {update}", file=sys.stderr)
    step_chunk = compile_timed("training chunk", placement.jit(vmap_seeds(functions.step)), runner)
    evaluate_runner = placement.jit(jax.vmap(functions.evaluate))
    training_levels = placement.jit(jax.vmap(functions.training_levels))

    metric_keys = [key for key in step_chunk.out_info[1] if key != "health/finite"]
    eval_keys = list(jax.eval_shape(evaluate_runner, runner)) if config.eval_interval else []
    headline = (*HEADLINE_METRICS, *(key for key in eval_keys if "solve_rate" in key))
    log = RunLog(config, run_dir, metric_keys + eval_keys, update, headline) if writer else None
    saved_update = update if restored else None
    started = time.perf_counter()
    with StopSignal() as stop_signal:
        while True:
            reason = stop_reason(config, update, update * config.env_steps_per_update, time.perf_counter() - started)
            # Every process must run the same computations, so process 0's stop decisions are broadcast.
            if placement.agree(reason is not None):
                break
            chunk_started = time.perf_counter()
            next_runner, metrics = step_chunk(runner)
            metrics = placement.to_host(metrics)  # blocks: the timing below is true
            env_steps_per_s = (
                config.log_interval
                * config.env_steps_per_update
                * config.num_seeds
                / (time.perf_counter() - chunk_started)
            )
            finite = metrics.pop("health/finite").all(axis=1)
            if not finite.all():
                newest = checkpoints.newest()
                raise SystemExit(
                    f"error: non-finite loss or parameters in updates {update + 1}-{update + config.log_interval} "
                    f"(seeds {np.flatnonzero(~finite).tolist()}); last good checkpoint: {newest or 'none'}"
                )
            runner, update = next_runner, update + config.log_interval
            rows = chunk_rows(
                metrics, update, update * config.env_steps_per_update, time.perf_counter() - started, env_steps_per_s
            )
            if config.eval_interval and update % config.eval_interval == 0:
                eval_metrics = placement.to_host(evaluate_runner(runner))
                for seed, row in enumerate(rows):
                    row.update({key: float(values[seed]) for key, values in eval_metrics.items()})
            if config.screenshot_interval and update % config.screenshot_interval == 0:
                first_seed_levels = jax.tree.map(lambda x: x[0], placement.to_host(training_levels(runner)))
                if writer:
                    save_png(render_grid(first_seed_levels), run_dir / "images" / f"levels_update_{update:08d}.png")
            if writer:
                log.write(rows, env_steps_per_s)
            stop_requested = placement.agree(bool(stop_signal.requested))
            if update % config.checkpoint_interval == 0 or stop_requested:
                placement.save(checkpoints, runner, update)
                saved_update = update
            if stop_requested:
                reason = f"stopped by {stop_signal.requested or 'process 0'}"
                break
    if saved_update != update:
        placement.save(checkpoints, runner, update)
    if writer:
        log.close()
        print(f"{reason}; {run_dir} at update {update}", file=sys.stderr)


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Config))
