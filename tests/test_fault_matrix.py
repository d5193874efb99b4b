"""Every command given every fault a user's files have, in every file or folder it reads and every place it
writes: one `error:` line naming the file with exit status 2, or a success the docs state, and nothing that
existed changes. The cases are generated (tests/fault_matrix.py says from what); `test_every_command_and_path
_option_is_in_the_matrix` fails on a command or option the matrix does not reach."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from datasets import load_from_disk

from hf_vanilla_transformer import locks
from hf_vanilla_transformer.outputs import INPUT_OPTIONS

from . import fault_matrix as fm
from .script_runner import run_script_file
from .test_marian import _marian_folder as _make_marian
from .test_script_help import BENCHMARK_SCRIPTS, CLI_SCRIPTS, PATHS_LEFT_OUT, built_parser

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "multi30k"
RECIPE = ROOT / "scripts" / "recipes" / "multi30k_de_en_paper.yaml"
TASK_FILE = ROOT / "examples" / "number_words.py"

# A tiny model of the fixture data, trained for the training commands' valid lines.
TINY = ["--preset", "transformer-tiny", "--max_source_length", "96", "--max_target_length", "96"]
TINY += ["--max_tokens", "600", "--max_steps", "1", "--warmup_steps", "1", "--eval_strategy", "no"]
TINY += ["--save_strategy", "no", "--load_best_model_at_end", "false", "--report_to", "none"]


@pytest.fixture(scope="module")
def world(translation_data, tmp_path_factory) -> dict[str, Path]:
    """The valid inputs every command line is built of: a data set in each layout, a tokenizer, a run with
    checkpoints and its final model, a CTranslate2 export, text, a recipe, a JSON of config overrides, a
    model card, a task file. Cases spoil copies of them, never these."""
    root = tmp_path_factory.mktemp("world")
    world = {"data": translation_data / "data", "tokenizer": translation_data / "tokenizer"}
    splits = load_from_disk(str(world["data"]))
    for layout in ("jsonl", "parquet"):
        folder = root / f"data-{layout}"
        folder.mkdir()
        for split, rows in splits.items():
            rows = rows.select(range(min(len(rows), 40)))
            getattr(rows, "to_json" if layout == "jsonl" else "to_parquet")(str(folder / f"{split}.{layout}"))
        world[f"data-{layout}"] = folder
    world["corpus"] = shutil.copytree(FIXTURE, root / "corpus")
    run = root / "run"
    result = run_script_file(
        "train.py", RECIPE, "--dataset", world["data"], "--tokenizer", world["tokenizer"], *TINY,
        "--max_steps", "2", "--save_strategy", "steps", "--save_steps", "1", "--output_dir", run,
        cwd=root, env=fm.environment(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    world["run"], world["checkpoint"], world["model"] = run, run / "checkpoint-2", run / "final"
    result = run_script_file(
        "train_accelerate.py", "--dataset", world["data"], "--tokenizer", world["tokenizer"], *LOOP,
        "--max_steps", "2", "--save_steps", "1", "--output_dir", root / "loop-run",
        cwd=root, env=fm.environment(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    world["loop-run"] = root / "loop-run"
    result = run_script_file(
        "export_ctranslate2.py", "--model", world["model"], "--output_dir", root / "ct2", cwd=root
    )
    assert result.returncode == 0, result.stderr[-3000:]
    world["ct2"] = root / "ct2"
    world["text"] = root / "news.de"
    world["text"].write_text(
        "Ein Hund läuft.\nZwei Katzen schlafen im Park.\n\nEin Mann.\n", encoding="utf-8"
    )
    world["recipe"] = shutil.copy(RECIPE, root / "recipe.yaml")
    world["overrides"] = root / "overrides.json"
    world["overrides"].write_text(json.dumps({"dropout": 0.0}), encoding="utf-8")
    world["card"] = root / "card.md"
    world["card"].write_text("---\nlicense: apache-2.0\n---\n# A model\n\nIt translates.\n", encoding="utf-8")
    world["task"] = shutil.copy(TASK_FILE, root / "number_words.py")
    world["marian"] = _marian_folder(root / "marian")
    world["size"] = root / "size"
    shutil.copytree(world["tokenizer"], world["size"] / "tokenizer")
    shutil.copytree(world["data"], world["size"] / "data")
    result = run_script_file(
        "benchmarks/quality_curve.py", "--run_dir", run, "--task", "translation", "--dataset", world["data"],
        "--last", "1", "--max_examples", "2", "--num_beams", "1", "--output_dir", root / "curve",
        cwd=root, env=fm.environment(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    world["curve"] = root / "curve" / "curve.json"
    world["bench"] = root / "bench.json"
    # The smallest results each benchmark prints tables of.
    one = {"ms_per_token_by_prefix": {"1": 1.0}}
    world["bench"].write_text(
        json.dumps({"shapes": {"tiny": {"ours": one, "marian": one}}}), encoding="utf-8"
    )
    world["corpus-bench"] = root / "corpus-bench.json"
    world["corpus-bench"].write_text("[]\n", encoding="utf-8")
    world["report"] = root / "eval-test-greedy.json"  # what evaluate_model.py writes, two sentences of it
    examples = [{"source": "Ein Hund.", "reference": "A dog.", "prediction": "A dog."}] * 2
    world["report"].write_text(
        json.dumps({"metrics": {"bleu": 100.0}, "examples": examples}), encoding="utf-8"
    )
    result = run_script_file(
        "generate_series.py", "--num_examples", "12", "--test_size", "2", "--validation_size", "2",
        "--output_dir", root / "series", cwd=root,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    world["series"] = root / "series"
    return {name: Path(path) for name, path in world.items()}


# What train_accelerate.py takes for the same tiny run (it reads no recipe and has no Trainer options).
LOOP = ["--task", "translation", *TINY[:8], "--warmup_steps", "1", "--save_steps", "1000", "--use_cpu"]


def _marian_folder(folder: Path) -> Path:
    """A saved Marian model with its sentencepiece tokenizer (`test_marian`'s)."""
    _make_marian(folder)
    return folder / "model"


def _recipe_line(w) -> list:
    """train.py's valid line on the world's data: the recipe in front, shrunk to a step of a tiny model."""
    return [w["recipe"], "--dataset", w["data"], "--tokenizer", w["tokenizer"], *TINY]


def _loop_line(w) -> list:
    """train_accelerate.py's, likewise."""
    return ["--dataset", w["data"], "--tokenizer", w["tokenizer"], *LOOP]


def train_line(script):
    def args(w, out):
        if script == "train_accelerate":
            return [*_loop_line(w), "--max_steps", "1",
                    "--config_overrides", w["overrides"], "--output_dir", out / "run"]  # fmt: skip
        return [*_recipe_line(w),
                "--config_overrides", w["overrides"], "--output_dir", out / "run"]  # fmt: skip

    reads = {"dataset": "data", "tokenizer": "tokenizer", "config_overrides": "overrides"}
    if script == "train":
        reads[fm.RECIPE] = "recipe"
    return fm.Command(
        script,
        args,
        reads=lambda w: {option: w[name] for option, name in reads.items()},
        writes={"output_dir": "run"},
    )


def resume_line(script):
    run, checkpoint = ("run", "checkpoint-2") if script == "train" else ("loop-run", "state-2")

    def args(w, out):
        copy = shutil.copytree(w[run], out / "run")
        if script == "train_accelerate":
            return [*_loop_line(w), "--max_steps", "3",
                    "--output_dir", copy, "--resume_from_checkpoint", copy / checkpoint]  # fmt: skip
        return [*_recipe_line(w), "--max_steps", "3",
                "--output_dir", copy, "--resume_from_checkpoint", copy / "checkpoint-2"]  # fmt: skip

    return fm.Command(
        script,
        args,
        reads=lambda w: {"resume_from_checkpoint": w[run] / checkpoint},
        kinds={"resume_from_checkpoint": "checkpoint folder" if script == "train" else "loop checkpoint"},
        name=f"{script} (resume)",
    )


def streaming_line(dataset: str):
    def args(w, out):
        return ["--task", "translation", "--dataset", w[dataset], "--tokenizer", w["tokenizer"], *TINY,
                "--streaming", "true", "--output_dir", out / "run"]  # fmt: skip

    return fm.Command(
        "train",
        args,
        reads=lambda w: {"dataset": w[dataset]},
        kinds={"dataset": LAYOUTS[dataset]},
        name=f"train (streaming {dataset})",
    )


# The world's data set in each layout the commands read, and its kind.
LAYOUTS = {
    "data": "save_to_disk folder",
    "data-jsonl": "JSON Lines folder",
    "data-parquet": "parquet folder",
    "corpus": "text corpus folder",
}


def data_line(script, dataset):
    """A command reading a data set in one of its layouts."""

    def args(w, out):
        if script == "evaluate_model":
            return ["--model", w["model"], "--dataset", w[dataset], "--max_examples", "2", "--num_beams", "1",
                    "--max_new_tokens", "4", "--output_file", out / "report.json"]  # fmt: skip
        if script == "train_tokenizer":
            return ["--task", "translation", "--dataset", w[dataset], "--vocab_size", "120",
                    "--output_dir", out / "tokenizer"]  # fmt: skip
        return ["--task", "translation", "--dataset", w[dataset], "--tokenizer", w["tokenizer"], *TINY,
                "--output_dir", out / "run"]  # fmt: skip

    return fm.Command(
        script,
        args,
        reads=lambda w: {"dataset": w[dataset]},
        kinds={"dataset": LAYOUTS[dataset]},
        name=f"{script} ({dataset})",
    )


COMMANDS = [
    train_line("train"),
    train_line("train_accelerate"),
    resume_line("train"),
    resume_line("train_accelerate"),
    streaming_line("data-jsonl"),
    streaming_line("data-parquet"),
    *(data_line(script, layout) for script in ("train", "evaluate_model") for layout in LAYOUTS),
    # The tokenizer trains on a prepared data set (or on text files, below).
    data_line("train_tokenizer", "data"),
    fm.Command(
        "translate",
        lambda w, out: [
            "--model",
            w["model"],
            "--input",
            w["text"],
            "--output",
            out / "out.en",
            "--num_beams",
            "1",
            "--max_new_tokens",
            "4",
            "--device",
            "cpu",
        ],  # fmt: skip
        reads=lambda w: {"model": w["model"], "input": w["text"]},
        writes={"output": "out.en"},
    ),
    fm.Command(
        "translate",
        lambda w, out: [
            "--backend",
            "ctranslate2",
            "--model",
            w["ct2"],
            "--input",
            w["text"],
            "--output",
            out / "out.en",
            "--num_beams",
            "1",
            "--max_new_tokens",
            "4",
        ],  # fmt: skip
        reads=lambda w: {"model": w["ct2"]},
        writes={"output": "out.en"},
        kinds={"model": "CTranslate2 folder"},
        name="translate (ctranslate2)",
    ),
    fm.Command(
        "evaluate_model",
        lambda w, out: [
            "--model",
            w["model"],
            "--dataset",
            w["data"],
            "--max_examples",
            "2",
            "--num_beams",
            "1",
            "--max_new_tokens",
            "4",
            "--output_file",
            out / "report.json",
        ],  # fmt: skip
        reads=lambda w: {"model": w["model"]},
        writes={"output_file": "report.json"},
    ),
    fm.Command(
        "export_ctranslate2",
        lambda w, out: ["--model", w["model"], "--output_dir", out / "ct2"],
        reads=lambda w: {"model": w["model"]},
        writes={"output_dir": "ct2"},
    ),
    fm.Command(
        "average_checkpoints",
        lambda w, out: ["--run_dir", w["run"], "--last", "2", "--output_dir", out / "averaged"],
        reads=lambda w: {"run_dir": w["run"]},
        writes={"output_dir": "averaged"},
    ),
    fm.Command(
        "update_model_code",
        lambda w, out: ["--model", w["model"], "--dry_run"],
        reads=lambda w: {"model": w["model"]},
    ),
    fm.Command(
        "push_to_hub",
        lambda w, out: ["--model", w["model"], "--card", w["card"], "--folder", out / "hub", "--dry_run"],
        reads=lambda w: {"model": w["model"], "card": w["card"]},
        writes={"folder": "hub"},
    ),
    fm.Command(
        "plot_attention",
        lambda w, out: ["--model", w["model"], "--text", "Ein Hund.", "--output_file", out / "a.png"],
        reads=lambda w: {"model": w["model"]},
        writes={"output_file": "a.png"},
    ),
    fm.Command(
        "train_tokenizer",
        lambda w, out: [
            "--task",
            "translation",
            "--text_files",
            w["text"],
            "--vocab_size",
            "120",
            "--output_dir",
            out / "tokenizer",
        ],  # fmt: skip
        reads=lambda w: {"text_files": w["text"]},
        writes={"output_dir": "tokenizer"},
    ),
    fm.Command(
        "prepare_translation",
        lambda w, out: [
            "--dataset",
            w["corpus"],
            "--source_lang",
            "de",
            "--target_lang",
            "en",
            "--tokenizer",
            w["tokenizer"],
            "--max_source_length",
            "96",
            "--max_target_length",
            "96",
            "--output_dir",
            out / "data",
            "--tokenized_output_dir",
            out / "tokenized",
        ],  # fmt: skip
        reads=lambda w: {"dataset": w["corpus"], "tokenizer": w["tokenizer"]},
        kinds={"dataset": "text corpus folder"},
        writes={"output_dir": "data", "tokenized_output_dir": "tokenized"},
    ),
    fm.Command(
        "prepare_data",
        lambda w, out: [
            "--task",
            w["task"],
            "--train_size",
            "20",
            "--held_out_size",
            "5",
            "--output_dir",
            out / "data",
        ],  # fmt: skip
        reads=lambda w: {"task": w["task"]},
        writes={"output_dir": "data"},
    ),
]


# The commands that take --task: a line of each, given the task file (it is imported while the options are
# parsed, before anything else is read).
TASK_COMMANDS = ("train", "train_accelerate", "evaluate_model", "train_tokenizer")
TASK_COMMANDS += ("benchmarks/quality_curve", "benchmarks/profile_training")


def task_file_line(command):
    def args(w, out):
        line = [str(item) for item in command.args(w, out)]
        return fm.with_value(line, "task", w["task"]) if "--task" in line else [*line, "--task", w["task"]]

    return fm.Command(
        command.script, args, reads=lambda w: {"task": w["task"]}, name=f"{command.name} (task file)"
    )


COMMANDS += [
    fm.Command(
        "benchmarks/quality_curve",
        lambda w, out: [
            "--run_dir",
            w["run"],
            "--task",
            "translation",
            "--dataset",
            w["data"],
            "--last",
            "1",
            "--max_examples",
            "2",
            "--num_beams",
            "1",
            "--compare",
            w["curve"],
            "--output_dir",
            out / "curve",
        ],  # fmt: skip
        reads=lambda w: {"run_dir": w["run"], "dataset": w["data"], "compare": w["curve"]},
        writes={"output_dir": "curve"},
    ),
    fm.Command(
        "benchmarks/profile_training",
        lambda w, out: [
            *_recipe_line(w),
            "--untimed_steps",
            "1",
            "--timed_steps",
            "1",
            "--operator_steps",
            "1",
            "--config_overrides",
            w["overrides"],
            "--output_dir",
            out / "run",
            "--output_file",
            out / "profile.json",
        ],  # fmt: skip
        reads=lambda w: {
            fm.RECIPE: w["recipe"],
            "dataset": w["data"],
            "tokenizer": w["tokenizer"],
            "config_overrides": w["overrides"],
        },  # fmt: skip
        writes={"output_dir": "run", "output_file": "profile.json"},
    ),
    fm.Command(
        "benchmarks/profile_training",
        lambda w, out: [
            *_recipe_line(w),
            "--model",
            w["model"],
            "--untimed_steps",
            "1",
            "--timed_steps",
            "1",
            "--operator_steps",
            "1",
            "--output_file",
            out / "profile.json",
        ],  # fmt: skip
        reads=lambda w: {"model": w["model"]},
        name="benchmarks/profile_training (from a model)",
    ),
    fm.Command(
        "benchmarks/profile_training",
        lambda w, out: [
            *_recipe_line(w),
            "--untimed_steps",
            "1",
            "--timed_steps",
            "1",
            "--operator_steps",
            "1",
            "--output_dir",
            shutil.copytree(w["run"], out / "run"),
            "--resume_from_checkpoint",
            out / "run" / "checkpoint-2",
        ],  # fmt: skip
        reads=lambda w: {"resume_from_checkpoint": w["checkpoint"]},
        kinds={"resume_from_checkpoint": "checkpoint folder"},
        name="benchmarks/profile_training (resume)",
    ),
    fm.Command(
        "train",
        lambda w, out: [
            *_recipe_line(w),
            "--model",
            w["model"],
            "--output_dir",
            out / "run",
        ],  # fmt: skip
        reads=lambda w: {"model": w["model"]},
        name="train (from a model)",
    ),
    fm.Command(
        "train_accelerate",
        lambda w, out: [
            *_loop_line(w),
            "--max_steps",
            "1",
            "--model",
            w["model"],
            "--output_dir",
            out / "run",
        ],  # fmt: skip
        reads=lambda w: {"model": w["model"]},
        name="train_accelerate (from a model)",
    ),
    fm.Command(
        "convert_marian",
        lambda w, out: ["--model", w["marian"], "--output_dir", out / "converted"],
        reads=lambda w: {"model": w["marian"]},
        writes={"output_dir": "converted"},
        kinds={"model": "Marian folder"},
    ),
    fm.Command("demo", lambda w, out: ["--model", w["model"]], reads=lambda w: {"model": w["model"]}),
    fm.Command(
        "benchmarks/demo_screenshot",
        lambda w, out: ["--model", w["model"], "--output_file", out / "demo.png", "--timeout", "1"],
        reads=lambda w: {"model": w["model"]},
        writes={"output_file": "demo.png"},
    ),
    fm.Command(
        "benchmarks/paired_significance",
        lambda w, out: [
            "--baseline",
            w["report"],
            "--other",
            w["report"],
            "--ar_trials",
            "10",
            "--bootstrap_samples",
            "10",
            "--output_file",
            out / "paired.json",
        ],  # fmt: skip
        reads=lambda w: {"baseline": w["report"], "other": w["report"]},
        writes={"output_file": "paired.json"},
    ),
    fm.Command(
        "generate_series",
        lambda w, out: ["--num_examples", "16", "--held_out_from", w["series"], "--output_dir", out / "more"],
        reads=lambda w: {"held_out_from": w["series"]},
        writes={"output_dir": "more"},
        name="generate_series (held out from)",
    ),
    fm.Command(
        "benchmarks/benchmark",
        lambda w, out: ["--markdown_from", w["bench"], "--output_file", out / "bench.json"],
        reads=lambda w: {"markdown_from": w["bench"]},
        writes={"output_file": "bench.json"},
    ),
    fm.Command(
        "benchmarks/startup",
        lambda w, out: [
            "--runs",
            "1",
            "--only_files",
            "--model",
            w["model"],
            "--input",
            w["text"],
            "--output_file",
            out / "startup.json",
        ],  # fmt: skip
        reads=lambda w: {"model": w["model"], "input": w["text"]},
        writes={"output_file": "startup.json"},
    ),
    fm.Command(
        "benchmarks/benchmark_corpus",
        lambda w, out: ["--markdown_from", w["corpus-bench"], "--output_dir", out / "corpus"],
        reads=lambda w: {"markdown_from": w["corpus-bench"]},
        writes={"output_dir": "corpus"},
    ),
    fm.Command(
        "benchmarks/benchmark_corpus",
        lambda w, out: ["--library_speed_of", w["size"]],
        reads=lambda w: {"library_speed_of": w["size"]},
        kinds={"library_speed_of": "corpus size folder"},
        name="benchmarks/benchmark_corpus (library speed)",
    ),
    fm.Command(
        "benchmarks/benchmark_corpus",
        lambda w, out: [
            "--multi30k",
            w["corpus"],
            "--sizes",
            "50",
            "--stages",
            "streaming",
            "--no_translate_speed",
            "--output_dir",
            out / "corpus",
        ],  # fmt: skip
        reads=lambda w: {"multi30k": w["corpus"]},
        name="benchmarks/benchmark_corpus (multi30k)",
    ),
    fm.Command(
        "benchmarks/multi30k_seeds",
        lambda w, out: [
            "--arm",
            f"tiny=--dataset {w['data']} --tokenizer {w['tokenizer']} {' '.join(TINY[:8])}",
            "--seeds",
            "1",
            "--max_steps",
            "1",
            "--recipe",
            w["recipe"],
            "--dataset",
            w["data"],
            "--output_dir",
            out / "seeds",
        ],  # fmt: skip
        reads=lambda w: {"recipe": w["recipe"], "dataset": w["data"]},
        writes={"output_dir": "seeds"},
        trains=True,
    ),
    *(
        fm.Command(
            script,
            lambda w, out, s=script, e=extra: [*e, "--output_dir", out / Path(s).name],
            reads=lambda w: {},
            writes={"output_dir": Path(script).name},
        )
        for script, extra in [
            ("generate_series", ["--num_examples", "20"]),
            ("quickstart", []),
            ("benchmarks/check_gpus", []),
            ("benchmarks/time_checkpoint_save", ["--repeats", "1"]),
        ]
    ),  # fmt: skip
]

COMMANDS += [
    task_file_line(command)
    for command in COMMANDS
    if command.script in TASK_COMMANDS and command.name == command.script
]


def input_cases() -> list:
    """(command, option, fault) for every input option of every command line above."""
    cases = []
    for command in COMMANDS:
        for option in _reads_options(command):
            kind = command.kind(option)
            faults = fm.FILE_FAULTS if kind.endswith("file") else fm.folder_faults(kind)
            for fault in faults:
                slow = command.trains and (option, fault) in fm.DOCUMENTED_SUCCESSES
                marks = [pytest.mark.slow] if slow else []
                cases.append(
                    pytest.param(command, option, fault, marks=marks, id=f"{command.name}-{option}-{fault}")
                )
    return cases


# The options each command line reads, without building its inputs (the names are all the cases need).
def _reads_options(command) -> list[str]:
    return list(command.reads({name: Path(name) for name in _WORLD_NAMES}))


_WORLD_NAMES = ("data", "tokenizer", "data-jsonl", "data-parquet", "corpus", "run", "checkpoint", "model")
_WORLD_NAMES += ("ct2", "loop-run", "marian", "curve", "size", "text", "recipe", "overrides", "card", "task")
_WORLD_NAMES += ("bench", "corpus-bench", "report", "series")


def _refuse_to_serve(*args, **kwargs):
    raise RuntimeError("the demo would serve the page: it took the faulty input")


@pytest.mark.parametrize(("command", "option", "fault"), input_cases())
def test_a_faulty_input(world, command, option, fault, tmp_path, monkeypatch):
    if command.script == "demo":  # a fault the demo misses would serve the page until the test is killed
        import gradio

        monkeypatch.setattr(gradio.Blocks, "launch", _refuse_to_serve)
    valid = Path(command.reads(world)[option])
    faulty, named = fm.make_fault(valid, fault, tmp_path / "given")
    out = tmp_path / "out"
    out.mkdir()
    args = command.args(world, out)
    args = fm.with_value(args, option, faulty)
    before = {**fm.sha(tmp_path), **fm.sha(world["data"].parent), **fm.sha(world["run"].parent)}
    result = run_script_file(f"{command.script}.py", *args, cwd=tmp_path, env=fm.environment())
    expect = "success" if (option, fault) in fm.DOCUMENTED_SUCCESSES else "error"
    fm.check_outcome(result, f"{command.name} --{option} {fault}: {' '.join(args)}", expect, named)
    after = {**fm.sha(tmp_path), **fm.sha(world["data"].parent), **fm.sha(world["run"].parent)}
    changed = sorted(path for path, digest in before.items() if after.get(path) != digest)
    assert not changed, f"{command.name} --{option} {fault} changed or removed {changed}"


def output_cases() -> list:
    """(command, option, fault) for every output option of every command line above."""
    cases = []
    for command in COMMANDS:
        for option in command.writes:
            for fault in fm.OUTPUT_FAULTS:
                if fault == "an input" and not set(_reads_options(command)) & set(INPUT_OPTIONS):
                    continue  # no input option to write over (a recipe is read whole first)
                cases.append(pytest.param(command, option, fault, id=f"{command.name}-{option}-{fault}"))
    return cases


@pytest.mark.parametrize(("command", "option", "fault"), output_cases())
def test_a_faulty_output(world, command, option, fault, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    args = [str(item) for item in command.args(world, out)]
    if fault == "under a file":
        (tmp_path / "a-file").write_text("mine\n", encoding="utf-8")
        target = tmp_path / "a-file" / "output"
        named = [target]
    elif fault == "not writable":
        target = fm.unwritable_folder(tmp_path) / "output"
        named = [target]
    elif fault == "a dangling link":
        target = tmp_path / "link"
        target.symlink_to(tmp_path / "nowhere" / "output")
        named = [target]
    else:  # the command's first input option, copied, given as both that input and this output
        read, valid = next((o, v) for o, v in command.reads(world).items() if o in INPUT_OPTIONS)
        target = (tmp_path / "input") / Path(valid).name
        if Path(valid).is_dir():
            shutil.copytree(valid, target)
        else:
            target.parent.mkdir()
            shutil.copy(valid, target)
        args = fm.with_value(args, read, target)
        named = [target]
    args = fm.with_value(args, option, target)
    before = {**fm.sha(tmp_path), **fm.sha(world["data"].parent), **fm.sha(world["run"].parent)}
    result = run_script_file(f"{command.script}.py", *args, cwd=tmp_path, env=fm.environment())
    fm.check_outcome(result, f"{command.name} --{option} {fault}: {' '.join(args)}", "error", named)
    after = {**fm.sha(tmp_path), **fm.sha(world["data"].parent), **fm.sha(world["run"].parent)}
    changed = sorted(path for path, digest in before.items() if after.get(path) != digest)
    assert not changed, f"{command.name} --{option} {fault} changed or removed {changed}"
    if fault == "a dangling link":
        assert target.is_symlink(), f"{command.name} --{option}: the link was replaced"


def path_options_of(script: str, monkeypatch) -> tuple[set[str], set[str]]:
    """The options of `script` that read a file or folder, and those that write one, by the tables the
    commands share (`outputs.INPUT_OPTIONS`, `outputs.OUTPUT_OPTIONS`, the paths they leave out with a
    reason), a recipe in front where the script reads one, and `--task`, which may name a task file."""
    from hf_vanilla_transformer.cli import own_fields
    from hf_vanilla_transformer.outputs import INPUT_OPTIONS, OUTPUT_OPTIONS

    parser = built_parser(script, monkeypatch)
    names = {field.name for dtype in parser.dataclass_types for field in own_fields(dtype)}
    reads = names & {*INPUT_OPTIONS, *PATHS_LEFT_OUT, "task"}
    if "[recipe.yaml]" in (parser.usage or ""):
        reads.add(fm.RECIPE)
    return reads, names & set(OUTPUT_OPTIONS)


@pytest.mark.parametrize("script", [*CLI_SCRIPTS, *BENCHMARK_SCRIPTS])
def test_every_command_and_path_option_is_in_the_matrix(script, monkeypatch):
    """A command, or an option of one that reads or writes a path, that no line of the matrix reaches fails
    here: add a line for it to COMMANDS (and its kind to fault_matrix.KINDS if it is new). What happens
    around a command is generated from the same lines: each output option a second instance and a signal at
    each write (a line that runs here, not one that trains for minutes), each line its caches."""
    reads, writes = path_options_of(script, monkeypatch)
    lines = [command for command in COMMANDS if command.script == script]
    covered_reads = {option for command in lines for option in _reads_options(command)}
    covered_writes = {option for command in lines for option in command.writes}
    missing = sorted(reads - covered_reads) + sorted(writes - covered_writes)
    assert not missing, f"{script}.py: options no line of the fault matrix gives a fault: {missing}"
    assert reads | writes <= set(fm.KINDS) | writes, sorted((reads | writes) - set(fm.KINDS))
    around = [command for command in writing_commands() if command.script == script]
    unsignalled = writes - {option for command in around for option in command.writes}
    # A line that trains for minutes in processes of its own is signalled by its own tests.
    assert not unsignalled or all(command.trains for command in lines), (
        f"{script}.py: no line that runs here writes {sorted(unsignalled)}"
    )
    assert any(command.name == case.id for command in lines for case in cache_cases()) or all(
        command.trains or command.name in LONG_RUNS for command in lines
    ), f"{script}.py: no line meets caches that cannot be used"


# Around a command: what happens while it runs (fault_matrix.py's docstring). Generated from the same lines.


def writing_commands() -> list:
    return [command for command in COMMANDS if command.writes and not command.trains]


@pytest.fixture(scope="module")
def live_holder():
    """A live process of this host that holds locks in these tests: a first instance still running."""
    process = subprocess.Popen(["sleep", "3600"])
    yield process
    process.kill()
    process.wait()


def hold_lock_as(output: Path, pid: int) -> Path:
    """A lock of `output` held by process `pid` of this host, as `locks.OutputLock` writes it."""
    holder = locks.Holder(
        command="python scripts/first-instance.py", pid=pid, host=socket.gethostname(),
        started="2026-01-01 00:00:00 UTC", token="first", process_start=locks.process_start(pid),
    )  # fmt: skip
    path = locks.lock_path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dataclasses.asdict(holder)), encoding="utf-8")
    return path


