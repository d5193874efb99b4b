"""The shipped accelerate configs (scripts/accelerate_configs/) fix neither a process count nor a precision,
so that one file serves one GPU, eight, and several machines: the count is given at launch (`--num_processes`,
the total over the machines), and the precision is the training options' (bf16, fp16 or float32 by what the
device supports). Each config is launched here on this machine's CPUs, over gloo, with 1 and with 2 processes,
and what the launched processes see is checked: the world size asked for, a process group that gathers every
rank, and no precision imposed by the launch. A launch costs 3 to 5 s (more under DeepSpeed, whose precision
check imports transformers), and none builds DeepSpeed's C++ op: that happens only when DeepSpeed sets up its
own communication, which a process on the CPU leaves to torch (`PartialState(cpu=True)`).
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "scripts" / "accelerate_configs"
SHIPPED = sorted(path.stem for path in CONFIGS.glob("*.yaml"))
PREFIX = "LAUNCHED "

# What each launched process reports: its rank and world size as the launcher set them, what accelerate made
# of them, the ranks its process group gathers, and the precision the launch handed it. On the CPU, as the
# Trainer's --use_cpu has it. The processes share one stdout: a report is one write, which a pipe keeps whole.
# The group is taken down before the process exits, or gloo may abort it then.
WORKER = f"""\
import json
import os

from accelerate import PartialState
from accelerate.utils import gather_object

state = PartialState(cpu=True)
report = {{
    "rank": int(os.environ["RANK"]),
    "world_size": int(os.environ["WORLD_SIZE"]),
    "num_processes": state.num_processes,
    "gathered": gather_object([state.process_index]),
    "mixed_precision": os.environ["ACCELERATE_MIXED_PRECISION"],
}}
os.write(1, ({PREFIX!r} + json.dumps(report) + "\\n").encode())
state.destroy_process_group()
"""

# The training options parsed as scripts/train.py parses them, once for each list of options in argv[1], and
# what the Trainer checks before DeepSpeed starts (`propagate_args_to_deepspeed`): DeepSpeed's bf16 and fp16,
# as the training arguments set them up, against the training arguments' own.
DEEPSPEED_WORKER = f"""\
import json
import sys

from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

from hf_vanilla_transformer.cli import make_parser
from hf_vanilla_transformer.training import PaperSeq2SeqTrainingArguments

for options in json.loads(sys.argv[1]):
    (args,) = make_parser(PaperSeq2SeqTrainingArguments).parse_args_into_dataclasses(options)
    deepspeed = args.deepspeed_plugin.deepspeed_config
    check = HfTrainerDeepSpeedConfig(deepspeed)
    check.trainer_config_process(args)
    report = {{
        "bf16": args.bf16,
        "fp16": args.fp16,
        "deepspeed_bf16": deepspeed["bf16"]["enabled"],
        "deepspeed_fp16": deepspeed["fp16"]["enabled"],
        "mismatches": check.mismatches,
    }}
    print({PREFIX!r} + json.dumps(report), flush=True)
