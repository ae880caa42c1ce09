"""The pipeline: every cached entry of the series, built from the methods below it and loaded by name.

Each module here registers the builders of one kind of entry (`@register`) and the functions that load
them; the methods they run live in `helpers.world`, `helpers.confidence` and `helpers.evaluation`, which
never touch the cache. A builder's key holds the code of its own module and of every module it imports, so
the modules are narrow: editing a method rebuilds what runs it, and what was built from that.

- ``checkpoints``: the selected checkpoints, where they live, and `load_per_checkpoint`
- ``training_run`` (the `world` entry), ``selection``, ``world_rules``, ``post_training``: the world itself
- ``decoded``: greedy answers, beams, samples and rephrasings, decoded once per checkpoint
- ``self_consistency``, ``p_true``, ``answers``: the inference-time methods on those
- ``adapters``, ``multi_answer``, ``verifier``, ``gcm``, ``baselines``, ``verbalized``, ``feature_variance``:
  the trained methods and baselines
- ``comparison`` (the results tables), ``claims`` (the findings table), ``chapter03``, ``chapter04``,
  ``chapter06`` (each chapter's own glue, for all of its notebooks), ``worlds`` (the replication worlds'
  result files) and ``plan`` (what `python -m helpers build` builds, stage by stage)
"""
from helpers.pipeline import (adapters, answers, baselines, chapter03, chapter04, chapter06, checkpoints,  # noqa: F401
                              claims, comparison, decoded, feature_variance, gcm, multi_answer, p_true, plan,
                              post_training, selection, self_consistency, training_run, verbalized, verifier,
                              world_rules, worlds)
