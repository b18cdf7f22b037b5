"""The EQ-i 2.0 subscale -> composite map the metric groups by (SPEC §1).

The metric is a stand-alone evaluate module and cannot import the dataset
package, so it carries its own copy of the 15 slugs; a test asserts that this
copy equals `speecheq_dataset.taxonomy`.
"""

from __future__ import annotations

# composite slug -> its three subscale slugs (full slug = composite + "_" + suffix)
COMPOSITE_SUBSCALES: dict[str, tuple[str, ...]] = {
    "self_perception": (
        "self_perception_self_regard",
        "self_perception_self_actualization",
        "self_perception_emotional_self_awareness",
    ),
    "self_expression": (
        "self_expression_emotional_expression",
        "self_expression_assertiveness",
        "self_expression_independence",
    ),
    "interpersonal": (
        "interpersonal_interpersonal_relationships",
        "interpersonal_empathy",
        "interpersonal_social_responsibility",
    ),
    "decision_making": (
        "decision_making_problem_solving",
        "decision_making_reality_testing",
        "decision_making_impulse_control",
    ),
    "stress_management": (
        "stress_management_flexibility",
        "stress_management_stress_tolerance",
        "stress_management_optimism",
    ),
}

SUBSCALE_TO_COMPOSITE: dict[str, str] = {
    sub: comp for comp, subs in COMPOSITE_SUBSCALES.items() for sub in subs
}
SUBSCALE_SLUGS: tuple[str, ...] = tuple(SUBSCALE_TO_COMPOSITE)
COMPOSITE_SLUGS: tuple[str, ...] = tuple(COMPOSITE_SUBSCALES)


def composite_of_subscale(slug: str) -> str:
    """Composite slug of a full subscale slug; ValueError naming an unknown slug.

    >>> composite_of_subscale("interpersonal_empathy")
    'interpersonal'
    """
    try:
        return SUBSCALE_TO_COMPOSITE[slug]
    except (KeyError, TypeError):
        raise ValueError(f"unknown subscale {slug!r}; expected one of the 15 slugs of SPEC §1") from None
