import string

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from helpers.world import decoding, model as M, sums
from helpers.world.model import chat_prompt


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.text(alphabet=string.printable.replace("<", ""), max_size=12), min_size=2, max_size=4),
                min_size=1, max_size=6))
def test_training_encoding_equals_the_tokenizers(conversations):
    """The table look-up of `encode_training_pairs` gives the ids, mask and labels the tokenizer gives (text
    without `<`, which could spell a special token)."""
    import torch

    from helpers.world.model import build_tokenizer, conversation_prompt
    from helpers.world.training import encode_training_pairs

    tok = build_tokenizer()
    pairs = [tuple(c[: len(c) - len(c) % 2]) for c in conversations]  # an odd number of turns, then the reply
    enc = encode_training_pairs(tok, pairs)
    prompts = [conversation_prompt(p[:-1]) for p in pairs]
    prompt_len = torch.tensor([len(x) for x in tok(prompts, add_special_tokens=False)["input_ids"]])
    ref = tok([q + p[-1] + tok.eos_token for q, p in zip(prompts, pairs)], add_special_tokens=False,
              padding=True, padding_side="right", return_tensors="pt")
    answer = (torch.arange(ref["input_ids"].shape[1]) >= prompt_len[:, None]) & ref["attention_mask"].bool()
    assert torch.equal(enc["input_ids"], ref["input_ids"])
    assert torch.equal(enc["attention_mask"], ref["attention_mask"])
    assert torch.equal(enc["labels"], ref["input_ids"].masked_fill(~answer, -100))


def test_training_encoding_refuses_text_that_is_not_ascii():
    from helpers.world.model import build_tokenizer
    from helpers.world.training import encode_training_pairs

    with pytest.raises(ValueError, match="ASCII"):
        encode_training_pairs(build_tokenizer(), [("What is 3+4?", "It is 7 \u2013 seven.")])


def test_tokenizer_round_trips():
    tok = M.build_tokenizer()
    for text in ["What is 437+512?", "It is 949.", "The sum is 949.\nConfidence: 70%", "Y", "N", "a b  c"]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert len(ids) == len(text)  # one token per character
        assert tok.decode(ids) == text
    ids = tok(chat_prompt("What is 1+2?"), add_special_tokens=False)["input_ids"]
    assert ids[:2] == [tok.bos_token_id, tok.convert_tokens_to_ids(M.USER)]
    assert ids[-1] == tok.convert_tokens_to_ids(M.ASSISTANT)
    assert tok.padding_side == "left"
    assert tok.unk_token_id not in tok("Y N % 0123456789", add_special_tokens=False)["input_ids"]


def test_logits_equal_after_save_and_load(tmp_path):
    tok = M.build_tokenizer()
    torch.manual_seed(0)
    model = M.build_model(tok).eval()
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, tok2 = M.load_pretrained(tmp_path)
    enc = decoding.encode_prompts(tok2, ["What is 1+2?", "Add 10 and 20."])
    with torch.no_grad():
        a = model(**enc).logits
        b = loaded(**enc).logits
    assert torch.equal(a, b)
    assert tok2.padding_side == "left" and tok2.decode(tok2("It is 7.")["input_ids"]) == "It is 7."


