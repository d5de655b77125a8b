"""common/evaluate.py without training: a run folder whose checkpoints hold a zero runner state (a valid policy).
The risk evaluation plays its own maze size, walls and episode limit and records them; its flags are checked
before anything loads; a checkpoint pruned by the training process while evaluate reads it is replaced by the
next newest, as happens when evaluating a folder that is still training; a run started in the folder while it is
loaded or evaluated gets nothing written into it; a sweep's lines give each point its own seeds."""

import csv
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import common.evaluate
from algos import dr
from common import checkpoint
from common.config import PATH_MAX, flags_of, with_flags
from common.errors import ConfigError
from common.evaluate import RISK_ALPHAS, Args, load_run
from common.heldout_eval import WindowCounts
from common.sweep import run_functions
from tests.states import command_in_process
from tests.test_devices import env_with_devices

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY = dict(
    num_seeds=2, num_envs=4, num_steps=8, lstm_size=8, maze_size=5, n_walls=3, max_steps=6, total_updates=4,
    log_interval=2, eval_interval=0, checkpoint_interval=2, screenshot_interval=0,
)  # fmt: skip
TINY_RISK = dict(risk=True, risk_levels=6, risk_episodes=2, risk_maze_size=6, risk_walls=5, risk_max_steps=9, batch=12)
"""A risk evaluation small enough to play in seconds: 6x6 mazes, 5 walls, 9 steps an attempt."""


def zero_state(template):
    """A runner state of zeros shaped like `template` (typed RNG keys as keys of zero data)."""

    def zeros(leaf):
        if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            return jax.random.wrap_key_data(jnp.zeros(jax.eval_shape(jax.random.key_data, leaf).shape, jnp.uint32))
        return jnp.zeros(leaf.shape, leaf.dtype)

    return jax.tree.map(zeros, template)


@pytest.fixture(scope="module")
def zero_run(tmp_path_factory):
    """(config, the state to save, a function writing a run folder with checkpoints at the given updates)."""
    root = tmp_path_factory.mktemp("runs")
    config = with_flags(dr.Config(), **TINY, runs_dir=str(root))
    rngs = jax.random.split(jax.random.key(config.run.seed), config.run.num_seeds)
    state = zero_state(jax.eval_shape(dr.make_train(config).init, rngs))

    def make(run_dir: Path, updates) -> Path:
        run_dir.mkdir(parents=True)
        (run_dir / "config.json").write_text(json.dumps({"script": "algos/dr.py", "config": flags_of(config)}))
        for update in updates:
            checkpoint.save(checkpoint.checkpoint_path(run_dir / "checkpoints", update), state, update, {})
        return run_dir

    return config, state, make


def test_a_checkpoint_pruned_while_it_is_read_is_replaced_by_the_next_newest(tmp_path, zero_run, monkeypatch):
    _, state, make = zero_run
    run_dir = make(tmp_path / "training", (2, 4))
    directory = run_dir / "checkpoints"
    original_read, reads = checkpoint.read_payload, []

    def training_goes_on(path):
        """The training process saves two newer checkpoints and prunes to 2 (as the driver does) just as
        evaluate is about to read the newest one it found."""
        reads.append(path.name)
        if len(reads) == 1:
            for update in (6, 8):
                checkpoint.save(checkpoint.checkpoint_path(directory, update), state, update, {})
            checkpoint.prune(directory, keep=2)
        return original_read(path)

    monkeypatch.setattr(checkpoint, "read_payload", training_goes_on)
    update = load_run(run_dir, None).update
    assert reads[0] == "update_00000004.msgpack" and update == 8, reads


