"""benchmarks/speed/gpu_suite.py runs end to end on the CPU with its --smoke preset: every stage writes one JSON line
per setting (device and versions included), none fails, a setting another stage measured is reused and says so, the
command-buffer settings run in fresh processes with their XLA flags, the sweep stage counts every point's seeds, a
peer that does not import here is skipped and recorded so, and the tables are printed. The fast tests check, with
stand-in measurements and workers, the bookkeeping, what each stage hands its benchmark or worker process (sizes,
overrides, XLA flags, peer commands), the smoke preset's sizes, the header and the tables: the smoke run at tiny sizes
cannot tell a size left at a benchmark's default, and no peer imports on the CPU."""

import importlib.util
import json
import subprocess
import sys
import time
from dataclasses import fields, replace
from pathlib import Path

import pytest

from benchmarks.speed import gpu_suite
from common.devices import CPU_UNROLL

REPO_ROOT = Path(__file__).resolve().parents[1]

STAGES = ("methods", "seeds", "env", "unroll", "command_buffers", "sweep", "peers")
PEER_GROUPS = {"JaxUED env": "jaxued", "NAVIX env": "navix", "XLand-MiniGrid env": "xminigrid"}


@pytest.mark.slow
def test_smoke_suite_writes_every_stage(tmp_path):
    command = [sys.executable, "benchmarks/speed/gpu_suite.py", "--out", str(tmp_path), "--smoke"]
    command += ["--methods", "dr", "accel", "--sweep-methods", "dr"]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    records = {
        stage: [json.loads(line) for line in (tmp_path / f"{stage}.jsonl").read_text().splitlines()] for stage in STAGES
    }
    assert [r["setting"] for r in records["methods"]] == ["dr", "accel"]
    assert [r["setting"] for r in records["seeds"]] == ["dr x1", "dr x2"]
    assert [r["num_seeds"] for r in records["seeds"]] == [1, 2]
    assert records["seeds"][0]["same_as"] == "methods dr" and "same_as" not in records["seeds"][1]
    assert [r["setting"] for r in records["env"]] == ["env 8", "env 8, 4 levels per env"]
    assert [r["setting"] for r in records["unroll"]] == ["dr unroll 1", "dr unroll 2"]
    assert [r["unroll"] for r in records["unroll"]] == [1, 2] and records["unroll"][1]["config"]["unroll"] == 2
    assert ["same_as" in r for r in records["unroll"]] == [CPU_UNROLL == 1, CPU_UNROLL == 2]
    cells = [r["setting"] for r in records["command_buffers"]]
    assert cells == ["dr default", "dr while", "dr while+unroll_loops"]
    flags = [r["xla_flags"] for r in records["command_buffers"]]
    assert "command_buffer" not in flags[0]
    assert "--xla_gpu_enable_command_buffer=+WHILE" in flags[1] and "unroll_loops" not in flags[1]
    assert "--xla_gpu_enable_command_buffer=+WHILE --xla_gpu_command_buffer_unroll_loops=true" in flags[2]
    assert all(r["config"]["unroll"] == 1 and "same_as" not in r for r in records["command_buffers"])
    assert [r["setting"] for r in records["sweep"]] == ["dr x2", "dr sweep 2 points x 1 seeds"]
    assert records["sweep"][0]["same_as"] == "seeds dr x2"
    swept = records["sweep"][1]
    assert swept["points"] == 2 and swept["num_seeds"] == 1 and swept["sweep"] == ["lr=0.0001,0.001"]
    assert swept["config"]["sweep"] == ["lr=0.0001,0.001"]
    assert swept["env_steps_per_s"] * swept["steady_s_per_update"] == pytest.approx(2 * 4 * 8, rel=0.05)
    assert "| dr sweep 2 points x 1 seeds | 4 x 8 | 2 x 1 |" in result.stdout
    measured = [record for stage in records.values() for record in stage if "skipped" not in record]
    for record in measured:
        assert "error" not in record and record["env_steps_per_s"] > 0
        assert "device" in record and "commit" in record and "jax" in json.dumps(record)
    skipped = {r["setting"]: r["skipped"] for r in records["peers"] if "skipped" in r}
    for group, package in PEER_GROUPS.items():
        if importlib.util.find_spec(package) is None:
            assert f"No module named '{package}'" in skipped[group]
            assert f"peers {group}: skipped: {skipped[group]}" in result.stderr
            assert f"| {group} | skipped: {skipped[group]} |" in result.stdout
    assert "JaxUED scripts" in skipped  # no --jaxued-repo given
    for stage in STAGES:
        assert f"### {stage}" in result.stdout
    assert "| dr x2 | 4 x 8 | 2 |" in result.stdout
    assert "| peer | ours | envs x steps | peer env steps/s | ours env steps/s | ours / theirs |" in result.stdout


