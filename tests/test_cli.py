"""A user's mistake ends in one clear message and exit status 2, never a traceback; an unknown option gets the
closest real one; a real bug keeps its traceback. Each script runs as a user runs it, in a subprocess."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub.errors import StrictDataclassClassValidationError

from hf_vanilla_transformer import VanillaTransformerConfig
from hf_vanilla_transformer.cli import DEBUG_VARIABLE, is_user_error, parse_arguments, run_script
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.saving import save_model_folder

from .script_runner import run_script_file

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_MULTI30K = Path(__file__).parent / "fixtures" / "multi30k"


def _run(script: str, *args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_script_file(script, *args, cwd=cwd, env=env)


def _assert_user_error(result: subprocess.CompletedProcess, *expected: str) -> None:
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    for text in expected:
        assert text in result.stderr, result.stderr[-3000:]


@pytest.fixture
def model_dir(tmp_path, tiny_model, word_tokenizer):
    return save_model_folder(tiny_model, word_tokenizer, tmp_path / "model")


def test_a_missing_model_folder_is_named_not_sent_to_the_hub(tmp_path):
    result = _run("plot_attention.py", "--model", "outputs/nope/final", "--text", "x", cwd=tmp_path)
    _assert_user_error(result, "error: No model folder at outputs/nope/final", "model_cards/")
    assert "Repo id" not in result.stderr
    # In a fresh interpreter too, where the libraries' own import-time output would show: one line in all.
    fresh = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "plot_attention.py"), "--model", "outputs/nope/final",
         "--text", "x"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert fresh.returncode == 2 and fresh.stdout == "", fresh.stderr[-3000:]
    assert fresh.stderr.startswith("error: No model folder at outputs/nope/final")
    assert len(fresh.stderr.splitlines()) == 1, fresh.stderr[-3000:]


def test_training_before_the_tokenizer_exists_says_how_to_make_it(tmp_path):
    recipe = ROOT / "scripts" / "recipes" / "series.yaml"
    result = _run("train.py", str(recipe), "--max_steps", "2", cwd=tmp_path)
    _assert_user_error(
        result, "No tokenizer folder at outputs/tokenizers/series-bpe1k", "scripts/train_tokenizer.py"
    )


def test_an_unknown_option_gets_the_closest_real_one(tmp_path):
    recipe = ROOT / "scripts" / "recipes" / "series.yaml"
    _assert_user_error(
        _run("train.py", str(recipe), "--max_stepz", "5", cwd=tmp_path),
        "--max_stepz (did you mean --max_steps?)",
    )
    # a script without a recipe file too
    result = _run("plot_attention.py", "--modl", "x", "--text", "y", cwd=tmp_path)
    _assert_user_error(result, "--modl (did you mean --model?)")
    # a prefix of a real option is no abbreviation of it: argparse would have taken --num_beam as --num_beams
    result = _run("evaluate_model.py", "--model", "x", "--num_beam", "1", cwd=tmp_path)
    _assert_user_error(result, "--num_beam (did you mean --num_beams?)")
    # an option this package removed says what replaced it
    result = _run("train.py", str(recipe), "--paper_learning_rate", "false", cwd=tmp_path)
    _assert_user_error(
        result, "--paper_learning_rate (removed: eq. 3 sets the learning rate unless --learning_rate"
    )


def test_the_example_scripts_spelling_of_an_option_gets_this_packages_name(tmp_path):
    """Users of transformers' run_translation.py type its option names."""
    result = _run(
        "prepare_translation.py",
        *("--dataset_name", str(FIXTURE_MULTI30K), "--preprocessing_num_workers", "2"),
        *("--output_dir", str(tmp_path / "data")),
        cwd=tmp_path,
    )
    _assert_user_error(
        result,
        "--dataset_name (here called --dataset)",
        "--preprocessing_num_workers (here called --num_proc)",
    )
    assert not (tmp_path / "data").exists()


def test_each_example_script_spelling_names_an_option_of_the_training_script():
    from hf_vanilla_transformer.cli import EXAMPLE_SCRIPT_SPELLINGS
    from hf_vanilla_transformer.training import TRAINING_ARGUMENTS

    for old, new in EXAMPLE_SCRIPT_SPELLINGS.items():
        with pytest.raises(ValueError, match=f"--{old} \\(here called --{new}\\)"):
            parse_arguments(*TRAINING_ARGUMENTS, args=[f"--{old}", "1"])


def test_evaluating_without_a_data_set_says_which_option_is_missing(tmp_path, model_dir):
    result = _run("evaluate_model.py", "--model", str(model_dir), "--task", "translation", cwd=tmp_path)
    _assert_user_error(result, "No data set given: pass --dataset", "prepare_translation.py")


