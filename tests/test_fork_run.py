"""benchmarks/learning/fork_run.py: a fork copies the chosen seeds' whole state at a checkpoint with fresh random keys
and their log rows; the script's --resume trains the copies apart; `evaluate` plays each copy's own parameters; bad
input is refused in one line before a folder is made. Mutation checked by hand: with `forked_state` keeping the
keys, the key and divergence checks fail; with `sources` not repeated per fork (`np.tile`), the state check fails;
with the evaluated seed's index one too high, the evaluation check fails; with rows past the fork copied, the log check
fails; with `buffer_sources` ignored, the buffer check fails; with `--fresh-optimizer` ignored, the optimizer check
fails; with the initial state made from another seed, the update-0 check fails; with the layers' source seeds not
used, the layers check fails. A hand mutation trial's survivors each fail a test now: key leaves given one key, keys
not drawn from --fork-seed, buffers or layers taken by the wrong --buffer-from / --params-from entry, the fork's
config (seed, archiving), log rows left unsorted, the evaluation's draws by source seed or of the first checkpoint
only, --seeds ignored, the initial state made from a fixed seed or made again over a checkpoint at 0, one seed's
parameters written as a stack of one, and the refusals of a runner without a buffer, a shared leaf or a missing
--out folder."""

import csv
import json
import shutil
from dataclasses import replace
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import struct

from algos import plr
from benchmarks.learning import fork_run
from benchmarks.learning.learning_vs_minimax_config import Args as HarnessArgs
from benchmarks.learning.learning_vs_minimax_evaluate import Evaluator
from common import checkpoint
from common.config import with_flags
from common.errors import ConfigError
from common.init_from import flat_names
from tests.states import command_in_process, run_script

TINY = dict(
    num_seeds=2,
    num_envs=4,
    num_steps=8,
    lstm_size=8,
    maze_size=5,
    n_walls=3,
    max_steps=8,
    buffer_size=16,
    total_updates=4,
    log_interval=2,
    eval_interval=0,
    checkpoint_interval=2,
    archive_interval=2,
    screenshot_interval=0,
)


def state_at(run_dir, config, update):
    template = jax.eval_shape(plr.make_train(config).init, jax.random.split(jax.random.key(0), config.run.num_seeds))
    return checkpoint.load(fork_run.checkpoint_at(run_dir, update), template)[0]


def log_rows(run_dir):
    with open(run_dir / "logs.csv", newline="") as file:
        return list(csv.DictReader(file))


@pytest.fixture(scope="module")
def forked(tmp_path_factory):
    """A tiny Robust PLR run of 2 seeds and 4 updates, forked at update 2 (seeds 1 and 0, two copies each) and
    resumed to update 4."""
    runs = tmp_path_factory.mktemp("runs")
    source_config = with_flags(plr.Config(), **TINY, runs_dir=str(runs), run_name="source")
    source = run_script(plr, source_config)
    args = fork_run.Fork(run_dir=source, update=2, seeds=(1, 0), forks=2, run_name="forked", fork_seed=3)
    run_dir = fork_run.fork(args)
    config = with_flags(source_config, num_seeds=4, seed=3, run_name="forked")
    at_fork = state_at(run_dir, config, 2), log_rows(run_dir)
    run_script(plr, with_flags(config, resume=True))
    return source, source_config, run_dir, config, at_fork


@pytest.mark.slow
def test_each_copy_holds_its_seeds_state_with_its_own_keys_and_log(forked):
    source, source_config, _, _, (at_fork, fork_rows) = forked
    original = state_at(source, source_config, 2)
    copies_of = [1, 1, 0, 0]
    for have, want in zip(jax.tree.leaves(at_fork), jax.tree.leaves(original), strict=True):
        if jax.dtypes.issubdtype(have.dtype, jax.dtypes.prng_key):
            data = np.asarray(jax.random.key_data(have)).reshape(4, -1)
            assert len({row.tobytes() for row in data}) == 4  # every copy draws its own numbers
            assert not {row.tobytes() for row in data} & {
                row.tobytes() for row in np.asarray(jax.random.key_data(want)).reshape(2, -1)
            }
        else:
            np.testing.assert_array_equal(np.asarray(have), np.asarray(want)[copies_of])
    source_rows = log_rows(source)
    for row in fork_rows:
        [match] = [
            r for r in source_rows if r["update"] == row["update"] and int(r["seed"]) == copies_of[int(row["seed"])]
        ]
        assert {**match, "seed": row["seed"]} == row
    assert [(row["update"], row["seed"]) for row in fork_rows] == [("2", str(seed)) for seed in range(4)]


