"""algos/plr_parallel.py and algos/accel_parallel.py: every update plays new, replay (and mutant) blocks in
one rollout; fresh levels stand in for replay and no PPO step is kept until the buffer is warm, then every
update trains on the replay block; mutants enter the buffer one generation deeper; resume is exact.

Most checks read one spied run per script (`spied_run`): the functions an update calls (`rollout`, `ppo_update`,
the buffer's `sample_replay` and `insert_many`, the level generator and mutator) hand what they were given to the
test from inside the compiled program, so the test can recompute from plain definitions which levels each block
played, what the buffer was offered and what the metrics say."""

import collections
import functools
from typing import NamedTuple

import jax
import numpy as np
import pytest

from algos import accel_parallel, plr_parallel
from common import level_buffer
from common.config import ConfigError, with_flags
from tests.states import assert_states_close, for_seed, newest_state, params_changed, run_script

TINY = dict(
    num_seeds=2,
    num_envs=4,
    num_steps=24,
    max_steps=12,
    maze_size=5,
    lstm_size=16,
    buffer_size=24,
    total_updates=6,
    log_interval=1,
    eval_interval=0,
    checkpoint_interval=6,
    screenshot_interval=0,
)
MODULES = [plr_parallel, accel_parallel]
SPIED_UPDATES_TO_FILL = 2
"""The spied run's buffer holds two updates' levels (`spied_config`) and warms up only once full."""
SPIED_CALLS = ("rollout", "ppo_update", "sample_replay", "insert_many")
"""The call sites `spied_run` records once per seed and update."""


def tiny_config(module, tmp_path, **overrides):
    # Parallel PLR's 60 default walls do not fit a 5x5 maze; Parallel ACCEL's new levels stay empty.
    walls = {"n_walls": 3} if module is plr_parallel else {}
    return with_flags(module.Config(), **{**TINY, **walls, "runs_dir": str(tmp_path), **overrides})


def module_name(module) -> str:
    return module.__name__.split(".")[-1]


class Update(NamedTuple):
    """One update of the spied run, on the host: the runner state before and after it (leaves [S, ...]), its
    metrics ({key: [S]}), what each spied function was called with ({name: one record per seed, in seed order}),
    the keys handed to the level generator and the mutator (key data [2], one per level, any seed and order) and the
    levels the generator made (one Level each, any seed and order)."""

    before: object
    after: object
    metrics: dict
    calls: dict
    keys: list
    generated: list


def key_data(rng) -> jax.Array:
    return jax.random.key_data(rng)


def spy(function, record, on_call):
    """`function`, which also hands `record(result, *args, **kwargs)` to `on_call` from inside the compiled program.
    Ordered: under the vmap over seeds the records of one call site come seed after seed."""

    def spied(*args, **kwargs):
        result = function(*args, **kwargs)
        jax.debug.callback(on_call, record(result, *args, **kwargs), ordered=True)
        return result

    return spied


# What each spy hands the test, from the spied function's result and arguments.
def record_rollout(result, rng, network, params, start, *_):
    transitions = result[0]
    return dict(
        key=key_data(rng),
        first_params=jax.tree.leaves(params)[0],
        levels=start.env_state.level,
        done=transitions.done,
        reward=transitions.reward,
        action=transitions.action,
        value=transitions.value,
        end=dict(obs=result[1].obs, carry=result[1].carry, reset=result[1].reset),
    )


def record_sample_replay(result, rng, *_, **__):
    return dict(key=key_data(rng), slots=result[1])


def record_insert_many(result, buffer, levels, scores, max_returns, mutations, **kwargs):
    return dict(
        levels=levels,
        scores=scores,
        max_returns=max_returns,
        mutations=mutations,
        active=kwargs["active"],
        successes=kwargs["successes"],
        failures=kwargs["failures"],
    )


def record_ppo_update(result, rng, train_state, network, carry, transitions, advantages, targets, *_):
    return dict(
        key=key_data(rng),
        reward=transitions.reward,
        done=transitions.done,
        action=transitions.action,
        advantages=advantages,
        targets=targets,
    )


def spied_config(module, tmp_path):
    """TINY with a buffer of `SPIED_UPDATES_TO_FILL` updates' levels, warm once full: every env finishes an episode
    (episodes end within 12 of the rollout's 24 steps) and fresh levels rarely repeat, so the buffer fills in about
    that many updates, a cold update ages filled slots, and the first warm update starts exactly at the
    --min-fill-ratio boundary."""
    buffer_size = SPIED_UPDATES_TO_FILL * module.Config().num_blocks * TINY["num_envs"]
    return tiny_config(module, tmp_path, buffer_size=buffer_size, min_fill_ratio=1.0)


