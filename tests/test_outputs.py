"""An output is never one of the command's own inputs, `--overwrite` or not: the rule
(`outputs.check_not_an_input`) on paths, symlinks and Hub ids, and the real scripts refusing such a command as
its options are parsed, with the input left as it was."""

import subprocess
from pathlib import Path

import pytest

from hf_vanilla_transformer.cli import is_user_error
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.outputs import check_not_an_input, check_output_options
from hf_vanilla_transformer.training import average_checkpoints, check_output_beside_checkpoints
from hf_vanilla_transformer.training.averaging import check_output_apart
from hf_vanilla_transformer.training.checkpoints import write_complete_record

from .script_runner import run_script_file


def _folder(path: Path) -> Path:
    """A stand-in for a model folder: the refusal comes before anything reads it."""
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    (path / "model.safetensors").write_bytes(b"weights")
    return path


def _contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_an_output_that_is_an_input_is_refused_naming_both(tmp_path):
    model = _folder(tmp_path / "model")
    with pytest.raises(UsageError) as refused:
        check_not_an_input(model, {"model": str(model)})
    assert str(refused.value) == (
        f"--output_dir {model} is the --model being read: writing there would replace it; give another "
        "--output_dir."
    )
    assert is_user_error(refused.value)
    # Spelt otherwise, the same folder
    with pytest.raises(UsageError, match="is the --model being read"):
        check_not_an_input(f"{tmp_path}/other/../model/", {"model": str(model)})


def test_an_output_that_holds_an_input_is_refused(tmp_path):
    checkpoint = _folder(tmp_path / "run" / "checkpoint-50")
    with pytest.raises(UsageError) as refused:
        check_not_an_input(tmp_path / "run", {"model": str(checkpoint)}, "--output_file")
    assert str(refused.value) == (
        f"--output_file {tmp_path / 'run'} holds the --model being read ({checkpoint}): writing there would "
        "replace it; give another --output_file."
    )
    with pytest.raises(UsageError, match="holds the --run_dir being read"):
        check_not_an_input(tmp_path, {"run_dir": [str(tmp_path / "elsewhere"), str(tmp_path / "run")]})


def test_an_output_inside_an_input_or_beside_it_is_fine(tmp_path, monkeypatch):
    run = _folder(tmp_path / "run")
    monkeypatch.chdir(run)
    check_not_an_input(".", {"run_dir": ".."})
    check_not_an_input(run / "averaged", {"run_dir": str(run)})
    check_not_an_input(run / "checkpoint-5" / "ct2", {"model": str(run)})
    check_not_an_input(tmp_path / "run-2", {"model": str(run)})  # a sibling with the same start
    check_not_an_input(tmp_path / "new", {"model": None, "dataset": ["", str(tmp_path / "missing")]})


def test_symlinks_are_resolved_both_ways(tmp_path):
    model = _folder(tmp_path / "model")
    (tmp_path / "link").symlink_to(model, target_is_directory=True)
    with pytest.raises(UsageError, match="is the --model being read"):
        check_not_an_input(tmp_path / "link", {"model": str(model)})
    with pytest.raises(UsageError, match="is the --model being read"):
        check_not_an_input(model, {"model": str(tmp_path / "link")})
    # An input reached through a link inside the output: replacing the output deletes the link.
    out = tmp_path / "out"
    out.mkdir()
    (out / "model").symlink_to(model, target_is_directory=True)
    with pytest.raises(UsageError, match="holds the --model being read"):
        check_not_an_input(out, {"model": str(out / "model")})


