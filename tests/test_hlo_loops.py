"""No host round trip inside a step, read off the compiled program: on a GPU a `while` whose trip count XLA does not
know copies its condition to the host and waits for the device at every iteration, and so does a `conditional`.
Every script's training chunk and evaluation, compiled on the CPU at tiny sizes, may hold only loops of known trip
count, and conditionals only at the level of one update (inside the chunk's loop over updates, no deeper), like the
one-seed PPO skip of the replay scripts. The programs are lowered for the `cuda` platform, so that code which picks
its form by platform (`jax.lax.platform_dependent`: the level searches stop early on a CPU) is read in the form a GPU
runs, and compiled by the CPU's XLA."""

import functools
import importlib
import re

import jax
import numpy as np
import pytest

from common.config import with_flags
from common.sweep import run_functions
from envs.levels import optimal_steps, sample_dr_level, shortest_path_length
from tests.test_cuda_lowering import SCRIPT_FLAGS, TINY

COMPUTATION = re.compile(r"^(?:ENTRY )?%(\S+) ")
CALLED = re.compile(r"(condition|body|calls|to_apply|true_computation|false_computation)=%([\w.\-]+)")
BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")


def loops_and_conditionals(hlo_text: str) -> tuple[list[str], list[tuple[str, int]]]:
    """(each `while` without a known trip count, each `conditional` with the number of loops around it) of a
    compiled module's text: computations are walked from the entry one, a loop's body and condition one level
    deeper than the loop."""
    computations, entry, current = {}, None, None
    for line in hlo_text.splitlines():
        header = COMPUTATION.match(line)
        if header and line.rstrip().endswith("{"):
            current = header.group(1)
            computations[current] = []
            entry = current if line.startswith("ENTRY") else entry
        elif current and line.startswith("  "):
            computations[current].append(line.strip())
    unknown, conditionals, depths = [], [], {}

    def visit(name: str, depth: int) -> None:
        if depths.get(name, -1) >= depth:
            return
        depths[name] = depth
        for instruction in computations.get(name, []):
            if " while(" in instruction and "known_trip_count" not in instruction:
                unknown.append(instruction[:160])
            if " conditional(" in instruction:
                conditionals.append((instruction[:160], depth))
            for kind, callee in CALLED.findall(instruction):
                visit(callee, depth + (kind in ("condition", "body")))
            for group in BRANCHES.findall(instruction):
                for callee in group.split(","):
                    visit(callee.strip().lstrip("%"), depth)

    visit(entry, 0)
    return unknown, conditionals


def gpu_program(function, *args):
    """`function` jitted in the form a GPU gets, compiled for this machine's CPU with the tests' faster compile. That
    compile leaves out XLA's MLIR fusion emitters and so expands a few ops into more loops, each of known trip count
    (accel's 2-seed chunk: 44 loops against the scripts' 15), while the loops and conditionals the program itself holds
    stay as they are: it finds what the scripts' compile would, in about half the time."""
    lowered = jax.jit(function).trace(*args).lower(lowering_platforms=("cuda",))
    return lowered.compile()


def compiled_text(function, *args) -> str:
    return gpu_program(function, *args).as_text()


def test_the_reader_finds_data_dependent_loops_and_nested_conditionals():
    def halving(x):
        return jax.lax.while_loop(lambda v: v > 1.0, lambda v: v / 2.0, x)

    def nested_cond(x):
        def body(_, v):
            return jax.lax.cond(v > 0.5, lambda u: u * 0.9, lambda u: u + 0.1, v)

        return jax.lax.fori_loop(0, 3, lambda i, v: jax.lax.fori_loop(0, 4, body, v), x)

    unknown, _ = loops_and_conditionals(compiled_text(halving, 10.0))
    assert len(unknown) == 1
    unknown, conditionals = loops_and_conditionals(compiled_text(nested_cond, 0.3))
    assert unknown == [] and [depth for _, depth in conditionals] == [2]


