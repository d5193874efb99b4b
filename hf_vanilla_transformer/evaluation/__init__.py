"""Scoring a saved model: `generation` (batched `generate()` over a split, the task's metrics, a JSON report
with every prediction) and `metrics` (the local evaluate modules: sacreBLEU and chrF for translation, exact
and symbolic match for series, the paper's tokenized BLEU). Nothing is imported here: the task definitions
(`tasks`) load the metrics, and the evaluation loads the tasks."""
