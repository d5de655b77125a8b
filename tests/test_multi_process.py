"""Two processes joined over localhost train like one process with two devices. In a file of its own, apart from
tests/test_devices.py's four-device suite, so the two slowest device tests can run on different pytest workers."""

import socket
import subprocess
import sys

import pytest

from algos import dr
from common.config import with_flags
from tests.states import assert_states_close, newest_state
from tests.test_devices import REPO_ROOT, env_with_devices

TINY_FLAGS = [
    *("--num-seeds 2 --num-envs 4 --num-steps 16 --lstm-size 16 --maze-size 7 --n-walls 10 --max-steps 12".split()),
    *("--total-updates 4 --log-interval 2 --eval-interval 2 --eval-mazes SixteenRooms --eval-episodes 2".split()),
    *("--checkpoint-interval 2 --screenshot-interval 2".split()),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_two_processes_on_localhost_agree_with_one(tmp_path):
    script = [sys.executable, "algos/dr.py", *TINY_FLAGS, "--runs-dir", str(tmp_path)]
    address = f"localhost:{free_port()}"
    processes = [
        subprocess.Popen(
            [*script, "--run-name", "two", "--coordinator-address", address, "--num-processes", "2"]
            + ["--process-id", str(index)],
            cwd=REPO_ROOT,
            stderr=subprocess.PIPE,
            text=True,
            env=env_with_devices(None),
        )
        for index in range(2)
    ]
    outputs = [process.communicate(timeout=600)[1] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs
    assert "reached --total-updates 4" in outputs[0]
    assert "update 4/4" not in outputs[1], "only process 0 logs"
    one = subprocess.run(
        [*script, "--run-name", "one", "--num-devices", "2"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=env_with_devices(2),
    )
    assert one.returncode == 0, one.stderr
    config = with_flags(dr.Config(), num_seeds=2, num_envs=4, lstm_size=16, maze_size=7, n_walls=10)
    two, single = (newest_state(dr, config, tmp_path / name) for name in ("two", "one"))
    assert_states_close(two, single, rtol=1e-5, atol=1e-6)
    assert (tmp_path / "two" / "logs.csv").read_text().count("\n") == 1 + 2 * 2, "one row per seed per log step"
