"""Record minimax-lib 0.2.0 reference fixtures for the update and level-buffer parity tests.

Run with the Python of the minimax virtual environment (its pinned JAX 0.4.31 stack, `MINIMAX_STACK` in
benchmarks/speed/bench_algos.py); it never imports cleanued's code, and the tests never run it: they read the
committed .npz files it writes. Everything is tiny (4 envs x 16 steps, LSTM 16, 7x7 mazes, an 8-slot
buffer; one recording at the shipped 4,000 slots keeps only checksums per cycle) so each file stays well
under 1 MB and the tests take seconds.

    benchmarks/.minimax-venv/bin/python benchmarks/learning/minimax_fixtures.py            # all, into tests/fixtures
    benchmarks/.minimax-venv/bin/python benchmarks/learning/minimax_fixtures.py --only buffer

One file, in three marked sections (the level buffer, the scores, one update), because every recording stands on the
same minimax-side pieces (the manager and the runner built from the shipped flags, `take`, the parameter-name mapping
`flat_params` of minimax_params.py, the `meta` stamp of versions) and one command re-records
every fixture with one stack, so the fixtures never mix versions. Split it when a section needs pieces of its own.

Files (tests/fixtures/):
- minimax_plr_buffer.npz: minimax's `PLRManager` (force_unique, rank, MaxMC, capacity 8, 4 levels per
  cycle) driven through a scripted then random sequence of cycles, each as `PLRRunner.run` calls it:
  `sample` (replay forced on or off), `dedupe_levels`, `update` with the scripted scores. Per cycle:
  the key `sample` used for its draws, the slots drawn and the replay distribution before each draw,
  the ages after `sample`, the dedupe result, the scores, and the whole buffer and its replay
  distribution after `update`. Levels are indices into a pool of small 5x5 levels stored alongside.
- minimax_plr_buffer_4000.npz: the same manager at the shipped size (4,000 slots, 32 levels a cycle, replay
  with probability 0.5 once half full), 330 cycles as `PLRRunner.run` drives it, until the buffer is full and
  evicting. 7x7 levels from a pool (bit-packed), with repeats of earlier levels and within a batch; random
  scores. Per cycle: the replay decision and key, the slots drawn, the dedupe result, the slots `update`
  changed and two checksums of the ages; the whole buffer and its replay distribution at the end.
- minimax_scores.npz: `compute_ued_scores` (MaxMC with stored max returns, positive value loss, L1 value
  loss) on random small batches, with envs that finish no episode (score -inf: not inserted).
- minimax_update_dr.npz, minimax_update_plr.npz: one student update of `DRRunner` (its second tick, so the
  LSTM carry carried over from the first tick and Adam's moments are not zero) and of `PLRRunner`
  (Robust PLR, the first replay tick after the buffer filled), recomputed outside `run` step by step from
  minimax's own functions and checked against `run`: parameters and Adam state before and after (named
  as cleanued's flax tree, minimax_params.py's `PARAM_NAMES`), the rollout batch, the carry at the rollout's start, the
  bootstrap value, GAE, the loss and gradient of the first PPO epoch at the starting parameters, and
  the update's statistics. The PLR file adds the level scores of the replayed levels, and per tick
  (`tick<k>_*`) the runner's buffer bookkeeping up to that update.
"""

import argparse
import json
import os
import sys
from functools import partial
from importlib import metadata
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import minimax  # noqa: E402
import numpy as np  # noqa: E402
from minimax import envs  # noqa: E402
from minimax.arguments import parser as minimax_parser  # noqa: E402
from minimax.envs.maze.common import DIR_TO_VEC  # noqa: E402
from minimax.runners import ExperimentRunner  # noqa: E402
from minimax.util.rl.plr import PLRManager  # noqa: E402
from minimax.util.rl.ued_scores import UEDScore, compute_ued_scores  # noqa: E402
from minimax_params import flat_params  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]

TINY = dict(
    n_parallel=4,
    n_rollout_steps=16,
    n_devices=1,
    verbose=False,
    student_recurrent_hidden_dim=16,
    maze_height=7,
    maze_width=7,
    maze_n_walls=8,
    maze_max_episode_steps=10,
    test_env_names=None,
)


def meta(**extra) -> np.ndarray:
    info = {
        "minimax-lib": metadata.version("minimax-lib"),
        "jax": jax.__version__,
        "flax": metadata.version("flax"),
        "optax": metadata.version("optax"),
        "recorder": "benchmarks/learning/minimax_fixtures.py",
        **extra,
    }
    return np.array(json.dumps(info, sort_keys=True))


# ---------------------------------------------------------------------------------------------------------
# Level buffer


