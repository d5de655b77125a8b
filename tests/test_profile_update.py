"""benchmarks/speed/profile_update.py: the phase timer (compile apart, one warm-up call, the median timed call per loop
iteration, fresh keys for each call), XLA's floating-point count as the timer reads it, the dependency every phase
keeps on its outputs, the levels DR's student phases play, the replay phases of each replay method, and which phases
each method's profile runs, on which part of the method's state, and how they are printed. Phases, or their timing, are
stood in for where what they run is checked; timings are never asserted, only the arithmetic on a clock the test makes
up."""

import json
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.speed import profile_update
from common.config import with_flags
from envs.maze import reset_to_fresh_levels


def fake_clock(*readings: float):
    """A stand-in for the `time` module whose perf_counter returns `readings` in turn (and fails past the last)."""
    readings = iter(readings)
    return SimpleNamespace(perf_counter=lambda: next(readings))


def recording_body(seen: list):
    """A phase body that hands each iteration's key to the host (kept in `seen`) and adds 1 to the carry."""

    def host(key_data):
        seen.append(tuple(np.asarray(key_data).tolist()))
        return np.float32(1)

    def body(total, rng):
        return total + jax.pure_callback(host, jax.ShapeDtypeStruct((), jnp.float32), jax.random.key_data(rng))

    return body


def test_a_phase_is_compiled_apart_warmed_up_once_and_timed_per_iteration_on_fresh_keys(monkeypatch):
    """Two iterations per call, three timed calls: the clock reads 10 and 14 around the compile, then calls of 6, 2
    and 8 s, so 4 s of compile and a median 3 s per iteration. The body runs for the warm-up call's key 0 and the timed
    calls' keys 1, 2, 3, each split into the two iterations' keys. Mutation checked by hand: skipping the warm-up
    call, the mean instead of the median, or a median of whole calls, fails this test."""
    seen = []
    monkeypatch.setattr(profile_update, "time", fake_clock(10.0, 14.0, 20.0, 26.0, 30.0, 32.0, 40.0, 48.0))
    args = profile_update.Args(iterations=2, repeats=3)
    result = profile_update.time_phase("counting", recording_body(seen), jnp.zeros(()), args)
    assert (result["phase"], result["compile_s"], result["s_per_update"]) == ("counting", 4.0, 3.0)
    expected = [
        tuple(np.asarray(jax.random.key_data(key)).tolist())
        for seed in range(4)
        for key in jax.random.split(jax.random.key(seed), 2)
    ]
    assert seen == expected


def test_a_phases_floating_point_rate_is_xlas_count_over_the_seconds_of_one_iteration(monkeypatch):
    """One iteration per call (the count XLA gives for the loop is then one body's), 6e9 operations counted and a
    2 s median call: 6 GFLOP per update at 3 GFLOP/s."""
    monkeypatch.setattr(profile_update, "time", fake_clock(0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 7.0, 9.5))
    monkeypatch.setattr(profile_update, "compiled_flops", lambda compiled: 6e9)
    args = profile_update.Args(iterations=1, repeats=3)
    result = profile_update.time_phase("counted", lambda total, rng: total + 1, jnp.zeros(()), args)
    assert (result["s_per_update"], result["gflop_per_update"], result["gflop_per_s"]) == (2.0, 6.0, 3.0)


def test_a_phases_count_is_one_iterations_whatever_the_number_of_iterations():
    """XLA counts the iterations' scan body once, so a phase's operations per update are that count as it is: a
    (500 x 1000) @ (1000 x 100) matmul drawn from the key, 0.1 GFLOP and a little for the draws, at 1, 2 and 4
    iterations alike. Mutation checked by hand: dividing the count by the iterations fails this test."""

    def body(total, rng):
        left, right = jax.random.uniform(rng, (500, 1000)), jax.random.uniform(rng, (1000, 100))
        return total + jnp.sum(left @ right)

    counts = {
        iterations: profile_update.time_phase(
            "matmul", body, jnp.zeros(()), profile_update.Args(iterations=iterations, repeats=1)
        )["gflop_per_update"]
        for iterations in (1, 2, 4)
    }
    assert len(set(counts.values())) == 1 and 0.1 <= counts[1] < 0.2, counts


