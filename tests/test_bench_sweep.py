"""benchmarks/speed/bench_sweep.py: the commands each way runs (one --sweep command against one command per point, at
the README quickstart's sizes), the order of the ways in each repeat, the records and the table, the refusal of an
unknown method, and the timer's accounting of a child process's wall and CPU seconds. Training commands are stood in
for: the timings are never asserted, only the arithmetic on made-up ones and the timer on a child that burns known
seconds."""

import json
import math
import re
import sys
from pathlib import Path

import pytest

from benchmarks.speed import bench_sweep

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_the_commands_train_at_the_readme_quickstarts_sizes():
    """Each size flag bench_sweep gives is the README quickstart command's own value for it."""
    readme = " ".join((REPO_ROOT / "README.md").read_text().replace("\\\n", " ").split())
    quickstart = next(line for line in readme.split("```") if "--run-name quickstart " in line)
    for flag, value in bench_sweep.QUICKSTART:
        assert re.search(rf"{flag} (\S+)", quickstart).group(1) == value, flag


def stand_in_timer(argvs: list[list[str]]):
    """A stand-in for `timed`: keeps each command; a --sweep command takes 10 s (15 s of CPU), any other 6 s (8 s)."""

    def timed(argv):
        argvs.append(argv)
        return {"wall_s": 10.0, "cpu_s": 15.0} if "--sweep" in argv else {"wall_s": 6.0, "cpu_s": 8.0}

    return timed


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_each_way_runs_its_commands_alternating_first_and_the_table_divides_separate_by_sweep(
    tmp_path, monkeypatch, capsys
):
    """Two methods, two learning rates, two repeats: repeat 0 runs the sweep first, repeat 1 the separate commands
    first (per method); the sweep is one command with every rate as --sweep lr=..., the separate way one command per
    rate; every command trains the same seeds and updates into the emptied runs folder under its own run name. Each
    record (a JSON line printed and appended to results.jsonl) sums its commands' seconds: the separate way 2 x 6 s
    against the sweep's 10 s is 1.20x. Mutation checked by hand: not swapping the order in odd repeats, or the ratio
    taken sweep over separate, fails this test."""
    argvs = []
    monkeypatch.setattr(bench_sweep, "timed", stand_in_timer(argvs))
    stale = tmp_path / "runs" / "old_run" / "file"
    stale.parent.mkdir(parents=True)
    stale.touch()
    sizes = {"num_seeds": 3, "total_updates": 8, "log_interval": 4, "repeats": 2}
    bench_sweep.main(bench_sweep.Args(out=str(tmp_path), methods=("dr", "plr"), lrs=(1e-4, 3e-4), **sizes))
    assert not stale.exists()
    ways = ["sweep" if "--sweep" in argv else flag(argv, "--lr") for argv in argvs]
    methods = [Path(argv[1]).stem for argv in argvs]
    repeat_0 = ["sweep", "0.0001", "0.0003"]
    repeat_1 = ["0.0001", "0.0003", "sweep"]
    assert ways == repeat_0 * 2 + repeat_1 * 2 and methods == ["dr"] * 3 + ["plr"] * 3 + ["dr"] * 3 + ["plr"] * 3
    assert all(flag(argv, "--sweep") == "lr=0.0001,0.0003" for argv in argvs if "--sweep" in argv)
    for argv in argvs:
        assert argv[0] == sys.executable and argv[1] == str(REPO_ROOT / "algos" / f"{Path(argv[1]).stem}.py")
        assert flag(argv, "--runs-dir") == str(tmp_path / "runs") and flag(argv, "--num-seeds") == "3"
        assert flag(argv, "--total-updates") == "8" and flag(argv, "--log-interval") == "4"
        assert flag(argv, "--checkpoint-interval") == "4"
        assert flag(argv, "--eval-interval") == "0" and flag(argv, "--screenshot-interval") == "0"
        assert all(flag(argv, name) == value for name, value in bench_sweep.QUICKSTART)
    run_names = [flag(argv, "--run-name") for argv in argvs]
    assert len(set(run_names)) == len(run_names)
    stdout = capsys.readouterr().out
    printed = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    saved = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert printed == saved and len(saved) == 8
    assert [(r["method"], r["way"], r["repeat"]) for r in saved[:4]] == [
        ("dr", "sweep", 0),
        ("dr", "separate", 0),
        ("plr", "sweep", 0),
        ("plr", "separate", 0),
    ]
    separate = saved[1]
    assert (separate["commands"], separate["points"], separate["num_seeds"], separate["total_updates"]) == (2, 2, 3, 8)
    assert (separate["wall_s"], separate["cpu_s"], separate["per_command_wall_s"]) == (12.0, 16.0, [6.0, 6.0])
    assert (saved[0]["commands"], saved[0]["wall_s"], saved[0]["cpu_s"]) == (1, 10.0, 15.0)
    assert all({"device", "jax", "commit"} <= record.keys() for record in saved)
    header = "| method | repeat | points x seeds | separate wall s | sweep wall s | separate / sweep | separate CPU s |"
    assert header + " sweep CPU s |" in stdout
    for method in ("dr", "plr"):
        for repeat in (0, 1):
            assert f"| {method} | {repeat} | 2 x 3 | 12.0 | 10.0 | 1.20x | 16.0 | 15.0 |" in stdout.splitlines()


