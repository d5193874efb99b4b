"""Scoring a saved model: `generation` (batched `generate()` over a split, the task's metrics, a JSON report
with every prediction). The metrics themselves are a layer below, in `hf_vanilla_transformer.metrics`: the
task definitions (`tasks`) load them, and this evaluation loads the tasks."""
