"""Feed a real minimax Robust PLR run's buffer inputs (benchmarks/learning/minimax_buffer_trace.py) to cleanued's
level buffer, tick by tick, as algos/plr.py calls it, and name the first tick where the two buffers part.

Per tick: the replay decision and the key minimax drew its replay slots with, the new levels its generator offered,
the scores and max returns its `update` got, and the rollouts it scored. cleanued scores those rollouts
(`ued_scores.max_mc`, minimax's stored max return: the scores and the max returns to store must be minimax's),
draws (`sample_replay`, or every filled slot ages on a new-level tick), deduplicates (`match_levels`) and inserts
(`insert_many`); the slots drawn, the matched slots and duplicates, and the whole buffer after the update (scores,
max returns, ages, filled) must be minimax's. A draw may differ only where it lands within float32 rounding of a
border of the cumulative distribution (the two jax versions sum 4,000 probabilities in another order); the recorded
slots are then played on, as in the parity test. Likewise a new level may take another of equally likely slots
(`eviction_flips`); minimax's buffer is then taken up. Each recorded PPO update's rollout is played again from its
levels, minimax's parameters and minimax's actions through cleanued's env, student and GAE (`rollout_check`), and the
update itself from minimax's parameters, Adam state and batch (`ppo_check`).

    python benchmarks/learning/buffer_trace_check.py /tmp/trace.npz --temperature 0.3 --staleness-coef 0.3
"""

import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import optax
import tyro
from flax.training.train_state import TrainState
from tyro.conf import Positional

# SCAFFOLDING: put the repo root on sys.path so the script runs as `python benchmarks/learning/buffer_trace_check.py`.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from algos import dr, plr  # noqa: E402
from benchmarks.learning.minimax_params import parameter_tree  # noqa: E402
from common import level_buffer, ued_scores  # noqa: E402
from common.config import FRACTION, POSITIVE  # noqa: E402
from common.runs import one_line_errors  # noqa: E402
from envs.maze import EnvParams, Observation, make_level, reset_to_level, step_and_restart  # noqa: E402


@dataclass(frozen=True)
class Args:
    trace: Positional[Path]
    """A file of minimax_buffer_trace.py."""
    temperature: Annotated[float, POSITIVE] = 0.3
    """minimax's --plr_temp of the traced run."""
    staleness_coef: Annotated[float, FRACTION] = 0.3
    """minimax's --plr_staleness_coef of the traced run."""
    buffer_size: int = 4000
    """minimax's --plr_buffer_size of the traced run."""
    lr: float = 3e-4
    """The traced run's learning rate, and below its other PPO settings (minimax's shipped values)."""
    adam_eps: float = 1e-5
    max_grad_norm: float = 0.5
    clip_eps: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    num_epochs: int = 5
    max_steps: int = 250
    """minimax's --maze_max_episode_steps of the traced run."""
    gamma: float = 0.999
    """minimax's --discount of the traced run."""
    gae_lambda: float = 0.98
    """minimax's --student_gae_lambda of the traced run."""


def levels_of(data: dict, tick: int):
    walls = data["new_walls"][tick, 0].astype(bool)
    return make_level(
        walls,
        data["new_goal_pos"][tick, 0].astype(np.int32),
        data["new_agent_pos"][tick, 0].astype(np.int32),
        data["new_agent_dir"][tick, 0].astype(np.int32),
    )


def sample_key(pop_rng: np.ndarray) -> jax.Array:
    """The key minimax's PLRManager drew its replay slots with, from the key its PopPLRManager got (one agent)."""
    rng = jax.random.wrap_key_data(jnp.asarray(pop_rng, jnp.uint32))
    agent = jax.random.split(rng, 2)[1]
    return jax.random.split(agent, 3)[2]