@pytest.fixture(scope="module", params=MODULES, ids=module_name)
def spied_run(request, tmp_path_factory):
    """(module, config, [Update] per update) of a tiny 2-seed run driven update by update, as the driver does."""
    module = request.param
    config = spied_config(module, tmp_path_factory.mktemp("runs"))
    calls, keys, generated = collections.defaultdict(list), [], []

    def call_site(name):
        return lambda values: calls[name].append(jax.device_get(values))

    def record_key(result, rng, *args, **kwargs):
        return dict(key=key_data(rng), level=result)

    def on_level_call(values, made_by_generator):
        keys.append(np.asarray(values["key"]))
        if made_by_generator:
            generated.append(jax.device_get(values["level"]))

    with pytest.MonkeyPatch.context() as patch:
        for owner, name, record in [
            (module, "rollout", record_rollout),
            (module, "ppo_update", record_ppo_update),
            (level_buffer, "sample_replay", record_sample_replay),
            (level_buffer, "insert_many", record_insert_many),
        ]:
            patch.setattr(owner, name, spy(getattr(owner, name), record, call_site(name)))
        # The generator (bound when make_train runs) and the mutator take one key per level; their records are
        # only counted and looked up, so their order under the nested vmaps does not matter.
        for name in ("sample_dr_level", "mutate_level"):
            if hasattr(module, name):
                on_call = functools.partial(on_level_call, made_by_generator=name == "sample_dr_level")
                patch.setattr(module, name, spy(getattr(module, name), record_key, on_call))
        functions = module.make_train(config)
        runner = jax.device_get(jax.jit(functions.init)(jax.random.split(jax.random.key(0), config.run.num_seeds)))
        step = jax.jit(functions.step)
        updates = []
        for number in range(config.run.total_updates):
            calls.clear()
            keys.clear()
            generated.clear()
            after, metrics = jax.device_get(step(runner))
            jax.effects_barrier()
            # One record per seed at each call site, in seed order: each seed's rollout got that seed's parameters.
            assert {name: len(records) for name, records in calls.items()} == dict.fromkeys(
                SPIED_CALLS, config.run.num_seeds
            )
            for seed, record in enumerate(calls["rollout"]):
                first_params = jax.tree.leaves(runner.train_state.params)[0][seed]
                np.testing.assert_array_equal(record["first_params"], first_params, err_msg=f"update {number}")
            metrics = {key: value[:, 0] for key, value in metrics.items()}
            updates.append(Update(runner, after, metrics, dict(calls), list(keys), list(generated)))
            runner = after
    return module, config, updates


def in_block(tree, block: int, num_envs: int, axis: int = 0):
    """Block `block` (0 new, 1 replay, 2 mutants) of the envs laid along `axis` of every leaf."""
    envs = np.arange(block * num_envs, (block + 1) * num_envs)
    return jax.tree.map(lambda x: np.take(x, envs, axis=axis), tree)


def take_levels(levels, slots):
    return jax.tree.map(lambda x: x[slots], levels)


def assert_levels_equal(actual, expected, message: str):
    for field in ("wall_map", "goal_pos", "agent_pos", "agent_dir"):
        np.testing.assert_array_equal(getattr(actual, field), getattr(expected, field), err_msg=f"{message}: {field}")


def episodes(rewards: np.ndarray, dones: np.ndarray, per_step: np.ndarray) -> list[tuple[float, list[float]]]:
    """One env's finished episodes in order: (its return, `per_step` over its steps)."""
    finished, total, steps = [], 0.0, []
    for reward, done, value in zip(rewards.tolist(), dones.tolist(), per_step.tolist(), strict=True):
        total, steps = total + reward, [*steps, value]
        if done:
            finished.append((total, steps))
            total, steps = 0.0, []
    return finished


def level_key(levels, index: int) -> bytes:
    """What makes level `index` of a batch the same level to the buffer: its walls, goal and start position (not
    the start direction)."""
    return b"".join(np.asarray(leaf[index]).tobytes() for leaf in (levels.wall_map, levels.goal_pos, levels.agent_pos))


def slot_of(buffer, levels, index: int) -> int | None:
    """The first filled slot of `buffer` holding level `index` of `levels`, or None."""
    key = level_key(levels, index)
    return next((int(slot) for slot in np.flatnonzero(buffer.filled) if level_key(buffer.levels, slot) == key), None)