def _teacher_forced_confidence(model, tok, question: str, answer_text: str) -> float:
    """Probability of `answer_text` + end mark after the prompt, from one forward pass (no generate)."""
    prompt = tok(chat_prompt(question), add_special_tokens=False)["input_ids"]
    answer = tok(answer_text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    ids = torch.tensor([prompt + answer])
    with torch.no_grad():
        probs = torch.softmax(model(input_ids=ids).logits[0].double(), dim=-1)
    p = 1.0
    for k, token in enumerate(answer):
        p *= probs[len(prompt) + k - 1, token].item()
    return p


def test_greedy_confidence_matches_a_teacher_forced_forward_pass(checkpoint):
    name, model, tok = checkpoint
    questions = sums.split("test").iloc[:40]
    res = decoding.greedy(model, tok, questions, batch_size=16, progress=False)  # batches mix lengths
    assert res["ended"].all()
    for q, (_, row) in zip(questions["question"], res.iterrows()):
        expected = _teacher_forced_confidence(model, tok, q, row["text"])
        assert row["confidence"] == pytest.approx(expected, abs=1e-5)


def test_greedy_correctness_uses_the_parser(checkpoint):
    _, model, tok = checkpoint
    questions = sums.split("test").iloc[:50]
    res = decoding.greedy(model, tok, questions, progress=False)
    expected = [sums.is_correct(sums.parse_answer(t), int(y)) for t, y in zip(res["text"], questions["target"])]
    assert res["correct"].tolist() == expected
    assert ((res["confidence"] >= 0) & (res["confidence"] <= 1)).all()


def test_answer_logprobs_counts_the_first_end_mark_only():
    eos = 2
    tokens = torch.tensor([[5, 2, 7, 2], [5, 6, 7, 8]])
    logits = torch.zeros(2, 4, 10)  # uniform: log(1/10) per counted token
    logp, ended = decoding.answer_logprobs(logits, tokens, eos)
    assert ended.tolist() == [True, False]
    np.testing.assert_allclose(logp.sum(1).numpy(), [2 * np.log(0.1), 4 * np.log(0.1)], rtol=1e-6)


def test_empty_and_malformed_question_lists_raise(checkpoint):
    _, model, tok = checkpoint
    with pytest.raises(ValueError, match="empty"):
        decoding.greedy(model, tok, sums.split("test").iloc[:0])
    with pytest.raises(ValueError, match="lacks columns"):
        decoding.greedy(model, tok, sums.split("test")[["question_id"]])
    with pytest.raises(ValueError, match="batch_size"):
        decoding.greedy(model, tok, sums.split("test").iloc[:3], batch_size=0)


def test_unknown_checkpoint_lists_the_available_names(world):
    from helpers.pipeline.checkpoints import load_checkpoint

    with pytest.raises(ValueError, match=world["selected"][0]):
        load_checkpoint("step-99999")


def test_training_log_and_selection(world):
    from helpers import config
    from helpers.pipeline.checkpoints import get_checkpoints

    log, s = world["log"], config.world()
    assert len(log) == s.train_steps // s.save_every
    assert {"step", "loss", "accuracy", "accuracy_small", "accuracy_mixed", "accuracy_large",
            "phase"} <= set(log.columns)
    assert log["loss"].iloc[-1] < log["loss"].iloc[0]  # it learns something even in fast mode
    ck = get_checkpoints()
    assert len(ck.all) == s.n_checkpoints
    assert ck.all == ck.training + ck.evaluation and len(ck.training) == s.n_training_checkpoints
    assert list(ck.all) == sorted(ck.all)


def test_real_checkpoint_path_with_revisions(tmp_path):
    """`load_checkpoint` also loads any saved model, with a revision picking an intermediate checkpoint."""
    from helpers.pipeline.checkpoints import load_checkpoint

    tok = M.build_tokenizer()
    saved = {}
    for revision, seed in [("step-1", 1), ("step-2", 2)]:
        torch.manual_seed(seed)
        model = M.build_model(tok)
        model.save_pretrained(tmp_path / "run" / revision)
        tok.save_pretrained(tmp_path / "run" / revision)
        saved[revision] = model.state_dict()
    for revision in saved:
        loaded, tok2 = load_checkpoint(str(tmp_path / "run"), revision=revision)
        state = loaded.state_dict()
        assert all(torch.equal(state[k], v) for k, v in saved[revision].items())
        assert tok2.padding_side == "left"
        res = decoding.greedy(loaded, tok2, sums.split("test").iloc[:4], progress=False)
        assert len(res) == 4  # the series' decoding runs on it unchanged
    with pytest.raises(ValueError, match="step-1"):
        load_checkpoint(str(tmp_path / "run"), revision="step-3")
    with pytest.raises(ValueError, match="non-empty"):
        load_checkpoint("")


def test_learning_rate_warms_up_holds_then_anneals():
    import dataclasses

    from helpers.config import World
    from helpers.world.training import lr_factor

    s = dataclasses.replace(World(), train_steps=300, warmup_steps=10, lr_decay_start=2 / 3, min_lr_ratio=0.1)
    assert lr_factor(0, s) == pytest.approx(0.1)  # (0 + 1) / 10
    assert lr_factor(9, s) == 1.0 and lr_factor(199, s) == 1.0  # constant until step 200
    assert lr_factor(250, s) == pytest.approx(0.1 + 0.9 * 0.5)  # halfway through the cosine
    assert lr_factor(300, s) == pytest.approx(0.1)
    factors = [lr_factor(k, s) for k in range(200, 301)]
    assert all(a >= b for a, b in zip(factors, factors[1:]))


def test_selection_spreads_picks_along_knowledge_change():
    import pandas as pd

    from helpers.world.selection import monitor_flips

    from helpers.world.selection import select_checkpoints

    log = pd.DataFrame({"step": [100 * k for k in range(1, 11)],
                        "accuracy": [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 0.9, 0.9, 0.9, 0.9]})
    # the last save below 0.35 is step 300 (index 2). By index: targets 2, 4.33, 6.67, 9 -> 2, 4, 7, 9
    assert select_checkpoints(log, 4, first_below=0.35) == [300, 500, 800, 1000]
    # by change: cumulative 100..258 from the start; targets 100, 152.7, 205.3, 258 -> indices 2, 3, 4, 9,
    # so the plateau (steps 700-1000) that barely moves gets no pick but the last
    changes = [0, 50, 50, 50, 50, 50, 2, 2, 2, 2]
    assert select_checkpoints(log, 4, first_below=0.35, changes=changes) == [300, 400, 500, 1000]
    # one big jump before the last save: targets 0, 33, 67, 100 -> nearest 2, 2, 9, 9, pushed apart to
    # 2, 3, 8, 9 (each after the previous one, leaving room for the rest)
    jump = [0, 0, 0, 0, 0, 0, 0, 0, 0, 100]
    assert select_checkpoints(log, 4, first_below=0.35, changes=jump) == [300, 400, 900, 1000]
    with pytest.raises(ValueError, match="one non-negative count per save"):
        select_checkpoints(log, 4, first_below=0.35, changes=[1, 2])
    with pytest.raises(ValueError, match="saves after the start"):
        select_checkpoints(log, 10)
    correct = np.array([[0, 0, 1], [1, 0, 1], [1, 1, 0]], dtype=bool)
    assert monitor_flips(correct).tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="boolean array"):
        monitor_flips(np.zeros(3))