def test_corrupt_weights_end_in_one_message(tmp_path, model_dir):
    weights = model_dir / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    result = _run("plot_attention.py", "--model", str(model_dir), "--text", "ein hund", cwd=tmp_path)
    _assert_user_error(result, "truncated or corrupt")


def test_a_configuration_that_cannot_work_ends_in_one_message(tmp_path, model_dir):
    config = json.loads((model_dir / "config.json").read_text())
    config["encoder_attention_heads"] = 3  # d_model is 32
    (model_dir / "config.json").write_text(json.dumps(config))
    result = _run("plot_attention.py", "--model", str(model_dir), "--text", "ein hund", cwd=tmp_path)
    _assert_user_error(result, "must be divisible by `encoder_attention_heads` (3)")
    # With the debug variable, the same error shows its traceback.
    debug = _run(
        "plot_attention.py", "--model", str(model_dir), "--text", "x", cwd=tmp_path, env={DEBUG_VARIABLE: "1"}
    )
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_a_split_that_does_not_exist_is_named(tmp_path, model_dir):
    result = _run(
        "evaluate_model.py",
        "--model",
        str(model_dir),
        "--task",
        "translation",
        "--dataset",
        str(FIXTURE_MULTI30K),
        "--source_lang",
        "de",
        "--target_lang",
        "en",
        "--split",
        "dev",
        cwd=tmp_path,
    )
    _assert_user_error(result, "No split 'dev'", "validation")


def test_a_tokenizer_without_data_says_which_script_makes_the_data(tmp_path):
    (tmp_path / "empty").mkdir()
    for task, script in (("series", "generate_series.py"), ("translation", "prepare_translation.py")):
        result = _run(
            "train_tokenizer.py",
            "--task",
            task,
            "--dataset",
            str(tmp_path / "empty"),
            "--output_dir",
            str(tmp_path / "tok"),
            cwd=tmp_path,
        )
        _assert_user_error(result, "holds no prepared data set", script)


def test_user_errors_and_bugs_are_told_apart():
    def bad_configuration():
        VanillaTransformerConfig(d_model=128, encoder_attention_heads=3)

    def bug():
        raise TypeError("a bug")

    def deep_value_error():
        int("not a number")  # a ValueError, but raised outside the package

    def package_value_error():
        # A ValueError raised by the package that is not one of its user errors: a broken fairseq output is
        # no option the user gave.
        from benchmarks.fairseq_logs import read_hypotheses

        read_hypotheses("", count=1)

    def user_error():
        from hf_vanilla_transformer.training import TimeBudget

        TimeBudget(-1)

    with pytest.raises(StrictDataclassClassValidationError) as caught:
        bad_configuration()
    assert is_user_error(caught.value)
    with pytest.raises(SystemExit) as exit_info:
        run_script(bad_configuration)
    assert exit_info.value.code == 2
    with pytest.raises(TypeError):
        run_script(bug)
    with pytest.raises(ValueError):
        run_script(deep_value_error)
    with pytest.raises(ValueError, match="no hypothesis"):
        run_script(package_value_error)
    with pytest.raises(SystemExit) as exit_info:
        run_script(user_error)
    assert exit_info.value.code == 2


def test_a_script_that_ends_well_leaves_its_process_group_and_one_that_fails_keeps_it_for_the_launcher():
    """Under `accelerate launch` a script ends by destroying its gloo group while Python is whole: left to the
    interpreter's exit, a process whose work was done could abort and fail the launch."""
    import torch
    import torch.distributed as dist

    def work():
        total = torch.ones(1)
        dist.all_reduce(total)
        assert total.item() == 1.0

    def failing():
        raise UsageError("--input: no such file")

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        run_script(work)
        assert not dist.is_initialized()
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        with pytest.raises(SystemExit):
            run_script(failing)
        assert dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    run_script(lambda: None)  # no group: nothing to leave


def test_ctrl_c_ends_a_script_in_one_line_with_status_130(capsys, monkeypatch):
    def interrupted():
        print("working")
        raise KeyboardInterrupt

    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    with pytest.raises(SystemExit) as exit_info:
        run_script(interrupted)
    assert exit_info.value.code == 130
    assert exit_info.value.__context__ is None or exit_info.value.__suppress_context__
    captured = capsys.readouterr()
    assert captured.err == "Stopped by SIGINT; nothing written: run the command again.\n"
    assert captured.out == "working\n"
    # With the debug variable, the interrupt keeps its traceback.
    monkeypatch.setenv(DEBUG_VARIABLE, "1")
    with pytest.raises(KeyboardInterrupt):
        run_script(interrupted)