def mean_return(rewards: np.ndarray, dones: np.ndarray) -> float:
    """Mean return of the finished episodes of a block (rewards, dones [T, B]): AMaze pays only the last step."""
    return float(rewards[dones].sum() / dones.sum()) if dones.any() else float("nan")


def warm_of(update: Update) -> np.ndarray:
    return update.metrics["buffer/replay_fraction"] == 1.0


@pytest.mark.slow
def test_blocks_warm_up_then_train_on_replay_every_update(spied_run):
    """Per seed, an update replays and keeps its PPO step exactly when the buffer was --min-fill-ratio full before
    it (here: full), counts a student update only then, and logs the replay block's levels and the PPO metrics
    only then; a skipped step's NaN metrics raise no fault. Every seed warms up within the run and replays at every
    update after."""
    module, config, updates = spied_run
    for update in updates:
        warm = warm_of(update)
        np.testing.assert_array_equal(warm, update.before.buffer.filled.mean(1) >= config.min_fill_ratio)
        np.testing.assert_array_equal(update.after.student_updates, update.before.student_updates + warm)
        for seed in range(config.run.num_seeds):
            assert params_changed(update.before.train_state.params, update.after.train_state.params, seed) == warm[seed]
        np.testing.assert_array_equal(np.isnan(update.metrics["level_replay/walls"]), ~warm)
        np.testing.assert_array_equal(np.isfinite(update.metrics["ppo/loss"]), warm)
        assert update.metrics["health/finite"].all(), "a skipped PPO step's NaN metrics are no fault"
    warm = np.array([warm_of(update) for update in updates])  # [updates, S]
    # A fresh level can repeat one already in the buffer (an empty maze with the same goal and start), which delays
    # the fill by an update; any warm update at all starts exactly at the --min-fill-ratio boundary (full).
    assert not warm[:SPIED_UPDATES_TO_FILL].any() and warm[-3:].all()
    assert (np.diff(warm.astype(int), axis=0) >= 0).all(), "once warm, every update replays"
    if module is accel_parallel:
        final = updates[-1]
        assert (final.metrics["level_new/walls"] == 0).all(), "new levels are empty mazes"
        assert (final.metrics["level_mutant/walls"] > 0).all()
        assert final.after.buffer.mutations.max() >= 2, "mutants of mutants enter the buffer"
        np.testing.assert_array_equal(final.metrics["buffer/max_mutations"], final.after.buffer.mutations.max(1))


@pytest.mark.slow
def test_the_replay_block_plays_the_drawn_slots_and_ppo_trains_on_it(spied_run):
    """Once warm, the replay block's levels are the buffer's levels at the slots `sample_replay` drew, in draw
    order; before, they are fresh levels, not the new block's. Parallel ACCEL's mutants start where the replay
    level in their env starts and differ from it in at most --num-edits walls. PPO gets the replay block's
    transitions."""
    module, config, updates = spied_run
    num_envs = config.ppo.num_envs
    for number, update in enumerate(updates):
        for seed, warm in enumerate(warm_of(update)):
            played, message = update.calls["rollout"][seed], f"update {number} seed {seed}"
            replay_levels = in_block(played["levels"], 1, num_envs)
            if warm:
                drawn = update.calls["sample_replay"][seed]["slots"]
                buffer_levels = for_seed(update.before.buffer.levels, seed)
                assert_levels_equal(replay_levels, take_levels(buffer_levels, drawn), message)
            else:
                new_levels = in_block(played["levels"], 0, num_envs)
                assert any(
                    (getattr(replay_levels, field) != getattr(new_levels, field)).any()
                    for field in ("wall_map", "goal_pos", "agent_pos")
                ), "the stand-ins are other fresh levels"
                made_now = {level_key(jax.tree.map(lambda x: x[None], level), 0) for level in update.generated}
                assert all(level_key(replay_levels, env) in made_now for env in range(num_envs)), (
                    f"{message}: the stand-ins are this update's fresh levels, not the buffer's"
                )
            if module is accel_parallel:
                # The mutator flips walls and moves the goal, never the agent: a mutant starts where its parent does.
                mutants = in_block(played["levels"], 2, num_envs)
                np.testing.assert_array_equal(mutants.agent_pos, replay_levels.agent_pos, err_msg=message)
                np.testing.assert_array_equal(mutants.agent_dir, replay_levels.agent_dir, err_msg=message)
                flips = (mutants.wall_map != replay_levels.wall_map).sum((1, 2))
                assert (flips <= config.num_edits).all()
            trained = update.calls["ppo_update"][seed]
            for field in ("reward", "done", "action"):
                np.testing.assert_array_equal(trained[field], in_block(played[field], 1, num_envs, axis=1))