@pytest.mark.slow
def test_the_resumed_copies_of_one_seed_train_apart(forked):
    _, _, run_dir, config, _ = forked
    params = state_at(run_dir, config, 4).train_state.params
    for first, second in ((0, 1), (2, 3)):
        assert any(not np.array_equal(leaf[first], leaf[second]) for leaf in jax.tree.leaves(params))
    assert {int(row["seed"]) for row in log_rows(run_dir) if row["update"] == "4"} == {0, 1, 2, 3}


@pytest.mark.slow
def test_evaluate_plays_each_copys_own_parameters(forked, tmp_path):
    """The records' labels; copy 1 at the fork and copy 2 (of seed 0) at update 4 each played, with the draws for its
    own seed index, from its own checkpoint's parameters, as one seed's evaluation plays them alone; the held-out
    mazes from --heldout-from on alike; --seeds keeps only those seeds' records."""
    source, source_config, run_dir, config, _ = forked
    out = tmp_path / "evaluations.jsonl"
    command = ["evaluate", "--run-dir", str(run_dir), "--sources", "1", "0", "--forks", "2", "--out", str(out)]
    mazes = ("Labyrinth", "SixteenRooms")
    printed = command_in_process(
        "benchmarks/learning/fork_run.py", *command, "--heldout-mazes", *mazes, "--heldout-from", "3"
    )
    assert printed.returncode == 0, printed.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert "| 4 | 0 | " in printed.stdout  # the table: update, source seed, its copies' solve rates
    assert "| 4 | Labyrinth | " in printed.stdout and "| 2 | Labyrinth | " not in printed.stdout
    labels = [(r["update"], r["kind"], r["maze"], r["seed"], r["source"]) for r in records]
    copies = list(enumerate((1, 1, 0, 0)))
    assert labels == [
        (update, kind, maze, seed, source_seed)
        for update, played in (
            (2, [("train_levels", None)]),
            (4, [("train_levels", None), *(("heldout", m) for m in mazes)]),
        )
        for kind, maze in played
        for seed, source_seed in copies
    ]
    assert all(0 <= r["solve_rate"] <= 1 for r in records)
    # Copy 1 of seed 1 holds seed 1's parameters at the fork, played with the comparison's draws for seed index 1.
    harness = replace(HarnessArgs(), maze_size=5, n_walls=3, max_steps=8, lstm_size=8)
    params = state_at(source, source_config, 2).train_state.params
    evaluator = Evaluator(harness)
    returns = evaluator.training_levels(jax.tree.map(lambda x: x[1], params), 2, 1)
    assert records[1]["solve_rate"] == float(np.mean(returns > 0))
    # Copy 2 is of seed 0: its draws are seed index 2's, not its source's, and update 4's are the resumed run's.
    params = state_at(run_dir, config, 4).train_state.params
    returns = evaluator.training_levels(jax.tree.map(lambda x: x[2], params), 4, 2)
    assert records[6]["seed"] == 2 and records[6]["solve_rate"] == float(np.mean(returns > 0))
    heldout = {(r["maze"], r["seed"]): r for r in records if r["kind"] == "heldout"}
    for maze in mazes:
        for seed in range(4):
            returns = evaluator.heldout(jax.tree.map(lambda x, s=seed: x[s], params), maze, seed)
            assert heldout[maze, seed]["solve_rate"] == float(np.mean(returns > 0))
            assert heldout[maze, seed]["episodes"] == harness.heldout_episodes
    assert len({r["solve_rate"] for r in heldout.values()}) > 1  # the copies play apart: not one value for all
    trained = [r for r in records if r["kind"] == "train_levels"]
    assert all((r["episodes"], r["eval_seed"]) == (harness.train_levels, harness.eval_seed) for r in trained)
    only = fork_run.evaluate(fork_run.Evaluate(run_dir=run_dir, sources=(1, 0), forks=2, seeds=(2,)))
    assert only == [records[2], records[6]]


