"""What a resumed run must keep to end as if it had never stopped, checked; and a finished run left alone.

Each checkpoint holds `resume_contract.json`, written before its `checkpoint_complete.json` (so that the
record covers it): what decides the run's batches and its model. That is the options that do (`options`:
the task, token budget, batch order, seed, accumulation, number of processes, schedule, ...; each training
script says which of its own, docs/training.md lists them), the tokenizer's vocabulary, the model's
configuration, and the training pairs' identity. A run resumed from the checkpoint with any of them changed
would go on with other batches or another model: it is refused in one line that names the option and both
values, before any data is read where that is possible; `--allow_changed_options NAME ...` (or `all`) goes
on anyway, and the log names each change. Options a checkpoint restores whatever is given (the optimizer's
settings) are not refused: a change is said to have no effect. A checkpoint of an earlier version, which
holds no record, is resumed unchecked, with a line saying so; a record of a version before an option was
recorded holds the value every run had then (`RECORDED_SINCE`: `--long_pairs drop`).

Why the training pairs are identified by the lengths of their sides and the sums of their token ids rather
than by `datasets`' fingerprint: a fingerprint is random for data built in memory (text files a task reads),
and changes with a file's path and modification time for data files. Lengths and sums do not depend on where
the data lies or how it was read; the lengths are what decides token-budget batches; and they cost one
vectorised pass over the tokenized Arrow columns (what the batch sampler reads anyway), no hash of gigabytes.
A streamed corpus has no pass before training: its first pairs stand for it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
from collections.abc import Callable, Sequence
from enum import Enum
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import torch

from ..errors import CorruptFileError, UsageError
from ..outputs import UNFINISHED_SUFFIX
from .budget import TimeBudget, train_longer
from .checkpoints import COMPLETE_NAME, step_of

logger = logging.getLogger(__name__)

CONTRACT_NAME = "resume_contract.json"
FORMAT = 1
ALL = "all"  # --allow_changed_options all
ALLOW_OPTION = "--allow_changed_options"
# Names of what is recorded beside the options, as --allow_changed_options takes them.
TOKENIZER, DATASET, MODEL_CONFIG = "tokenizer", "dataset", "model_config"
# The options of `DataArguments` that decide which training pairs there are; with one of them changed (and
# allowed), other pairs are a consequence, not a second change.
DATA_OPTIONS = (
    "task",
    "max_source_length",
    "max_target_length",
    "long_pairs",
    "max_train_examples",
    "streaming",
)
# A record made before one of these options was recorded lacks it, and every run then had the value given
# here: such a record is read as holding it, so that its checkpoint resumes with it and is refused another.
RECORDED_SINCE = {"long_pairs": "drop"}
# Model config fields that do not describe the model: the library's version, where it was loaded from, and
# what the data records in it after the model is built (`DataArguments.record_in`: options checked as such).
NOT_THE_MODEL = (
    "transformers_version",
    "_name_or_path",
    "architectures",
    "dtype",
    "torch_dtype",
    "task",
    "langs",
    "max_source_length",
    "max_target_length",
)
STREAM_PAIRS = 1000  # the first pairs of a streamed corpus that stand for it
_CHUNK = 100_000  # rows of a split read at a time


class RunFinished(Exception):
    """Resuming a run that has ended, with its final folder written after its last checkpoint: nothing is
    done, and the message says so and how to train further. Not an error: a requeued job succeeds."""


def plain(value):
    """`value` as its JSON record reads back: enums by their value, tuples as lists, keys as strings."""
    if isinstance(value, Enum):
        value = value.value
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def shown(value) -> str:
    """A recorded value as a command line gives it."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def tokenizer_record(path: str, tokenizer) -> dict:
    """Which tokenizer: its path (for the message) and a digest of its vocabulary and special tokens (what
    decides the token ids; a tokenizer copied elsewhere is the same one)."""
    vocabulary = sorted(tokenizer.get_vocab().items())
    content = json.dumps([vocabulary, sorted(map(str, tokenizer.all_special_tokens))])
    return {
        "path": str(path),
        "tokens": len(tokenizer),
        "digest": hashlib.blake2b(content.encode(), digest_size=8).hexdigest(),
    }


