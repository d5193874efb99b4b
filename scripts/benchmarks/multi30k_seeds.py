r"""Multi30k de→en recipes at equal updates (or equal minutes), with seeds: each arm trained with every seed
for the same number of updates, its last checkpoint scored on test_2016_flickr (beam 4, length penalty 0.6,
sacreBLEU and chrF),
and each arm's difference from the first arm (the baseline) set against the seeds' spread
(`seed_comparison.py` beside this script). Validation loss is logged every `--eval_steps` updates
and drawn for every run in one PNG.

    python scripts/benchmarks/multi30k_seeds.py --max_steps 800 --seeds 0 1 \
        --output_dir outputs/seeds-multi30k \
        --arm "baseline=--config_overrides '{\"init_method\": \"xavier\"}' \
        --batch_order padded_length --batch_size_multiple 1" \
        "fairseq-init+batches=--config_overrides '{\"init_method\": \"fairseq\"}' \
        --batch_order source_length --batch_size_multiple 8"

(the comparison in docs/experiments/multi30k.md: the package as it was against fairseq's initialisation and
batches, both now the defaults of the Multi30k recipes.) `--fairseq_arm NAME` adds fairseq 0.12 itself as the
first arm, the baseline: the same pieces, model and schedule (`fairseq_train.sh`), the same updates and seeds,
validation on the same pairs, its last checkpoint decoded by `fairseq-generate` with the same beam and length
penalty and scored by the same metric. fairseq beside the recipe as it is (docs/benchmarks.md has the parity
table, with the two arms above beside fairseq):

    python scripts/benchmarks/multi30k_seeds.py --max_steps 800 --seeds 0 1 \
        --output_dir outputs/seeds-parity --fairseq_arm fairseq-0.12 --arm "ours="

`--max_minutes M` gives every run M minutes of the clock instead (no validation; run one at a time, as a
clock measures the machine too), and each side its own recipe: ours the shipped one, fairseq its inverse
square root with its last 5 checkpoints after the warmup averaged (scored both ways), and with
`--fairseq_linear_arm` fairseq with our linear decay, which ends at the update count its inverse-square-root
run of the same seed reached in M minutes (fairseq's decay needs an update count; ours decays by the clock).
The table in docs/benchmarks.md, six runs of 20 minutes (about 2 hours 10 minutes with scoring):

    python scripts/benchmarks/multi30k_seeds.py --max_minutes 20 --parallel 1 --seeds 0 1 \
        --recipe scripts/recipes/multi30k_de_en.yaml --output_dir outputs/minutes-multi30k \
        --fairseq_arm fairseq-isqrt --fairseq_linear_arm fairseq-linear --arm "ours="

`--arm` takes every arm, each `name=options`: `scripts/train.py` options added to the recipe (split as a
shell splits them; an empty `options` is the recipe as it is). Runs go `--parallel` at a time, each on its
share of the cores; at equal updates a run's result does not depend on the machine's load, only its duration
does (single-threaded runs are deterministic). A finished run (`final/`, or fairseq's `checkpoint_last.pt`) is
not trained again, and a scored run is not scored again, so an interrupted comparison continues where it
stopped; an unfinished run folder is refused (delete it to train it again). Needs the data and tokenizer steps
of scripts/recipes/multi30k_de_en.sh first; the fairseq arm makes its environment on first use
(`fairseq_prepare.sh`, about 5 minutes).
"""

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from datasets import load_from_disk

# Run as `python scripts/benchmarks/multi30k_seeds.py`: its helpers are the `benchmarks` package in scripts/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import fairseq_logs
from benchmarks.seed_comparison import (
    compare_arms,
    format_comparison,
    plot_validation_curves,
    validation_curve,
)
from hf_vanilla_transformer.cli import load_recipe, make_parser, parse_arguments, read_recipe_file, run_script
from hf_vanilla_transformer.data.files import load_saved_dataset
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.tasks.translation import TranslationTask
from hf_vanilla_transformer.training import TRAINING_ARGUMENTS
from hf_vanilla_transformer.training.logs import LOSS_LOG_NAME

