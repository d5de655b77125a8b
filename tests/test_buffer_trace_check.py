"""benchmarks/learning/buffer_trace_check.py on traces built from minimax's own recordings (tests/fixtures): the
PLR buffer's cycles (minimax_plr_buffer.npz), its MaxMC scores (minimax_scores.npz) and two PPO updates
(minimax_update_*.npz), laid out as minimax_buffer_trace.py writes a trace. On minimax's data the check finds no
difference and no flipped draw; a recorded field changed at one tick is named at that tick, and the check stops
there; a draw from another key is counted as flipped and played as recorded; new levels placed in another of
equally likely slots, or another of them evicted, are put where minimax placed them, and only then; a PPO update
off by more than the parity tolerance is named. The key of the draws is the third of three splits of the second
agent's key. minimax's recorded Robust PLR rollout (minimax_update_plr.npz) is played again exactly from its levels,
parameters and actions, and a batch entry changed is named."""

import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import plr
from benchmarks.learning import buffer_trace_check as btc
from common import level_buffer
from envs.levels import sample_dr_level
from envs.maze import EnvParams, make_level, reset_to_level, step_and_restart

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PER_TICK = ("dedupe_slots", "dupe_mask", "scores", "max_returns")
AFTER = ("after_scores", "after_max_returns", "after_ages", "after_filled")


@functools.cache
def fixture(name: str) -> dict:
    data = np.load(FIXTURES / name)
    return {key: data[key] for key in data.files}


def buffer_trace(ticks: int) -> dict:
    """The first `ticks` cycles of minimax_plr_buffer.npz as a trace of one agent ([tick, 1, ...]), with the raw
    key `sample` drew with as `sample_rng`, and the four MaxMC cases of minimax_scores.npz in turn as each tick's
    rollouts. Levels offered on a replay tick are unused: pool level 0 stands in."""
    cycles, scores = fixture("minimax_plr_buffer.npz"), fixture("minimax_scores.npz")
    rows = []
    for tick in range(ticks):
        prefix, case = f"c{tick}_", f"s{tick % 4}_"
        replay = str(cycles[prefix + "kind"]) == "replay"
        pool = np.zeros(4, int) if replay else cycles[prefix + "pool_index"]
        row = {
            "replay": np.array([replay]),
            "slots": cycles[prefix + "slots"][None],
            "sample_rng": cycles[prefix + "sample_key"] if replay else np.zeros(2, np.uint32),
            "new_walls": cycles["pool_wall_map"][pool][None],
            "new_goal_pos": cycles["pool_goal_pos"][pool][None],
            "new_agent_pos": cycles["pool_agent_pos"][pool][None],
            "new_agent_dir": cycles["pool_agent_dir"][pool][None],
            "rollout_rewards": scores[case + "rewards"][None],
            "rollout_dones": scores[case + "dones"][None],
            "rollout_values": scores[case + "values"][None],
            "rollout_stored_max_returns": scores[case + "stored_max_returns"][None],
            "rollout_scores": scores[case + "max_mc"][None],
            "rollout_max_returns": scores[case + "max_mc_rollout_max_return"][None],
        }
        row |= {name: cycles[prefix + name][None] for name in PER_TICK + AFTER}
        rows.append(row)
    return {name: np.stack([row[name] for row in rows]) for name in rows[0]}


def write(tmp_path, trace: dict) -> Path:
    path = tmp_path / "trace.npz"
    np.savez(path, **trace)
    return path


@pytest.fixture
def recorded_key(monkeypatch):
    """The fixture keeps the key `sample` drew with, not the one PopPLRManager split it from: used as is."""
    monkeypatch.setattr(btc, "sample_key", lambda raw: jax.random.wrap_key_data(jnp.asarray(raw, jnp.uint32)))


def test_sample_key_is_the_third_split_of_the_second_agent_key():
    """PopPLRManager splits its key into its own and one per agent (agent 0's the second: minimax_fixtures.py's
    record_plr), PLRManager.sample that one three ways and draws with the third; done here on raw uint32 keys.
    Mutation checked by hand: the first of the two, or the second of the three, fails this test."""
    raw = np.array([123456789, 987654321], np.uint32)
    with jax.threefry_partitionable(False):
        expected = jax.random.split(jax.random.split(jnp.asarray(raw), 2)[1], 3)[2]
        ours = jax.random.key_data(btc.sample_key(raw))
    np.testing.assert_array_equal(ours, expected)


