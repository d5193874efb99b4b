"""Every command-line script parses one way (`HfArgumentParser` dataclasses), every option explains itself in
`--help`, and every command written in the README, the docs, the model cards, the recipes and the scripts'
own docstrings uses options its script has.

Each script's `main()` runs until it parses its arguments; the parse is intercepted and the parser, as the
script built it, is inspected, so no script does any work.
"""

import argparse
import importlib
import re
import sys
from pathlib import Path

import pytest
from transformers import HfArgumentParser

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
CLI_SCRIPTS = sorted(path.stem for path in SCRIPTS.glob("*.py"))
# The research and measurement commands in scripts/benchmarks/, which parse options as the scripts do
# (`benchmarks/benchmark`, `benchmarks/multi30k_seeds`, ...).
BENCHMARK_SCRIPTS = sorted(
    f"benchmarks/{path.stem}"
    for path in (SCRIPTS / "benchmarks").glob("*.py")
    if "run_script(main)" in path.read_text(encoding="utf-8")
)


class _Parsed(Exception):
    """Raised instead of parsing, carrying the parser."""


def built_parser(script: str, monkeypatch) -> argparse.ArgumentParser:
    def intercept(parser, args=None, namespace=None):
        raise _Parsed(parser)

    # parse_args and HfArgumentParser.parse_args_into_dataclasses both go through parse_known_args.
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", intercept)
    monkeypatch.setattr(sys, "argv", [str(SCRIPTS / f"{script}.py")])
    monkeypatch.syspath_prepend(str(SCRIPTS))  # as `python scripts/<script>.py` has it
    module = importlib.import_module(script.replace("/", "."))
    assert Path(module.__file__) == SCRIPTS / f"{script}.py", f"'import {script}' found {module.__file__}"
    with pytest.raises(_Parsed) as parsed:
        module.main()
    return parsed.value.args[0]


def task_option_parsers(parser) -> dict[str, argparse.ArgumentParser]:
    """The parser of each task's options, by task name, where the script takes a task (`--task`): a task's
    options are parsed apart from the script's (`cli.parse_task_options`)."""
    from hf_vanilla_transformer.cli import make_parser

    return {name: make_parser(dtype, args=[]) for name, dtype in parser.task_option_types().items()}


def test_the_scripts_are_found():
    assert {"train", "train_accelerate", "prepare_translation", "quickstart", "translate"} <= set(CLI_SCRIPTS)


@pytest.mark.parametrize("script", CLI_SCRIPTS)
def test_every_option_has_help(script, monkeypatch):
    parser = built_parser(script, monkeypatch)
    options = [action for action in parser._actions if action.option_strings]
    options += [action for task in task_option_parsers(parser).values() for action in task._actions]
    assert len(options) > 1, f"{script}.py: no options besides --help"
    missing = [
        "/".join(action.option_strings)
        for action in options
        if action.help != argparse.SUPPRESS and not (action.help or "").strip()
    ]
    assert not missing, f"{script}.py: options without help text: {', '.join(missing)}"
    parser.format_help()  # a stray % in a help text only fails here
    assert isinstance(parser, HfArgumentParser), f"{script}.py: parses with {type(parser).__name__}"


DOCUMENTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "model_cards").glob("*/README.md")),
    *sorted((SCRIPTS / "recipes").glob("*.sh")),
    *sorted((SCRIPTS / "recipes").glob("*.yaml")),
    *sorted(SCRIPTS.rglob("*.py")),
    ROOT / ".ci" / "run",
]
# `python scripts/x.py --a 1 \` and its continuation lines, up to a comment, `|`, `;`, `&&` or a backtick.
# The script is named as `CLI_SCRIPTS` and `BENCHMARK_SCRIPTS` name it: `train`, `benchmarks/benchmark`.
COMMAND = re.compile(
    r"(?:python3?|launch|torchrun)\s[^`#|;&\n]*?scripts/((?:benchmarks/)?\w+)\.py([^`#|;&\n]*)"
)


