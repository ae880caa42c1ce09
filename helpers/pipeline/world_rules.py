"""The rules the series needs from its world, measured on the selected checkpoints (notebook 00)."""
from __future__ import annotations


import pandas as pd

from helpers import config
from helpers.evaluation.contrast import consecutive_pairs, flip_counts
from helpers.pipeline.checkpoints import get_checkpoints
from helpers.pipeline.decoded import greedy_results
from helpers.world import sums
from helpers.world.checkpoints import window_changes


def world_rules() -> dict:
    """The rules the series needs from its world, measured on the selected checkpoints (notebook 00).

    Returns `values`: name -> (measured value, whether the rule holds), for the first and last test
    accuracy, the evaluation pairs with a contrast set of at least `config.contrast().min_size` (most of
    them), the fewest regressions between neighbouring evaluation checkpoints, and the evaluation pairs
    whose subtraction contrast set reaches `config.contrast().min_size_transfer` (at least one: notebook
    06's domain transfer); and `windows`: `checkpoints.window_changes` of each operand range and
    subtraction inside the training and the evaluation window, and of the mistake family
    (`sums.in_mistake_family`), "both ways" when accuracy rises and falls by more than `both_ways_at_least`
    (the mistake family: `mistake_both_ways_at_least`, so that checkpoints are really wrong and then
    right again), and "needed" where an experiment relies on it: every row but
    subtraction in the training window (no confidence method trains on subtraction answers; notebook 06
    judges on them at the evaluation checkpoints only). Thresholds: `config.world().rules`.
    """
    ck, rules, c = get_checkpoints(), dict(config.world().rules), config.contrast()
    test, sub = greedy_results("test"), greedy_results("transfer_test")
    accuracy = test.groupby("checkpoint", sort=False)["correct"].mean()
    flips = flip_counts(test, ck.evaluation)
    neighbours = flips.merge(pd.DataFrame(consecutive_pairs(ck.evaluation), columns=["ckpt_i", "ckpt_j"]))
    need_regressions = max(1, round(rules["regressions_per_5000"] * config.splits().n_test / 5000))
    big, big_sub = (int((flips["contrast"] >= c.min_size).sum()),
                    int((flip_counts(sub, ck.evaluation)["contrast"] >= c.min_size_transfer).sum()))
    values = {
        f"first accuracy (< {rules['first_below']})":
            (round(float(accuracy[ck.all[0]]), 3), accuracy[ck.all[0]] < rules["first_below"]),
        f"last accuracy (>= {rules['last_at_least']})":
            (round(float(accuracy[ck.all[-1]]), 3), accuracy[ck.all[-1]] >= rules["last_at_least"]),
        f"evaluation pairs with >= {c.min_size} contrast questions (most)":
            (f"{big}/{len(flips)}", big > len(flips) / 2),
        f"fewest regressions between neighbouring evaluation checkpoints (>= {need_regressions})":
            (int(neighbours["regressions"].min()), neighbours["regressions"].min() >= need_regressions),
        f"evaluation pairs with >= {c.min_size_transfer} subtraction contrast questions (>= 1)":
            (big_sub, big_sub >= 1),
    }
    questions = sums.split("test")
    ranges = sums.operand_range(questions["a"], questions["b"])
    groups = {f"{r} operands": questions["question_id"][ranges == r] for r in sums.RANGES}
    family = f"{sums.MISTAKE_FAMILY} family"
    groups[family] = questions["question_id"][sums.in_mistake_family(questions["a"], questions["b"])]
    windows = {"training": ck.training, "evaluation": ck.evaluation}
    at_least = {g: rules["both_ways_at_least"] for g in [*groups, "subtraction"]}
    at_least[family] = rules["mistake_both_ways_at_least"]
    table = pd.concat([window_changes(test, windows, groups, at_least),
                       window_changes(sub, windows, {"subtraction": sums.split("transfer_test")["question_id"]},
                                      at_least)])
    order = [(w, g) for w in windows for g in [*groups, "subtraction"]]
    table = table.loc[order]
    table["needed"] = [not (w == "training" and g == "subtraction") for w, g in order]
    return {"values": {k: (v, bool(ok)) for k, (v, ok) in values.items()}, "windows": table}