def check(args: Args) -> list[str]:
    """The differences found, tick by tick (empty: the buffers never part)."""
    data = dict(np.load(args.trace))
    settings = dict(
        temperature=args.temperature, staleness_coef=args.staleness_coef, prioritization="rank", ties="slot_order"
    )
    buffer = level_buffer.empty_buffer(jax.tree.map(lambda x: x[0], levels_of(data, 0)), args.buffer_size)
    num_envs = data["slots"].shape[-1]
    sample = jax.jit(lambda buffer, key: level_buffer.sample_replay(key, buffer, num_envs, **settings))
    insert = jax.jit(
        lambda buffer, levels, scores, max_returns, active: level_buffer.insert_many(
            buffer, levels, scores, max_returns, jnp.zeros(num_envs, jnp.int32), **settings, active=active
        )[0]
    )
    problems, flips, evictions_flipped = [], 0, 0
    score = jax.jit(jax.vmap(functools.partial(ued_scores.max_mc, running_max=False)))
    for tick in range(len(data["replay"])):
        if "rollout_scores" in data:  # the scorer on this tick's rollouts: MaxMC against the stored max returns
            stored = data["rollout_stored_max_returns"][tick, 0]
            per_env = lambda name, tick=tick: jnp.asarray(data[name][tick, 0].T)  # noqa: E731  [envs, steps]
            dones = per_env("rollout_dones").astype(bool)
            ours, ours_to_store = score(
                per_env("rollout_rewards"), dones, per_env("rollout_values"), jnp.where(np.isfinite(stored), stored, 0)
            )
            theirs = data["rollout_scores"][tick, 0]
            finished = np.asarray(dones.any(1))
            if (np.isfinite(theirs) != finished).any() or not np.allclose(
                np.asarray(ours)[finished], theirs[finished], rtol=1e-5, atol=1e-6
            ):
                problems.append(f"tick {tick}: MaxMC scores differ ({np.asarray(ours)[:4]} vs {theirs[:4]})")
            to_store = data.get("rollout_max_returns")  # traces recorded before it was kept lack it
            if to_store is not None and not np.allclose(
                np.asarray(ours_to_store)[finished], to_store[tick, 0][finished], rtol=1e-5, atol=1e-6
            ):
                problems.append(
                    f"tick {tick}: MaxMC max returns to store differ ({np.asarray(ours_to_store)[:4]} vs "
                    f"{to_store[tick, 0][:4]})"
                )
        replay = bool(data["replay"][tick, 0])
        recorded = data["slots"][tick, 0]
        if replay:
            with jax.threefry_partitionable(False):  # jax 0.4.31's default, under which minimax drew
                cycle, slots = sample(buffer, sample_key(data["sample_rng"][tick]))
            if (np.asarray(slots) != recorded).any():
                flips += int((np.asarray(slots) != recorded).sum())
                cycle = buffer
                for slot in recorded:  # minimax's draws, one after another
                    cycle = level_buffer.record_draw(cycle, int(slot))
            levels = jax.tree.map(lambda x, slots=recorded: x[slots], buffer.levels)
        else:
            cycle, levels = level_buffer.age_filled(buffer, num_envs), levels_of(data, tick)
        matched, repeated = level_buffer.match_levels(cycle, levels)
        if (np.asarray(matched) != data["dedupe_slots"][tick, 0]).any():
            problems.append(f"tick {tick}: matched slots {np.asarray(matched)} != {data['dedupe_slots'][tick, 0]}")
        if (np.asarray(repeated) != data["dupe_mask"][tick, 0]).any():
            problems.append(f"tick {tick}: duplicates differ")
        scores = data["scores"][tick, 0]
        active = np.isfinite(scores)
        buffer = insert(cycle, levels, jnp.where(active, scores, 0.0), data["max_returns"][tick, 0], active)
        buffer, swapped = eviction_flips(
            cycle, buffer, data["after_scores"][tick, 0], args.temperature, args.staleness_coef
        )
        evictions_flipped += swapped
        for field, name in (("scores", "after_scores"), ("ages", "after_ages"), ("filled", "after_filled")):
            ours, theirs = np.asarray(getattr(buffer, field)), data[name][tick, 0]
            if field == "scores":
                ours, theirs = np.where(buffer.filled, ours, -np.inf), theirs
            if not np.array_equal(ours, theirs.astype(ours.dtype)):
                differing = np.flatnonzero(ours != theirs.astype(ours.dtype))
                problems.append(f"tick {tick}: {field} differ at {len(differing)} slots, first {differing[:5]}")
        stored = np.where(np.asarray(buffer.filled), np.asarray(buffer.max_returns), -np.inf)
        if not np.array_equal(stored, data["after_max_returns"][tick, 0]):
            problems.append(f"tick {tick}: max returns differ")
        if problems:
            break
    print(
        f"{len(data['replay'])} ticks, {int(data['replay'].sum())} replays, {flips} draws flipped at a border, "
        f"{evictions_flipped} slots holding another level than minimax's among equally likely ones"
    )
    return problems


