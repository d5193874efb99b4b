"""Every command answers at once: `--help`, and the refusal of a mistyped option, come before torch is
imported (a command parses its options and refuses a mistake first, then imports what its work needs). Each
command at the top of scripts/ runs in a fresh interpreter, as a user runs it, and the modules it imported are
read when it exits; a new command is covered the day it is added. How long they take is measured by
`scripts/benchmarks/startup.py`, not here."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
# They parse transformers' Seq2SeqTrainingArguments, whose module imports torch.
TRAINING_ARGUMENT_COMMANDS = ("quickstart.py", "train.py", "train_accelerate.py")
COMMANDS = sorted(path.name for path in SCRIPTS.glob("*.py") if path.name not in TRAINING_ARGUMENT_COMMANDS)
# What none of them may import to answer: torch, and the libraries that take from a tenth of a second to
# seconds to import (transformers alone reads the import structure of every model; its argument parser
# module is loaded without it: `cli.argument_parser_class`).
HEAVY = ("torch", "transformers", "datasets", "sympy")

# `python scripts/<command> ...`, then what it imported, printed as its last line however it ended.
RUN_AND_LIST_IMPORTS = """
import json, os, runpy, sys
script, *args = sys.argv[1:]
sys.argv = [script, *args]
sys.path[0] = os.path.dirname(script)  # as `python scripts/<command>` has it
code = 0
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as exit:
    code = exit.code if isinstance(exit.code, int) else 1
sys.stdout.flush()
print(json.dumps({"code": code, "heavy": sorted(set(json.loads(os.environ["HEAVY"])) & set(sys.modules))}))
"""


def answer(command: str, *args: str) -> tuple[dict, subprocess.CompletedProcess]:
    result = subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST_IMPORTS, str(SCRIPTS / command), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "HEAVY": json.dumps(HEAVY)},
        stdin=subprocess.DEVNULL,
    )
    return json.loads(result.stdout.strip().splitlines()[-1]), result


def test_the_commands_are_found():
    assert {"evaluate_model.py", "translate.py", "generate_series.py"} <= set(COMMANDS)
    assert not set(TRAINING_ARGUMENT_COMMANDS) & set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_imports_none_of_the_heavy_libraries(command):
    outcome, result = answer(command, "--help")
    assert outcome["code"] == 0, result.stderr[-3000:]
    assert "usage:" in result.stdout, result.stdout[-3000:]
    assert outcome["heavy"] == [], f"{command} --help imported {outcome['heavy']}"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_mistyped_option_is_refused_before_the_heavy_libraries_load(command):
    outcome, result = answer(command, "--mistyped_option", "1")
    assert outcome["code"] == 2, result.stderr[-3000:]
    assert "--mistyped_option" in result.stderr and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert outcome["heavy"] == [], f"{command} --mistyped_option imported {outcome['heavy']}"


# How a user may come to the model, in a fresh interpreter: the package first, transformers' Auto classes
# first, a name of the package's face, a module of the package. Whichever comes first, the Auto classes, the
# pipeline's task and the task registry's input rules know the model once it is used, and a saved folder
# carries its code.
REGISTERED = """
import json, os, sys, tempfile
way, folder = sys.argv[1:]
if way == "package":
    import hf_vanilla_transformer
    loaded = sorted({"torch", "transformers"} & set(sys.modules))
    assert not loaded, f"import hf_vanilla_transformer loaded {loaded}"
elif way == "auto classes":
    from transformers import AutoModelForSeq2SeqLM
    import hf_vanilla_transformer
elif way == "a name":
    from hf_vanilla_transformer import VanillaTransformerConfig
elif way == "a module":
    import hf_vanilla_transformer.saving
from transformers import AutoConfig, AutoModelForSeq2SeqLM
from transformers.pipelines import PIPELINE_REGISTRY
pipeline_module = sys.modules["hf_vanilla_transformer.pipeline_seq2seq"]  # came with transformers.pipelines
model = AutoModelForSeq2SeqLM.from_config(AutoConfig.from_pretrained(folder))
saved = tempfile.mkdtemp()
model.save_pretrained(saved)
print(json.dumps({
    "class": type(model).__name__,
    "module": type(model).__module__,
    "auto_map": sorted(json.load(open(os.path.join(saved, "config.json")))["auto_map"]),
    "code": os.path.isfile(os.path.join(saved, "modeling_vanilla_transformer.py")),
    "pipeline": pipeline_module.TASK_NAME in PIPELINE_REGISTRY.get_supported_tasks(),
    "input_rules": pipeline_module.INPUT_RULES is not None,
}))
"""


@pytest.mark.parametrize("way", ["package", "auto classes", "a name", "a module"])
def test_the_model_is_registered_whichever_way_it_is_reached(way):
    folder = ROOT / "model_cards" / "vanilla-transformer-series"
    result = subprocess.run(
        [sys.executable, "-c", REGISTERED, way, str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {
        "class": "VanillaTransformerForConditionalGeneration",
        "module": "hf_vanilla_transformer.modeling_vanilla_transformer",
        "auto_map": ["AutoConfig", "AutoModel", "AutoModelForSeq2SeqLM"],
        "code": True,
        "pipeline": True,
        "input_rules": True,
    }
