"""What `python -m helpers build` builds, stage by stage (`stages`): every entry the notebooks load."""
from __future__ import annotations


from helpers import config
from helpers.cache import artifacts
from helpers.pipeline import chapter04, chapter06, claims, feature_variance, verbalized
from helpers.pipeline.comparison import TABLES, comparison, method_results
from helpers.pipeline.decoded import greedy_results, rephrasing_results
from helpers.pipeline.self_consistency import sampled_sc_results, sc_results
from helpers.world.checkpoints import POST_TRAINED


def stages() -> dict:
    """The build stages, in order: stage -> {task: function}. The tasks of one stage are independent of each
    other (they may share what they read: the cache's locks make a second builder wait for the first)."""
    config.set_threads()  # HELPERS_THREADS, or 2
    methods = list(dict.fromkeys(m for names in TABLES.values() for m in names))
    return {
        "world": {"world": lambda: (artifacts.load_or_build("world"), artifacts.load_or_build("selection"))},
        "greedy": {f"greedy {split}": (lambda split=split: greedy_results(split))
                   for split in ("hundred", "test", "adapter_train", "transfer_test")},
        "inference-time methods": {
            "post-training": lambda: [artifacts.load_or_build("greedy", checkpoint=m, split=s)
                                      for m in POST_TRAINED for s in ("hundred", "test")],
            "self-consistency test": lambda: sc_results("test"),
            "self-consistency adapter_train": lambda: sc_results("adapter_train"),
            "sampled self-consistency": lambda: sampled_sc_results("test"),
            "rephrasings": rephrasing_results,
            **{f"verbalized seed {seed}": (lambda seed=seed: verbalized.build_seed(seed))
               for seed in config.adapters().seeds},
            "verbalized rephrasings": verbalized.verbalized_rephrasings,
        },
        # Every method of the results tables of notebooks 05 and 06 (training every adapter and baseline they use),
        # notebook 06's own adapters (transfer matrix, random labels, domain transfer, exercise 1), and the
        # adapters' features that its B.7 analysis reads.
        "adapters and baselines": {**{f"method {name}": (lambda name=name: method_results(name)) for name in methods},
                                   **chapter06.build_tasks(),
                                   **{f"feature variance {source}":
                                      (lambda source=source: feature_variance.feature_variance(source))
                                      for source in feature_variance.SOURCES}},
        # The results tables, and every row of the findings table (`helpers.pipeline.claims`), one task each.
        "tables": {**{f"table {key}": (lambda names=names: comparison(names, reference="oracle adapter"))
                      for key, names in TABLES.items()},
                   "notebook 04 bootstrap": chapter04.sc_differences, "domain transfer claim": claims.domain_claim,
                   **{f"claim {name}": (lambda name=name: artifacts.load_or_build(name))
                      for name in ("transfer_claim", "random_claim")},
                   **{f"claim: {c.claim}": (lambda c=c: claims.decided(c)) for c in claims.CLAIMS}},
    }
