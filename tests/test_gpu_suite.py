"""benchmarks/gpu_suite.py runs end to end on the CPU with its --smoke preset: every stage writes one JSON line
per setting (device and versions included), none fails, and the tables are printed."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_smoke_suite_writes_every_stage(tmp_path):
    command = [sys.executable, "benchmarks/gpu_suite.py", "--out", str(tmp_path), "--smoke", "--methods", "dr", "accel"]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = {stage: (tmp_path / f"{stage}.jsonl").read_text().splitlines() for stage in ("methods", "seeds", "env")}
    records = {stage: [json.loads(line) for line in stage_lines] for stage, stage_lines in lines.items()}
    assert [r["setting"] for r in records["methods"]] == ["dr", "accel"]
    assert [r["setting"] for r in records["seeds"]] == ["dr x1", "dr x2", "accel x1", "accel x2"]
    assert [r["num_seeds"] for r in records["seeds"]] == [1, 2, 1, 2]
    assert [r["setting"] for r in records["env"]] == ["env 8"]
    for record in (record for stage in records.values() for record in stage):
        assert "error" not in record and record["env_steps_per_s"] > 0
        assert "device" in record and "commit" in record and "jax" in json.dumps(record)
    for stage in records:
        assert f"### {stage}" in result.stdout
    assert "| dr x2 | 4 x 8 | 2 |" in result.stdout