def test_minimax_cycles_never_part(tmp_path, capsys, recorded_key):
    """minimax's own first 20 cycles (filling with a batch duplicate, replays, a buffer duplicate and a turned copy,
    evictions, tied scores, random cycles) and MaxMC scores: no difference, every draw the recorded one under
    minimax's key (jax 0.4.31's threefry), and main's verdict. Mutation checked by hand: drawing under the
    partitionable threefry, tied scores sharing their rank (they take it by slot in minimax: a draw of tick 19
    flips), levels of the previous tick, no aging on a new-level tick, or scoring inactive levels fails this
    test."""
    trace = buffer_trace(20)
    btc.main(btc.Args(trace=write(tmp_path, trace), buffer_size=8))
    replays = int(trace["replay"].sum())
    assert replays >= 4
    assert capsys.readouterr().out.splitlines() == [
        f"20 ticks, {replays} replays, 0 draws flipped at a border, 0 slots holding another level than minimax's "
        "among equally likely ones",
        "the buffers never part, and every replayed rollout and PPO update matches",
    ]


@pytest.mark.parametrize(
    ("buffers", "rollouts", "updates"),
    [([], [], []), (["tick 2: duplicates differ"], ["update 0 (tick 3): rewards differ"], ["update 0: x"])],
)
def test_main_reports_the_buffers_rollouts_and_updates(tmp_path, capsys, monkeypatch, buffers, rollouts, updates):
    """main prints what the three checks found, the buffers' first, then the rollouts', or its verdict when none
    found anything. Mutation checked by hand: main leaving out the rollouts or the PPO updates fails this test."""
    monkeypatch.setattr(btc, "check", lambda args: list(buffers))
    monkeypatch.setattr(btc, "rollout_check", lambda args: list(rollouts))
    monkeypatch.setattr(btc, "ppo_check", lambda args: list(updates))
    btc.main(btc.Args(trace=tmp_path / "unread.npz"))
    expected = buffers + rollouts + updates or [
        "the buffers never part, and every replayed rollout and PPO update matches"
    ]
    assert capsys.readouterr().out.splitlines() == expected


def test_a_draw_from_another_key_is_counted_and_played_as_recorded(tmp_path, capsys, recorded_key):
    """Replay ticks whose recorded key is not the one minimax drew with: our draws differ, are counted as flipped,
    and minimax's slots are played on, so the buffers still never part. Mutation checked by hand: playing our own
    draws, or counting nothing, fails this test."""
    trace = buffer_trace(7)
    replay_ticks = np.flatnonzero(trace["replay"][:, 0])
    trace["sample_rng"][replay_ticks] = trace["sample_rng"][replay_ticks] ^ np.uint32(0x5A5A5A5A)
    assert btc.check(btc.Args(trace=write(tmp_path, trace), buffer_size=8)) == []
    flipped = int(capsys.readouterr().out.split(" draws flipped")[0].rsplit(" ", 1)[1])
    assert 0 < flipped <= 4 * len(replay_ticks)


def corrupt(trace: dict, tick: int) -> None:
    """Change, at `tick`, every recorded field the check compares, each in a slot or env where ours is known."""
    filled = np.flatnonzero(trace["after_filled"][tick, 0])
    trace["dedupe_slots"][tick, 0, 0] += 1
    trace["dupe_mask"][tick, 0, 0] ^= True
    trace["after_scores"][tick, 0, filled[0]] += 0.25
    trace["after_ages"][tick, 0, filled[1]] += 1
    trace["after_max_returns"][tick, 0, filled[2]] += 0.25
    trace["after_filled"][tick, 0, filled[3]] = False
    finished = np.flatnonzero(np.isfinite(trace["rollout_scores"][tick, 0]))
    trace["rollout_scores"][tick, 0, finished[0]] *= 1 + 1e-4  # ten times the 1e-5 the scorers agree to
    trace["rollout_max_returns"][tick, 0, finished[1]] += 1e-3