def documented_command_lines() -> list[tuple[str, str, str]]:
    """(where, script, arguments as written) for every command that runs a script in `DOCUMENTS`."""
    commands = []
    for document in DOCUMENTS:
        text = re.sub(r"\\\n\s*", " ", document.read_text(encoding="utf-8"))
        for line_number, line in enumerate(text.splitlines(), 1):
            where = f"{document.relative_to(ROOT)}:{line_number}"
            commands += [(where, match.group(1), match.group(2)) for match in COMMAND.finditer(line)]
    return commands


def documented_commands() -> list[tuple[str, str, list[str]]]:
    """(where, script, options) for every command that runs a script in `DOCUMENTS`."""
    commands = []
    for where, script, arguments in documented_command_lines():
        arguments = re.sub(r"\[[^\]]*\]", "", arguments)  # usage placeholders: [--option value]
        # A double-quoted value is one value, whose options are another script's (`--arm "name=--seed 3"`).
        arguments = re.sub(r'"(?:[^"\\]|\\.)*"', '""', arguments)
        commands.append((where, script, re.findall(r"(?<![\w-])--([A-Za-z][\w-]*)", arguments)))
    return commands


def test_every_documented_command_uses_options_its_script_has(monkeypatch):
    commands = documented_commands()
    scripts = {*CLI_SCRIPTS, *BENCHMARK_SCRIPTS}
    assert len(commands) > 100 and {script for _, script, _ in commands} <= scripts, sorted(
        {f"{where}: {script}.py" for where, script, _ in commands if script not in scripts}
    )
    options = {}
    for script in sorted({script for _, script, _ in commands}):
        parser = built_parser(script, monkeypatch)
        parsers = [parser, *task_option_parsers(parser).values()]
        options[script] = {
            option[2:] for each in parsers for action in each._actions for option in action.option_strings
        }
    wrong = [
        f"{where}: {script}.py --{option}"
        for where, script, used in commands
        for option in used
        if option not in options[script]
    ]
    assert not wrong, "documented options the scripts do not have:\n" + "\n".join(wrong)


# A value just outside each kind of range a field's metadata gives (`validation.in_range`).
OUTSIDE = {">= 1": "0", ">= 0": "-1", "> 0": "0", "[0, 1)": "1", "[0, 1]": "2", "(0, 1)": "0", "(0, 1]": "0"}
OUTSIDE["[1, 65535]"] = "0"


def outside(spec: str) -> str:
    """A value just outside the range `spec`: the table's, else one below its lower bound."""
    if spec in OUTSIDE:
        return OUTSIDE[spec]
    low = float(spec.split()[-1]) if spec.startswith(">") else float(spec[1:].split(",")[0])
    return f"{low - 1:g}"


def is_numeric(field) -> bool:
    """Whether an option takes numbers (a list of them too), by its annotation; a flag is no number."""
    kind = str(field.type)
    return ("int" in kind or "float" in kind) and "bool" not in kind and "str" not in kind