@pytest.mark.slow
def test_a_copy_can_take_another_seeds_buffer(forked, tmp_path):
    """Two seeds, each given the other's buffer, so that a buffer taken from the wrong --buffer-from entry shows."""
    source, source_config, _, config, _ = forked
    args = fork_run.Fork(run_dir=source, update=2, seeds=(1, 0), buffer_from=(0, 1), forks=2, run_name="mixed")
    run_dir = fork_run.fork(replace(args, runs_dir=tmp_path))
    mixed = state_at(run_dir, with_flags(config, runs_dir=str(tmp_path), run_name="mixed"), 2)
    original = state_at(source, source_config, 2)
    for part, seeds in (("buffer", [0, 0, 1, 1]), ("train_state", [1, 1, 0, 0])):
        for have, want in zip(
            jax.tree.leaves(getattr(mixed, part)), jax.tree.leaves(getattr(original, part)), strict=True
        ):
            np.testing.assert_array_equal(np.asarray(have), np.asarray(want)[seeds])


@pytest.mark.slow
def test_a_copy_can_start_a_new_optimizer_state(forked, tmp_path):
    source, source_config, _, config, _ = forked
    args = fork_run.Fork(run_dir=source, update=4, seeds=(1,), fresh_optimizer=True, forks=2, run_name="fresh")
    run_dir = fork_run.fork(replace(args, runs_dir=tmp_path))
    fresh_config = with_flags(config, num_seeds=2, runs_dir=str(tmp_path), run_name="fresh")
    fresh = state_at(run_dir, fresh_config, 4)
    new_run = jax.jit(plr.make_train(fresh_config).init)(jax.random.split(jax.random.key(3), 2))
    original = state_at(source, source_config, 4)  # after its first PPO updates
    moved = jax.tree.leaves(
        jax.tree.map(
            lambda a, b: not np.array_equal(a[1], b[0]), original.train_state.opt_state, new_run.train_state.opt_state
        )
    )
    assert any(moved)  # the source's Adam has taken steps, so a copy that kept it would differ
    for have, want in zip(
        jax.tree.leaves(fresh.train_state.opt_state), jax.tree.leaves(new_run.train_state.opt_state), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(have), np.asarray(want))
    for have, want in zip(
        jax.tree.leaves(fresh.train_state.params), jax.tree.leaves(original.train_state.params), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(have), np.asarray(want)[[1, 1]])


@pytest.mark.slow
def test_a_copy_can_take_another_seeds_layers(forked, tmp_path):
    """Two seeds, each given the other's Dense_0, so that a layer taken from the wrong --params-from entry shows."""
    source, source_config, _, config, _ = forked
    args = fork_run.Fork(
        source, 2, (1, 0), "layers", forks=2, params_from=(0, 1), layers=("Dense_0",), fresh_optimizer=True
    )
    run_dir = fork_run.fork(replace(args, runs_dir=tmp_path))
    mixed = state_at(run_dir, with_flags(config, runs_dir=str(tmp_path), run_name="layers"), 2)
    original = state_at(source, source_config, 2).train_state.params["params"]
    for layer, values in mixed.train_state.params["params"].items():
        seeds = [0, 0, 1, 1] if layer == "Dense_0" else [1, 1, 0, 0]
        for have, want in zip(jax.tree.leaves(values), jax.tree.leaves(original[layer]), strict=True):
            np.testing.assert_array_equal(np.asarray(have), np.asarray(want)[seeds])