def test_a_run_started_in_the_folder_while_its_checkpoint_is_read_is_refused(tmp_path, zero_run, monkeypatch):
    """`--overwrite` starts a new run between evaluate reading config.json and reading the checkpoint: the config
    and the checkpoint may belong to two runs, so loading stops. Fails with the check after loading dropped (the
    mutation trial's survivor of load_run)."""
    run_dir = zero_run[2](tmp_path / "run", (4,))
    original_read = checkpoint.read_payload

    def overwritten_meanwhile(path):
        saved, new = run_dir / "config.json", run_dir / "config.json.new"
        new.write_text(saved.read_text())
        os.replace(new, saved)  # a new run's config.json: another file, made while the old one still existed
        return original_read(path)

    monkeypatch.setattr(checkpoint, "read_payload", overwritten_meanwhile)
    with pytest.raises(ConfigError, match=r"was overwritten while it was being loaded; evaluate it again$"):
        load_run(run_dir, None)


def test_a_missing_checkpoint_flag_is_a_one_line_error(tmp_path, zero_run):
    run_dir = zero_run[2](tmp_path / "run", (2,))
    result = command_in_process(
        "-m", "common.evaluate", "--run-dir", str(run_dir), "--checkpoint", str(run_dir / "nope")
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "nope" in lines[0] and "does not exist" in lines[0], lines[0]


def test_another_experiments_checkpoint_is_refused_before_it_is_evaluated(tmp_path, zero_run):
    """--checkpoint from another run (here, another --lr) is refused in one line naming the flag: its results would be
    written into this run's eval/ and credited to it by the report. The run's own checkpoint, saved when it had
    another --total-updates (a flag a resume may change), loads. Fails with the saved config not compared."""
    config, state, make = zero_run
    run_dir = make(tmp_path / "run", ())
    own = checkpoint.save(
        run_dir / "checkpoints" / "update_00000002.msgpack", state, 2, flags_of(with_flags(config, total_updates=2))
    )
    foreign = checkpoint.save(tmp_path / "other.msgpack", state, 2, flags_of(with_flags(config, lr=0.5)))
    assert load_run(run_dir, own).update == 2
    result = command_in_process("-m", "common.evaluate", "--run-dir", str(run_dir), "--checkpoint", str(foreign))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0] == (
        f"error: --checkpoint {foreign} was saved by another experiment than {run_dir}'s: it differs in --lr: saved "
        f"{config.ppo.lr!r}, now 0.5; give one of this run's checkpoints"
    )
    assert not (run_dir / "eval").exists()


def test_the_csv_counts_an_episode_solved_when_its_return_is_positive(tmp_path, zero_run, monkeypatch):
    """Each seed's solve rate is the share of its episodes with a positive return and its return their mean: episodes
    played with known returns (one of 0, a failure) give 0.5 and 0.35 for every seed. Fails with `>= 0` (every
    episode solved) or another statistic (the mutation trial's survivor of main)."""
    run_dir = zero_run[2](tmp_path / "run", (2,))
    played = jnp.array([0.0, 0.5, 0.0, 0.9])

    def known_returns(rng, apply, params, carry, maze, env_params, num_episodes, unroll):
        return types.SimpleNamespace(returns=played)

    monkeypatch.setattr(common.evaluate, "evaluate_policy", known_returns)
    out = tmp_path / "known.csv"
    common.evaluate.main(Args(run_dir=run_dir, mazes=("SixteenRooms",), episodes=4, out=out))
    with open(out) as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["seed"], float(row["solve_rate"]), float(row["return"])) for row in rows] == [
        ("0", 0.5, pytest.approx(0.35)),
        ("1", 0.5, pytest.approx(0.35)),
    ]