def second_instance_cases() -> list:
    return [
        pytest.param(command, option, id=f"{command.name}-{option}")
        for command in COMMANDS
        for option in command.writes
    ]


@pytest.mark.parametrize(("command", "option"), second_instance_cases())
def test_a_second_instance_on_the_same_output(world, command, option, live_holder, tmp_path):
    """A command started while another holds its output (a job submitted twice) is refused in one line
    naming the holder, before it reads, deletes or writes anything; the holder's lock stays."""
    out = tmp_path / "out"
    out.mkdir()
    args = [str(item) for item in command.args(world, out)]
    target = Path(args[args.index(f"--{option}") + 1])
    lock = hold_lock_as(target, live_holder.pid)
    before = {**fm.sha(tmp_path), **fm.sha(world["data"].parent), **fm.sha(world["run"].parent)}
    result = run_script_file(f"{command.script}.py", *args, cwd=tmp_path, env=fm.environment())
    fm.check_outcome(result, f"{command.name} --{option} held: {' '.join(args)}", "error", [target])
    assert f"process {live_holder.pid} on {socket.gethostname()}" in result.stderr, result.stderr[-2000:]
    after = {**fm.sha(tmp_path), **fm.sha(world["data"].parent), **fm.sha(world["run"].parent)}
    changed = sorted(path for path, digest in before.items() if after.get(path) != digest)
    assert not changed, f"{command.name} with --{option} held changed or removed {changed}"
    assert lock.is_file()


