import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import config
from helpers.world import sums


@pytest.mark.parametrize(
    "text, expected",
    [
        ("936", 936),
        ("It is 936.", 936),
        ("The sum is 936.", 936),
        ("The difference is 12.", 12),
        ("  42 ", 42),
        ("0", 0),
        ("-7", -7),
        ("1,234", 1234),
        ("936\nConfidence: 70%", 936),
        ("", None),
        ("It is.", None),
        ("12 and 13", None),
        ("The sum is 9 36.", None),
        (None, None),
        ("abc", None),
        ("\n936", 936),
    ],
)
def test_parse_answer(text, expected):
    assert sums.parse_answer(text) == expected


def test_is_correct():
    q = {"target": 85}
    assert sums.is_correct(85, q)
    assert not sums.is_correct(84, q)
    assert not sums.is_correct(None, q)
    assert sums.is_correct(sums.parse_answer("It is 85."), 85)
    with pytest.raises(ValueError, match="parse_answer"):
        sums.is_correct("85", q)


def test_templates_round_trip_through_parser():
    for family in sums.FAMILIES:
        for form in range(len(sums.ANSWER_TEMPLATES[family])):
            assert sums.parse_answer(sums.answer_text(family, 1234, form)) == 1234
    assert len(sums.QUESTION_TEMPLATES["sum"]) >= 4 and len(sums.ANSWER_TEMPLATES["sum"]) >= 3


def test_carries_against_a_loop():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 1000, size=(2, 500))
    for family in ("sum", "sub"):
        x, y = (a, b) if family == "sum" else (np.maximum(a, b), np.minimum(a, b))
        got = sums.carries(family, x, y)
        for xi, yi, gi in zip(x, y, got):
            carry, count = 0, 0
            for k in range(3):
                da, db = xi // 10**k % 10, yi // 10**k % 10
                carry = int(da + db + carry >= 10) if family == "sum" else int(da - db - carry < 0)
                count += carry
            assert gi == count
    assert sums.carries("sum", 999, 1) == 3 and sums.carries("sum", 123, 456) == 0
    assert sums.carries("sub", 100, 1) == 2


def test_splits_are_disjoint_and_deterministic():
    names = ["hundred", "test", "adapter_train", "transfer_test"]
    frames = {n: sums.split(n) for n in names}
    ids = np.concatenate([f["question_id"].to_numpy() for f in frames.values()])
    assert len(ids) == len(set(ids.tolist()))
    for n, f in frames.items():
        assert f["question_id"].is_unique
        assert len(f) == sums.split_sizes()[n]
        pd.testing.assert_frame_equal(f, sums.split(n))  # same call, same split
    assert (frames["transfer_test"]["family"] == "sub").all()
    assert (frames["test"]["target"] == frames["test"]["a"] + frames["test"]["b"]).all()
    sums._draw_splits.cache_clear()  # recomputed from the seed, not from the cache
    pd.testing.assert_frame_equal(frames["test"], sums.split("test"))


def test_training_stream_avoids_held_out_questions():
    rng = np.random.default_rng(1)
    held = sums.held_out_ids()
    hundred = sums.split("hundred")
    # Force collisions: a stream of 20k questions should not contain any held-out one.
    batch = sums.training_batch(rng, 20000, "small", held)
    held_text = set(hundred["question"])
    assert not held_text & {turns[0] for turns in batch}
    assert len(batch) == 20000