@pytest.mark.parametrize(("size", "walls"), [(13, 60)])
def test_the_searches_run_every_layer_on_a_gpu_and_stop_early_on_a_cpu_with_the_same_results(size, walls):
    """The searches' GPU form, a fixed number of layers, and their CPU form, which stops at the goal or when nothing
    new is reached, agree on random levels (unreachable goals and the step limit's cut among them); and each
    platform gets its form. Fails with either form everywhere, or with a CPU form that stops one layer early."""
    levels = jax.vmap(lambda rng: sample_dr_level(rng, size, size, walls))(jax.random.split(jax.random.key(3), 200))
    searches = {
        "shortest path": jax.vmap(shortest_path_length),
        "optimal steps": jax.vmap(optimal_steps),
        "optimal steps within 2 x size": jax.vmap(functools.partial(optimal_steps, limit=2 * size)),
    }
    for name, search in searches.items():
        on_cpu = jax.jit(search)(levels)
        np.testing.assert_array_equal(on_cpu, gpu_program(search, levels)(levels), err_msg=name)
        assert (on_cpu == -1).any() and (on_cpu > size).any(), name
        assert loops_and_conditionals(compiled_text(search, levels))[0] == [], name
        cpu_text = jax.jit(search).lower(levels).compile().as_text()
        assert len(loops_and_conditionals(cpu_text)[0]) == 1, name


SWEPT = ("dr", "plr", "sfl")
"""Scripts whose vmapped programs the sweep test reads (points x seeds): the 2-seed read is left to the others."""


@pytest.mark.parametrize(
    ("name", "num_seeds"),
    [(name, 1) for name in SCRIPT_FLAGS]
    + [pytest.param(name, 2, marks=pytest.mark.slow) for name in SCRIPT_FLAGS if name not in SWEPT],
)
def test_a_step_never_waits_on_the_host(name, num_seeds):
    module = importlib.import_module(f"algos.{name}")
    config = with_flags(module.Config(), **{**TINY, "num_seeds": num_seeds}, **SCRIPT_FLAGS[name])
    functions = module.make_train(config)
    runner = jax.eval_shape(functions.init, jax.random.split(jax.random.key(0), num_seeds))
    unknown, conditionals = loops_and_conditionals(compiled_text(functions.step, runner))
    assert unknown == [], f"{name}'s chunk has loops of unknown trip count: {unknown}"
    assert all(depth <= 1 for _, depth in conditionals), f"{name}: conditionals below the update: {conditionals}"
    unknown, conditionals = loops_and_conditionals(compiled_text(functions.evaluate, runner))
    assert unknown == [] and conditionals == [], f"{name}'s evaluation: {unknown} {conditionals}"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dr", "plr", "sfl"])
def test_a_sweep_step_never_waits_on_the_host(name):
    """A sweep's step vmaps the script's step over points and seeds and traces each entry's init for its optimizer
    (work XLA drops): still no loop of unknown trip count, no conditional below the update, and an evaluation with
    neither. SFL's refresh stays a conditional (vmapped over points, its predicate was batched and both branches ran
    on every chunk)."""
    module = importlib.import_module(f"algos.{name}")
    config = with_flags(
        module.Config(), **{**TINY, "num_seeds": 2}, **SCRIPT_FLAGS[name], sweep=("gamma=0.99,0.9", "lr=1e-4,3e-4")
    )
    functions = run_functions(config, module.make_train, f"algos/{name}.py")
    runner = jax.eval_shape(functions.init, jax.random.split(jax.random.key(0), 2))
    unknown, conditionals = loops_and_conditionals(compiled_text(functions.step, runner))
    assert unknown == [], f"{name}'s sweep chunk has loops of unknown trip count: {unknown}"
    assert all(depth <= 1 for _, depth in conditionals), f"{name}: conditionals below the update: {conditionals}"
    assert conditionals if name == "sfl" else True, "SFL's sweep step computes its refresh on every chunk"
    unknown, conditionals = loops_and_conditionals(compiled_text(functions.evaluate, runner))
    assert unknown == [] and conditionals == [], f"{name}'s sweep evaluation: {unknown} {conditionals}"