def distinct_levels(count: int, seed: int, size: int, n_walls: int, draws: int):
    """The first `count` distinct levels (walls, goal, start) among `draws` from minimax's own generator, as its
    `EnvState`s."""
    env, _ = envs.make("Maze", env_kwargs=dict(height=size, width=size, n_walls=n_walls, replace_wall_pos=True))
    _, states = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(seed), draws))
    walls, goals, starts = (np.asarray(x) for x in (states.wall_map, states.goal_pos, states.agent_pos))
    seen, keep = set(), []
    for i in range(draws):
        key = (walls[i].tobytes(), goals[i].tobytes(), starts[i].tobytes())
        if key not in seen:
            seen.add(key)
            keep.append(i)
    assert len(keep) >= count, f"only {len(keep)} distinct levels"
    return take(states, keep[:count])


def level_pool(count: int, seed: int):
    """`count` distinct 5x5 levels from minimax's own generator (walls, goal, start; the direction is kept),
    plus, last, a copy of level 1 turned to another direction (equal under minimax's comparator)."""
    pool = take(distinct_levels(count, seed, size=5, n_walls=4, draws=4 * count), list(range(count)) + [1])
    turned = (int(pool.agent_dir_idx[1]) + 1) % 4
    return pool.replace(
        agent_dir=pool.agent_dir.at[count].set(DIR_TO_VEC[turned].astype(pool.agent_dir.dtype)),
        agent_dir_idx=pool.agent_dir_idx.at[count].set(turned),
    )


def plr_manager(example_level, capacity: int, temperature: float, staleness_coef: float, replay_prob: float):
    """minimax's PLRManager as its PLR runner makes it for the maze (MaxMC, rank, Robust PLR, force_unique)."""
    return PLRManager(
        example_level=example_level,
        ued_score=UEDScore.MAX_MC,
        replay_prob=replay_prob,
        buffer_size=capacity,
        staleness_coef=staleness_coef,
        temp=temperature,
        min_fill_ratio=0.5,
        use_score_ranks=True,
        use_robust_plr=True,
        use_parallel_eval=False,
        comparator_fn=envs.get_comparator("Maze"),
        n_devices=1,
    )


def take(tree, index):
    return jax.tree_util.tree_map(lambda x: x[np.asarray(index)], tree)


def buffer_fields(prefix: str, buffer, mgr) -> dict:
    return {
        f"{prefix}scores": np.asarray(buffer.scores),
        f"{prefix}max_returns": np.asarray(buffer.max_returns),
        f"{prefix}ages": np.asarray(buffer.ages).astype(np.int64),
        f"{prefix}filled": np.asarray(buffer.filled),
        f"{prefix}n_mutations": np.asarray(buffer.n_mutations).astype(np.int64),
        f"{prefix}wall_map": np.asarray(buffer.levels.wall_map),
        f"{prefix}goal_pos": np.asarray(buffer.levels.goal_pos).astype(np.int64),
        f"{prefix}agent_pos": np.asarray(buffer.levels.agent_pos).astype(np.int64),
        f"{prefix}agent_dir": np.asarray(buffer.levels.agent_dir_idx).astype(np.int64),
        f"{prefix}replay_dist": np.asarray(mgr._get_replay_dist(buffer.scores, buffer.ages, buffer.filled)),
    }


def draw_dists(mgr, buffer_before, slots) -> np.ndarray:
    """The replay distribution before each sequential draw (minimax's `_sample_replay_levels` recomputes it
    from the ages after every draw)."""
    ages, dists = buffer_before.ages, []
    for slot in np.asarray(slots):
        dists.append(np.asarray(mgr._get_replay_dist(buffer_before.scores, ages, buffer_before.filled)))
        ages = ((ages + 1) * buffer_before.filled).at[slot].set(0)
    return np.stack(dists)


def scripted_cycles(rng: np.random.Generator, pool_size: int, num_random: int):
    """(kind, pool indices or None, scores, max returns) per cycle; -inf scores mark envs that finished no
    episode. The scripted part fills the buffer with a duplicate inside a batch, replays, meets a buffer
    duplicate and a turned copy, evicts and rejects at a full buffer, ties scores; then random cycles."""
    inf = -np.inf
    cycles = [
        ("new", [0, 1, 2, 3], [0.50, 0.10, 0.30, 0.20], [0.9, 0.0, 0.5, 0.3]),
        ("new", [4, 4, 5, 6], [0.40, 0.95, 0.05, 0.25], [0.4, 0.8, 0.0, 0.2]),  # second 4: a batch duplicate
        ("replay", None, [0.60, 0.15, inf, 0.35], [0.7, 0.1, 0.0, 0.6]),
        ("new", [7, 0, 8, 9], [0.30, 0.80, 0.01, 0.45], [0.3, 0.2, 0.0, 0.5]),  # 0 is in the buffer; 8 rejected
        ("new", [10, pool_size, 2, 11], [0.70, 0.55, inf, 0.45], [0.6, 0.5, 0.0, 0.4]),  # turned copy of 1
        ("replay", None, [0.30, 0.30, 0.30, inf], [0.2, 0.2, 0.2, 0.0]),
        ("replay", None, [0.90, 0.00, 0.45, 0.45], [0.9, 0.0, 0.4, 0.4]),
        ("new", [12, 13, 14, 15], [0.99, 0.98, 0.97, 0.96], [0.9, 0.9, 0.9, 0.9]),  # evict with inherited ages
        ("new", [16, 17, 3, 18], [0.30, 0.30, 0.30, 0.30], [0.1, 0.1, 0.1, 0.1]),  # ties at the threshold
        ("replay", None, [0.10, 0.20, 0.30, 0.40], [0.0, 0.1, 0.2, 0.3]),
    ]
    for _ in range(num_random):
        kind = "replay" if rng.uniform() < 0.45 else "new"
        scores = np.round(rng.uniform(-0.2, 1.0, 4), 1)  # rounded, so ties happen
        scores[rng.uniform(size=4) < 0.1] = inf
        max_returns = np.round(rng.uniform(0, 1, 4), 2)
        levels = None if kind == "replay" else rng.integers(0, pool_size + 1, 4).tolist()
        cycles.append((kind, levels, scores.tolist(), max_returns.tolist()))
    return cycles


