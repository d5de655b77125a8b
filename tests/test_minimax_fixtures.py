"""benchmarks/learning/minimax_fixtures.py's own pieces, imported with minimax-lib stubbed out (this venv has no
minimax; the recorders that run minimax's manager, runners and scorers are left to its venv), against the fixtures it
recorded: the scripted and random buffer cycles are those of minimax_plr_buffer.npz; the replay distributions before
each draw follow minimax's ages from draw to draw; the buffer, optimizer, batch and settings entries carry the names,
dtypes and values the parity tests read; the level pools hold distinct levels and a turned copy; `meta` stamps the
versions and this file; the shipped flags are read from minimax's config files; main runs the recorders asked for."""

import dataclasses
import enum
import functools
import importlib
import json
import os
import sys
import types
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import struct

import benchmarks.learning
from benchmarks.learning import minimax_params
from common import level_buffer
from envs.maze import DIR_TO_VEC, make_level

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REPO_ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def fixture(name: str) -> dict:
    data = np.load(FIXTURES / name)
    return {key: data[key] for key in data.files}


class UEDScore(enum.Enum):
    MAX_MC = "max_mc"
    POSITIVE_VALUE_LOSS = "pvl"
    L1_VALUE_LOSS = "l1_value_loss"


class PLRManager:
    """Keeps the keyword arguments it was made with."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs


def minimax_stub() -> dict:
    """The minimax-lib modules the recorder imports, as stubs: what the tested pieces read of them is set per test."""
    names = [
        "minimax",
        "minimax.envs",
        "minimax.envs.maze",
        "minimax.envs.maze.common",
        "minimax.arguments",
        "minimax.runners",
        "minimax.util",
        "minimax.util.rl",
        "minimax.util.rl.plr",
        "minimax.util.rl.ued_scores",
    ]
    modules = {name: types.ModuleType(name) for name in names}
    modules["minimax"].envs = modules["minimax.envs"]
    modules["minimax"].__file__ = None
    modules["minimax.envs"].make = None
    modules["minimax.envs"].get_comparator = lambda name: f"comparator of {name}"
    modules["minimax.envs.maze.common"].DIR_TO_VEC = jnp.asarray(DIR_TO_VEC, jnp.int8)
    modules["minimax.arguments"].parser = None
    modules["minimax.runners"].ExperimentRunner = None
    modules["minimax.util.rl.plr"].PLRManager = PLRManager
    modules["minimax.util.rl.ued_scores"].UEDScore = UEDScore
    modules["minimax.util.rl.ued_scores"].compute_ued_scores = None
    return modules


@pytest.fixture(scope="module")
def mf():
    """The recorder module, imported over the stubs (and minimax_params under the name its own venv imports it by);
    sys.modules and the environment are as they were afterwards."""
    with pytest.MonkeyPatch.context() as patch:
        for name, module in minimax_stub().items():
            patch.setitem(sys.modules, name, module)
        patch.setitem(sys.modules, "minimax_params", minimax_params)
        patch.setenv("JAX_PLATFORMS", os.environ.get("JAX_PLATFORMS", "cpu"))
        yield importlib.import_module("benchmarks.learning.minimax_fixtures")
    sys.modules.pop("benchmarks.learning.minimax_fixtures", None)
    benchmarks.learning.__dict__.pop("minimax_fixtures", None)


def test_scripted_cycles_are_those_recorded(mf):
    """minimax_plr_buffer.npz was recorded from scripted_cycles(default_rng(11), 20, 30): every cycle's levels
    (pool indices, -1 on a replay cycle), scores (-inf: no finished episode) and max returns are the file's.
    Mutation checked by hand: another replay share, scores rounded to two decimals, the turned copy left out of the
    random levels, another -inf rate, a scripted level changed, or one random cycle less fails this test."""
    data = fixture("minimax_plr_buffer.npz")
    cycles = mf.scripted_cycles(np.random.default_rng(11), 20, num_random=30)
    assert len(cycles) == int(data["num_cycles"]) == 40
    for k, (kind, indices, scores, max_returns) in enumerate(cycles):
        recorded_kind = str(data[f"c{k}_kind"])
        assert recorded_kind == kind or (kind == "replay" and recorded_kind == "new"), k  # replay only once warm
        np.testing.assert_array_equal(data[f"c{k}_pool_index"], indices if kind == "new" else [-1] * 4, err_msg=k)
        np.testing.assert_array_equal(data[f"c{k}_scores"], np.asarray(scores, np.float32), err_msg=str(k))
        np.testing.assert_array_equal(data[f"c{k}_max_returns"], np.asarray(max_returns, np.float32), err_msg=str(k))
    assert any(index == 20 for _, indices, _, _ in cycles[10:] if indices for index in indices)  # the turned copy


@functools.cache
def probabilities():
    return jax.jit(functools.partial(level_buffer.replay_probabilities, **fixture_settings()))


def fixture_settings() -> dict:
    info = json.loads(str(fixture("minimax_plr_buffer.npz")["meta"]))
    return dict(
        temperature=info["temperature"],
        staleness_coef=info["staleness_coef"],
        prioritization=info["prioritization"],
        ties="slot_order",
    )


class Manager:
    """minimax's replay distribution as cleanued computes it (equal to minimax's on this file:
    tests/test_level_buffer.py), taking minimax's `_get_replay_dist` arguments."""

    def __init__(self, capacity: int):
        self.empty = level_buffer.empty_buffer(make_level(np.zeros((5, 5)), [1, 1], [2, 2], 0), capacity)

    def _get_replay_dist(self, scores, ages, filled):
        buffer = self.empty.replace(
            scores=jnp.where(filled, scores, 0.0), ages=jnp.asarray(ages, jnp.int32), filled=jnp.asarray(filled)
        )
        return probabilities()(buffer)


