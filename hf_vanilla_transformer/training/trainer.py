"""`run_training`: the recipe on `Seq2SeqTrainer` (what `scripts/train.py` runs); `build_trainer`, the Trainer
it runs, also for measuring it (`scripts/benchmarks/profile_training.py`);
`TokenBudgetSeq2SeqTrainer`, the Trainer subclass both use; and `gathered_model` and `FullWeightsCallback`,
which give a run sharded by FSDP or DeepSpeed full weights in its checkpoints and final folder."""

from __future__ import annotations

import atexit
import contextlib
import copy
import json
import logging
import os
import sys
from pathlib import Path

import torch
from accelerate import Accelerator, PartialState
from accelerate.utils import DistributedType
from safetensors.torch import load_file
from transformers import PreTrainedModel, ProgressCallback, Seq2SeqTrainer, TrainerCallback, TrainerState
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints
from transformers.utils import SAFE_WEIGHTS_NAME

from ..data.preprocessing import build_seq2seq_collator
from ..tasks import DataArguments, make_compute_metrics
from .agreement import StepAgreement
from .arguments import TASK_METRIC, ModelArguments, PaperSeq2SeqTrainingArguments, RecipeArguments
from .batching import TokenBudgetBatchSampler, token_budget_sampler
from .budget import TimeBudget, TimeBudgetCallback, TimeBudgetProgressCallback
from .checkpoints import (
    checkpoint_problem,
    forget_complete_record,
    save_whole_folder,
    taken_unchecked,
    write_complete_record,
)
from .faults import FaultsCallback, Interruption, Watchdog, disk_full_error, is_disk_full
from .logs import LossPlotCallback
from .resume import ResumeContract, run_is_over
from .schedules import clock_linear_schedule
from .setup import prepare_training, trainer_contract
from .streaming import StreamedTokenBudgetBatches, load_stream_state, save_stream_state, streamed_batches

logger = logging.getLogger(__name__)