def record_buffer(out: Path) -> None:
    capacity, batch, temperature, staleness_coef = 8, 4, 0.3, 0.3
    pool_size = 20
    pool = level_pool(pool_size, seed=7)
    # `sample` decides replay by `replay_prob > uniform`: 1.0 always replays (once warm), 0.0 never does.
    managers = {
        kind: plr_manager(take(pool, 0), capacity, temperature, staleness_coef, replay_prob)
        for kind, replay_prob in (("replay", 1.0), ("new", 0.0))
    }
    buffer = managers["new"].reset()
    cycles = scripted_cycles(np.random.default_rng(11), pool_size, num_random=30)
    data = {
        "pool_wall_map": np.asarray(pool.wall_map),
        "pool_goal_pos": np.asarray(pool.goal_pos).astype(np.int64),
        "pool_agent_pos": np.asarray(pool.agent_pos).astype(np.int64),
        "pool_agent_dir": np.asarray(pool.agent_dir_idx).astype(np.int64),
    }
    key = jax.random.PRNGKey(5)
    for k, (kind, pool_indices, scores, max_returns) in enumerate(cycles):
        mgr = managers[kind]
        key, subkey = jax.random.split(key)
        new_levels = take(pool, pool_indices if pool_indices is not None else [0] * batch)
        _, _, sample_key = jax.random.split(subkey, 3)  # what `sample` hands `_sample_replay_levels`
        before = buffer
        levels, slots, is_replay, buffer = mgr.sample(subkey, buffer, new_levels, batch)
        warm = float(before.filled.sum()) / capacity >= 0.5
        assert bool(is_replay) == (kind == "replay" and warm), (k, kind)
        prefix = f"c{k}_"
        data[prefix + "kind"] = np.array(kind if bool(is_replay) else "new")
        data[prefix + "pool_index"] = np.asarray(pool_indices if pool_indices is not None else [-1] * batch)
        if bool(is_replay):
            data[prefix + "sample_key"] = np.asarray(sample_key)
            data[prefix + "draw_dists"] = draw_dists(mgr, before, slots)
        data[prefix + "slots"] = np.asarray(slots).astype(np.int64)
        data[prefix + "ages_sampled"] = np.asarray(buffer.ages).astype(np.int64)
        dedupe_slots, dupe_mask = mgr.dedupe_levels(buffer, levels, jnp.asarray(slots))
        data[prefix + "dedupe_slots"] = np.asarray(dedupe_slots).astype(np.int64)
        data[prefix + "dupe_mask"] = np.asarray(dupe_mask)
        data[prefix + "scores"] = np.asarray(scores, np.float32)
        data[prefix + "max_returns"] = np.asarray(max_returns, np.float32)
        data[prefix + "next_insert"] = np.asarray(mgr._get_next_insert_idx(buffer)).astype(np.int64)
        buffer = mgr.update(
            buffer,
            levels,
            dedupe_slots,
            jnp.asarray(scores, jnp.float32),
            dupe_mask=dupe_mask,
            info={"max_returns": jnp.asarray(max_returns, jnp.float32)},
            ignore_val=-jnp.inf,
        )
        data.update(buffer_fields(prefix + "after_", buffer, managers["new"]))
    data["num_cycles"] = np.array(len(cycles))
    data["meta"] = meta(
        capacity=capacity,
        batch=batch,
        temperature=temperature,
        staleness_coef=staleness_coef,
        prioritization="rank",
        force_unique=True,
        ued_score="max_mc",
        min_fill_ratio=0.5,
        note="sample_key is the key `sample` passes to `_sample_replay_levels` (raw uint32[2], threefry, "
        "jax_threefry_partitionable=False as in jax 0.4.31)",
    )
    np.savez_compressed(out / "minimax_plr_buffer.npz", **data)


