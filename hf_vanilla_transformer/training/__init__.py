"""The paper's training recipe (§5), one module per job: `schedules` (eq. 3, decay by the clock),
`batching` (token-budget batches and their options), `logs` (loss log and curves), `budget` (training by the
clock), `agreement` (what the processes of a run share after a step), `averaging` (checkpoint averaging,
§6.1), `arguments` (the run's option dataclasses, its precision chosen), `setup` (the steps a run is set up
by, from its options to the seeded model, which both training scripts take), `resume` (what a checkpoint
records of the batches and the model, checked on resuming; a finished run left alone), `trainer` (the
`Seq2SeqTrainer` subclass on token-budget batches and its callbacks, assembled by `make_trainer`), `run`
(`run_training`, the Trainer path, its steps in order), `full_weights` (full weights gathered under FSDP and
DeepSpeed, and no false "missing keys" on resuming), `faults` (signals, the watchdog, a full disk) and
`exits` (how a training script's process ends). Their public names are importable from here. The Trainer is
the package's one training engine; `scripts/train_accelerate.py` is a plain loop for users who write their
own.

What comes from libraries: the optimizer (Adam in `Seq2SeqTrainingArguments`), the warmup + inverse
square-root schedule (transformers' `inverse_sqrt`), label smoothing (`torch.nn.functional.cross_entropy`,
inside the model), padding (`DataCollatorForSeq2Seq`), distributed sharding and mixed precision
(Accelerate, through the Trainer), argument and recipe parsing (`HfArgumentParser`). What is written here
because no well-kept library offers it for the Trainer: batches filled up to a token budget (fairseq's
`--max-tokens`, which is how the paper batched, §5.1), and averaging the weights of the last N checkpoints
(§6.1).
"""

from .agreement import StepAgreement
from .arguments import (
    TASK_METRIC,
    TRAINING_ARGUMENTS,
    ModelArguments,
    PaperSeq2SeqTrainingArguments,
    RecipeArguments,
    precision_flags,
)
from .averaging import average_checkpoints, check_output_beside_checkpoints, last_checkpoints
from .batching import (
    BATCH_ORDERS,
    BatchingArguments,
    TokenBudgetBatchSampler,
    example_sizes,
    token_budget_sampler,
)
from .budget import TimeBudget, TimeBudgetCallback, TimeBudgetProgressCallback
from .checkpoints import COMPLETE_NAME, checkpoint_problem, complete_checkpoints, resolve_resume
from .exits import end_process, leave_finished_run, leave_launched_process
from .faults import DiskFullError, Interruption, Watchdog, naming_a_full_disk
from .full_weights import FullWeightsCallback, gathered_model, missing_beyond_tied_copies, without_tied_copies
from .logs import LOSS_LOG_NAME, LOSS_PLOT_NAME, LossLog, LossPlotCallback, plot_loss_curves
from .resume import CONTRACT_NAME, ResumeContract, RunFinished, run_is_over
from .run import run_training
from .schedules import clock_linear_schedule, paper_learning_rate, paper_peak_learning_rate
from .setup import (
    build_model,
    check_lengths_fit,
    check_options,
    check_resume,
    check_trainer_options,
    choose_schedule,
    load_config_overrides,
    model_config,
    prepare_output_dir,
    resume_point,
    say_what_trains,
    seeded_model,
    tokenized_data,
    trainer_contract,
)
from .trainer import SamplerEpochCallback, TokenBudgetSeq2SeqTrainer, make_trainer

__all__ = [
    "BATCH_ORDERS",
    "COMPLETE_NAME",
    "CONTRACT_NAME",
    "ResumeContract",
    "RunFinished",
    "run_is_over",
    "DiskFullError",
    "Interruption",
    "Watchdog",
    "naming_a_full_disk",
    "checkpoint_problem",
    "complete_checkpoints",
    "resolve_resume",
    "BatchingArguments",
    "FullWeightsCallback",
    "SamplerEpochCallback",
    "LOSS_LOG_NAME",
    "LOSS_PLOT_NAME",
    "TASK_METRIC",
    "TRAINING_ARGUMENTS",
    "LossLog",
    "LossPlotCallback",
    "ModelArguments",
    "PaperSeq2SeqTrainingArguments",
    "RecipeArguments",
    "StepAgreement",
    "precision_flags",
    "TimeBudget",
    "TimeBudgetCallback",
    "TimeBudgetProgressCallback",
    "TokenBudgetBatchSampler",
    "TokenBudgetSeq2SeqTrainer",
    "average_checkpoints",
    "check_output_beside_checkpoints",
    "make_trainer",
    "end_process",
    "leave_finished_run",
    "leave_launched_process",
    "build_model",
    "check_lengths_fit",
    "model_config",
    "clock_linear_schedule",
    "example_sizes",
    "gathered_model",
    "token_budget_sampler",
    "last_checkpoints",
    "load_config_overrides",
    "paper_learning_rate",
    "paper_peak_learning_rate",
    "plot_loss_curves",
    "prepare_output_dir",
    "check_options",
    "check_trainer_options",
    "resume_point",
    "check_resume",
    "tokenized_data",
    "seeded_model",
    "say_what_trains",
    "trainer_contract",
    "run_training",
    "choose_schedule",
    "missing_beyond_tied_copies",
    "without_tied_copies",
]