@pytest.mark.slow
def test_ppo_learns_from_gae_bootstrapped_where_the_rollout_ended(spied_run):
    """PPO's advantages and value targets for the replay block are GAE(gamma, lambda) computed here by a loop over
    the block's rewards, values and dones (an episode's end is terminal), bootstrapped from the student's value of
    the state each env's rollout ended in (mid-episode in most envs)."""
    module, config, updates = spied_run
    ppo, num_envs = config.ppo, config.ppo.num_envs
    apply = jax.jit(module.ActorCritic().apply)
    for number, update in enumerate(updates):
        for seed in range(config.run.num_seeds):
            played, trained = update.calls["rollout"][seed], update.calls["ppo_update"][seed]
            end = in_block(played["end"], 1, num_envs)
            params = for_seed(update.before.train_state.params, seed)
            _, _, last_value = apply(params, end["carry"], module.add_time_axis(end["obs"]), end["reset"][None])
            rewards, dones, values = (
                in_block(played[field], 1, num_envs, axis=1) for field in ("reward", "done", "value")
            )
            advantages, gae, next_value = np.zeros_like(values), 0.0, np.asarray(last_value[0])
            for step in reversed(range(ppo.num_steps)):
                not_done = 1.0 - dones[step]
                delta = rewards[step] + ppo.gamma * next_value * not_done - values[step]
                gae = delta + ppo.gamma * ppo.gae_lambda * not_done * gae
                advantages[step], next_value = gae, values[step]
            message = f"update {number} seed {seed}"
            np.testing.assert_allclose(trained["advantages"], advantages, rtol=1e-4, atol=1e-5, err_msg=message)
            np.testing.assert_allclose(trained["targets"], advantages + values, rtol=1e-4, atol=1e-5, err_msg=message)


@pytest.mark.slow
def test_the_buffer_is_offered_every_played_level_with_its_maxmc_score_and_history(spied_run):
    """`insert_many` gets every played level in block order, active where its rollout finished an episode, and the
    MaxMC score, max return and outcome counts computed here: R_max is the highest return on the level, its slot's
    stored one included if it is in the buffer; the score the mean over finished episodes of each episode's mean of
    R_max - V(s_t) (0 where none finished); the slot's successes and failures plus this rollout's. Generations: 0
    for new and replayed levels, mutants one more than their parent (the replay level in their env when warm, a
    fresh level before). The logged level score is the mean of the scores."""
    module, config, updates = spied_run
    num_envs = config.ppo.num_envs
    for number, update in enumerate(updates):
        for seed, warm in enumerate(warm_of(update)):
            played, offered = update.calls["rollout"][seed], update.calls["insert_many"][seed]
            buffer = for_seed(update.before.buffer, seed)
            message = f"update {number} seed {seed}"
            assert_levels_equal(offered["levels"], played["levels"], message)
            np.testing.assert_array_equal(offered["active"], played["done"].any(0), err_msg=message)
            scores, max_returns, successes, failures = [], [], [], []
            for env in range(config.num_blocks * num_envs):
                slot = slot_of(buffer, played["levels"], env)
                prior = (
                    (0.0, 0.0, 0.0)
                    if slot is None
                    else (buffer.max_returns[slot], buffer.successes[slot], buffer.failures[slot])
                )
                finished = episodes(played["reward"][:, env], played["done"][:, env], played["value"][:, env])
                r_max = max([prior[0], *(total for total, _ in finished)])
                means = [np.mean([r_max - value for value in values]) for _, values in finished]
                scores.append(np.mean(means) if finished else 0.0)
                max_returns.append(r_max)
                successes.append(prior[1] + sum(total > 0 for total, _ in finished))
                failures.append(prior[2] + sum(total == 0 for total, _ in finished))
            np.testing.assert_allclose(offered["scores"], scores, rtol=1e-5, atol=1e-6, err_msg=message)
            np.testing.assert_allclose(offered["max_returns"], max_returns, rtol=1e-6, err_msg=message)
            np.testing.assert_array_equal(offered["successes"], successes, err_msg=message)
            np.testing.assert_array_equal(offered["failures"], failures, err_msg=message)
            np.testing.assert_allclose(update.metrics["buffer/level_score"][seed], np.mean(scores), rtol=1e-5)
            generations = np.zeros(config.num_blocks * num_envs, int)
            if module is accel_parallel:
                drawn = update.calls["sample_replay"][seed]["slots"]
                generations[2 * num_envs :] = (buffer.mutations[drawn] if warm else 0) + 1
            np.testing.assert_array_equal(offered["mutations"], generations, err_msg=message)


