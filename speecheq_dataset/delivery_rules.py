"""Single-feature delivery rules (SPEC §9): pick one of two same-text clips by one acoustic feature alone.

One table for both users: the `prosody` shortcut baseline of the runner answers
with a rule, and the builders' shortcut audit measures how often each rule picks
the resonant clip. Features come from `speecheq_dataset.acoustics`:
- duration_s (silence-trimmed): slower / faster;
- rms_db: louder / quieter;
- pitch_hz (log-mean F0 of voiced frames): higher_pitch / lower_pitch;
- pitch_range_st (10th-90th percentile of voiced F0, semitones): wider / narrower_pitch_range;
- catalyst_distance (delivery distance to the catalyst's turn just before the
  test turn, each gap in units of its contrast_v1 threshold): farthest / closest_to_catalyst.
"""

from __future__ import annotations

import math

from speecheq_dataset.acoustics import ClipFeatures
from speecheq_dataset.acoustics import delivery_distance

CATALYST_FEATURE = "catalyst_distance"
# feature -> (the rule that picks the clip with the larger value, the rule that picks the smaller)
RULES_BY_FEATURE: dict[str, tuple[str, str]] = {
    "duration_s": ("slower", "faster"),
    "rms_db": ("louder", "quieter"),
    "pitch_hz": ("higher_pitch", "lower_pitch"),
    "pitch_range_st": ("wider_pitch_range", "narrower_pitch_range"),
    CATALYST_FEATURE: ("farthest_from_catalyst", "closest_to_catalyst"),
}
# rule -> (feature, +1: it picks the larger value / -1: the smaller)
RULES: dict[str, tuple[str, int]] = {
    rule: (feature, sign) for feature, pair in RULES_BY_FEATURE.items() for rule, sign in zip(pair, (+1, -1))
}


def check_rule(rule: str) -> str:
    """`rule` if it is known, else a ValueError listing the known ones."""
    if rule not in RULES:
        raise ValueError(f"unknown delivery rule {rule!r}; known rules: {', '.join(RULES)}")
    return rule


def uses_catalyst(rule: str) -> bool:
    """Whether the rule reads the catalyst's turn before the test turn as well as the two options."""
    return RULES[check_rule(rule)][0] == CATALYST_FEATURE


def feature_value(clip: ClipFeatures, feature: str, catalyst: ClipFeatures | None = None) -> float:
    """A clip's value of one rule feature (NaN when it cannot be measured, e.g. unvoiced or no catalyst turn)."""
    if feature == CATALYST_FEATURE:
        return delivery_distance(clip, catalyst) if catalyst is not None else float("nan")
    return float(getattr(clip, feature))


def first_larger(first: ClipFeatures, second: ClipFeatures, feature: str, catalyst: ClipFeatures | None = None) -> float:
    """1 if the first clip has the larger value, 0 if the smaller, 0.5 when undecidable (equal or unmeasurable)."""
    a, b = feature_value(first, feature, catalyst), feature_value(second, feature, catalyst)
    if not (math.isfinite(a) and math.isfinite(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0):
        return 0.5
    return 1.0 if a > b else 0.0


def picks_first(rule: str, first: ClipFeatures, second: ClipFeatures, catalyst: ClipFeatures | None = None) -> float:
    """1 if `rule` picks the first clip, 0 if the second, 0.5 when it cannot decide."""
    feature, sign = RULES[check_rule(rule)]
    larger = first_larger(first, second, feature, catalyst)
    return larger if sign > 0 else 1.0 - larger
