"""Recipe files: YAML (or JSON) read into the training arguments, overridden by the command line, checked
for unknown keys; and the shipped recipes."""

import json
import os
import subprocess
from dataclasses import fields
from pathlib import Path

import pytest

from hf_vanilla_transformer.cli import make_parser, parse_recipe_and_args
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.training import (
    TRAINING_ARGUMENTS,
    ModelArguments,
    build_model,
    load_config_overrides,
)

RECIPES = Path(__file__).resolve().parents[1] / "scripts" / "recipes"

RECIPE = """\
task: translation
max_steps: 500
weight_decay: 0.1
adam_epsilon: 1e-8        # YAML reads this as a string; the option's type makes it a float
lr_scale: 0.5
config_overrides:
  dropout: 0.3
  d_model: 64
"""


def _parse(*args):
    args = [str(a) for a in args]
    return parse_recipe_and_args(make_parser(*TRAINING_ARGUMENTS, args=args), args)


def test_command_line_overrides_a_yaml_recipe_and_keeps_the_rest(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    model_args, data_args, recipe_args, training_args = _parse(
        recipe, "--max_steps", "100", "--resume_from_checkpoint", "outputs/x/checkpoint-50", "--lr_scale", "2"
    )
    assert (
        training_args.max_steps == 100 and training_args.resume_from_checkpoint == "outputs/x/checkpoint-50"
    )
    assert recipe_args.lr_scale == 2.0
    assert training_args.weight_decay == 0.1 and data_args.task == "translation"  # kept from the recipe
    assert training_args.adam_epsilon == 1e-8
    assert training_args.adam_beta2 == 0.98 and training_args.lr_scheduler_type == "inverse_sqrt"  # defaults
    assert model_args.config_overrides == {"dropout": 0.3, "d_model": 64}
    assert load_config_overrides(model_args.config_overrides) == {"dropout": 0.3, "d_model": 64}

    # inline JSON on the command line replaces the recipe's mapping
    model_args, *_ = _parse(recipe, "--config_overrides", '{"dropout": 0.2}')
    assert load_config_overrides(model_args.config_overrides) == {"dropout": 0.2}


def test_none_on_the_command_line_takes_back_a_recipes_value_of_an_unset_option():
    recipe = RECIPES / "multi30k_de_en.yaml"
    _, _, recipe_args, training_args = _parse(
        recipe, "--decay_by_clock", "false", "--max_warmup_fraction", "none", "--max_train_minutes", "None"
    )
    assert recipe_args.max_warmup_fraction is None and recipe_args.max_train_minutes is None
    recipe_args.check(training_args)  # a step-counted schedule, as the recipe stands otherwise
    _, _, recipe_args, training_args = _parse(
        recipe, "--decay_by_clock", "false", "--max_train_minutes", "none"
    )
    with pytest.raises(UsageError, match="--max_warmup_fraction none"):
        recipe_args.check(training_args)
    with pytest.raises(SystemExit):  # any other word is still refused, by argparse
        _parse(recipe, "--max_warmup_fraction", "half")


def test_without_a_recipe_the_command_line_alone_is_parsed():
    _, data_args, recipe_args, training_args = _parse("--task", "translation", "--max_steps", "7")
    assert (data_args.task, training_args.max_steps, recipe_args.lr_scale) == ("translation", 7, None)


def test_json_recipe_still_loads(tmp_path):
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"max_steps": 30, "config_overrides": {"dropout": 0.0}}))
    model_args, _, _, training_args = _parse(recipe, "--warmup_steps", "5")
    assert (training_args.max_steps, training_args.warmup_steps) == (30, 5)
    assert model_args.config_overrides == {"dropout": 0.0}


def test_unknown_recipe_key_raises_naming_the_key_and_the_file(tmp_path):
    recipe = tmp_path / "typo.yaml"
    recipe.write_text("max_step: 100\nwarmup_steps: 10\n")
    with pytest.raises(ValueError, match=r"typo\.yaml sets 'max_step' \(did you mean 'max_steps'\?\)"):
        _parse(recipe)


