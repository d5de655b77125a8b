"""benchmarks/learning/fork_run.py: a fork copies the chosen seeds' whole state at a checkpoint with fresh random keys
and their log rows; the script's --resume trains the copies apart; `evaluate` plays each copy's own parameters; bad
input is refused in one line before a folder is made. Mutation checked by hand: with `forked_state` keeping the
keys, the key and divergence checks fail; with `sources` not repeated per fork (`np.tile`), the state check fails;
with the evaluated seed's index one too high, the evaluation check fails; with rows past the fork copied, the log check
fails; with `buffer_sources` ignored, the buffer check fails; with `--fresh-optimizer` ignored, the optimizer check
fails; with the initial state made from another seed, the update-0 check fails; with the layers' source seeds not
used, the layers check fails."""

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
    source, source_config, run_dir, _, _ = forked
    out = tmp_path / "evaluations.jsonl"
    command = ["evaluate", "--run-dir", str(run_dir), "--sources", "1", "0", "--forks", "2", "--out", str(out)]
    printed = command_in_process("benchmarks/learning/fork_run.py", *command)
    assert printed.returncode == 0, printed.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert "| 4 | 0 | " in printed.stdout  # the table: update, source seed, its copies' solve rates
    assert [(r["update"], r["seed"], r["source"]) for r in records] == [
        (update, seed, source_seed) for update in (2, 4) for seed, source_seed in enumerate((1, 1, 0, 0))
    ]
    assert all(0 <= r["solve_rate"] <= 1 for r in records)
    # Copy 1 of seed 1 holds seed 1's parameters at the fork, played with the comparison's draws for seed index 1.
    harness = replace(HarnessArgs(), maze_size=5, n_walls=3, max_steps=8, lstm_size=8)
    params = state_at(source, source_config, 2).train_state.params
    returns = Evaluator(harness).training_levels(jax.tree.map(lambda x: x[1], params), 2, 1)
    assert records[1]["solve_rate"] == float(np.mean(returns > 0))


@pytest.mark.slow
def test_a_copy_can_take_another_seeds_buffer(forked, tmp_path):
    source, source_config, _, config, _ = forked
    args = fork_run.Fork(run_dir=source, update=2, seeds=(1,), buffer_from=(0,), forks=2, run_name="mixed")
    run_dir = fork_run.fork(replace(args, runs_dir=tmp_path))
    mixed = state_at(run_dir, with_flags(config, num_seeds=2, runs_dir=str(tmp_path), run_name="mixed"), 2)
    original = state_at(source, source_config, 2)
    for part, seed in (("buffer", 0), ("train_state", 1)):
        for have, want in zip(
            jax.tree.leaves(getattr(mixed, part)), jax.tree.leaves(getattr(original, part)), strict=True
        ):
            np.testing.assert_array_equal(np.asarray(have), np.asarray(want)[[seed, seed]])


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
    source, source_config, _, config, _ = forked
    args = fork_run.Fork(
        source, 2, (1,), "layers", forks=2, params_from=(0,), layers=("Dense_0",), fresh_optimizer=True
    )
    run_dir = fork_run.fork(replace(args, runs_dir=tmp_path))
    mixed = state_at(run_dir, with_flags(config, num_seeds=2, runs_dir=str(tmp_path), run_name="layers"), 2)
    original = state_at(source, source_config, 2).train_state.params["params"]
    for layer, values in mixed.train_state.params["params"].items():
        seed = 0 if layer == "Dense_0" else 1
        for have, want in zip(jax.tree.leaves(values), jax.tree.leaves(original[layer]), strict=True):
            np.testing.assert_array_equal(np.asarray(have), np.asarray(want)[[seed, seed]])


@pytest.mark.slow
def test_update_0_without_a_checkpoint_forks_the_runs_initial_state(forked, tmp_path):
    source, source_config, _, config, _ = forked
    run_dir = fork_run.fork(fork_run.Fork(run_dir=source, update=0, seeds=(1,), run_name="initial", runs_dir=tmp_path))
    state = state_at(run_dir, with_flags(config, num_seeds=6, runs_dir=str(tmp_path), run_name="initial"), 0)
    seeds = jax.random.split(jax.random.key(source_config.run.seed), 2)
    initial = jax.jit(plr.make_train(source_config).init)(seeds)
    for have, want in zip(jax.tree.leaves(state), jax.tree.leaves(initial), strict=True):
        if not jax.dtypes.issubdtype(have.dtype, jax.dtypes.prng_key):
            np.testing.assert_array_equal(np.asarray(have), np.asarray(want)[[1] * 6])
    assert [row["seed"] for row in log_rows(run_dir)] == []


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


def test_variants_the_runs_state_cannot_take_are_refused():
    """check_copies on stand-in runner states: a curriculum beyond the level buffer (ACCEL's parents) and networks
    that are not one train_state (PAIRED's). Mutation checked by hand: without either check, its case passes."""

    @struct.dataclass
    class WithParents:
        train_state: dict
        buffer: dict
        mutation_parents: dict

    @struct.dataclass
    class WithoutTrainState:
        students: dict

    args = fork_run.Fork(run_dir=Path("run"), update=2, seeds=(0,), run_name="refused")
    with pytest.raises(ConfigError, match="curriculum also holds \\['mutation_parents'\\]"):
        fork_run.check_copies(replace(args, buffer_from=(1,)), WithParents({}, {}, {}))
    with pytest.raises(ConfigError, match="has no single train_state"):
        fork_run.check_copies(replace(args, fresh_optimizer=True), WithoutTrainState({}))


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
    read from the last checkpoint, the initial check fails."""
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
    ):
        with pytest.raises(ConfigError, match=message):
            fork_run.write_params(fork_run.Params(run_dir=source, **{"out": tmp_path / "x.npz", **fields}))
    assert not (tmp_path / "x.npz").exists()
