"""Helpers for the notebook series on the confidence calibration of language models.

The modules form layers; each imports only modules of lower layers (tests/test_layers.py checks it,
and that no two modules import each other, directly or through others):

0. ``config`` (every setting), ``validation`` (argument checks)
1. ``sums`` (questions and splits), ``artifacts`` (the cache), ``metrics``
2. ``model`` (tokenizer and GPT-2), ``loop`` (the training loop), ``contrast`` (contrast sets), ``plots``,
   ``shipped`` (the trained world committed under data/world/)
3. ``lora`` (the one LoRA implementation), ``checkpoints`` (which exist, where, loading), ``stats`` (bootstrap)
4. ``decoding`` (greedy, sampling, beams; cached greedy results), ``shared_bootstrap`` (the bootstrap over pairs)
5. ``training`` (the world's run and the checkpoint selection)
6. ``rl`` (notebook 01's post-training) and ``confidence.*`` (the methods; acyclic among themselves)
7. ``comparison`` (the results tables of notebooks 05 and 06), ``findings`` (the claims, decided by the bootstrap),
   ``explorers`` (ipywidgets controls over the figures)
8. ``notebook`` (the setup cell), ``twins`` (the learner's notebooks, derived from the answer twins),
   ``__main__`` (the command line)

Importing the package imports the modules that register cached artifacts (``training``,
``decoding``, ``rl``, ``confidence.*``, ``comparison``), so that `helpers.artifacts` can build any
artifact by name without importing its users.
"""
import warnings

# tqdm.auto (imported by transformers) warns in Jupyter when ipywidgets is absent; the series
# uses plain text progress bars on purpose, so that committed notebooks carry no widget state.
warnings.filterwarnings("ignore", message="IProgress not found")

LAYERS = [
    ["config", "validation"],
    ["sums", "artifacts", "metrics"],
    ["model", "loop", "contrast", "plots", "shipped"],
    ["lora", "checkpoints", "stats"],
    ["decoding", "shared_bootstrap"],
    ["training"],
    ["rl", "confidence"],
    ["comparison", "findings", "explorers"],
    ["notebook", "twins", "__main__"],
]

from . import comparison, decoding, rl, training  # noqa: E402,F401  (register their builders)
from .confidence import feature_variance, verbalized  # noqa: E402,F401  (not imported by the modules above)