def test_a_hub_id_is_no_input_on_disk(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check_not_an_input(".", {"model": "Helsinki-NLP/opus-mt-de-en", "dataset": "bentrevett/multi30k"})
    # The same name as a local folder is one.
    _folder(tmp_path / "Helsinki-NLP" / "opus-mt-de-en")
    with pytest.raises(UsageError, match="holds the --model being read"):
        check_not_an_input(".", {"model": "Helsinki-NLP/opus-mt-de-en"})


def test_the_options_table_checks_each_output_against_each_input(tmp_path):
    run = _folder(tmp_path / "run")
    with pytest.raises(UsageError, match=f"--tokenized_output_dir {tmp_path} holds the --tokenizer"):
        check_output_options(
            {
                "output_dir": str(tmp_path / "data"),
                "tokenized_output_dir": str(tmp_path),
                "tokenizer": str(run),
            }
        )
    # A run continued from its own checkpoint writes into the run: no input of it.
    check_output_options({"output_dir": str(run), "resume_from_checkpoint": str(run / "checkpoint-5")})
    check_output_options({"output_dir": None, "output_file": None, "model": str(run)})


def _assert_refused(result: subprocess.CompletedProcess, message: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and lines == [f"error: {message}"], result.stderr[-3000:]


@pytest.mark.parametrize("where", ["same", "parent"])
def test_export_ctranslate2_refuses_to_write_over_the_model_it_reads_even_with_overwrite(tmp_path, where):
    model = _folder(tmp_path / "model")
    before = _contents(tmp_path)
    output = model if where == "same" else tmp_path
    result = run_script_file(
        "export_ctranslate2.py", "--model", model, "--output_dir", output, "--overwrite", cwd=tmp_path
    )
    relation = "is the --model being read" if where == "same" else f"holds the --model being read ({model})"
    _assert_refused(
        result,
        f"--output_dir {output} {relation}: writing there would replace it; give another --output_dir.",
    )
    assert _contents(tmp_path) == before


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_average_checkpoints_refuses_to_write_into_the_run_it_reads(tmp_path, overwrite):
    run = tmp_path / "run"
    _folder(run / "checkpoint-1")
    before = _contents(run)
    result = run_script_file(
        "average_checkpoints.py",
        "--run_dir",
        run,
        "--output_dir",
        run,
        "--last",
        "1",
        *overwrite,
        cwd=tmp_path,
    )
    message = f"--output_dir {run} is the --run_dir being read: writing there would replace it; give another"
    _assert_refused(result, f"{message} --output_dir.")
    assert _contents(run) == before


def _checkpoint(path: Path, step: int) -> Path:
    """A stand-in for a whole checkpoint (its record written): the refusal comes before anything reads it."""
    write_complete_record(_folder(path), step)
    return path


# Where an output of average_checkpoints.py would change a checkpoint of the run it reads, by what each says.
INTO_A_CHECKPOINT = {
    "a whole checkpoint": (
        "checkpoint-2",
        "is the checkpoint {run}/checkpoint-2: writing there would replace it",
    ),
    "one whose save did not finish": (
        "checkpoint-6",
        "is the checkpoint {run}/checkpoint-6: writing there would replace it",
    ),
    "inside a checkpoint": (
        "checkpoint-2/averaged",
        "lies inside the checkpoint {run}/checkpoint-2: writing there would change it",
    ),
    "a checkpoint's name": (
        "checkpoint-8",
        "is named as a checkpoint of the run (checkpoint-8): the run would take it for a save that did not "
        "finish, and delete it when resumed",
    ),
}


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
@pytest.mark.parametrize("where", INTO_A_CHECKPOINT)
def test_average_checkpoints_refuses_to_write_into_a_checkpoint_of_the_run(tmp_path, where, overwrite):
    """Inside the run folder, beside its checkpoints, is where an averaged model goes (`run/averaged`); into
    one of them, averaged or not, whole or not, it would replace what the user may resume from or look at.
    The empty folder of a save cut short passes for a new output (`check_output_location`): refused too."""
    run = tmp_path / "run"
    _checkpoint(run / "checkpoint-2", 2)
    _checkpoint(run / "checkpoint-4", 4)
    (run / "checkpoint-6").mkdir()  # a save stopped before its first file
    name, says = INTO_A_CHECKPOINT[where]
    output = run / name
    before, folders = _contents(tmp_path), sorted(tmp_path.rglob("*"))
    result = run_script_file(
        "average_checkpoints.py", "--run_dir", run, "--last", "1", "--output_dir", output, *overwrite,
        cwd=tmp_path,
    )  # fmt: skip
    _assert_refused(
        result,
        f"--output_dir {output} {says.format(run=run)}; give a folder of its own, e.g. --output_dir "
        f"{run / 'averaged'}.",
    )
    assert _contents(tmp_path) == before and sorted(tmp_path.rglob("*")) == folders


def test_an_averaged_model_is_never_written_where_it_would_change_a_checkpoint(tmp_path):
    """The rule as the library applies it to the checkpoints it is handed, symlinks resolved."""
    run = tmp_path / "run"
    checkpoint = _checkpoint(run / "checkpoint-2", 2)
    link = tmp_path / "link"
    link.symlink_to(checkpoint, target_is_directory=True)
    for output, says in [
        (link, f"is the checkpoint {checkpoint}"),
        (checkpoint / "averaged", f"lies inside the checkpoint {checkpoint}"),
        (tmp_path, f"holds the checkpoint {checkpoint}"),
    ]:
        with pytest.raises(UsageError, match=f"^--output_dir {output} {says}: writing there would"):
            average_checkpoints([checkpoint], output)
    check_output_apart(run / "averaged", [checkpoint])
    check_output_beside_checkpoints(run / "averaged", run)


@pytest.mark.parametrize("where", ["same", "parent"])
def test_train_refuses_to_train_over_the_model_it_starts_from(tmp_path, where):
    """`--overwrite` deletes an earlier run's checkpoints: the one it would start from among them."""
    model = _folder(tmp_path / "run" / "checkpoint-50")
    before = _contents(tmp_path)
    output = model if where == "same" else model.parent
    result = run_script_file(
        "train.py", "--model", model, "--output_dir", output, "--overwrite", "--dataset", "d", cwd=tmp_path
    )
    relation = "is the --model being read" if where == "same" else f"holds the --model being read ({model})"
    _assert_refused(
        result,
        f"--output_dir {output} {relation}: writing there would replace it; give another --output_dir.",
    )
    assert _contents(tmp_path) == before


def test_prepare_translation_checks_the_tokenized_folder_it_names_itself(tmp_path):
    """The default --tokenized_output_dir is `<output_dir>-tokenized`, made by the script, not parsed."""
    data = _folder(tmp_path / "data-tokenized")
    tokenizer = _folder(tmp_path / "tokenizer")
    before = _contents(tmp_path)
    result = run_script_file(
        "prepare_translation.py", "--dataset", data, "--source_lang", "de", "--target_lang", "en",
        "--output_dir", tmp_path / "data", "--tokenizer", tokenizer, "--overwrite", cwd=tmp_path,
    )  # fmt: skip
    _assert_refused(
        result, f"--tokenized_output_dir {data} is the --dataset being read: writing there would replace it; "
        "give another --tokenized_output_dir."
    )  # fmt: skip
    assert _contents(tmp_path) == before