def test_a_closed_standard_output_ends_a_script_quietly_with_status_141():
    """`translate.py ... | head`: the reader leaves, the script ends as a shell command does, no traceback."""
    program = (
        "from hf_vanilla_transformer.cli import run_script\n"
        "def main():\n    for n in range(10**6): print('line', n)\n"
        "run_script(main)"
    )
    result = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -c "$0" | head -1; exit ${{PIPESTATUS[0]}}', program],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.stdout == "line 0\n"
    assert result.returncode == 141 and result.stderr == ""


@pytest.mark.parametrize("where", ["at the end", "while it runs"])
def test_a_full_standard_output_ends_a_script_in_one_line_with_status_2(where):
    """`> /dev/full` (a full disk): a report printed at the end fails only when standard output is flushed,
    which Python does at exit, past any handler; a long output fails while it is written. Either is one line
    and status 2, not a traceback, nor "Exception ignored" and status 120."""
    body = "print('report')" if where == "at the end" else "for n in range(10**5): print('line', n)"
    program = f"from hf_vanilla_transformer.cli import run_script\ndef main():\n    {body}\nrun_script(main)"
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-c", program], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120
        )
    assert (result.returncode, result.stderr) == (
        2,
        "error: standard output could not be written: no space left on device. Free space where it goes, or "
        "send it elsewhere.\n",
    )