def replaced_levels(before, after) -> np.ndarray:
    """bool[capacity]: the slots whose level (any of its fields) differs between the two buffers."""
    differs = [np.asarray(a != b).reshape(a.shape[0], -1).any(1) for a, b in zip(
        jax.tree.leaves(before.levels), jax.tree.leaves(after.levels), strict=True
    )]  # fmt: skip
    return np.any(differs, axis=0)


def eviction_flips(before, ours, their_scores: np.ndarray, temperature: float, staleness_coef: float):
    """(our buffer, the number of slots changed) after putting this tick's new levels where minimax put them, where the
    two buffers differ only in which of some equally likely slots took them: filled slots of equal age whose replay
    probabilities are within 1e-5 of each other, relatively (a score term thousands of times below the staleness
    term's, which float32 keeps only a few bits of and the two jax versions round apart). Either the same slots took
    the new levels in another order, or one library evicted another of those slots than the other: each slot that
    differs holds, in minimax's buffer, a new level ours wrote into one of them (each used once, and each used), or
    the level it held before the tick, which ours replaced. Levels move with their max returns and counts, so the
    comparison still sees a max return that differs. Anything else is left for the comparison to report."""
    mine = np.where(np.asarray(ours.filled), np.asarray(ours.scores), -np.inf)
    before_scores = np.asarray(before.scores)
    differing = np.flatnonzero(mine != their_scores)
    if not len(differing) or not np.asarray(before.filled)[differing].all():
        return ours, 0
    before_probs = np.asarray(
        level_buffer.replay_probabilities(before, temperature, staleness_coef, "rank", "slot_order")
    )
    candidates = before_probs[differing]
    if len(set(np.asarray(before.ages)[differing])) != 1 or np.ptp(candidates) > 1e-5 * candidates.max():
        return ours, 0
    replaced = replaced_levels(before, ours)
    unused = [slot for slot in differing if replaced[slot]]  # slots of the new levels ours wrote
    kept, source = [], []
    for slot, value in zip(differing, their_scores[differing], strict=True):
        if replaced[slot] and value == before_scores[slot]:  # minimax kept the level ours replaced
            kept.append(True)
            source.append(slot)
            continue
        written = next((candidate for candidate in unused if mine[candidate] == value), None)
        if written is None:
            return ours, 0
        unused.remove(written)
        kept.append(False)
        source.append(written)
    if unused:  # a new level ours wrote that minimax's buffer does not hold
        return ours, 0
    kept, source = np.asarray(kept), np.asarray(source)

    def placed(field_before, field_ours):
        chosen = np.where(
            kept.reshape(-1, *[1] * (field_ours.ndim - 1)), field_before[source], field_ours[source]
        )  # fmt: skip
        return field_ours.at[differing].set(chosen)

    ours = ours.replace(
        levels=jax.tree.map(placed, before.levels, ours.levels),
        scores=ours.scores.at[differing].set(their_scores[differing]),
        **{
            field: placed(getattr(before, field), getattr(ours, field))
            for field in ("max_returns", "mutations", "successes", "failures")
        },
    )
    return ours, len(differing)


