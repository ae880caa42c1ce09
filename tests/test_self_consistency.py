import numpy as np
import pandas as pd
import pytest
import torch

from helpers.world import decoding, sums
from helpers.evaluation import metrics
from helpers.confidence import posthoc
from helpers.confidence import self_consistency as sc
from helpers.world.model import chat_prompt


def _forward_logprob(model, tok, question, reply):
    """Summed log-probability of reply + end mark after the prompt, by one teacher-forced pass."""
    prompt = tok(chat_prompt(question), add_special_tokens=False)["input_ids"]
    answer = tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([prompt + answer])).logits[0].double(), -1)
    return sum(logp[len(prompt) + k - 1, t].item() for k, t in enumerate(answer))


def test_beam_scores_are_summed_logprobs(checkpoint):
    _, model, tok = checkpoint
    questions = sums.split("test").iloc[:6]
    out = decoding.beams(model, tok, questions, num_beams=5, num_return_sequences=5, batch_size=3, progress=False)
    assert len(out) == 30
    assert (out.groupby("question_id")["logprob"].apply(lambda s: s.is_monotonic_decreasing)).all()
    for _, row in out[out["ended"]].iterrows():
        q = questions.set_index("question_id").loc[row["question_id"], "question"]
        assert row["logprob"] == pytest.approx(_forward_logprob(model, tok, q, row["text"]), abs=1e-4)


def test_group_masses_sum_to_one_and_pick_the_heaviest():
    answer, conf, masses = sc.group_answers([936, 935, 936, None], [0.4, 0.3, 0.1, 0.2])
    assert masses.sum() == pytest.approx(1.0)
    assert answer == 936 and conf == pytest.approx(0.5)
    assert masses["none"] == pytest.approx(0.2)


def test_ties_are_broken_by_the_best_candidate():
    # weights that sum exactly in floating point: 5: 0.25, 6: 0.125 + 0.125 = 0.25; 5 came first
    assert sc.group_answers([5, 6, 6, 5], [0.25, 0.125, 0.125, 0.0])[0] == 5
    assert sc.group_answers([6, 5, 5, 6], [0.25, 0.125, 0.125, 0.0])[0] == 6
    assert sc.group_answers([7, 8], [1, 1])[0] == 7


def test_unparsable_beams_never_win():
    assert sc.group_answers([None, None, None], [0.5, 0.3, 0.2])[:2] == (None, 0.0)
    answer, conf, _ = sc.group_answers([None, 12], [0.9, 0.1])
    assert answer == 12 and conf == pytest.approx(0.1)


def _reference(answers, weights):
    """The rule written out by hand for one question, independently of the helpers: (answer, confidence)."""
    total, masses, first = sum(weights), {}, {}
    for rank, (a, w) in enumerate(zip(answers, weights)):
        if a is not None:
            masses[a] = masses.get(a, 0.0) + w / total
            first.setdefault(a, rank)
    if not masses:
        return None, 0.0
    best = min(masses, key=lambda a: (-masses[a], first[a]))
    return best, masses[best]


def test_vectorized_sc_equals_the_per_question_rule():
    rng = np.random.default_rng(0)
    rows = []
    for qid in range(200):
        answers = rng.choice([1, 2, 3, -1], size=10, p=[0.4, 0.3, 0.2, 0.1])
        logp = np.sort(np.log(rng.random(10)))[::-1]
        for rank, (a, lp) in enumerate(zip(answers, logp)):
            rows.append({"question_id": qid, "answer": None if a < 0 else int(a), "ended": a >= 0, "logprob": lp})
    cands = pd.DataFrame(rows)
    cands["answer"] = pd.array(cands["answer"], dtype="Int64")
    questions = pd.DataFrame({"question_id": range(200), "target": rng.integers(1, 4, 200)})
    fast = sc.self_consistency(cands, questions).set_index("question_id")
    for qid, group in cands.groupby("question_id"):
        stated = list(group["answer"].astype(object).where(group["ended"], None))
        answer, conf = _reference(stated, list(np.exp(group["logprob"])))
        assert fast.loc[qid, "answer"] == answer and fast.loc[qid, "confidence"] == pytest.approx(conf)
        assert sc.group_answers(stated, np.exp(group["logprob"]))[:2] == (answer, pytest.approx(conf))
        assert fast.loc[qid, "correct"] == (answer == questions.loc[qid, "target"])
    counted = sc.self_consistency(cands, questions, weight="count")
    assert set(np.round(counted["confidence"] * 10, 9)) <= set(range(11))  # shares of 10 samples


