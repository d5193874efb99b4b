"""The benchmark (`scripts/benchmarks/benchmark.py` over `scripts/benchmarks/harness.py`) runs and reports
every figure (it is a script, not a timed test: no speed is asserted)."""

import json
from pathlib import Path

import pytest
import torch
from transformers import CompileConfig

from benchmarks import fairseq_logs, harness
from benchmarks.harness import (
    COMPILED_GENERATION_TASKS,
    CTRANSLATE2_ENGINES,
    GENERATION_TASKS,
    SHAPES,
    build_models,
    format_markdown,
    matmul_share,
    peak_memory_mb,
    profile_shape,
    run_benchmark,
)
from benchmarks.seed_comparison import (
    compare_arms,
    format_comparison,
    plot_validation_curves,
    validation_curve,
)

from .script_runner import run_script_file


def test_models_built_at_identical_sizes():
    models = build_models(SHAPES["S"])
    counts = {name: sum(p.numel() for p in m.parameters() if p.requires_grad) for name, m in models.items()}
    # Marian stores its fixed sinusoids as frozen parameters; trainable counts must match.
    assert counts["ours"] == counts["marian"], counts
    assert models["ours"].config.label_smoothing == 0.0  # Marian's loss has none: the same loss for both


def test_benchmark_reports_every_figure():
    lines = []
    results = run_benchmark(["tiny"], repeats=1, ctranslate2=True, print_fn=lines.append)
    shape = results["shapes"]["tiny"]
    for name in ("ours", "marian"):
        for key in ("train_tok_s", *GENERATION_TASKS, "train_mfu"):
            assert shape[name][key] > 0, (name, key)
        assert shape[name]["train_peak_mb"] > 0 and shape[name]["beam4_b32_peak_mb"] > 0
    for engine in CTRANSLATE2_ENGINES:
        assert set(shape[engine]) == set(GENERATION_TASKS) and min(shape[engine].values()) > 0
        assert set(shape[name]["ms_per_token_by_prefix"]) == {32, 128, 512}
    assert results["matmul_peak_gflops"] > 0
    assert "ours/Marian" in lines[-1] and "ct2_int8_mkl " in lines[-1]

    table = format_markdown(results).splitlines()  # the README's tables, rendered from the same results
    assert table[0].startswith("| measure | tiny: ours | tiny: Marian | tiny: ours/Marian")
    ours, marian = shape["ours"]["train_tok_s"], shape["marian"]["train_tok_s"]
    assert table[2].endswith(f"| {ours / marian:.2f} |")
    assert "tiny: int8 MKL" in table[11] and len(table) == 16  # 2 + 8 rows, blank, 2 + 3 CTranslate2 rows


def test_benchmark_with_compile_reports_the_compiled_rows(monkeypatch):
    compiled_steps = []

    def recording_backend(graph_module, example_inputs):  # traces like inductor, without building kernels
        compiled_steps.append(graph_module)
        return graph_module.forward

    def settings():
        config = CompileConfig(fullgraph=True, dynamic=False, backend=recording_backend, mode="default")
        config._compile_all_devices = True
        return {"cache_implementation": "static", "compile_config": config}

    monkeypatch.setattr(harness, "compiled_generation_settings", settings)
    torch._dynamo.reset()
    results = run_benchmark(["tiny"], repeats=1, compile=True, print_fn=lambda line: None)
    torch._dynamo.reset()
    assert compiled_steps, "no decoding step was compiled"
    for name in ("ours", "marian"):
        assert min(results["shapes"]["tiny"][name][key] for key in COMPILED_GENERATION_TASKS) > 0
    table = format_markdown(results)
    assert "| generate greedy, batch 1, static cache + torch.compile, new tokens/s |" in table


def test_peak_memory_counts_live_tensors_not_freed_ones():
    import torch

    def two_in_turn():  # 32 MiB, freed, then 16 MiB: the peak is 32, whatever the heap does
        first = torch.ones(1024, 1024, 8)
        del first
        return torch.ones(1024, 1024, 4)

    assert abs(peak_memory_mb(two_in_turn) - 32) < 1


