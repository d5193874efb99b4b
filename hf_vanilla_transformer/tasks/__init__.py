"""Tasks: what differs between the things a model here is trained for, one registered class each
(`registry`), with what every task's data goes through (`data`). A task of your own: docs/tasks.md."""

from .base import Task
from .data import (
    UNKNOWN_SHARE_WARNING,
    DataArguments,
    DatasetArguments,
    TaskChoice,
    check_tokenizer_fits,
    decode_for_metrics,
    load_split_texts,
    make_compute_metrics,
    prepare_dataset,
    prepare_stream,
)
from .registry import ENTRY_POINT_GROUP, find_task, get_task, load_task_file, register_task, registered_tasks

__all__ = [
    "ENTRY_POINT_GROUP",
    "UNKNOWN_SHARE_WARNING",
    "DataArguments",
    "DatasetArguments",
    "Task",
    "TaskChoice",
    "check_tokenizer_fits",
    "decode_for_metrics",
    "find_task",
    "get_task",
    "load_split_texts",
    "load_task_file",
    "make_compute_metrics",
    "prepare_dataset",
    "prepare_stream",
    "register_task",
    "registered_tasks",
]