def test_config_overrides_win_over_the_tokenizers_ids(word_tokenizer):
    # fairseq's `</s>` decoder start, a Multi30k lever, is an override of the tokenizer's `<s>`.
    args = ModelArguments(preset="transformer-tiny", config_overrides={"decoder_start_token_id": 2})
    config = build_model(args, word_tokenizer).config
    assert config.decoder_start_token_id == 2 != word_tokenizer.bos_token_id
    assert (config.bos_token_id, config.vocab_size) == (word_tokenizer.bos_token_id, len(word_tokenizer))
    with pytest.raises(ValueError, match="Unknown --preset 'transformer-huge'"):
        ModelArguments(preset="transformer-huge")


def test_the_example_scripts_spelling_of_a_recipe_key_gets_this_packages_name(tmp_path):
    recipe = tmp_path / "old.yaml"
    recipe.write_text("model_name_or_path: outputs/run/final\n")
    with pytest.raises(ValueError, match=r"old\.yaml sets 'model_name_or_path' \(here called 'model'\)"):
        _parse(recipe)


def test_missing_or_malformed_recipe_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such-recipe.yaml"):
        _parse(tmp_path / "no-such-recipe.yaml")
    listed = tmp_path / "list.yaml"
    listed.write_text("- max_steps\n- 3\n")
    with pytest.raises(ValueError, match=r"list\.yaml must be a mapping"):
        _parse(listed)


@pytest.mark.parametrize("name", ["series", "multi30k_de_en", "multi30k_de_en_paper"])
def test_shipped_recipes_parse_and_leave_the_device_to_the_trainer(name):
    path = RECIPES / f"{name}.yaml"
    assert "use_cpu" not in path.read_text()
    model_args, data_args, recipe_args, training_args = _parse(path)
    assert training_args.use_cpu is False
    assert training_args.save_total_limit == 6 and training_args.load_best_model_at_end is False
    if name == "series":
        assert data_args.task == "series" and recipe_args.max_tokens == 4000
        assert (recipe_args.max_train_minutes, recipe_args.lr_scale) == (118, 0.8)
        assert (training_args.weight_decay, training_args.max_grad_norm) == (0.1, 1.0)
        # A linear decay that the clock ends, on a machine of any speed; max_steps only bounds it.
        assert training_args.lr_scheduler_type == "linear" and recipe_args.decay_by_clock
        assert training_args.max_steps >= 50_000
        assert load_config_overrides(model_args.config_overrides)["d_model"] == 192
    else:
        assert data_args.task == "translation" and recipe_args.max_tokens == 4096
        assert (recipe_args.max_train_minutes, recipe_args.lr_scale) == (75, 0.5)
        assert (training_args.weight_decay, training_args.max_grad_norm) == (0.0, 0.0)  # the paper's
        assert training_args.warmup_steps == 600
        assert training_args.output_dir == "outputs/" + name.replace("_", "-")  # multi30k_de_en.sh uses it
        if name == "multi30k_de_en_paper":
            assert training_args.lr_scheduler_type == "inverse_sqrt" and not recipe_args.decay_by_clock
        else:  # the paper's recipe but for the schedule
            assert training_args.lr_scheduler_type == "linear" and recipe_args.decay_by_clock
            assert recipe_args.max_warmup_fraction == 0.6
            paper = _parse(RECIPES / "multi30k_de_en_paper.yaml")
            assert [vars(args) for args in paper[:3]] == [
                vars(model_args),
                vars(data_args),
                {**vars(recipe_args), "decay_by_clock": False, "max_warmup_fraction": None},
            ]


def test_the_long_multi30k_recipe_counts_its_schedule_in_steps():
    """Stopped and continued over sessions, a run keeps one schedule only if no clock decides it."""
    model_args, data_args, recipe_args, training_args = _parse(RECIPES / "multi30k_de_en_long.yaml")
    recipe_args.check(training_args)
    assert recipe_args.max_train_minutes is None and not recipe_args.decay_by_clock
    assert recipe_args.max_warmup_fraction is None
    assert training_args.lr_scheduler_type == "linear" and training_args.max_steps == 6000
    assert training_args.save_total_limit >= training_args.max_steps // training_args.save_steps
    assert load_config_overrides(model_args.config_overrides) == {"dropout": 0.3}
    # everything that decides the data and the model but dropout and the schedule is the shipped recipe's
    _, shipped_data, shipped_recipe, _ = _parse(RECIPES / "multi30k_de_en.yaml")
    assert vars(data_args) == vars(shipped_data)
    assert (recipe_args.max_tokens, recipe_args.batch_order, recipe_args.batch_size_multiple) == (
        shipped_recipe.max_tokens,
        shipped_recipe.batch_order,
        shipped_recipe.batch_size_multiple,
    )