def test_draw_distributions_follow_the_ages_from_draw_to_draw(mf):
    """For every replay cycle of minimax_plr_buffer.npz, from the buffer the cycle before left and the slots drawn:
    the distribution before each draw is the recorded one (each draw ages every filled slot by one and restarts the
    drawn one). Mutation checked by hand: ages not restarting at the drawn slot, or the distribution after each draw
    instead of before fails this test."""
    data = fixture("minimax_plr_buffer.npz")
    manager = Manager(8)
    replays = [k for k in range(1, 40) if str(data[f"c{k}_kind"]) == "replay"]
    assert len(replays) >= 20
    for k in replays:
        before = types.SimpleNamespace(
            **{name: jnp.asarray(data[f"c{k - 1}_after_{name}"]) for name in ("scores", "ages", "filled")}
        )
        dists = mf.draw_dists(manager, before, data[f"c{k}_slots"])
        np.testing.assert_allclose(dists, data[f"c{k}_draw_dists"], atol=1e-6, err_msg=f"cycle {k}")


@struct.dataclass
class EnvState:
    """minimax's maze EnvState, the fields the recorder reads."""

    wall_map: jax.Array
    goal_pos: jax.Array
    agent_pos: jax.Array
    agent_dir: jax.Array
    agent_dir_idx: jax.Array


@dataclasses.dataclass
class BufferStub:
    scores: np.ndarray
    max_returns: np.ndarray
    ages: np.ndarray
    filled: np.ndarray
    n_mutations: np.ndarray
    levels: EnvState


class RecordingManager:
    def __init__(self):
        self.calls = []

    def _get_replay_dist(self, scores, ages, filled):
        self.calls.append((scores, ages, filled))
        return np.full(len(scores), 0.125, np.float32)


def test_buffer_fields_are_the_entries_the_parity_test_reads(mf):
    """A buffer in minimax's field names (ages and positions as int32, as minimax holds them) built from cycle 12 of
    minimax_plr_buffer.npz: buffer_fields gives back that cycle's `after_` entries, names, dtypes and values, the
    direction from agent_dir_idx and the replay distribution from the manager's scores, ages and filled slots.
    Mutation checked by hand: goal and start crossed, the direction vector for its index, ages kept int32, or the
    distribution of other arguments fails this test."""
    data = fixture("minimax_plr_buffer.npz")
    prefix = "c12_after_"
    levels = EnvState(
        wall_map=data[prefix + "wall_map"],
        goal_pos=data[prefix + "goal_pos"].astype(np.int32),
        agent_pos=data[prefix + "agent_pos"].astype(np.int32),
        agent_dir=np.asarray(DIR_TO_VEC)[data[prefix + "agent_dir"]],
        agent_dir_idx=data[prefix + "agent_dir"].astype(np.int32),
    )
    buffer = BufferStub(
        scores=data[prefix + "scores"],
        max_returns=data[prefix + "max_returns"],
        ages=data[prefix + "ages"].astype(np.int32),
        filled=data[prefix + "filled"],
        n_mutations=data[prefix + "n_mutations"].astype(np.int32),
        levels=levels,
    )
    manager = RecordingManager()
    fields = mf.buffer_fields(prefix, buffer, manager)
    assert sorted(fields) == sorted(key for key in data if key.startswith(prefix))
    for key, value in fields.items():
        expected = np.full(8, 0.125, np.float32) if key.endswith("replay_dist") else data[key]
        assert value.dtype == expected.dtype, key
        np.testing.assert_array_equal(value, expected, err_msg=key)
    ((scores, ages, filled),) = manager.calls
    assert scores is buffer.scores and ages is buffer.ages and filled is buffer.filled