def record_buffer_shipped_size(out: Path) -> None:
    """The buffer at the shipped size, as `PLRRunner.run` drives it: 4,000 slots, 32 levels a cycle, replay
    decided by `sample` with probability 0.5 once half full, long enough to fill the buffer and evict. Levels
    are fresh 7x7 8-wall levels from a pool, with some repeats of earlier ones (buffer duplicates) and of
    one another within a batch; scores are random (a few tied, a few -inf: no finished episode)."""
    capacity, batch, temperature, staleness_coef, replay_prob = 4000, 32, 0.3, 0.3, 0.5
    num_cycles = 330
    pool = distinct_levels(6800, seed=13, size=7, n_walls=8, draws=2 * 6800)
    pool_keys = {
        (w.tobytes(), g.tobytes(), a.tobytes()): i
        for i, (w, g, a) in enumerate(
            zip(np.asarray(pool.wall_map), np.asarray(pool.goal_pos), np.asarray(pool.agent_pos), strict=True)
        )
    }
    mgr = plr_manager(take(pool, 0), capacity, temperature, staleness_coef, replay_prob)
    sample = jax.jit(partial(mgr.sample, n=batch))
    dedupe = jax.jit(mgr.dedupe_levels)
    update = jax.jit(partial(mgr.update, ignore_val=-jnp.inf))
    rng, key = np.random.default_rng(17), jax.random.PRNGKey(9)
    buffer, fresh = mgr.reset(), 0
    records = {name: [] for name in ("pool_index", "replay", "sample_key", "slots", "dedupe_slots", "dupe_mask")}
    records |= {name: [] for name in ("scores", "max_returns", "changed", "age_sum", "age_moment")}
    for _ in range(num_cycles):
        indices = np.arange(fresh, fresh + batch)
        if fresh:
            repeats = rng.uniform(size=batch) < 0.05
            indices[repeats] = rng.integers(0, fresh, repeats.sum())
        if rng.uniform() < 0.3:
            indices[rng.integers(1, batch)] = indices[0]
        assert indices.max() < len(pool_keys), "the pool ran out of fresh levels"
        scores = rng.uniform(-0.3, 1.0, batch).astype(np.float32)
        rounded = rng.uniform(size=batch) < 0.1
        scores[rounded] = np.round(scores[rounded], 2)
        scores[rng.uniform(size=batch) < 0.03] = -np.inf
        max_returns = np.round(rng.uniform(0.0, 1.0, batch), 4).astype(np.float32)
        key, subkey = jax.random.split(key)
        _, _, sample_key = jax.random.split(subkey, 3)  # what `sample` hands `_sample_replay_levels`
        levels, slots, is_replay, buffer = sample(subkey, buffer, take(pool, indices))
        if not bool(is_replay):
            fresh += batch
        dedupe_slots, dupe_mask = dedupe(buffer, levels, slots)
        before = buffer
        buffer = update(
            buffer, levels, dedupe_slots, jnp.asarray(scores), dupe_mask=dupe_mask, info={"max_returns": max_returns}
        )
        changed = (
            (np.asarray(before.scores) != np.asarray(buffer.scores))
            | (np.asarray(before.max_returns) != np.asarray(buffer.max_returns))
            | (np.asarray(before.filled) != np.asarray(buffer.filled))
            | (np.asarray(before.levels.wall_map) != np.asarray(buffer.levels.wall_map)).any((1, 2))
            | (np.asarray(before.levels.agent_pos) != np.asarray(buffer.levels.agent_pos)).any(1)
        )
        ages = np.asarray(buffer.ages).astype(np.int64)
        for name, value in (
            ("pool_index", indices),
            ("replay", bool(is_replay)),
            ("sample_key", np.asarray(sample_key)),
            ("slots", np.asarray(slots)),
            ("dedupe_slots", np.asarray(dedupe_slots)),
            ("dupe_mask", np.asarray(dupe_mask)),
            ("scores", scores),
            ("max_returns", max_returns),
            ("changed", np.pad(np.flatnonzero(changed), (0, batch - changed.sum()), constant_values=-1)),
            ("age_sum", ages.sum()),
            ("age_moment", (ages * np.arange(1, capacity + 1)).sum()),
        ):
            records[name].append(value)
    filled = np.asarray(buffer.filled)
    slot_pool_index = np.array(
        [
            pool_keys[(w.tobytes(), g.tobytes(), a.tobytes())] if f else -1
            for w, g, a, f in zip(
                np.asarray(buffer.levels.wall_map),
                np.asarray(buffer.levels.goal_pos),
                np.asarray(buffer.levels.agent_pos),
                filled,
                strict=True,
            )
        ]
    )
    data = {name: np.stack(values) for name, values in records.items()}
    data["pool_index"] = data["pool_index"].astype(np.int16)
    for name in ("slots", "dedupe_slots", "changed"):
        data[name] = data[name].astype(np.int16)
    data |= {
        "pool_wall_map": np.packbits(np.asarray(pool.wall_map).reshape(len(pool_keys), -1), axis=1),
        "pool_goal_pos": np.asarray(pool.goal_pos).astype(np.int8),
        "pool_agent_pos": np.asarray(pool.agent_pos).astype(np.int8),
        "pool_agent_dir": np.asarray(pool.agent_dir_idx).astype(np.int8),
        "final_pool_index": slot_pool_index.astype(np.int16),
        "final_scores": np.asarray(buffer.scores),
        "final_max_returns": np.asarray(buffer.max_returns),
        "final_ages": np.asarray(buffer.ages).astype(np.int64),
        "final_filled": filled,
        "final_replay_dist": np.asarray(mgr._get_replay_dist(buffer.scores, buffer.ages, buffer.filled)),
    }
    kinds = {"replay cycles": int(data["replay"].sum()), "fill": float(filled.mean()), "fresh levels": fresh}
    assert kinds["fill"] == 1.0 and fresh > capacity + 200, f"the buffer must fill and evict: {kinds}"
    data["meta"] = meta(
        capacity=capacity,
        batch=batch,
        temperature=temperature,
        staleness_coef=staleness_coef,
        replay_prob=replay_prob,
        prioritization="rank",
        force_unique=True,
        ued_score="max_mc",
        min_fill_ratio=0.5,
        maze_size=7,
        note="pool_wall_map is np.packbits of each 7x7 wall map (row-major, 49 bits); sample_key as in "
        "minimax_plr_buffer.npz; changed: the slots whose level, score, max return or filled flag `update` "
        "changed (padded with -1); age_sum and age_moment: sum(ages) and sum(ages * (slot + 1)) after `update`; "
        f"counts: {json.dumps(kinds)}",
    )
    np.savez_compressed(out / "minimax_plr_buffer_4000.npz", **data)


