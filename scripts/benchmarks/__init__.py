"""The project's research tooling, beside the scripts that run it and not installed with the package: a
script in scripts/ imports it as `benchmarks` (its folder is the script's path), as the tests do (pytest's
`pythonpath`). `harness` times training and decoding against MarianMTModel (and the CTranslate2 export) and
formats the tables of docs/benchmarks.md (`scripts/benchmark.py`); `ctranslate2_timing` is the torch-free
process that times the export, run by its path; `training_profile` splits a recipe's training step into
phases and operators (`scripts/profile_training.py`); `gpu_estimate` estimates the paper's WMT14 recipes' GPU
hours from FLOPs (`scripts/estimate_gpu_time.py`); `quality_curve` scores a run's checkpoints against its
clock (`scripts/quality_curve.py`); `seed_comparison` and `fairseq_logs` compare recipes with seeds, fairseq
beside us (`multi30k_seeds.py` here). Nothing is imported here."""