def test_xlas_count_is_read_from_a_list_or_a_dict_and_counts_a_multiply_add_as_two():
    """XLA's cost analysis comes as a dict or a one-element list (by JAX version); a program without the key counts
    0; an (8 x 16) @ (16 x 4) matmul is 8 x 16 x 4 multiply-adds, two operations each."""

    def analysed(analysis):
        return SimpleNamespace(cost_analysis=lambda: analysis)

    assert profile_update.compiled_flops(analysed([{"flops": 5.0}])) == 5.0
    assert profile_update.compiled_flops(analysed({"flops": 7})) == 7.0
    assert profile_update.compiled_flops(analysed({})) == 0.0
    compiled = jax.jit(jnp.matmul).lower(jnp.ones((8, 16)), jnp.ones((16, 4))).compile()
    assert profile_update.compiled_flops(compiled) == 2 * 8 * 16 * 4


def test_touch_adds_the_first_entry_of_every_leaf():
    """Every output leaf enters the carry (so XLA keeps the phase): 1 + 5 + 2 + 7, as a float32."""
    tree = {"a": jnp.array([5.0, 6.0]), "b": [jnp.array([[2, 3]], jnp.int32), jnp.array(7.0)]}
    total = profile_update.touch(jnp.float32(1), tree)
    assert total.dtype == jnp.float32 and float(total) == 15.0


@pytest.mark.parametrize("algo", ["plr", "accel"])
def test_the_replay_phases_time_the_methods_score_and_the_buffer_and_mutation_only_where_the_method_mutates(
    algo, monkeypatch
):
    """The replay phases, their timing stood in for (nothing is compiled): the level scores of the method's score
    function, the buffer's sampling and writes, and for ACCEL alone its mutation with the config's edits per level.
    Mutation checked by hand: leaving ACCEL's mutation out fails this test."""
    timed = []
    monkeypatch.setattr(profile_update, "time_phase", lambda name, body, carry, args: timed.append(name) or {})
    module = profile_update.load_algo(algo)
    config = with_flags(module.Config(), num_envs=2, num_steps=4, maze_size=5, n_walls=3, buffer_size=4)
    args = profile_update.Args(num_envs=2, num_steps=4)
    phases = profile_update.replay_phases(module, config, args, None, None, None)
    assert len(phases) == len(timed) and timed[0] == f"level scores: {config.score_function}"
    assert [name.split(":")[0] for name in timed[1:3]] == ["buffer", "buffer"]
    mutation = [name for name in timed if name.startswith("mutation")]
    assert mutation == ([f"mutation: {config.num_edits} edits per level"] if algo == "accel" else [])


TINY = {"lstm_size": 8, "maze_size": 5, "n_walls": 3, "max_steps": 8}
EXTRA = {"dr": {}, "accel": {"buffer_size": 4}, "paired": {"teacher_lstm_size": 8, "teacher_conv_filters": 4}}


def test_drs_student_phases_play_fresh_levels_made_one_per_four_steps_rounded_up_as_dr_does(monkeypatch):
    """DR's student phases, their timing stood in for: the rollout plays --num-steps steps on --num-envs envs from
    levels made up front, 2 per env for 6 steps (dr.py's one per 4 steps, rounded up), and the advantages cover every
    step of every env. Mutation checked by hand: rounding the levels per env down fails this test."""
    made = []

    def reset(rng, levels, params):
        made.append(levels.wall_map.shape)  # one env's levels, when the phase is traced
        return reset_to_fresh_levels(rng, levels, params)

    monkeypatch.setattr(profile_update, "time_phase", lambda name, body, carry, args: {"phase": name})
    monkeypatch.setattr(profile_update, "reset_to_fresh_levels", reset)
    module = profile_update.load_algo("dr")
    config = with_flags(module.Config(), num_envs=2, num_steps=6, **TINY)
    runner = jax.tree.map(lambda x: x[0], jax.jit(module.make_train(config).init)(jax.random.key(0)[None]))
    args = profile_update.Args(num_envs=2, num_steps=6)
    transitions, advantages, phases = profile_update.student_phases(module, config, args, runner.train_state, False)
    assert set(made) == {(2, 5, 5)}
    assert transitions.reward.shape == advantages.shape == (6, 2) and len(phases) == 4


