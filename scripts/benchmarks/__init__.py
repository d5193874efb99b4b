"""Harnesses behind `scripts/benchmark.py`: `harness` measures this model against MarianMTModel (and its
CTranslate2 export) and formats the tables of docs/benchmarks.md; `ctranslate2_timing` is the torch-free
process that times the export. Outside the installed package: they measure the library, they are not part
of it."""
