"""One colour per meaning, for every figure of the series (helpers.figures and the notebooks' own cells).

Each colour below means one thing wherever it appears; a figure that needs a colour for something new adds
it here, under a name that says what it means. Where a pair is read against each other (over/under,
improvement/regression, right/wrong) both colours come from the Okabe-Ito set, which stays apart for
red-green colour blindness.
"""
from __future__ import annotations

from matplotlib.colors import to_rgba

# Calibration gaps in a reliability diagram: confidence above accuracy (over) or below it (under).
OVERCONFIDENT = "#d55e00"  # vermilion
UNDERCONFIDENT = "#009e73"  # bluish green
MEAN_CONFIDENCE = "#111111"  # the tick at a bin's mean confidence
INTERVAL = "#222222"  # bootstrap intervals
ACCURACY = "#4c72b0"  # a bar's height: accuracy (seaborn's first colour, the default of every bar)

# Contrast sets: a question the later checkpoint gets right (improvement) or wrong (regression).
IMPROVEMENT = "#0072b2"  # blue
REGRESSION = "#e69f00"  # orange
IMPROVEMENT_MAP, REGRESSION_MAP = "Blues", "Oranges"  # the same two, as colour maps for counts

# An answer's outcome in confidence histograms.
RIGHT = "#56b4e9"  # sky blue
WRONG = "#cc79a7"  # reddish purple

# Kinds of question (notebook 00): operand ranges, subtraction and the mistake family, and all of them.
RANGES = {"all": "#000000", "small": "#17becf", "mixed": "#7f7f7f", "large": "#bcbd22",
          "subtraction": "#e377c2", "family": "#8c564b"}  # "family": `sums.MISTAKE_FAMILY`

# The two windows of selected checkpoints, and the cut between them (a black dashed line).
WINDOWS = {"training": "#9467bd", "evaluation": "#d62728"}

# Data phases behind a curve, in the colour of the operand range that dominates them (so grey means mixed operands
# in every figure): small and large operands filled pale, mixed hatched, the uniform stretch dotted.
PHASES = {"small": dict(facecolor=to_rgba(RANGES["small"], 0.14), edgecolor="none"),
          "large": dict(facecolor=to_rgba(RANGES["large"], 0.22), edgecolor="none"),
          "mixed": dict(facecolor="none", edgecolor=to_rgba(RANGES["mixed"], 0.5), hatch="///"),
          "uniform": dict(facecolor="none", edgecolor=to_rgba(RANGES["all"], 0.35), hatch="..")}

# Verdicts of the findings (notebook 07): reproduced, inconclusive, contradicted.
VERDICTS = {"reproduced": "#1b7837", "inconclusive": "#d9d9d9", "contradicted": "#762a83"}

CHANCE = "dimgrey"  # the chance line (AUC 0.5)