@pytest.mark.slow
def test_update_0_without_a_checkpoint_forks_the_runs_initial_state(forked, tmp_path):
    """The initial state is made again from the run's own seed: a copy of the run whose config.json names seed 5
    (not the default 0, so a state made from a fixed seed shows). A run with a checkpoint at update 0 is forked
    from it."""
    source, source_config, _, config, _ = forked
    copy = tmp_path / "copy"
    shutil.copytree(source, copy)
    saved = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**saved, "config": {**saved["config"], "seed": 5}}))
    run_dir = fork_run.fork(fork_run.Fork(run_dir=copy, update=0, seeds=(1,), run_name="initial", runs_dir=tmp_path))
    state = state_at(run_dir, with_flags(config, num_seeds=6, runs_dir=str(tmp_path), run_name="initial"), 0)
    seeds = jax.random.split(jax.random.key(5), 2)
    initial = jax.jit(plr.make_train(source_config).init)(seeds)
    for have, want in zip(jax.tree.leaves(state), jax.tree.leaves(initial), strict=True):
        if not jax.dtypes.issubdtype(have.dtype, jax.dtypes.prng_key):
            np.testing.assert_array_equal(np.asarray(have), np.asarray(want)[[1] * 6])
    assert [row["seed"] for row in log_rows(run_dir)] == []
    # The fork holds a checkpoint at update 0, so forking it at 0 loads that one and makes nothing again.
    again = fork_run.fork(fork_run.Fork(run_dir=run_dir, update=0, seeds=(5,), run_name="again", runs_dir=tmp_path))
    state = state_at(again, with_flags(config, num_seeds=6, runs_dir=str(tmp_path), run_name="again"), 0)
    for have, want in zip(jax.tree.leaves(state), jax.tree.leaves(initial), strict=True):
        if not jax.dtypes.issubdtype(have.dtype, jax.dtypes.prng_key):
            np.testing.assert_array_equal(np.asarray(have), np.asarray(want)[[1] * 6])


@pytest.mark.slow
def test_bad_forks_are_refused_in_one_line_before_a_folder_is_made(forked, tmp_path):
    source = forked[0]
    cases = [
        (dict(update=3, seeds=(0,)), "has no checkpoint of update 3 \\(it has \\[2, 4\\]\\)"),
        (dict(update=2, seeds=(2,)), "--seeds \\[2\\]: .* has seeds 0-1"),
        (dict(update=2, seeds=(0,), buffer_from=(5,)), "--buffer-from \\[5\\]: .* has seeds 0-1"),
        (dict(update=2, seeds=(0, 1), buffer_from=(1,)), "--buffer-from names 1 seeds; give one per --seeds \\(2\\)"),
        (dict(update=2, seeds=(0,), layers=("Dense_0",)), "--params-from and --layers go together"),
        (
            dict(update=2, seeds=(0,), params_from=(1,), layers=("Head",), fresh_optimizer=True),
            "--layers \\['Head'\\]: the network's layers are \\['Conv3x3_0'",
        ),
        (dict(update=2, seeds=(0,), params_from=(1,), layers=("Dense_0",)), "--params-from needs --fresh-optimizer"),
        (
            dict(update=2, seeds=(0,), params_from=(1, 0), layers=("Dense_0",), fresh_optimizer=True),
            "--params-from names 2 seeds",
        ),
    ]
    for fields, message in cases:
        args = fork_run.Fork(run_dir=source, run_name="refused", runs_dir=tmp_path, **fields)
        with pytest.raises(ConfigError, match=message):
            fork_run.fork(args)
    assert not (tmp_path / "refused").exists()
    with pytest.raises(ConfigError, match="--forks must be at least 1"):
        fork_run.Fork(run_dir=source, update=2, seeds=(0,), run_name="refused", forks=0)


@pytest.mark.slow
def test_a_fork_of_a_run_started_with_overwrite_never_deletes_a_folder(forked, tmp_path):
    """Mutation checked by hand: without `overwrite=False` in the fork's config, the other folder is emptied."""
    copy = tmp_path / "copy"
    shutil.copytree(forked[0], copy)
    saved = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**saved, "config": {**saved["config"], "overwrite": True}}))
    taken = tmp_path / "taken"
    shutil.copytree(forked[2], taken)  # another run: --overwrite would delete it
    with pytest.raises(ConfigError, match="already exists"):
        fork_run.fork(fork_run.Fork(run_dir=copy, update=2, seeds=(0,), run_name="taken", runs_dir=tmp_path))
    assert (taken / "logs.csv").is_file()


