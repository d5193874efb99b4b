"""A task of a user's own, in one file outside the package (examples/number_words.py), taken through the
scripts as docs/tasks.md walks through it: its data, its tokenizer, training, evaluation, the pipeline and a
Hub folder. And the registry that lets it: a task file or an installed package's entry point, a name the
saved model records, and a model whose task is not installed here loading as plain text to text."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from hf_vanilla_transformer.cli import DEBUG_VARIABLE, make_parser, parse_dataclasses, parse_recipe_and_args
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.tasks import DataArguments, get_task, load_task_file, registry

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
    patch.setattr(registry, "_BROKEN", dict(registry._BROKEN))


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
    """A task's options are parsed beside every script's; one spelt like a script's own is refused, naming
    both, as the parser is built for the task file the command line names."""
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


@pytest.fixture
def install(monkeypatch, tmp_path):
    """`install(name="module:Class", ...)`: the tasks installed packages declare as entry points, their
    modules in the test's folder or in examples/; the modules are forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    modules = []

    def install(**points):
        entries = [EntryPoint(name, value, registry.ENTRY_POINT_GROUP) for name, value in points.items()]
        monkeypatch.setattr(
            registry, "entry_points", lambda group: entries if group == registry.ENTRY_POINT_GROUP else []
        )
        monkeypatch.setattr(registry, "_entry_points_read", False)
        modules.extend(value.split(":")[0] for value in points.values())

    yield install
    for module in modules:
        sys.modules.pop(module, None)


def _task_file(path: Path, name: str, options: str = "", body: str = "") -> Path:
    """A task file of task `name`: its options dataclass's fields (`options`), its class's body (`body`)."""
    path.write_text(
        textwrap.dedent("""
        from dataclasses import dataclass, field
        from datasets import Dataset, DatasetDict
        from hf_vanilla_transformer.options import Options
        from hf_vanilla_transformer.tasks import Task, register_task

        @dataclass
        class TaskOptions(Options):
        {options}

        @register_task
        class OwnTask(Task):
            name = {name!r}
            options = TaskOptions
        {body}
        """).format(
            options=textwrap.indent(textwrap.dedent(options) or "pass", "    "),
            name=name,
            body=textwrap.indent(textwrap.dedent(body), "    "),
        )
    )
    return path


TRAIN_SIZE = 'train_size: int = field(default=100, metadata={"help": "Training pairs.", "range": ">= 1"})'


@pytest.mark.parametrize("number_words_by", ["file", "entry point"])
def test_two_tasks_with_an_option_of_the_same_name_each_take_their_own(tmp_path, install, number_words_by):
    """A task installed by its package and another named by its file, or both installed, with an option of the
    same name (`train_size`): each command parses the chosen task's options alone, so each gets its own value;
    from a recipe too. `--help` lists each task's under its name."""
    _task_file(tmp_path / "their_dates.py", "dates", TRAIN_SIZE)
    points = {"dates": "their_dates:OwnTask"}
    if number_words_by == "entry point":
        points["number_words"] = "number_words:NumberWordsTask"
    install(**points)
    number_words = str(TASK_FILE) if number_words_by == "file" else "number_words"

    def parse(*args):
        return parse_dataclasses(make_parser(DataArguments, args=list(args)), list(args))

    (dates,) = parse("--task", "dates", "--train_size", "7")
    (numbers,) = parse("--task", number_words, "--train_size", "9")
    assert (dates.task, type(dates.options).__name__, dates.options.train_size) == ("dates", "TaskOptions", 7)
    assert (numbers.task, numbers.options.train_size, numbers.options.max_number) == (
        "number_words",
        9,
        999_999,
    )
    (dates,) = parse("--task", "dates")
    assert dates.options.train_size == 100
    with pytest.raises(
        UsageError, match="^`max_number` applies to the number_words task only; drop it for task"
    ):
        parse("--task", "dates", "--max_number", "5")

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"task: {number_words}\ntrain_size: 11\n")
    (numbers,) = parse_recipe_and_args(make_parser(DataArguments, args=[str(recipe)]), [str(recipe)])
    assert numbers.options.train_size == 11
    (dates,) = parse_recipe_and_args(make_parser(DataArguments, args=[]), [str(recipe), "--task", "dates"])
    assert dates.options.train_size == 11  # the recipe's value, for the task the command line chose
    text = make_parser(DataArguments, args=[]).format_help()
    assert "options of task dates" in text and "options of task number_words" in text
    chosen = make_parser(DataArguments, args=["--task", "dates"]).format_help()
    assert "options of task dates" in chosen and "options of task number_words" not in chosen


