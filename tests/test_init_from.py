"""--init-from (common/init_from.py): a run started from another run's checkpoint or from an .npz holds those
parameters at update 0 with a fresh optimizer; a parameter tree of another network is refused in one line before a
run folder is made; a resume of such a run equals the run uninterrupted. Mutation checked by hand: with
`with_parameters` returning the runner unchanged, the update-0 tests fail; with the seed-count check removed from
`_per_seed`, the stacked-seeds refusal test fails."""

from pathlib import Path

import jax
import numpy as np
import pytest

from algos import dr, plr
from common import checkpoint, sweep
from common.config import flags_of, with_flags
from common.errors import ConfigError
from tests.states import assert_states_close, command_in_process, newest_state, run_script

TINY = dict(
    num_seeds=2,
    num_envs=4,
    num_steps=16,
    lstm_size=16,
    maze_size=7,
    n_walls=10,
    max_steps=12,
    total_updates=4,
    log_interval=2,
    eval_interval=0,
    checkpoint_interval=2,
    screenshot_interval=0,
)


def config_of(module, tmp_path, **overrides):
    return with_flags(module.Config(), **{**TINY, "runs_dir": str(tmp_path), **overrides})


def initial_runner(module, config):
    functions = module.make_train(config)
    return jax.jit(functions.init)(jax.random.split(jax.random.key(config.run.seed), config.run.num_seeds))