@pytest.mark.slow
def test_evaluate_refuses_labels_that_do_not_fit_the_run(forked):
    """Mutation checked by hand: without the sources-times-forks check, the first refusal does not come."""
    run_dir = forked[2]
    with pytest.raises(ConfigError, match="--sources \\(1, 0\\) x --forks 3 is not .*'s 4 seeds"):
        fork_run.evaluate(fork_run.Evaluate(run_dir=run_dir, sources=(1, 0), forks=3))
    with pytest.raises(ConfigError, match="--seeds \\[4\\]: .* has seeds 0-3"):
        fork_run.evaluate(fork_run.Evaluate(run_dir=run_dir, seeds=(4,)))


def test_evaluate_refuses_an_unknown_or_repeated_held_out_maze_in_one_line(tmp_path):
    for mazes, message in (
        (("Labyrinth", "Nope"), "unknown held-out maze 'Nope'"),
        (("Labyrinth",) * 2, "a maze twice"),
    ):
        printed = command_in_process(
            "benchmarks/learning/fork_run.py", "evaluate", "--run-dir", str(tmp_path), "--heldout-mazes", *mazes
        )
        assert printed.returncode == 2 and message in printed.stderr and len(printed.stderr.splitlines()) == 1
    with pytest.raises(ConfigError, match="--heldout-from must be non-negative, got -1"):
        fork_run.Evaluate(run_dir=tmp_path, heldout_from=-1)


def test_variants_the_runs_state_cannot_take_are_refused():
    """check_copies on stand-in runner states: a curriculum beyond the level buffer (ACCEL's parents), networks that
    are not one train_state (PAIRED's; asked for by --fresh-optimizer or by --params-from alone) and no level buffer
    at all (DR's). Mutation checked by hand: without any one check, its case passes."""

    @struct.dataclass
    class WithParents:
        train_state: dict
        buffer: dict
        mutation_parents: dict

    @struct.dataclass
    class WithoutTrainState:
        students: dict

    @struct.dataclass
    class WithoutBuffer:
        train_state: dict
        rng: dict

    args = fork_run.Fork(run_dir=Path("run"), update=2, seeds=(0,), run_name="refused")
    with pytest.raises(ConfigError, match="curriculum also holds \\['mutation_parents'\\]"):
        fork_run.check_copies(replace(args, buffer_from=(1,)), WithParents({}, {}, {}))
    with pytest.raises(ConfigError, match="has no single train_state"):
        fork_run.check_copies(replace(args, fresh_optimizer=True), WithoutTrainState({}))
    with pytest.raises(ConfigError, match="has no single train_state"):
        fork_run.check_copies(replace(args, params_from=(1,)), WithoutTrainState({}))
    with pytest.raises(ConfigError, match="--buffer-from: run's method has no level buffer"):
        fork_run.check_copies(replace(args, buffer_from=(1,)), WithoutBuffer({}, {}))


@pytest.mark.slow
def test_the_initial_state_of_an_init_from_run_is_refused_and_a_failed_write_leaves_no_folder(
    forked, tmp_path, monkeypatch
):
    copy = tmp_path / "copy"
    shutil.copytree(forked[0], copy)
    saved = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**saved, "config": {**saved["config"], "init_from": "x.msgpack"}}))
    with pytest.raises(ConfigError, match="started from --init-from"):
        fork_run.fork(fork_run.Fork(run_dir=copy, update=0, seeds=(0,), run_name="refused", runs_dir=tmp_path))

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fork_run, "copy_log_rows", full_disk)
    with pytest.raises(OSError):
        fork_run.fork(fork_run.Fork(run_dir=forked[0], update=2, seeds=(0,), run_name="failed", runs_dir=tmp_path))
    assert not (tmp_path / "failed").exists() and not (tmp_path / "refused").exists()