SHIPPED_SERIES_OPTIONS = "--decay_by_clock false --max_train_minutes none --max_steps 24000"


def test_the_shipped_series_options_count_the_schedule_in_steps_and_are_the_ones_documented():
    """The shipped series model's training: series.yaml whose decay reaches zero at step 24,000 with no clock,
    so that a run stopped and continued keeps its schedule; the card, the README, series.sh and series.yaml
    give the same options."""
    _, _, recipe_args, training_args = _parse(RECIPES / "series.yaml", *SHIPPED_SERIES_OPTIONS.split())
    recipe_args.check(training_args)
    assert recipe_args.max_train_minutes is None and not recipe_args.decay_by_clock
    assert training_args.lr_scheduler_type == "linear" and training_args.max_steps == 24000
    root = RECIPES.parents[1]
    for path in ["README.md", "model_cards/vanilla-transformer-series/README.md", "scripts/recipes/series.sh",
                 "scripts/recipes/series.yaml"]:  # fmt: skip
        assert SHIPPED_SERIES_OPTIONS in (root / path).read_text(encoding="utf-8"), path
    for path in ["README.md", "model_cards/vanilla-transformer-series/README.md"]:  # on the 200,000
        assert f"SERIES_EXAMPLES=200000 bash scripts/recipes/series.sh {SHIPPED_SERIES_OPTIONS}" in (
            root / path
        ).read_text(encoding="utf-8"), path


def test_recipe_sh_scripts_train_from_the_yaml_recipes():
    assert "scripts/train.py scripts/recipes/series.yaml" in (RECIPES / "series.sh").read_text()


def _run_with_logging_python(script: str, tmp_path: Path, cwd: Path, *args, **env):
    """Run scripts/recipes/<script> in `cwd` with a stand-in `python` that logs its arguments (so nothing is
    written); return the result and the argument lists of its python commands, in order."""
    shim = tmp_path / "bin"
    shim.mkdir(exist_ok=True)
    (shim / "python").write_text('#!/bin/sh\necho "$@" >> "$LOG"\n')
    (shim / "python").chmod(0o755)
    log = tmp_path / f"calls-{len(list(tmp_path.glob('calls-*')))}.log"
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MULTI30K_DATA", "MULTI30K_RECIPE", "SERIES_EXAMPLES")
    }
    environment.update(PATH=f"{shim}{os.pathsep}{os.environ['PATH']}", LOG=str(log), **env)
    command = ["bash", str(RECIPES / script), *args]
    result = subprocess.run(command, env=environment, cwd=cwd, capture_output=True, text=True)
    calls = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
    return result, calls


def _series_recipe_run(work: Path, *args) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """series.sh run in `work` (its data, tokenizer and run folders are relative to where it runs)."""
    return _run_with_logging_python("series.sh", work, work, *args)


def test_series_recipe_script_hands_its_options_to_training(tmp_path):
    """The shipped series model is series.sh with options for its training step (the model card's command)."""
    options = ["--decay_by_clock", "false", "--max_train_minutes", "none", "--max_steps", "24000"]
    result, calls = _series_recipe_run(tmp_path, *options)
    assert result.returncode == 0, result.stderr
    scripts = [call[0] for call in calls]
    assert scripts == [
        "scripts/generate_series.py",
        "scripts/train_tokenizer.py",
        "scripts/train.py",
        "scripts/average_checkpoints.py",
        *["scripts/evaluate_model.py"] * 3,
    ]
    # no --overwrite of its own: run again, it neither trains over a stopped run nor over one it did not make
    assert calls[2] == ["scripts/train.py", "scripts/recipes/series.yaml", *options]
    out = _parse(RECIPES / "series.yaml")[3].output_dir
    assert calls[3][calls[3].index("--run_dir") + 1] == out


