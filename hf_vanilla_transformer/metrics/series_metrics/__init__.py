"""evaluate module folder; load it with ``hf_vanilla_transformer.metrics.load_series_metric()``.

A package too, so that ``series_equivalence`` can be imported directly and doctests run.
"""
