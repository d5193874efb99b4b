"""The benchmark runs and reports every figure (it is a script, not a timed test: no speed is asserted)."""

from hf_vanilla_transformer.benchmarking import GENERATION_TASKS, build_models, run_benchmark


def test_models_built_at_identical_sizes():
    from hf_vanilla_transformer.benchmarking import SHAPES

    models = build_models(SHAPES["S"])
    counts = {name: sum(p.numel() for p in m.parameters() if p.requires_grad) for name, m in models.items()}
    # Marian stores its fixed sinusoids as frozen parameters; trainable counts must match.
    assert counts["ours"] == counts["marian"], counts


def test_benchmark_reports_every_figure():
    lines = []
    results = run_benchmark(["tiny"], repeats=1, ctranslate2=True, print_fn=lines.append)
    shape = results["shapes"]["tiny"]
    for name in ("ours", "marian"):
        for key in ("train_tok_s", *GENERATION_TASKS, "train_mfu"):
            assert shape[name][key] > 0, (name, key)
        assert shape[name]["train_peak_mb"] > 0 and shape[name]["beam4_b32_peak_mb"] > 0
    for engine in ("ct2_float32", "ct2_int8"):
        assert set(shape[engine]) == set(GENERATION_TASKS) and min(shape[engine].values()) > 0
        assert set(shape[name]["ms_per_token_by_prefix"]) == {32, 128, 512}
    assert results["matmul_peak_gflops"] > 0
    assert "ours/Marian" in lines[-1] and "ct2_int8/ours" in lines[-1]


def test_peak_memory_counts_live_tensors_not_freed_ones():
    import torch

    from hf_vanilla_transformer.benchmarking import peak_memory_mb

    def two_in_turn():  # 32 MiB, freed, then 16 MiB: the peak is 32, whatever the heap does
        first = torch.ones(1024, 1024, 8)
        del first
        return torch.ones(1024, 1024, 4)

    assert abs(peak_memory_mb(two_in_turn) - 32) < 1


def test_profile_names_the_operators():
    from hf_vanilla_transformer.benchmarking import profile_shape

    text = profile_shape("tiny")
    assert text.count("Self CPU time total") == 4 and "aten::addmm" in text