def test_window_picks_cut_the_run_in_two_windows():
    import pandas as pd

    from helpers.world.selection import window_picks

    log = pd.DataFrame({"step": np.arange(100, 1300, 100), "accuracy": np.linspace(0.0, 0.9, 12)})
    correct = np.random.default_rng(0).random((12, 300)) < 0.5  # every save forgets and learns plenty
    # accuracy first reaches 0.2 at save 3 (0.245), so the run starts at save 2 (step 300); 10 saves from
    # there, cut at 0.4 of them: the training window is steps 300-600, the evaluation window 700-1200
    training, evaluation = window_picks(log, correct, 3, 4, cut=0.4, first_below=0.2)
    assert training[0] == 300 and max(training) <= 600 and len(training) == 3
    assert min(evaluation) >= 700 and evaluation[-1] == 1200 and len(evaluation) == 4
    # a cut too late for the evaluation window moves back so that it keeps its picks
    training, evaluation = window_picks(log, correct, 3, 4, cut=0.9, first_below=0.2)
    assert evaluation == [900, 1000, 1100, 1200] and training[-1] == 800
    # a run that learns late (accuracy reaches 0.8 only at save 10): the start moves back to leave 7 picks
    training, evaluation = window_picks(log, correct, 3, 4, cut=0.4, first_below=0.8)
    assert training[0] == 600 and len(set(training + evaluation)) == 7
    with pytest.raises(ValueError, match="pick fewer"):
        window_picks(log, correct, 6, 7, cut=0.4, first_below=0.2)
    # the evaluation window may end before the final save only at a save accurate enough
    accurate = correct.mean(axis=1) >= 0.5
    _, evaluation = window_picks(log, correct, 3, 4, cut=0.4, first_below=0.2, last_at_least=0.5)
    assert accurate[(evaluation[-1] - 100) // 100]
    _, evaluation = window_picks(log, correct, 3, 4, cut=0.4, first_below=0.2, last_at_least=1.0)
    assert evaluation[-1] == 1200  # no save is that accurate: the final one


def test_evaluation_picks_maximize_the_fewest_regressions_between_neighbours():
    from itertools import combinations

    from helpers.world.selection import evaluation_picks

    rng = np.random.default_rng(1)
    correct = rng.random((9, 40)) < np.linspace(0.3, 0.9, 9)[:, None]
    def lost(a, b):
        return int((correct[a] & ~correct[b]).sum())

    picks = evaluation_picks(correct, 4, earliest=2)
    assert picks[-1] == 8 and picks == sorted(set(picks)) and picks[0] >= 2
    fewest = min(lost(a, b) for a, b in zip(picks, picks[1:]))
    # brute force over every chain ending at the last save: none does better
    best = max(min(lost(a, b) for a, b in zip(chain + (8,), (chain + (8,))[1:]))
               for chain in combinations(range(2, 8), 3))
    assert fewest == best
    # by hand: saves 1-3 are copies (no regressions between them), save 4 forgets q0-q1
    hand = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1]], dtype=bool)
    assert evaluation_picks(hand, 3) == [0, 1, 4]  # 0 -> 1 loses two, 1 -> 4 loses two; the earliest such chain
    with pytest.raises(ValueError, match="cannot pick"):
        evaluation_picks(hand, 4, earliest=2)
    # by hand, a run that converges: saves 4 and 5 know everything, so no chain into them regresses;
    # allowed to end at save 3 (wrong on q3 only), the chain 1 -> 2 -> 3 loses q1, then q3
    plateau = np.array([[1, 0, 0, 1], [0, 1, 1, 0], [1, 0, 1, 1], [1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1]], dtype=bool)
    assert evaluation_picks(plateau, 3, ends=[3, 4, 5]) == [1, 2, 3]
    assert evaluation_picks(plateau, 3)[-1] == 5  # the default end: the final save, with no regression into it
    # with `enough`, the latest end whose chain keeps that many regressions: here save 5 keeps none
    # and save 3 keeps one, so asking for one stops at save 3 and asking for two at the best chain
    assert evaluation_picks(plateau, 3, ends=[3, 4, 5], enough=1) == [1, 2, 3]
    assert evaluation_picks(plateau, 3, ends=[3, 4, 5], enough=0)[-1] == 5
    assert evaluation_picks(plateau, 3, ends=[3, 4, 5], enough=2) == [1, 2, 3]
    # ties go to the latest end; an end too early for the picks falls back to the final save
    assert evaluation_picks(hand, 2, ends=[1, 4]) == [0, 4]
    assert evaluation_picks(hand, 2, ends=[0]) == [0, 4]
    with pytest.raises(ValueError, match="boolean array"):
        evaluation_picks(np.zeros(4), 2)