def test_each_recorded_field_that_differs_is_named_at_the_first_tick_it_differs(tmp_path, recorded_key):
    """Every compared field changed at tick 3 (a new-level tick) and again at tick 4: each is named at tick 3, a
    MaxMC score off by 1e-4 relative included, and nothing after it. Mutation checked by hand: leaving out any one
    comparison, comparing scores of empty slots, the MaxMC tolerance at 1e-3, or going on past a tick with
    differences fails this test."""
    trace = buffer_trace(6)
    corrupt(trace, 3)
    corrupt(trace, 4)
    problems = btc.check(btc.Args(trace=write(tmp_path, trace), buffer_size=8))
    assert all(problem.startswith("tick 3: ") for problem in problems), problems
    words = ["MaxMC", "MaxMC", "matched", "duplicates", "scores", "ages", "filled", "max"]
    assert [problem.split(" ")[2] for problem in problems] == words, problems
    assert problems[1].startswith("tick 3: MaxMC max returns to store differ (")
    assert all(f"{field} differ at 1 slots" in problems[words.index(field)] for field in ("scores", "ages", "filled"))


def test_a_score_where_no_episode_finished_is_a_difference(tmp_path, recorded_key):
    """minimax gives an env that finished no episode -inf; a finite score there is named although every finished
    env's score agrees. Mutation checked by hand: comparing finished envs only fails this test."""
    trace = buffer_trace(2)
    unfinished = np.flatnonzero(~trace["rollout_dones"][1, 0].any(0))[0]
    assert trace["rollout_scores"][1, 0, unfinished] == -np.inf
    trace["rollout_scores"][1, 0, unfinished] = 0.0
    problems = btc.check(btc.Args(trace=write(tmp_path, trace), buffer_size=8))
    assert len(problems) == 1 and problems[0].startswith("tick 1: MaxMC scores differ")


# --- eviction_flips: a 256-slot buffer, full, every age 5, scores falling with the slot (slot 0 ranks first)

CAPACITY = 256


