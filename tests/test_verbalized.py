"""Verbalized confidence (helpers/confidence/verbalized*.py, notebook 03), in fast mode."""
import numpy as np
import pandas as pd
import pytest
import torch

from helpers import config
from helpers.world import decoding, lora, sums
from helpers.pipeline.checkpoints import get_checkpoints
from helpers.pipeline.checkpoints import load_checkpoint
from helpers.confidence import verbalized as V
from helpers.world.model import chat_prompt
from helpers import pipeline
from helpers.confidence import verbalized_readout
from helpers.confidence import verbalized_text


# ---------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("text, expected", [
    ("70%", 0.7),
    ("70 %", 0.7),
    ("0.7", 0.7),
    (".5", 0.5),
    ("seventy percent", 0.7),
    ("Seventy-five per cent", 0.75),
    ("one hundred percent", 1.0),
    ("zero percent", 0.0),
    ("I'm 70% sure", 0.7),
    ("Confidence: 70%", 0.7),
    ("\nConfidence: 100%", 1.0),
    ("Confidence: 0%", 0.0),
    ("Confidence: 70", 0.7),  # a bare whole number counts right after the marker
    ("Confidence: 0.85", 0.85),
    ("It is 936.\nConfidence: 40%", 0.4),  # only what follows the marker is read
    ("I am 70 percent sure", 0.7),
    ("ninety five percent", 0.95),
])
def test_parse_confidence_reads_stated_numbers(text, expected):
    assert verbalized_text.parse_confidence(text) == pytest.approx(expected)


@pytest.mark.parametrize("junk", [
    "", "junk", "Confidence:", "Confidence: high", "150%", "101 percent", "-5%", "1.5", "60% or 70%",
    "It is 4.",  # a bare number outside the marker is an answer, not a confidence
    "Confidence: 7O%",  # letter O
    "\nConfidence: 1000%", "seventy", "twenty twenty percent", None, 0.7, float("nan"),
])
def test_parse_confidence_returns_none_for_junk(junk):
    assert verbalized_text.parse_confidence(junk) is None


def test_every_suffix_parses_back_to_its_level():
    for level in np.linspace(0, 1, 11):
        assert verbalized_text.parse_confidence(verbalized_text.confidence_suffix(level)) == pytest.approx(level)
    assert verbalized_text.confidence_suffix(0.74) == "\nConfidence: 70%"


# ---------------------------------------------------------------------------- targets