def config_record(config) -> dict:
    return {key: value for key, value in plain(config.to_dict()).items() if key not in NOT_THE_MODEL}


def data_record(data_args, train) -> dict:
    """The training pairs' identity: their number, and a digest of each pair's source and target lengths and
    of the token ids' sums, in order (for a stream, of its first `STREAM_PAIRS` pairs)."""
    digest = hashlib.blake2b(digest_size=8)
    record = {"dataset": data_args.dataset, "dataset_config": data_args.dataset_config}
    if hasattr(train, "num_rows"):
        columns = train.select_columns(["input_ids", "labels"]).with_format("arrow")
        for start in range(0, columns.num_rows, _CHUNK):
            table = columns[start : start + _CHUNK]
            for name in ("input_ids", "labels"):
                digest.update(pc.list_value_length(table[name]).to_numpy().astype("<i8").tobytes())
                digest.update(str(pc.sum(pc.list_flatten(table[name])).as_py()).encode())
        return {**record, "pairs": columns.num_rows, "digest": digest.hexdigest()}
    rows = list(itertools.islice(iter(train), STREAM_PAIRS))
    for name in ("input_ids", "labels"):
        digest.update(np.array([len(row[name]) for row in rows], dtype="<i8").tobytes())
        digest.update(str(sum(sum(row[name]) for row in rows)).encode())
    return {**record, "pairs": None, "first_pairs": len(rows), "digest": digest.hexdigest()}