def test_bad_inputs(checkpoint):
    _, model, tok = checkpoint
    qs = sums.split("test").iloc[:2]
    with pytest.raises(ValueError, match="cannot exceed"):
        decoding.beams(model, tok, qs, num_beams=3, num_return_sequences=5)
    with pytest.raises(ValueError, match="num_beams"):
        decoding.beams(model, tok, qs, num_beams=0, num_return_sequences=0)
    with pytest.raises(ValueError, match="k"):
        decoding.sample(model, tok, qs, k=0)
    with pytest.raises(ValueError, match="weight"):
        sc.self_consistency(pd.DataFrame(), qs, weight="votes")
    with pytest.raises(ValueError, match="sum to 0"):
        sc.group_answers([1, 2], [0.0, 0.0])
    with pytest.raises(ValueError, match="one weight per answer"):
        sc.group_answers([1, 2], [0.5])
    with pytest.raises(ValueError, match="two phrasings"):
        sc.agreement([3])


def test_agreement():
    assert sc.agreement([5, 5, 5, 5]) == 1.0
    assert sc.agreement([5, 5, 6, 6]) == pytest.approx(2 / 6)
    assert sc.agreement([None, None]) == 0.0


def test_consistency_table_matches_agreement_question_by_question():
    """The per-group count equals `agreement` on each question's answers (None and ties included)."""
    rng = np.random.default_rng(3)
    rows = [{"checkpoint": f"step-{c}", "question_id": q, "template": t,
             "answer": None if rng.random() < 0.2 else int(rng.integers(0, 3)), "correct": bool(rng.random() < 0.5),
             "confidence": float(rng.random())}
            for c in (2, 1) for q in rng.permutation(40) for t in range(int(rng.integers(2, 6)))]
    rephrased = pd.DataFrame(rows).astype({"answer": "Int64"})
    table = sc.consistency_table(rephrased)
    for (ckpt, qid), group in rephrased.groupby(["checkpoint", "question_id"], sort=False):
        row = table[(table["checkpoint"] == ckpt) & (table["question_id"] == qid)].iloc[0]
        canonical = group[group["template"] == 0].iloc[0]
        assert row["agreement"] == sc.agreement(list(group["answer"]))
        assert (row["correct"], row["confidence"]) == (canonical["correct"], canonical["confidence"])
        assert row["n_correct_phrasings"] == group["correct"].sum()
    assert list(table["checkpoint"].unique()) == ["step-2", "step-1"]  # in the order the frame has them
    with pytest.raises(ValueError, match="canonical phrasing"):
        sc.consistency_table(rephrased.assign(template=rephrased["template"] + 1))
    with pytest.raises(ValueError, match="two phrasings"):
        sc.consistency_table(rephrased[rephrased["template"] == 0])


def test_consistent_errors_by_hand():
    """Questions 19+1 (mistake family) and 12+3 (not), four phrasings each, at one checkpoint: 19+1 is
    answered 10 (the wrong rule) by three phrasings, a consistent error; 12+3 is wrong once by chance."""
    def rows(qid, answers, target):
        return [{"checkpoint": "c", "question_id": qid, "template": t, "answer": x, "correct": x == target}
                for t, x in enumerate(answers)]
    rephrased = pd.DataFrame(rows(19_001, [10, 10, 20, 10], 20) + rows(12_003, [14, 15, 16, 17], 15)
                             + rows(17_009, [26, 26, 26, 26], 26)).astype({"answer": "Int64"})
    table = sc.consistent_errors(rephrased).set_index("group")
    family, other = table.loc["mistake family"], table.loc["other sums"]
    assert (family["questions"], family["wrong"], family["consistent share of wrong"]) == (2, 1, 1.0)
    assert family["accuracy"] == 0.5  # 17+9 is in the family (units 7+9 carry, a 9) and answered right
    assert (other["questions"], other["wrong"], other["consistent share of wrong"]) == (1, 1, 0.0)
    assert sc.consistent_errors(rephrased, at_least=4).loc[0, "consistent share of wrong"] == 0.0
    with pytest.raises(ValueError, match="canonical"):
        sc.consistent_errors(rephrased.assign(template=rephrased["template"] + 1))