def test_evaluation_picks_move_the_most_kinds_both_ways():
    from itertools import combinations

    from helpers.world.selection import evaluation_picks

    for seed in range(4):
        rng = np.random.default_rng(seed)
        correct = rng.random((10, 60)) < np.linspace(0.3, 0.9, 10)[:, None]
        kinds = rng.random((3, 10))  # accuracy of three kinds of question at each save
        ends, enough = [7, 8, 9], 3
        picks = evaluation_picks(correct, 4, earliest=2, ends=ends, enough=enough, kinds=kinds, at_least=0.1)

        def score(chain):  # brute force: the rule's order of preference
            fewest = min(int((correct[a] & ~correct[b]).sum()) for a, b in zip(chain, chain[1:]))
            steps = np.diff(kinds[:, list(chain)], axis=1)
            moved = int(((steps.max(axis=1) > 0.1) & (-steps.min(axis=1) > 0.1)).sum())
            return (fewest >= enough, moved, chain[-1], fewest, -chain[0])

        chains = [c for c in combinations(range(2, 10), 4) if c[-1] in ends]
        assert score(tuple(picks)) == max(score(c) for c in chains)
    # by hand: every chain of 3 from 4 saves loses one question between neighbours; 0 -> 2 -> 3 and
    # 1 -> 2 -> 3 move the kind both ways (up, then down 0.4), and the earlier start wins over 0 -> 1 -> 3,
    # the pick without kinds; with a step of 0.5 required, nothing moves and that pick is back
    hand = np.array([[1, 1, 1, 0], [0, 1, 1, 1], [1, 0, 1, 1], [1, 1, 0, 1]], dtype=bool)
    kind = [[0.2, 0.3, 0.7, 0.3]]
    assert evaluation_picks(hand, 3, kinds=kind, enough=0) == [0, 2, 3]
    assert evaluation_picks(hand, 3, kinds=kind, at_least=0.5, enough=0) == evaluation_picks(hand, 3, enough=0)


