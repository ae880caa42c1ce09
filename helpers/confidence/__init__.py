"""Confidence methods, each returning one row per (checkpoint, question).

- ``self_consistency``: beams (or samples) grouped by answer (notebook 02)
- ``posthoc``: isotonic, temperature and Platt recalibration (notebooks 02, 05)
- ``verbalized`` (with ``verbalized_text``: the stated levels and their parsing, and
  ``verbalized_readout``: the stated and expected readouts): the model says how sure it is (notebook 03)
- ``adapters`` (with ``readout``: "Correct?" and P(Y)): confidence adapters (notebooks 05, 06)
- ``p_true``: the checkpoint's own zero-shot P(Yes) after "Correct?" (Kadavath et al., 2022; notebook 05)
- ``baselines``: difficulty, checkpoint index and the GCM (notebooks 05, 06)
- ``feature_variance``: the adapters' features across seeds, layer by layer (paper B.7; notebook 06)

Inside the package they import each other without cycles: readout and the verbalized_* helpers
first, then self_consistency, p_true, adapters, verbalized, and baselines and feature_variance last.
"""
