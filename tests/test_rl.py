import numpy as np
import pytest
import torch

from helpers.world import decoding, rl, sums


def test_group_advantages():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    adv = rl.group_advantages(rewards)
    assert torch.allclose(adv[1], torch.zeros(4))  # no signal when every sample agrees
    assert torch.allclose(adv.sum(dim=1), torch.zeros(3), atol=1e-5)
    std = torch.tensor([0.0, 0.0, 0.0, 1.0]).std()
    assert adv[2, 3].item() == pytest.approx(0.75 / (std.item() + 1e-6), rel=1e-5)
    with pytest.raises(ValueError):
        rl.group_advantages(torch.ones(3))


def test_sequence_logprobs_match_generation_scores(checkpoint):
    """The GRPO loss re-scores sampled replies; it must see what generation saw (left padding!)."""
    _, model, tok = checkpoint
    questions = sums.split("test").iloc[:6]
    enc = decoding.encode_prompts(tok, questions["question"].tolist())
    torch.manual_seed(0)
    with torch.no_grad():
        out = model.generate(**enc, do_sample=True, top_k=0, max_new_tokens=decoding.MAX_NEW_TOKENS,
                             output_logits=True, return_dict_in_generate=True,
                             pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
        new = out.sequences[:, enc["input_ids"].shape[1]:]
        expected, _ = decoding.answer_logprobs(torch.stack(out.logits, 1), new, tok.eos_token_id)
        got, mask = rl.sequence_logprobs(model, out.sequences, enc["attention_mask"], tok.eos_token_id)
    assert torch.allclose(got.sum(1), expected.sum(1), atol=1e-4)
    assert mask.sum().item() > 0


def test_fresh_questions_avoid_the_evaluation_splits():
    qs = sums.fresh_questions(np.random.default_rng(0), 300)
    assert qs["question_id"].is_unique and len(qs) == 300
    assert not set(qs["question_id"]) & set(sums.held_out_ids().tolist())


def test_grpo_raises_the_reward_of_a_rewarded_behaviour(checkpoint):
    """A few GRPO steps on easy questions should not lower the reward, and the log is complete."""
    _, model, tok = checkpoint
    import copy

    policy = copy.deepcopy(model)
    questions = sums.fresh_questions(np.random.default_rng(1), 64)
    log = rl.grpo(policy, tok, questions, steps=3, prompts_per_step=16, group_size=4, lr=1e-3, progress=False)
    assert list(log.columns) == ["step", "reward", "groups_with_signal"] and len(log) == 3
    assert ((log["reward"] >= 0) & (log["reward"] <= 1)).all()
    # The base model is untouched (deepcopy), the policy has moved.
    moved = any(not torch.equal(a, b) for a, b in zip(model.parameters(), policy.parameters()))
    assert moved


def test_bad_arguments(checkpoint):
    _, model, tok = checkpoint
    qs = sums.fresh_questions(np.random.default_rng(0), 10)
    with pytest.raises(ValueError, match="group_size"):
        rl.grpo(model, tok, qs, group_size=1)
    with pytest.raises(ValueError, match="at least"):
        rl.grpo(model, tok, qs, prompts_per_step=64)
    with pytest.raises(ValueError):
        rl.supervised_finetune(model, tok, qs, epochs=0, lr=1e-3)


def test_sampling_is_reproducible_and_validated(checkpoint):
    _, model, tok = checkpoint
    qs = sums.split("test").iloc[:20]
    a = decoding.sample(model, tok, qs, k=3, seed=5, progress=False)
    b = decoding.sample(model, tok, qs, k=3, seed=5, progress=False)
    assert a.equals(b) and len(a) == 60
    c = decoding.sample(model, tok, qs, k=3, seed=6, progress=False)
    assert not a["logprob"].equals(c["logprob"])
    with pytest.raises(ValueError, match="k"):
        decoding.sample(model, tok, qs, k=0)
    with pytest.raises(ValueError, match="temperature"):
        decoding.sample(model, tok, qs, k=2, temperature=0)