REPORT = "eval-test-beam4-lp0.6.json"
FAIRSEQ_SCORES = "scores.json"  # a fairseq run's test scores, in the metric names of REPORT
# fairseq_train.sh holds this recipe's model and schedule for fairseq; no other recipe is translated for it.
FAIRSEQ_RECIPE = "multi30k_de_en_paper.yaml"
# At equal minutes, fairseq's own recipe too: its last AVERAGED checkpoints averaged, one saved every
# FAIRSEQ_SAVE_UPDATES updates.
AVERAGED = 5
FAIRSEQ_SAVE_UPDATES = 200
FAIRSEQ_WARMUP = 600  # fairseq_train.sh's: checkpoints before its end are not averaged


# The commands each run is made of, found from here: the benchmark runs from any folder.
SCRIPTS = Path(__file__).resolve().parents[1]


@dataclass
class SeedArguments(Options):
    arm: list[str] = field(
        metadata={
            "help": "Every arm, each name=options; the first is the baseline (--arm baseline= 'x=--seed 3')."
        }
    )
    seeds: list[int] = field(
        default_factory=lambda: [0, 1], metadata={"help": "Seeds of every arm.", "range": ">= 0"}
    )
    max_steps: int = field(default=1000, metadata={"help": "Updates of every run.", "range": ">= 1"})
    eval_steps: int = field(
        default=200, metadata={"help": "Validation loss every N updates.", "range": ">= 1"}
    )
    recipe: str = field(default="scripts/recipes/multi30k_de_en_paper.yaml", metadata={"help": "The recipe."})
    parallel: int = field(
        default=2, metadata={"help": "Runs at a time (each on cores / parallel threads).", "range": ">= 1"}
    )
    output_dir: str = field(
        default="outputs/seeds-multi30k", metadata={"help": "One folder per run, and the report."}
    )
    dataset: str = field(default="outputs/data/multi30k-de-en", metadata={"help": "Tokenized by the recipe."})
    fairseq_arm: str | None = field(
        default=None,
        metadata={"help": f"Also train fairseq 0.12 as this arm, the baseline (recipe {FAIRSEQ_RECIPE})."},
    )
    fairseq_linear_arm: str | None = field(
        default=None,
        metadata={
            "help": "With --fairseq_arm: also fairseq with a linear decay to zero, ending at the update its "
            "--fairseq_arm run of the same seed ended at."
        },
    )
    max_minutes: float | None = field(
        default=None,
        metadata={
            "help": "Train every run for this many minutes instead of --max_steps updates, without "
            "validation (a clock: run alone, --parallel 1).",
            "range": "> 0",
        },
    )


def parse_arms(items: list[str]) -> dict[str, list[str]]:
    arms = {}
    for item in items:
        name, sep, options = item.partition("=")
        if not sep or not name:
            raise UsageError(
                f"--arm {item!r}: give name=options, e.g. 'baseline=' or 'dropout3=--config_overrides ...'."
            )
        if name in arms:
            raise UsageError(f"--arm {name!r} is given twice; arm names must differ.")
        arms[name] = shlex.split(options)
    return arms


def run_logged(command: list[str], log_path: Path, env: dict) -> None:
    with open(log_path, "w", encoding="utf-8") as log:
        if subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT).returncode != 0:
            raise RuntimeError(f"{shlex.join(command)} failed; its output is in {log_path}.")