def full_buffer() -> level_buffer.LevelBuffer:
    """Each slot's counts (mutations, successes, failures) distinct, so counts left behind by a moved level show."""
    walls = np.zeros((CAPACITY, 5, 5), bool)
    walls[:, 0, 0] = True
    goals = np.stack([np.arange(CAPACITY) % 5, np.arange(CAPACITY) // 5 % 5], -1)
    level = make_level(walls, goals, np.zeros((CAPACITY, 2), int), np.zeros(CAPACITY, int))
    buffer = level_buffer.empty_buffer(jax.tree.map(lambda x: x[0], level), CAPACITY)
    return buffer.replace(
        levels=level,
        scores=jnp.linspace(1.0, 0.5, CAPACITY, dtype=jnp.float32),
        max_returns=jnp.full(CAPACITY, 0.5, jnp.float32),
        ages=jnp.full(CAPACITY, 5, jnp.int32),
        filled=jnp.ones(CAPACITY, bool),
        mutations=jnp.arange(1, CAPACITY + 1, dtype=jnp.int32),
        successes=jnp.arange(CAPACITY, dtype=jnp.float32) + 0.25,
        failures=jnp.arange(CAPACITY, dtype=jnp.float32) + 0.5,
    )


def written(before, slots, scores, max_returns, goal_rows):
    """`before` with new levels (goal column 4, row `goal_rows`) written into `slots`, as an insert writes them:
    generation 0, and one success and two failures each."""
    slots = np.asarray(slots)
    levels = before.levels.replace(
        goal_pos=before.levels.goal_pos.at[slots].set(np.stack([[4, row] for row in goal_rows]))
    )
    return before.replace(
        levels=levels,
        scores=before.scores.at[slots].set(scores),
        max_returns=before.max_returns.at[slots].set(max_returns),
        mutations=before.mutations.at[slots].set(0),
        successes=before.successes.at[slots].set(1.0),
        failures=before.failures.at[slots].set(2.0),
    )


def test_new_levels_in_swapped_equally_likely_slots_are_moved_where_minimax_put_them():
    """Two new levels written into the two least likely slots (equal ages: their replay probabilities differ by
    far less than 1e-5 relative), minimax's placing them the other way round: each level moves to minimax's slot
    with its score, max return and counts, the count is 2 and nothing else changes. Mutation checked by hand:
    moving the scores without the levels, or leaving the max returns where they were, fails this test."""
    before = full_buffer()
    slots = [CAPACITY - 2, CAPACITY - 1]
    ours = written(before, slots, [0.30, 0.31], [0.7, 0.8], goal_rows=[1, 2])
    theirs = written(before, slots, [0.31, 0.30], [0.8, 0.7], goal_rows=[2, 1])
    moved, count = btc.eviction_flips(before, ours, np.asarray(theirs.scores), 0.3, 0.3)
    assert count == 2
    assert_same_buffer(moved, theirs)


def assert_same_buffer(ours, theirs):
    for field in ("scores", "max_returns", "ages", "filled", "mutations", "successes", "failures"):
        np.testing.assert_array_equal(getattr(ours, field), getattr(theirs, field), err_msg=field)
    for name, leaf in vars(ours.levels).items():
        np.testing.assert_array_equal(leaf, getattr(theirs.levels, name), err_msg=name)


def test_another_of_equally_likely_slots_evicted_is_undone_as_minimax_kept_it():
    """A new level written over the last slot in ours and over the one before it in minimax's (both equally likely):
    the new level moves to minimax's slot with its score, max return and counts, the last slot gets back the level,
    score, max return and counts it held before the tick, and the count is 2. A 13x13 trace did this at two ticks,
    where two same-age slots' replay probabilities were equal in float32 (benchmarks/README.md, "Robust PLR at 13x13:
    a real run's buffer inputs"). Mutation checked by hand: the last slot refilled from our buffer instead of the one
    before the tick, or its counts or max return left ours, fails this test."""
    before = full_buffer()
    last, other = CAPACITY - 1, CAPACITY - 2
    ours = written(before, [last], [0.31], [0.8], goal_rows=[1])
    theirs = written(before, [other], [0.31], [0.8], goal_rows=[1])
    moved, count = btc.eviction_flips(before, ours, np.asarray(theirs.scores), 0.3, 0.3)
    assert count == 2
    assert_same_buffer(moved, theirs)


def test_a_level_ours_wrote_that_minimax_does_not_hold_is_left_for_the_comparison():
    """Two new levels written over the last two slots in ours; minimax wrote only the first (into the last slot) and
    kept the other slot's level: the second new level is in ours alone, so the buffers differ by more than a
    placement, and nothing is changed. Mutation checked by hand: without the check that every level ours wrote is
    placed, this test fails."""
    before = full_buffer()
    last, other = CAPACITY - 1, CAPACITY - 2
    ours = written(before, [other, last], [0.31, 0.30], [0.8, 0.7], goal_rows=[1, 2])
    theirs = written(before, [last], [0.31], [0.8], goal_rows=[1])
    returned, count = btc.eviction_flips(before, ours, np.asarray(theirs.scores), 0.3, 0.3)
    assert count == 0 and returned is ours


@pytest.mark.parametrize(
    "case",
    [
        "ages differ",
        "probabilities apart",
        "unwritten slot differs",
        "other scores",
        "nothing differs",
        "scores updated in place",
        "an update minimax lacks",
        "slots empty before",
    ],
)
def test_other_differences_are_left_for_the_comparison(case):
    """Where the slots that differ hold other scores than ours, include one not written this tick (our scores
    there, in the other order), are of unequal ages (10^6 and 10^6 + 1: probabilities within 1e-6), or unequally
    likely (slots 32 and 33: 4e-4 apart, relatively), or nothing differs; where both slots kept their levels and only
    their scores were updated (a replayed or matched level's: swapping the scores would move a level between slots),
    or one slot's score was updated in ours and not in minimax's; or where the slots were empty before the tick (the
    first empty slot takes a new level, with no tie to break): our buffer is returned as it was and 0 counted.
    Mutation checked by hand: dropping any one of the conditions (equal ages, 1e-5, a kept slot's level replaced in
    ours, levels told written by their contents, the slots filled before), or 1e-5 read as 1e-3, fails this test."""
    before = full_buffer()
    slots = [32, 33] if case == "probabilities apart" else [CAPACITY - 2, CAPACITY - 1]
    if case == "ages differ":
        before = before.replace(ages=jnp.full(CAPACITY, 10**6, jnp.int32).at[CAPACITY - 1].add(1))
    if case == "slots empty before":
        before = before.replace(
            filled=before.filled.at[np.asarray(slots)].set(False), ages=before.ages.at[np.asarray(slots)].set(0)
        )
    ours = written(before, slots, [0.30, 0.31], [0.7, 0.8], goal_rows=[1, 2])
    if case in ("scores updated in place", "an update minimax lacks"):
        ours = before.replace(scores=before.scores.at[np.asarray(slots)].set([0.30, 0.31]))
    if case == "slots empty before":
        ours = ours.replace(filled=ours.filled.at[np.asarray(slots)].set(True))
    theirs = np.asarray(ours.scores).copy()
    if case in ("ages differ", "probabilities apart", "scores updated in place", "slots empty before"):
        theirs[slots] = [0.31, 0.30]
    elif case == "an update minimax lacks":
        theirs[slots[1]] = before.scores[slots[1]]
    elif case == "other scores":
        theirs[slots] = [0.29, 0.30]
    elif case == "unwritten slot differs":  # slot 253 kept its level; minimax's has it at 254 and 0.30 at 253
        theirs[[CAPACITY - 3, CAPACITY - 2]] = theirs[[CAPACITY - 2, CAPACITY - 3]]
    returned, count = btc.eviction_flips(before, ours, theirs, 0.3, 0.3)
    assert count == 0 and returned is ours


@pytest.mark.parametrize(("temperature", "staleness_coef"), [(0.3, 0.0), (1.0, 0.3)])
def test_slots_equally_likely_only_under_other_settings_are_left(temperature, staleness_coef):
    """The bottom two slots, equally likely at minimax's shipped 0.3 and 0.3, are 1e-3 or more apart without a
    staleness term or at temperature 1 (measured here first): a traced run with those settings keeps its swap for
    the comparison. Mutation checked by hand: the replay probabilities at 0.3 and 0.3 whatever the run's settings
    fails this test."""
    before = full_buffer()
    slots = [CAPACITY - 2, CAPACITY - 1]
    probs = np.asarray(level_buffer.replay_probabilities(before, temperature, staleness_coef, "rank", "slot_order"))
    assert np.ptp(probs[slots]) > 1e-3 * probs[slots].max()
    ours = written(before, slots, [0.30, 0.31], [0.7, 0.8], goal_rows=[1, 2])
    theirs = np.asarray(ours.scores).copy()
    theirs[slots] = [0.31, 0.30]
    returned, count = btc.eviction_flips(before, ours, theirs, temperature, staleness_coef)
    assert count == 0 and returned is ours


@pytest.mark.parametrize(
    ("new_scores", "their_order"),
    [
        ("an untouched slot's score, then 0.31", [1, 0]),
        ("two pairs of equal scores", [2, 3, 0, 1]),
    ],
)
def test_each_moved_level_comes_from_a_slot_written_this_tick_once(new_scores, their_order):
    """New levels whose score equals an untouched slot's (slot 100's), or in pairs each other's, swapped by
    minimax: every level written this tick ends in one of those slots, none twice, and no other slot's level is
    copied in. Mutation checked by hand: taking the source among all the buffer's slots, or the first slot with the
    score each time, fails this test."""
    before = full_buffer()
    if new_scores.startswith("an untouched"):
        scores = [float(before.scores[100]), 0.31]
    else:
        scores = [0.30, 0.30, 0.31, 0.31]
    slots = list(range(CAPACITY - len(scores), CAPACITY))
    ours = written(before, slots, scores, [0.7] * len(scores), goal_rows=list(range(1, len(scores) + 1)))
    theirs = np.asarray(ours.scores).copy()
    theirs[slots] = np.asarray(scores, np.float32)[their_order]
    moved, count = btc.eviction_flips(before, ours, theirs, 0.3, 0.3)
    assert count == len(slots)
    goals = np.asarray(moved.levels.goal_pos)
    assert sorted(map(tuple, goals[slots])) == [(4, row) for row in range(1, len(scores) + 1)]
    np.testing.assert_array_equal(np.asarray(moved.scores)[slots], theirs[slots])
    np.testing.assert_array_equal(goals[: slots[0]], np.asarray(before.levels.goal_pos)[: slots[0]])


def test_the_cases_stand_where_they_are_meant_to():
    """The premises of the cases above, measured on the buffers themselves: the two bottom slots within 1e-6
    relative (also at ages 10^6 and 10^6 + 1), slots 32 and 33 between 1e-4 and 1e-3 apart, ten times the
    tolerance and more, and slots 253 and 254 as equally likely as the bottom two."""

    def spread(buffer, slots):
        probs = np.asarray(level_buffer.replay_probabilities(buffer, 0.3, 0.3, "rank", "slot_order"))[slots]
        return np.ptp(probs) / probs.max()

    buffer = full_buffer()
    aged = buffer.replace(ages=jnp.full(CAPACITY, 10**6, jnp.int32).at[CAPACITY - 1].add(1))
    assert spread(buffer, [CAPACITY - 2, CAPACITY - 1]) < 1e-6 and spread(aged, [CAPACITY - 2, CAPACITY - 1]) < 1e-6
    assert spread(buffer, [CAPACITY - 3, CAPACITY - 2]) < 1e-6
    assert 1e-4 < spread(buffer, [32, 33]) < 1e-3


# --- ppo_check: minimax's recorded PPO updates as a trace's every-10th updates


def update_trace(name: str, shift: float = 1e-3) -> dict:
    """Two updates of the fixture `name` as minimax_buffer_trace.py keeps them (`update_params_*`,
    `update_opt_*`, `update_batch/*` with minimax's batch names, one leading axis): as recorded, then with two
    leaves of the parameters after it shifted by `shift` of their largest magnitude in one entry."""
    data = fixture(name)
    one = {
        f"update_{key}": value
        for key, value in data.items()
        if key.startswith(("params_before/", "params_after/", "opt_before/", "opt_after/"))
    }
    batch = ("obs_image", "obs_dir", "actions", "values", "dones", "carry_c", "carry_h", "advantages", "targets")
    one |= {f"update_batch/{key}": data[key] for key in batch} | {"update_batch/log_pis": data["log_probs"]}
    off = dict(one)
    for leaf in ("Dense_1/kernel", "Conv3x3_0/kernel"):
        value = one[f"update_params_after/{leaf}"].copy()
        value.flat[3] += shift * np.abs(value).max()
        off[f"update_params_after/{leaf}"] = value
    return {key: np.stack([one[key], off[key]]) for key in one}


@pytest.mark.parametrize(
    ("name", "settings"),
    [("minimax_update_dr.npz", dict(lr=1e-4, ent_coef=1e-3)), ("minimax_update_plr.npz", {})],
)
def test_recorded_updates_match_and_a_shifted_one_is_named(tmp_path, name, settings):
    """DR's update (a carry from the previous tick, minimax's lr 1e-4 and entropy 1e-3) and Robust PLR's (a zero
    carry, the defaults) replayed from minimax's parameters, Adam state and batch match; the same update with two
    leaves 1e-3 off (five times the parity tolerance, 2e-4) is named once, at one of them. Mutation checked by hand:
    the first step reset, --lr not reaching the update, clip and value coefficients swapped, Adam's count of after
    the update, the tolerance at 2e-3, or going on after a leaf that differs fails this test."""
    problems = btc.ppo_check(btc.Args(trace=write(tmp_path, update_trace(name)), **settings))
    assert len(problems) == 1, problems
    assert problems[0].startswith("update 1: ")
    assert "'Dense_1']['kernel']" in problems[0] or "'Conv3x3_0']['kernel']" in problems[0]


def test_the_entropy_coefficient_reaches_the_update(tmp_path):
    """DR's recorded update replayed with an entropy coefficient 500 times minimax's (0.5 for 1e-3): both updates
    are named. Mutation checked by hand: --ent-coef not reaching the update fails this test."""
    problems = btc.ppo_check(
        btc.Args(trace=write(tmp_path, update_trace("minimax_update_dr.npz")), lr=1e-4, ent_coef=0.5)
    )
    assert [problem.split(":")[0] for problem in problems] == ["update 0", "update 1"]


def test_a_trace_without_updates_has_nothing_to_replay(tmp_path):
    """A trace that kept no PPO update (minimax_buffer_trace.py writes `update_*` only from the 10th)."""
    assert btc.ppo_check(btc.Args(trace=write(tmp_path, buffer_trace(1)))) == []


def rollout_trace(number: int = 6) -> dict:
    """Robust PLR's recorded update (minimax_update_plr.npz: tick 9, the run's sixth replay tick; 16 steps of 4 envs,
    10-step episodes, a goal reached at step 13 of env 3) as minimax_buffer_trace.py keeps a rollout: per tick the
    replay decision and the levels played (tick 9's: the buffer's after tick 8 at the slots drawn; other ticks hold
    a stand-in, the same level everywhere), and the update numbered `number` with its parameters before it and its
    batch under minimax's names."""
    data = fixture("minimax_update_plr.npz")
    ticks = 10
    slots = data["tick9_sampled_slots"]
    trace = {"replay": np.array([[bool(data[f"tick{tick}_replay"])] for tick in range(ticks)])}
    for name, key in (("walls", "wall_map"), *((name, name) for name in ("goal_pos", "agent_pos", "agent_dir"))):
        level = data[f"tick8_after_{key}"][slots]
        stand_in = np.broadcast_to(data[f"tick8_after_{key}"][:1], level.shape)
        trace[f"played_{name}"] = np.stack([stand_in] * 9 + [level])[:, None]
    trace["played_time"] = np.zeros((ticks, 1, len(slots)), np.int64)
    one = {f"update_{key}": value for key, value in data.items() if key.startswith("params_before/")}
    batch = ("obs_image", "obs_dir", "actions", "values", "rewards", "dones", "carry_c", "carry_h", "advantages")
    one |= {f"update_batch/{key}": data[key] for key in (*batch, "targets")} | {
        "update_batch/log_pis": data["log_probs"]
    }
    trace |= {key: value[None].copy() for key, value in one.items()} | {"update_number": np.array([number])}
    return trace


def test_minimax_rollout_is_played_again_exactly(tmp_path, capsys):
    """cleanued's env and student, from tick 9's levels, minimax's parameters and its actions, give minimax's rollout:
    every observation, episode end and reward, and the values, log-probabilities, advantages and targets to float32
    rounding, across two restarts of each level. Mutation checked by hand: not restarting the level, never resetting
    the LSTM state, or a zero last value fails this test."""
    assert btc.rollout_check(btc.Args(trace=write(tmp_path, rollout_trace()), max_steps=10)) == []
    printed = capsys.readouterr().out.strip()
    assert printed.startswith("1 rollouts replayed, largest differences: values "), printed


@pytest.mark.parametrize(
    ("field", "index", "named"),
    [
        ("obs_image", (4, 2, 0, 1, 0), "observations differ, first at step 4 of env 2"),
        ("obs_dir", (7, 1), "directions differ, first at step 7 of env 1"),
        ("dones", (13, 3), "episode ends differ, first at step 13 of env 3"),
        ("rewards", (13, 3), "rewards differ, first at step 13 of env 3"),
        ("values", (3, 0), "values differ by up to 1.0e-03"),
        ("log_pis", (3, 0), "log-probabilities differ by up to 1.0e-03"),
        ("advantages", (15, 1), "advantages differ by up to 1.0e-03"),
        ("targets", (0, 0), "targets differ by up to 1.0e-03"),
        ("carry_h", (0, 5), "the rollout started from a nonzero LSTM state"),
    ],
)
def test_a_recorded_rollout_field_that_differs_is_named(tmp_path, field, index, named):
    """One entry of minimax's batch changed (a float by 1e-3, ten times the tolerance; an observation cell, a
    direction, an episode end flipped) is named, with its step and env where it must be exact. Mutation checked by
    hand: tolerances of 1e-2, leaving the rewards out, or not checking the first LSTM state fails this test."""
    trace = rollout_trace()
    values = trace[f"update_batch/{field}"][0]
    if values.dtype == bool:
        values[index] = ~values[index]
    elif field in ("obs_image", "obs_dir"):
        values[index] = values[index] + 1
    else:
        values[index] += 1e-3
    assert btc.rollout_check(btc.Args(trace=write(tmp_path, trace), max_steps=10)) == [f"update 0 (tick 9): {named}"]


def test_the_levels_are_those_of_the_updates_replay_tick(tmp_path):
    """The update numbered 5 was taken on tick 7, the fifth replay tick, whose levels (the stand-in) minimax's batch
    was not played on; a level that started past its first step, or another episode length, is named. An update whose
    tick the trace dropped is left out. Mutation checked by hand: the n-th replay tick counted from 0, or the played
    levels' start step unchecked, fails this test."""
    trace = rollout_trace(number=5)
    problems = btc.rollout_check(btc.Args(trace=write(tmp_path, trace), max_steps=10))
    assert problems[0].startswith("update 0 (tick 7): observations differ, first at step 0"), problems
    late = rollout_trace()
    late["played_time"][9, 0, 2] = 3
    problems = btc.rollout_check(btc.Args(trace=write(tmp_path, late), max_steps=10))
    assert problems[0] == "update 0 (tick 9): a level started at another step than its first", problems
    problems = btc.rollout_check(btc.Args(trace=write(tmp_path, rollout_trace()), max_steps=11))
    assert "update 0 (tick 9): episode ends differ, first at step 9 of env 0" in problems, problems
    assert btc.rollout_check(btc.Args(trace=write(tmp_path, rollout_trace(number=7)))) == []


def test_a_trace_without_rollouts_has_nothing_to_play(tmp_path, capsys):
    """Traces recorded before the rollouts were kept (no update numbers, no played levels) are left alone."""
    assert btc.rollout_check(btc.Args(trace=write(tmp_path, buffer_trace(2)))) == []
    assert capsys.readouterr().out == ""


def test_the_replay_is_cleaneds_own_rollout():
    """replayed_rollout given the actions algos/plr.py's rollout sampled returns that rollout, its advantages and
    targets exactly (four 7x7 levels, 10-step episodes, 24 steps, fresh parameters): what the check plays is what
    training plays. Mutation checked by hand: the replay never resetting its LSTM state, or its first step's
    reset flag off, fails this test."""
    env_params, num_envs, lstm_size = EnvParams(max_steps=10), 4, 8
    levels = jax.vmap(functools.partial(sample_dr_level, height=7, width=7, n_walls=8))(
        jax.random.split(jax.random.key(1), num_envs)
    )
    obs, env_state = jax.vmap(reset_to_level, (None, 0, None))(jax.random.key(0), levels, env_params)
    network = plr.ActorCritic()
    params = network.init(
        jax.random.key(2),
        plr.initial_carry(num_envs, lstm_size),
        plr.add_time_axis(obs),
        jnp.zeros((1, num_envs), bool),
    )
    start = plr.RolloutState(obs, env_state, plr.initial_carry(num_envs, lstm_size), jnp.ones(num_envs, bool))
    step_env = jax.vmap(functools.partial(step_and_restart, params=env_params))
    transitions, end = plr.rollout(jax.random.key(3), network, params, start, step_env, 24, 1)
    _, _, last_value = network.apply(params, end.carry, plr.add_time_axis(end.obs), end.reset[None])
    advantages, targets = plr.compute_gae(transitions, last_value[0], 0.999, 0.98)
    assert transitions.done.any(0).all()
    replayed = btc.replayed_rollout(params, levels, transitions.action, lstm_size, env_params, 0.999, 0.98)
    for ours, theirs in zip(
        jax.tree.leaves(replayed), jax.tree.leaves((transitions, advantages, targets)), strict=True
    ):
        np.testing.assert_array_equal(ours, theirs)