def ppo_check(args: Args) -> list[str]:
    """Every recorded PPO update of the run, replayed from minimax's parameters, Adam state and batch by cleanued's
    `ppo_update`: the parameters after it, to the parity test's tolerance (tests/test_minimax_parity.py)."""
    data = dict(np.load(args.trace))
    if "update_opt_before/count" not in data:
        return []
    optimizer = optax.chain(optax.clip_by_global_norm(args.max_grad_norm), optax.adam(args.lr, eps=args.adam_eps))
    settings = dr.PPOSettings(args.clip_eps, args.vf_coef, args.ent_coef, args.num_epochs, 1)
    update = jax.jit(functools.partial(dr.ppo_update, network=dr.ActorCritic(), settings=settings))
    problems, worst = [], 0.0
    for index in range(len(data["update_opt_before/count"])):
        one = {key: value[index] for key, value in data.items() if key.startswith("update_")}

        def state(when: str, one=one) -> TrainState:
            start = TrainState.create(apply_fn=None, params=parameter_tree(one, f"update_params_{when}/"), tx=optimizer)
            clip, (adam, scale) = start.opt_state
            adam = adam._replace(
                count=jnp.asarray(one[f"update_opt_{when}/count"], adam.count.dtype),
                mu=parameter_tree(one, f"update_opt_{when}/mu/"),
                nu=parameter_tree(one, f"update_opt_{when}/nu/"),
            )
            return start.replace(opt_state=(clip, (adam, scale)))

        batch = {key.removeprefix("update_batch/"): jnp.asarray(value) for key, value in one.items() if "batch" in key}
        dones = batch["dones"].astype(bool)
        transitions = dr.Transition(
            obs=Observation(image=batch["obs_image"], agent_dir=batch["obs_dir"].astype(jnp.int32)),
            reset=jnp.concatenate([jnp.zeros_like(dones[:1]), dones[:-1]]),  # minimax's shifted done flags
            action=batch["actions"].astype(jnp.int32),
            log_prob=batch["log_pis"],
            value=batch["values"],
            reward=jnp.zeros_like(batch["values"]),
            done=dones,
        )
        carry = (batch["carry_c"], batch["carry_h"])
        after, _ = update(
            jax.random.key(0), state("before"), carry=carry, transitions=transitions,
            advantages=batch["advantages"], targets=batch["targets"],
        )  # fmt: skip
        expected = state("after").params
        for (path, ours), theirs in zip(
            jax.tree_util.tree_flatten_with_path(after.params)[0], jax.tree.leaves(expected), strict=True
        ):
            difference = float(np.max(np.abs(ours - theirs)) / (np.max(np.abs(theirs)) + 1e-12))
            worst = max(worst, difference)
            if difference > 2e-4:
                problems.append(f"update {index}: {jax.tree_util.keystr(path)} differs by {difference:.1e}")
                break
    print(f"{len(data['update_opt_before/count'])} PPO updates replayed, largest relative difference {worst:.1e}")
    return problems


def replayed_rollout(params, levels, actions: jax.Array, lstm_size: int, env_params: EnvParams, gamma, gae_lambda):
    """algos/plr.py's rollout and GAE, taking `actions` [T, B] instead of sampling them: every env starts at its level
    with a zero LSTM state, restarts the level on done and resets the state at the next step. Returns the transitions,
    advantages and targets."""
    network = plr.ActorCritic()
    num_envs = actions.shape[1]
    unused_key = jax.random.key(0)  # resets and steps are deterministic
    obs, env_state = jax.vmap(reset_to_level, (None, 0, None))(unused_key, levels, env_params)
    step_env = jax.vmap(functools.partial(step_and_restart, params=env_params))

    def one_step(state: plr.RolloutState, action):
        next_carry, logits, value = network.apply(params, state.carry, plr.add_time_axis(state.obs), state.reset[None])
        log_prob = distrax.Categorical(logits=logits[0]).log_prob(action)
        next_obs, env_state, reward, done, _ = step_env(jax.random.split(unused_key, num_envs), state.env_state, action)
        transition = plr.Transition(state.obs, state.reset, action, log_prob, value[0], reward, done)
        return plr.RolloutState(next_obs, env_state, next_carry, done), transition

    start = plr.RolloutState(obs, env_state, plr.initial_carry(num_envs, lstm_size), jnp.ones(num_envs, bool))
    end, transitions = jax.lax.scan(one_step, start, actions)
    _, _, last_value = network.apply(params, end.carry, plr.add_time_axis(end.obs), end.reset[None])
    advantages, targets = plr.compute_gae(transitions, last_value[0], gamma, gae_lambda)
    return transitions, advantages, targets