def test_series_recipe_script_trains_on_more_examples_with_the_same_test_split(tmp_path):
    """SERIES_EXAMPLES=200000: the 50,000 first (validation, test, tokenizer), then 200,000 that hold out
    their validation and test expressions, trained on, averaged and scored in outputs/series-200k."""
    options = ["--max_steps", "24000"]
    result, calls = _run_with_logging_python(
        "series.sh", tmp_path, tmp_path, *options, SERIES_EXAMPLES="200000"
    )
    assert result.returncode == 0, result.stderr
    assert [call[0] for call in calls[:5]] == [
        "scripts/generate_series.py",
        "scripts/train_tokenizer.py",
        "scripts/generate_series.py",
        "scripts/train.py",
        "scripts/average_checkpoints.py",
    ]
    assert calls[0][calls[0].index("--output_dir") + 1] == "outputs/data/series-50k"
    assert calls[1][calls[1].index("--dataset") + 1] == "outputs/data/series-50k"
    assert calls[2] == ["scripts/generate_series.py", "--num_examples", "200000", "--held_out_from",
                        "outputs/data/series-50k", "--output_dir", "outputs/data/series-200k"]  # fmt: skip
    data = ["--dataset", "outputs/data/series-200k"]
    assert calls[3] == ["scripts/train.py", "scripts/recipes/series.yaml", *data,
                        "--output_dir", "outputs/series-200k", *options]  # fmt: skip
    assert calls[4][calls[4].index("--run_dir") + 1] == "outputs/series-200k"
    assert {call[call.index("--dataset") + 1] for call in calls[5:]} == {"outputs/data/series-200k"}
    _, calls = _run_with_logging_python("series.sh", tmp_path, tmp_path, SERIES_EXAMPLES="12345")
    assert calls[3][calls[3].index("--output_dir") + 1] == "outputs/series-12345"


@pytest.mark.parametrize(
    "args, env, message",
    [
        (["--dataset", "x"], {}, "leave out --dataset"),
        (["--dataset=x"], {"SERIES_EXAMPLES": "200000"}, "leave out --dataset"),
        ([], {"SERIES_EXAMPLES": "200k"}, "SERIES_EXAMPLES=200k is not a number of examples"),
    ],
)
def test_series_recipe_script_refuses_other_data_before_any_step(tmp_path, args, env, message):
    result, calls = _run_with_logging_python("series.sh", tmp_path, tmp_path, *args, **env)
    assert result.returncode == 2 and calls == []
    assert message in result.stderr


def test_series_recipe_script_answers_help_before_any_step(tmp_path):
    result, calls = _series_recipe_run(tmp_path, "--max_steps", "10", "--help")
    assert result.returncode == 0 and calls == []
    assert (
        result.stdout.startswith("Series expansion, end to end")
        and "--resume_from_checkpoint" in result.stdout
    )


@pytest.mark.parametrize(
    "option", [["--output_dir", "x"], ["--output_dir=x"], ["--output-dir", "x"], ["--output-dir=x"]]
)
def test_series_recipe_script_refuses_another_output_folder_before_any_step(tmp_path, option):
    result, calls = _series_recipe_run(tmp_path, "--max_steps", "10", *option)
    assert result.returncode == 2 and calls == []
    assert f"leave out {option[0]}" in result.stderr


def _multi30k_recipe_calls(tmp_path, *args, **env) -> list[list[str]]:
    """Run multi30k_de_en.sh from the project root, as users do; return the argument lists of its python
    commands, in order."""
    result, calls = _run_with_logging_python("multi30k_de_en.sh", tmp_path, RECIPES.parents[1], *args, **env)
    assert result.returncode == 0, result.stderr
    assert calls[0][0] == "scripts/prepare_translation.py"
    return calls


