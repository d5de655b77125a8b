"""algos/paired.py: UED scores against plain Python, smoke runs of PAIRED, population PAIRED and the
minimax adversary, designed-level validity, invalid combinations, the teacher's initialisation as minimax's, exact
resume, evaluate any student, and each agent's update by identities of what it logs (the teacher's reward and
discount, each agent's own settings)."""

import subprocess
import sys
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import paired
from common.config import with_flags
from common.errors import ConfigError
from envs.levels import validate_level
from tests.states import assert_states_close, newest_state, run_script

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY = dict(
    num_seeds=2,
    num_envs=4,
    num_steps=24,
    max_steps=12,
    maze_size=5,
    n_walls=6,
    lstm_size=16,
    teacher_lstm_size=16,
    teacher_conv_filters=8,
    total_updates=4,
    log_interval=2,
    eval_interval=2,
    eval_mazes=("SixteenRooms",),
    eval_episodes=2,
    checkpoint_interval=2,
    screenshot_interval=0,
)
VARIANTS = {
    "relative_regret": dict(ued_score="relative_regret", num_students=2),
    "population_regret": dict(ued_score="population_regret", num_students=3),
    "neg_return": dict(ued_score="neg_return", num_students=1),
}


def tiny_config(tmp_path, **overrides) -> paired.Config:
    return with_flags(paired.Config(), **{**TINY, "runs_dir": str(tmp_path), **overrides})


def test_scores_match_plain_python():
    rng = np.random.default_rng(0)
    means, maxes = rng.uniform(0, 1, (3, 50)).astype(np.float32), rng.uniform(0, 1, (3, 50)).astype(np.float32)
    for env in range(50):
        assert paired.relative_regret(jnp.asarray(means[:2]), jnp.asarray(maxes[:2]))[env] == pytest.approx(
            max(0.0, maxes[1, env] - means[0, env])
        )
        population = max(maxes[s, env] for s in range(3)) - sum(means[s, env] for s in range(3)) / 3
        assert paired.population_regret(jnp.asarray(means), jnp.asarray(maxes))[env] == pytest.approx(
            population, abs=1e-6
        )
        assert paired.negative_return(jnp.asarray(means[:1]), jnp.asarray(maxes[:1]))[env] == pytest.approx(
            -means[0, env]
        )


def test_episode_returns_match_plain_python():
    rng = np.random.default_rng(1)
    done = rng.uniform(size=(30, 6)) < 0.15
    done[:, 5] = False  # an env with no finished episode scores 0
    reward = np.where(done, rng.uniform(0.1, 1, size=(30, 6)), 0.0).astype(np.float32)
    transitions = paired.Transition(None, None, None, None, None, jnp.asarray(reward), jnp.asarray(done))
    mean, best = paired.episode_returns(transitions)
    for env in range(6):
        finished = [reward[t, env] for t in range(30) if done[t, env]]
        assert mean[env] == pytest.approx(np.mean(finished) if finished else 0.0)
        assert best[env] == pytest.approx(max(finished) if finished else 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_variant_smoke_and_designed_levels_are_valid(variant, tmp_path):
    config = tiny_config(tmp_path, **VARIANTS[variant])
    functions = paired.make_train(config)
    runner = jax.jit(functions.init)(jax.random.split(jax.random.key(0), config.run.num_seeds))
    before = runner
    runner, metrics = jax.jit(functions.step)(runner)
    assert int(runner.update[0]) == config.run.log_interval
    for name in config.student_names:
        for key in ("return", "ppo/loss", "ppo/entropy"):
            assert np.isfinite(metrics[f"{name}/{key}"]).all(), f"{name}/{key}"
    for key in (
        "teacher/ppo/loss",
        "teacher/ppo/entropy",
        "ued/score",
        "level/walls",
        "level/solvable",
        "train/return",
    ):
        assert (
            metrics[key].shape == (config.run.num_seeds, config.run.log_interval) and np.isfinite(metrics[key]).all()
        ), key
    if variant == "relative_regret":
        assert (metrics["ued/score"] >= 0).all(), "relative regret is clipped at 0"
    if variant == "neg_return":
        assert (metrics["ued/score"] <= 0).all(), "the minimax adversary's score is a negative return"
    changed = lambda a, b: all(jax.tree.leaves(jax.tree.map(lambda x, y: bool((x != y).any()), a, b)))  # noqa: E731
    assert changed(before.teacher.params, runner.teacher.params) and changed(
        before.students.params, runner.students.params
    )
    levels, labels = jax.device_get(jax.jit(functions.levels)(runner))
    assert labels == {}
    assert levels.wall_map.shape == (config.run.num_seeds, config.ppo.num_envs, 5, 5)
    for seed in range(config.run.num_seeds):
        for env in range(config.ppo.num_envs):
            validate_level(jax.tree.map(lambda x, s=seed, e=env: x[s, e], levels))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            dict(ued_score="relative_regret", num_students=3),
            "relative_regret needs exactly 2 students, got --num-students 3",
        ),
        (dict(ued_score="population_regret", num_students=1), "population_regret needs at least 2 students"),
        (dict(ued_score="neg_return", num_students=2), "neg_return needs exactly 1 students, got --num-students 2"),
    ],
)
def test_invalid_score_student_combinations(overrides, message, tmp_path):
    with pytest.raises(ConfigError, match=message):
        tiny_config(tmp_path, **overrides)


