"""Measuring the model: `harness` times training and decoding against MarianMTModel (and the CTranslate2
export) and formats the tables of docs/benchmarks.md (`scripts/benchmark.py`); `ctranslate2_timing` is the
torch-free process that times the export, run by its path; `training_profile` splits a recipe's training step
into phases and operators (`scripts/profile_training.py`); `gpu_estimate` estimates the paper's WMT14
recipes' GPU hours from FLOPs (`scripts/estimate_gpu_time.py`). Nothing is imported here."""