def train_and_score(args: SeedArguments, run_dir: Path, options: list[str], seed: int, threads: int) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    if not (run_dir / "final").is_dir():
        if run_dir.exists():
            raise UsageError(
                f"{run_dir} exists without final/: an interrupted run. Delete it to train it again."
            )
        command = [sys.executable, str(SCRIPTS / "train.py"), args.recipe, "--save_strategy", "no"]
        if args.max_minutes is None:
            # No clock (the run ends at max_steps), validation loss without generation.
            command += ["--max_steps", str(args.max_steps), "--max_train_minutes", "100000"]
            command += ["--eval_strategy", "steps", "--eval_steps", str(args.eval_steps)]
            command += ["--predict_with_generate", "false", "--metric_for_best_model", "loss"]
        else:
            # The clock ends the run (max_steps only bounds it), and validation would take its minutes.
            command += ["--max_train_minutes", str(args.max_minutes), "--max_steps", "100000"]
            command += ["--eval_strategy", "no"]
        command += ["--seed", str(seed), "--output_dir", str(run_dir), "--disable_tqdm", "true", *options]
        run_dir.mkdir(parents=True)
        run_logged(command, run_dir / "train.log", env)
    if not (run_dir / "final" / REPORT).is_file():
        command = [sys.executable, str(SCRIPTS / "evaluate_model.py"), "--model", str(run_dir / "final")]
        command += [
            "--task",
            "translation",
            "--dataset",
            args.dataset,
            "--source_lang",
            "de",
            "--target_lang",
            "en",
        ]
        command += ["--split", "test", "--batch_size", "50", "--show_examples", "0"]
        run_logged(command, run_dir / "evaluate.log", env)


def prepare_fairseq(args: SeedArguments, output: Path) -> Path:
    """fairseq's environment and our pieces binarised for it, validation cut as the recipe cuts ours."""
    data = output / "fairseq-data"
    if not (data / "data-bin").is_dir():
        valid_examples = read_recipe_file(args.recipe).get("max_eval_examples") or 0
        command = ["bash", "scripts/benchmarks/fairseq_prepare.sh", str(data), str(valid_examples)]
        output.mkdir(parents=True, exist_ok=True)
        run_logged(command, output / "fairseq-prepare.log", dict(os.environ))
    return data / "data-bin"


