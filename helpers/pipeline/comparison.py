"""One table of methods × {full-set, contrast-set} metrics with paired-bootstrap markers (notebooks 05, 06).

Every method is named in METHODS and built from cached artifacts, so the whole table, bootstrap
included, is itself cached: rerunning a notebook reads it back in seconds. The cache records every
method's results the table read, so a change to any of them (an adapter's learning rate, the number of
beams) rebuilds the table too.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd
from tqdm import tqdm

from helpers import config
from helpers.evaluation import contrast, metrics, shared_bootstrap, stats
from helpers.cache.artifacts import load_or_build, register
from helpers.confidence import posthoc
from helpers.pipeline import adapters, baselines, gcm, multi_answer, p_true, verbalized
from helpers.pipeline import self_consistency as sc
from helpers.pipeline.checkpoints import get_checkpoints
from helpers.pipeline.decoded import greedy_results

FULL_SET_METRICS = [("AUC", "auc"), ("Brier", "brier"), ("ECE", "ece"), ("SmoothECE", "smooth_ece")]
CONTRAST_METRICS = [("AUC", "auc"), ("Brier", "brier"), ("ECE", "ece"), ("Δ", "delta"),
                    ("AUC class-balanced", "auc_cb"), ("Brier class-balanced", "brier_cb"),
                    ("Δ class-balanced", "delta_cb")]
# Metrics the bootstrap tests (SmoothECE is too slow to resample for every cell). The class-balanced columns average
# the improvements' and the regressions' metric: a method that scores "the later checkpoint is right" does well on
# the majority kind and badly on the other (notebook 04), so the class-balanced AUC is the one the findings decide on.
TESTED = {"auc", "brier", "ece", "delta", "auc_cb"}


def _ck():
    return get_checkpoints()


def _greedy():
    return greedy_results("test", _ck().evaluation)


def _sc(split="test", checkpoints=None):
    return sc.sc_results(split, checkpoints or _ck().evaluation)


def _recalibrated(method: str, name: str) -> pd.DataFrame:
    if name == "sc":  # fitted on each evaluation checkpoint's own adapter_train answers, as the paper's B.2 does
        return posthoc.recalibrate_per_checkpoint(_sc("adapter_train"), _sc(), method)
    # The non-oracle adapter, recalibrated without oracle labels: one map fitted on the training
    # checkpoint's own adapter_train answers, applied to every evaluation checkpoint.
    src = _ck().training[-1]
    return _per_seed(lambda s: posthoc.recalibrate_per_checkpoint(
        adapters.adapter_results("adapter_train", [src], source=src, seed=s),
        adapters.adapter_results("test", _ck().evaluation, source=src, seed=s), method, fit_checkpoint=src))


def _per_seed(make: Callable[[int], pd.DataFrame]) -> pd.DataFrame:
    """make(seed) for every adapter seed, stacked with a ``seed`` column (metrics average over seeds)."""
    return metrics.stack_seeds(make, config.adapters().seeds)


def _adapters(split, source, **kw):
    return adapters.seeded_results(split, _ck().evaluation, source=source, **kw)


def _multi_answer() -> pd.DataFrame:
    return _per_seed(lambda s: multi_answer.multi_answer_results(_ck().training[-1], seed=s))


def _copy(kind: str) -> pd.DataFrame:
    src = _ck().training[-1]
    if kind == "sc":
        both = _sc("test", [src, *_ck().evaluation])
        return contrast.copy_confidences(both, src, _ck().evaluation)
    # what the training checkpoint's own adapter (each seed) said about its own answers
    return _per_seed(lambda s: contrast.copy_confidences(
        adapters.adapter_results("test", [src, *_ck().evaluation], source=src, seed=s), src, _ck().evaluation))


def _surrogate_sc() -> pd.DataFrame:
    return sc.surrogate_sc(_ck().training[-1], _sc())


def _gcm(rung=None) -> pd.DataFrame:
    """The GCM's adapter, trained once per adapter seed on the verifier at `rung` (default the shipped one; a
    trained method: A.8.1)."""
    return _per_seed(lambda s: gcm.gcm_results("test", _ck().evaluation, seed=s, rung=rung))


def _gcm_isotonic() -> pd.DataFrame:
    """The GCM after post-hoc calibration (paper Table 17): an isotonic map per evaluation checkpoint, fitted on
    that checkpoint's own adapter_train answers as scored by the GCM, as SC + isotonic is."""
    ev = _ck().evaluation
    return _per_seed(lambda s: posthoc.recalibrate_per_checkpoint(
        gcm.gcm_results("adapter_train", ev, seed=s), gcm.gcm_results("test", ev, seed=s), "isotonic"))