@pytest.mark.slow
def test_levels_whose_rollout_finished_no_episode_stay_out_of_the_buffer(tmp_path):
    """One update of Parallel PLR, one seed, on empty 3x3 mazes whose episodes outlast the 16-step rollout: an env
    finishes an episode only by reaching the goal. The buffer then holds exactly the distinct levels whose env
    finished one. Its own run, as every env of the spied runs finishes an episode."""
    overrides = dict(num_seeds=1, num_steps=16, max_steps=17, maze_size=3, n_walls=0, lstm_size=8, buffer_size=8)
    config = tiny_config(plr_parallel, tmp_path, **overrides, total_updates=1)
    played = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plr_parallel, "rollout", spy(plr_parallel.rollout, record_rollout, played.append))
        functions = plr_parallel.make_train(config)
        runner = jax.jit(functions.init)(jax.random.split(jax.random.key(0), 1))
        runner, _ = jax.device_get(jax.jit(functions.step)(runner))
    jax.effects_barrier()
    finished = played[0]["done"].any(0)
    assert finished.any() and not finished.all(), "the check needs envs that finished an episode and envs that did not"
    buffer = for_seed(runner.buffer, 0)
    entered = {level_key(buffer.levels, slot) for slot in np.flatnonzero(buffer.filled)}
    assert entered == {level_key(played[0]["levels"], env) for env in np.flatnonzero(finished)}
    assert buffer.filled.sum() == len(entered), "one slot per distinct level"


@pytest.mark.slow
def test_ages_count_the_levels_played_since_each_slot_was_replayed(spied_run):
    """The buffer's ages after each update, from those before it: a warm update draws its replay slots one after
    another, each draw ageing every filled slot by 1 and restarting the drawn one at 0; a cold update ages every
    filled slot by one block of levels. Insertion keeps those ages (an evicted slot's included); empty slots are
    0."""
    module, config, updates = spied_run
    for number, update in enumerate(updates):
        for seed, warm in enumerate(warm_of(update)):
            filled = update.before.buffer.filled[seed]
            ages = np.where(filled, update.before.buffer.ages[seed], 0)
            if warm:
                for slot in update.calls["sample_replay"][seed]["slots"]:
                    ages = np.where(filled, ages + 1, 0)
                    ages[slot] = 0
            else:
                ages = np.where(filled, ages + config.ppo.num_envs, 0)
            np.testing.assert_array_equal(update.after.buffer.ages[seed], ages, err_msg=f"update {number} seed {seed}")


@pytest.mark.slow
def test_metrics_describe_their_own_block(spied_run):
    """train/ and train_new/ are the mean returns and solve rates of the replay and the new block's finished
    episodes; level_new/, level_replay/ (warm only) and level_mutant/walls the mean wall counts of the levels each
    block played; buffer/fill the filled fraction after the update; buffer/mutant_generation the mutants' mean
    generation."""
    module, config, updates = spied_run
    num_envs = config.ppo.num_envs
    blocks = {"train": 1, "train_new": 0}
    for number, update in enumerate(updates):
        for seed, warm in enumerate(warm_of(update)):
            played, offered = update.calls["rollout"][seed], update.calls["insert_many"][seed]
            message = f"update {number} seed {seed}"
            for prefix, block in blocks.items():
                rewards, dones = (in_block(played[field], block, num_envs, axis=1) for field in ("reward", "done"))
                solved = float((dones & (rewards > 0)).sum() / dones.sum()) if dones.any() else float("nan")
                for name, value in (("return", mean_return(rewards, dones)), ("solve_rate", solved)):
                    np.testing.assert_allclose(
                        update.metrics[f"{prefix}/{name}"][seed], value, rtol=1e-6, err_msg=message
                    )
            walls = played["levels"].wall_map.sum((1, 2))
            expected = {"level_new": walls[:num_envs].mean(), "level_replay": walls[num_envs : 2 * num_envs].mean()}
            if not warm:
                expected["level_replay"] = float("nan")
            if module is accel_parallel:
                expected["level_mutant"] = walls[2 * num_envs :].mean()
                mutant_generation = offered["mutations"][2 * num_envs :].mean()
                np.testing.assert_allclose(update.metrics["buffer/mutant_generation"][seed], mutant_generation)
            for prefix, value in expected.items():
                np.testing.assert_allclose(update.metrics[f"{prefix}/walls"][seed], value, rtol=1e-6, err_msg=message)
            np.testing.assert_allclose(update.metrics["buffer/fill"][seed], update.after.buffer.filled[seed].mean())