def train_and_score_fairseq(
    args: SeedArguments,
    run_dir: Path,
    data_bin: Path,
    seed: int,
    threads: int,
    linear_decay_end: Callable[[], int] | None = None,
) -> None:
    """Train fairseq (its inverse square root, or with `linear_decay_end` a linear decay to zero at the update
    that function returns) and score its last checkpoint; at equal minutes also the average of its last
    checkpoints after the warmup, fairseq's own recipe."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    if not (run_dir / "checkpoint_last.pt").is_file():
        if run_dir.exists():
            raise UsageError(
                f"{run_dir} exists without checkpoint_last.pt: an interrupted run. Delete it to train it "
                "again."
            )
        command = [
            "bash",
            "scripts/benchmarks/fairseq_train.sh",
            str(data_bin),
            str(run_dir),
            "--seed",
            str(seed),
        ]
        if linear_decay_end is not None:
            # The decay ends at that update, and so does training, by the count alone: later updates at a
            # learning rate of zero would change no weight, and the clock, which ends it sooner on a slower
            # stretch of the machine, would leave it short of its decay's end.
            end = linear_decay_end()
            env["LINEAR_DECAY_UPDATES"] = str(end)
            command += ["--max-update", str(end)]
        if args.max_minutes is None:
            # Validation every eval_steps updates and saving only at the end, as our runs above.
            if linear_decay_end is None:
                command += ["--max-update", str(args.max_steps)]
            command += ["--validate-interval-updates", str(args.eval_steps)]
            command += "--validate-interval 10000 --save-interval 10000".split()
        else:
            # The clock ends training (the linear arm: its update count) and saves; the interval checkpoints
            # are for the average.
            if linear_decay_end is None:
                command += ["--stop-time-hours", str(args.max_minutes / 60), "--max-update", "100000"]
            command += ["--disable-validation", "--save-interval-updates", str(FAIRSEQ_SAVE_UPDATES)]
            command += ["--keep-interval-updates", str(AVERAGED - 1)]
        command += "--max-epoch 10000 --no-epoch-checkpoints --no-save-optimizer-state".split()
        run_dir.mkdir(parents=True)
        run_logged(command, run_dir / "train.log", env)
    if not (run_dir / FAIRSEQ_SCORES).is_file():
        scores = fairseq_test_scores(
            args, data_bin, run_dir / "checkpoint_last.pt", run_dir / "test.out", env
        )
        if args.max_minutes is not None:
            averaged, names = fairseq_logs.average_last_checkpoints(
                run_dir, after_update=FAIRSEQ_WARMUP, last=AVERAGED
            )
            result = (
                dict(scores)  # the last checkpoint alone: nothing after the warmup to average it with
                if names == ["checkpoint_last.pt"]
                else fairseq_test_scores(args, data_bin, averaged, run_dir / "test-averaged.out", env)
            )
            scores.update({f"averaged_{key}": value for key, value in result.items()}, averaged=names)
        (run_dir / FAIRSEQ_SCORES).write_text(json.dumps(scores, indent=2) + "\n", encoding="utf-8")


def fairseq_test_scores(
    args: SeedArguments, data_bin: Path, checkpoint: Path, output: Path, env: dict
) -> dict:
    """`checkpoint` decoded by fairseq-generate with our beam and length penalty, scored by our metric."""
    fairseq = Path(os.environ.get("FAIRSEQ_VENV", "outputs/fairseq-venv")) / "bin"
    # fairseq-generate unpickles its checkpoint whole (torch >= 2.6 allows it only with this variable): it
    # reads only a file that a run of this script wrote.
    command = [str(fairseq / "fairseq-generate"), str(data_bin), "--path", str(checkpoint)]
    command += "--cpu --gen-subset test --beam 4 --lenpen 0.6 --max-len-a 1 --max-len-b 50".split()
    command += "--batch-size 50 --post-process sentencepiece".split()
    run_logged(command, output, {**env, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
    references = [pair["en"] for pair in load_from_disk(args.dataset)["test"]["translation"]]
    predictions = fairseq_logs.read_hypotheses(output.read_text(encoding="utf-8"), len(references))
    scores = TranslationTask().score(predictions, references)
    return {"bleu": scores["bleu"], "chrf": scores["chrf"]}


def check_arm_names(args: SeedArguments, arms: dict[str, list[str]]) -> list[str]:
    """Every arm's name, fairseq's first (the baseline); refuses a combination that cannot be compared."""
    fairseq = [name for name in (args.fairseq_arm, args.fairseq_linear_arm) if name is not None]
    if args.fairseq_linear_arm is not None and args.fairseq_arm is None:
        raise UsageError(
            "--fairseq_linear_arm ends where the --fairseq_arm run ended: give --fairseq_arm too."
        )
    for name in fairseq:
        if name in arms or fairseq.count(name) > 1:
            raise UsageError(f"--fairseq_arm {name!r} is also an --arm name; arm names must differ.")
    if fairseq and args.max_minutes is None and Path(args.recipe).name != FAIRSEQ_RECIPE:
        raise UsageError(
            f"--fairseq_arm trains fairseq with {FAIRSEQ_RECIPE}'s model and schedule "
            f"(fairseq_train.sh); --recipe {args.recipe} would compare different recipes at equal updates. "
            f"Give --recipe scripts/recipes/{FAIRSEQ_RECIPE}, or compare recipes at equal --max_minutes."
        )
    return fairseq + list(arms)


def run_all(args: SeedArguments, arms: dict[str, list[str]], names: list[str], output: Path) -> None:
    """Train and score every run, `--parallel` at a time, seed-major (early runs compare the arms)."""
    threads = max(1, (os.cpu_count() or 1) // args.parallel)
    data_bin = prepare_fairseq(args, output) if args.fairseq_arm else None
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        futures = []
        for seed in args.seeds:
            for arm in names:
                run_dir = output / f"{arm}-seed{seed}"
                if arm == args.fairseq_arm:
                    future = pool.submit(train_and_score_fairseq, args, run_dir, data_bin, seed, threads)
                    inverse_sqrt = (future, run_dir / "checkpoint_last.pt")
                elif arm == args.fairseq_linear_arm:
                    # Submitted after its inverse-sqrt run, so that run has started before this one waits.
                    def end(run=inverse_sqrt):
                        run[0].result()
                        return fairseq_logs.checkpoint_updates(run[1])

                    future = pool.submit(train_and_score_fairseq, args, run_dir, data_bin, seed, threads, end)
                else:
                    future = pool.submit(train_and_score, args, run_dir, arms[arm], seed, threads)
                futures.append(future)
        for future in futures:
            future.result()


def our_updates(run_dir: Path) -> int:
    """The updates a run of ours made: the step of its loss log's closing record."""
    records = [json.loads(line) for line in (run_dir / LOSS_LOG_NAME).read_text().splitlines() if line]
    return next(record["step"] for record in reversed(records) if "train_runtime" in record)