def test_an_out_path_that_exists_is_refused_before_anything_loads(tmp_path, zero_run):
    """common.evaluate never overwrites: an existing --out (the fault trial gave the run's own config.json, which
    became a CSV), a folder, or a link is refused in one line before the run is read, and left as it was."""
    run_dir = zero_run[2](tmp_path / "run", (2,))
    (tmp_path / "folder").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    for out, kind in (
        (run_dir / "config.json", "there"),
        (tmp_path / "folder", "a folder"),
        (tmp_path / "link", "there"),
    ):
        before = out.read_bytes() if out.is_file() else None
        result = command_in_process("-m", "common.evaluate", "--run-dir", str(run_dir), "--out", str(out))
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, result.stderr
        assert lines[0] == f"error: --out {out} is {kind} already; give a new file path (nothing is overwritten)"
        assert (out.read_bytes() if out.is_file() else None) == before and "evaluating" not in result.stdout
    too_long = tmp_path / ("a" * 300 + ".csv")  # Path.exists raised OSError: a traceback
    result = command_in_process("-m", "common.evaluate", "--run-dir", str(run_dir), "--out", str(too_long))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: --out {too_long}: it has a 304-byte name"), lines[0]
    deep = tmp_path.joinpath(*["a" * 200] * 21, "x.csv")  # every name fits, the whole path does not
    result = command_in_process("-m", "common.evaluate", "--run-dir", str(run_dir), "--out", str(deep))
    assert result.returncode == 2 and f"bytes long: file systems take at most {PATH_MAX}" in result.stderr


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--risk-max-steps", "0"], "--risk-max-steps must be at least 1, got 0"),
        (["--risk-maze-size", "7", "--risk-walls", "48"], "--risk-walls (48) must leave two cells free"),
        (["--risk-maze-size", "1"], "--risk-maze-size must be in [2, 101], got 1"),
    ],
)
def test_risk_flags_are_one_line_errors_before_anything_loads(tmp_path, flags, fragment):
    result = command_in_process("-m", "common.evaluate", "--run-dir", str(tmp_path / "absent"), "--risk", *flags)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [(["--mazes"], "nothing to evaluate: give --mazes, --risk or both"), (["--mazes", "Nowhere"], "unknown maze")],
)
def test_what_to_evaluate_is_checked_before_anything_loads(tmp_path, flags, fragment):
    result = command_in_process("-m", "common.evaluate", "--run-dir", str(tmp_path / "absent"), *flags)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: {fragment}"), result.stderr


def test_the_risk_levels_are_as_many_as_asked_and_all_solvable():
    """Dense walls leave many levels unsolvable, so one batch is not enough: more are drawn until `count` are
    kept. Fails with the loop cut to one batch (the mutation trial's survivor of sample_solvable_levels)."""
    levels = common.evaluate.sample_solvable_levels(jax.random.key(0), 40, 5, 12)
    assert levels.wall_map.shape == (40, 5, 5)
    assert bool(jnp.all(jax.vmap(common.evaluate.shortest_path_length)(levels) >= 0))


@pytest.mark.parametrize(("counting", "player"), [("window", "play_levels_restarting"), ("first", "play_levels")])
def test_the_risk_evaluation_plays_and_records_its_own_configuration(
    tmp_path, zero_run, monkeypatch, capsys, counting, player
):
    config, _, make = zero_run
    run_dir = make(tmp_path / "run", (4,))
    played = []
    play = getattr(common.evaluate, player)

    def recording(rng, apply, params, carry, levels, env_params, steps, unroll):
        played.append((levels.wall_map.shape[-2:], steps, env_params.max_steps))
        return play(rng, apply, params, carry, levels, env_params, steps, unroll)

    monkeypatch.setattr(common.evaluate, player, recording)
    args = Args(run_dir=run_dir, mazes=(), **TINY_RISK, risk_counting=counting)
    common.evaluate.main(args)
    assert config.env_params.max_steps == 6 and played and set(played) == {((6, 6), 9, 9)}, played
    (risk_csv,) = (run_dir / "eval").glob("risk_00000004_*.csv")
    rows = list(csv.DictReader(open(risk_csv)))
    assert [float(row["alpha"]) for row in rows[::2]] == list(RISK_ALPHAS)
    recorded = {
        (row["maze_size"], row["walls"], row["max_steps"], row["levels"], row["episodes"], row["counting"])
        for row in rows
    }
    assert recorded == {("6", "5", "9", "6", "2", counting)}, recorded
    assert all(0.0 <= float(row["win_rate"]) <= 1.0 for row in rows)
    captured = capsys.readouterr()
    assert "6x6 mazes with 5 walls, at most 9 steps" in captured.out
    progress = [line for line in captured.err.splitlines() if line.startswith("risk evaluation")]
    assert "\r" not in captured.err and [line.rsplit(",", 1)[0] for line in progress] == [
        "risk evaluation: 12/24 attempts",
        "risk evaluation: 24/24 attempts",
    ], captured.err  # stderr is not a terminal here: one whole line per pass