def test_an_error_in_a_task_file_is_told_in_one_line_at_its_line(tmp_path):
    """A task file is its author's code: a syntax error, an exception as it is imported, or one in a method a
    command calls ends the command in one line, `file:line: Type: message` (the innermost frame in the file),
    and the registry is left as it was; HF_VANILLA_TRANSFORMER_DEBUG=1 shows the traceback."""

    def prepare(task_file, **env):
        return run_script_file(
            "prepare_data.py", "--task", task_file, "--output_dir", "data", cwd=tmp_path, env=env
        )

    known = set(registry.registered_tasks())  # the package's, and those this process imported earlier

    (tmp_path / "broken.py").write_text(
        "from hf_vanilla_transformer.tasks import Task\n\ndef f(:\n    pass\n"
    )
    result = prepare("broken.py")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr[-3000:]
    assert result.stderr.startswith("error: broken.py:3: SyntaxError: ")

    (tmp_path / "failing.py").write_text("import math\n\nVALUE = math.sqrt(undefined_name)\n")
    result = prepare("failing.py")
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr == "error: failing.py:3: NameError: name 'undefined_name' is not defined\n"
    assert "hf_vanilla_transformer_task_failing" not in sys.modules

    _task_file(
        tmp_path / "buggy.py",
        "buggy",
        body="""
        def make_data(self, options, output_dir):
            return self.helper()

        def helper(self):
            return undefined_splits
    """,
    )
    result = prepare("buggy.py")
    assert result.returncode == 2, result.stderr[-3000:]
    line = next(
        n
        for n, text in enumerate((tmp_path / "buggy.py").read_text().splitlines(), 1)
        if "undefined_splits" in text
    )
    assert result.stderr == f"error: buggy.py:{line}: NameError: name 'undefined_splits' is not defined\n"
    debug = prepare("buggy.py", **{DEBUG_VARIABLE: "1"})
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "undefined_splits" in debug.stderr
    with pytest.raises(UsageError, match=r"failing\.py:3: NameError"):
        load_task_file(tmp_path / "failing.py")
    assert set(registry.registered_tasks()) == known  # failing.py's half-made registration rolled back


def test_a_numeric_task_option_without_a_range_is_refused_as_the_task_registers(tmp_path, install):
    """`--train_size -3` made empty data: every numeric option of a task must say its range. A task file
    without one is refused naming the option and the fix; an installed one breaks only itself."""
    unranged = 'train_size: int = field(default=5, metadata={"help": "Training pairs."})'
    _task_file(tmp_path / "unranged.py", "unranged", unranged)
    refusal = r"^Option --train_size of task 'unranged' \(.*unranged\.py\) takes a number but has no range: "
    with pytest.raises(UsageError, match=refusal + r'give its field one, .*"range": ">= 0"'):
        load_task_file(tmp_path / "unranged.py")
    assert "unranged" not in registry._TASKS
    # Numbers in any annotation; flags and words need no range.
    for annotation in ("float | None", "list[int]"):
        _task_file(tmp_path / "other.py", "other", f"sizes: {annotation} = None")
        with pytest.raises(UsageError, match="Option --sizes of task 'other'"):
            load_task_file(tmp_path / "other.py")
    _task_file(tmp_path / "words.py", "words", "shout: bool = False\nlanguage: str = 'en'")
    assert load_task_file(tmp_path / "words.py").name == "words"
    # A range nothing would check: the options must be `options.Options`.
    (tmp_path / "plain.py").write_text(
        _task_file(tmp_path / "plain.py", "plain", TRAIN_SIZE).read_text().replace("(Options)", "")
    )
    with pytest.raises(UsageError, match="have ranges but nothing checks them: subclass"):
        load_task_file(tmp_path / "plain.py")

    install(unranged="unranged:OwnTask")
    assert {"series", "translation"} <= set(registry.registered_tasks())
    with pytest.raises(UsageError, match=refusal):
        get_task("unranged")
    with pytest.raises(UsageError, match="--train_size must be at least 1, got -3"):
        parse_dataclasses(
            make_parser(DataArguments, args=[]), ["--task", str(TASK_FILE), "--train_size", "-3"]
        )


