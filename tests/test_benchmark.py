"""The benchmark (`scripts/benchmarks/benchmark.py` over `scripts/benchmarks/harness.py`) runs and reports
every figure (it is a script, not a timed test: no speed is asserted)."""

import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from transformers import CompileConfig

from benchmarks import fairseq_logs, harness
from benchmarks.harness import (
    COMPILED_GENERATION_TASKS,
    CTRANSLATE2_ENGINES,
    GENERATION_TASKS,
    SHAPES,
    benchmark_device,
    build_models,
    format_markdown,
    matmul_share,
    peak_memory_mb,
    per_token_ms_by_prefix,
    profile_shape,
    run_benchmark,
    synchronize,
    time_generation,
    time_training_step,
)
from benchmarks.seed_comparison import (
    compare_arms,
    format_comparison,
    plot_validation_curves,
    validation_curve,
)
from hf_vanilla_transformer.errors import UsageError

from .script_runner import run_script_file


def test_models_built_at_identical_sizes():
    models = build_models(SHAPES["S"])
    counts = {name: sum(p.numel() for p in m.parameters() if p.requires_grad) for name, m in models.items()}
    # Marian stores its fixed sinusoids as frozen parameters; trainable counts must match.
    assert counts["ours"] == counts["marian"], counts
    assert models["ours"].config.label_smoothing == 0.0  # Marian's loss has none: the same loss for both


def test_benchmark_reports_every_figure(monkeypatch):
    # Every clock read must come right after the device is synchronised: record both, in order.
    events = []
    monkeypatch.setattr(harness, "synchronize", lambda device: events.append(("synchronize", device)))
    monkeypatch.setattr(
        harness,
        "time",
        SimpleNamespace(perf_counter=lambda: events.append("clock") or time.perf_counter(), sleep=time.sleep),
    )
    lines = []
    results = run_benchmark(["tiny"], repeats=1, ctranslate2=True, print_fn=lines.append, device="cpu")
    clocks = [index for index, event in enumerate(events) if event == "clock"]
    # 12 timers (2 models x 6 tasks) read the clock twice, in the warm-up, the round and the 4 peak-memory
    # runs' two timers; the per-token clocks stamp 528 steps per model.
    assert len(clocks) >= 2 * 12 * 2 + 2 * 528
    assert all(index > 0 and events[index - 1] == ("synchronize", torch.device("cpu")) for index in clocks)
    assert (results["device"], results["mixed_precision"]) == ("cpu", "no") and results["device_name"]
    shape = results["shapes"]["tiny"]
    for name in ("ours", "marian"):
        for key in ("train_tok_s", *GENERATION_TASKS, "train_mfu"):
            assert shape[name][key] > 0, (name, key)
        assert shape[name]["train_peak_mb"] > 0 and shape[name]["beam4_b32_peak_mb"] > 0
    for engine in CTRANSLATE2_ENGINES:
        assert set(shape[engine]) == set(GENERATION_TASKS) and min(shape[engine].values()) > 0
        # Timed in our rounds, so each figure has its slowest and fastest round around its median.
        slowest, fastest = shape["spread"][f"{engine}/beam4_b32_tok_s"]
        assert slowest <= shape[engine]["beam4_b32_tok_s"] <= fastest
        assert set(shape[name]["ms_per_token_by_prefix"]) == {32, 128, 512}
    assert results["matmul_peak_gflops"] > 0
    assert "ours/Marian" in lines[-1] and "ct2_int8_mkl " in lines[-1]

    table = format_markdown(results).splitlines()  # the README's tables, rendered from the same results
    threads = results["threads"]
    assert (
        table[0] == f"Measured on cpu ({results['device_name']}), mixed precision no, {threads} CPU threads."
    )
    assert table[2].startswith("| measure | tiny: ours | tiny: Marian | tiny: ours/Marian")
    ours, marian = shape["ours"]["train_tok_s"], shape["marian"]["train_tok_s"]
    assert table[4].endswith(f"| {ours / marian:.2f} |")
    assert "tiny: int8 MKL" in table[13] and len(table) == 18  # caption, blank, 2 + 8 rows, blank, 2 + 3 rows
    # A result without a device ran on the CPU in float32 and names no model.
    earlier = {
        key: value
        for key, value in results.items()
        if key not in ("device", "device_name", "mixed_precision")
    }
    assert (
        format_markdown(earlier).splitlines()[0]
        == f"Measured on cpu, mixed precision no, {threads} CPU threads."
    )


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

    assert abs(peak_memory_mb(two_in_turn, torch.device("cpu")) - 32) < 1


class FakeCudaAllocator:
    """torch.cuda's synchronize and memory counters, for a machine without a GPU: `allocate` moves the count
    the way a kernel's tensors would, and every call is recorded in order."""

    def __init__(self, monkeypatch, allocated_mib: int):
        self.allocated = self.peak = allocated_mib * 2**20
        self.calls = []
        for name in ("synchronize", "reset_peak_memory_stats", "memory_allocated", "max_memory_allocated"):
            monkeypatch.setattr(torch.cuda, name, getattr(self, name))

    def allocate(self, mib: int):
        self.allocated += mib * 2**20
        self.peak = max(self.peak, self.allocated)

    def synchronize(self, device=None):
        self.calls.append(("synchronize", device))

    def reset_peak_memory_stats(self, device=None):
        self.calls.append(("reset_peak_memory_stats", device))
        self.peak = self.allocated

    def memory_allocated(self, device=None):
        self.calls.append(("memory_allocated", device))
        return self.allocated

    def max_memory_allocated(self, device=None):
        self.calls.append(("max_memory_allocated", device))
        return self.peak