class ResumeContract:
    """The record a run writes into each checkpoint (`save`), and its check against the checkpoint a run
    resumes from (`check` before the data is read, `check_data` after).

    `run_options` gives the training script's own options as two mappings of option name to value: those that
    decide the batches or the updates (checked), and those the checkpoint restores whatever is given
    (`restored`: a change is said to have no effect). It is called once the script's options are final.
    `allowed` are the names of --allow_changed_options."""

    def __init__(self, run_options: Callable[[], tuple[dict, dict]], allowed: Sequence[str] | None = None):
        self.run_options = run_options
        self.allowed = set(allowed or ())
        self.record: dict = {}
        self.then: dict | None = None  # the record of the checkpoint resumed from
        self.changed: set[str] = set()  # what changed, by --allow_changed_options
        self._data_options: set[str] = set(DATA_OPTIONS)

    def _options(self, model_args, data_args, config_overrides: dict | None) -> dict:
        """The options a record holds, by name (`describe`; `check_allowed_names` reads only the names)."""
        checked, _ = self.run_options()
        options = {
            "task": data_args.task,
            **data_args.options_record(),
            "max_source_length": data_args.max_source_length,
            "max_target_length": data_args.max_target_length,
            "long_pairs": data_args.long_pairs,
            "max_train_examples": data_args.max_train_examples,
            "streaming": data_args.streaming,
            **checked,
        }
        if not model_args.model:  # a trained --model decides the configuration alone
            options["preset"] = model_args.preset
            options["config_overrides"] = config_overrides
        return options

    def check_allowed_names(self, model_args, data_args) -> None:
        """Refuse, on a fresh run, an --allow_changed_options name that this run's records will not hold (a
        misspelling): a job that is requeued with the same command would be refused only at its first
        resume. A resume checks the names against both records (`check`)."""
        known = {*self._options(model_args, data_args, None), TOKENIZER, DATASET, MODEL_CONFIG, ALL}
        unknown = sorted(self.allowed - known)
        if unknown:
            raise UsageError(
                f"{ALLOW_OPTION} {' '.join(unknown)}: no such recorded option; it takes {ALL} or any of "
                f"{', '.join(sorted(known - {ALL}))}."
            )

    def describe(self, model_args, data_args, tokenizer, config, config_overrides: dict) -> None:
        """Record what decides the batches and the model, but the training pairs (`describe_data`);
        `config_overrides` is `model_args.config_overrides` read (a file's, or inline JSON's)."""
        self._data_options |= {TOKENIZER, *data_args.options_record()}
        _, restored = self.run_options()
        options = self._options(model_args, data_args, config_overrides)
        self.record = {
            "format": FORMAT,
            "options": plain(options),
            "restored": plain(restored),
            TOKENIZER: tokenizer_record(data_args.tokenizer, tokenizer),
            MODEL_CONFIG: config_record(config),
        }

    def describe_data(self, data_args, train) -> None:
        self.record["data"] = data_record(data_args, train)

    def save(self, folder: str | Path) -> None:
        """Write the record into a checkpoint `folder` (on one process, before its complete-record)."""
        Path(folder).mkdir(parents=True, exist_ok=True)
        path = Path(folder) / CONTRACT_NAME
        path.write_text(json.dumps(self.record, indent=1, sort_keys=True) + "\n", encoding="utf-8")

    def check(self, checkpoint: str | Path) -> None:
        """Refuse, in one line, a resume from `checkpoint` with what decides its batches or model changed and
        not allowed; name each allowed change in the log, and each restored option given anew. A checkpoint
        without a record resumes unchecked, and says so."""
        checkpoint = Path(checkpoint)
        path = checkpoint / CONTRACT_NAME
        if not path.is_file():
            logger.warning(
                "%s holds no %s (saved by an earlier version): whether the batches and the model are the "
                "ones it trained with cannot be checked; resuming unchecked.",
                checkpoint,
                CONTRACT_NAME,
            )
            return
        try:
            then = json.loads(path.read_text(encoding="utf-8"))
            then["options"] = {**RECORDED_SINCE, **then["options"]}
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise CorruptFileError(
                f"{path} does not parse ({error}): resume from an earlier checkpoint."
            ) from None
        self.then = then
        now = self.record
        known = {*then["options"], *now["options"], TOKENIZER, DATASET, MODEL_CONFIG, ALL}
        unknown = sorted(self.allowed - known)
        if unknown:
            raise UsageError(
                f"{ALLOW_OPTION} {' '.join(unknown)}: not recorded in {checkpoint}; it takes {ALL} or any of "
                f"{', '.join(sorted(known - {ALL}))}."
            )
        changes = [
            (name, f"--{name}", shown(value), shown(now["options"][name]))
            for name, value in then["options"].items()
            if name in now["options"] and plain(value) != now["options"][name]
        ]
        old, new = then.get(TOKENIZER), now[TOKENIZER]
        if old and old.get("digest") != new["digest"]:
            changes.append(
                (TOKENIZER, "--tokenizer", _tokenizer_shown(old), _tokenizer_shown(new, other=True))
            )
        names = {name for name, *_ in changes}
        # A changed preset, override or tokenizer is named as such; a configuration changed otherwise (a
        # --model folder, the preset's definition) is named by its fields.
        if not names & {"preset", "config_overrides", TOKENIZER} and then.get(MODEL_CONFIG) is not None:
            # Fields both records hold: a transformers release that adds or drops a field of every config
            # (the model's own are checked in both) does not make a requeued job's resume inexact.
            both = then[MODEL_CONFIG].keys() & now[MODEL_CONFIG].keys()
            fields = _differing(
                {key: then[MODEL_CONFIG][key] for key in both}, {key: now[MODEL_CONFIG][key] for key in both}
            )
            if fields:
                changes.append(
                    (
                        MODEL_CONFIG,
                        "the model's configuration",
                        shown({key: then[MODEL_CONFIG].get(key) for key in fields}),
                        shown({key: now[MODEL_CONFIG].get(key) for key in fields}),
                    )
                )
        self._refuse_or_say(checkpoint, changes)
        for name, value in then.get("restored", {}).items():
            given = now["restored"].get(name, value)
            if name in now["restored"] and plain(value) != given:
                logger.warning(
                    "--%s %s has no effect on a resumed run: %s restores the optimizer's state, saved with "
                    "%s.",
                    name,
                    shown(given),
                    checkpoint,
                    shown(value),
                )

    def check_data(self, checkpoint: str | Path) -> None:
        """`check` of the training pairs, once they are read. Other pairs are refused (as --dataset) unless an
        option that decides them changed by --allow_changed_options, which was named already."""
        old, new = (self.then or {}).get("data"), self.record.get("data")
        if not old or not new or (old["digest"], old.get("pairs")) == (new["digest"], new.get("pairs")):
            return
        change = (DATASET, "--dataset", _data_shown(old), _data_shown(new, other=True))
        if self.changed & self._data_options:
            logger.warning(
                "The training pairs differ from those of %s (%s then, %s now), as the options changed.",
                checkpoint,
                change[2],
                change[3],
            )
            return
        self._refuse_or_say(Path(checkpoint), [change])

    def _refuse_or_say(self, checkpoint: Path, changes: list[tuple[str, str, str, str]]) -> None:
        refused = [change for change in changes if not ({change[0], ALL} & self.allowed)]
        if refused:
            said = "; ".join(
                f"{label} was {then} {f'in {checkpoint}' if i == 0 else 'there'}, now {now}"
                for i, (_, label, then, now) in enumerate(refused)
            )
            one = len(refused) == 1
            raise UsageError(
                f"{said}: a resume with {'it' if one else 'them'} changed is not exact; pass "
                f"{'it as it was' if one else 'them as they were'}, or {ALLOW_OPTION} "
                f"{' '.join(name for name, *_ in refused)} to go on anyway."
            )
        for name, label, then, now in changes:
            self.changed.add(name)
            logger.warning(
                "Resuming with %s changed (%s): %s in %s, %s now; the run goes on, not as it would have "
                "without the stop.",
                label,
                ALLOW_OPTION,
                then,
                checkpoint,
                now,
            )