def made_up_phase(name: str) -> dict:
    return {"phase": name, "s_per_update": 0.5, "compile_s": 1.25, "gflop_per_update": 2.0, "gflop_per_s": 4.0}


@pytest.mark.parametrize("algo", ["dr", "accel", "paired"])
def test_each_method_profiles_its_own_phases_on_its_first_seeds_state_and_prints_them(algo, monkeypatch, capsys):
    """With the phases stood in for (a tiny config so the method's init compiles fast): DR times a student resampling
    fresh levels; ACCEL (as PLR) a student replaying levels, then the buffer's phases on the seed's full buffer and the
    student's transitions; PAIRED the teacher, then the protagonist (student 0) replaying levels, its phases labelled
    as each student's, then the matmul reference. Every phase is one JSON line with the method and sizes, then a table
    row in the same order. Mutation checked by hand: profiling the antagonist, or DR on replayed levels, fails this
    test."""
    monkeypatch.setattr(
        profile_update, "with_flags", lambda config, **sizes: with_flags(config, **sizes, **TINY, **EXTRA[algo])
    )
    warmed, calls = [], []
    real_warm_buffers = profile_update.warm_buffers
    monkeypatch.setattr(
        profile_update,
        "warm_buffers",
        lambda runner, config: warmed.append(real_warm_buffers(runner, config)) or warmed[-1],
    )

    def student_phases(module, config, args, train_state, restart):
        calls.append(("student", train_state, restart))
        return "transitions", "advantages", [made_up_phase("levels"), made_up_phase("rollout")]

    def replay_phases(module, config, args, buffer, transitions, advantages):
        calls.append(("replay", buffer, (transitions, advantages)))
        return [made_up_phase("buffer")]

    def teacher_phases(module, config, args, teacher_state):
        calls.append(("teacher", teacher_state, None))
        return [made_up_phase("teacher")]

    monkeypatch.setattr(profile_update, "student_phases", student_phases)
    monkeypatch.setattr(profile_update, "replay_phases", replay_phases)
    monkeypatch.setattr(profile_update, "teacher_phases", teacher_phases)
    monkeypatch.setattr(profile_update, "matmul_reference", lambda args: made_up_phase("reference"))
    profile_update.main(profile_update.Args(algo=algo, num_envs=2, num_steps=4))

    (runner,) = warmed
    seed_0 = jax.tree.map(lambda x: x[0], runner)
    if algo == "paired":
        protagonist = jax.tree.map(lambda x: x[0], seed_0.students)
        assert [(kind, restart) for kind, _, restart in calls] == [("student", True), ("teacher", None)]
        same_trees(calls[0][1], protagonist)
        same_trees(calls[1][1], seed_0.teacher)
        phases = ["teacher", "each student, levels", "each student, rollout", "reference"]
    else:
        same_trees(calls[0][1], seed_0.train_state)
        if algo == "dr":
            assert [(kind, restart) for kind, _, restart in calls] == [("student", False)]
            phases = ["levels", "rollout"]
        else:
            assert [kind for kind, _, _ in calls] == ["student", "replay"] and calls[0][2] is True
            buffer, handed = calls[1][1], calls[1][2]
            same_trees(buffer, seed_0.buffer)
            assert bool(buffer.filled.all()) and handed == ("transitions", "advantages")
            phases = ["levels", "rollout", "buffer"]
    stdout = capsys.readouterr().out
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert lines == [{"algo": algo, "num_envs": 2, "num_steps": 4, **made_up_phase(phase)} for phase in phases]
    rows = [line for line in stdout.splitlines() if line.startswith("| ") and not line.startswith("| phase")]
    assert rows == [f"| {phase} | 0.5 | 1.25 | 2.0 | 4.0 |" for phase in phases]
    environment = profile_update.describe_environment()
    assert f"{algo}, 2 envs x 4 steps, {environment['device']}, commit {environment['commit']}" in stdout


def same_trees(a, b) -> None:
    assert jax.tree.structure(a) == jax.tree.structure(b)
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))