def test_invalid_combination_is_one_line_before_compiling(tmp_path):
    flags = ["--ued-score", "neg_return", "--num-students", "2", "--runs-dir", str(tmp_path)]
    result = subprocess.run([sys.executable, "algos/paired.py", *flags], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "error: --ued-score neg_return needs exactly 1 students, got --num-students 2"
    ]
    assert not list(tmp_path.iterdir())


def test_teacher_parameter_count_matches_reference():
    config = paired.Config()
    params = jax.eval_shape(paired.make_train(config).init, jax.random.split(jax.random.key(0), 1)).teacher.params
    count = sum(np.prod(leaf.shape[1:]) for leaf in jax.tree.leaves(params))
    assert 22_000_000 < count < 23_000_000, count  # about 22M: the conv features feed the LSTM directly


@pytest.mark.parametrize("shape", [(300, 16), (64, 16), (40, 16), (8, 16)])
def test_orthogonal_by_cholesky_is_flax_orthogonal(shape):
    for seed in range(3):
        key = jax.random.key(seed)
        expected = nn.initializers.orthogonal()(key, shape)
        np.testing.assert_allclose(paired.orthogonal_by_cholesky(key, shape), expected, atol=1e-6)


def test_teacher_starts_as_minimax_initialises_it():
    """minimax's teacher (`GridWorldACTeacherModel`; its LSTM is flax's OptimizedLSTMCell): each gate's input and
    recurrent kernel orthogonal on its own, the step embedding orthogonal, and the last policy layer the constant
    0.01 with a zero bias, so the first design policy is uniform over cells."""
    config = with_flags(paired.Config(), **{**TINY, "num_seeds": 1})
    state = jax.jit(paired.make_train(config).init)(jax.random.split(jax.random.key(0), 1))
    params = jax.tree.map(lambda leaf: np.asarray(leaf[0]), state.teacher.params["params"])
    lstm = params["HoistedLSTM_0"]
    for name, kernel in (
        ("input", lstm["Dense_0"]["kernel"]),
        ("recurrent", lstm["RecurrentGates_0"]["Dense_0"]["kernel"]),
    ):
        assert kernel.shape[0] >= kernel.shape[1] // 4, name  # each gate's [in, H] part can have orthonormal columns
        for gate in np.split(kernel, 4, axis=-1):
            np.testing.assert_allclose(gate.T @ gate, np.eye(gate.shape[1]), atol=1e-5, err_msg=name)
    np.testing.assert_allclose(np.linalg.svd(params["Embed_0"]["embedding"], compute_uv=False), 1.0, atol=1e-5)
    policy = params["Dense_1"]
    assert policy["kernel"].shape[1] == config.teacher_params.num_actions
    assert (policy["kernel"] == np.float32(0.01)).all() and not policy["bias"].any()