def _tokenizer_shown(record: dict, other: bool = False) -> str:
    vocabulary = "another vocabulary" if other else "vocabulary"
    return f"{record['path']} ({vocabulary} of {record['tokens']} tokens)"


def _data_shown(record: dict, other: bool = False) -> str:
    name = record["dataset"] + (f" ({record['dataset_config']})" if record.get("dataset_config") else "")
    pairs = f"{record['pairs']:,} training pairs" if record.get("pairs") is not None else "streamed"
    return f"{name} ({pairs}{', other ones' if other else ''})"


def _differing(then: dict, now: dict) -> list[str]:
    return sorted(key for key in {*then, *now} if then.get(key) != now.get(key))


def check_weights_fit(checkpoint: str | Path, config, model_class) -> None:
    """Refuse, in one line, a checkpoint whose weights do not fit the model `config` builds (another preset,
    other sizes): the Trainer would fail on loading them with a traceback. Needs no record: checkpoints of
    earlier versions are checked too. The model is built on the meta device, which costs no memory."""
    path = Path(checkpoint) / "model.safetensors"
    if not path.is_file():
        return  # sharded (FSDP, DeepSpeed) without full weights: their engines check shapes on loading
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as weights:
            saved = {name: list(weights.get_slice(name).get_shape()) for name in weights.keys()}  # noqa: SIM118
    except SafetensorError as error:  # bytes of the recorded size that are no weights (a disk's fault)
        raise CorruptFileError(
            f"{path} is truncated or corrupt ({error}): resume from an earlier checkpoint of the run."
        ) from error
    if not saved or any(0 in shape for shape in saved.values()):
        return  # placeholders (ZeRO-3 without its 16-bit weights): the engine's own shards are loaded
    from transformers.integrations import is_deepspeed_zero3_enabled

    if is_deepspeed_zero3_enabled():
        return  # ZeRO-3 builds every model sharded (zero.Init), not on the meta device; its engine checks
    with torch.device("meta"):
        model = model_class._from_config(config)
    built = {name: list(tensor.shape) for name, tensor in model.state_dict().items()}
    tied = set(getattr(model, "all_tied_weights_keys", None) or {})
    misfits = [
        f"{name} is {saved[name]} there, {shape} now" if name in saved else f"{name} is missing there"
        for name, shape in built.items()
        if saved.get(name, shape) != shape or (name not in saved and name not in tied)
    ]
    misfits += [f"{name} is there, not in the model built now" for name in saved if name not in built]
    if misfits:
        more = f"; {len(misfits) - 1} more" if len(misfits) > 1 else ""
        raise UsageError(
            f"The weights in {checkpoint} do not fit the model built now ({misfits[0]}{more}): a run resumes "
            "only the model it trained; pass --preset, --config_overrides and --tokenizer as they were (its "
            f"configuration is {Path(checkpoint) / 'config.json'}), or train the new model in another "
            "--output_dir."
        )


