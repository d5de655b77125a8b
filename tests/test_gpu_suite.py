"""benchmarks/speed/gpu_suite.py runs end to end on the CPU with its --smoke preset: every stage writes one JSON line
per setting (device and versions included), none fails, a setting another stage measured is reused and says so, the
command-buffer settings run in fresh processes with their XLA flags, the sweep stage counts every point's seeds, a
peer that does not import here is skipped and recorded so, and the tables are printed. The fast tests check the
bookkeeping with stand-in measurements."""

import importlib.util
import json
import subprocess
import sys
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
    with pytest.raises(SystemExit, match="no algos/ script for nope"):
        gpu_suite.main(gpu_suite.Args(out=str(tmp_path), sweep_methods=("dr", "nope")))
    with pytest.raises(SystemExit, match="has no examples/maze_dr.py"):
        gpu_suite.main(gpu_suite.Args(out=str(tmp_path), jaxued_repo=str(tmp_path)))
