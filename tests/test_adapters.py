"""Confidence adapters (helpers/confidence/adapters.py and readout.py, LoRA from helpers/world/lora.py), in fast
mode."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from helpers import config
from helpers.world import lora, sums
from helpers.pipeline.checkpoints import load_checkpoint
from helpers.confidence import adapters as A
from helpers import pipeline
from helpers.confidence import readout


@pytest.fixture(scope="module")
def pair(ck):
    """Two evaluation checkpoints whose answers are sometimes right (fast-mode training ones rarely are)."""
    return list(ck.evaluation[-2:])


def _small(examples: pd.DataFrame, n: int = 96) -> pd.DataFrame:
    """A few rows of each base, so that fit_adapter runs in a fraction of a second."""
    return examples.groupby("base", group_keys=False).head(n).reset_index(drop=True)


def _randomize_lora(model, seed: int = 0) -> None:
    """Non-zero LoRA weights (fresh adapters start as the identity)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)


def test_confidence_is_softmax_over_yes_no_logits(ck):
    model, tok = load_checkpoint(ck.evaluation[-1])
    model = lora.wrap(model, A.adapter_lora_config())
    _randomize_lora(model)
    questions = ["What is 3+4?", "What is 12+85?", "What is 7+0?"]
    answers = ["7", "It is 97.", ""]  # different lengths: the batch is padded
    got = readout.adapter_confidence(model, tok, questions, answers)
    y, n = tok.convert_tokens_to_ids(["Y"]), tok.convert_tokens_to_ids(["N"])
    for i, (q, a) in enumerate(zip(questions, answers)):
        text = f"<bos><user>{q}<assistant>{a}<eos><user>Correct?<assistant>"
        ids = torch.tensor([tok.convert_tokens_to_ids(tok.tokenize(text))])  # no padding, one prompt
        with torch.no_grad():
            last = model(input_ids=ids).logits[0, -1]
        pair_logits = torch.stack([last[y[0]], last[n[0]]])
        assert got[i] == pytest.approx(torch.softmax(pair_logits, 0)[0].item(), abs=1e-5)
    assert 0.0 < got.min() and got.max() < 1.0


