"""Scoring a saved model: `scoring` (batched `generate()` over a split, through `decoding`, the task's
metrics, a JSON report with every prediction). The metrics themselves are the tasks' (`tasks/*/`), loaded
through the task registry."""
