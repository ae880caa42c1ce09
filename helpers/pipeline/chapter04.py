"""Notebook 04's glue: its five methods (`methods`) and its cached bootstrap of self-consistency against each
of them (`sc_differences`, section 7)."""
from __future__ import annotations


import pandas as pd

from helpers import config
from helpers.cache.artifacts import load_or_build, register
from helpers.evaluation import contrast, findings, shared_bootstrap, stats
from helpers.pipeline import baselines, verbalized
from helpers.pipeline.checkpoints import get_checkpoints
from helpers.pipeline.decoded import greedy_results
from helpers.pipeline.self_consistency import sc_results


def methods() -> dict[str, pd.DataFrame]:
    """Notebook 04's five methods on the evaluation checkpoints' test answers; "copy" gives both checkpoints of
    a pair what the last training checkpoint's token probability said about its own answer."""
    ck = get_checkpoints()
    src = ck.training[-1]
    return {"token probability": greedy_results("test", ck.evaluation),
            "self-consistency": sc_results("test", ck.evaluation),
            "verbalized": verbalized.verbalized_results("test", ck.evaluation, source="oracle"),
            "difficulty-only": baselines.difficulty_results("test", ck.evaluation),
            "copy": contrast.copy_confidences(greedy_results("test", [src, *ck.evaluation]), src, ck.evaluation)}


@register("sc_differences")
def _build_sc_differences(folder) -> pd.DataFrame:
    """Notebook 04 §7: self-consistency's AUC minus each other method's, on the full set and on the contrast sets of
    every pair of evaluation checkpoints with `min_size` shared contrast questions (class-balanced, plain beside),
    each decided by one shared bootstrap over all those pairs (`shared_bootstrap`)."""
    ck, every, min_size = get_checkpoints(), methods(), config.contrast().min_size
    sc, pairs, rows = every["self-consistency"], contrast.all_pairs(ck.evaluation), []
    for name, df in every.items():
        if name == "self-consistency":
            continue
        full = stats.full_set_bootstrap("auc", sc, df, ck.evaluation, seed=0, return_diffs=True)
        row = {"method": name, "full-set AUC: SC − method": full["difference"],
               "full set: verdict": findings.decision(full["diffs"], "higher")["verdict"]}
        for label, key in (("class-balanced", "auc_cb"), ("plain", "auc")):
            run = shared_bootstrap.contrast_bootstrap_over_pairs(key, sc, df, pairs, min_size, seed=0)
            test = findings.decision(run["diffs"], "higher")
            row.update({f"contrast AUC, {label}: SC − method": run["difference"], f"{label}: 5%": test["5%"],
                        f"{label}: 95%": test["95%"], f"{label}: verdict": test["verdict"]})
        rows.append({**row, "pairs": run["n_pairs"]})
    return pd.DataFrame(rows).set_index("method")


def sc_differences() -> pd.DataFrame:
    """The cached table of notebook 04 §7: for each method of `methods`, self-consistency's AUC minus
    its own on the full set and averaged over every pair of evaluation checkpoints with at least
    `config.contrast().min_size` contrast questions shared by both methods, with the verdicts of "self-consistency
    is higher" (`config.bootstrap().n_resamples` resamples, one shared by every pair)."""
    return load_or_build("sc_differences")