def test_an_unknown_method_is_refused_before_anything_is_removed_or_run(tmp_path, monkeypatch):
    argvs = []
    monkeypatch.setattr(bench_sweep, "timed", stand_in_timer(argvs))
    kept = tmp_path / "runs" / "kept"
    kept.mkdir(parents=True)
    with pytest.raises(SystemExit, match="error: no algos/ script for nope, nada"):
        bench_sweep.main(bench_sweep.Args(out=str(tmp_path), methods=("dr", "nope", "nada")))
    assert kept.exists() and argvs == []


CHILD = """
import json, os, sys, time
started = time.perf_counter()
if os.environ.get("WANDB_MODE") != "disabled":
    sys.exit(3)
while os.times().user < 0.2:
    pass
zeros = os.open("/dev/zero", os.O_RDONLY)
while os.times().system < 0.2:
    os.read(zeros, 1 << 20)
time.sleep(0.2)
times = os.times()
json.dump({"cpu": times.user + times.system, "wall": time.perf_counter() - started}, open(sys.argv[1], "w"))
"""


def test_the_timer_counts_a_commands_wall_and_cpu_seconds_user_and_system_with_wandb_off(tmp_path, monkeypatch):
    """A child that exits 3 unless WANDB_MODE is disabled burns 0.2 s of user and 0.2 s of system CPU and sleeps
    0.2 s, then writes what it measured of itself: the timer's CPU seconds cover the child's user and system time
    (its own process's would be near 0) and its wall seconds the child's. A failed command is one error naming its
    last line of stderr. Mutation checked by hand: counting user time only fails this test."""
    monkeypatch.setenv("WANDB_MODE", "online")
    measured = tmp_path / "child.json"
    result = bench_sweep.timed([sys.executable, "-c", CHILD, str(measured)])
    child = json.loads(measured.read_text())
    assert result["cpu_s"] >= math.floor(child["cpu"] * 10) / 10 >= 0.4
    # The child's CPU seconds include its interpreter's start-up, before its clock started, so its own wall can be
    # under 0.6 s (0.59 in one CI run); its sleep alone guarantees 0.2.
    assert result["wall_s"] >= math.floor(child["wall"] * 10) / 10 >= 0.2
    failing = "import sys; sys.stderr.write('first\\nlast words\\n'); sys.exit(3)"
    with pytest.raises(RuntimeError, match=r"^-c import sys.* exited with 3: last words$"):
        bench_sweep.timed([sys.executable, "-c", failing])
    with pytest.raises(RuntimeError, match=r"exited with 4: \(no output\)$"):
        bench_sweep.timed([sys.executable, "-c", "raise SystemExit(4)"])
