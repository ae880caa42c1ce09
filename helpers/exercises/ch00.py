"""The checks of notebook 00's exercises (the sum world): each recomputes the answer from the inputs its
check cell passes and calls `helpers.exercises.check`."""
from __future__ import annotations

import pandas as pd

from helpers.evaluation import contrast
from helpers.exercises import check, uncheckable
from helpers.pipeline import decoded
from helpers.world import sums


def _regressions(frame: pd.DataFrame, earlier: str, later: str) -> pd.Series:
    """The question ids right at `earlier` and wrong at `later` (`contrast.contrast_set`'s regressions)."""
    pair = contrast.contrast_set(frame, earlier, later)
    return pair.loc[pair["kind"] == "regression", "question_id"]


def exercise_1(forgotten, greedy: pd.DataFrame, checkpoints) -> None:
    """The test questions the last checkpoint gets wrong and at least one earlier checkpoint got right."""
    last = checkpoints[-1]
    lost = set().union(*(_regressions(greedy, earlier, last) for earlier in checkpoints[:-1]))
    return check("Exercise 1", "forgotten", forgotten, len(lost), tol=0,
                 hint="a question counts once, however many earlier checkpoints got it right.")


def exercise_2(phrasing_accuracy, checkpoint: str, n_questions: int = 500) -> None:
    """`checkpoint`'s accuracy on the first `n_questions` test sums in each phrasing, in the order of
    `sums.QUESTION_TEMPLATES["sum"]`, read from its cached answers under every phrasing (loaded here, so that
    the check cell hands the learner no answers)."""
    first = sums.split("test")["question_id"].iloc[:n_questions]
    rephrased = decoded.rephrasing_results([checkpoint])
    asked = rephrased[rephrased["question_id"].isin(first)]
    if asked["question_id"].nunique() < n_questions:
        return uncheckable("Exercise 2", f"this world's cached phrasings hold fewer than {n_questions} questions")
    expected = asked.groupby("template")["correct"].mean().sort_index().to_numpy()
    return check("Exercise 2", "phrasing_accuracy", phrasing_accuracy, expected, tol=0.003,
                 hint="four accuracies, one per phrasing, in the order of sums.QUESTION_TEMPLATES['sum'].")


def exercise_3(regressions_by_kind, greedy: pd.DataFrame, subtraction: pd.DataFrame, earlier: str,
               later: str) -> None:
    """Regressions from `earlier` to `later` on each operand range of the test sums and on subtraction."""
    ids = greedy["question_id"]
    ranges = sums.operand_range(ids // 1000, ids % 1000)
    kinds = {f"{r} operands": greedy[ranges == r] for r in sums.RANGES} | {"subtraction": subtraction}
    expected = {kind: len(_regressions(frame, earlier, later)) for kind, frame in kinds.items()}
    return check("Exercise 3", "regressions_by_kind", regressions_by_kind, expected, tol=0,
                 hint="keys 'small operands', 'mixed operands', 'large operands' and 'subtraction'; "
                      "a regression is right at the earlier checkpoint and wrong at the later.")
