"""A task of a user's own, in one file outside the package (examples/number_words.py), taken through the
scripts as docs/tasks.md walks through it: its data, its tokenizer, training, evaluation, the pipeline and a
Hub folder. And the registry that lets it: a task file or an installed package's entry point, a name the
saved model records, and a model whose task is not installed here loading as plain text to text."""

import json
import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.tasks import get_task, load_task_file, registry

from .script_runner import run_code, run_script_file

ROOT = Path(__file__).resolve().parents[1]
TASK_FILE = ROOT / "examples" / "number_words.py"


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """Each test registers into a copy of the registry: a task it adds is gone for the tests that follow."""
    _isolate(monkeypatch)


def _isolate(patch):
    registry.registered_tasks()  # the installed tasks, read before the copy
    patch.setattr(registry, "_TASKS", dict(registry._TASKS))
    patch.setattr(registry, "_FILES", dict(registry._FILES))


def _ok(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The walkthrough's commands, shrunk: 2,000 pairs and a tiny model trained for 40 steps."""
    work = tmp_path_factory.mktemp("number-words")
    task = ["--task", str(TASK_FILE)]
    with pytest.MonkeyPatch.context() as patch:
        _isolate(patch)
        _make(work, task)
    return work


def _make(work, task):
    _ok(run_script_file("prepare_data.py", *task, "--output_dir", "data", "--train_size", "2000",
                        "--held_out_size", "40", "--max_number", "9999", cwd=work))  # fmt: skip
    _ok(run_script_file("train_tokenizer.py", *task, "--dataset", "data", "--vocab_size", "200",
                        "--output_dir", "tokenizer", cwd=work))  # fmt: skip
    _ok(run_script_file("train.py", *task, "--dataset", "data", "--tokenizer", "tokenizer", "--preset",
                        "transformer-tiny", "--max_tokens", "1024", "--max_steps", "40", "--warmup_steps",
                        "10", "--max_source_length", "16", "--max_target_length", "32", "--save_strategy",
                        "no", "--eval_strategy", "no", "--output_dir", "run", cwd=work))  # fmt: skip


def test_the_task_file_makes_its_data_and_tokenizer(trained):
    from datasets import load_from_disk

    data = load_from_disk(str(trained / "data"))
    assert {split: data[split].num_rows for split in data} == {"train": 2000, "validation": 40, "test": 40}
    numbers = [set(data[split]["number"]) for split in data]
    assert not (numbers[0] & numbers[1] or numbers[0] & numbers[2] or numbers[1] & numbers[2])
    in_words = sys.modules[type(load_task_file(TASK_FILE)).__module__].in_words
    test = data["test"]
    assert all(words == in_words(int(n)) for n, words in zip(test["number"], test["words"], strict=True))
    assert in_words(90017) == "ninety thousand seventeen" and in_words(42) == "forty-two"


def test_training_records_the_task_by_name_and_evaluation_scores_it(trained):
    config = json.loads((trained / "run" / "final" / "config.json").read_text())
    assert config["task"] == "number_words" and config["langs"] is None
    task = ["--task", str(TASK_FILE)]
    result = _ok(run_script_file("evaluate_model.py", "--model", "run/final", *task, "--dataset", "data",
                                 "--split", "test", "--num_beams", "1", cwd=trained))  # fmt: skip
    report = json.loads(next((trained / "run" / "final").glob("eval-test-*.json")).read_text())
    assert report["data"]["task"] == "number_words" and report["num_examples"] == 40
    assert 0 <= report["metrics"]["exact_match"] <= 1 and "exact_match_stderr" in report["metrics"]
    assert report["data"]["max_number"] == 999_999  # the task's options, as the run gave them
    assert "exact_match" in result.stdout


def test_without_the_task_file_evaluation_says_how_to_get_it(trained):
    # A fresh interpreter: this one has the task registered since the fixture ran.
    script = ROOT / "scripts" / "evaluate_model.py"
    command = [sys.executable, str(script), "--model", "run/final", "--dataset", "data"]
    result = subprocess.run(command, cwd=trained, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "trained for task 'number_words', which is not installed here" in result.stderr
    assert "--task path/to/task.py" in result.stderr


def test_the_pipeline_checks_inputs_with_the_task_and_without_it_takes_plain_text(trained):
    from transformers import pipeline

    from hf_vanilla_transformer import PIPELINE_TASK, Seq2SeqGenerationPipeline

    load_task_file(TASK_FILE)
    folder = str(trained / "run" / "final")
    pipe = pipeline(PIPELINE_TASK, model=folder, pipeline_class=Seq2SeqGenerationPipeline)
    assert isinstance(pipe("1234", max_new_tokens=4)[0]["generated_text"], str)
    with pytest.raises(ValueError, match="not a number written in digits"):
        pipe("twelve")
    # A process that never saw the task: the model is a plain text-to-text model, its inputs unchecked.
    code = """
        import sys
        from transformers import pipeline
        from hf_vanilla_transformer import PIPELINE_TASK, Seq2SeqGenerationPipeline
        pipe = pipeline(PIPELINE_TASK, model=sys.argv[1], pipeline_class=Seq2SeqGenerationPipeline)
        print(repr(pipe("twelve", max_new_tokens=3)[0]["generated_text"]))
    """
    result = run_code(textwrap.dedent(code), trained / "run" / "final", cwd=trained)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().startswith("'")


def test_the_model_becomes_a_hub_folder(trained):
    (trained / "card.md").write_text("---\nlicense: mit\n---\n# Numbers in words\n")
    result = _ok(run_script_file("push_to_hub.py", "--model", "run/final", "--card", "card.md", "--folder",
                                 "hub", "--dry_run", cwd=trained))  # fmt: skip
    assert "model.safetensors" in result.stdout and (trained / "hub" / "README.md").is_file()
    assert json.loads((trained / "hub" / "config.json").read_text())["task"] == "number_words"


def test_a_task_file_must_register_exactly_one_task(tmp_path):
    empty = tmp_path / "nothing.py"
    empty.write_text("x = 1\n")
    with pytest.raises(UsageError, match="registered 0 tasks"):
        load_task_file(empty)
    with pytest.raises(FileNotFoundError, match="No task file at"):
        load_task_file(tmp_path / "missing.py")
    for file_name, task_name, refusal in [
        ("clash.py", "series", "Two tasks are named 'series'"),
        ("bad.py", "Bad Name", "give it a `name` of lower-case letters"),
    ]:
        path = tmp_path / file_name
        path.write_text(
            "from hf_vanilla_transformer.tasks import Task, register_task\n"
            f"@register_task\nclass Other(Task):\n    name = {task_name!r}\n"
        )
        with pytest.raises(UsageError, match=refusal):
            load_task_file(path)


def test_an_option_of_a_task_that_another_option_has_is_refused(tmp_path):
    """A task's options join every script's; one spelt like a script's own is refused, naming both."""
    from hf_vanilla_transformer.cli import make_parser
    from hf_vanilla_transformer.tasks import DataArguments

    task = tmp_path / "seeded.py"
    task.write_text(
        textwrap.dedent("""
        from dataclasses import dataclass, field
        from hf_vanilla_transformer.tasks import Task, register_task

        @dataclass
        class SeededOptions:
            dataset: str = field(default="", metadata={"help": "clashes"})

        @register_task
        class Seeded(Task):
            name = "seeded"
            options = SeededOptions
    """)
    )
    with pytest.raises(UsageError, match="Option --dataset of SeededOptions is also one of DataArguments"):
        make_parser(DataArguments, args=["--task", str(task)])


def test_an_installed_package_registers_its_task_by_entry_point(tmp_path, monkeypatch):
    package = tmp_path / "their_tasks.py"
    package.write_text(
        "from hf_vanilla_transformer.tasks import Task\nclass Reverse(Task):\n    name = 'reverse'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    points = [EntryPoint("reverse", "their_tasks:Reverse", registry.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(
        registry, "entry_points", lambda group: points if group == registry.ENTRY_POINT_GROUP else []
    )
    monkeypatch.setattr(registry, "_entry_points_read", False)
    assert get_task("reverse").name == "reverse" and registry.find_task("reverse") is not None
    monkeypatch.delitem(sys.modules, "their_tasks")


def test_a_model_of_a_task_not_installed_is_plain_text_to_text():
    plain = registry.task_or_plain("not_installed_here")
    assert plain.name == "not_installed_here" and plain.splits_into_sentences
    plain.check_input("anything at all")
    assert registry.input_rules("not_installed_here") == (None, True)
    check, splits = registry.input_rules("series")
    assert not splits
    check("sin(a*x)")
    with pytest.raises(ValueError, match="log"):
        check("log(x)")


def test_the_demo_page_takes_the_task_from_its_file(trained):
    import demo  # scripts/demo.py

    spec = demo.ModelSpec.parse(f"{TASK_FILE}={trained / 'run' / 'final'}")
    page_model = demo.DemoModel.load(spec)
    assert page_model.task.name == "number_words" and page_model.task.demo_examples == ("7", "1234", "90017")
    assert page_model.check_input(" 1234 ") == "1234"
    with pytest.raises(demo.DemoInputError, match="not a number written in digits"):
        page_model.check_input("twelve")