class TokenBudgetSeq2SeqTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` that, given `max_tokens`, trains on token-budget batches (`token_budget_sampler`, with
    `batch_order` and `batch_size_multiple`) instead of a fixed `per_device_train_batch_size`, and given
    `clock_decay`, decays the learning rate over that time budget (`clock_linear_schedule`, its warmup ending
    by `max_warmup_fraction` of the budget at the latest). Everything else is the stock Trainer."""

    _token_budget_sampler: TokenBudgetBatchSampler | None = None
    updates_per_epoch: int | None = None  # of the current training loop, as the Trainer counts them
    _clock_schedule_state: TrainerState | None = None  # the training loop's state the clock's schedule is of
    interruption: Interruption | None = None  # set by `run_training`: the signal that stopped the run, if any
    agreement: StepAgreement | None = None  # set by `build_trainer`: what the processes share after a step

    def __init__(
        self,
        *args,
        max_tokens: int | None = None,
        batch_order: str = "padded_length",
        batch_size_multiple: int = 1,
        clock_decay: TimeBudget | None = None,
        max_warmup_fraction: float | None = None,
        **kwargs,
    ):
        self.max_tokens = max_tokens
        self.batch_order = batch_order
        self.batch_size_multiple = batch_size_multiple
        self.clock_decay = clock_decay
        self.max_warmup_fraction = max_warmup_fraction
        super().__init__(*args, **kwargs)
        self.add_callback(SamplerEpochCallback(self))

    def create_scheduler(self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None):
        # The Trainer drops the schedule it built once the next training loop (`train()`) comes to build one,
        # and builds it anew; so here. The clock's schedule was built in an earlier loop if under another
        # `TrainerState` than the current one (each loop starts a new one): the scheduler in its place goes,
        # as the Trainer's would, whatever it is now.
        if self._clock_schedule_state is not None and self._clock_schedule_state is not self.state:
            self.lr_scheduler, self._clock_schedule_state = None, None
        if self.lr_scheduler is None and self.clock_decay is not None:
            self.lr_scheduler = clock_linear_schedule(
                optimizer if optimizer is not None else self.optimizer,
                self.args.get_warmup_steps(num_training_steps),
                self.clock_decay,
                self.max_warmup_fraction,
            )
            self._clock_schedule_state = self.state
        return super().create_scheduler(num_training_steps, optimizer)

    def _issue_warnings_after_load(self, load_result):
        # On resuming, the Trainer warns of every key missing from the checkpoint. A checkpoint holds each
        # tied matrix once, as `save_pretrained` writes it, and loading that copy restores every name of it:
        # those names are no loss, and only the others are reported (through the Trainer's own hook, which
        # each of its checkpoint loaders calls).
        model = self.accelerator.unwrap_model(self.model)
        missing = missing_beyond_tied_copies(model, load_result.missing_keys)
        super()._issue_warnings_after_load(load_result._replace(missing_keys=missing))

    def _load_best_model(self) -> None:
        best = Path(self.state.best_model_checkpoint)
        problem = checkpoint_problem(best)
        if problem is not None and not taken_unchecked(best, PREFIX_CHECKPOINT_DIR):
            logger.warning(
                "Keeping the last weights, not the best checkpoint %s: %s.",
                self.state.best_model_checkpoint,
                problem,
            )
            return
        super()._load_best_model()

    def _save_checkpoint(self, model, trial) -> None:
        # A record of an earlier save at this step goes first (a save cut short keeps its files' sizes),
        # before any process writes. The Trainer rotates old checkpoints at the end of its save, before the
        # new one is marked whole: `CompleteRecordCallback` rotates instead, after the record.
        folder = Path(self._get_output_dir(trial)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        if self.args.should_save:
            forget_complete_record(folder)
        self.accelerator.wait_for_everyone()
        limit, self.args.save_total_limit = self.args.save_total_limit, None
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = limit
        if isinstance(self.train_dataset, StreamedTokenBudgetBatches):  # each process its own share's place
            folder.mkdir(parents=True, exist_ok=True)
            save_stream_state(self.train_dataset, folder, self.args.process_index, self.args.world_size)

    def get_train_dataloader(self):
        if not isinstance(self.train_dataset, StreamedTokenBudgetBatches):
            return super().get_train_dataloader()
        # Whole batches, this process's own (the stream is split among processes already), read in this
        # process: a worker or accelerate's dispatching would read ahead of the batches the checkpoint counts.
        # A generator of its own: a loader's iterator otherwise draws its seed from torch's global generator,
        # and a resumed run, which starts its iterator after restoring that generator, would drop out anew.
        return torch.utils.data.DataLoader(
            self.train_dataset, batch_size=None, collate_fn=self.data_collator, generator=torch.Generator()
        )

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        # Under FSDP and DeepSpeed the Trainer saves weights gathered from the shards, one tensor per name:
        # the tied copies no longer share storage, so `save_pretrained` would write each of them.
        if state_dict is not None:
            state_dict = without_tied_copies(state_dict, self.accelerator.unwrap_model(self.model))
        super()._save(output_dir, state_dict=state_dict)

    def _get_train_sampler(self, train_dataset=None):
        if self.max_tokens is None:
            return super()._get_train_sampler(train_dataset)
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        self._token_budget_sampler = token_budget_sampler(
            dataset,
            self.max_tokens,
            self.batch_order,
            self.batch_size_multiple,
            seed=self.args.seed,
            num_replicas=self.args.world_size,
            rank=self.args.process_index,
        )
        return self._token_budget_sampler

    def set_initial_training_values(self, args, dataloader):
        values = super().set_initial_training_values(args, dataloader)
        self.updates_per_epoch = values[1]  # `num_update_steps_per_epoch`, for `SamplerEpochCallback`
        return values


class SamplerEpochCallback(TrainerCallback):
    """Tells the token-budget sampler of a `TokenBudgetSeq2SeqTrainer` the epoch of the Trainer's loop as each
    epoch begins, before the loop draws its first batch. The Trainer tells it too, except where accelerate
    hides it: resumed inside an epoch on several processes, the Trainer's `set_epoch` stops at accelerate's
    `BatchSamplerShard` (under `skip_first_batches`' `SkipBatchSampler`), which has no `set_epoch`, and the
    rest of that epoch would come in the first epoch's order."""

    def __init__(self, trainer: TokenBudgetSeq2SeqTrainer):
        self.trainer = trainer
        self.epoch = 0

    def on_train_begin(self, args, state, control, **kwargs):
        # The epoch the Trainer's loop starts with, as the Trainer counts it: the updates done (restored from
        # a checkpoint) over the updates an epoch holds, which its public `set_initial_training_values` says.
        updates = self.trainer.updates_per_epoch
        self.epoch = state.global_step // updates if updates else 0

    def on_epoch_begin(self, args, state, control, **kwargs):
        if self.trainer._token_budget_sampler is not None:
            self.trainer._token_budget_sampler.set_epoch(self.epoch)
        self.epoch += 1


def missing_beyond_tied_copies(model: torch.nn.Module, missing: list[str]) -> list[str]:
    """The names of `missing` that are not tied copies of a Parameter loaded under another of its names."""
    names: dict[int, list[str]] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(parameter), []).append(name)
    missing_set = set(missing)
    loaded_copies = {
        name for group in names.values() if len(group) > 1 and not set(group) <= missing_set for name in group
    }
    return [name for name in missing if name not in loaded_copies]


def without_tied_copies(state_dict: dict, model: PreTrainedModel) -> dict:
    """`state_dict` without the names `model` ties to another (`all_tied_weights_keys`, target: source), so
    that a gathered state dict is saved with one matrix per tie, as `save_pretrained` saves a plain model."""
    tied = getattr(model, "all_tied_weights_keys", None) or {}
    return {
        name: value for name, value in state_dict.items() if not (name in tied and tied[name] in state_dict)
    }


def gathered_model(accelerator: Accelerator, model: torch.nn.Module) -> PreTrainedModel | None:
    """The trained model with all of its weights on the main process, `None` on the others.

    Under FSDP or DeepSpeed every process holds a shard: Accelerate gathers the full weights (a collective
    that every process must join) and they are loaded into a plain copy of the model, tied as a fresh model
    is, with the trained model's generation config. Otherwise it is the unwrapped model itself."""
    unwrapped = accelerator.unwrap_model(model, keep_torch_compile=False)
    if accelerator.distributed_type not in (DistributedType.FSDP, DistributedType.DEEPSPEED):
        return unwrapped if accelerator.is_main_process else None
    state_dict = accelerator.get_state_dict(model)
    if not accelerator.is_main_process:
        return None
    return plain_copy(unwrapped, state_dict)


def plain_copy(model: PreTrainedModel, state_dict: dict) -> PreTrainedModel:
    """A plain copy of `model` (built as a fresh model is, whatever engine holds `model`) holding the weights
    of `state_dict`, tied, with `model`'s generation config."""
    with torch.random.fork_rng(devices=[]):  # its random start, overwritten, draws nothing from training's
        plain = _model_class(model)(model.config)
    missing, unexpected = plain.load_state_dict(without_tied_copies(state_dict, plain), strict=False)
    if unexpected or set(missing) - set(plain.all_tied_weights_keys):
        raise RuntimeError(f"Weights do not fit the model: missing {missing}, unexpected {unexpected}")
    plain.tie_weights()
    plain.generation_config = copy.deepcopy(model.generation_config)
    return plain


def _model_class(model: PreTrainedModel) -> type[PreTrainedModel]:
    """The model's own class: FSDP2 makes a wrapped model an instance of a class derived from it."""
    from torch.distributed.fsdp import FSDPModule

    return next(cls for cls in type(model).__mro__ if not issubclass(cls, FSDPModule))


def sharded_checkpoints(accelerator: Accelerator) -> bool:
    """Whether the Trainer writes checkpoints as FSDP shards, with no model file beside them."""
    if accelerator.distributed_type != DistributedType.FSDP:
        return False
    return "SHARDED_STATE_DICT" in str(accelerator.state.fsdp_plugin.state_dict_type)


class FullWeightsCallback(TrainerCallback):
    """Under FSDP with sharded checkpoints (`fsdp.yaml`) the Trainer saves each checkpoint as shards, which it
    resumes from, and no model file. This adds the gathered weights, config and tokenizer
    (`save_model_folder`), so that every checkpoint also loads with `from_pretrained` and can be averaged
    (§6.1). Sharded rather than full checkpoints, because torch's loader of a full FSDP2 state dict keys the
    matrix that the three embeddings share by one of its names only, and refuses the others on resume."""

    def __init__(self, trainer):
        self.trainer = trainer

    def on_save(self, args, state, control, **kwargs):
        from ..saving import save_model_folder

        accelerator = self.trainer.accelerator
        if not sharded_checkpoints(accelerator):
            return
        model = gathered_model(accelerator, self.trainer.model_wrapped)  # every process takes part
        if model is not None:
            checkpoint = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            save_model_folder(model, self.trainer.processing_class, checkpoint)


class ResumeContractCallback(TrainerCallback):
    """Writes the run's `ResumeContract` (what decides its batches and its model) into each checkpoint, before
    `CompleteRecordCallback` marks it whole."""

    def __init__(self, contract: ResumeContract):
        self.contract = contract

    def on_save(self, args, state, control, **kwargs):
        if args.should_save:
            self.contract.save(Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")


class CompleteRecordCallback(TrainerCallback):
    """Marks each checkpoint whole once every process has written its part and the other callbacks have
    added theirs (`checkpoints.write_complete_record`), then deletes the checkpoints beyond
    `save_total_limit`, as the Trainer would have done before: so `save_total_limit` whole checkpoints are
    kept at every instant. It must be the last callback to see `on_save`."""

    def __init__(self, accelerator: Accelerator):
        self.accelerator = accelerator

    def on_save(self, args, state, control, **kwargs):
        self.accelerator.wait_for_everyone()
        folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if args.should_save and folder.is_dir():
            write_complete_record(folder, state.global_step)
            rotate_checkpoints(
                output_dir=args.output_dir,
                save_total_limit=args.save_total_limit,
                best_model_checkpoint=state.best_model_checkpoint,
                use_mtime=True,
            )
        self.accelerator.wait_for_everyone()


def build_trainer(
    model_args: ModelArguments,
    data_args: DataArguments,
    recipe_args: RecipeArguments,
    training_args: PaperSeq2SeqTrainingArguments,
    interruption: Interruption | None = None,
) -> TokenBudgetSeq2SeqTrainer:
    """The Trainer the recipe trains with: model, tokenized data, token-budget batches, the task metric, the
    loss log and the time budget (restored from `resume_from_checkpoint`), ready for `train()`. Its
    `agreement` shares `interruption` (a signal, here or at another process) and the budget's clock among
    the processes."""
    contract = trainer_contract(data_args, recipe_args, training_args)
    tokenizer, datasets_, model = prepare_training(
        model_args, data_args, recipe_args, training_args, contract
    )
    if training_args.metric_for_best_model == TASK_METRIC:
        training_args.metric_for_best_model = data_args.task_spec.best_metric
    callbacks = [LossPlotCallback(), ResumeContractCallback(contract)]
    budget = recipe_args.time_budget()
    agreement = StepAgreement(interruption or Interruption(), budget, PartialState())
    if budget is not None:
        callbacks.append(TimeBudgetCallback(budget, agreement))
        checkpoint = training_args.resume_from_checkpoint
        if checkpoint and not budget.load(checkpoint):
            logger.warning("%s holds no %s: the time budget starts again.", checkpoint, TimeBudget.STATE_FILE)
    train = datasets_["train"]
    if data_args.streaming:
        train = streamed_batches(train, recipe_args, training_args)
        if training_args.resume_from_checkpoint:
            load_stream_state(
                train,
                training_args.resume_from_checkpoint,
                training_args.process_index,
                training_args.world_size,
                # Resumed anyway with the reading changed (--allow_changed_options): a position of another
                # reading of the stream means nothing, and the stream starts again.
                start_over=bool(contract.changed & {"streaming", "num_processes"}),
            )
    trainer = TokenBudgetSeq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=train,
        eval_dataset=datasets_.get("validation"),
        processing_class=tokenizer,
        data_collator=build_seq2seq_collator(tokenizer, model=model),
        compute_metrics=make_compute_metrics(data_args.task_spec, tokenizer)
        if training_args.predict_with_generate
        else None,
        callbacks=callbacks,
        max_tokens=recipe_args.max_tokens,
        batch_order=recipe_args.batch_order,
        batch_size_multiple=recipe_args.batch_size_multiple,
        clock_decay=budget if recipe_args.decay_by_clock else None,
        max_warmup_fraction=recipe_args.max_warmup_fraction,
    )
    trainer.agreement = agreement
    trainer.add_callback(FullWeightsCallback(trainer))
    trainer.add_callback(CompleteRecordCallback(trainer.accelerator))
    if recipe_args.max_train_minutes is not None and not training_args.disable_tqdm:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(
            TimeBudgetProgressCallback(budget.minutes, spent_minutes=budget.spent_before / 60)
        )
    return trainer


def run_training(
    model_args: ModelArguments,
    data_args: DataArguments,
    recipe_args: RecipeArguments,
    training_args: PaperSeq2SeqTrainingArguments,
) -> tuple[TokenBudgetSeq2SeqTrainer, Path | None]:
    """Train with `Seq2SeqTrainer` as configured (`build_trainer`), keep the best checkpoint by the task
    metric, and save the final model folder (weights, config, code, tokenizer, pipeline) to
    `<output_dir>/final`, whole or absent. A SIGINT or SIGTERM during training saves a checkpoint at the step
    reached and stops without a final folder: the final path returned is then None, and
    `trainer.interruption` says which signal came. One after training lets the final folder be finished."""
    interruption = Interruption()
    interruption.install()
    watchdog = Watchdog(recipe_args.stall_timeout)
    watchdog.start()
    try:
        trainer = build_trainer(model_args, data_args, recipe_args, training_args, interruption)
        trainer.interruption = interruption
        trainer.add_callback(FaultsCallback(interruption, watchdog, trainer.agreement))
        output_dir = Path(training_args.output_dir)
        final = output_dir / "final"
        checkpoint = training_args.resume_from_checkpoint
        with naming_a_full_disk(output_dir):
            if checkpoint and run_is_over(checkpoint, training_args, recipe_args):
                # The Trainer would train a step more; the run only lacks its final folder.
                folder = best_or_last(checkpoint, training_args)
                logger.info("%s ends the run: %s becomes its final folder.", checkpoint, folder)
                if trainer.accelerator.is_main_process:
                    weights = load_file(Path(folder) / SAFE_WEIGHTS_NAME)
                    save_whole_folder(plain_copy(trainer.model, weights), trainer.processing_class, final)
                trainer.accelerator.wait_for_everyone()
                return trainer, final
            trainer.train(resume_from_checkpoint=checkpoint)
            if interruption.stopped:
                return trainer, None
            model = gathered_model(trainer.accelerator, trainer.model_wrapped)
            if model is not None:
                save_whole_folder(model, trainer.processing_class, final)
        return trainer, final
    finally:
        watchdog.stop()
        interruption.restore()


def best_or_last(checkpoint: str, training_args) -> str:
    """The checkpoint a finished run's final folder holds: the best one with `load_best_model_at_end`, if it
    is whole, else `checkpoint`."""
    state = json.loads((Path(checkpoint) / TRAINER_STATE_NAME).read_text(encoding="utf-8"))
    best = state.get("best_model_checkpoint")
    if training_args.load_best_model_at_end and best and checkpoint_problem(best) is None:
        return best
    return checkpoint


@contextlib.contextmanager
def naming_a_full_disk(folder: Path):
    """A full disk while training writes into `folder` is said in one line (torch's writer says "unexpected
    pos"), not in a traceback."""
    try:
        yield
    except (OSError, RuntimeError) as error:
        if is_disk_full(error, folder):
            raise disk_full_error(folder, error) from error
        raise


def end_process(accelerator: Accelerator, status: int = 0) -> None:
    """The last step of a training script's process: wait for the others, release the model and its engine,
    take down the process group, and under `accelerate launch` on several processes leave with `status`
    (`leave_launched_process`); a single process exits with `status` if it is not 0. Call it only where
    nothing is left to run."""
    several = accelerator.num_processes > 1
    accelerator.wait_for_everyone()
    accelerator.free_memory()
    accelerator.end_training()
    if several:
        leave_launched_process(status)
    if status:
        raise SystemExit(status)


def leave_finished_run(finished: Exception, main_process: bool, num_processes: int) -> None:
    """The end of a script that resumed a finished run (`RunFinished`: a requeued job): the main process says
    so, and every process ends with status 0, since nothing was left to do and nothing was done."""
    if main_process:
        print(finished)
    if num_processes > 1:
        leave_launched_process(0)


def leave_launched_process(status: int = 0) -> None:
    """End one process of a several-process launch, its work done: run the exit handlers, flush, and end
    without the interpreter's finalization, in which gloo's threads can abort a finished process
    (docs/training.md, "Several processes")."""
    atexit._run_exitfuncs()  # what a normal exit runs (logging's shutdown among them); no public name
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