def test_prepare_data_refuses_a_task_that_leaves_out_a_split(tmp_path):
    _task_file(
        tmp_path / "partial.py",
        "partial",
        body="""
        def make_data(self, options, output_dir):
            return DatasetDict(train=Dataset.from_dict({"source": ["1"], "target": ["one"]}))
    """,
    )
    result = run_script_file("prepare_data.py", "--task", "partial.py", "--output_dir", "data", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr == (
        "error: make_data of task 'partial' (partial.py) made no validation or test split (it made train): a "
        "task's data has the splits train, validation, test.\n"
    )
    assert not (tmp_path / "data").exists()


def test_a_task_installed_and_named_by_its_file_is_one_task(tmp_path, install):
    _task_file(tmp_path / "their_dates.py", "dates", TRAIN_SIZE)
    install(dates="their_dates:OwnTask")
    installed = get_task("dates")
    assert load_task_file(tmp_path / "their_dates.py") is installed
    args = ["--task", str(tmp_path / "their_dates.py"), "--train_size", "3"]
    (dates,) = parse_dataclasses(make_parser(DataArguments, args=args), args)
    assert dates.task == "dates" and dates.task_spec is installed and dates.options.train_size == 3
    assert registry.registered_tasks()["dates"] is installed
    # A copy of the installed file elsewhere, edited or not, is another task of the same name: its code
    # would otherwise never run, without a word.
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(tmp_path / "their_dates.py", copy / "their_dates.py")
    with pytest.raises(UsageError, match="Two tasks are named 'dates'"):
        load_task_file(copy / "their_dates.py")


def test_a_task_option_spelt_like_a_scripts_own_is_refused_for_an_installed_task(tmp_path, install):
    _task_file(
        tmp_path / "their_seeds.py", "seeds", 'dataset: str = field(default="", metadata={"help": "x"})'
    )
    install(seeds="their_seeds:OwnTask")
    with pytest.raises(UsageError, match="Option --dataset of TaskOptions is also one of DataArguments"):
        make_parser(DataArguments, args=["--task", "seeds"])
    # a task only the model names: refused when it is known
    (args,) = parse_dataclasses(make_parser(DataArguments, args=[]), [])
    args.task = "seeds"
    with pytest.raises(UsageError, match="Option --dataset of TaskOptions is also one of DataArguments"):
        _ = args.task_spec


def test_a_third_built_in_task_is_one_folder_under_tasks(tmp_path):
    """A built-in task is a package of `tasks/` named as its task: adding one to a copy of the package (the
    number task of examples/, as `tasks/number_words/__init__.py`) changes no file outside that folder, and
    the registry, the data script and the command lines find it by name."""
    package = Path(__file__).resolve().parents[1] / "hf_vanilla_transformer"
    copy = tmp_path / "copy" / "hf_vanilla_transformer"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "tasks" / "number_words").mkdir()
    example = Path(__file__).resolve().parents[1] / "examples" / "number_words.py"
    (copy / "tasks" / "number_words" / "__init__.py").write_text(example.read_text(encoding="utf-8"))
    changed = sorted(
        str(path.relative_to(copy))
        for path in copy.rglob("*")
        if path.is_file() and not (package / path.relative_to(copy)).is_file()
    )
    assert changed == ["tasks/number_words/__init__.py"]
    env = {**os.environ, "PYTHONPATH": str(copy.parent)}
    scripts = Path(__file__).resolve().parents[1] / "scripts"
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "import hf_vanilla_transformer.tasks as t; print(t.__file__, *sorted(t.registered_tasks()))",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    ).stdout.split()
    assert found[0].startswith(str(copy)) and found[1:] == ["number_words", "series", "translation"], found
    made = subprocess.run(
        [sys.executable, str(scripts / "prepare_data.py"), "--task", "number_words", "--train_size", "50",
         "--held_out_size", "10", "--output_dir", str(tmp_path / "data")],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "data" / "dataset_dict.json").is_file()
    helped = subprocess.run(
        [sys.executable, str(scripts / "train.py"), "--task", "number_words", "--help"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert helped.returncode == 0 and "--max_number" in helped.stdout, helped.stderr


def test_a_task_with_the_scoring_hooks_of_before_1_0_is_refused_as_it_registers():
    """A task that still defines `load_metric`, or takes a `metric` in `score` or `report_details`, would be
    ignored or fail after a run's first validation: refused as it registers, naming the hooks and the fix."""
    from hf_vanilla_transformer.tasks import Task, register_task

    class Old(Task):
        name = "old_scoring"

        def load_metric(self):
            return None

        def score(self, metric, predictions, references):
            return {}

    with pytest.raises(UsageError, match=r"Old defines load_metric, score as tasks did before .*task_scores"):
        register_task(Old)
    assert "old_scoring" not in registry._TASKS

    class Today(Task):
        name = "today_scoring"

        def task_scores(self, predictions, references):
            return {"length": sum(map(len, predictions))}

    register_task(Today)
    assert registry._TASKS.pop("today_scoring").score(["ab"], ["ab"])["length"] == 2
