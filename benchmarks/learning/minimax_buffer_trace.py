"""Record what reaches minimax-lib 0.2.0's level buffer in a real Robust PLR run, tick by tick, for
benchmarks/learning/buffer_trace_check.py, which feeds the same inputs to cleanued's buffer.

The buffer parity tests drive both buffers with scripted or random scores; a training run offers real ones: MaxMC
scores of a learning policy, the levels its generator draws, the same levels coming back. This runs `minimax.train`
(its flags, in its venv) with the three entry points of its `PopPLRManager` (`sample`, `dedupe_levels`, `update`)
wrapped to hand their inputs and outputs to the host (`jax.debug.callback`, ordered); the computation is minimax's
own. Per tick it keeps the key `sample` split from, the replay decision, the new levels offered, the slots drawn,
the deduplicated slots and duplicate mask, the scores and max returns `update` got, the levels played (their start
states), and the buffer `update` left (scores, max returns, ages, filled). Every UPDATE_EVERY-th PPO update also
keeps its number among the run's updates, its parameters and Adam state, and its whole rollout batch. The file is
large (tens of MB for 600 ticks at 4,000 slots): it is not kept.

    benchmarks/.minimax-venv/bin/python benchmarks/learning/minimax_buffer_trace.py --trace-out /tmp/trace.npz \
        --seed=1 --train_runner=plr ... (minimax.train's flags)
"""

import os
import runpy
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402

# The parameter-name mapping of the parity fixtures, from this file's folder.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minimax.util.rl import plr  # noqa: E402

RECORDS: dict[str, list] = {}


def keep(**arrays) -> None:
    for name, value in arrays.items():
        RECORDS.setdefault(name, []).append(np.asarray(value))


def wrap(name: str, record):
    original = getattr(plr.PopPLRManager, name)

    def wrapped(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        jax.debug.callback(keep, **record(*args, out=out, **kwargs), ordered=True)
        return out

    setattr(plr.PopPLRManager, name, wrapped)


def sample_record(rng, plr_buffer, new_levels, n, random=False, out=None):
    _, level_idxs, is_replay, _ = out
    return {
        "sample_rng": jax.random.key_data(rng) if jax.dtypes.issubdtype(rng.dtype, jax.dtypes.prng_key) else rng,
        "replay": is_replay,
        "slots": level_idxs,
        "new_walls": new_levels.wall_map,
        "new_agent_pos": new_levels.agent_pos,
        "new_goal_pos": new_levels.goal_pos,
        "new_agent_dir": new_levels.agent_dir_idx,
    }


def dedupe_record(plr_buffer, levels, level_idxs, out=None):
    return {"dedupe_slots": out[0], "dupe_mask": out[1]}


def update_record(plr_buffer, levels, level_idxs, ued_scores, dupe_mask=None, info=None, ignore_val=None,
                  parent_idxs=None, out=None):  # fmt: skip
    return {
        "update_slots": level_idxs,
        "scores": ued_scores,
        "max_returns": info["max_returns"],
        "after_scores": out.scores,
        "after_max_returns": out.max_returns,
        "after_ages": out.ages,
        "after_filled": out.filled,
        "played_walls": levels.wall_map,
        "played_goal_pos": levels.goal_pos,
        "played_agent_pos": levels.agent_pos,
        "played_agent_dir": levels.agent_dir_idx,
        "played_time": levels.time,
    }


def wrap_scores() -> None:
    """Record the rollouts minimax scores (rewards, dones, values, the stored max returns) beside its scores and the
    max returns it gives the buffer to store."""
    from minimax.runners import plr_runner

    original = plr_runner.compute_ued_scores

    def wrapped(score_name, batch, n_eval, info=None, ignore_val=None, per_agent=False):
        out = original(score_name, batch, n_eval, info=info, ignore_val=ignore_val, per_agent=per_agent)
        jax.debug.callback(
            keep,
            rollout_rewards=batch.rewards,
            rollout_dones=batch.dones,
            rollout_values=batch.values,
            rollout_stored_max_returns=info["max_returns"],
            rollout_scores=out[0],
            rollout_max_returns=out[1]["max_returns"],
            ordered=True,
        )
        return out

    plr_runner.compute_ued_scores = wrapped


UPDATE_EVERY = 10
"""Every how many PPO updates the update's inputs and outputs are kept (each is a few MB)."""


def wrap_updates() -> None:
    """Record every UPDATE_EVERY-th PPO update: parameters and Adam state before and after, and the batch."""
    from minimax.util.rl import agent_pop
    from minimax_fixtures import flat_params, optimizer_fields

    original = agent_pop.AgentPop.update
    seen = [0]

    def keep_update(before_params, before_opt, after_params, after_opt, batch):
        seen[0] += 1
        if seen[0] % UPDATE_EVERY:
            return
        fields = {
            **flat_params("update_params_before/", before_params),
            **optimizer_fields("update_opt_before/", before_opt),
        }
        fields |= {
            **flat_params("update_params_after/", after_params),
            **optimizer_fields("update_opt_after/", after_opt),
        }
        fields |= {f"update_batch/{name}": np.asarray(value)[0] for name, value in batch.items()}
        keep(update_number=np.asarray(seen[0]), **fields)

    def wrapped(self, rng, train_state, batch, prefix_steps=0, fake=False):
        out = original(self, rng, train_state, batch, prefix_steps=prefix_steps, fake=fake)
        if not fake:
            after = out[0]
            kept = {name: getattr(batch, name) for name in ("actions", "log_pis", "values", "targets", "advantages",
                                                             "dones", "rewards")}  # fmt: skip
            kept["obs_image"], kept["obs_dir"] = batch.obs["image"], batch.obs["agent_dir"]
            kept["carry_c"], kept["carry_h"] = batch.carry[0][:, 0], batch.carry[1][:, 0]
            jax.debug.callback(
                keep_update, train_state.params, train_state.opt_state, after.params, after.opt_state, kept,
                ordered=True,
            )  # fmt: skip
        return out

    agent_pop.AgentPop.update = wrapped


def main() -> None:
    arguments = sys.argv[1:]
    if "--trace-out" not in arguments:
        sys.exit("give --trace-out FILE.npz, then minimax.train's flags")
    index = arguments.index("--trace-out")
    out = arguments[index + 1]
    sys.argv = ["minimax.train", *arguments[:index], *arguments[index + 2 :]]
    wrap("sample", sample_record)
    wrap("dedupe_levels", dedupe_record)
    wrap("update", update_record)
    wrap_scores()
    wrap_updates()
    try:
        runpy.run_module("minimax.train", run_name="__main__", alter_sys=True)
    finally:
        jax.effects_barrier()
        # Ticks whose update is missing (a stop between two callbacks) are dropped.
        per_tick = {name: values for name, values in RECORDS.items() if not name.startswith("update_")}
        ticks = min(len(values) for values in per_tick.values()) if per_tick else 0
        arrays = {name: np.stack(values[:ticks]) for name, values in per_tick.items()}
        arrays |= {name: np.stack(values) for name, values in RECORDS.items() if name.startswith("update_")}
        np.savez_compressed(out, **arrays)
        print(f"recorded {ticks} ticks in {out}", flush=True)


if __name__ == "__main__":
    main()