def run_is_over(checkpoint: str | Path, training_args, recipe_args) -> bool:
    """Whether the Trainer's `checkpoint` is the end of its run: at `max_steps`, at the end of its epochs
    (`num_train_epochs` not raised since), or with its time budget spent."""
    state = json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))
    step = state["global_step"]
    if 0 < training_args.max_steps <= step:
        return True
    if training_args.max_steps <= 0 and 0 < state.get("max_steps", 0) <= step:
        if training_args.num_train_epochs <= state.get("num_train_epochs", 0):
            return True
    spent = Path(checkpoint) / TimeBudget.STATE_FILE
    if recipe_args.max_train_minutes is None or not spent.is_file():
        return False
    elapsed = json.loads(spent.read_text(encoding="utf-8"))["elapsed_seconds"]
    return elapsed >= recipe_args.max_train_minutes * 60


def ended_by_budget(checkpoint: str | Path, training_args, recipe_args) -> bool:
    """Whether the run that the Trainer's `checkpoint` ends (`run_is_over`) was ended by its time budget:
    neither its steps nor its epochs ran out."""
    step = step_of(Path(checkpoint))
    if recipe_args.max_train_minutes is None or 0 < training_args.max_steps <= step:
        return False
    state = json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))
    epochs_ended = 0 < state.get("max_steps", 0) <= step
    return not (training_args.max_steps <= 0 and epochs_ended)


def how_it_ended(checkpoint: str | Path, training_args, recipe_args) -> tuple[str, str]:
    """Why the Trainer's `checkpoint`, the end of its run (`run_is_over`), ended it, and the option that
    trains further."""
    if ended_by_budget(checkpoint, training_args, recipe_args):
        minutes = recipe_args.max_train_minutes
        return f"its {minutes:g}-minute time budget spent", train_longer(minutes)
    step = step_of(Path(checkpoint))
    if 0 < training_args.max_steps <= step:
        return f"step {step} of --max_steps {training_args.max_steps}", f"raise --max_steps above {step}"
    epochs = f"{training_args.num_train_epochs:g}"
    return f"the end of its {epochs} epochs", f"raise --num_train_epochs above {epochs}"


def final_is_current(final: Path, checkpoint: str | Path) -> bool:
    """Whether `final` is the final folder saved from the end of the run `checkpoint` ends: whole (no
    `final.unfinished` beside it: a save cut short) and saved after the checkpoint was (a final folder from
    before the run was trained further is not)."""
    written = final / "config.json"
    if not written.is_file() or final.with_name(final.name + UNFINISHED_SUFFIX).exists():
        return False
    checkpoint = Path(checkpoint)
    marks = [checkpoint / COMPLETE_NAME, checkpoint / "trainer_state.json", checkpoint]
    mark = next(path for path in marks if path.exists())
    return os.stat(written).st_mtime_ns >= os.stat(mark).st_mtime_ns


def finished_message(output_dir: str | Path, checkpoint: str | Path, reached: str, further: str) -> str:
    """The one line a finished run resumed says (`RunFinished`)."""
    final = Path(output_dir) / "final"
    return (
        f"{output_dir} is finished: {Path(checkpoint).name} ends it ({reached}) and {final} holds its model; "
        f"nothing was changed. To train it further, {further} and resume (its end then replaces {final}); "
        "to train it afresh, --overwrite."
    )
