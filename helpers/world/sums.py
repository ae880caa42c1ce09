"""The sum world: questions in chat form, their phrasings, answers, splits and features.

The sizes and the training mixture come from `config.splits()` and `config.world()`.
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pandas as pd

from helpers import config

# Question phrasings, with how often each appears in the LM's training stream. The first is
# the canonical one used by every evaluation set; the others measure consistency (notebook 02).
QUESTION_TEMPLATES = {
    "sum": ["What is {a}+{b}?", "{a}+{b}=", "Add {a} and {b}.", "{a} plus {b}?"],
    "sub": ["What is {a}-{b}?", "{a}-{b}=", "Subtract {b} from {a}.", "{a} minus {b}?"],
}
# Answer surface forms: beams that say one number in different words must be grouped (notebook 02).
ANSWER_TEMPLATES = {
    "sum": ["{c}", "It is {c}.", "The sum is {c}."],
    "sub": ["{c}", "It is {c}.", "The difference is {c}."],
}
FAMILIES = ("sum", "sub")
VERIFY = "Correct?"  # the user's second turn in a verification conversation, after an answer
REPLIES = ("Yes", "No")  # its replies; the confidence read-out compares their first tokens
TRANSFER_FAMILY = "sub"  # learned by the checkpoints, never seen by confidence adapters
# A wrong rule some phases teach and later ones correct (`config.world().mistake_spans`): sums whose units
# column carries and has a 9 in it are answered without that carry (a+b-10), so that some checkpoints are
# confidently wrong on a family of questions, as real checkpoints are after learning something false.
MISTAKE_FAMILY = "nine carries"
_INT = re.compile(r"-?\d+")


def question_id(family: str, a, b):
    """Unique integer id of a question: a*1000+b, offset by a million for subtraction."""
    offset = FAMILIES.index(family) * 1_000_000
    return offset + np.asarray(a) * 1000 + np.asarray(b)


def target(family: str, a, b):
    """The right answer."""
    return np.asarray(a) + np.asarray(b) if family == "sum" else np.asarray(a) - np.asarray(b)


def question_text(family: str, a: int, b: int, template: int = 0) -> str:
    """The user's question in one of the phrasings (template 0 is canonical)."""
    return QUESTION_TEMPLATES[family][template].format(a=a, b=b)


def answer_text(family: str, c: int, form: int = 0) -> str:
    """The answer in one of its surface forms (form 0 is the bare number)."""
    return ANSWER_TEMPLATES[family][form].format(c=c)


def parse_answer(text) -> int | None:
    """The integer a reply states, or None. The only way text becomes a number in the series.

    The reply's first line must contain exactly one integer ("936", "It is 936.",
    "The sum is 936."); no integer or several integers give None.
    """
    if not isinstance(text, str):
        return None
    first_line = text.strip().split("\n", 1)[0]
    numbers = _INT.findall(first_line.replace(",", ""))
    if len(numbers) != 1:
        return None
    return int(numbers[0])


def is_correct(answer, question) -> bool:
    """Whether a parsed answer equals the question's target (a mapping with `target`, or an int)."""
    expected = question["target"] if not isinstance(question, (int, np.integer)) else question
    if answer is None:
        return False
    if isinstance(answer, str):
        raise ValueError("is_correct takes a parsed integer; call parse_answer(text) first")
    return int(answer) == int(expected)


