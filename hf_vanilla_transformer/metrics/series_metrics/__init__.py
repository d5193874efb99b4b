"""evaluate module folder; load it with `hf_vanilla_transformer.metrics.load_series_metric()`."""