"""


@pytest.fixture(scope="module")
def workers(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("workers")
    (folder / "world.py").write_text(WORKER)
    (folder / "deepspeed_precision.py").write_text(DEEPSPEED_WORKER)
    return {"world": folder / "world.py", "deepspeed": folder / "deepspeed_precision.py"}


def launcher(config: str, *options: str) -> list[str]:
    """`accelerate launch --config_file scripts/accelerate_configs/<config>.yaml OPTIONS`, nothing else: the
    count and the rest are the test's (tests/test_scale_out.py's helper fixes 2 processes and float32)."""
    config_file = str(CONFIGS / f"{config}.yaml")
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", config_file, *options]


def run(command: list[str]) -> subprocess.CompletedProcess:
    """One thread a process: the processes share this machine's cores."""
    return subprocess.run(
        command,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def reports(*outputs: str) -> list[dict]:
    lines = [line for output in outputs for line in output.splitlines() if line.startswith(PREFIX)]
    return [json.loads(line.removeprefix(PREFIX)) for line in lines]


def test_the_five_configs_are_shipped():
    assert {"multi_gpu", "multi_node", "fsdp", "deepspeed_zero2", "deepspeed_zero3"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_no_config_fixes_a_process_count_or_a_precision(name):
    """Without them accelerate reads the count as -1, "pass it at launch" (ClusterConfig's default), and the
    precision as none, which the launch hands on as "no": the training options choose."""
    from accelerate.commands.config.config_args import ClusterConfig

    path = CONFIGS / f"{name}.yaml"
    assert not {"num_processes", "mixed_precision"} & set(yaml.safe_load(path.read_text()))
    config = ClusterConfig.from_yaml_file(path)
    assert config.num_processes == -1 and config.mixed_precision is None
    assert "--num_processes" in path.read_text()  # its comment says how the count is given


def test_a_launch_without_a_count_is_refused_before_any_process_starts(workers):
    """What the configs' comments quote: accelerate asks for the count."""
    result = run(launcher("multi_gpu", str(workers["world"])))
    assert result.returncode != 0 and not reports(result.stdout)
    assert "You need to manually pass in `--num_processes` using this config yaml." in result.stderr


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("name", SHIPPED)
def test_each_config_launches_the_processes_asked_for(workers, name, processes):
    """One process per GPU on a GPU machine; here CPU processes, which the configs launch the same way.
    multi_node.yaml runs as one machine (`--num_machines 1`)."""
    one_machine = ["--num_machines", "1"] if name == "multi_node" else []
    result = run(launcher(name, "--num_processes", str(processes), *one_machine, "--main_process_port", "0",
                          str(workers["world"])))  # fmt: skip
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    seen = sorted(reports(result.stdout), key=lambda report: report["rank"])
    assert [report["rank"] for report in seen] == list(range(processes))
    for report in seen:
        assert report["world_size"] == report["num_processes"] == processes
        assert report["gathered"] == list(range(processes))
        assert report["mixed_precision"] == "no"


def test_multi_node_counts_the_processes_over_all_machines(workers):
    """Two launchers on this host as machine ranks 0 and 1, `--num_processes 2` in all: one process each,
    both in one world of 2, meeting on the loopback address through the static rendezvous."""
    with socket.socket() as probe:  # a free port for the rendezvous, which both launchers must be told
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    options = ["--num_processes", "2", "--main_process_ip", "127.0.0.1", "--main_process_port", port]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    machines = [
        subprocess.Popen(
            launcher("multi_node", *options, "--machine_rank", str(rank), str(workers["world"])),
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        for rank in (0, 1)
    ]
    outputs = []
    for machine in machines:
        stdout, stderr = machine.communicate(timeout=300)
        assert machine.returncode == 0, f"{stdout[-2000:]}\n{stderr[-4000:]}"
        outputs.append(stdout)
    assert [[report["rank"] for report in reports(output)] for output in outputs] == [[0], [1]]
    assert all(report["world_size"] == 2 and report["gathered"] == [0, 1] for report in reports(*outputs))


def test_deepspeed_takes_the_training_options_precision(workers, tmp_path):
    """DeepSpeed's bf16 is what the training options say, with no --bf16 on the command line to match a
    config: the training arguments set up DeepSpeed from their own precision, and the Trainer's check finds
    them equal, in float32 (this CPU's default) as in bf16 (asked for). The ZeRO stage plays no part in it:
    deepspeed_zero2.yaml stands for both configs, neither of which sets a precision (checked above)."""
    unset = ["--output_dir", str(tmp_path / "run"), "--use_cpu", "true"]
    options = [unset, [*unset, "--bf16", "true"]]
    result = run(launcher("deepspeed_zero2", "--num_processes", "1", "--main_process_port", "0",
                          str(workers["deepspeed"]), json.dumps(options)))  # fmt: skip
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    float32, bf16 = reports(result.stdout)
    assert float32 == {"bf16": False, "fp16": False, "deepspeed_bf16": False, "deepspeed_fp16": False,
                       "mismatches": []}  # fmt: skip
    assert bf16 == {"bf16": True, "fp16": False, "deepspeed_bf16": True, "deepspeed_fp16": False,
                    "mismatches": []}  # fmt: skip


def _wmt14_recipe_calls(tmp_path: Path, **env) -> list[list[str]]:
    """wmt14_en_de.sh base with stand-ins for `python` and `accelerate` that log their arguments (so nothing
    runs); `python -c` runs too, in this interpreter, as the script counts the GPUs with it."""
    shim = tmp_path / "bin"
    shim.mkdir()
    log = tmp_path / "calls.log"
    seen = '[ -z "$GPUS_SEEN" ] || { echo "$GPUS_SEEN"; exit 0; }'
    counting = f'[ "$1" != -c ] || {{ {seen}; exec {sys.executable} "$@"; }}'
    (shim / "python").write_text(f'#!/bin/sh\necho python "$@" >> "$LOG"\n{counting}\n')
    (shim / "accelerate").write_text('#!/bin/sh\necho accelerate "$@" >> "$LOG"\n')
    for tool in shim.iterdir():
        tool.chmod(0o755)
    environment = {k: v for k, v in os.environ.items() if k not in ("LAUNCH", "TRAIN_OPTIONS")}
    environment.update(PATH=f"{shim}{os.pathsep}{os.environ['PATH']}", LOG=str(log), **env)
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "recipes" / "wmt14_en_de.sh"), "base"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return [line.split() for line in log.read_text().splitlines()]


@pytest.mark.parametrize("gpus", ["", "2", "4", "8", "3"])
def test_wmt14_recipe_launches_a_process_per_gpu(tmp_path, gpus):
    """One process a GPU (`GPUS_SEEN` stands in for torch's count; unset, this machine's), accumulating to
    the paper's 8 GPUs' batch where the GPUs divide it, unless the options say how."""
    calls = _wmt14_recipe_calls(tmp_path, GPUS_SEEN=gpus)
    count = int(gpus or max(torch.cuda.device_count(), 1))
    accumulate = ["--gradient_accumulation_steps", str(8 // count)] if count < 8 and 8 % count == 0 else []
    config = "scripts/accelerate_configs/multi_gpu.yaml"
    assert [call for call in calls if call[0] == "accelerate"] == [
        ["accelerate", "launch", "--config_file", config, "--num_processes", str(count), "scripts/train.py",
         "scripts/recipes/wmt14_en_de_base.yaml", *accumulate]
    ]  # fmt: skip
    (tmp_path / "given").mkdir()
    options = "--gradient_accumulation_steps 3"
    given = _wmt14_recipe_calls(tmp_path / "given", GPUS_SEEN=gpus, TRAIN_OPTIONS=options)
    (launch,) = [call for call in given if call[0] == "accelerate"]
    assert launch[-3:] == ["scripts/recipes/wmt14_en_de_base.yaml", *options.split()]


def test_wmt14_recipe_launches_as_its_launch_setting_says(tmp_path):
    """LAUNCH replaces the launch whole, the count with it (the tests' 2 CPU processes use it)."""
    launch = "accelerate launch --config_file other.yaml --num_processes 3"
    calls = _wmt14_recipe_calls(tmp_path, LAUNCH=launch, TRAIN_OPTIONS="--max_steps 6")
    assert [call for call in calls if call[0] == "accelerate"] == [
        [*launch.split(), "scripts/train.py", "scripts/recipes/wmt14_en_de_base.yaml", "--max_steps", "6"]
    ]
    assert not [call for call in calls if call[:2] == ["python", "-c"]]  # the GPUs are not counted