# ---------------------------------------------------------------------------------------------------------
# UED scores


@partial(jax.jit, static_argnums=(0,))
def scores_of(score: UEDScore, batch, info):
    return compute_ued_scores(score, batch, 1, info=info, ignore_val=-jnp.inf, per_agent=True)


def record_scores(out: Path) -> None:
    from minimax.util.rl.rollout_storage import RolloutBatch

    rng = np.random.default_rng(3)
    data = {}
    for case in range(4):
        steps, num_envs = 24, 6
        dones = rng.uniform(size=(steps, num_envs)) < 0.12
        dones[:, 0] = False  # an env that finishes no episode
        dones[-1, 1] = True  # one whose only episode ends on the last step
        rewards = np.where(dones, np.round(rng.uniform(0, 1, (steps, num_envs)), 2), 0.0).astype(np.float32)
        rewards[dones & (rng.uniform(size=dones.shape) < 0.3)] = 0.0  # time-limit endings
        values = rng.uniform(-0.2, 1, (steps, num_envs)).astype(np.float32)
        advantages = rng.normal(0, 0.3, (steps, num_envs)).astype(np.float32)
        stored = np.round(rng.uniform(0, 1, num_envs), 2).astype(np.float32)
        stored[rng.uniform(size=num_envs) < 0.3] = -np.inf  # new levels: no stored max return
        zeros = jnp.zeros((1, steps, num_envs), jnp.float32)
        batch = RolloutBatch(
            obs=None,
            actions=zeros,
            rewards=jnp.asarray(rewards)[None],
            dones=jnp.asarray(dones, jnp.uint8)[None],
            log_pis=zeros,
            values=jnp.asarray(values)[None],
            targets=zeros,
            advantages=jnp.asarray(advantages)[None],
            carry=None,
        )
        prefix = f"s{case}_"
        data.update(
            {
                prefix + "rewards": rewards,
                prefix + "dones": dones,
                prefix + "values": values,
                prefix + "advantages": advantages,
                prefix + "stored_max_returns": stored,
            }
        )
        max_mc, info = scores_of(UEDScore.MAX_MC, batch, {"max_returns": jnp.asarray(stored)[None]})
        data[prefix + "max_mc"] = np.asarray(max_mc[0])
        data[prefix + "max_mc_rollout_max_return"] = np.asarray(info["max_returns"][0])
        data[prefix + "pvl"] = np.asarray(scores_of(UEDScore.POSITIVE_VALUE_LOSS, batch, None)[0][0])
        data[prefix + "l1_value_loss"] = np.asarray(scores_of(UEDScore.L1_VALUE_LOSS, batch, None)[0][0])
    data["num_cases"] = np.array(4)
    data["meta"] = meta(note="scores are -inf where an env finished no episode (minimax's ignore_val)")
    np.savez_compressed(out / "minimax_scores.npz", **data)