@pytest.mark.slow
def test_no_key_is_drawn_twice(spied_run):
    """The keys the run's updates hand to the level generator, the mutator, the replay draw, the rollout and PPO,
    and the key each update passes on, are all distinct: no two of them draw the same randomness."""
    _, config, updates = spied_run
    keys = []
    for update in updates:
        keys += update.keys + [
            call["key"] for name in ("rollout", "sample_replay", "ppo_update") for call in update.calls[name]
        ]
        keys += list(jax.random.key_data(update.after.rng))
    # Per seed and update: a key per level generated (new levels and stand-ins, generated warm or not) or mutated,
    # then replay, rollout, PPO and the next update's.
    assert len(keys) == len(updates) * config.run.num_seeds * (config.num_blocks * config.ppo.num_envs + 4)
    assert len({bytes(np.asarray(key, np.uint32)) for key in keys}) == len(keys)


@pytest.mark.slow
def test_training_levels_are_the_highest_scoring_slots(spied_run):
    """The levels the driver draws (`levels`): the --num-envs filled slots of highest score (ties in slot order)
    labelled with their scores, and for Parallel ACCEL their mutation generations."""
    module, config, updates = spied_run
    buffer = updates[-1].after.buffer
    levels, labels = jax.device_get(jax.jit(module.make_train(config).levels)(updates[-1].after))
    for seed in range(config.run.num_seeds):
        scores, filled = buffer.scores[seed], buffer.filled[seed]
        top = sorted(np.flatnonzero(filled), key=lambda slot: (-scores[slot], slot))[: config.ppo.num_envs]
        assert_levels_equal(for_seed(levels, seed), take_levels(for_seed(buffer.levels, seed), top), f"seed {seed}")
        np.testing.assert_array_equal(labels["score"][seed], scores[top])
        if module is accel_parallel:
            np.testing.assert_array_equal(labels["mutations"][seed], buffer.mutations[seed][top])


@pytest.mark.parametrize(
    ("module", "overrides", "message"),
    [
        (plr_parallel, dict(buffer_size=3), "--buffer-size \\(3\\) must hold at least --num-envs \\(4\\) levels"),
        (accel_parallel, dict(buffer_size=3), "--buffer-size \\(3\\) must hold at least --num-envs \\(4\\) levels"),
        (plr_parallel, dict(learnability_decay=0.5), "--learnability-decay \\(0.5\\) .*max_mc does not use it"),
        (
            accel_parallel,
            dict(mutation_criterion="hard", mutation_subsample_size=3),
            "--mutation-subsample-size \\(3\\) must divide --num-envs \\(4\\) for the hard criterion",
        ),
    ],
    ids=["plr-buffer", "accel-buffer", "plr-decay", "accel-subsample"],
)
def test_invalid_flags(module, overrides, message, tmp_path):
    with pytest.raises(ConfigError, match=message):
        tiny_config(module, tmp_path, **overrides)


@pytest.mark.slow
@pytest.mark.parametrize("module", MODULES, ids=module_name)
def test_resume_equals_uninterrupted(module, tmp_path):
    common = dict(log_interval=2, checkpoint_interval=2)
    straight = tiny_config(module, tmp_path, run_name="straight", **common)
    run_script(module, straight)
    run_script(module, tiny_config(module, tmp_path, run_name="split", total_updates=2, **common))
    run_script(module, tiny_config(module, tmp_path, run_name="split", resume=True, **common))
    states = [newest_state(module, straight, tmp_path / name) for name in ("straight", "split")]
    assert int(states[0].update[0]) == 6 and int(states[0].buffer.filled.sum()) > 0
    assert_states_close(*states)


def test_parallel_accel_counts_all_three_blocks():
    config = with_flags(accel_parallel.Config(), num_envs=8, num_steps=16)
    assert config.env_steps_per_update == 3 * 8 * 16
    assert with_flags(plr_parallel.Config(), num_envs=8, num_steps=16).env_steps_per_update == 2 * 8 * 16