def assert_trees_equal(a, b):
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x), np.asarray(y)), a, b)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A trained tiny DR run (2 seeds, 4 updates): its folder, config and final runner state."""
    runs = tmp_path_factory.mktemp("runs")
    config = config_of(dr, runs, run_name="source")
    run_dir = run_script(dr, config)
    return run_dir, config, newest_state(dr, config, run_dir)


def newest_checkpoint(run_dir: Path) -> Path:
    return checkpoint.list_checkpoints(run_dir / "checkpoints")[-1]


def test_a_run_from_a_checkpoint_holds_its_parameters_per_seed_with_a_fresh_optimizer(trained, tmp_path):
    run_dir, _, source = trained
    config = config_of(plr, tmp_path, seed=5, init_from=str(newest_checkpoint(run_dir)))
    runner = initial_runner(plr, config)
    assert_trees_equal(runner.train_state.params, source.train_state.params)  # seed i from seed i
    fresh = initial_runner(plr, with_flags(config, init_from=None))
    assert_trees_equal(runner.train_state.opt_state, fresh.train_state.opt_state)
    assert int(runner.train_state.step[0]) == 0 and int(source.train_state.step[0]) > 0
    assert_states_close(runner.buffer, fresh.buffer)  # only the parameters come from the file
    with pytest.raises(AssertionError):
        assert_trees_equal(fresh.train_state.params, source.train_state.params)


def test_one_seeds_npz_starts_every_seed_and_a_stack_starts_each_its_own(trained, tmp_path):
    _, _, source = trained
    flat = {
        "params/" + "/".join(str(getattr(key, "key", key)) for key in path): np.asarray(leaf)
        for path, leaf in jax.tree_util.tree_flatten_with_path(source.train_state.params["params"])[0]
    }
    one_seed = tmp_path / "one.npz"
    np.savez(one_seed, **{key: value[1] for key, value in flat.items()}, n_updates=np.array(3))
    runner = initial_runner(dr, config_of(dr, tmp_path, init_from=str(one_seed)))
    expected = jax.tree.map(lambda leaf: np.stack([leaf[1], leaf[1]]), source.train_state.params)
    assert_trees_equal(runner.train_state.params, expected)
    one_stacked = tmp_path / "one_stacked.npz"  # a 1-seed run's stack: a leading axis of 1 starts every seed too
    np.savez(one_stacked, **{key: value[1:2] for key, value in flat.items()})
    runner = initial_runner(dr, config_of(dr, tmp_path, init_from=str(one_stacked)))
    assert_trees_equal(runner.train_state.params, expected)
    stacked = tmp_path / "stacked.npz"
    np.savez(stacked, **flat)
    runner = initial_runner(dr, config_of(dr, tmp_path, init_from=str(stacked)))
    assert_trees_equal(runner.train_state.params, source.train_state.params)


def test_every_point_of_a_sweep_starts_from_the_checkpoint(trained, tmp_path):
    run_dir, _, source = trained
    config = config_of(dr, tmp_path, init_from=str(newest_checkpoint(run_dir)), sweep=("lr=1e-4,3e-4",))
    functions = sweep.run_functions(config, dr.make_train, "algos/dr.py")
    runner = jax.jit(functions.init)(jax.random.split(jax.random.key(config.run.seed), config.run.num_seeds))
    expected = jax.tree.map(lambda leaf: np.concatenate([leaf, leaf]), source.train_state.params)  # point, then seed
    assert_trees_equal(runner.train_state.params, expected)


def refusal(command: list[str], tmp_path: Path) -> str:
    result = command_in_process(*command, "--runs-dir", str(tmp_path), "--run-name", "target")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --init-from"), result.stderr
    assert not (tmp_path / "target").exists(), "refused before any run folder is made"
    return lines[0]


def tiny_flags() -> list[str]:
    flags = []
    for name, value in TINY.items():
        flags += [f"--{name.replace('_', '-')}", str(value)]
    return flags


def test_other_networks_are_refused_in_one_line_before_a_folder_is_made(trained, tmp_path):
    run_dir, _, source = trained
    saved = str(newest_checkpoint(run_dir))
    wider = [*tiny_flags(), "--lstm-size", "32", "--init-from", saved]
    assert "another --lstm-size" in refusal(["algos/dr.py", *wider], tmp_path)
    assert "another method" in refusal(["algos/paired.py", *tiny_flags(), "--init-from", saved], tmp_path)
    three = [*tiny_flags(), "--num-seeds", "3", "--init-from", saved]
    assert "holds 2 seeds and this run has --num-seeds 3" in refusal(["algos/dr.py", *three], tmp_path)
    missing = tmp_path / "missing.npz"
    assert "no such file" in refusal(["algos/dr.py", *tiny_flags(), "--init-from", str(missing)], tmp_path)
    partial = tmp_path / "partial.npz"
    np.savez(
        partial, **{"params/Conv3x3_0/kernel": np.asarray(source.train_state.params["params"]["Conv3x3_0"]["kernel"])}
    )
    assert "is missing" in refusal(["algos/dr.py", *tiny_flags(), "--init-from", str(partial)], tmp_path)
    text = tmp_path / "notes.txt"
    text.write_text("not parameters")
    assert "neither a cleanued checkpoint" in refusal(
        ["algos/dr.py", *tiny_flags(), "--init-from", str(text)], tmp_path
    )


def test_unreadable_files_bad_values_and_a_sweeps_checkpoint_are_refused_in_one_line(trained, tmp_path):
    """What the fault trial got through or saw as a traceback: an empty, a truncated and an .npy named .npz (each
    a traceback), parameters of text (a traceback), of complex numbers (cast without a word) or NaN (found only
    after the compile and a chunk), and a sweep's checkpoint, whose points x seeds were taken as this run's seeds.
    Each is one line before a folder is made. Fails with any of the read's errors, or either check, dropped."""
    run_dir, config, source = trained
    flat = {
        "params/" + "/".join(str(getattr(key, "key", key)) for key in path): np.asarray(leaf)[0]
        for path, leaf in jax.tree_util.tree_flatten_with_path(source.train_state.params["params"])[0]
    }
    good = tmp_path / "good.npz"
    np.savez(good, **flat)
    files = {
        "empty.npz": b"",
        "truncated.npz": good.read_bytes()[: good.stat().st_size // 2],
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    np.save(tmp_path / "bare.npy", np.zeros(3))
    (tmp_path / "bare.npy").rename(tmp_path / "bare.npz")
    np.savez(tmp_path / "objects.npz", **{**flat, "params/Extra": np.array([{"a": 1}], dtype=object)})
    for name in ("empty.npz", "truncated.npz", "bare.npz", "objects.npz"):
        line = refusal(["algos/dr.py", *tiny_flags(), "--init-from", str(tmp_path / name)], tmp_path)
        assert "cannot read it as an .npz" in line, line
    first = next(iter(flat))
    for name, value, says in (
        ("text", np.full(flat[first].shape, "a"), "holds <U1 values, not real numbers"),
        ("complex", flat[first] + 1j, "holds complex64 values, not real numbers"),
        ("nan", np.full(flat[first].shape, np.nan, np.float32), "holds non-finite values (NaN or infinity)"),
    ):
        np.savez(tmp_path / f"{name}.npz", **{**flat, first: value})
        line = refusal(["algos/dr.py", *tiny_flags(), "--init-from", str(tmp_path / f"{name}.npz")], tmp_path)
        assert line.endswith(f"{first} {says}"), line
    np.savez(tmp_path / "extra.npz", **flat, **{"params/Extra/kernel": np.zeros(3)})
    line = refusal(["algos/dr.py", *tiny_flags(), "--init-from", str(tmp_path / "extra.npz")], tmp_path)
    assert line.endswith("another network's (params/Extra/kernel is not in this config's network)"), line
    np.savez(tmp_path / "none.npz", n_updates=np.array(3))
    line = refusal(["algos/dr.py", *tiny_flags(), "--init-from", str(tmp_path / "none.npz")], tmp_path)
    assert line.endswith("the .npz has no params/... arrays"), line
    line = refusal(["algos/paired.py", *tiny_flags(), "--init-from", str(good)], tmp_path)
    assert "an .npz holds one network and this script has 2 (students, teacher)" in line, line
    swept = flags_of(with_flags(config, num_seeds=1, sweep=("lr=1e-4,3e-4",)))
    sweeps = checkpoint.save(tmp_path / "sweep.msgpack", source, 4, swept)
    line = refusal(["algos/dr.py", *tiny_flags(), "--init-from", str(sweeps)], tmp_path)
    assert line.endswith("a checkpoint of a --sweep holds every point's seeds; start from a run of one config"), line


def test_a_resumed_run_from_a_checkpoint_equals_it_uninterrupted_without_the_file(trained, tmp_path):
    run_dir, _, _ = trained
    source = tmp_path / "source.msgpack"
    source.write_bytes(newest_checkpoint(run_dir).read_bytes())
    whole = config_of(dr, tmp_path, run_name="whole", total_updates=6, init_from=str(source))
    run_script(dr, whole)
    run_script(dr, config_of(dr, tmp_path, run_name="split", total_updates=4, init_from=str(source)))
    source.unlink()  # a resume reads its own checkpoint, never --init-from again
    split = config_of(dr, tmp_path, run_name="split", total_updates=6, init_from=str(source), resume=True)
    resumed = run_script(dr, split)
    template = with_flags(whole, init_from=None)  # reading a checkpoint needs only the state's shapes
    assert_states_close(newest_state(dr, split, resumed), newest_state(dr, template, tmp_path / "whole"))
    with pytest.raises(ConfigError, match="--init-from"):
        run_script(dr, with_flags(split, init_from=None, total_updates=8))