def test_a_level_s_window_win_rate_pools_the_episodes_of_its_attempts(tmp_path, zero_run, monkeypatch):
    """SFL's runner weighs each attempt's success rate by its episodes: successes over episodes of all of a level's
    attempts (adjacent: each level is repeated for its attempts). Level l's first attempt here solves it l times in
    l + 1 episodes, its second times out once: l / (l + 2), where a mean of the attempts' rates would give
    l / (2 l + 2), and attempts grouped across levels other values again."""
    _, _, make = zero_run
    run_dir = make(tmp_path / "run", (4,))
    episodes = TINY_RISK["risk_episodes"]
    assert TINY_RISK["batch"] >= TINY_RISK["risk_levels"] * episodes, "one call sees every attempt in order"

    def known(rng, apply, params, carry, levels, env_params, steps, unroll):
        attempt = jnp.arange(levels.wall_map.shape[0])
        level, first = attempt // episodes, attempt % episodes == 0
        return WindowCounts(jnp.where(first, level, 0), jnp.where(first, level + 1, 1))

    monkeypatch.setattr(common.evaluate, "play_levels_restarting", known)
    common.evaluate.main(Args(run_dir=run_dir, mazes=(), **TINY_RISK))
    (risk_csv,) = (run_dir / "eval").glob("risk_00000004_*.csv")
    rates = {float(row["alpha"]): float(row["win_rate"]) for row in csv.DictReader(open(risk_csv))}
    levels = np.arange(TINY_RISK["risk_levels"])
    assert rates[100.0] == pytest.approx(np.mean(levels / (levels + 2)))
    assert rates[min(rates)] == 0.0, "the worst level (never solved) alone"


def test_a_sweep_s_risk_lines_give_each_point_its_own_seeds(tmp_path, monkeypatch, capsys):
    """A sweep's risk evaluation prints one line per point and level, each the mean over that point's seeds: point
    0's seeds win 0.0 and 0.1 of the time, point 1's 0.2 and 0.3. Fails with the points' seeds mixed up or with
    one line for the whole sweep (the mutation trial's survivor of main)."""
    config = with_flags(dr.Config(), **TINY, runs_dir=str(tmp_path), sweep=("lr=1e-4,3e-4",))
    rngs = jax.random.split(jax.random.key(config.run.seed), config.run.num_seeds)
    state = zero_state(jax.eval_shape(run_functions(config, dr.make_train, "algos/dr.py").init, rngs))
    run_dir = tmp_path / "sweep"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"script": "algos/dr.py", "config": flags_of(config)}))
    checkpoint.save(checkpoint.checkpoint_path(run_dir / "checkpoints", 4), state, 4, {})

    def known_win_rates(args, rng, module, network, params, config, levels):
        rates = np.repeat(np.arange(4.0)[:, None] / 10, args.risk_levels, axis=1)  # [points x seeds, levels]
        return rates, rates

    monkeypatch.setattr(common.evaluate, "risk_win_rates", known_win_rates)
    common.evaluate.main(Args(run_dir=run_dir, mazes=(), **TINY_RISK))
    printed = capsys.readouterr().out.splitlines()
    for alpha in RISK_ALPHAS:
        worst = f"{'worst ' + f'{alpha:g}%':>18}: win rate"
        shown = [line for line in printed if line.startswith(worst)]
        assert shown == [f"{worst} 0.050   (point 0: lr=0.0001)", f"{worst} 0.250   (point 1: lr=0.0003)"]


def test_the_authors_alphas():
    """SFL's minigrid analysis (eval_minigrid_2_analyse.py): 0.01, 0.1, then 1, 2, 5, 10, 20, 50, 100 percent."""
    assert RISK_ALPHAS == (0.01, 0.1, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)