@pytest.mark.parametrize("script", [*CLI_SCRIPTS, *BENCHMARK_SCRIPTS])
def test_every_numeric_option_is_checked_as_it_is_parsed(script, monkeypatch):
    """Beams, counts, sizes, budgets, minutes: each numeric option of every script, every task's options
    included (parsed with `--task <it>`), has a range on its field, and a value outside it is refused in one
    line naming the option before the script does any work."""
    from hf_vanilla_transformer.cli import own_fields, parse_dataclasses
    from hf_vanilla_transformer.errors import UsageError
    from hf_vanilla_transformer.options import RANGE, Options

    parser = built_parser(script, monkeypatch)
    monkeypatch.undo()  # the real argparse again, to parse
    ranges, missing, unchecked = {}, [], []
    # (the options of the task named, or none for the script's own) -> its dataclasses
    owners = {(): parser.dataclass_types}
    owners |= {("--task", name): [dtype] for name, dtype in parser.task_option_types().items()}
    for task, dtypes in owners.items():
        for dtype in dtypes:
            for field in own_fields(dtype):
                if not is_numeric(field):
                    continue
                if RANGE not in field.metadata:
                    missing.append(f"--{field.name} ({dtype.__qualname__})")
                    continue
                ranges[(*task, field.name)] = field.metadata[RANGE]
                if not issubclass(dtype, Options):  # its ranges would be checked by nobody
                    unchecked.append(dtype.__qualname__)
    assert not missing, f'{script}.py: numeric options without a "range" in their metadata: {missing}'
    assert not unchecked, (
        f"{script}.py: dataclasses with ranges but not options.Options: {sorted(set(unchecked))}"
    )
    required = []
    for action in parser._actions:
        if action.required and action.option_strings:
            value = action.choices[0] if action.choices else ("1" if action.type in (int, float) else "x")
            required += [action.option_strings[0], str(value)]
    if parser.task_option_types():  # the tasks' options are among them
        assert ("--task", "series", "symbol_renamings") in ranges
    for (*task, name), spec in ranges.items():
        if spec == "any":
            continue
        # Checked as the dataclass is built (`options.Options`), so library code is refused too.
        with pytest.raises(UsageError, match=rf"\b{name}\b"):
            parse_dataclasses(parser, [*required, *task, f"--{name}", outside(spec)])


# The scripts' options that take text but name no file or folder; and those that name one but that the rule
# of outputs and inputs leaves out, with why. Any other option that takes text must be in
# `outputs.OUTPUT_OPTIONS` or `outputs.INPUT_OPTIONS`, so that no output replaces one of its command's inputs.
NOT_PATHS = {
    "allow_changed_options", "arm", "attn_implementation", "backend", "batch_order", "checks", "compute_type",
    "dataset_config",
    "device", "dtype", "example",
    "fairseq_arm", "fairseq_linear_arm", "host", "label", "long_pairs", "lr_scheduler_type",
    "metric_for_best_model",
    "mixed_precision", "preset", "presets", "profile", "quantization", "repo_id", "shapes", "source_lang",
    "split", "stages", "symbols", "target", "target_lang", "task", "text", "token",
}  # fmt: skip
PATHS_LEFT_OUT = {
    "resume_from_checkpoint": "the run itself, inside its --output_dir by design",
    "card": "read whole before --folder is written; by default it is --folder's own README.md",
    "markdown_from": "that mode writes nothing, and reads what an earlier run wrote to --output_file",
}


@pytest.mark.parametrize("script", [*CLI_SCRIPTS, *BENCHMARK_SCRIPTS])
def test_every_option_that_may_name_a_path_is_an_output_or_an_input(script, monkeypatch):
    """An output that is one of the command's inputs, or holds one, is refused as the options are parsed
    (`outputs.check_output_options`), by the options' names: a new option that takes a path must say which
    it is, or the check would not see it."""
    from hf_vanilla_transformer.cli import own_fields
    from hf_vanilla_transformer.outputs import INPUT_OPTIONS, OUTPUT_OPTIONS

    parser = built_parser(script, monkeypatch)
    texts = {
        field.name
        for dtype in [*parser.dataclass_types, *parser.task_option_types().values()]
        for field in own_fields(dtype)
        if "str" in str(field.type) or "Path" in str(field.type)
    }
    assert not set(OUTPUT_OPTIONS) & set(INPUT_OPTIONS)
    unknown = texts - {*OUTPUT_OPTIONS, *INPUT_OPTIONS, *NOT_PATHS, *PATHS_LEFT_OUT}
    assert not unknown, (
        f"{script}.py: options that may name a path, in no table: {sorted(unknown)}. Add each to "
        "outputs.OUTPUT_OPTIONS or outputs.INPUT_OPTIONS (or, if it names no path, to NOT_PATHS here)."
    )


def test_the_benchmark_scripts_are_found():
    assert {"benchmarks/multi30k_seeds", "benchmarks/benchmark", "benchmarks/quality_curve"} <= set(
        BENCHMARK_SCRIPTS
    )
