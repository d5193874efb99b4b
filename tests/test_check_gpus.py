"""scripts/benchmarks/check_gpus.py on this machine, which has no GPU.

As a user runs it: `--help` describes the checks, the exit statuses and the plan; `--dry_run` prints the plan
for the GPUs asked for (one GPU's limits under 8 minutes, the multi-GPU checks only from two) and writes
nothing; a real run refuses in one line (exit status 2), naming what it needs; the Hub is off for the command.

With the device stubbed (one "GPU" that is the CPU), the one-GPU checks' own code runs for real at small sizes
(the harness's tiny shape, the shipped model on 4 sentences, bfloat16 on the CPU): PASS lines, a summary and
the JSON report. Two bounds are relaxed, which a CPU misses for reasons of its own: the translations'
agreement (its bfloat16 beam flips a close choice among 4 sentences) and ours / Marian (one round of the tiny
shape times noise). Inductor's code generation is a GPU's to show: dynamo traces the compiled step here and
the eager backend runs it (a `slow` test runs inductor). Failures, stubbed, give FAIL lines and exit status 1.
The ddp check runs on 2 CPU processes in a `slow` test: it trains, resumes and loads as on GPUs."""

import contextlib
import io
import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from benchmarks import check_gpus, harness
from benchmarks.check_gpus import Check, CheckFailed, Machine, Sizes

from .script_runner import run_code, run_script_file

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "benchmarks" / "check_gpus.py"
ONE_GPU = ["bf16_sdpa", "decoding", "train_base", "marian", "compiled_decoding"]
MULTI_GPU = ["ddp", "fsdp", "deepspeed_zero2", "deepspeed_zero3", "wmt14"]
SMALL = Sizes(
    shape="tiny", train_batch=(8, 12), steps=2, decode_batch=4, new_tokens=6, repeats=1, sentences=4
)


def planned(stdout: str) -> dict[str, int]:
    """The dry run's plan: {check: limit in seconds}, the total under "total"."""
    rows = [line.split() for line in stdout.splitlines() if line.startswith("  ")]
    return {row[0]: int(row[1]) for row in rows}


def test_help_describes_the_checks_the_exit_statuses_and_the_plan():
    result = run_script_file(SCRIPT, "--help", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    for text in (*ONE_GPU, *MULTI_GPU, "--checks", "--dry_run", "--gpus", "--output_dir", "Exit status"):
        assert text in result.stdout
    assert "The plan on 1 GPU (check, time limit)" in result.stdout
    assert "The plan on 2 or more GPUs (check, time limit)" in result.stdout


@pytest.mark.parametrize(
    ("gpus", "checks"), [(1, ONE_GPU), (2, ONE_GPU + MULTI_GPU), (4, ONE_GPU + MULTI_GPU)]
)
def test_dry_run_prints_the_plan_for_the_gpus_asked_and_writes_nothing(tmp_path, gpus, checks):
    result = run_script_file(SCRIPT, "--dry_run", "--gpus", gpus, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    plan = planned(result.stdout)
    total = plan.pop("total")
    assert list(plan) == checks
    assert total == sum(plan.values())
    if gpus == 1:
        assert total < 480  # the budget: one GPU's verdict in under 8 minutes
    assert list(tmp_path.iterdir()) == []


def test_dry_run_on_this_machine_plans_for_one_gpu_and_chosen_checks_are_kept(tmp_path):
    result = run_script_file(SCRIPT, "--dry_run", "--checks", "train_base,bf16_sdpa", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    if torch.cuda.device_count() == 0:
        assert "no CUDA GPU seen here" in result.stdout
    plan = planned(result.stdout)
    assert list(plan) == ["bf16_sdpa", "train_base", "total"]  # in the plan's order
    assert plan["total"] == check_gpus.CHECKS["bf16_sdpa"].limit + check_gpus.CHECKS["train_base"].limit


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--checks", "ddp", "--gpus", "1"], "--checks ddp: ddp need 2 or more GPUs; the plan is for 1 GPU."),
        (["--checks", "bf16,ddp"], "--checks bf16,ddp: choose among bf16_sdpa, decoding"),
        (["--gpus", "0"], "--gpus"),
    ],
)
def test_dry_run_refuses_a_plan_that_cannot_run_in_one_line(tmp_path, options, message):
    result = run_script_file(SCRIPT, "--dry_run", *options, cwd=tmp_path)
    assert result.returncode == 2 and not result.stdout and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a machine with a GPU the checks would run")
def test_check_gpus_refuses_without_a_gpu_in_one_line(tmp_path):
    result = run_script_file(SCRIPT, "--output_dir", str(tmp_path / "checks"), cwd=tmp_path)
    assert result.returncode == 2 and not result.stdout and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: check_gpus.py needs 1 or more CUDA GPUs; torch {torch.__version__} "
        f"({f'CUDA {torch.version.cuda}' if torch.version.cuda else 'a CPU-only build'}) sees 0."
    ]
    assert list(tmp_path.iterdir()) == []