@pytest.mark.slow
def test_params_writes_the_chosen_seeds_student_parameters_that_init_from_starts_a_run_from(forked, tmp_path):
    """Mutation checked by hand: with the seeds' order ignored (`np.sort`), the stacked check fails; with update 0
    read from the last checkpoint, the initial check fails; with one seed written as a stack of one, the shape check
    fails."""
    source, source_config, _, _, _ = forked
    stacked = fork_run.write_params(fork_run.Params(run_dir=source, update=2, seeds=(1, 0), out=tmp_path / "two.npz"))
    at_2 = state_at(source, source_config, 2).train_state.params["params"]
    with np.load(stacked) as data:
        assert sorted(data.files) == sorted(
            "params/" + "/".join(key.key for key in path) for path, _ in jax.tree_util.tree_flatten_with_path(at_2)[0]
        )
        for path, leaf in jax.tree_util.tree_flatten_with_path(at_2)[0]:
            np.testing.assert_array_equal(data["params/" + "/".join(key.key for key in path)], np.asarray(leaf)[[1, 0]])
    one = fork_run.write_params(fork_run.Params(run_dir=source, update=0, seeds=(1,), out=tmp_path / "one.npz"))
    with np.load(one) as data:  # one seed's arrays, not a stack of one
        assert all(data[name].shape == np.shape(leaf)[1:] for name, leaf in flat_names(at_2, "params/").items())
    initial = jax.jit(plr.make_train(source_config).init)(jax.random.split(jax.random.key(source_config.run.seed), 2))
    from_one = jax.jit(plr.make_train(with_flags(source_config, init_from=str(one))).init)(
        jax.random.split(jax.random.key(7), 2)
    )
    for have, want in zip(
        jax.tree.leaves(from_one.train_state.params), jax.tree.leaves(initial.train_state.params), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(have), np.asarray(want)[[1, 1]])
    for fields, message in (
        (dict(update=2, seeds=(2,)), "--seeds \\[2\\]: .* has seeds 0-1"),
        (dict(update=2, seeds=()), "--seeds: name at least one seed"),
        (dict(update=2, seeds=(0,), out=tmp_path / "x.txt"), "give an .npz file"),
        (dict(update=2, seeds=(0,), out=tmp_path / "missing" / "x.npz"), "give an .npz file in an existing folder"),
    ):
        with pytest.raises(ConfigError, match=message):
            fork_run.write_params(fork_run.Params(run_dir=source, **{"out": tmp_path / "x.npz", **fields}))
    assert not (tmp_path / "x.npz").exists()


def test_copy_log_rows_keeps_each_copys_source_rows_up_to_the_fork_renumbered_in_update_order(tmp_path):
    """Against a plain-Python reference on a hand-made logs.csv of 3 seeds and updates 1-3, forked at update 2 with
    copies of seeds 2, 2 and 0: the header and every cell but the seed kept, rows past the fork and of seeds not
    copied left out, rows ordered by update then new seed as a run writes them."""
    source = tmp_path / "source.csv"
    header = ["update", "seed", "env_steps", "train/return"]
    rows = [
        [str(update), str(seed), str(update * 64), f"{seed + update / 10}"]
        for update in (1, 2, 3)
        for seed in (2, 0, 1)
    ]
    with open(source, "w", newline="") as file:
        csv.writer(file).writerows([header, *rows])
    sources = np.array([2, 2, 0])
    written = fork_run.copy_log_rows(source, tmp_path / "target.csv", sources, 2)
    want = [
        [str(update), str(new_seed), str(update * 64), f"{old_seed + update / 10}"]
        for update in (1, 2)
        for new_seed, old_seed in enumerate(sources.tolist())
    ]
    with open(tmp_path / "target.csv", newline="") as file:
        assert list(csv.reader(file)) == [header, *want]
    assert written == len(want)