METHODS: dict[str, Callable[[], pd.DataFrame]] = {
    "oracle adapter": lambda: _adapters("test", "oracle"),
    "non-oracle adapter": lambda: _adapters("test", _ck().training[-1]),
    "multi-answer adapter": lambda: _multi_answer(),
    "multi-checkpoint adapter": lambda: _adapters("test", "multi"),
    # The oracle setting (paper §1, Table 3): one adapter trained on every evaluation checkpoint's own answers.
    "multi-checkpoint oracle adapter": lambda: _adapters("test", list(_ck().evaluation)),
    # As many rows as the multi-checkpoint run, all from the last training checkpoint (notebook 06).
    "single-checkpoint data": lambda: _adapters("test", _ck().training[-1],
                                                n_examples=len(_ck().training) * config.splits().n_adapter_train),
    "self-consistency": _sc,
    "token probability": _greedy,
    "P(True)": lambda: p_true.p_true_results("test", _ck().evaluation),
    # Fine-tuned verbalized confidence (§3.1.1): each evaluation checkpoint's own verbalizing adapter (notebook 03),
    # its expected stated level as the confidence.
    "verbalized (fine-tuned)": lambda: verbalized.seeded_results("test", _ck().evaluation, source="oracle"),
    "SC + isotonic": lambda: _recalibrated("isotonic", "sc"),
    "SC + temperature": lambda: _recalibrated("temperature", "sc"),
    "SC + Platt": lambda: _recalibrated("platt", "sc"),
    "non-oracle + isotonic": lambda: _recalibrated("isotonic", "adapter"),
    "checkpoint index": lambda: baselines.checkpoint_index_results("test", _ck().evaluation),
    "GCM": _gcm,
    # The GCM on the verifier ladder's other rungs (config.gcm()): weaker and stronger than most checkpoints.
    "GCM (weak verifier)": lambda: _gcm("weak"),
    "GCM (strong verifier)": lambda: _gcm("strong"),
    "GCM + isotonic": _gcm_isotonic,
    "copy (SC)": lambda: _copy("sc"),
    "copy (non-oracle adapter)": lambda: _copy("adapter"),
    "surrogate (SC)": _surrogate_sc,
    "surrogate (non-oracle adapter)": lambda: _adapters("test", _ck().training[-1], surrogate=True),
}


# The tables the notebooks show (and `python -m helpers build` prebuilds).
TABLES = {
    "05": ["oracle adapter", "non-oracle adapter", "P(True)", "self-consistency", "token probability",
           "verbalized (fine-tuned)", "SC + isotonic", "SC + temperature", "SC + Platt", "non-oracle + isotonic",
           "checkpoint index", "GCM", "GCM + isotonic", "copy (SC)",
           "copy (non-oracle adapter)", "surrogate (SC)", "surrogate (non-oracle adapter)"],
    "06": ["oracle adapter", "multi-checkpoint oracle adapter", "multi-checkpoint adapter", "single-checkpoint data",
           "multi-answer adapter", "non-oracle adapter"],
}


