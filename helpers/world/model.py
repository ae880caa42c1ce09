"""The tiny chat model: a character-level tokenizer and a GPT-2 built from the `world` settings.

Loaded by every notebook through `helpers.pipeline.checkpoints.load_checkpoint`; notebook 00 shows how it is made.
"""
from __future__ import annotations

import string
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
from transformers.utils import logging as hf_logging

# from_pretrained draws a "Loading weights" bar for every checkpoint; notebooks load dozens.
hf_logging.disable_progress_bar()

# E402 on purpose: this import stays where it was, since moving it would change this module's parsed code, and so
# the code fingerprint (helpers.cache.fingerprint) of every cached entry built with it.
from helpers import config  # noqa: E402

PAD, BOS, EOS, UNK, USER, ASSISTANT = "<pad>", "<bos>", "<eos>", "<unk>", "<user>", "<assistant>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK, USER, ASSISTANT]
# Every character any notebook needs, `Y`, `N` and `%` included, is in the vocabulary before
# the base model trains, so later adapters never have to grow the embedding matrix.
CHARACTERS = list(string.digits + string.ascii_letters + " .,?!:;%+-=*/'()\n")
MAX_POSITIONS = 96
# The exact GELU (erf), not GPT-2's tanh approximation: on CPU its kernel, forward and backward, takes half
# the time of the fused tanh one, which was a fifth of a training step (tests/benchmarks/bench_build.py).
ACTIVATION = "gelu"


def chat_prompt(question: str) -> str:
    """The prompt the model answers: `<bos><user>question<assistant>`."""
    return conversation_prompt((question,))


def conversation_prompt(turns) -> str:
    """`<bos><user>t0<assistant>t1<eos><user>t2<assistant>`: user and assistant turns alternate, and the
    prompt ends on a user turn, so the model's next text is the assistant's reply."""
    turns = tuple(turns)
    if len(turns) % 2 != 1:
        raise ValueError(f"a prompt needs an odd number of turns (it ends on the user's), got {len(turns)}")
    text = BOS
    for i, turn in enumerate(turns):
        text += f"{USER}{turn}{ASSISTANT}" if i % 2 == 0 else f"{turn}{EOS}"
    return text


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A character-level fast tokenizer with pad/end tokens and left padding for generation."""
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + CHARACTERS)}
    core = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()  # without it, decode() puts spaces between characters
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        additional_special_tokens=[USER, ASSISTANT],
        padding_side="left",  # batched generation needs left padding and the attention mask
        clean_up_tokenization_spaces=False,
    )


def build_model(tokenizer: PreTrainedTokenizerFast) -> GPT2LMHeadModel:
    """A fresh GPT-2 of the size the `world` settings give (n_layer, n_embd, n_head), with no dropout."""
    s = config.world()
    gpt2 = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=MAX_POSITIONS,
        n_embd=s.n_embd,
        n_layer=s.n_layer,
        n_head=s.n_head,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        attn_implementation="eager",  # faster than SDPA for this tiny model on CPU (measured)
        activation_function=ACTIVATION,
    )
    return GPT2LMHeadModel(gpt2)


def n_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def load_pretrained(path: Path | str) -> tuple[GPT2LMHeadModel, PreTrainedTokenizerFast]:
    """Load a saved model and tokenizer from a folder, in eval mode."""
    path = Path(path)
    model = GPT2LMHeadModel.from_pretrained(path, attn_implementation="eager", activation_function=ACTIVATION)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    tokenizer.padding_side = "left"
    model.eval()
    return model, tokenizer


def load_any(name_or_path: str, revision: str | None = None):
    """A causal LM and its tokenizer from a local folder (revision = subfolder) or a hub id (revision = git ref)."""
    path = Path(name_or_path)
    kwargs = {}
    if path.is_dir():
        if revision is not None:
            path = path / revision
            if not path.is_dir():
                options = sorted(p.name for p in Path(name_or_path).iterdir() if p.is_dir())
                raise ValueError(f"no revision {revision!r} in {Path(name_or_path).name}; available: {options}")
        source = str(path)
    else:
        source, kwargs = name_or_path, ({"revision": revision} if revision else {})
    model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    tokenizer.padding_side = "left"  # batched generation needs left padding
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.eval()
    return model, tokenizer