def stand_in(label: str, rate: int, key=None, calls=None, **settings) -> gpu_suite.Setting:
    def measure():
        if calls is not None:
            calls.append(label)
        return {"num_envs": 8, "num_steps": 4, "compile_s": 1.0, "steady_s": 0.5, "env_steps_per_s": rate}

    return gpu_suite.Setting(label, measure, key=key, **settings)


def failing(label: str) -> gpu_suite.Setting:
    def measure():
        raise MemoryError("out of memory")

    return gpu_suite.Setting(label, measure)


def test_a_setting_measured_earlier_in_the_run_is_reused_and_a_failure_or_skip_is_recorded(tmp_path):
    calls, measured = [], {}
    first = gpu_suite.run_stage("env", [stand_in("env 8", 64, key=("env", 8), calls=calls)], tmp_path, measured)
    later = [
        failing("ours big"),
        stand_in("ours 8", 99, key=("env", 8), calls=calls),
        gpu_suite.Setting("NAVIX env", skipped="navix does not import"),
    ]
    results = gpu_suite.run_stage("peers", later, tmp_path, measured)
    assert calls == ["env 8"]
    assert results[0]["error"] == "MemoryError: out of memory"
    assert results[1]["env_steps_per_s"] == 64 and results[1]["same_as"] == "env env 8"
    assert results[1]["setting"] == "ours 8" and first[0]["setting"] == "env 8"
    assert {key: value for key, value in results[2].items() if key != "wall_s"} == {
        "stage": "peers",
        "setting": "NAVIX env",
        "skipped": "navix does not import",
    }
    lines = [json.loads(line) for line in (tmp_path / "peers.jsonl").read_text().splitlines()]
    assert [line["setting"] for line in lines] == ["ours big", "ours 8", "NAVIX env"]


def test_side_by_side_divides_ours_by_the_peers_env_steps_per_second(tmp_path):
    settings = [
        stand_in("ours empty 8", 300),
        stand_in("NAVIX 8", 100, versus="ours empty 8"),
        failing("JaxUED dr"),
        gpu_suite.Setting("XLand-MiniGrid env", skipped="xminigrid does not import"),
    ]
    settings[2] = gpu_suite.Setting("JaxUED dr", settings[2].measure, versus="ours empty 8")
    table = gpu_suite.side_by_side(gpu_suite.run_stage("peers", settings, tmp_path, {}))
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    assert rows[0][:6] == ["NAVIX 8", "ours empty 8", "8 x 4", "100", "300", "3.00x"]
    assert rows[1][:3] == ["JaxUED dr", "ours empty 8", "MemoryError: out of memory"]
    assert rows[2][:2] == ["XLand-MiniGrid env", "skipped: xminigrid does not import"]


def test_unknown_methods_and_a_checkout_without_examples_are_one_line_errors(tmp_path):
    """No stages, so that a refusal that does not come ends the call at once instead of running the paper suite."""
    with pytest.raises(SystemExit, match="no algos/ script for nope"):
        gpu_suite.main(gpu_suite.Args(out=str(tmp_path), stages=(), sweep_methods=("dr", "nope")))
    with pytest.raises(SystemExit, match="has no examples/maze_dr.py"):
        gpu_suite.main(gpu_suite.Args(out=str(tmp_path), stages=(), jaxued_repo=str(tmp_path)))


def largest(value) -> int:
    """A Sizes field's largest size: the largest of a tuple, the script's own 32 envs for num_envs=None."""
    if value is None:
        return 32
    return max(value) if isinstance(value, tuple) else value


def test_the_smoke_preset_is_smaller_than_the_paper_in_every_size_and_the_header_names_the_machine(
    tmp_path, monkeypatch, capsys
):
    """Every numeric size of SMOKE is below PAPER's (else a CPU smoke run costs GPU minutes), `--smoke` hands SMOKE
    to every stage and its absence PAPER, and the suite's first line and each stage's heading name the device, the
    package versions and the commit."""
    for field in fields(gpu_suite.Sizes):
        smoke, paper = getattr(gpu_suite.SMOKE, field.name), getattr(gpu_suite.PAPER, field.name)
        if field.name not in ("jaxued_flags", "overrides"):
            assert largest(smoke) < largest(paper), field.name
    given = []

    def one_stand_in(stage, sizes, args):
        given.append(sizes)
        return [stand_in(f"{stage} stand-in", 64)]

    monkeypatch.setattr(gpu_suite, "settings", one_stand_in)
    gpu_suite.main(gpu_suite.Args(out=str(tmp_path), stages=("env", "seeds"), smoke=True))
    gpu_suite.main(gpu_suite.Args(out=str(tmp_path), stages=("env",)))
    assert given == [gpu_suite.SMOKE, gpu_suite.SMOKE, gpu_suite.PAPER]
    printed = capsys.readouterr().out
    header = json.loads(printed.splitlines()[0])
    environment = gpu_suite.describe_environment()
    assert header == {"suite": "gpu", "smoke": True, **environment}
    assert {"device", "jax", "jaxlib", "commit"} <= set(header)
    assert f"### seeds ({environment['device']})" in printed