def test_a_run_saved_with_more_devices_than_here_loads(tmp_path, zero_run):
    """config.json asks for 2 devices (and a second host); this process has one: evaluation still loads the run."""
    config, _, make = zero_run
    run_dir = make(tmp_path / "run", (4,))
    saved = flags_of(with_flags(config, num_devices=2, num_processes=2, process_id=0))
    (run_dir / "config.json").write_text(json.dumps({"script": "algos/dr.py", "config": saved}))
    assert jax.device_count() == 1
    loaded = load_run(run_dir, None)
    assert loaded.update == 4 and loaded.functions.placement.num_devices == 1


@pytest.mark.slow
def test_a_run_trained_on_two_devices_evaluates_on_one(tmp_path):
    """Trained with --num-devices 2 in a process that forces two host devices, evaluated in a plain process."""
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in TINY.items()]
    two_devices = env_with_devices(2)
    command = [sys.executable, "algos/dr.py", "--runs-dir", str(tmp_path), "--run-name", "two", "--num-devices", "2"]
    subprocess.run(command + flags, cwd=REPO_ROOT, env=two_devices, check=True, capture_output=True)
    one_device = env_with_devices(None)
    command = [sys.executable, "-m", "common.evaluate", "--run-dir", str(tmp_path / "two"), "--mazes", "SixteenRooms"]
    result = subprocess.run(
        command + ["--episodes", "2"], cwd=REPO_ROOT, env=one_device, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    (written,) = (tmp_path / "two" / "eval").glob("evaluate_00000004_*.csv")
    assert len(list(csv.DictReader(open(written)))) == 2  # one row per seed


def test_results_never_land_in_a_folder_whose_run_changed(tmp_path, zero_run, monkeypatch):
    """`--overwrite` starts a new run in the folder while the old one is being evaluated: the old run's results
    are not written into the new run's folder."""
    _, _, make = zero_run
    run_dir = make(tmp_path / "run", (4,))
    evaluate_policy = common.evaluate.evaluate_policy

    def overwritten_meanwhile(*args, **kwargs):
        saved = run_dir / "config.json"
        text = saved.read_text()
        saved.unlink()
        saved.write_text(text)  # a new run's config.json: a new file, even with the same flags
        return evaluate_policy(*args, **kwargs)

    monkeypatch.setattr(common.evaluate, "evaluate_policy", overwritten_meanwhile)
    with pytest.raises(ConfigError, match="was overwritten or deleted while its run was evaluated"):
        common.evaluate.main(Args(run_dir=run_dir, mazes=("SixteenRooms",), episodes=2))
    assert not any((run_dir / "eval").glob("*")), "nothing written into the folder"


def test_risk_results_never_land_in_a_folder_whose_run_changed(tmp_path, zero_run, monkeypatch):
    """The same for the risk evaluation's CSV: a new run in the folder while the risk levels are played, and nothing
    is written there. Fails with the check before the risk CSV dropped (the mutation trial's survivor of main)."""
    run_dir = zero_run[2](tmp_path / "run", (4,))
    play = common.evaluate.play_levels_restarting

    def overwritten_meanwhile(*args):
        saved = run_dir / "config.json"
        text = saved.read_text()
        saved.unlink()
        saved.write_text(text)
        return play(*args)

    monkeypatch.setattr(common.evaluate, "play_levels_restarting", overwritten_meanwhile)
    args = Args(run_dir=run_dir, mazes=(), **TINY_RISK)
    with pytest.raises(ConfigError, match="was overwritten or deleted while its run was evaluated"):
        common.evaluate.main(args)
    assert not any((run_dir / "eval").glob("*")), "nothing written into the folder"


def test_three_seeds_get_their_interval_and_two_do_not(tmp_path, zero_run, monkeypatch, capsys):
    """The printed policy line follows the report's: an interval from 3 seeds on. Fails with `<=` for `<` (the
    mutation trial's survivor of main)."""
    config, _, _ = zero_run
    monkeypatch.setattr(
        common.evaluate, "evaluate_policy", lambda *args: types.SimpleNamespace(returns=jnp.array([0.0, 0.5]))
    )
    for seeds, policy in ((2, "no interval: fewer than 3 seeds"), (3, "with their interval")):
        three = with_flags(config, num_seeds=seeds)
        rngs = jax.random.split(jax.random.key(three.run.seed), seeds)
        state = zero_state(jax.eval_shape(dr.make_train(three).init, rngs))
        run_dir = tmp_path / f"seeds{seeds}"
        (run_dir / "checkpoints").mkdir(parents=True)
        (run_dir / "config.json").write_text(json.dumps({"script": "algos/dr.py", "config": flags_of(three)}))
        checkpoint.save(checkpoint.checkpoint_path(run_dir / "checkpoints", 2), state, 2, flags_of(three))
        common.evaluate.main(Args(run_dir=run_dir, mazes=("SixteenRooms",), episodes=2))
        assert f"means over {seeds} seeds, {policy}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("module", "opening"),
    [
        ("common.evaluate", "Evaluate a run folder (every seed) on named held-out mazes"),
        ("common.report", "From run folders to the papers' tables and figures"),
    ],
)
def test_help_names_the_module_and_says_what_it_does(module, opening):
    result = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m {module} "), result.stdout[:200]
    assert opening in result.stdout