def test_round_to_level_rounds_halves_up():
    assert verbalized_text.round_to_level(0.25) == pytest.approx(0.3)
    assert verbalized_text.round_to_level(0.35) == pytest.approx(0.4)  # not banker's rounding
    assert list(verbalized_text.round_to_level(np.array([0.0, 0.04, 0.96, 1.0]))) == pytest.approx([0.0, 0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="percentages"):
        verbalized_text.round_to_level(70)


def _fake_sampler(accuracy: dict):
    """A stand-in for decoding.sample: question q gets exactly round(accuracy[q] * k) right answers."""
    def sample(model, tokenizer, questions, k, seed, temperature, progress, desc):
        rows = []
        for qid in questions["question_id"]:
            n_right = int(round(accuracy[qid] * k))
            for i in range(k):
                rows.append({"question_id": qid, "sample": i, "correct": i < n_right})
        return pd.DataFrame(rows)
    return sample


def test_targets_are_the_share_right_rounded_to_ten_percent():
    questions = sums.split("adapter_train").iloc[:6]
    truth = dict(zip(questions["question_id"], [0.0, 0.25, 0.5, 0.65, 0.9, 1.0]))
    out = V.make_targets(None, None, questions, k=20, sampler=_fake_sampler(truth), progress=False)
    assert list(out["question_id"]) == list(questions["question_id"])
    assert list(out["accuracy"]) == pytest.approx([0.0, 0.25, 0.5, 0.65, 0.9, 1.0])
    assert list(out["target"]) == pytest.approx([0.0, 0.3, 0.5, 0.7, 0.9, 1.0])
    assert (out["n_samples"] == 20).all()


def test_targets_reject_too_few_samples_and_bad_samplers():
    questions = sums.split("adapter_train").iloc[:3]
    truth = dict.fromkeys(questions["question_id"], 0.5)
    with pytest.raises(ValueError, match="k must be an integer >= 10"):
        V.make_targets(None, None, questions, k=5, sampler=_fake_sampler(truth))

    def short(*args, **kwargs):
        return _fake_sampler(truth)(*args, **kwargs).iloc[:-1]
    with pytest.raises(ValueError, match="exactly k rows"):
        V.make_targets(None, None, questions, k=10, sampler=short)
    with pytest.raises(ValueError, match="samples is empty"):
        verbalized_text.empirical_targets(pd.DataFrame())


def test_cached_targets_cover_the_training_questions(world):
    name = get_checkpoints().evaluation[-1]
    cached = pipeline.verbalized.targets(name)
    s = config.verbalized()
    assert len(cached) == s.n_train and (cached["n_samples"] == s.k).all()
    assert set(np.round(cached["target"] * 10, 6)) <= set(range(11))


# ---------------------------------------------------------------------------- the adapter


@pytest.fixture(scope="module")
def small_training():
    questions = sums.split("adapter_train").iloc[:32]
    name = get_checkpoints().evaluation[-1]
    model, tok = load_checkpoint(name)
    answers = decoding.greedy(model, tok, questions, progress=False)["text"]
    return name, model, tok, questions, answers


def test_training_leaves_the_base_weights_unchanged(small_training):
    name, model, tok, questions, answers = small_training
    before = lora.base_weights_hash(model)
    peft_model, log = V.fit_verbalized_adapter(model, tok, questions, answers, np.linspace(0, 1, 32), epochs=1,
                                               progress=False)
    assert list(log.columns) == ["epoch", "loss"] and len(log) == 1
    assert lora.base_weights_hash(peft_model) == before  # LoRA and trainable-token deltas excluded
    trainable = {n for n, p in peft_model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n or "trainable_tokens" in n for n in trainable)
    lora_before = {n: p.detach().clone() for n, p in peft_model.named_parameters() if "lora_B" in n}
    assert any(p.abs().sum() > 0 for p in lora_before.values())  # lora_B starts at 0: it has moved
    base = peft_model.unload()  # remove LoRA without merging
    assert lora.base_weights_hash(base) == lora.base_weights_hash(load_checkpoint(name)[0])


def test_suffix_pairs_put_the_loss_on_the_confidence_only(checkpoint):
    _, _, tok = checkpoint
    prefix = chat_prompt("What is 1+2?") + "It is 3."
    batch = V.encode_suffix_pairs(tok, [prefix, chat_prompt("What is 4+5?") + "9"], ["\nConfidence: 70%"] * 2)
    learned = batch["labels"][0][batch["labels"][0] != -100]
    assert tok.decode(learned) == "\nConfidence: 70%" + tok.eos_token


def test_moved_adapter_runs_on_the_target_checkpoint(world):
    ckpts = get_checkpoints()
    source, target = pipeline.verbalized.default_source(), ckpts.evaluation[-1]
    assert source in ckpts.training
    moved, tok = pipeline.verbalized.load_adapted(target, adapter=source)
    home, _ = pipeline.verbalized.load_adapted(source, adapter=source)
    plain, _ = load_checkpoint(target)
    # base weights: the target's; LoRA weights: the source adapter's
    assert lora.base_weights_hash(moved) == lora.base_weights_hash(plain)
    assert lora.base_weights_hash(moved) != lora.base_weights_hash(home)
    moved_lora = {n: p for n, p in moved.named_parameters() if "lora_" in n or "trainable_tokens" in n}
    home_lora = dict(home.named_parameters())
    assert moved_lora and all(torch.equal(p, home_lora[n]) for n, p in moved_lora.items())
    # and it really runs on them: outputs differ from the same adapter on the source checkpoint
    enc = decoding.encode_prompts(tok, sums.split("test")["question"].iloc[:8].tolist())
    with torch.no_grad():
        out_moved, out_home = moved(**enc).logits, home(**enc).logits
        out_plain = plain(**enc).logits
    assert not torch.allclose(out_moved, out_home, atol=1e-4)
    assert not torch.allclose(out_moved, out_plain, atol=1e-4)  # the adapter is active


# ---------------------------------------------------------------------------- readouts


@pytest.fixture(scope="module")
def adapted(world):
    name = get_checkpoints().evaluation[-1]
    model, tok = pipeline.verbalized.load_adapted(name)
    questions = sums.split("test").iloc[:48]
    answers = pipeline.decoded.greedy_results("test", [name])["text"].iloc[:48].tolist()
    return model, tok, questions, answers


def test_level_scores_equal_scoring_each_level_alone(adapted):
    model, tok, questions, answers = adapted
    prefixes = [chat_prompt(q) + a for q, a in zip(questions["question"].iloc[:4], answers[:4])]
    scores = verbalized_readout.level_logprobs(model, tok, prefixes)
    for i, prefix in enumerate(prefixes):
        for j, level in enumerate(verbalized_text.LEVELS):
            text = f"{level}%"
            ids = tok(prefix + verbalized_text.MARKER + text, return_tensors="pt",
                      add_special_tokens=False)["input_ids"]
            n = len(text)
            with torch.no_grad():
                logp = torch.log_softmax(model(input_ids=ids).logits[0], -1)
            alone = logp[-n - 1:-1].gather(-1, ids[0, -n:, None]).sum()
            assert scores[i, j].item() == pytest.approx(alone.item(), abs=1e-4)
    expected, mass = verbalized_readout.expected_level(scores)
    assert ((expected >= 0) & (expected <= 1)).all() and ((mass > 0) & (mass <= 1 + 1e-9)).all()


def test_stated_text_equals_greedy_generation(adapted):
    model, tok, questions, answers = adapted
    read = verbalized_readout.read_confidence(model, tok, questions, answers, batch_size=16, progress=False)
    generated = verbalized_readout.generate_continuations(model, tok,
                                         [chat_prompt(q) + a for q, a in zip(questions["question"], answers)])
    assert read["stated_text"].tolist() == generated
    assert read["parsed"].tolist() == [verbalized_text.parse_confidence(t) is not None for t in generated]


def test_results_frame(world):
    df = pipeline.verbalized.verbalized_results("test", source="oracle")
    ckpts = get_checkpoints()
    assert list(pd.unique(df["checkpoint"])) == list(ckpts.evaluation)
    assert (df["adapter"] == df["checkpoint"]).all()
    assert not df.duplicated(["checkpoint", "question_id"]).any()
    assert df["confidence"].between(0, 1).all() and df["confidence"].equals(df["expected"])
    assert df.loc[df["parsed"], "stated"].between(0, 1).all() and df.loc[~df["parsed"], "stated"].isna().all()
    greedy = pipeline.decoded.greedy_results("test", list(ckpts.evaluation))
    assert df["correct"].equals(greedy["correct"]) and df["token_probability"].equals(greedy["confidence"])
    counts = V.unparsed_counts(df)
    assert counts["unparsed"].sum() == (~df["parsed"]).sum()
    moved = pipeline.verbalized.verbalized_results("test", source=pipeline.verbalized.default_source())
    assert (moved["adapter"] == pipeline.verbalized.default_source()).all() and moved["correct"].equals(df["correct"])


def test_bad_inputs_say_what_to_fix(small_training):
    name, model, tok, questions, answers = small_training
    with pytest.raises(ValueError, match="'oracle' or a checkpoint"):
        pipeline.verbalized.verbalized_results("test", source="best")
    with pytest.raises(ValueError, match="unknown checkpoint"):
        pipeline.verbalized.verbalized_results("test", checkpoints=["step-99999"])
    with pytest.raises(ValueError, match="unknown split"):
        pipeline.verbalized.verbalized_results("train")
    with pytest.raises(ValueError, match="unknown checkpoint"):
        pipeline.verbalized.load_adapted(name, adapter="step-99999")
    with pytest.raises(ValueError, match="one answer text per question"):
        verbalized_readout.read_confidence(model, tok, questions, answers[:3])
    with pytest.raises(ValueError, match="not parsed numbers"):
        verbalized_readout.read_confidence(model, tok, questions, list(range(len(questions))))
    with pytest.raises(ValueError, match="one value per question"):
        V.fit_verbalized_adapter(model, tok, questions, answers, [0.5])
    with pytest.raises(ValueError, match="epochs and batch_size must be >= 1"):
        V.fit_verbalized_adapter(model, tok, questions, answers, np.zeros(len(questions)), epochs=0)
    with pytest.raises(ValueError, match="questions is empty"):
        verbalized_readout.read_confidence(model, tok, questions.iloc[:0], [])
    with pytest.raises(ValueError, match="verbalized_results"):
        V.unparsed_counts(pd.DataFrame({"x": [1]}))