def test_a_method_is_measured_at_the_stages_sizes_with_only_the_overrides_its_config_has():
    """bench_algos gets the sizes' steps, updates per call, repeats and unroll (sizes unlike bench_algos' defaults,
    so a size left out shows), and of the overrides exactly those naming a field of the script's nested Config: DR
    takes the maze and LSTM sizes but no teacher's, PAIRED the teacher's too."""
    sizes = replace(gpu_suite.SMOKE, num_steps=16, updates_per_call=6, repeats=5)
    args = gpu_suite.algo_args(sizes, "dr", unroll=4)
    assert (args.algos, args.num_steps, args.updates_per_call, args.repeats) == (("dr",), 16, 6, 5)
    student = ("lstm_size=8", "maze_size=5", "n_walls=3", "max_steps=8")
    assert set(student) <= set(args.set) and args.set[-1] == "unroll=4"
    assert not any(item.startswith("teacher_") for item in args.set)
    assert {"teacher_lstm_size=8", "teacher_conv_filters=4"} <= set(gpu_suite.known_overrides(sizes, "paired"))


def test_env_settings_measure_at_the_stages_steps_repeats_and_levels_per_env(monkeypatch):
    """Each env setting hands bench_env its own envs, the stage's steps and repeats, and dr.py's levels per env
    (None) or the random policy's RANDOM_POLICY_LEVELS, as its label says."""
    handed = []
    monkeypatch.setattr(gpu_suite.bench_env, "measure", lambda args, num_envs: handed.append((args, num_envs)) or {})
    sizes = replace(gpu_suite.SMOKE, env_counts=(8, 16), env_steps=12, repeats=2)
    settings = gpu_suite.settings("env", sizes, gpu_suite.Args(out="unused"))
    for setting in settings:
        setting.measure()
    levels = [None, gpu_suite.RANDOM_POLICY_LEVELS] * 2
    assert [(args.num_envs, count) for args, count in handed] == [((8,), 8), ((8,), 8), ((16,), 16), ((16,), 16)]
    assert [args.levels_per_env for args, _ in handed] == levels
    assert all((args.num_steps, args.repeats, args.size, args.n_walls) == (12, 2, 5, 3) for args, _ in handed)
    assert [setting.label for setting in settings][:2] == ["env 8", "env 8, 4 levels per env"]


def test_command_buffer_settings_run_bench_algos_in_a_fresh_process_with_their_xla_flags(monkeypatch):
    """Every method of the stage runs bench_algos.py in a worker whose environment adds the setting's XLA flags to
    the XLA_FLAGS already set, at unroll COMMAND_BUFFER_UNROLL whatever the backend's default, with the stage's
    envs, steps, updates per call and repeats."""
    monkeypatch.setenv("XLA_FLAGS", "--xla_already_set=1")
    workers = []
    monkeypatch.setattr(gpu_suite, "run_worker", lambda command, env=None: workers.append((command, env)) or {})
    args = gpu_suite.Args(out="unused", sweep_methods=("dr", "accel"))
    settings = gpu_suite.settings("command_buffers", gpu_suite.SMOKE, args)
    results = [setting.measure() for setting in settings]
    assert [setting.label for setting in settings] == [
        f"{name} {setting}" for name in ("dr", "accel") for setting in gpu_suite.COMMAND_BUFFERS
    ]
    for (command, env), result, flags in zip(
        workers, results, list(gpu_suite.COMMAND_BUFFERS.values()) * 2, strict=True
    ):
        assert env["XLA_FLAGS"] == " ".join(part for part in ("--xla_already_set=1", flags) if part)
        assert result == {"unroll": 1, "xla_flags": env["XLA_FLAGS"]}
        assert command[0] == gpu_suite.bench_algos.__file__ and command[-1] == "unroll=1"
        sizes = dict(zip(command[3:11:2], command[4:11:2], strict=True))
        assert sizes == {"--num-envs": "4", "--num-steps": "8", "--updates-per-call": "2", "--repeats": "1"}
    assert [command[2] for command, _ in workers] == ["dr"] * 3 + ["accel"] * 3