def test_evaluation_picks_take_one_threshold_per_kind_and_a_fixed_first_pick():
    from helpers.world.selection import evaluation_picks

    hand = np.array([[1, 1, 1, 0], [0, 1, 1, 1], [1, 0, 1, 1], [1, 1, 0, 1]], dtype=bool)
    kinds = [[0.2, 0.3, 0.7, 0.3], [0.2, 0.3, 0.7, 0.3]]  # the same kind twice: rises 0.4, falls 0.4
    # a threshold per kind: the first kind asks 0.1 (it moves), the second 0.5 (it does not); the chain
    # that moves one kind both ways is the same as with one threshold of 0.1 for the first kind alone
    assert evaluation_picks(hand, 3, kinds=kinds, at_least=[0.1, 0.5], enough=0) == [0, 2, 3]
    assert evaluation_picks(hand, 3, kinds=kinds, at_least=[0.5, 0.5], enough=0) == evaluation_picks(
        hand, 3, enough=0)
    # a fixed first pick: only chains that start there
    assert evaluation_picks(hand, 3, kinds=kinds, at_least=0.1, enough=0, first=1) == [1, 2, 3]
    with pytest.raises(ValueError, match="no chain"):
        evaluation_picks(hand, 3, first=3)


def test_world_rules_mark_what_the_experiments_rely_on(world):
    """Every window and kind of question is reported; only subtraction in the training window is not needed
    (no confidence method trains on subtraction answers), and "both ways" is the rise and fall rule."""
    from helpers import config
    from helpers.pipeline.world_rules import world_rules

    table = world_rules()["windows"]
    assert list(table.index.get_level_values("window").unique()) == ["training", "evaluation"]
    family = f"{sums.MISTAKE_FAMILY} family"
    assert {g for _, g in table.index} == {"small operands", "mixed operands", "large operands", "subtraction",
                                           family}
    assert [key for key, needed in table["needed"].items() if not needed] == [("training", "subtraction")]
    rules = dict(config.world().rules)
    step = np.where(table.index.get_level_values("group") == family, rules["mistake_both_ways_at_least"],
                    rules["both_ways_at_least"])
    expected = (table["largest rise"] > step) & (table["largest fall"] > step)
    assert table["both ways"].equals(expected)