def test_forked_state_gathers_each_part_from_its_seed_and_gives_every_key_its_own_draws():
    """forked_state on a stand-in runner of 3 seeds: the train state gathered at `sources`, the buffer at
    `buffer_sources`, and the two key leaves (rng, rng_eval) replaced so that no key is any other copy's, the other
    leaf's or an original one."""

    @struct.dataclass
    class StandInRunner:
        train_state: dict
        buffer: dict
        rng: jax.Array
        rng_eval: jax.Array

    runner = StandInRunner(
        train_state={"params": np.arange(6.0).reshape(3, 2)},
        buffer={"scores": np.array([10.0, 11.0, 12.0])},
        rng=jax.random.split(jax.random.key(0), 3),
        rng_eval=jax.random.split(jax.random.key(1), 3),
    )
    sources, buffer_sources = np.array([2, 2, 0]), np.array([1, 1, 2])
    forked = fork_run.forked_state(runner, sources, jax.random.key(7), buffer_sources)
    np.testing.assert_array_equal(forked.train_state["params"], runner.train_state["params"][sources])
    np.testing.assert_array_equal(forked.buffer["scores"], runner.buffer["scores"][buffer_sources])
    drawn = [row.tobytes() for keys in (forked.rng, forked.rng_eval) for row in np.asarray(jax.random.key_data(keys))]
    original = {
        row.tobytes() for keys in (runner.rng, runner.rng_eval) for row in np.asarray(jax.random.key_data(keys))
    }
    assert len(set(drawn)) == 6 and not set(drawn) & original


@pytest.mark.slow
def test_a_fork_saves_its_own_config_and_draws_the_copies_keys_from_the_fork_seed(forked, tmp_path):
    """Forking the fixture's seeds again, with --fork-seed 4, from a copy of the run whose config.json archives
    nothing: config.json holds seed 4, one seed per copy, the new name and folder, no --resume or --overwrite, and
    archives at the checkpoint interval (so `evaluate` finds every checkpoint the copies save); the state equals
    the fixture's fork (--fork-seed 3) except every key, which differs."""
    source, _, _, config, (at_fork, _) = forked
    copy = tmp_path / "copy"
    shutil.copytree(source, copy)
    saved = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**saved, "config": {**saved["config"], "archive_interval": 0}}))
    args = fork_run.Fork(run_dir=copy, update=2, seeds=(1, 0), forks=2, run_name="reseeded", fork_seed=4)
    run_dir = fork_run.fork(replace(args, runs_dir=tmp_path))
    written = json.loads((run_dir / "config.json").read_text())["config"]
    want = dict(seed=4, num_seeds=4, run_name="reseeded", runs_dir=str(tmp_path), archive_interval=2)
    assert {name: written[name] for name in want} == want
    assert written["resume"] is False and written["overwrite"] is False
    reseeded = state_at(run_dir, config, 2)
    for have, other in zip(jax.tree.leaves(reseeded), jax.tree.leaves(at_fork), strict=True):
        if jax.dtypes.issubdtype(have.dtype, jax.dtypes.prng_key):
            have, other = np.asarray(jax.random.key_data(have)), np.asarray(jax.random.key_data(other))
            assert not any(np.array_equal(mine, theirs) for mine, theirs in zip(have, other, strict=True))
        else:
            np.testing.assert_array_equal(np.asarray(have), np.asarray(other))


@pytest.mark.slow
def test_a_state_with_a_leaf_the_seeds_share_is_refused_before_a_folder_is_made(forked, tmp_path, monkeypatch):
    """A stand-in state: the run's own at update 2 with its update counter one number for all seeds, which no copy
    could take its seed's part of."""
    load_run = fork_run.load_run

    def with_a_shared_counter(run_dir, path):
        loaded = load_run(run_dir, path)
        return loaded._replace(runner=loaded.runner.replace(update=np.int32(2)))

    monkeypatch.setattr(fork_run, "load_run", with_a_shared_counter)
    args = fork_run.Fork(run_dir=forked[0], update=2, seeds=(0,), run_name="refused", runs_dir=tmp_path)
    with pytest.raises(ConfigError, match="state has leaves without a seed axis \\(\\[\\(\\)\\]\\)"):
        fork_run.fork(args)
    assert not (tmp_path / "refused").exists()