def test_multi30k_recipe_reads_the_hub_copy_by_default_or_the_data_it_is_given(tmp_path):
    def data(*args, **env):
        first = _multi30k_recipe_calls(tmp_path, *args, **env)[0]
        return first[first.index("--dataset") + 1]

    assert data() == "bentrevett/multi30k"
    assert data("path/to/multi30k") == "path/to/multi30k"
    assert data(MULTI30K_DATA="/data/multi30k/raw") == "/data/multi30k/raw"
    # No shipped recipe may depend on a folder that exists only on the developers' machines.
    assert not [path.name for path in RECIPES.iterdir() if "../shared" in path.read_text()]


@pytest.mark.parametrize("name", ["multi30k_de_en", "multi30k_de_en_paper"])
def test_multi30k_recipe_script_trains_averages_and_evaluates_in_the_recipes_folder(tmp_path, name):
    environment = {} if name == "multi30k_de_en" else {"MULTI30K_RECIPE": f"scripts/recipes/{name}.yaml"}
    calls = _multi30k_recipe_calls(tmp_path, **environment)
    out = _parse(RECIPES / f"{name}.yaml")[3].output_dir
    train = ["scripts/train.py", f"scripts/recipes/{name}.yaml", "--output_dir", out, "--overwrite"]
    assert calls[2] == train  # the recipe remakes its run
    assert calls[3][:3] == ["scripts/average_checkpoints.py", "--run_dir", out]
    assert [call[call.index("--model") + 1] for call in calls[4:]] == [f"{out}/final", f"{out}/averaged"]


def test_multi30k_recipe_script_refuses_a_missing_recipe_before_any_step(tmp_path):
    environment = {**os.environ, "MULTI30K_RECIPE": "scripts/recipes/no_such.yaml"}
    script = str(RECIPES / "multi30k_de_en.sh")
    result = subprocess.run(["bash", script], env=environment, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout == ""
    assert "no recipe file at scripts/recipes/no_such.yaml" in result.stderr
    assert not (tmp_path / "outputs").exists()


def test_every_option_has_help():
    """`--help` of the training script explains every option, including those the paper's recipe
    redefines (a redefined dataclass field loses its parent's help)."""
    for dtype in TRAINING_ARGUMENTS:
        missing = [f.name for f in fields(dtype) if f.init and not f.metadata.get("help")]
        assert not missing, f"{dtype.__name__}: {missing}"
    text = make_parser(*TRAINING_ARGUMENTS, args=[]).format_help()
    assert "Clip gradients to this global norm" in text and "Stop training (and save)" in text


def test_tutorial_recipe_is_the_tutorials_setup():
    """Judge & Prosper's model and optimiser, with our flags: the side-by-side comparison's other half."""
    model_args, data_args, recipe_args, training_args = _parse(RECIPES / "series_tutorial.yaml")
    config = load_config_overrides(model_args.config_overrides)
    assert (config["d_model"], config["encoder_layers"], config["decoder_layers"]) == (200, 4, 4)
    assert config["position_embedding_type"] == "learned" and config["label_smoothing"] == 0.0
    assert config["share_encoder_decoder_embeddings"] is False and config["tie_word_embeddings"] is False
    assert config["output_bias"] is True
    assert training_args.learning_rate == 5e-4 and training_args.unset_schedule == ()
    assert (training_args.lr_scheduler_type, training_args.max_grad_norm) == ("constant", 1.0)
    assert (training_args.adam_beta2, training_args.adam_epsilon) == (0.999, 1e-8)
    assert training_args.per_device_train_batch_size == 128 and recipe_args.max_tokens is None
    assert (data_args.max_source_length, data_args.max_target_length) == (199, 199)
    assert recipe_args.max_train_minutes == 118  # the budget series.yaml has


def test_gpu_recipe_sees_more_examples_than_the_tutorial(monkeypatch):
    """At about 103 examples per 4,000-token batch (the series card), 16,000 tokens hold about 410. Its
    precision is the device's (`devices.default_mixed_precision`): float32 on a CPU."""
    import torch
    import yaml

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    path = RECIPES / "series_gpu.yaml"
    assert not {"bf16", "fp16", "use_cpu"} & set(yaml.safe_load(path.read_text()))
    _, _, recipe_args, training_args = _parse(path)
    assert not (training_args.bf16 or training_args.fp16)
    examples_per_batch = 103 * recipe_args.max_tokens / 4000
    assert training_args.max_steps * examples_per_batch >= 20_000 * 128
