"""scripts/benchmarks/check_gpus.py on this machine, which has no GPU: all that can be tested here is that it
refuses in one line naming what it needs (exit status 2, nothing written) and that `--help` describes the
checks. The checks themselves (bf16 and SDPA, DDP, FSDP2, the WMT14 recipe) need two CUDA GPUs and run only
there."""

from pathlib import Path

import pytest
import torch

from .script_runner import run_script_file

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "benchmarks" / "check_gpus.py"


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="on a machine with two GPUs the checks would run")
def test_check_gpus_refuses_without_two_gpus_in_one_line(tmp_path):
    result = run_script_file(SCRIPT, "--output_dir", str(tmp_path / "checks"), cwd=tmp_path)
    assert result.returncode == 2 and not result.stdout and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: check_gpus.py needs 2 or more CUDA GPUs; torch {torch.__version__} "
        f"({f'CUDA {torch.version.cuda}' if torch.version.cuda else 'a CPU-only build'}) "
        f"sees {torch.cuda.device_count()}."
    ]
    assert list(tmp_path.iterdir()) == []


def test_check_gpus_help_names_the_checks():
    result = run_script_file(SCRIPT, "--help", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    for check in ("bf16_sdpa", "ddp", "fsdp", "wmt14", "--checks", "--output_dir", "Exit status"):
        assert check in result.stdout