# ---------------------------------------------------------------------------------------------------------
# Student updates


def shipped_flags(name: str, overrides: dict) -> list[str]:
    path = Path(minimax.__file__).parent / "config" / "configs" / "maze" / f"{name}.json"
    params = {key: values[0] for key, values in json.loads(path.read_text())["args"].items()}
    params.update(overrides)
    return [f"--{key}={value}" for key, value in params.items() if value is not None]


def make_runner(name: str, overrides: dict):
    sys.argv = ["minimax.train", *shipped_flags(name, overrides)]
    args = minimax_parser.parse_args(preview=False)
    experiment = ExperimentRunner(
        train_runner=args.train_runner,
        env_name=args.env_name,
        agent_rl_algo=args.agent_rl_algo,
        student_model_name=args.student_model_name,
        teacher_model_name=args.teacher_model_name,
        train_runner_kwargs=args.train_runner_args,
        env_kwargs=args.env_args,
        ued_env_kwargs=args.ued_env_args,
        student_rl_kwargs=args.student_rl_args,
        teacher_rl_kwargs=args.teacher_rl_args,
        student_model_kwargs=args.student_model_args,
        teacher_model_kwargs=args.teacher_model_args,
        eval_kwargs=args.eval_args,
        eval_env_kwargs=args.eval_env_args,
        n_devices=1,
    )
    return experiment.runner, args


def optimizer_fields(prefix: str, opt_state) -> dict:
    # optax.chain(clip_by_global_norm, adam): (EmptyState, (ScaleByAdamState, EmptyState))
    adam = opt_state[1][0]
    return {
        **flat_params(prefix + "mu/", adam.mu),
        **flat_params(prefix + "nu/", adam.nu),
        prefix + "count": np.asarray(adam.count[0]),
    }


def settings_of(args, runner) -> dict:
    rl, kw = args.student_rl_args, args.train_runner_args
    return dict(
        gamma=kw["discount"],
        gae_lambda=kw["gae_lambda"],
        lr=kw["lr"],
        max_grad_norm=kw["max_grad_norm"],
        adam_eps=kw["adam_eps"],
        clip_eps=rl["clip_eps"],
        vf_coef=rl["value_loss_coef"],
        ent_coef=rl["entropy_coef"],
        num_epochs=rl["n_epochs"],
        num_minibatches=rl["n_minibatches"],
        clip_value_loss=rl["clip_value_loss"],
        lstm_size=args.student_model_args["recurrent_hidden_dim"],
        num_envs=runner.n_parallel,
        num_steps=runner.n_rollout_steps,
    )


def batch_fields(train_batch, last_value) -> dict:
    b = jax.tree_util.tree_map(lambda x: np.asarray(x[0]), train_batch)  # one student
    return {
        "obs_image": b.obs["image"].astype(np.float32),
        "obs_dir": b.obs["agent_dir"].astype(np.int64),
        "actions": b.actions.astype(np.int64),
        "log_probs": b.log_pis,
        "values": b.values,
        "rewards": b.rewards,
        "dones": b.dones.astype(bool),
        "carry_c": b.carry[0][0],  # the carry the rollout started from ([T, B, H] stored, step 0)
        "carry_h": b.carry[1][0],
        "last_value": np.asarray(last_value[0]),
        "advantages": b.advantages,
        "targets": b.targets,
    }


def first_epoch_gradient(runner, train_state, train_batch) -> dict:
    """minimax's loss and gradient at the starting parameters on the whole batch in rollout order (one
    minibatch, as `_get_minibatches` lays it out before shuffling)."""
    agent = runner.student_pop.agent
    batch = jax.tree_util.tree_map(lambda x: x[0], train_batch)

    def one(params):
        return agent.grad_fn(params, train_state.apply_fn, batch, None)

    (loss, aux), grads = jax.jit(one)(jax.tree_util.tree_map(lambda x: x[0], train_state.params))
    names = ["actor_loss", "value_loss", "entropy", "mean_value", "mean_target", "mean_gae"]
    return {
        "grad_loss": np.asarray(loss),
        **{f"grad_{name}": np.asarray(value) for name, value in zip(names, aux, strict=True)},
        **flat_params("grad/", jax.tree_util.tree_map(lambda x: x[None], grads)),
    }


def stats_fields(stats) -> dict:
    return {f"stats_{key}": np.asarray(value).reshape(-1)[0] for key, value in stats.items()}


def close(a, b) -> float:
    return max(
        float(jnp.max(jnp.abs(x - y)))
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
    )