def test_isotonic_fixes_calibration_without_raising_auc():
    rng = np.random.default_rng(0)
    conf = rng.random(4000)
    correct = rng.random(4000) < conf**3  # overconfident
    frame = pd.DataFrame({"checkpoint": "c", "question_id": range(4000), "confidence": conf, "correct": correct})
    fit, apply = frame.iloc[:2000], frame.iloc[2000:].reset_index(drop=True)
    fixed = posthoc.isotonic_per_checkpoint(fit, apply)
    before = metrics.expected_calibration_error(apply["confidence"], apply["correct"])
    after = metrics.expected_calibration_error(fixed["confidence"], fixed["correct"])
    assert after < before / 3
    assert (metrics.auroc(fixed["confidence"], fixed["correct"])
            <= metrics.auroc(apply["confidence"], apply["correct"]) + 1e-12)
    with pytest.raises(ValueError, match="fit_on"):
        posthoc.isotonic_per_checkpoint(fit.assign(checkpoint="other"), apply)


@pytest.mark.parametrize("method", ["isotonic", "temperature", "platt"])
def test_recalibration_is_monotone_and_helps(method):
    rng = np.random.default_rng(1)
    z = rng.normal(0, 1.5, 6000)
    correct = rng.random(6000) < 1 / (1 + np.exp(-z))
    conf = 1 / (1 + np.exp(-2.5 * z))  # overconfident: logits too large, which all three maps can undo
    frame = pd.DataFrame({"checkpoint": "c", "question_id": range(6000), "confidence": conf, "correct": correct})
    fit, apply = frame.iloc[:3000], frame.iloc[3000:].reset_index(drop=True)
    fixed = posthoc.recalibrate_per_checkpoint(fit, apply, method)
    order = np.argsort(apply["confidence"].to_numpy())
    assert np.all(np.diff(fixed["confidence"].to_numpy()[order]) >= -1e-12)  # monotone: no reordering
    assert metrics.expected_calibration_error(fixed["confidence"], fixed["correct"]) < \
        metrics.expected_calibration_error(apply["confidence"], apply["correct"]) / 2
    with pytest.raises(ValueError, match="unknown recalibration"):
        posthoc.recalibrate_per_checkpoint(fit, apply, "histogram")
    # a checkpoint whose fitting answers are all wrong keeps its confidences, with a warning naming it
    two = pd.concat([apply, apply.assign(checkpoint="d")], ignore_index=True)
    fit_two = pd.concat([fit, fit.assign(checkpoint="d", correct=False)], ignore_index=True)
    with pytest.warns(UserWarning, match="d: its fitting answers are all wrong"):
        out = posthoc.recalibrate_per_checkpoint(fit_two, two, method)
    assert np.array_equal(out.loc[two["checkpoint"] == "d", "confidence"],
                          two.loc[two["checkpoint"] == "d", "confidence"])
    assert np.allclose(out.loc[two["checkpoint"] == "c", "confidence"], fixed["confidence"])
    # fitted on one checkpoint and applied to all (non-oracle): "d" gets the map fitted on "c"
    moved = posthoc.recalibrate_per_checkpoint(fit, two, method, fit_checkpoint="c")
    assert np.allclose(moved.loc[two["checkpoint"] == "d", "confidence"], fixed["confidence"])
    with pytest.raises(ValueError, match="no fitting data"):
        posthoc.recalibrate_per_checkpoint(fit, two, method, fit_checkpoint="d")


def test_temperature_recovers_a_known_temperature():
    rng = np.random.default_rng(2)
    z = rng.normal(0, 2, 50_000)
    true_p = 1 / (1 + np.exp(-z))
    correct = rng.random(z.size) < true_p
    reported = 1 / (1 + np.exp(-2.0 * z))  # a model that doubles its logits: T = 2 undoes it
    assert posthoc.fit_temperature(reported, correct).temperature == pytest.approx(2.0, rel=0.05)


def test_surrogate_confidence_is_the_scorers_mass_on_the_stated_answer():
    """One checkpoint's beams judge another's answers: the mass of the scorer's group stating that answer."""
    beams = pd.DataFrame({"question_id": [1, 1, 1, 2, 2], "answer": pd.array([7, 8, 7, 3, None], dtype="Int64"),
                          "ended": [True, True, False, True, True],
                          "logprob": np.log([0.5, 0.25, 0.125, 0.5, 0.5])})
    answers = pd.DataFrame({"checkpoint": "b", "question_id": [1, 1, 2, 2],
                            "answer": pd.array([7, 9, 3, None], dtype="Int64"), "correct": True, "confidence": 0.0})
    judged = sc.surrogate_confidence(beams, answers)
    # question 1: 7 has 0.5 (its second beam never ended) of 0.875; 9 is stated by no beam; question 2: 3 has half
    assert judged["confidence"].tolist() == pytest.approx([0.5 / 0.875, 0.0, 0.5, 0.0])
    assert judged.drop(columns="confidence").equals(answers.drop(columns="confidence"))