def test_synchronize_waits_for_a_cuda_device_and_not_for_the_cpu(monkeypatch):
    fake = FakeCudaAllocator(monkeypatch, allocated_mib=0)
    synchronize(torch.device("cpu"))
    assert fake.calls == []
    synchronize(torch.device("cuda", 1))
    assert fake.calls == [("synchronize", torch.device("cuda", 1))]


def test_peak_memory_on_a_cuda_device_reads_its_allocator_above_the_start(monkeypatch):
    gpu = torch.device("cuda", 0)
    fake = FakeCudaAllocator(monkeypatch, allocated_mib=100)  # the models' weights, already there
    fake.peak = 900 * 2**20  # an earlier measurement's peak, which the reset must forget

    def step():  # 48 MiB at most, 16 left allocated: the peak above the start is 48
        fake.calls.append("step")
        fake.allocate(48)
        fake.allocate(-32)

    assert peak_memory_mb(step, gpu) == 48
    names = [call if call == "step" else call[0] for call in fake.calls]
    assert names.index("reset_peak_memory_stats") < names.index("memory_allocated") < names.index("step")
    assert names[names.index("step") + 1 :] == ["synchronize", "max_memory_allocated"]
    assert all(call == "step" or call[1] == gpu for call in fake.calls)


def test_benchmark_device_refuses_a_device_this_machine_lacks(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert benchmark_device(None) == torch.device("cpu")
    with pytest.raises(UsageError, match="this machine has no CUDA GPU"):
        benchmark_device("cuda")
    with pytest.raises(UsageError, match="'banana' is not a device"):
        benchmark_device("banana")
    with pytest.raises(UsageError, match="runs on cpu or cuda"):
        benchmark_device("meta")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # one GPU
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert benchmark_device(None) == benchmark_device("cuda") == torch.device("cuda", 0)
    with pytest.raises(UsageError, match="has 1 CUDA GPU\\(s\\), cuda:0 to cuda:0"):
        benchmark_device("cuda:1")
    # CTranslate2 is timed on the CPU only: refused before any work on a GPU.
    monkeypatch.setattr(harness, "matmul_peak_gflops", lambda *args: pytest.fail("measured before refusing"))
    with pytest.raises(UsageError, match="--ctranslate2 times the export on the CPU"):
        run_benchmark(["tiny"], ctranslate2=True, device="cuda:0")
    with pytest.raises(UsageError, match="--mixed_precision 'fp16'"):
        run_benchmark(["tiny"], device="cpu", mixed_precision="fp16")


def test_benchmark_script_refuses_a_missing_gpu_and_a_profile_off_the_cpu_in_one_line(tmp_path):
    for options, message in (
        (["--device", "cuda:0"], "error: --device cuda:0: this machine has no CUDA GPU; pass --device cpu."),
        (
            ["--profile", "tiny", "--device", "cuda"],
            "error: --profile shows CPU operator time only, so --device cuda would not be profiled: "
            "leave out --device.",
        ),
    ):
        result = run_script_file("benchmarks/benchmark.py", "--shapes", "tiny", *options, cwd=tmp_path)
        assert result.returncode == 2 and result.stderr.strip().splitlines() == [message], result.stderr
    assert not (tmp_path / "outputs").exists()


def test_bf16_mixed_precision_runs_the_forward_passes_under_autocast():
    cpu = torch.device("cpu")
    model = build_models(SHAPES["tiny"])["ours"]
    logits_dtypes = []
    model.lm_head.register_forward_hook(lambda module, args, output: logits_dtypes.append(output.dtype))
    for mixed_precision in ("no", "bf16"):
        time_training_step(model, 2, 4, SHAPES["tiny"].vocab_size, cpu, mixed_precision)()
        time_generation(model, 2, 4, 2, 1, SHAPES["tiny"].vocab_size, cpu, mixed_precision=mixed_precision)()
        per_token_ms_by_prefix(
            model,
            cpu,
            prefixes=(2,),
            vocab=SHAPES["tiny"].vocab_size,
            window=2,
            mixed_precision=mixed_precision,
        )
    # 1 training forward, then 2 decoding steps and 4 decoding steps: 7 projections each
    assert logits_dtypes == [torch.float32] * 7 + [torch.bfloat16] * 7
    assert all(p.dtype == torch.float32 for p in model.parameters())  # autocast leaves the weights alone


def test_profile_names_the_operators():
    text = profile_shape("tiny")
    assert text.count("Self CPU time total") == 8 and "aten::addmm" in text
    assert text.count("matrix products") == 8
    assert text.count("generate beam 4, batch 32, 30 tokens") == 2  # beam search too, for both models


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


def test_startup_times_every_user_command_but_the_three_that_parse_training_arguments():
    from benchmarks import startup

    names = startup.commands()
    assert {"translate.py", "evaluate_model.py", "demo.py"} <= set(names)
    assert not set(names) & {"train.py", "train_accelerate.py", "quickstart.py"}
    rows = startup.start_up_rows()
    assert len(rows) == 2 * len(names)
    command, expect = rows["translate.py --mistyped_option"]
    assert command[-2:] == ["--mistyped_option", "1"] and expect == 2  # argparse's status for a usage error
    # A command that ends otherwise is reported by its last line, not timed.
    with pytest.raises(UsageError, match="ended with status 0, not 2, so it cannot be timed"):
        startup.run_seconds([sys.executable, "-c", "pass"], expect=2)