def dr_tick(runner, state):
    """`DRRunner.run` call by call: (train state before the update, train batch, bootstrap value, train state
    after, update statistics)."""
    rng, train_state, env_state, start_state, obs, carry, extra, ep_stats = state
    rng, *vrngs = jax.random.split(rng, runner.n_students + 1)
    obs, env_state, extra = runner.benv.reset(jnp.array(vrngs))
    ep_stats = runner.rolling_stats.reset_stats(batch_shape=(runner.n_students, runner.n_parallel * runner.n_eval))
    done = jnp.zeros((runner.n_students, runner.n_parallel * runner.n_eval), dtype=jnp.bool_)
    rng, subrng = jax.random.split(rng)
    rollout, env_state, start_state, obs, end_carry, extra, ep_stats, train_state = runner._rollout_students(
        subrng, train_state, env_state, start_state, obs, carry, done, None, extra, ep_stats
    )
    last_value = runner.student_pop.get_value(jax.lax.stop_gradient(train_state.params), obs, end_carry)
    train_batch = runner.student_rollout.get_batch(rollout, last_value)
    rng, subrng = jax.random.split(rng)
    after, stats = runner.student_pop.update(subrng, train_state, train_batch)
    return train_state, train_batch, last_value, after, stats


def record_dr(out: Path) -> None:
    runner, args = make_runner("dr", TINY)
    run = jax.jit(runner.run)
    for seed in range(100):  # the first seed whose tick 2 reaches a goal, so the batch has a reward
        state = tuple(run(*runner.reset(jax.random.PRNGKey(seed)))[1:])  # tick 1; its last carry starts tick 2
        train_state, train_batch, last_value, after, stats = dr_tick(runner, state)
        if float(train_batch.rewards.sum()) > 0:
            break
    difference = close(after.params, run(*state)[2].params)
    assert difference < 1e-6, f"the step-by-step tick differs from DRRunner.run by {difference}"

    data = {
        **flat_params("params_before/", train_state.params),
        **optimizer_fields("opt_before/", train_state.opt_state),
        **flat_params("params_after/", after.params),
        **optimizer_fields("opt_after/", after.opt_state),
        **batch_fields(train_batch, last_value),
        **first_epoch_gradient(runner, train_state, train_batch),
        **stats_fields(stats),
        "initial_reset": np.zeros(runner.n_parallel, bool),  # minimax starts each tick with done = False
        "meta": meta(
            method="dr",
            seed=seed,
            tick=2,
            run_vs_stepwise_max_abs=difference,
            **settings_of(args, runner),
            note="carry_c/carry_h: the LSTM carry DRRunner keeps from the previous tick; the first step does "
            "not reset it (initial_reset False). Leaves are named as cleanued's ActorCritic parameters.",
        ),
    }
    np.savez_compressed(out / "minimax_update_dr.npz", **data)


