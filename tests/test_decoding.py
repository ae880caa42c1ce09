"""Tests for helpers.world.decoding: the pure pieces (log-probabilities, reply reading, prompt encoding),
input validation, and the decoders' behaviour on a tiny randomly initialised GPT-2.

Nothing here needs the trained world or the artifact cache; the whole file runs in a few seconds.
"""
import math

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from helpers.world import sums
from helpers.world.decoding import (
    MAX_NEW_TOKENS, answer_logprobs, beams, encode_prompts, greedy, read_replies, sample,
)
from helpers.world.model import build_tokenizer, chat_prompt

# --------------------------------------------------------------------------- answer_logprobs


def _logits_from_probs(probs, shift=0.0):
    """Raw logits whose softmax is `probs` (plus a constant shift, which log-softmax must remove)."""
    return torch.log(torch.tensor(probs, dtype=torch.float32)) + shift


def test_answer_logprobs_hand_worked():
    # Vocabulary of 4, end mark id 3. Position t has its own distribution, the same for every row:
    # t=0: (.1, .2, .3, .4), t=1: (.4, .3, .2, .1), t=2: uniform. Each row adds a different constant.
    dists = [[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]]
    shifts = (0.0, 5.0, -3.0, 2.0)
    logits = torch.stack([torch.stack([_logits_from_probs(d, shift) for d in dists]) for shift in shifts])
    tokens = torch.tensor([
        [1, 3, 2],  # ends at t=1: log .2 + log .1 (end mark counted), t=2 masked
        [0, 2, 1],  # never ends: every token counted
        [3, 3, 0],  # ends at t=0: only the first end mark counts, everything after is masked
        [2, 0, 3],  # ends at the last position
    ])
    logp, ended = answer_logprobs(logits, tokens, eos_id=3)
    ln = math.log
    expected = torch.tensor([
        [ln(0.2), ln(0.1), 0.0],
        [ln(0.1), ln(0.2), ln(0.25)],
        [ln(0.4), 0.0, 0.0],
        [ln(0.3), ln(0.4), ln(0.25)],
    ])
    assert logp.shape == (4, 3)
    torch.testing.assert_close(logp, expected, rtol=0, atol=1e-6)
    assert ended.tolist() == [True, False, True, True]
    # The masked entries are exactly zero, so a row's sum is the reply's log-probability.
    assert logp[2, 1:].eq(0).all() and logp[0, 2] == 0
    torch.testing.assert_close(logp.sum(dim=1)[0], torch.tensor(ln(0.2 * 0.1)), rtol=0, atol=1e-6)


def test_answer_logprobs_accepts_half_precision_logits():
    logits = _logits_from_probs([[0.5, 0.25, 0.25]]).unsqueeze(0).to(torch.bfloat16)
    logp, ended = answer_logprobs(logits, torch.tensor([[0]]), eos_id=2)
    assert logp.dtype == torch.float32
    assert logp.item() == pytest.approx(math.log(0.5), abs=1e-2)
    assert ended.tolist() == [False]


# --------------------------------------------------------------------------- read_replies


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def _rows(tok, pieces, width):
    """A (B, width) id tensor: each row is a list of texts and token ids, right-padded with <pad>."""
    rows = []
    for parts in pieces:
        row = []
        for part in parts:
            row += _ids(tok, part) if isinstance(part, str) else [part]
        assert len(row) <= width
        rows.append(row + [tok.pad_token_id] * (width - len(row)))
    return torch.tensor(rows)


def test_read_replies_cuts_at_end_mark_and_parses(tok):
    eos = tok.eos_token_id
    tokens = _rows(tok, [
        ["It is 12.", eos],            # right, with an answer form
        ["12"],                        # right number but no end mark: wrong
        ["12", eos, "3"],              # text after the end mark is dropped: 12, not 123
        ["13", eos],                   # wrong number
        ["The sum is", eos],           # no number
        ["1 and 2", eos],              # two numbers: unparseable
        [eos, "12"],                   # empty reply
    ], width=12)
    targets = np.array([12, 12, 12, 12, 12, 12, 12])
    texts, answers, correct, ended = read_replies(tok, tokens, targets)
    assert texts == ["It is 12.", "12", "12", "13", "The sum is", "1 and 2", ""]
    assert answers == [12, 12, 12, 13, None, None, None]
    assert correct == [True, False, True, False, False, False, False]
    assert ended == [True, False, True, True, True, True, True]


