"""The checks of chapter 00's exercises (the sum world: exercise 1 in notebook 00.1, exercise 2 in 00.2): each
recomputes the answer from the inputs its check cell passes and calls `helpers.exercises.check`."""
from __future__ import annotations

import pandas as pd

from helpers.evaluation import contrast
from helpers.exercises import check
from helpers.pipeline.checkpoints import load_checkpoint
from helpers.world import decoding, sums, training


def _regressions(frame: pd.DataFrame, earlier: str, later: str) -> pd.Series:
    """The question ids right at `earlier` and wrong at `later` (`contrast.contrast_set`'s regressions)."""
    pair = contrast.contrast_set(frame, earlier, later)
    return pair.loc[pair["kind"] == "regression", "question_id"]


def exercise_1(phrasing_scores, checkpoint: str, n_questions: int = 200) -> None:
    """`checkpoint`'s accuracy and answer-token loss on the first `n_questions` `adapter_train` sums in each
    phrasing, in the order of `sums.QUESTION_TEMPLATES["sum"]`: {"accuracy": [...], "loss": [...]}. The accuracy
    comes from the world's batched greedy decoding (`decoding.greedy`), the loss of the right reply in the bare form
    from the world's bucketed `training.training_step_loss`, loaded here, so that the check cell hands the learner
    no answers; no cache holds these phrasings."""
    model, tokenizer = load_checkpoint(checkpoint)
    base = sums.split("adapter_train").iloc[:n_questions]
    expected = {"accuracy": [], "loss": []}
    for template in range(len(sums.QUESTION_TEMPLATES["sum"])):
        asked = sums.make_questions("sum", base["a"].to_numpy(), base["b"].to_numpy(), template=template)
        expected["accuracy"].append(decoding.greedy(model, tokenizer, asked, progress=False)["correct"].mean())
        right = [(q, sums.answer_text("sum", t, 0)) for q, t in zip(asked["question"], base["target"])]
        expected["loss"].append(training.training_step_loss(model, tokenizer, right).item())
    return check("Exercise 1", "phrasing_scores", phrasing_scores, expected, tol=0.006,  # one answer in 200
                 hint="a dict with keys 'accuracy' and 'loss', each four values in the order of "
                      "sums.QUESTION_TEMPLATES['sum']; the loss averages all the answer tokens of the questions.")


def exercise_2(regression_share_by_kind, greedy: pd.DataFrame, subtraction: pd.DataFrame, earlier: str,
               later: str) -> None:
    """Regressions from `earlier` to `later`, as a share of the questions of each operand range of the test sums
    and of subtraction (counted with `contrast.contrast_set`, divided by the kind's question count)."""
    ids = greedy["question_id"]
    ranges = sums.operand_range(ids // 1000, ids % 1000)
    kinds = {f"{r} operands": greedy[ranges == r] for r in sums.RANGES} | {"subtraction": subtraction}
    expected = {kind: len(_regressions(frame, earlier, later)) / frame["question_id"].nunique()
                for kind, frame in kinds.items()}
    return check("Exercise 2", "regression_share_by_kind", regression_share_by_kind, expected, tol=1e-3,
                 hint="keys 'small operands', 'mixed operands', 'large operands' and 'subtraction'; a regression "
                      "is right at the earlier checkpoint and wrong at the later; divide by the kind's questions.")