def record_plr(out: Path) -> None:
    runner, args = make_runner("plr", {**TINY, "plr_buffer_size": 8})
    state = runner.reset(jax.random.PRNGKey(2))
    run = jax.jit(runner.run)
    mgr = runner.plr_mgr
    n = runner.n_parallel
    data, ticks = {}, 0
    while True:
        rng, train_state, env_state, start_state, obs, carry, extra, ep_stats = state
        reference = run(*state)
        buffer_before = jax.tree_util.tree_map(lambda x: x[0], train_state.plr_buffer)

        # PLRRunner.run (sequential, no mutation), call by call
        rng, *vrngs = jax.random.split(rng, runner.n_students + 1)
        obs, env_state, extra = runner.benv.reset(jnp.array(vrngs), runner.n_parallel, 1)
        new_levels = env_state
        rng, subrng = jax.random.split(rng)
        levels, level_idxs, is_replay, next_buffer = mgr.sample(subrng, train_state.plr_buffer, new_levels, n)
        # the key of the draws: PopPLRManager.sample splits one key per student, PLRManager.sample three ways
        sampled_slots, sample_key = level_idxs, jax.random.split(jax.random.split(subrng, 2)[1], 3)[2]
        train_state = train_state.replace(plr_buffer=next_buffer)
        parent_idxs = jnp.full((runner.n_students, runner.n_parallel), -1)
        level_idxs, dupe_mask = mgr.dedupe_levels(next_buffer, levels, level_idxs)
        params_before, opt_before = train_state.params, train_state.opt_state
        result = runner._eval_and_update_plr(
            rng, levels, level_idxs, train_state, jnp.array([True] * runner.n_students), parent_idxs, dupe_mask
        )
        rng, train_state, env_state, start_state, obs, carry, extra, ep_stats, _, train_batch, ued_scores = result
        rng, subrng = jax.random.split(rng)
        state_before_update = train_state
        train_state, stats = runner._efficient_grad_update(subrng, train_state, train_batch, is_replay)
        rng, _, _ = jax.random.split(rng, 3)  # the (skipped) mutation step's keys
        train_state = train_state.increment()
        difference = close(train_state.params, reference[2].params)
        same_buffer = all(
            np.array_equal(np.asarray(x), np.asarray(y))
            for x, y in zip(
                jax.tree_util.tree_leaves(train_state.plr_buffer),
                jax.tree_util.tree_leaves(reference[2].plr_buffer),
                strict=True,
            )
        )
        assert difference < 1e-6 and same_buffer, (ticks, difference)

        prefix = f"tick{ticks}_"
        replay = bool(is_replay[0])
        data[prefix + "replay"] = np.array(replay)
        data[prefix + "new_wall_map"] = np.asarray(new_levels.wall_map[0])
        data[prefix + "new_goal_pos"] = np.asarray(new_levels.goal_pos[0]).astype(np.int64)
        data[prefix + "new_agent_pos"] = np.asarray(new_levels.agent_pos[0]).astype(np.int64)
        data[prefix + "new_agent_dir"] = np.asarray(new_levels.agent_dir_idx[0]).astype(np.int64)
        data[prefix + "sampled_slots"] = np.asarray(sampled_slots[0]).astype(np.int64)
        data[prefix + "dedupe_slots"] = np.asarray(level_idxs[0]).astype(np.int64)
        data[prefix + "dupe_mask"] = np.asarray(dupe_mask[0])
        data[prefix + "scores"] = np.asarray(ued_scores[0])
        stored = jnp.where(level_idxs[0] >= 0, next_buffer.max_returns[0][level_idxs[0]], -jnp.inf)
        _, info = compute_ued_scores(
            UEDScore.MAX_MC, train_batch, 1, info={"max_returns": stored[None]}, ignore_val=-jnp.inf, per_agent=True
        )
        data[prefix + "stored_max_returns"] = np.asarray(stored)  # what the MaxMC score read from the buffer
        data[prefix + "max_returns"] = np.asarray(info["max_returns"][0])  # what `update` stores
        if replay:
            data[prefix + "sample_key"] = np.asarray(sample_key)
        data[prefix + "ages_sampled"] = np.asarray(next_buffer.ages[0]).astype(np.int64)
        after = jax.tree_util.tree_map(lambda x: x[0], train_state.plr_buffer)
        data.update(buffer_fields(prefix + "after_", after, mgr))
        if ticks == 0:
            data.update(buffer_fields("tick_initial_", buffer_before, mgr))
        full = bool(buffer_before.filled.all())
        ticks += 1
        state = tuple(reference[1:9])  # run also returns the buffer it keeps apart on several devices (None)
        if replay and full and float(train_batch.rewards.sum()) > 0:  # a replay whose rollout reached a goal
            break
        assert ticks < 60, "no rewarded replay tick after the buffer filled"

    # The update of this replay tick
    pvl = compute_ued_scores(UEDScore.POSITIVE_VALUE_LOSS, train_batch, 1, ignore_val=-jnp.inf, per_agent=True)[0]
    l1 = compute_ued_scores(UEDScore.L1_VALUE_LOSS, train_batch, 1, ignore_val=-jnp.inf, per_agent=True)[0]
    last_value = runner.student_pop.get_value(jax.lax.stop_gradient(params_before), obs, carry)
    data.update(
        {
            **flat_params("params_before/", params_before),
            **optimizer_fields("opt_before/", opt_before),
            **flat_params("params_after/", train_state.params),
            **optimizer_fields("opt_after/", train_state.opt_state),
            **batch_fields(train_batch, last_value),
            **first_epoch_gradient(runner, state_before_update, train_batch),
            **stats_fields(stats),
            "initial_reset": np.zeros(runner.n_parallel, bool),
            "level_slots": np.asarray(level_idxs[0]).astype(np.int64),
            "stored_max_returns": np.asarray(stored),
            "max_mc": np.asarray(ued_scores[0]),
            "max_mc_rollout_max_return": np.asarray(info["max_returns"][0]),
            "pvl": np.asarray(pvl[0]),
            "l1_value_loss": np.asarray(l1[0]),
            "num_ticks": np.array(ticks),
            "meta": meta(
                method="plr",
                replay_tick=ticks - 1,
                **settings_of(args, runner),
                runner_args={
                    key: value
                    for key, value in args.train_runner_args.items()
                    if isinstance(value, (bool, int, float, str))
                },
                note="Robust PLR's first replay tick after the 8-slot buffer filled whose rollout reached a goal; "
                "PLR starts every rollout from a zero carry with done = False. tick<k>_*: the runner's buffer per "
                "tick up to it.",
            ),
        }
    )
    np.savez_compressed(out / "minimax_update_plr.npz", **data)


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--out", default=str(REPO_ROOT / "tests" / "fixtures"))
    cli.add_argument("--only", choices=["buffer", "buffer_4000", "scores", "dr", "plr"], nargs="*")
    options = cli.parse_args()
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    recorders = {
        "buffer": record_buffer,
        "buffer_4000": record_buffer_shipped_size,
        "scores": record_scores,
        "dr": record_dr,
        "plr": record_plr,
    }
    for name in options.only or recorders:
        recorders[name](out)
        print(f"recorded {name}", flush=True)


if __name__ == "__main__":
    main()