def minimax_name(cleanued: str) -> str:
    """minimax's parameter path for cleanued's (PARAM_NAMES read backwards)."""
    for theirs, ours in minimax_params.PARAM_NAMES.items():
        if cleanued.startswith(ours + "/"):
            return theirs + cleanued[len(ours) :]
    raise KeyError(cleanued)


def minimax_tree(data: dict, prefix: str, scale: float = 1.0) -> dict:
    """minimax's nested parameter tree {"params": ...} of one student (leading axis 1) from `prefix` entries."""
    tree = {}
    for key, value in data.items():
        if key.startswith(prefix):
            *path, leaf = minimax_name(key[len(prefix) :]).split("/")
            node = tree
            for part in path:
                node = node.setdefault(part, {})
            node[leaf] = jnp.asarray(value * scale)[None]
    return {"params": tree}


def test_optimizer_fields_are_adams_moments_and_count_under_cleaneds_names(mf):
    """optax.chain(clip_by_global_norm, adam)'s state for one student (count [1]), its moments made from the DR
    fixture's parameters (mu = params, nu = 2 params): the entries are the fixture's `opt_before/` names, mu and nu
    in their places, and the count. Mutation checked by hand: mu and nu crossed, or the count kept as an array of
    one, fails this test."""
    data = fixture("minimax_update_dr.npz")
    params = minimax_tree(data, "params_before/")
    optimizer = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(1e-4))
    clip, (adam, scale) = optimizer.init(params)
    adam = adam._replace(
        count=jnp.array([7], jnp.int32),
        mu=params,
        nu=jax.tree.map(lambda x: 2 * x, minimax_tree(data, "params_before/")),
    )
    fields = mf.optimizer_fields("opt_before/", (clip, (adam, scale)))
    assert sorted(fields) == sorted(key for key in data if key.startswith("opt_before/"))
    assert fields["opt_before/count"].shape == () and int(fields["opt_before/count"]) == 7
    for key in data:
        if key.startswith("params_before/"):
            name = key.removeprefix("params_before/")
            np.testing.assert_array_equal(fields[f"opt_before/mu/{name}"], data[key])
            np.testing.assert_allclose(fields[f"opt_before/nu/{name}"], 2 * data[key])


class RolloutBatch(NamedTuple):
    """minimax's rollout batch, the fields the recorder reads (a pytree, as minimax's)."""

    obs: dict
    actions: np.ndarray
    log_pis: np.ndarray
    values: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    carry: tuple
    advantages: np.ndarray
    targets: np.ndarray


def test_batch_fields_take_student_zero_and_the_carry_at_the_rollouts_start(mf):
    """A train batch of one student laid out as minimax stores it ([student, step, env, ...], the carry per step,
    directions, actions int32 and done flags uint8), made from the DR fixture with the carry of later steps changed: the
    entries are the fixture's batch entries, names, dtypes and values. Mutation checked by hand: the carry of the
    last step, c and h crossed, log_pis left out, or directions left int32 fails this test."""
    data = fixture("minimax_update_dr.npz")
    steps = data["dones"].shape[0]
    later = np.linspace(-1, 1, (steps - 1) * data["carry_c"].size, dtype=np.float32).reshape(steps - 1, -1, 16)
    carry_c, carry_h = (
        np.concatenate([data[name][None], later + i], 0) for i, name in enumerate(("carry_c", "carry_h"))
    )
    batch = RolloutBatch(
        obs={"image": data["obs_image"][None], "agent_dir": data["obs_dir"].astype(np.int32)[None]},
        actions=data["actions"].astype(np.int32)[None],
        log_pis=data["log_probs"][None],
        values=data["values"][None],
        rewards=data["rewards"][None],
        dones=data["dones"].astype(np.uint8)[None],
        carry=(carry_c[None], carry_h[None]),
        advantages=data["advantages"][None],
        targets=data["targets"][None],
    )
    fields = mf.batch_fields(batch, np.asarray(data["last_value"])[None])
    for key, value in fields.items():
        assert np.asarray(value).dtype == data[key].dtype, key
        np.testing.assert_array_equal(value, data[key], err_msg=key)
    names = {"obs_image", "obs_dir", "actions", "log_probs", "values", "rewards", "dones", "carry_c", "carry_h"}
    assert set(fields) == names | {"last_value", "advantages", "targets"}