# Commands that write, and whose writes are not all through the one write helper, with why. A command that
# writes and makes no call of it fails `test_a_signal_at_each_write` unless it is here.
OWN_WRITERS = {
    # Its output grows line by line beside a record of how far it got; a rerun continues it
    # (tests/test_translate.py stops it by signal at every window; test_around_a_command.py too).
    "translate": "resumable output",
    "translate (ctranslate2)": "resumable output",
    # A measurement that writes into a temporary folder of --output_dir, deleted afterwards.
    "benchmarks/time_checkpoint_save": "temporary folder",
    # Its steps are the commands above, each signalled at each of its writes here; a run of it is minutes.
    "quickstart": "its steps are the commands above",
}


def signal_at(point: str, call: int):
    """A `outputs.write_hook` that sends this process SIGTERM at `point` of its `call`-th write; the calls
    it saw, by output."""
    seen = []

    def hook(at, output):
        if at == "begin":
            seen.append(output)
        if at == point and len(seen) == call:
            os.kill(os.getpid(), signal.SIGTERM)

    return hook, seen


# Commands that train in this process: a signal after training finishes the final folder (docs/training.md).
TRAINS_HERE = ("train", "train_accelerate", "benchmarks/profile_training", "quickstart")


@pytest.mark.parametrize("point", ["begin", "end"])
@pytest.mark.parametrize("command", [pytest.param(c, id=c.name) for c in writing_commands()])
def test_a_signal_at_each_write(world, command, point, tmp_path, monkeypatch):
    """SIGTERM at each write of a command (each call of `outputs.staged`, as it begins and as it is about
    to be published): the command ends with status 143 and one line saying what it kept, no traceback; what
    existed is unchanged, nothing unfinished is left where a later command would take it as whole, and its
    locks are released. A command that trains here may finish its final folder instead, and then ends 0."""
    from hf_vanilla_transformer import outputs

    if command.name in OWN_WRITERS:
        pytest.skip(f"writes on its own: {OWN_WRITERS[command.name]}")
    call = 0
    while True:
        call += 1
        case = tmp_path / f"call-{call}"
        out = case / "out"
        out.mkdir(parents=True)
        hook, seen = signal_at(point, call)
        monkeypatch.setattr(outputs, "write_hook", hook)
        args = [str(item) for item in command.args(world, out)]
        before = {**fm.sha(world["data"].parent), **fm.sha(world["run"].parent)}
        result = run_script_file(f"{command.script}.py", *args, cwd=case, env=fm.environment())
        shown = f"{command.name}, SIGTERM at the {point} of write {call}: {' '.join(args)}"
        shown += f"\n{result.stderr[-3000:]}"
        assert "Traceback" not in result.stderr, shown
        if len(seen) < call:  # the run made fewer writes: every one has had its signal
            if call == 1 and result.returncode == 2:  # cannot run here (no Chromium): nothing to stop
                pytest.skip(f"{command.name} does not run here: {result.stderr.strip().splitlines()[-1]}")
            assert result.returncode == 0, shown
            written = [str(path) for path in out.rglob("*") if path.is_file()]
            assert call > 1 or not written, f"{command.name} wrote {written} but never through outputs.staged"
            break
        stopped = [line for line in result.stderr.splitlines() if line.startswith("Stopped by SIGTERM")]
        finished = command.script in TRAINS_HERE and result.returncode == 0
        assert finished or (result.returncode == 143 and len(stopped) == 1), shown
        assert not [line for line in result.stderr.splitlines() if line.startswith("error:")], shown
        after = {**fm.sha(world["data"].parent), **fm.sha(world["run"].parent)}
        assert after == before, shown
        left = sorted(str(path) for path in case.rglob("*") if path.name.endswith((".unfinished", ".lock")))
        assert not left, f"{shown}\nleft behind: {left}"
        if not finished:
            assert not seen[-1].exists(), f"{shown}\n{seen[-1]} was published"
        assert call < 20, shown


