"""The project's research and measurement tooling, not installed with the package and not a user's commands
(those are in scripts/): the commands that measure, each run as `python scripts/benchmarks/<name>.py` from any
folder (those that import this folder as `benchmarks`, or the demo, put scripts/ first on their path), and the
modules they import, which the tests import as `benchmarks` too (pytest's `pythonpath`).

- `benchmark.py` times training and decoding against MarianMTModel (and the CTranslate2 export) and prints
  the tables of docs/benchmarks.md, by `harness`; `ctranslate2_timing` is the torch-free process that times
  the export, run by its path.
- `startup.py` times what a user waits for, whole processes: every command's `--help` and refusal, and a file
  through each backend and through CTranslate2 alone (`ctranslate2_alone`, run by its path).
- `benchmark_corpus.py` runs the WMT14 recipe's data path on corpora of growing size, by `corpus_scale`.
- `profile_training.py` splits a recipe's training step into phases and operators, by `training_profile`.
- `estimate_gpu_time.py` estimates the paper's WMT14 recipes' GPU hours from FLOPs, by `gpu_estimate`.
- `quality_curve.py` scores a run's checkpoints against its clock (the command and its functions).
- `multi30k_seeds.py` compares recipes with seeds, fairseq beside us, by `seed_comparison` and
  `fairseq_logs` (and `fairseq_prepare.sh`, `fairseq_train.sh`).
- `time_checkpoint_save.py` times a checkpoint's save; `check_gpus.py` checks the package on a GPU machine,
  from one GPU up; `demo_screenshot.py` makes docs/demo.png from the demo page (scripts/demo.py).

Nothing is imported here."""