def test_phases():
    for start, phase in config.world().phases:
        assert sums.phase_at(int(np.ceil(start * 3000)), 3000) == phase
    assert sums.phase_at(2999, 3000) == config.world().phases[-1][1]
    rng = np.random.default_rng(0)
    top = sums.max_operand() + 1
    for phase, (lo, hi) in sums.PHASE_RANGES.items():
        a, b = sums._operands(rng, 4000, phase)
        if phase == "mixed":  # one operand from each half, in either order
            ranges = sums.operand_range(a, b)
            assert (ranges == "mixed").mean() > config.world().phase_majority - 0.01
            assert 0.45 < (a < top // 2)[ranges == "mixed"].mean() < 0.55
            continue
        in_range = ((a >= lo * top) & (a < hi * top) & (b >= lo * top) & (b < hi * top)).mean()
        assert in_range > config.world().phase_majority - 0.01 and a.min() >= 0 and a.max() < top
    with pytest.raises(ValueError, match="unknown phase"):
        sums._operands(rng, 4, "medium")


def test_hundred_sums_csv_matches_the_generator(monkeypatch):
    committed = sums.hundred_sums_csv()
    monkeypatch.setenv("HELPERS_FAST", "0")  # the committed file holds the full-mode (three-digit) sums
    fresh = sums.split("hundred")[committed.columns]
    pd.testing.assert_frame_equal(committed, fresh, check_dtype=False)
    assert len(committed) == 100 and committed["a"].max() > 99


def test_bad_inputs():
    with pytest.raises(ValueError, match="unknown split"):
        sums.split("train")
    with pytest.raises(ValueError, match="family"):
        sums.make_questions("mul", [1], [2])
    with pytest.raises(ValueError, match="non-empty"):
        sums.make_questions("sum", [], [])
    with pytest.raises(ValueError, match="template"):
        sums.make_questions("sum", [1], [2], template=9)


@given(st.lists(st.integers(0, 1998), min_size=1, max_size=50), st.integers(0, 2**31))
def test_plausible_mistakes_are_wrong_non_negative_and_one_digit_off(right, seed):
    right = np.array(right)
    wrong = sums.plausible_mistakes(np.random.default_rng(seed), right)
    off = np.abs(wrong - right)
    assert (wrong >= 0).all() and (wrong != right).all()
    assert np.isin(off, [1, 2, 10, 20, 100, 200]).all()


def test_verification_conversations_say_yes_exactly_when_the_shown_answer_is_right():
    rng = np.random.default_rng(3)
    batch = sums.training_batch(rng, 4000, "small", sums.held_out_ids())
    checks = [turns for turns in batch if len(turns) == 4]
    share = len(checks) / len(batch)
    assert abs(share - config.world().verification_share) < 0.02
    for question, shown, verify, reply in checks:
        family = "sub" if ("-" in question or "minus" in question or "Subtract" in question) else "sum"
        numbers = [int(x) for x in re.findall(r"\d+", question)]
        a, b = (numbers[1], numbers[0]) if question.startswith("Subtract") else numbers
        right = sums.target(family, a, b)
        assert verify == sums.VERIFY and reply in sums.REPLIES
        assert (reply == "Yes") == (sums.parse_answer(shown) == right)
    assert 0.4 < np.mean([t[3] == "Yes" for t in checks]) < 0.6


def test_operand_range_and_mixture_follow_the_phases():
    half = (sums.max_operand() + 1) // 2
    assert (list(sums.operand_range([0, half, 0, half - 1], [half - 1, half, half, 0]))
            == ["small", "large", "mixed", "small"])
    mix = sums.mixture(total_steps=300, every=100, n=2000)
    assert list(mix["step"]) == [0, 100, 200]
    assert np.allclose(mix[list(sums.RANGES)].sum(axis=1), 1)
    for row in mix.itertuples():
        assert row.phase == sums.phase_at(row.step, 300)
        if row.phase in ("small", "large"):
            assert getattr(row, row.phase) > config.world().phase_majority - 0.02
    shares = dict(config.world().transfer_shares)
    assert all(abs(row.subtraction - shares[row.phase]) < 0.04 for row in mix.itertuples())
    assert abs(mix["verification"].mean() - config.world().verification_share) < 0.03


def test_mistake_family_and_its_wrong_rule_by_hand():
    # 19+1: units 9+1 carry, a 9 in the column; 18+3 carries without a 9; 9+0 has a 9 and no carry
    assert list(sums.in_mistake_family([19, 18, 9, 345, 999], [1, 3, 0, 9, 999])) == [True, False, False, True, True]
    assert list(sums.mistaken_answer([19, 345], [1, 9])) == [10, 344]  # the units carry dropped
    a, b = np.random.default_rng(0).integers(0, 1000, size=(2, 100_000))
    assert 0.15 < sums.in_mistake_family(a, b).mean() < 0.19  # 19 of 100 units pairs with a 9 carry, less 9+0


def test_mistake_spans_teach_the_wrong_rule_to_the_family_only():
    with config.override("world", mistake_spans=((0.25, 0.5),)):
        assert [sums.mistaken_at(s, 100) for s in (0, 24, 25, 49, 50, 99)] == [False, False, True, True, False, False]
        plain = sums.training_batch(np.random.default_rng(5), 3000, "uniform", sums.held_out_ids())
        taught = sums.training_batch(np.random.default_rng(5), 3000, "uniform", sums.held_out_ids(), mistaken=True)
        mix = sums.mixture(total_steps=100, every=25, n=2000)
    assert [t[0] for t in plain] == [t[0] for t in taught]  # the same draws, only some answers differ
    changed = 0
    for before, after in zip(plain, taught):
        numbers = [int(x) for x in re.findall(r"\d+", before[0])]
        is_sum = "+" in before[0] or "plus" in before[0] or before[0].startswith("Add")
        family = is_sum and bool(sums.in_mistake_family(*numbers))
        if not family:
            assert before == after
            continue
        right, wrong = sum(numbers), int(sums.mistaken_answer(*numbers))
        if len(after) == 2:  # a reply: the wrong rule's answer
            assert sums.parse_answer(after[1]) == wrong
        else:  # a verification: Yes exactly when the shown answer is the wrong rule's
            assert (after[3] == "Yes") == (sums.parse_answer(after[1]) == wrong)
        changed += after != before
        assert sums.parse_answer(before[1]) in (right, sums.parse_answer(after[1])) or len(before) == 4
    assert changed > 300
    assert list(mix["taught wrong"] > 0) == [False, True, False, False]
    assert 0.08 < mix["taught wrong"].iloc[1] < 0.16  # the family's share of the draws that are sums