def test_each_peer_runs_its_own_worker_beside_the_amaze_setting_it_is_compared_with(monkeypatch):
    """With every peer importable: each peer setting's worker command (wrapper, walls, steps, method) and the AMaze
    setting it names, each AMaze setting listed once before its first peer, our side of each JaxUED script the same
    method at one seed; without --jaxued-repo the scripts are one skipped setting."""
    monkeypatch.setattr(gpu_suite, "import_problem", lambda package: None)
    monkeypatch.setattr(gpu_suite, "run_worker", lambda command, env=None: {"command": command})
    settings = gpu_suite.peer_settings(gpu_suite.SMOKE, gpu_suite.Args(out="unused", jaxued_repo="/x/jaxued"))
    assert [(setting.label, setting.versus) for setting in settings] == [
        ("ours resample 8", None),
        ("JaxUED resample 8", "ours resample 8"),
        ("ours restart 8", None),
        ("JaxUED restart 8", "ours restart 8"),
        ("ours empty 8", None),
        ("NAVIX 8", "ours empty 8"),
        ("XLand-MiniGrid 8", "ours empty 8"),
        *[
            (f"{who} {method}", None if who == "ours" else f"ours {method}")
            for method in ("dr", "plr", "accel")
            for who in ("ours", "JaxUED")
        ],
    ]
    commands = {setting.label: " ".join(setting.measure()["command"]) for setting in settings if setting.versus}
    steps = "--num-steps 8 --repeats 1"
    for wrapper in ("resample", "restart"):
        assert commands[f"JaxUED {wrapper} 8"].endswith(f"--num-envs 8 {steps} --wrapper {wrapper} --n-walls 60")
    for package, name in (("navix", "NAVIX"), ("xminigrid", "XLand-MiniGrid")):
        assert commands[f"{name} 8"].endswith(f"--peer {package} --num-envs 8 {steps}")
    for method in ("dr", "plr", "accel"):
        assert f"--repo /x/jaxued --method {method} --updates-per-call 2 --repeats 1" in commands[f"JaxUED {method}"]
        ours = next(setting for setting in settings if setting.label == f"ours {method}")
        assert ours.key[:3] == ("algo", method, 1)
    without_repo = gpu_suite.peer_settings(gpu_suite.SMOKE, gpu_suite.Args(out="unused"))
    assert without_repo[-1].label == "JaxUED scripts" and "no --jaxued-repo" in without_repo[-1].skipped


def test_a_failed_setting_is_measured_again_and_wall_s_covers_the_measurement(tmp_path):
    """A setting that failed is not reused for a later setting of the same program (that one is measured), and each
    line's wall_s includes its measurement (a stand-in that takes 0.3 s)."""
    calls = []

    def slow_then_failing():
        calls.append("first")
        time.sleep(0.3)
        raise MemoryError("out of memory")

    first = gpu_suite.Setting("dr x64", slow_then_failing, key=("algo", "dr", 64))
    again = stand_in("dr sweep", 64, key=("algo", "dr", 64), calls=calls)
    results = gpu_suite.run_stage("sweep", [first, again], tmp_path, {})
    assert calls == ["first", "dr sweep"]
    assert "same_as" not in results[1] and results[1]["env_steps_per_s"] == 64
    assert results[0]["wall_s"] >= 0.3


def test_a_stage_table_shows_compile_and_steady_seconds_apart_and_a_sweeps_points_by_seeds():
    """One row per record, from the record's own fields: compile seconds and seconds per update (per scan for the
    env) in their own columns, a sweep's seeds as points x seeds, a failure by its error."""
    common = {"num_envs": 4, "num_steps": 8, "unroll": 1, "compile_s": 9.5, "env_steps_per_s": 1280}
    records = [
        {"setting": "dr x2", **common, "num_seeds": 2, "steady_s_per_update": 0.25},
        {"setting": "dr sweep", **common, "num_seeds": 1, "points": 2, "steady_s_per_update": 0.5},
        {"setting": "env 8", **common, "steady_s": 0.125},
        {"setting": "dr x64", "error": "MemoryError: out of memory"},
    ]
    assert gpu_suite.table(records).splitlines()[2:] == [
        "| dr x2 | 4 x 8 | 2 | 1 | 9.5 | 0.25 | 1,280 |",
        "| dr sweep | 4 x 8 | 2 x 1 | 1 | 9.5 | 0.5 | 1,280 |",
        "| env 8 | 4 x 8 | 1 | 1 | 9.5 | 0.125 | 1,280 |",
        "| dr x64 | - | - | - | - | - | MemoryError: out of memory |",
    ]