def test_a_read_only_run_folder_is_said_before_evaluating_and_points_to_out(tmp_path, zero_run, monkeypatch):
    """The fault trial's read-only run folder: evaluate evaluated for minutes, then died in an OSError traceback when
    it wrote. Now the writes are tried first (a read-only folder as a root user never sees one: PermissionError is
    raised where a file would be made). Mutation checked by hand: without `check_writable` the first refusal fails."""
    _, _, make = zero_run
    run_dir = make(tmp_path / "run", (4,))
    real_temporary_file = common.evaluate.tempfile.TemporaryFile
    played = []
    monkeypatch.setattr(common.evaluate, "evaluate_policy", lambda *args, **kwargs: played.append(1))

    def read_only(*args, dir=None, **kwargs):
        if Path(dir).is_relative_to(run_dir):
            raise PermissionError(13, "Permission denied")
        return real_temporary_file(*args, dir=dir, **kwargs)

    monkeypatch.setattr(common.evaluate.tempfile, "TemporaryFile", read_only)
    with pytest.raises(ConfigError, match=r"cannot write to .*eval \(Permission denied\).*give --out FILE"):
        common.evaluate.main(Args(run_dir=run_dir, mazes=("SixteenRooms",), episodes=2))
    with pytest.raises(ConfigError, match="--gif's and --risk's files, which go only into the run folder"):
        common.evaluate.main(
            Args(run_dir=run_dir, mazes=("SixteenRooms",), episodes=2, gif=True, out=tmp_path / "a.csv")
        )
    with pytest.raises(ConfigError, match="--gif's and --risk's files, which go only into the run folder"):
        common.evaluate.main(Args(run_dir=run_dir, mazes=(), **TINY_RISK, out=tmp_path / "b.csv"))
    assert played == [], "refused before evaluating"


def test_each_maze_says_it_is_under_way_before_its_result(tmp_path, zero_run, capsys):
    """common.evaluate was silent for minutes (3.5 on the quickstart with --gif): a line per maze before it plays,
    and before the GIF's episode."""
    _, _, make = zero_run
    run_dir = make(tmp_path / "run", (4,))
    common.evaluate.main(Args(run_dir=run_dir, mazes=("SixteenRooms", "Labyrinth"), episodes=2, gif=True))
    lines = capsys.readouterr().out.splitlines()
    under_way = [index for index, line in enumerate(lines) if line.startswith("evaluating ")]
    expected = ["evaluating SixteenRooms (1/2)...", "evaluating Labyrinth (2/2)..."]
    assert [lines[index] for index in under_way] == expected
    assert "SixteenRooms: solve rate" in lines[under_way[0] + 1], "the result follows its line"
    assert any("drawing seed 0's first episode on Labyrinth" in line for line in lines[under_way[1] :])
