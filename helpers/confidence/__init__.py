"""Confidence methods, each returning one row per (checkpoint, question).

- ``self_consistency``: beams (or samples) grouped by answer (notebook 02)
- ``posthoc``: isotonic, temperature and Platt recalibration (notebooks 02, 05)
- ``verbalized`` (with ``verbalized_text``: the stated levels and their parsing, and
  ``verbalized_readout``: the stated and expected readouts): the model says how sure it is (notebook 03)
- ``adapters`` (with ``readout``: "Correct?" and P(Y)): confidence adapters (notebooks 05, 06)
- ``baselines``: question features, the feature baselines' fit and the GCM's verifier run (notebooks 05, 06)
- ``feature_variance``: the adapters' features across seeds, layer by layer (paper B.7; notebook 06)

Inside the package they import each other without cycles: readout and the verbalized_* helpers
first, then self_consistency, adapters, verbalized, baselines and feature_variance.
"""