def test_profile_names_the_operators():
    text = profile_shape("tiny")
    assert text.count("Self CPU time total") == 6 and "aten::addmm" in text
    assert text.count("matrix products") == 6


def test_matmul_share_counts_only_matrix_products():
    from types import SimpleNamespace

    def event(key, micros):
        return SimpleNamespace(key=key, self_cpu_time_total=micros)

    events = [event("aten::addmm", 300), event("aten::bmm", 100), event("aten::softmax", 100)]
    assert matmul_share(events, wall_seconds=0.001) == 0.4  # 400 of 1,000 microseconds
    assert matmul_share([], wall_seconds=0.001) == 0.0


def test_markdown_from_rejects_a_file_that_is_not_a_benchmark_run(tmp_path):
    for name, text in (("report.json", '{"metrics": {}}'), ("broken.json", "{not json")):
        path = tmp_path / name
        path.write_text(text)
        result = run_script_file("benchmarks/benchmark.py", "--markdown_from", path, cwd=tmp_path)
        assert result.returncode == 2 and str(path) in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    result = run_script_file(
        "benchmarks/benchmark.py", "--markdown_from", tmp_path / "missing.json", cwd=tmp_path
    )
    assert result.returncode == 2 and "missing.json" in result.stderr


def test_seed_comparison_counts_a_difference_only_outside_the_seeds_range(tmp_path):
    rows = compare_arms(
        {"baseline": [32.0, 33.0], "better": [33.5, 34.0], "noise": [32.5, 34.0], "worse": [30.0, 31.9]},
        "baseline",
    )
    verdicts = {row["arm"]: (row["verdict"], row["difference"]) for row in rows}
    assert verdicts["baseline"] == (None, None)
    assert verdicts["better"][0] == "above" and verdicts["better"][1] == pytest.approx(1.25)
    assert verdicts["noise"][0] == "inside the seed noise"
    assert verdicts["worse"][0] == "below"
    assert compare_arms({"a": [1.0], "b": [2.0]}, "a")[1]["verdict"] == "one seed: no noise band"
    table = format_comparison(rows)
    assert "| better | 33.50, 34.00 | 33.75 | 33.50-34.00 | +1.25 | above |" in table
    with pytest.raises(ValueError, match="No scores for the baseline arm 'base'"):
        compare_arms({"a": [1.0]}, "base")

    records = [{"step": 50, "loss": 7.0}, {"step": 200, "eval_loss": 5.5}, {"step": 100, "eval_loss": 6.0}]
    (tmp_path / "loss_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    curve = validation_curve(tmp_path)
    assert curve == [(100, 6.0), (200, 5.5)]
    png = plot_validation_curves(
        {"baseline": [curve], "better": [curve, [(100, 5.0), (200, 4.0)]]}, tmp_path / "c.png"
    )
    assert png.read_bytes().startswith(b"\x89PNG")
    with pytest.raises(FileNotFoundError, match="No loss_log.jsonl in"):
        validation_curve(tmp_path / "missing")


def test_seed_comparison_script_refuses_an_arm_without_a_name_in_one_line(tmp_path):
    script = Path(__file__).resolve().parents[1] / "scripts" / "benchmarks" / "multi30k_seeds.py"
    result = run_script_file(script, "--arm", "baseline=", "dropout 0.3", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --arm 'dropout 0.3': give name=options, e.g. 'baseline=' or "
        "'dropout3=--config_overrides ...'."
    ]
    assert not (tmp_path / "outputs").exists()


def test_fairseq_output_read_in_input_order_and_losses_in_nats():
    generate = "S-1\tein Hund\nH-1\t-0.5\ta dog\nD-1\t-0.5\ta dog\nD-0\t-0.2\tTwo men .\n"
    assert fairseq_logs.read_hypotheses(generate, 2) == ["Two men .", "a dog"]
    with pytest.raises(ValueError, match="no hypothesis for 1 of 3 inputs \\(the first: 2\\)"):
        fairseq_logs.read_hypotheses(generate, 3)
    line = (
        "2026-11-26 18:40:00 | INFO | valid | epoch {epoch} | valid on 'valid' subset | loss {loss} | "
        "nll_loss 5.1 | ppl 34.3 | wps 9000 | wpb 6500 | bsz 500 | num_updates {updates} | best_loss {loss}"
    )
    log = "\n".join(
        [
            line.format(epoch="004", loss="4.5", updates=400),
            "2026-11-26 18:40:01 | INFO | train_inner | epoch 004: 50 / 125 loss=4.9, num_updates=450",
            line.format(epoch="002", loss="6", updates=200),
        ]
    )
    curve = fairseq_logs.validation_curve(log)
    assert [update for update, _ in curve] == [200, 400]
    assert curve[0][1] == pytest.approx(6 * 0.693147, rel=1e-5) and curve[1][1] == pytest.approx(3.119162)


def test_seed_comparison_script_refuses_fairseq_beside_another_recipe_in_one_line(tmp_path):
    script = Path(__file__).resolve().parents[1] / "scripts" / "benchmarks" / "multi30k_seeds.py"
    recipe = "scripts/recipes/multi30k_de_en.yaml"
    result = run_script_file(script, "--arm", "a=", "--fairseq_arm", "fs", "--recipe", recipe, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --fairseq_arm trains fairseq with multi30k_de_en_paper.yaml's model and schedule "
        "(fairseq_train.sh); --recipe scripts/recipes/multi30k_de_en.yaml would compare different recipes at "
        "equal updates. Give --recipe scripts/recipes/multi30k_de_en_paper.yaml, or compare recipes at equal "
        "--max_minutes."
    ]
    result = run_script_file(script, "--arm", "fs=", "--fairseq_arm", "fs", cwd=tmp_path)
    assert result.returncode == 2 and "'fs' is also an --arm name" in result.stderr
    result = run_script_file(script, "--arm", "a=", "--fairseq_linear_arm", "lin", cwd=tmp_path)
    assert result.returncode == 2 and "give --fairseq_arm too" in result.stderr
    assert not (tmp_path / "outputs").exists()


def test_fairseq_checkpoints_averaged_after_the_warmup_only(tmp_path):
    import argparse

    import torch

    def save(name, updates, value):
        state = {
            "args": argparse.Namespace(arch="transformer"),
            "model": {"w": torch.full((2,), float(value)), "steps": torch.tensor([updates])},
            "optimizer_history": [{"num_updates": updates}],
        }
        torch.save(state, tmp_path / name)

    for updates in (400, 600, 800, 1000, 1200, 1400, 1600):
        save(f"checkpoint_9_{updates}.pt", updates, updates)
    save("checkpoint_last.pt", 1700, 1700)
    assert fairseq_logs.checkpoint_updates(tmp_path / "checkpoint_last.pt") == 1700
    path, names = fairseq_logs.average_last_checkpoints(tmp_path, after_update=600, last=5)
    assert names == [f"checkpoint_9_{u}.pt" for u in (1000, 1200, 1400, 1600)] + ["checkpoint_last.pt"]
    averaged = torch.load(path, weights_only=False)["model"]["w"]
    assert averaged.tolist() == [1380.0, 1380.0]  # (1000 + 1200 + 1400 + 1600 + 1700) / 5
    # A run too short for 5 checkpoints after its warmup averages the ones it has.
    path, names = fairseq_logs.average_last_checkpoints(tmp_path, after_update=1300, last=5)
    assert names == ["checkpoint_9_1400.pt", "checkpoint_9_1600.pt", "checkpoint_last.pt"]
    _, names = fairseq_logs.average_last_checkpoints(tmp_path, after_update=0, last=1)
    assert names == ["checkpoint_last.pt"]