def test_read_replies_uses_parse_answer_and_targets_per_row(tok):
    eos = tok.eos_token_id
    replies = ["The sum is 1,234.", "-5", "It is 7.\n8"]
    tokens = _rows(tok, [[r, eos] for r in replies], width=24)
    texts, answers, correct, _ = read_replies(tok, tokens, pd.Series([1234, -5, 8]))
    assert texts == replies
    assert answers == [sums.parse_answer(r) for r in replies] == [1234, -5, 7]
    assert correct == [True, True, False]


# --------------------------------------------------------------------------- encode_prompts


def test_encode_prompts_left_pads_with_mask(tok):
    tok.padding_side = "right"  # encode_prompts must switch it to left whatever it was
    questions = ["What is 1+2?", "What is 123+456?"]
    enc = encode_prompts(tok, questions)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    lengths = [len(_ids(tok, chat_prompt(q))) for q in questions]
    assert lengths[0] < lengths[1]
    assert ids.shape == mask.shape == (2, max(lengths))
    pad = max(lengths) - lengths[0]
    assert ids[0, :pad].eq(tok.pad_token_id).all()
    assert mask[0].tolist() == [0] * pad + [1] * lengths[0]
    assert mask[1].eq(1).all()
    for row, q, n in zip(ids, questions, lengths):
        assert row[-n:].tolist() == _ids(tok, chat_prompt(q))
        assert tok.decode(row[-n:]) == chat_prompt(q)
    assert ids[0, pad] == tok.bos_token_id  # the prompt itself starts with <bos> right after the padding
    assert tok.padding_side == "left"


# --------------------------------------------------------------------------- a tiny random model


@pytest.fixture(scope="module")
def tiny(tok):
    """A 1-layer GPT-2 with random weights (wide initialisation, so distributions are peaked).

    The output layer is untied and one hidden feature is pinned to 1 so that it acts as a bias: the special
    tokens other than the end mark get logits about 50 below the rest and are never produced. A reply's
    token ids can then be read back from its text, and the seed gives both replies that end early and
    replies that run to MAX_NEW_TOKENS.
    """
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tok), n_positions=96, n_embd=16, n_layer=1, n_head=2, initializer_range=0.3,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=False,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
    )
    model = GPT2LMHeadModel(config).eval()
    silent = [i for i in tok.all_special_ids if i != tok.eos_token_id]
    with torch.no_grad():
        model.transformer.ln_f.weight[0] = 0.0
        model.transformer.ln_f.bias[0] = 1.0
        model.lm_head.weight[:, 0] = 0.0
        model.lm_head.weight[silent, 0] = -50.0
    return model


def _reply_ids(tok, text, ended):
    """A reply's generated ids from its text (exact for the `tiny` model, which emits no other special token)."""
    return _ids(tok, text) + ([tok.eos_token_id] if ended else [])


@pytest.fixture(scope="module")
def questions():
    # Prompts of different lengths, so batches need left padding.
    return sums.make_questions("sum", [1, 23, 45, 7, 88, 9, 12, 60, 5], [2, 45, 6, 99, 1, 30, 3, 77, 123])


@pytest.fixture(scope="module")
def greedy_rows(tiny, tok, questions):
    return greedy(tiny, tok, questions, progress=False)


@torch.no_grad()
def _reference_greedy(model, tok, question):
    """Greedy decoding written out: one unpadded prompt, argmax step by step, full forward pass each step."""
    eos = tok.eos_token_id
    prompt = torch.tensor([_ids(tok, chat_prompt(question))])
    seq = prompt
    for _ in range(MAX_NEW_TOKENS):
        nxt = model(seq).logits[0, -1].argmax()
        seq = torch.cat([seq, nxt.view(1, 1)], dim=1)
        if nxt.item() == eos:
            break
    return seq[0, prompt.shape[1]:].tolist()