def test_settings_of_names_minimax_flags_as_the_parity_test_reads_them(mf):
    """Every setting from its minimax flag (each given a distinct value), and the names are those the update
    fixtures' meta holds. Mutation checked by hand: value_loss_coef and entropy_coef crossed, gamma from
    gae_lambda, or the LSTM size from another model's arguments fails this test."""
    args = types.SimpleNamespace(
        train_runner_args=dict(discount=0.1, gae_lambda=0.2, lr=0.3, max_grad_norm=0.4, adam_eps=0.5),
        student_rl_args=dict(
            clip_eps=0.6, value_loss_coef=0.7, entropy_coef=0.8, n_epochs=9, n_minibatches=10, clip_value_loss=False
        ),
        student_model_args=dict(recurrent_hidden_dim=11),
        teacher_model_args=dict(recurrent_hidden_dim=99),
    )
    settings = mf.settings_of(args, types.SimpleNamespace(n_parallel=12, n_rollout_steps=13))
    assert settings == dict(
        gamma=0.1,
        gae_lambda=0.2,
        lr=0.3,
        max_grad_norm=0.4,
        adam_eps=0.5,
        clip_eps=0.6,
        vf_coef=0.7,
        ent_coef=0.8,
        num_epochs=9,
        num_minibatches=10,
        clip_value_loss=False,
        lstm_size=11,
        num_envs=12,
        num_steps=13,
    )
    for name in ("minimax_update_dr.npz", "minimax_update_plr.npz"):
        assert set(settings) <= set(json.loads(str(fixture(name)["meta"])))


def test_tiny_settings_are_those_of_the_recorded_updates(mf):
    """TINY is what the update fixtures were recorded at: 4 envs x 16 steps, LSTM 16 (their meta), and the 7x7
    mazes of 8 walls the docstring promises. Mutation checked by hand: another size in TINY fails this test."""
    for name in ("minimax_update_dr.npz", "minimax_update_plr.npz"):
        info = json.loads(str(fixture(name)["meta"]))
        assert (info["num_envs"], info["num_steps"], info["lstm_size"]) == (
            mf.TINY["n_parallel"],
            mf.TINY["n_rollout_steps"],
            mf.TINY["student_recurrent_hidden_dim"],
        )
    assert (mf.TINY["maze_height"], mf.TINY["maze_width"], mf.TINY["maze_n_walls"]) == (7, 7, 8)
    assert fixture("minimax_update_dr.npz")["obs_image"].shape[:2] == (16, 4)


def test_stats_fields_and_close(mf):
    """stats_fields keeps one number per statistic (minimax's are per student); close is the largest absolute
    difference over all leaves. Mutation checked by hand: a statistic kept as an array, the mean difference, or the
    sum over leaves fails this test."""
    stats = mf.stats_fields({"value_loss": np.array([[0.25]]), "entropy": np.array([1.5])})
    assert stats == {"stats_value_loss": 0.25, "stats_entropy": 1.5}
    assert all(np.ndim(value) == 0 for value in stats.values())
    first = {"a": jnp.array([1.0, 2.0, 3.0]), "b": jnp.array([[0.0, 0.5]])}
    second = {"a": jnp.array([1.0, 2.1, 3.0]), "b": jnp.array([[0.0, -0.25]])}
    assert mf.close(first, second) == pytest.approx(0.75)
    assert mf.close(first, first) == 0.0


def test_take_selects_rows_of_every_leaf(mf):
    """Mutation checked by hand: indexing the last axis fails this test."""
    tree = {"a": np.arange(12).reshape(4, 3), "b": np.arange(4)}
    taken = mf.take(tree, [2, 0, 2])
    np.testing.assert_array_equal(taken["a"], [[6, 7, 8], [0, 1, 2], [6, 7, 8]])
    np.testing.assert_array_equal(taken["b"], [2, 0, 2])