def test_prompt_reads_the_existing_head_and_adds_no_parameters(ck):
    model, _ = load_checkpoint(ck.evaluation[-1])
    n_base = sum(p.numel() for p in model.parameters())
    wrapped = lora.wrap(model, A.adapter_lora_config())
    trainable = [name for name, p in wrapped.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    assert sum(p.numel() for name, p in wrapped.named_parameters() if "lora_" not in name) == n_base
    assert wrapped.get_base_model().lm_head.weight is wrapped.get_base_model().transformer.wte.weight


def test_moving_an_adapter_keeps_the_target_base_weights(ck):
    source, target = ck.training[-1], ck.evaluation[-1]
    adapter = pipeline.adapters.train_adapter(source)
    moved, tok = pipeline.adapters.apply_adapter(adapter, target)
    home, _ = pipeline.adapters.apply_adapter(adapter, source)
    plain_target, _ = load_checkpoint(target)
    assert lora.base_weights_hash(moved) == lora.base_weights_hash(plain_target)
    assert lora.base_weights_hash(moved) != lora.base_weights_hash(home)
    weights = {k: v for k, v in moved.state_dict().items() if "lora_" in k}
    assert weights and all(torch.equal(v, home.state_dict()[k]) for k, v in weights.items())  # the same LoRA weights
    questions = sums.split("test").iloc[:50]
    answers = [sums.answer_text("sum", int(t)) for t in questions["target"]]
    on_target = readout.adapter_confidence(moved, tok, questions["question"], answers)
    on_source = readout.adapter_confidence(home, tok, questions["question"], answers)
    assert not np.allclose(on_target, on_source)


def test_training_changes_only_the_lora_weights(pair):
    model, tok = load_checkpoint(pair[0])
    before = lora.base_weights_hash(model)
    examples = _small(pipeline.adapters.adapter_examples(pair[:1]))
    trained, log = A.fit_adapter(model, tok, examples, seed=0)
    assert lora.base_weights_hash(trained) == before
    assert any(p.abs().sum() > 0 for name, p in trained.named_parameters() if "lora_B" in name)
    assert log["n_examples"] == len(examples) and len(log["loss_per_epoch"]) == config.adapters().epochs


def test_oracle_training_data_comes_only_from_adapter_train(ck):
    adapter = pipeline.adapters.train_adapter(ck.evaluation[-1])
    ids = set(adapter.examples["question_id"])
    assert ids <= set(sums.split("adapter_train")["question_id"])
    assert not ids & set(sums.split("test")["question_id"])
    assert set(adapter.examples["checkpoint"]) == {ck.evaluation[-1]}


def test_extra_examples_are_fresh_questions_outside_every_evaluation_split(pair):
    n_train = len(sums.split("adapter_train"))
    rows = pipeline.adapters.adapter_examples(pair[:1], n_examples=n_train + 50)
    fresh = rows[rows["source"] == "fresh"]
    assert len(rows) == n_train + 50 and len(fresh) == 50
    assert not set(fresh["question_id"]) & set(sums.held_out_ids().tolist())
    assert rows["question_id"].is_unique


def test_determinism_with_a_fixed_seed(pair):
    examples = _small(pipeline.adapters.adapter_examples(pair[:1]))
    questions = sums.split("test").iloc[:40]
    answers = [str(int(t)) for t in questions["target"]]
    runs = []
    for seed in (0, 0, 1):
        model, tok = load_checkpoint(pair[0])
        trained, _ = A.fit_adapter(model, tok, examples, seed=seed)
        runs.append(readout.adapter_confidence(trained, tok, questions["question"], answers))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_multi_checkpoint_batches_run_through_their_own_weights(pair, monkeypatch):
    examples = _small(pipeline.adapters.adapter_examples(pair))
    wte = {name: load_checkpoint(name)[0].transformer.wte.weight.detach().clone() for name in pair}
    seen = []
    original = A._batch_loss

    def recording(model, tokenizer, weights, encoded, labels, rows):
        seen.append((set(examples["checkpoint"].iloc[rows]), weights["transformer.wte.weight"]))
        return original(model, tokenizer, weights, encoded, labels, rows)

    monkeypatch.setattr(A, "_batch_loss", recording)
    model, tok = load_checkpoint(pair[0])
    before = lora.base_weights_hash(model)
    bases = {name: lora.base_state(load_checkpoint(name)[0]) for name in pair}
    trained, log = A.fit_adapter(model, tok, examples, bases=bases, seed=0)
    assert len(seen) == log["n_batches"]
    for names, weights in seen:
        assert len(names) == 1  # one checkpoint per batch ...
        assert torch.equal(weights, wte[names.pop()])  # ... through that checkpoint's weights
    assert lora.base_weights_hash(trained) == before  # the returned model holds its own weights


def test_rows_encoded_once_cut_into_the_same_batches(ck):
    """fit_adapter encodes every row once (encode_rows) and cuts batches out (batch_of): the same tensors as
    encoding each batch on its own."""
    _, tok = load_checkpoint(ck.evaluation[-1])
    questions = ["What is 3+4?", "What is 12+85?", "What is 7+0?", "What is 100+1?"]
    answers = ["7", "It is 97.", "", "The sum is 101."]
    enc = readout.encode_rows(tok, questions, answers)
    for rows in ([0], [2, 0], [1, 3], [3, 2, 1, 0]):
        want = readout.encode_verification(tok, [questions[i] for i in rows], [answers[i] for i in rows])
        got = readout.batch_of(enc, np.array(rows))
        assert all(torch.equal(got[key], want[key]) for key in want)


def test_merged_weights_give_peft_s_forward(ck):
    """Training runs a plain GPT-2 with the LoRA weights merged in (lora.merged_weights): peft's forward."""
    model, tok = load_checkpoint(ck.evaluation[-1])
    plain, _ = load_checkpoint(ck.evaluation[-1])
    wrapped = lora.wrap(model, A.adapter_lora_config())
    _randomize_lora(wrapped)
    weights = lora.merged_weights(lora.base_state(wrapped), lora.lora_factors(wrapped))
    enc = readout.encode_rows(tok, ["What is 3+4?", "What is 12+85?"], ["7", "It is 97."])
    rows = np.arange(2)
    labels = torch.tensor([1.0, 0.0])
    got = A._batch_loss(plain, tok, weights, enc, labels, rows)
    log_odds = readout.margin(wrapped, readout.batch_of(enc, rows), tok)
    want = torch.nn.functional.binary_cross_entropy_with_logits(log_odds, labels)
    assert torch.allclose(got, want, atol=1e-5)


def test_single_checkpoint_ablation_gets_as_many_examples_as_multi(pair):
    multi = pipeline.adapters.adapter_examples(pair)
    single = pipeline.adapters.adapter_examples(pair[-1:], n_examples=len(multi))
    assert len(single) == len(multi)
    assert set(single["checkpoint"]) == {pair[-1]} and single["question_id"].is_unique
    assert (single["source"] == "fresh").sum() == len(multi) - len(sums.split("adapter_train"))


def test_random_labels_are_a_permutation_of_the_second_checkpoints_labels(pair):
    plain = pipeline.adapters.adapter_examples(pair)
    shuffled = pipeline.adapters.adapter_examples(pair, random_labels=pair[1])
    first, second = (shuffled["checkpoint"] == name for name in pair)
    assert (shuffled.loc[first, "label"] == shuffled.loc[first, "correct"].astype(float)).all()
    labels, truth = shuffled.loc[second, "label"].to_numpy(), shuffled.loc[second, "correct"].to_numpy(float)
    assert sorted(labels) == sorted(truth) and not np.array_equal(labels, truth)
    pd.testing.assert_frame_equal(plain.drop(columns="label"), shuffled.drop(columns="label"))


def test_results_frame_and_transfer_diagonal(ck):
    target = ck.evaluation[-1]
    oracle = pipeline.adapters.adapter_results("test", [target], source="oracle")
    diagonal = pipeline.adapters.adapter_results("test", [target], source=target)
    assert list(oracle.columns) == readout.COLUMNS and len(oracle) == len(sums.split("test"))
    pd.testing.assert_frame_equal(oracle, diagonal)
    assert oracle["confidence"].between(0, 1).all()
    moved = pipeline.adapters.adapter_results("test", [target], source=ck.training[-1])
    surrogate = pipeline.adapters.adapter_results("test", [target], source=ck.training[-1], surrogate=True)
    assert (moved["correct"].to_numpy() == oracle["correct"].to_numpy()).all()  # the same answers, scored differently
    assert not np.allclose(moved["confidence"], surrogate["confidence"])


@pytest.mark.parametrize("call, message", [
    (lambda ck: pipeline.adapters.train_adapter("step-99999"), "unknown checkpoint"),
    (lambda ck: pipeline.adapters.train_adapter([]), "no checkpoints"),
    (lambda ck: pipeline.adapters.train_adapter(ck.training[-1], seed=-1), "seed"),
    (lambda ck: pipeline.adapters.train_adapter(list(ck.training), random_labels=ck.evaluation[0]), "random_labels"),
    (lambda ck: pipeline.adapters.train_adapter(list(ck.training), n_examples=1), "n_examples"),
    (lambda ck: pipeline.adapters.adapter_results("test", [], source="oracle"), "no checkpoints"),
    (lambda ck: pipeline.adapters.adapter_results("test", ["nope"]), "unknown checkpoint"),
    (lambda ck: pipeline.adapters.adapter_results("test", source="best"), "unknown adapter source"),
    (lambda ck: pipeline.adapters.adapter_results("tset"), "unknown split"),
    (lambda ck: pipeline.adapters.adapter_results(source="multi", surrogate=True), "surrogate"),
    (lambda ck: pipeline.adapters.apply_adapter(ck.training[-1], "step-99999"), "unknown checkpoint"),
    (lambda ck: readout.adapter_confidence(None, None, [], []), "empty"),
    (lambda ck: readout.encode_verification(None, ["q"], []), "one answer per question"),
])
def test_bad_inputs_raise_value_errors(ck, call, message):
    with pytest.raises(ValueError, match=message):
        call(ck)


def test_multi_answer_examples_come_from_one_checkpoints_beams(ck):
    name = ck.training[-1]
    examples = pipeline.multi_answer.multi_answer_examples(name, answers_per_question=3)
    assert (examples["checkpoint"] == name).all() and (examples["base"] == name).all()
    per_question = examples.groupby("question_id").size()
    assert per_question.max() <= 3 and per_question.max() > 1  # several answers for some questions
    assert set(examples["question_id"]) <= set(sums.split("adapter_train")["question_id"])
    assert (examples["label"] == examples["correct"].astype(float)).all()
    assert not examples.duplicated(["question_id", "text"]).any()
    with pytest.raises(ValueError, match="answers_per_question"):
        pipeline.multi_answer.multi_answer_examples(name, answers_per_question=0)


def test_multi_answer_results_cover_the_evaluation_checkpoints(ck):
    res = pipeline.multi_answer.multi_answer_results(ck.training[-1])
    assert set(res["checkpoint"]) == set(ck.evaluation)
    assert res["confidence"].between(0, 1).all()


def test_the_readout_prompt_is_the_training_streams_verification_prompt():
    from helpers.world.model import build_tokenizer
    from helpers.world.training import encode_training_pairs

    tok = build_tokenizer()
    enc = encode_training_pairs(tok, [("What is 3+4?", "It is 7.", sums.VERIFY, "Yes")])
    prompt = tok(readout.verification_prompt("What is 3+4?", "It is 7."), add_special_tokens=False)["input_ids"]
    assert enc["input_ids"][0, :len(prompt)].tolist() == prompt
    labels = enc["labels"][0]
    first = int((labels != -100).nonzero()[0])
    # the loss starts exactly where the read-out reads: the first token of the reply, `Y`
    assert first == len(prompt) and tok.convert_ids_to_tokens(int(labels[first])) == readout.YES


def test_p_true_is_the_base_checkpoints_own_yes_no_readout(ck):
    from helpers.pipeline import p_true
    from helpers.pipeline.decoded import greedy_results

    name = ck.evaluation[-1]
    df = p_true.p_true_results("test", [name]).set_index("question_id")
    assert (df["checkpoint"] == name).all() and df["confidence"].between(0, 1).all()
    model, tok = load_checkpoint(name)
    y, n = readout.yes_no_ids(tok)
    answers = greedy_results("test", [name]).merge(sums.split("test")[["question_id", "question"]], on="question_id")
    for row in answers.head(4).itertuples():
        prompt = readout.verification_prompt(row.question, row.text)
        ids = torch.tensor([tok(prompt, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            last = model(input_ids=ids).logits[0, -1]  # the bare checkpoint: no adapter, no temperature
        expected = torch.softmax(torch.stack([last[y], last[n]]), 0)[0].item()
        assert df.loc[row.question_id, "confidence"] == pytest.approx(expected, abs=1e-5)