def main() -> None:
    (args,) = parse_arguments(SeedArguments, description=__doc__)
    arms = parse_arms(args.arm)
    names = check_arm_names(args, arms)
    # What every run reads, read here first: a fault is named once, not by each run's log.
    load_recipe(args.recipe, make_parser(*TRAINING_ARGUMENTS, args=[]))  # as train.py reads it
    load_saved_dataset(args.dataset)
    output = Path(args.output_dir)
    run_all(args, arms, names, output)

    bleu, chrf, curves, updates = {}, {}, {}, {}
    fairseq = (args.fairseq_arm, args.fairseq_linear_arm)
    for arm in names:
        run_dirs = [output / f"{arm}-seed{seed}" for seed in args.seeds]
        if arm in fairseq:
            metrics = [json.loads((run_dir / FAIRSEQ_SCORES).read_text()) for run_dir in run_dirs]
            curves[arm] = [
                fairseq_logs.validation_curve((run_dir / "train.log").read_text(encoding="utf-8"))
                for run_dir in run_dirs
            ]
            updates[arm] = [fairseq_logs.checkpoint_updates(path / "checkpoint_last.pt") for path in run_dirs]
        else:
            metrics = [
                json.loads((run_dir / "final" / REPORT).read_text())["metrics"] for run_dir in run_dirs
            ]
            curves[arm] = (
                [validation_curve(run_dir) for run_dir in run_dirs] if args.max_minutes is None else []
            )
            updates[arm] = [our_updates(run_dir) for run_dir in run_dirs]
        bleu[arm] = [metric["bleu"] for metric in metrics]
        chrf[arm] = [metric["chrf"] for metric in metrics]
        if arm in fairseq and args.max_minutes is not None:
            averaged = f"{arm}, last {AVERAGED} averaged"
            bleu[averaged] = [metric["averaged_bleu"] for metric in metrics]
            chrf[averaged] = [metric["averaged_chrf"] for metric in metrics]
    budget = f"{args.max_steps} updates" if args.max_minutes is None else f"{args.max_minutes:g} minutes"
    sections = [
        f"{budget}, seeds {', '.join(map(str, args.seeds))}, last checkpoint (and fairseq's average of its "
        "last checkpoints after the warmup, where named), test_2016_flickr, beam 4, length penalty 0.6",
        format_comparison(compare_arms(bleu, names[0]), "sacreBLEU"),
        format_comparison(compare_arms(chrf, names[0]), "chrF"),
        "updates made: "
        + "; ".join(f"{arm} {', '.join(map(str, counts))}" for arm, counts in updates.items()),
    ]
    if args.max_minutes is None:
        sections += [
            "validation loss (first 500 pairs) by update:",
            "\n".join(
                f"- {arm}, seed {seed}: " + ", ".join(f"{step}: {value:.3f}" for step, value in curve)
                for arm in names
                for seed, curve in zip(args.seeds, curves[arm], strict=True)
            ),
        ]
    text = "\n\n".join(sections)
    (output / "comparison.md").write_text(text + "\n", encoding="utf-8")
    print(text)
    written = [output / "comparison.md"]
    if args.max_minutes is None:
        written.append(plot_validation_curves(curves, output / "validation-loss.png"))
    print(f"\nwritten: {', '.join(map(str, written))}")


if __name__ == "__main__":
    run_script(main)