def test_a_full_disk_under_another_file_is_not_called_standard_outputs():
    """The write that found no room was not standard output's (which takes more): it keeps its traceback."""
    program = (
        "from hf_vanilla_transformer.cli import run_script\n"
        "def main():\n    print('report')\n    open('/dev/full', 'w').write('x' * 10**5)\n"
        "run_script(main)"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and result.stdout == "report\n"
    assert "Traceback" in result.stderr and "standard output" not in result.stderr


@pytest.mark.parametrize("status", [0, 1, 130, 143, "error: a script's own message"])
def test_a_scripts_own_exit_passes_through_unchanged(capsys, status):
    """Training ends itself with 130 or 143 (SIGINT, SIGTERM) after saving a checkpoint: not reworded."""

    def exits():
        raise SystemExit(status)

    with pytest.raises(SystemExit) as exit_info:
        run_script(exits)
    assert exit_info.value.code == status
    assert capsys.readouterr().err == ""


def test_plot_attention_makes_a_missing_folder_and_replaces_nothing_unasked(tmp_path, model_dir):
    png = tmp_path / "new" / "folder" / "attention.png"
    plot = ["plot_attention.py", "--model", str(model_dir), "--text", "ein hund", "--output_file", str(png)]
    result = _run(*plot, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert png.read_bytes().startswith(b"\x89PNG")
    png.write_bytes(b"mine")
    again = _run(*plot, cwd=tmp_path)
    assert again.returncode == 2 and again.stderr.strip().splitlines() == [
        f"error: {png} exists: pass --overwrite to replace it, or another --output_file."
    ]
    assert png.read_bytes() == b"mine"
    replaced = _run(*plot, "--overwrite", cwd=tmp_path)
    assert replaced.returncode == 0 and png.read_bytes().startswith(b"\x89PNG")
    empty = _run("plot_attention.py", "--model", str(model_dir), "--text", "  ", cwd=tmp_path)
    assert empty.returncode == 2 and empty.stderr.strip().splitlines() == [
        "error: --text is empty: give the source text whose attention to draw."
    ]


def test_plot_attention_of_the_series_model_refuses_input_outside_its_grammar(tmp_path):
    series = ROOT / "model_cards" / "vanilla-transformer-series"
    result = _run("plot_attention.py", "--model", str(series), "--text", "sin(x)*exp(x)", cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert "'sin(x)' is outside the model's grammar" in lines[0]
    assert not (tmp_path / "attention.png").exists()


FOLDER_WRITERS = [
    ("average_checkpoints.py", ["--run_dir", "run"]),
    ("train_tokenizer.py", ["--task", "translation", "--text_files", str(FIXTURE_MULTI30K / "train.de.gz")]),
    (
        "prepare_translation.py",
        ["--dataset", str(FIXTURE_MULTI30K), "--source_lang", "de", "--target_lang", "en"],
    ),
    ("convert_marian.py", ["--model", "Helsinki-NLP/opus-mt-de-en"]),
    ("export_ctranslate2.py", ["--model", "model"]),
]


@pytest.mark.parametrize("script, options", FOLDER_WRITERS)
def test_no_script_writes_into_a_folder_that_holds_something_unless_asked(tmp_path, script, options):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("kept")
    result = _run(script, *options, "--output_dir", str(taken), cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert str(taken) in lines[0] and "--overwrite" in lines[0]
    assert [path.name for path in taken.iterdir()] == ["mine.txt"]


@pytest.mark.parametrize(
    "script, options",
    [
        *FOLDER_WRITERS,
        ("quickstart.py", []),
        ("train.py", ["--task", "series"]),
        ("generate_series.py", ["--num_examples", "100"]),
        ("benchmarks/quality_curve.py", ["--run_dir", "run", "--task", "translation"]),
        ("push_to_hub.py", ["--model", "model", "--dry_run"]),
    ],
)
def test_no_script_turns_a_file_into_its_output_folder_even_when_asked_to_overwrite(
    tmp_path, script, options
):
    taken = tmp_path / "notes.txt"
    taken.write_text("kept")
    option = "--folder" if script == "push_to_hub.py" else "--output_dir"
    result = _run(script, *options, option, str(taken), "--overwrite", cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert str(taken) in lines[0] and "is a file: give a folder" in lines[0]
    assert taken.read_text() == "kept"


@pytest.mark.parametrize(
    "script, options",
    [
        ("benchmarks/benchmark.py", ["--shapes", "tiny", "--repeats", "1"]),
        ("benchmarks/profile_training.py", [str(ROOT / "scripts" / "recipes" / "multi30k_de_en.yaml")]),
    ],
)
def test_no_script_replaces_an_existing_results_file_unless_asked(tmp_path, script, options):
    taken = tmp_path / "results.json"
    taken.write_text("kept")
    result = _run(script, *options, "--output_file", str(taken), cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert str(taken) in lines[0] and "--overwrite" in lines[0]
    assert taken.read_text() == "kept"


MISSING = "outputs/nope/final"  # looks local: a mistyped folder, never a Hub id


@pytest.mark.parametrize(
    ("script", "options", "named"),
    [
        ("plot_attention.py", ["--model", MISSING, "--text", "x"], "No model folder"),
        (
            "evaluate_model.py",
            ["--model", MISSING, "--task", "translation", "--dataset", "d"],
            "No model folder",
        ),
        ("export_ctranslate2.py", ["--model", MISSING, "--output_dir", "ct2"], "No model folder"),
        ("push_to_hub.py", ["--model", MISSING, "--folder", "hub", "--dry_run"], "No model folder"),
        (
            "prepare_translation.py",
            [
                "--dataset",
                "d",
                "--source_lang",
                "de",
                "--target_lang",
                "en",
                "--tokenizer",
                MISSING,
                "--output_dir",
                "d2",
            ],
            "No tokenizer",
        ),
        ("train.py", ["--tokenizer", MISSING, "--dataset", "d"], "No tokenizer folder"),
        (
            "train_accelerate.py",
            ["--tokenizer", MISSING, "--dataset", "d", "--max_tokens", "99"],
            "No tokenizer",
        ),
    ],
)
def test_every_script_names_a_missing_model_or_tokenizer_folder_instead_of_asking_the_hub(
    tmp_path, script, options, named
):
    """Every script's model and tokenizer options go through the one loader (`saving.check_*_location`): a
    mistyped local-looking path is named in one line before the Hub is asked (with or without
    HF_HUB_OFFLINE), and nothing is written."""
    (tmp_path / "outputs").mkdir()
    result = _run(script, *options, cwd=tmp_path)
    _assert_user_error(result, f"{named}", MISSING)
    assert "Repo id" not in result.stderr and "Traceback" not in result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["outputs"]  # nothing written


def test_training_from_a_missing_saved_model_names_it():
    from hf_vanilla_transformer.training import ModelArguments, build_model

    with pytest.raises(FileNotFoundError, match=f"No model folder at {MISSING}"):
        build_model(ModelArguments(model=MISSING), tokenizer=None)


@pytest.mark.parametrize(
    ("script", "options"),
    [
        ("train.py", ["--dataset", "d"]),
        ("train_accelerate.py", ["--dataset", "d", "--max_tokens", "99"]),
        ("evaluate_model.py", ["--dataset", "d"]),
    ],
)
def test_every_tool_with_a_task_refuses_a_model_of_the_other_task_naming_both(
    tmp_path, tiny_model, word_tokenizer, script, options
):
    tiny_model.config.task = "series"
    folder = save_model_folder(tiny_model, word_tokenizer, tmp_path / "series-model")
    tokenizer = ["--tokenizer", str(folder)] if script != "evaluate_model.py" else []
    result = _run(script, "--model", str(folder), "--task", "translation", *tokenizer, *options, cwd=tmp_path)
    _assert_user_error(result, "is a series model, not a translation one", "--task series")