@torch.no_grad()
def _teacher_forced_logprob(model, tok, question, reply_ids, temperature=1.0):
    """Summed log-probability of `reply_ids` after the unpadded prompt, from one forward pass."""
    prompt = _ids(tok, chat_prompt(question))
    seq = torch.tensor([prompt + reply_ids])
    logits = model(seq).logits[0, len(prompt) - 1:-1].double() / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(reply_ids)[:, None]).sum().item()


def test_greedy_matches_a_written_out_greedy_decoder(tiny, tok, questions, greedy_rows):
    g = greedy_rows
    assert list(g.columns) == ["question_id", "text", "answer", "correct", "confidence", "ended"]
    assert g["question_id"].tolist() == questions["question_id"].tolist()
    # The fixture model gives both kinds of reply; the masking after the end mark matters in a batch
    # where replies end at different steps.
    assert g["ended"].any() and not g["ended"].all()
    eos = tok.eos_token_id
    for row, question in zip(g.itertuples(), questions["question"]):
        reply = _reference_greedy(tiny, tok, question)
        ended = reply[-1] == eos
        assert row.ended == ended
        assert reply == _reply_ids(tok, row.text, ended)  # same tokens, and no special token but the end mark
        if not ended:
            assert len(reply) == MAX_NEW_TOKENS
        # confidence = exp(summed log-probability, end mark included, nothing after it); compared in log
        # space since the probabilities of a random model's replies are tiny.
        expected = _teacher_forced_logprob(tiny, tok, question, reply)
        assert math.log(row.confidence) == pytest.approx(expected, rel=1e-5, abs=1e-5)


def test_greedy_is_deterministic_and_independent_of_batching(tiny, tok, questions, greedy_rows):
    again = greedy(tiny, tok, questions, progress=False)
    pd.testing.assert_frame_equal(again, greedy_rows)
    small_batches = greedy(tiny, tok, questions, batch_size=2, progress=False)
    pd.testing.assert_frame_equal(small_batches.drop(columns="confidence"), greedy_rows.drop(columns="confidence"))
    np.testing.assert_allclose(np.log(small_batches["confidence"]), np.log(greedy_rows["confidence"]), rtol=1e-5)


def test_sample_is_reproducible_and_leaves_global_rng_alone(tiny, tok, questions):
    torch.manual_seed(1234)
    state = torch.random.get_rng_state()
    first = sample(tiny, tok, questions, k=4, seed=7, progress=False)
    assert torch.equal(torch.random.get_rng_state(), state)
    second = sample(tiny, tok, questions, k=4, seed=7, progress=False)
    assert torch.equal(torch.random.get_rng_state(), state)
    pd.testing.assert_frame_equal(first, second)

    assert list(first.columns) == ["question_id", "sample", "text", "answer", "correct", "logprob"]
    assert len(first) == 4 * len(questions)
    assert first["question_id"].tolist() == np.repeat(questions["question_id"].to_numpy(), 4).tolist()
    assert first["sample"].tolist() == list(range(4)) * len(questions)

    other = sample(tiny, tok, questions, k=4, seed=8, progress=False)
    assert (other["text"] != first["text"]).any()  # the seed matters


def test_sample_logprob_is_at_the_sampling_temperature(tiny, tok, questions):
    temperature = 0.7
    out = sample(tiny, tok, questions, k=3, seed=5, temperature=temperature, batch_size=4, progress=False)
    question_of = dict(zip(questions["question_id"], questions["question"]))
    at_t, at_1 = [], []
    for row in out.itertuples():
        ended = len(_ids(tok, row.text)) < MAX_NEW_TOKENS  # the tiny model emits no special token but the end mark
        reply = _reply_ids(tok, row.text, ended)
        at_t.append(_teacher_forced_logprob(tiny, tok, question_of[row.question_id], reply, temperature))
        at_1.append(_teacher_forced_logprob(tiny, tok, question_of[row.question_id], reply))
    np.testing.assert_allclose(out["logprob"], at_t, rtol=1e-5, atol=1e-4)
    assert not np.allclose(out["logprob"], at_1, rtol=1e-3, atol=1e-3)  # the temperature is not ignored


