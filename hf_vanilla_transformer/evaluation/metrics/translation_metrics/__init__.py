"""evaluate module folder: load it with
`hf_vanilla_transformer.evaluation.metrics.load_translation_metric()`."""