# Lines whose success takes minutes, with what meets their caches instead.
LONG_RUNS = {
    # Builds, tokenizes and times corpora; its data files are read by `data.files.load_data_folder`, whose
    # cache check the `(data-jsonl)` and `(data-parquet)` lines meet.
    "benchmarks/benchmark_corpus (multi30k)": "the (data-jsonl) lines",
    # Times checkpoint saves of a preset; it reads no data files and loads no metric.
    "benchmarks/time_checkpoint_save": "none: it uses no cache",
}


def cache_cases() -> list:
    return [
        pytest.param(command, id=command.name)
        for command in COMMANDS
        if not command.trains and command.name not in LONG_RUNS
    ]


@pytest.mark.parametrize("command", cache_cases())
def test_caches_that_cannot_be_used(world, command, tmp_path, monkeypatch):
    """The libraries' caches (`caches`: datasets') under a path that is a file, as a read-only or mistyped
    HF_HOME leaves them: a command that needs none runs as it runs with them, one that needs one ends in one
    line naming it, having changed nothing; the shared inputs never change. The libraries read these settings
    from their `config` modules when they use them, which is where the case sets them."""
    import datasets

    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder\n", encoding="utf-8")
    settings = [(datasets.config, "HF_DATASETS_CACHE", "datasets")]
    for module, name, folder in settings:
        monkeypatch.setattr(module, name, blocked / folder)
    if command.script == "demo":
        import gradio

        monkeypatch.setattr(gradio.Blocks, "launch", lambda *args, **kwargs: None)
    out = tmp_path / "out"
    out.mkdir()
    args = [str(item) for item in command.args(world, out)]
    before = {**fm.sha(tmp_path), **fm.sha(world["data"].parent), **fm.sha(world["run"].parent)}
    result = run_script_file(f"{command.script}.py", *args, cwd=tmp_path, env=fm.environment())
    shown = f"{command.name} with caches under a file: {' '.join(args)}\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr, shown
    after = {**fm.sha(tmp_path), **fm.sha(world["data"].parent), **fm.sha(world["run"].parent)}
    shared = {path for path in before if not path.startswith(str(tmp_path))}
    changed = sorted(path for path, digest in before.items() if after.get(path) != digest)
    if result.returncode == 0:
        changed = [path for path in changed if path in shared]  # its own output it may write
    assert not changed, f"{shown}\nchanged or removed {changed}"
    if result.returncode != 0:
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert result.returncode == 2 and len(errors) == 1, shown
        if str(blocked) not in errors[0]:  # refused for a reason of its own: the same with usable caches
            monkeypatch.undo()
            usable = run_script_file(f"{command.script}.py", *args, cwd=tmp_path, env=fm.environment())
            assert errors[0] in usable.stderr, f"{shown}\nwith usable caches:\n{usable.stderr[-2000:]}"
