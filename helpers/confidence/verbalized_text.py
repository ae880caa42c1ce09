"""The text of verbalized confidence: the stated levels, the suffix the adapters learn, and its parsing.

After its own greedy answer, an adapted checkpoint continues with ``"\\nConfidence: 70%"`` and the end
mark. The stated number is learned from the checkpoint's *empirical accuracy* on each question: the share
of k sampled answers that are right, rounded to the nearest 10% (CalibratedMath; Lin, Hilton and Evans
2022). This module is the text and the arithmetic of that: `parse_confidence` reads any stated
confidence, `confidence_suffix` writes the one the adapters learn, `round_to_level` and
`empirical_targets` turn sampled answers into targets. Used by helpers.confidence.verbalized (notebook 03).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

MARKER = "\nConfidence: "  # what the adapted model says after its answer, before the number
LEVELS = tuple(range(0, 101, 10))  # the stated levels, in percent


# ---------------------------------------------------------------------------- parsing

_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
          "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_WORD_VALUES = {w: i for i, w in enumerate(_UNITS)} | {w: 10 * i for i, w in enumerate(_TENS) if w}
_WORD_VALUES["fourty"] = 40  # a common misspelling
_WORD = r"(?:" + "|".join(sorted(_WORD_VALUES, key=len, reverse=True)) + r")"
# "seventy", "seventy-five", "seventy five", "one hundred", "a hundred", "hundred"
_WORDS_NUMBER = re.compile(rf"\b(?:(?:one|a)\s+)?hundred\b|\b{_WORD}(?:[\s-]+{_WORD})?\b", re.IGNORECASE)
# A number stands alone: "7O%" (a letter O) or "70.5.1" is not a number here.
_NUMBER = re.compile(r"(?<![\w.])(-?\d+(?:\.\d+)?|-?\.\d+)(?!\w|\.\d)")
_PERCENT_AFTER = re.compile(r"^\s*(%|per\s*cent\b|percent\b)", re.IGNORECASE)


def _words_value(match: str) -> int | None:
    words = re.split(r"[\s-]+", match.strip().lower())
    if words[-1] == "hundred":
        return 100
    values = [_WORD_VALUES[w] for w in words]
    if len(values) == 1:
        return values[0]
    tens, unit = values
    if tens % 10 == 0 and tens >= 20 and 0 < unit < 10:  # "seventy five"
        return tens + unit
    return None


def parse_confidence(text) -> float | None:
    """The confidence a text states, as a probability in [0, 1], or None if it states none clearly.

    Accepts "70%", "70 %", "70 percent", "0.7", "seventy percent", "seventy-five per cent",
    "I'm 70% sure", "Confidence: 70%" and "Confidence: 70". Rules:

    - if the text says "confidence", only what follows its last mention is read;
    - exactly one number must be stated ("60% or 70%" gives None);
    - a number followed by "%" or "percent" (digits or words) is a percentage;
    - a bare number with a decimal point is a probability and must lie in [0, 1] ("0.7", ".5");
    - a bare whole number is ambiguous ("It is 4." is an answer, not 4%) and counts, as a percentage,
      only right after "Confidence:";
    - anything outside 0..100% gives None, as do non-strings and text with no number.
    """
    if not isinstance(text, str):
        return None
    found = re.split(r"confidence\s*[:=]?", text, flags=re.IGNORECASE)
    part, after_marker = found[-1], len(found) > 1
    if not part.strip():
        return None
    values = []
    for m in _NUMBER.finditer(part):
        raw = m.group(1)
        value = float(raw)
        if _PERCENT_AFTER.match(part[m.end():]):
            values.append(value / 100)
        elif "." in raw:
            values.append(value if 0 <= value <= 1 else float("nan"))
        elif after_marker and not part[: m.start()].strip():
            values.append(value / 100)
        else:
            values.append(float("nan"))  # a bare whole number elsewhere: ambiguous
    if not values:
        for m in _WORDS_NUMBER.finditer(part):
            value = _words_value(m.group(0))
            percent = _PERCENT_AFTER.match(part[m.end():]) or (after_marker and not part[: m.start()].strip())
            values.append(value / 100 if value is not None and percent else float("nan"))
    if len(values) != 1:
        return None
    value = values[0]
    if not np.isfinite(value) or not 0.0 <= value <= 1.0:
        return None
    return float(value)


def confidence_suffix(confidence: float) -> str:
    """The text the adapter learns to say after an answer: "\\nConfidence: 70%" (confidence in [0, 1])."""
    level = round_to_level(confidence)
    return f"{MARKER}{int(round(level * 100))}%"


# ---------------------------------------------------------------------------- targets


def round_to_level(share):
    """Round a share in [0, 1] to the nearest 10% (halves round up: 0.25 -> 0.3)."""
    arr = np.asarray(share, dtype=float)
    if arr.size and (not np.all(np.isfinite(arr)) or arr.min() < 0 or arr.max() > 1):
        raise ValueError("shares must be finite and lie in [0, 1]; pass accuracies, not percentages")
    out = np.floor(arr * 10 + 0.5 + 1e-9) / 10
    return float(out) if out.ndim == 0 else out


def empirical_targets(samples: pd.DataFrame) -> pd.DataFrame:
    """Per question: n_samples, n_correct, accuracy (share right) and target (rounded to 10%).

    `samples` has one row per sampled answer with question_id and correct, as `decoding.sample` returns.
    """
    if not isinstance(samples, pd.DataFrame) or samples.empty:
        raise ValueError("samples is empty; pass the frame decoding.sample returns (one row per sampled answer)")
    missing = {"question_id", "correct"} - set(samples.columns)
    if missing:
        raise ValueError(f"samples lacks columns {sorted(missing)}; pass the frame decoding.sample returns")
    grouped = samples.groupby("question_id", sort=False)["correct"]
    out = pd.DataFrame({"n_samples": grouped.size(), "n_correct": grouped.sum().astype(int)}).reset_index()
    out["accuracy"] = out["n_correct"] / out["n_samples"]
    out["target"] = round_to_level(out["accuracy"].to_numpy())
    return out
