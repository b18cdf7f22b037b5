"""`prosody`: shortcut baselines that pick an option by one fixed delivery rule.

No weights, no text, no understanding: each rule looks only at the two option
clips (and, for the catalyst rules, the catalyst's turn right before the test
turn). They measure how far SpeechEQ can be solved by delivery alone (SPEC §9):
in the published data resonant clips were synthesised "calm, warm, patient"
and dissonant ones "sharp, loud, rushed", so pace and loudness leak the label.
Every report shows these beside the models.

Rules (`--model-args rule=NAME`) are the single-feature rules of
`speecheq_dataset.delivery_rules`, the same table the builders' shortcut audit
measures: slower / faster, louder / quieter, higher_pitch / lower_pitch,
wider_pitch_range / narrower_pitch_range, farthest_from_catalyst /
closest_to_catalyst (delivery distance to the catalyst's turn before the test
turn; duration is left out of it: it depends on the words).

Undecidable cases (equal values, an unvoiced clip for a pitch rule, no
preceding turn for a catalyst rule) are broken by the query's seed, so runs are
deterministic. Features come from speecheq_dataset.acoustics.
"""

from __future__ import annotations

import json
import logging
import math
import time

import numpy as np

from eval_scripts.models.base import ChoiceModel, ChoiceQuery, Clip, ModelOutput, register
from eval_scripts.models.memo import ClipMemo
from speecheq_dataset import acoustics
from speecheq_dataset import delivery_rules
from speecheq_dataset.acoustics import ClipFeatures
from speecheq_dataset.columns import TEST_TURNS
from speecheq_dataset.columns import audio_column

logger = logging.getLogger(__name__)

RULES: tuple[str, ...] = tuple(delivery_rules.RULES)
DEFAULT_RULE = "slower"


def seed_tiebreak(seed: int) -> int:
    """The option (1 or 2) a query's seed picks when a rule cannot decide."""
    return 1 + int(np.random.default_rng(seed).integers(2))


def choose_option(
    rule: str, options: tuple[ClipFeatures, ClipFeatures], preceding: ClipFeatures | None = None, seed: int = 0
) -> tuple[int, bool]:
    """(chosen option 1 or 2, whether the seed decided) for one query under `rule`."""
    first = delivery_rules.picks_first(rule, options[0], options[1], preceding)
    if first == 0.5:
        return seed_tiebreak(seed), True
    return (1 if first else 2), False


def _features(memo: ClipMemo, clip: Clip) -> ClipFeatures:
    """A clip's delivery features, measured once per clip (the same clips recur across rounds, orders and runs)."""
    known = memo.get(clip.array, clip.sampling_rate)
    if known is None:
        known = acoustics.clip_features(clip.array, clip.sampling_rate)
        memo.put(clip.array, clip.sampling_rate, known)
    return known


def _profile(features: ClipFeatures) -> str:
    pitch = f"{features.pitch_hz:.0f} Hz" if math.isfinite(features.pitch_hz) else "unvoiced"
    return f"{features.duration_s:.2f} s, {features.rms_db:.1f} dB, pitch {pitch}"


@register("prosody")
class ProsodyBaseline(ChoiceModel):
    """A fixed delivery rule over the option clips (see the module docstring)."""

    name = "prosody"
    reads_prompt = False  # it compares the two option clips; it answers no other question
    modes = frozenset({"generate", "logprob"})

    def __init__(self, rule: str = DEFAULT_RULE, **unused):
        if rule not in RULES:
            raise ValueError(f"unknown prosody rule {rule!r}; known rules: {', '.join(RULES)}")
        if unused:
            raise ValueError(f"prosody: unknown model args {sorted(unused)}; it takes only rule=")
        self.rule = rule
        self._memo = ClipMemo()
        self._needs_catalyst_warned = False

    def describe(self) -> dict:
        return {
            "name": self.name,
            "label": f"prosody:{self.rule}",
            "rule": self.rule,
            "kind": "shortcut baseline (delivery rule; no weights, no text)",
            "features": "speecheq_dataset.acoustics",
            "analysis_sr": acoustics.ANALYSIS_SR,
            "distance_scale": acoustics.CONTRAST_V1.version if delivery_rules.uses_catalyst(self.rule) else None,
        }

    def prepare_clips(self, clips: list[Clip]) -> None:
        """Measure ahead the clips this rule reads: the options, and the catalyst turns before them for catalyst rules."""
        needed = {audio_column(turn, level) for turn in TEST_TURNS for level in ("high", "low")}
        if delivery_rules.uses_catalyst(self.rule):
            needed |= {audio_column(turn - 1) for turn in TEST_TURNS}
        for clip in clips:
            if clip.column in needed:
                _features(self._memo, clip)

    def _answer(self, query: ChoiceQuery) -> ModelOutput:
        start = time.perf_counter()
        options = (_features(self._memo, query.options[0]), _features(self._memo, query.options[1]))
        preceding = None
        if delivery_rules.uses_catalyst(self.rule):
            if query.preceding is None and not self._needs_catalyst_warned:
                logger.warning("prosody:%s: query %s has no preceding catalyst turn; the seed decides", self.rule, query.uid)
                self._needs_catalyst_warned = True
            preceding = _features(self._memo, query.preceding) if query.preceding is not None else None
        choice, by_seed = choose_option(self.rule, options, preceding, query.seed)
        reasoning = f"rule {self.rule}" + (": undecidable, seed tie-break" if by_seed else "")
        text = json.dumps(
            {
                "acoustic_profile_1": _profile(options[0]),
                "acoustic_profile_2": _profile(options[1]),
                "situational_demand": "not considered (delivery rule)",
                "reasoning": reasoning,
                "selected": f"Option {choice}",
            }
        )
        return ModelOutput(text=text, choice=choice, latency_s=time.perf_counter() - start)

    def generate(self, queries: list[ChoiceQuery]) -> list[ModelOutput]:
        return [self._answer(query) for query in queries]

    def score(self, queries: list[ChoiceQuery]) -> list[ModelOutput]:
        # A rule has no probabilities; the choice is the same in both modes.
        return self.generate(queries)


def measure_rule(rule: str, dialogues: list[dict[str, tuple[ClipFeatures, ClipFeatures, ClipFeatures | None]]], seed: int = 0) -> dict[str, float]:
    """Accuracy of a rule on known pairs, without the runner.

    Each dialogue maps "turn4" and "turn6" to (high-EQ features, low-EQ
    features, preceding catalyst features). The high clip is shown as Option 1;
    a rule compares values, so order matters only for seed tie-breaks
    (counted in `ties`). Returns acc_turn4, acc_turn6, acc_all, acc_traj, ties, n_dialogues.
    """
    right = {"turn4": [], "turn6": []}
    ties = 0
    for index, dialogue in enumerate(dialogues):
        for turn in right:
            high, low, preceding = dialogue[turn]
            choice, by_seed = choose_option(rule, (high, low), preceding, seed + 2 * index + (turn == "turn6"))
            right[turn].append(choice == 1)
            ties += by_seed
    turn4, turn6 = np.array(right["turn4"]), np.array(right["turn6"])
    n = len(dialogues)
    if n == 0:
        raise ValueError("measure_rule: no dialogues")
    return {
        "acc_turn4": float(turn4.mean()),
        "acc_turn6": float(turn6.mean()),
        "acc_all": float(np.concatenate([turn4, turn6]).mean()),
        "acc_traj": float((turn4 & turn6).mean()),
        "ties": ties,
        "n_dialogues": n,
    }