def method_results(name: str) -> pd.DataFrame:
    """The standard frame of a named method on the evaluation checkpoints' test answers."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose from {list(METHODS)}")
    return METHODS[name]()


def scores(df: pd.DataFrame, pairs, min_size: int, checkpoints=None, normalizer=None) -> dict:
    """Every full-set and contrast-set metric of one method's frame, keyed (set, label).

    Full set over `checkpoints` (default: the evaluation checkpoints): AUC, Brier, ECE, SmoothECE.
    Contrast sets over `pairs` with at least `min_size` questions: AUC, Brier, ECE, SmoothECE, Δ,
    Δ class-balanced and the number of pairs. A frame with a ``seed`` column (a trained method) gets the
    mean over its seeds (paper A.8.1).
    """
    full = metrics.seed_average(metrics.full_set_metrics, df, _ck().evaluation if checkpoints is None else checkpoints)
    cont = metrics.seed_average(contrast.contrast_metrics, df, pairs, min_size=min_size, normalizer=normalizer)
    out = {("full set", label): full[key] for label, key in FULL_SET_METRICS}
    out.update({("contrast set", label): cont[key] for label, key in CONTRAST_METRICS + [("SmoothECE", "smooth_ece")]})
    out[("contrast set", "pairs")] = int(cont["n_pairs"])
    return out


def _table_scores(df: pd.DataFrame, pairs, min_size: int) -> dict:
    every = scores(df, pairs, min_size)
    return {key: every[key] for key in [("full set", label) for label, _ in FULL_SET_METRICS]
            + [("contrast set", label) for label, _ in CONTRAST_METRICS]}


@register("comparison")
def _build_comparison(folder, methods: str, reference: str) -> dict:
    """Metrics of several methods and, for each cell, whether it is distinguishable from the reference."""
    names = methods.split("|")
    frames = {name: method_results(name) for name in tqdm(names, desc="methods", leave=False)}
    pairs = contrast.all_pairs(_ck().evaluation)
    min_size, n_resamples = config.contrast().min_size, config.bootstrap().table_resamples
    values = pd.DataFrame({name: _table_scores(df, pairs, min_size) for name, df in frames.items()}).T
    same = pd.DataFrame(False, index=values.index, columns=values.columns)
    def full(key):
        return lambda a, b: stats.full_set_bootstrap(key, a, b, _ck().evaluation, n=n_resamples, return_diffs=True)

    def over_pairs(key):
        return lambda a, b: shared_bootstrap.contrast_bootstrap_over_pairs(key, a, b, pairs, min_size, n=n_resamples)

    # A trained method's frame holds one result per seed: the bootstrap averages them and covers their spread.
    for name in tqdm([n for n in names if n != reference], desc="bootstrap vs " + reference, leave=False):
        for label, key in FULL_SET_METRICS:
            if key in TESTED:
                run = shared_bootstrap.over_seeds(full(key), frames[name], frames[reference])
                same.loc[name, ("full set", label)] = run["contains_zero"]
        # Every method scores the same answers, so all share the contrast sets; in a world where no pair
        # reaches `min_size` the contrast cells are NaN and there is nothing to resample.
        has_pairs = np.isfinite(values.loc[reference, ("contrast set", "AUC")])
        for label, key in CONTRAST_METRICS:
            if key in TESTED and has_pairs:
                run = shared_bootstrap.over_seeds(over_pairs(key), frames[name], frames[reference])
                same.loc[name, ("contrast set", label)] = run["contains_zero"]
    seeds = {name: len(metrics.seed_frames(df)) for name, df in frames.items()}
    return {"values": values, "indistinguishable": same, "reference": reference, "seeds": seeds}


def comparison(methods: list[str], reference: str = "oracle adapter") -> dict:
    """Cached table: `values` (methods × metrics), `indistinguishable` (bootstrap interval vs the reference
    contains 0)."""
    unknown = [m for m in [*methods, reference] if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; choose from {list(METHODS)}")
    if reference not in methods:
        methods = [reference, *methods]
    return load_or_build("comparison", methods="|".join(methods), reference=reference)


def marked(table: dict, digits: int = 3) -> pd.DataFrame:
    """The values as text, with † where the bootstrap cannot tell the cell from the reference (paper A.8.2)."""
    values, same = table["values"], table["indistinguishable"]
    text = values.map(lambda v: f"{v:.{digits}f}" if isinstance(v, float) and np.isfinite(v) else str(v))
    text = text.where(~same | (values.index == table["reference"])[:, None], text + " †")
    seeds = table.get("seeds", {})  # trained methods: the mean over this many seeds
    return text.rename(index=lambda m: f"{m} (mean of {seeds[m]} seeds)" if seeds.get(m, 1) > 1 else m)