class MazeEnv:
    """A stand-in for minimax's maze: each key gives one of a few levels, some differing only in the goal, some
    only in the direction (equal to minimax's comparator, which ignores it)."""

    def reset(self, key):
        draw = jax.random.randint(key, (), 0, 12)
        walls = (jnp.arange(9).reshape(3, 3) == draw % 3).astype(jnp.uint8)
        goal = jnp.array([draw // 3 % 2, 1])
        return None, EnvState(
            wall_map=walls,
            goal_pos=goal,
            agent_pos=jnp.array([2, 2]),
            agent_dir=DIR_TO_VEC[0],
            agent_dir_idx=draw // 6,
        )


def test_distinct_levels_keeps_first_draws_of_distinct_walls_goal_and_start(mf, monkeypatch):
    """Of 40 draws of the stand-in maze (6 distinct levels by walls, goal and start), the first 5 distinct, in draw
    order: each unequal to the others, and every draw before the last kept one equal to a kept one; more than there
    are is refused. Mutation checked by hand: the direction counted, the goal not counted, or the last draws kept
    fails this test."""
    made = []
    monkeypatch.setattr(mf.envs, "make", lambda name, env_kwargs: made.append((name, env_kwargs)) or (MazeEnv(), None))
    states = mf.distinct_levels(5, seed=3, size=9, n_walls=4, draws=40)
    assert made == [("Maze", dict(height=9, width=9, n_walls=4, replace_wall_pos=True))]
    _, every = jax.vmap(MazeEnv().reset)(jax.random.split(jax.random.PRNGKey(3), 40))

    def key(state, i):
        return tuple(np.asarray(state.wall_map[i]).ravel()) + tuple(np.asarray(state.goal_pos[i]))

    kept = [key(states, i) for i in range(5)]
    assert len(set(kept)) == 5
    drawn = [key(every, i) for i in range(40)]
    last = max(drawn.index(level) for level in kept)
    assert sorted(drawn.index(level) for level in kept) == sorted({drawn.index(level) for level in drawn[: last + 1]})
    with pytest.raises(AssertionError, match="only 6 distinct levels"):
        mf.distinct_levels(7, seed=3, size=9, n_walls=4, draws=40)


def test_level_pool_ends_with_level_one_turned(mf, monkeypatch):
    """The pool is the distinct levels and, last, level 1 turned one step (direction index and vector); the
    recorded pool of minimax_plr_buffer.npz has that shape too. Mutation checked by hand: level 0 turned, or the
    vector of the old direction, fails this test."""
    base = EnvState(
        wall_map=jnp.arange(4 * 9).reshape(4, 3, 3) % 2 == 0,
        goal_pos=jnp.array([[1, 1], [1, 2], [2, 1], [2, 2]]),
        agent_pos=jnp.array([[0, 0], [0, 1], [1, 0], [1, 1]]),
        agent_dir=jnp.asarray(DIR_TO_VEC[[2, 3, 0, 1]], jnp.int8),
        agent_dir_idx=jnp.array([2, 3, 0, 1]),
    )
    monkeypatch.setattr(mf, "distinct_levels", lambda count, seed, size, n_walls, draws: mf.take(base, range(count)))
    pool = mf.level_pool(3, seed=0)
    np.testing.assert_array_equal(pool.agent_dir_idx, [2, 3, 0, 0])
    np.testing.assert_array_equal(pool.agent_dir[3], DIR_TO_VEC[0])
    for name in ("wall_map", "goal_pos", "agent_pos"):
        np.testing.assert_array_equal(getattr(pool, name)[3], getattr(base, name)[1])
    data = fixture("minimax_plr_buffer.npz")
    last = len(data["pool_agent_dir"]) - 1
    assert data["pool_agent_dir"][last] == (data["pool_agent_dir"][1] + 1) % 4
    for name in ("wall_map", "goal_pos", "agent_pos"):
        np.testing.assert_array_equal(data[f"pool_{name}"][last], data[f"pool_{name}"][1])


def test_plr_manager_is_robust_plr_with_maxmc_ranks_as_the_fixtures_say(mf):
    """The manager's settings are those the buffer fixtures' meta records (MaxMC, rank, half-full replay) and Robust
    PLR's, with the maze's comparator. Mutation checked by hand: proportional scores, PLR instead of Robust PLR,
    or temperature and staleness crossed fails this test."""
    manager = mf.plr_manager("level", capacity=8, temperature=0.3, staleness_coef=0.1, replay_prob=0.5)
    info = json.loads(str(fixture("minimax_plr_buffer.npz")["meta"]))
    kwargs = manager.kwargs
    assert kwargs["ued_score"] is UEDScore.MAX_MC and info["ued_score"] == "max_mc"
    assert kwargs["use_score_ranks"] and info["prioritization"] == "rank"
    assert kwargs["min_fill_ratio"] == info["min_fill_ratio"] == 0.5
    assert kwargs["use_robust_plr"] and not kwargs["use_parallel_eval"]
    assert (kwargs["temp"], kwargs["staleness_coef"], kwargs["buffer_size"], kwargs["replay_prob"]) == (
        0.3,
        0.1,
        8,
        0.5,
    )
    assert kwargs["example_level"] == "level" and kwargs["comparator_fn"] == "comparator of Maze"


def test_meta_stamps_the_versions_and_this_recorder(mf, monkeypatch):
    """JSON with sorted keys: the four versions (minimax-lib, flax and optax from the installed packages, jax's
    own), the recorder's path from the repository root, and the extras. The committed fixtures hold the same
    version keys. Mutation checked by hand: keys unsorted, or a version left out, fails this test."""
    monkeypatch.setattr(mf.metadata, "version", lambda name: f"{name} version")
    text = str(mf.meta(capacity=8, note="n"))
    info = json.loads(text)
    assert list(info) == sorted(info)
    assert info == {
        "minimax-lib": "minimax-lib version",
        "jax": jax.__version__,
        "flax": "flax version",
        "optax": "optax version",
        "recorder": info["recorder"],
        "capacity": 8,
        "note": "n",
    }
    assert (REPO_ROOT / info["recorder"]).resolve() == Path(mf.__file__).resolve()
    for name in ("minimax_plr_buffer.npz", "minimax_scores.npz", "minimax_update_dr.npz"):
        assert {"minimax-lib", "jax", "flax", "optax", "recorder"} <= set(json.loads(str(fixture(name)["meta"])))


def test_shipped_flags_take_each_first_value_and_the_overrides(mf, monkeypatch, tmp_path):
    """minimax's config/configs/maze/<name>.json holds a list of values per flag: the first, overridden where asked,
    and flags without a value left out. Mutation checked by hand: the last value, overrides ignored, or None written
    as a flag fails this test."""
    folder = tmp_path / "config" / "configs" / "maze"
    folder.mkdir(parents=True)
    (folder / "plr.json").write_text(json.dumps({"args": {"lr": [0.1, 0.2], "seed": [1, 2], "eval": [None], "n": [4]}}))
    monkeypatch.setattr(mf.minimax, "__file__", str(tmp_path / "__init__.py"))
    flags = mf.shipped_flags("plr", {"seed": 9, "n": None, "extra": "x"})
    assert flags == ["--lr=0.1", "--seed=9", "--extra=x"]


@pytest.mark.parametrize(("only", "expected"), [(["dr", "plr"], ["dr", "plr"]), (None, None)])
def test_main_records_what_is_asked_into_the_folder(mf, monkeypatch, tmp_path, capsys, only, expected):
    """--only runs those recorders in the order given, none else; without it every one, the buffer first; each
    into --out, made when missing. Mutation checked by hand: --only ignored, or --out not reaching the recorders,
    fails this test."""
    names = ["buffer", "buffer_4000", "scores", "dr", "plr"]
    called = []
    for name, function in zip(
        names, ["record_buffer", "record_buffer_shipped_size", "record_scores", "record_dr", "record_plr"], strict=True
    ):
        monkeypatch.setattr(mf, function, lambda out, name=name: called.append((name, out)))
    out = tmp_path / "new" / "fixtures"
    monkeypatch.setattr(sys, "argv", ["minimax_fixtures.py", "--out", str(out), *(["--only", *only] if only else [])])
    mf.main()
    assert called == [(name, out) for name in (expected or names)] and out.is_dir()
    assert capsys.readouterr().out.splitlines() == [f"recorded {name}" for name in (expected or names)]
