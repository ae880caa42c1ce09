"""Helpers for the notebook series on the confidence calibration of language models.

The package is in layers, one folder each, in import order; a module imports
only from its own layer or lower ones (tests/test_layers.py checks it, and that no artifact is loaded by
name from a higher layer than its builder's):

- ``config``: every size, seed and hyper-parameter, in one place a user overrides
- ``cache/``: train-or-load (``artifacts``), the code keys (``fingerprint``), the shipped world (``shipped``)
  and the CPU kernels its floats need (``kernels``): machinery
- ``evaluation/``: metrics, contrast sets, bootstrap statistics and the claims decided by them
- ``world/``: the sum world, the tiny GPT-2, its training run and checkpoint selection, decoding, post-training
- ``confidence/``: the confidence methods (self-consistency, verbalized, adapters, baselines, ...)
- ``pipeline/``: every cached entry: the builders that run the methods above, and the functions that load them
- ``figures/``: plots and the ipywidgets explorers
- ``build/``: the notebooks' setup cell, the answer twins and the command line: machinery

The method layers (``evaluation``, ``world``, ``confidence``) never touch the cache. Importing the package
imports the pipeline, so that `helpers.cache.artifacts` can build any artifact by name.
"""
import warnings

# First, before torch or numpy runs: the CPU kernels the shipped world was computed with (helpers.cache.kernels).
from helpers.cache import kernels

kernels.pin()

# tqdm.auto (imported by transformers) warns in Jupyter when ipywidgets is absent; the series
# uses plain text progress bars on purpose, so that committed notebooks carry no widget state.
warnings.filterwarnings("ignore", message="IProgress not found")

LAYERS = ["config", "cache", "evaluation", "world", "confidence", "pipeline", "figures", "exercises", "build"]

# The pipeline imports every module that registers a builder (`@artifacts.register`), so that any artifact can be
# built by name.
from helpers import pipeline  # noqa: E402,F401