def test_beams_return_ranked_beams_per_question(tiny, tok, questions):
    out = beams(tiny, tok, questions, num_beams=3, num_return_sequences=3, progress=False)
    assert list(out.columns) == ["question_id", "beam", "text", "answer", "correct", "logprob", "ended"]
    assert len(out) == 3 * len(questions)
    assert out["question_id"].tolist() == np.repeat(questions["question_id"].to_numpy(), 3).tolist()
    assert out["beam"].tolist() == [0, 1, 2] * len(questions)
    for _, group in out.groupby("question_id", sort=False):
        scores = group["logprob"].to_numpy()
        assert (np.diff(scores) <= 1e-6).all(), scores  # best first
        assert group["text"].nunique() == 3  # distinct hypotheses
    assert out["ended"].any()
    # With length_penalty=0, a beam's score is its summed log-probability, end mark included.
    question_of = dict(zip(questions["question_id"], questions["question"]))
    for row in out.itertuples():
        reply = _reply_ids(tok, row.text, row.ended)
        assert row.ended or len(reply) == MAX_NEW_TOKENS
        expected = _teacher_forced_logprob(tiny, tok, question_of[row.question_id], reply)
        assert row.logprob == pytest.approx(expected, rel=1e-5, abs=1e-4)


def test_beams_are_deterministic(tiny, tok, questions):
    a = beams(tiny, tok, questions.iloc[:3], num_beams=3, num_return_sequences=2, progress=False)
    b = beams(tiny, tok, questions.iloc[:3], num_beams=3, num_return_sequences=2, progress=False)
    pd.testing.assert_frame_equal(a, b)
    assert a["beam"].tolist() == [0, 1] * 3


# --------------------------------------------------------------------------- input validation


def _bad_question_tables(questions):
    return {
        "empty": (questions.iloc[:0], "empty"),
        "not a frame": (questions["question"].tolist(), "empty"),
        "no target": (questions.drop(columns="target"), r"\['target'\]"),
        "no question": (questions.drop(columns="question"), r"\['question'\]"),
        "no id": (questions.drop(columns="question_id"), r"\['question_id'\]"),
    }


DECODERS = {"greedy": greedy, "sample": sample, "beams": beams}


@pytest.mark.parametrize("decoder", list(DECODERS))
@pytest.mark.parametrize("case", ["empty", "not a frame", "no target", "no question", "no id"])
def test_decoders_reject_bad_question_tables(tiny, tok, questions, decoder, case):
    table, message = _bad_question_tables(questions)[case]
    with pytest.raises(ValueError, match=message):
        DECODERS[decoder](tiny, tok, table, progress=False)


@pytest.mark.parametrize("k", [0, -1, 1.5])
def test_sample_rejects_bad_k(tiny, tok, questions, k):
    with pytest.raises(ValueError, match=r"\bk\b"):
        sample(tiny, tok, questions, k=k, progress=False)


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("nan")])
def test_sample_rejects_bad_temperature(tiny, tok, questions, temperature):
    with pytest.raises(ValueError, match="temperature"):
        sample(tiny, tok, questions, temperature=temperature, progress=False)


@pytest.mark.parametrize("batch_size", [0, -3])
def test_greedy_rejects_bad_batch_size(tiny, tok, questions, batch_size):
    with pytest.raises(ValueError, match="batch_size"):
        greedy(tiny, tok, questions, batch_size=batch_size, progress=False)


@pytest.mark.parametrize("batch_size", [0, -3])
def test_sample_rejects_bad_batch_size(tiny, tok, questions, batch_size):
    with pytest.raises(ValueError, match="batch_size"):
        sample(tiny, tok, questions, batch_size=batch_size, progress=False)


@pytest.mark.parametrize("kwargs, message", [
    ({"num_beams": 0, "num_return_sequences": 0}, "num_beams"),
    ({"num_beams": 2, "num_return_sequences": 0}, "num_return_sequences"),
    ({"num_beams": 2, "num_return_sequences": 3}, "cannot exceed"),
    ({"num_beams": 2.0, "num_return_sequences": 1}, "num_beams"),
    ({"num_beams": 2, "num_return_sequences": 1, "batch_size": 0}, "batch_size"),
])
def test_beams_reject_bad_settings(tiny, tok, questions, kwargs, message):
    with pytest.raises(ValueError, match=message):
        beams(tiny, tok, questions, progress=False, **kwargs)