def carries(family: str, a, b):
    """Number of carries (sum) or borrows (subtraction) over the three digit positions."""
    a, b = np.asarray(a), np.asarray(b)
    count = np.zeros(np.broadcast(a, b).shape, dtype=int)
    carry = np.zeros_like(count)
    for place in (1, 10, 100):
        da, db = (a // place) % 10, (b // place) % 10
        if family == "sum":
            carry = (da + db + carry >= 10).astype(int)
        else:
            carry = (da - db - carry < 0).astype(int)
        count += carry
    return count


def in_mistake_family(a, b):
    """Whether a sum belongs to the family the mistake spans teach wrong: the units column carries and one
    of the units digits is 9 (about 17% of uniform sums)."""
    ua, ub = np.asarray(a) % 10, np.asarray(b) % 10
    return (ua + ub >= 10) & ((ua == 9) | (ub == 9))


def mistaken_answer(a, b):
    """The wrong rule's answer: the sum with the units carry dropped (a+b-10)."""
    return np.asarray(a) + np.asarray(b) - 10


def mistaken_at(step: int, total_steps: int) -> bool:
    """Whether the training stream teaches the wrong rule at `step` (`config.world().mistake_spans`)."""
    frac = step / max(total_steps, 1)
    return any(start <= frac < end for start, end in config.world().mistake_spans)


def n_digits(x):
    """Digits of a non-negative integer (0 has one)."""
    x = np.asarray(x)
    return np.where(x > 0, np.floor(np.log10(np.maximum(x, 1))).astype(int) + 1, 1)


def make_questions(family: str, a, b, template: int = 0) -> pd.DataFrame:
    """A question table: id, operands, target, phrasing, prompt text and features."""
    a, b = np.asarray(a, dtype=int), np.asarray(b, dtype=int)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError("a and b must be non-empty 1-D arrays of equal length")
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; use one of {FAMILIES}")
    if not 0 <= template < len(QUESTION_TEMPLATES[family]):
        raise ValueError(f"template must be in 0..{len(QUESTION_TEMPLATES[family]) - 1}, got {template}")
    return pd.DataFrame(
        {
            "question_id": question_id(family, a, b),
            "family": family,
            "a": a,
            "b": b,
            "target": target(family, a, b),
            "template": template,
            "question": [question_text(family, x, y, template) for x, y in zip(a, b)],
            "n_digits": np.maximum(n_digits(a), n_digits(b)),
            "n_carries": carries(family, a, b),
            "small": is_small(a, b),
        }
    )


def max_operand() -> int:
    """Largest operand: 999 (three-digit sums), or 99 in fast mode (`config.splits().max_operand`)."""
    return config.splits().max_operand


def is_small(a, b):
    """Both operands in the lower half of the range (below 500 in full mode)."""
    half = (max_operand() + 1) // 2
    return (np.asarray(a) < half) & (np.asarray(b) < half)


RANGES = ("small", "mixed", "large")  # operand ranges (`operand_range`)
# The share of the operand range each training phase draws its operands from (`config.world().phases`):
# both from it, except "mixed", which draws one operand from each half (in either order).
PHASE_RANGES = {"small": (0.0, 0.5), "large": (0.5, 1.0), "uniform": (0.0, 1.0), "mixed": (0.0, 1.0)}


def operand_range(a, b) -> np.ndarray:
    """"small" (both operands in the lower half of the range, below 500 in full mode), "large" (both in
    the upper half) or "mixed" (one of each), for either family's operands.

    The training mixture shifts between small, large and mixed operands (`config.world().phases`); notebook 00
    shows accuracy per range at every selected checkpoint."""
    half = (max_operand() + 1) // 2
    low_a, low_b = np.asarray(a) < half, np.asarray(b) < half
    return np.where(low_a & low_b, "small", np.where(~low_a & ~low_b, "large", "mixed"))


def _draw_pairs(rng: np.random.Generator, family: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n distinct uniform operand pairs; subtraction keeps a >= b so answers are non-negative."""
    pairs: dict[tuple[int, int], None] = {}
    if n > (max_operand() + 1) ** 2 // 4:
        raise ValueError(f"cannot draw {n} distinct questions from operands up to {max_operand()}")
    while len(pairs) < n:
        a, b = rng.integers(0, max_operand() + 1, size=(2, 2 * n))
        if family == "sub":
            a, b = np.maximum(a, b), np.minimum(a, b)
        for pair in zip(a.tolist(), b.tolist()):
            pairs.setdefault(pair, None)
            if len(pairs) == n:
                break
    a, b = np.array(list(pairs)).T
    return a, b


def split_sizes() -> dict[str, int]:
    """How many questions each evaluation split holds."""
    s = config.splits()
    return {"hundred": 100, "test": s.n_test, "adapter_train": s.n_adapter_train, "transfer_test": s.n_transfer_test}


def _held_out() -> dict[str, pd.DataFrame]:
    # Read the settings here (recorded by the cache) and pass them to the memoized draw.
    return _draw_splits(tuple(split_sizes().items()), config.splits().split_seeds, config.splits().seed, max_operand())


@lru_cache(maxsize=4)
def _draw_splits(sizes: tuple, split_seeds: tuple, seed: int, top: int) -> dict[str, pd.DataFrame]:
    """Every evaluation split, drawn in a fixed order so that they are disjoint."""
    taken: set[int] = set()
    out = {}
    seeds = dict(split_seeds)
    for name, size in sizes:
        family = TRANSFER_FAMILY if name == "transfer_test" else "sum"
        rng = np.random.default_rng([seed, seeds[name]])
        a, b = _draw_pairs(rng, family, size + len(taken))
        ids = question_id(family, a, b)
        keep = ~np.isin(ids, list(taken))
        a, b = a[keep][:size], b[keep][:size]
        out[name] = make_questions(family, a, b)
        taken.update(out[name]["question_id"].tolist())
    return out


def split(name: str) -> pd.DataFrame:
    """One evaluation split: `hundred`, `test`, `adapter_train` or `transfer_test` (canonical phrasing)."""
    splits = _held_out()
    if name not in splits:
        raise ValueError(f"unknown split {name!r}; choose one of {sorted(splits)}")
    return splits[name].copy()


def held_out_ids() -> np.ndarray:
    """Ids the LM's training stream must never contain."""
    return np.concatenate([df["question_id"].to_numpy() for df in _held_out().values()])


def hundred_sums_csv() -> pd.DataFrame:
    """The committed hundred sums of notebook 01 (data/hundred_sums.csv)."""
    return pd.read_csv(config.DATA_DIR / "hundred_sums.csv")


def phase_at(step: int, total_steps: int) -> str:
    """Which operand range dominates training at `step` (a key of `PHASE_RANGES`; `config.world().phases`)."""
    frac = step / max(total_steps, 1)
    return [name for start, name in config.world().phases if frac >= start][-1]


def _operands(rng: np.random.Generator, n: int, phase: str) -> tuple[np.ndarray, np.ndarray]:
    """Operands for one batch: `phase_majority` of the pairs with both operands in the phase's range (for
    "mixed": one small and one large, in either order), the rest uniform."""
    if phase not in PHASE_RANGES:
        raise ValueError(f"unknown phase {phase!r}; choose one of {list(PHASE_RANGES)}")
    top = max_operand() + 1
    a, b = rng.integers(0, top, size=(2, n))
    in_phase = rng.random(n) < config.world().phase_majority
    low, high = (int(top * f) for f in PHASE_RANGES[phase])
    a = np.where(in_phase, rng.integers(low, high, n), a)
    b = np.where(in_phase, rng.integers(low, high, n), b)
    if phase == "mixed":  # only this phase draws more, so the other phases' streams stay what they were
        half = top // 2
        small, large = a % half, half + b % (top - half)
        swap = rng.random(n) < 0.5
        a = np.where(in_phase, np.where(swap, large, small), a)
        b = np.where(in_phase, np.where(swap, small, large), b)
    return a, b


def plausible_mistakes(rng: np.random.Generator, right) -> np.ndarray:
    """A wrong answer per right one, the way the model itself errs: one digit off by one or two
    (a carry dropped or added), in the units, tens or hundreds; never negative, never right."""
    right = np.asarray(right, dtype=int)
    place = rng.choice([1, 10, 100], size=right.shape, p=[0.3, 0.4, 0.3])
    step = rng.choice([-2, -1, 1, 2], size=right.shape, p=[0.15, 0.35, 0.35, 0.15])
    wrong = right + place * step
    return np.where(wrong < 0, right + place * np.abs(step), wrong)


def _draw_stream(rng: np.random.Generator, m: int, phase: str, held_out: np.ndarray,
                 mistaken: bool = False) -> pd.DataFrame:
    """m draws of the training stream as columns, before any text: operands, family, phrasing, answer
    form, whether it is a verification conversation and which answer it shows; `keep` is False for
    held-out questions (the caller redraws them). With `mistaken`, sums of the mistake family are taught
    the wrong rule (`mistaken_answer`) in replies and in verifications; the random draws are the same."""
    w = config.world()
    a, b = _operands(rng, m, phase)  # sums: mostly the phase's operand range
    is_sub = rng.random(m) < dict(w.transfer_shares)[phase]
    # Subtraction: uniform operands in every phase (the transfer test is uniform; drawn from the phase's range,
    # half of it, one operand small and one large, was never trained and stayed near 0% right).
    top = max_operand() + 1
    sub_a, sub_b = rng.integers(0, top, size=(2, m))
    a, b = np.where(is_sub, np.maximum(sub_a, sub_b), a), np.where(is_sub, np.minimum(sub_a, sub_b), b)
    ids = np.where(is_sub, question_id("sub", a, b), question_id("sum", a, b))
    wrong_rule = ~is_sub & in_mistake_family(a, b) & mistaken
    right = np.where(is_sub, a - b, np.where(wrong_rule, mistaken_answer(a, b), a + b))
    draws = pd.DataFrame({
        "a": a, "b": b, "sub": is_sub, "keep": ~np.isin(ids, held_out), "taught_wrong": wrong_rule,
        "template": rng.choice(len(w.question_weights), size=m, p=list(w.question_weights)),
        "form": rng.choice(len(w.answer_weights), size=m, p=list(w.answer_weights)),
        "verify": rng.random(m) < w.verification_share,
        "shown_right": rng.random(m) < 0.5,
    })
    draws["shown"] = np.where(draws["shown_right"], right, plausible_mistakes(rng, right))
    draws["answer"] = right
    return draws


def training_batch(rng: np.random.Generator, n: int, phase: str, held_out: np.ndarray,
                   mistaken: bool = False) -> list[tuple[str, ...]]:
    """n conversations for the LM, with mixed phrasings and answer forms; the loss sees the last turn.

    Most are (question, answer). A share (`config.world().verification_share`) are verification
    conversations (question, candidate answer, `Correct?`, `Yes`/`No`), half with the right answer and
    half with a plausible mistake, so that every checkpoint learns what `Yes` and `No` mean and judges
    answers with what it knows (the confidence read-out of notebooks 05 and 06). Held-out questions are
    redrawn, so evaluation splits never appear in training, in either kind. With `mistaken` (a mistake
    span, `mistaken_at`), the mistake family's sums are taught the wrong rule, replies and verdicts alike.
    """
    out: list[tuple[str, ...]] = []
    while len(out) < n:
        draws = _draw_stream(rng, n - len(out), phase, held_out, mistaken)
        for d in draws[draws["keep"]].itertuples():
            fam = "sub" if d.sub else "sum"
            question = question_text(fam, d.a, d.b, d.template)
            if d.verify:
                out.append((question, answer_text(fam, d.shown, d.form), VERIFY, REPLIES[0 if d.shown_right else 1]))
            else:
                out.append((question, answer_text(fam, d.answer, d.form)))
    return out


def mixture(total_steps: int | None = None, every: int = 50, n: int = 1000, seed: int = 0) -> pd.DataFrame:
    """What the training stream holds along the run, measured by drawing it every `every` steps.

    One row per drawn step: step, phase, the shares of the sums whose operands are small, mixed or large
    (`operand_range`; subtraction's operands are uniform in every phase), and the shares of draws that are
    subtraction, that are verification conversations and that are taught the wrong rule (notebook 00's
    mixture figure). `total_steps` defaults to `config.world().train_steps`.
    """
    total_steps = config.world().train_steps if total_steps is None else total_steps
    rng, rows = np.random.default_rng(seed), []
    for step in range(0, total_steps, every):
        phase = phase_at(step, total_steps)
        draws = _draw_stream(rng, n, phase, np.array([], dtype=int), mistaken_at(step, total_steps))
        sums_only = draws[~draws["sub"]]
        ranges = operand_range(sums_only["a"], sums_only["b"])
        rows.append({"step": step, "phase": phase, **{r: float((ranges == r).mean()) for r in RANGES},
                     "subtraction": float(draws["sub"].mean()), "verification": float(draws["verify"].mean()),
                     "taught wrong": float(draws["taught_wrong"].mean())})
    return pd.DataFrame(rows)


def fresh_questions(rng: np.random.Generator, n: int, family: str = "sum") -> pd.DataFrame:
    """n distinct canonical questions that belong to no evaluation split."""
    held = set(held_out_ids().tolist())
    a, b = rng.integers(0, max_operand() + 1, size=(2, 4 * n))
    if family == "sub":
        a, b = np.maximum(a, b), np.minimum(a, b)
    ids = question_id(family, a, b)
    _, first = np.unique(ids, return_index=True)
    keep = np.sort(first[~np.isin(ids[first], list(held))])
    keep = rng.permutation(keep)[:n]
    if len(keep) < n:
        raise ValueError(f"could not draw {n} fresh questions; ask for fewer")
    return make_questions(family, a[keep], b[keep])