def rollout_check(args: Args) -> list[str]:
    """Each recorded PPO update's rollout played again by cleanued from the same levels, parameters and actions
    (`replayed_rollout`): minimax's rollout must start from a zero LSTM state, and its observations, episode ends and
    rewards must be cleanued's exactly, its values, log-probabilities of the actions taken, advantages and targets to
    float32 rounding. The update numbered n (from 1) was taken on the run's n-th replay tick."""
    data = dict(np.load(args.trace))
    if "update_number" not in data or "played_walls" not in data:
        return []  # traces recorded before the rollouts were kept
    replay_ticks = np.flatnonzero(data["replay"][:, 0])
    replay = jax.jit(replayed_rollout, static_argnames=("lstm_size", "env_params"))
    env_params = EnvParams(max_steps=args.max_steps)
    problems, worst, replayed = [], {}, 0
    for index, number in enumerate(data["update_number"]):
        if number > len(replay_ticks):
            continue  # its tick was dropped with the trace's unfinished end
        tick = replay_ticks[number - 1]
        batch = {key.removeprefix("update_batch/"): value[index] for key, value in data.items() if "batch/" in key}
        played = {name: data[f"played_{name}"][tick, 0] for name in ("walls", "goal_pos", "agent_pos", "agent_dir")}
        name = f"update {index} (tick {tick})"
        if (data["played_time"][tick, 0] != 0).any():
            problems.append(f"{name}: a level started at another step than its first")
        if np.any(batch["carry_c"]) or np.any(batch["carry_h"]):
            problems.append(f"{name}: the rollout started from a nonzero LSTM state")
        params = parameter_tree({k: v[index] for k, v in data.items() if k.startswith("update_params_before/")},
                                "update_params_before/")  # fmt: skip
        transitions, advantages, targets = replay(
            params, make_level(*played.values()), jnp.asarray(batch["actions"], jnp.int32),
            lstm_size=batch["carry_c"].shape[-1], env_params=env_params, gamma=args.gamma, gae_lambda=args.gae_lambda,
        )  # fmt: skip
        exact = {
            "observations": (transitions.obs.image, batch["obs_image"]),
            "directions": (transitions.obs.agent_dir, batch["obs_dir"]),
            "episode ends": (transitions.done, batch["dones"].astype(bool)),
            "rewards": (transitions.reward, batch["rewards"]),
        }
        for field, (ours, theirs) in exact.items():
            differ = np.asarray(ours) != np.asarray(theirs).astype(np.asarray(ours).dtype)
            if differ.any():
                step, env = np.argwhere(differ.reshape(*differ.shape[:2], -1).any(-1))[0]
                problems.append(f"{name}: {field} differ, first at step {step} of env {env}")
        rounded = {
            "values": (transitions.value, batch["values"]),
            "log-probabilities": (transitions.log_prob, batch["log_pis"]),
            "advantages": (advantages, batch["advantages"]),
            "targets": (targets, batch["targets"]),
        }
        for field, (ours, theirs) in rounded.items():
            difference = float(np.max(np.abs(np.asarray(ours) - theirs)))
            worst[field] = max(worst.get(field, 0.0), difference)
            if not np.allclose(ours, theirs, rtol=1e-4, atol=1e-5):
                problems.append(f"{name}: {field} differ by up to {difference:.1e}")
        replayed += 1
    largest = ", ".join(f"{field} {difference:.1e}" for field, difference in worst.items())
    print(f"{replayed} rollouts replayed, largest differences: {largest or 'none'}")
    return problems


def main(args: Args) -> None:
    problems = check(args) + rollout_check(args) + ppo_check(args)
    print(
        "\n".join(problems) if problems else "the buffers never part, and every replayed rollout and PPO update matches"
    )


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args, description=__doc__))