def test_the_command_and_what_it_starts_never_reach_the_hub(tmp_path):
    """Offline whatever the user's environment says: for the command's own process (set before
    huggingface_hub reads it, in a fresh interpreter) and for every command it starts."""
    code = (
        "import runpy, sys\n"
        "sys.argv = [sys.argv[1], '--dry_run', '--gpus', '1']\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "from huggingface_hub import constants\n"
        "print('offline:', constants.HF_HUB_OFFLINE)\n"
    )
    result = run_code(code, SCRIPT, cwd=tmp_path, env={"HF_HUB_OFFLINE": "0"}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "offline: True"
    assert check_gpus.child_environment()["HF_HUB_OFFLINE"] == "1"


def stub_one_cpu_gpu(patch: pytest.MonkeyPatch) -> Machine:
    """A machine with one "GPU", the CPU, in bfloat16, and the checks at small sizes."""
    machine = Machine(device="cpu", precision="bf16", gpus=1, description="1 x the CPU (stubbed)")
    patch.setattr(check_gpus, "cuda_gpus", lambda: 1)
    patch.setattr(check_gpus, "gpu_machine", lambda gpus: machine)
    patch.setattr(check_gpus, "SIZES", SMALL)
    return machine


@pytest.fixture
def one_cpu_gpu(monkeypatch) -> Machine:
    return stub_one_cpu_gpu(monkeypatch)


def run_main(*argv) -> int:
    """main() as the command runs it (`run_script`: its errors, its exit status); the status."""
    try:
        check_gpus.run_script(lambda: check_gpus.main([str(arg) for arg in argv]))
    except SystemExit as exit_:
        return exit_.code
    return 0


HARNESS_COMPILED_SETTINGS = (
    harness.compiled_generation_settings
)  # the harness's own, which the fixture replaces


def eager_backend_compile() -> dict:
    """The harness's compiled-decoding settings traced by dynamo (fullgraph: a graph break fails) and run by
    the eager backend: inductor's code generation takes about a minute on these CPUs, a GPU's to show."""
    settings = HARNESS_COMPILED_SETTINGS()
    settings["compile_config"].backend = "eager"
    return settings


@pytest.fixture(scope="module")
def one_gpu_run(tmp_path_factory):
    """The one-GPU plan, every check's code run for real on the CPU at small sizes, through main()."""
    with pytest.MonkeyPatch.context() as patch:
        stub_one_cpu_gpu(patch)
        patch.setattr(harness, "compiled_generation_settings", eager_backend_compile)
        # Bounds a CPU cannot keep for reasons of its own: its bfloat16 beam flips a close choice among 4
        # sentences, and one round of the tiny shape times noise, not ours against Marian.
        patch.setattr(check_gpus, "SAME_TRANSLATIONS", 0.5)
        patch.setattr(check_gpus, "MARIAN_RATIO_FLOOR", 0.0)
        output = tmp_path_factory.mktemp("one-gpu") / "checks"
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            status = run_main("--output_dir", output)
    return status, stdout.getvalue(), output


def test_one_gpu_plan_runs_its_checks_and_passes(one_gpu_run):
    status, stdout, output = one_gpu_run
    lines = stdout.splitlines()
    assert status == 0, stdout
    assert [line.split()[:2] for line in lines[:-1]] == [["PASS", f"{name}:"] for name in ONE_GPU], stdout
    assert lines[-1].startswith("5 of 5 checks passed in ")
    assert f"on 1 x the CPU (stubbed), bf16; report {output / 'report.json'}" in lines[-1]
    assert sorted(path.name for path in output.iterdir()) == sorted([*ONE_GPU, "report.json"])


def test_one_gpu_report_holds_each_checks_figures(one_gpu_run):
    _, _, output = one_gpu_run
    report = json.loads((output / "report.json").read_text())
    assert report["machine"]["device"] == "cpu" and report["machine"]["precision"] == "bf16"
    assert report["plan"] == {name: check_gpus.CHECKS[name].limit for name in ONE_GPU}
    checks = report["checks"]
    assert list(checks) == ONE_GPU and all(check["passed"] for check in checks.values())
    assert all(0 < check["seconds"] < check["limit_s"] for check in checks.values())

    sdpa = checks["bf16_sdpa"]["figures"]
    assert sdpa["float32 sdpa"]["max"] < 1e-3 and sdpa["bfloat16 weights sdpa"]["top1"] >= 0.98
    kernels = sdpa["bfloat16 kernels"]
    assert kernels["picked"] and set(kernels["picked"]) <= set(check_gpus.SDPA_BACKENDS)
    assert list(kernels["alone"]) == list(check_gpus.SDPA_BACKENDS)
    assert kernels["alone"]["MATH"]["runs"] and kernels["alone"]["MATH"]["max"] < 0.5  # runs everywhere
    assert not kernels["alone"]["CUDNN_ATTENTION"]["runs"] and kernels["alone"]["CUDNN_ATTENTION"]["why"]

    decoding = checks["decoding"]["figures"]
    for search in ("greedy", "beam"):
        assert 2 <= decoding[f"{search} same translations"] <= 4
        assert (
            decoding[f"{search} float32 sentences_per_s"] > 0
            and decoding[f"{search} bfloat16 sentences_per_s"] > 0
        )
    translations = json.loads((output / "decoding" / "translations.json").read_text())
    assert len(translations["sources"]) == 4 and all(translations["beam bfloat16"])

    train = checks["train_base"]["figures"]
    assert train["shape"]["name"] == "tiny" and train["mixed_precision"] == "bf16"
    assert train["target_tokens_per_s"] > 0 and train["peak_memory_mib"] > 0
    assert train["loss_after"] < train["loss_before"] < 10

    marian = checks["marian"]["figures"]
    assert set(marian["ratios"]) == {"train_tok_s", "greedy_tok_s", "beam4_tok_s"}
    for task, ratio in marian["ratios"].items():
        assert ratio == pytest.approx(marian["ours"][task] / marian["marian"][task])

    compiled = checks["compiled_decoding"]["figures"]
    assert compiled["sentences"] == 4 and compiled["same translations"] == 4
    assert compiled["first_compiled_call_s"] > 0 and compiled["compiled_sentences_per_s"] > 0


def test_a_failed_check_prints_fail_and_the_run_exits_1(one_cpu_gpu, tmp_path, monkeypatch, capsys):
    """A check that finds a fault, one with a bug, and one past its time limit each print a FAIL line and
    the others go on; the report says which; exit status 1. An earlier run is replaced only when asked."""

    def passes(folder, machine, sizes):
        return "fine", {"device": machine.device, "sentences": sizes.sentences}

    def finds_a_fault(folder, machine, sizes):
        raise CheckFailed("3 of 4 translations differ", {"same": 1})

    def has_a_bug(folder, machine, sizes):
        return {}["missing"]

    def hangs(folder, machine, sizes):
        time.sleep(30)

    monkeypatch.setattr(
        check_gpus,
        "CHECKS",
        {
            "bf16_sdpa": Check("passes", 1, 10, passes),
            "decoding": Check("finds a fault", 1, 10, finds_a_fault),
            "train_base": Check("has a bug", 1, 10, has_a_bug),
            "marian": Check("hangs", 1, 1, hangs),
            "ddp": Check("needs two", 2, 10, passes),
        },
    )
    output = tmp_path / "checks"
    start = time.monotonic()
    assert run_main("--output_dir", output) == 1
    assert time.monotonic() - start < 15
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("PASS  bf16_sdpa: fine [")
    assert lines[1].startswith("FAIL  decoding: 3 of 4 translations differ [")
    assert lines[2].startswith(
        f"FAIL  train_base: KeyError: 'missing' (see {output / 'train_base' / 'traceback.txt'})"
    )
    assert lines[3].startswith("FAIL  marian: stopped at its time limit of 1 s [")
    assert lines[4].startswith("1 of 4 checks passed in ") and len(lines) == 5  # ddp is not in one GPU's plan
    report = json.loads((output / "report.json").read_text())
    assert {name: check["passed"] for name, check in report["checks"].items()} == {
        "bf16_sdpa": True,
        "decoding": False,
        "train_base": False,
        "marian": False,
    }
    assert report["checks"]["bf16_sdpa"]["figures"] == {"device": "cpu", "sentences": 4}
    assert report["checks"]["decoding"]["figures"] == {"same": 1}
    assert "KeyError" in (output / "train_base" / "traceback.txt").read_text()

    assert run_main("--output_dir", output) == 2  # an earlier run's report and folders are kept unasked
    assert "pass --overwrite" in capsys.readouterr().err
    assert run_main("--output_dir", output, "--overwrite", "--checks", "bf16_sdpa") == 0


def test_more_gpus_asked_than_seen_is_refused_in_one_line(one_cpu_gpu, tmp_path, capsys):
    assert run_main("--output_dir", tmp_path / "checks", "--gpus", "2") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "check_gpus.py needs 2 GPUs (--gpus 2);" in err[0] and err[0].endswith("sees 1.")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_compiled_decoding_with_inductor_matches_eager(tmp_path):
    """Inductor's code for the decoding step (about a minute on these CPUs), as a GPU runs it."""
    machine = Machine(device="cpu", precision="bf16")
    detail, figures = check_gpus.check_compiled_decoding(tmp_path, machine, replace(SMALL, repeats=2))
    assert figures["same translations"] == 4, detail


@pytest.mark.slow
def test_ddp_check_trains_resumes_and_loads_on_two_cpu_processes(tmp_path):
    """The ddp check's two launches on 2 CPU processes in float32 (`--use_cpu true`): the run, its resume from
    checkpoint-10 (exact on the CPU), and the folders it loads."""
    machine = Machine(device="cpu", precision="no", gpus=2, train_options=("--use_cpu", "true"))
    folder = tmp_path / "ddp"
    folder.mkdir()
    detail, figures = check_gpus.check_training("multi_gpu", folder, machine, SMALL, model={})
    assert list(figures["resumed_losses"]) == [15, 20] and figures["resumed_apart"] < 1e-4, detail
    assert (folder / "resumed" / "final" / "model.safetensors").exists()