@pytest.mark.slow
def test_resume_equals_uninterrupted_and_evaluate_any_student(tmp_path):
    straight = tiny_config(tmp_path, run_name="straight", total_updates=4)
    run_script(paired, straight)
    run_script(paired, tiny_config(tmp_path, run_name="split", total_updates=2))
    run_script(paired, tiny_config(tmp_path, run_name="split", total_updates=4, resume=True))
    assert_states_close(*(newest_state(paired, straight, tmp_path / name) for name in ("straight", "split")))
    command = [
        sys.executable,
        "-m",
        "common.evaluate",
        "--run-dir",
        str(tmp_path / "straight"),
        "--mazes",
        "SixteenRooms",
        "--episodes",
        "2",
    ]
    result = subprocess.run([*command, "--policy", "antagonist"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0 and "policy antagonist" in result.stdout, result.stderr
    bad = subprocess.run([*command, "--policy", "student5"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown --policy 'student5'" in bad.stderr


@pytest.mark.slow
def test_teacher_uses_its_own_learning_rate(tmp_path):
    config = tiny_config(tmp_path, teacher_lr=0.0, num_seeds=1)
    functions = paired.make_train(config)
    before = jax.jit(functions.init)(jax.random.split(jax.random.key(0), 1))
    after, _ = jax.jit(functions.step)(before)
    jax.tree.map(np.testing.assert_array_equal, before.teacher.params, after.teacher.params)
    moved = jax.tree.map(lambda x, y: bool((x != y).any()), before.students.params, after.students.params)
    assert all(jax.tree.leaves(moved)), "the students keep their own learning rate"


@pytest.mark.slow
def test_each_agent_learns_from_its_own_reward_and_settings(tmp_path, monkeypatch):
    """One chunk of PAIRED, checked by identities of what each agent's update logs.
    - The teacher is rewarded the UED score on its last design step only: with lambda 1 its value targets are the
      discounted score, gamma^(T-1-t) * score, whose mean over steps and envs is mean(score) * mean_t gamma^(T-1-t).
    - Each agent's loss is its policy loss + vf_coef * value loss - its own entropy coefficient * entropy.
    - The policies by name are the students at their index, `student` the protagonist, whom the held-out
      evaluation plays.
    - The students' advantages use --gamma and --gae-lambda and bootstrap from a predicted value, not 0; the
      teacher's use its own gamma and lambda.
    Fails with the score's sign flipped, put on the first step, the teacher's gamma and lambda swapped, either
    side's entropy coefficient given to the other, the students' bootstrap zeroed or another student evaluated (the
    mutation trial's survivors of update)."""
    calls, student_last_values = [], []

    def recording(transitions, last_value, gamma, gae_lambda):
        calls.append((gamma, gae_lambda))
        if gamma == config.ppo.gamma:
            jax.debug.callback(lambda value: student_last_values.append(np.asarray(value)), last_value)
        return compute_gae(transitions, last_value, gamma, gae_lambda)

    compute_gae = paired.compute_gae
    monkeypatch.setattr(paired, "compute_gae", recording)
    evaluated = []
    heldout_evaluator = paired.heldout_evaluator

    def recording_evaluator(apply, params_of, *args):
        evaluated.append(params_of)
        return heldout_evaluator(apply, params_of, *args)

    monkeypatch.setattr(paired, "heldout_evaluator", recording_evaluator)
    gamma, entropy_coefficients = 0.5, {"protagonist": 0.2, "antagonist": 0.2, "teacher": 0.01}
    config = tiny_config(tmp_path, teacher_gamma=gamma, teacher_gae_lambda=1.0, ent_coef=0.2, teacher_ent_coef=0.01)
    functions = paired.make_train(config)
    runner, metrics = jax.jit(functions.step)(
        jax.jit(functions.init)(jax.random.split(jax.random.key(0), config.run.num_seeds))
    )
    metrics = jax.device_get(metrics)
    assert sorted(set(calls)) == sorted({(config.ppo.gamma, config.ppo.gae_lambda), (gamma, 1.0)})
    assert student_last_values and all(np.abs(value).max() > 0 for value in student_last_values)
    steps = config.teacher_params.episode_steps
    discount = np.mean([gamma ** (steps - 1 - t) for t in range(steps)])
    assert np.abs(metrics["ued/score"]).max() > 0.01, "the levels are scored"
    np.testing.assert_allclose(
        metrics["teacher/ppo/mean_target"], metrics["ued/score"] * discount, rtol=1e-4, atol=1e-6
    )
    for agent, ent_coef in entropy_coefficients.items():
        logged = {key: metrics[f"{agent}/ppo/{key}"] for key in ("loss", "policy_loss", "value_loss", "entropy")}
        expected = logged["policy_loss"] + config.ppo.vf_coef * logged["value_loss"] - ent_coef * logged["entropy"]
        np.testing.assert_allclose(logged["loss"], expected, rtol=1e-4, atol=1e-6, err_msg=agent)
    for name, index in (("protagonist", 0), ("antagonist", 1), ("student", 0)):
        chosen = functions.policies[name](runner)
        jax.tree.map(lambda x, y, i=index: np.testing.assert_array_equal(x, y[:, i]), chosen, runner.students.params)
    seed_runner = jax.tree.map(lambda x: x[1], runner)
    (params_of,) = evaluated
    jax.tree.map(
        lambda x, y: np.testing.assert_array_equal(x, y[0]), params_of(seed_runner), seed_runner.students.params
    )
