"""The EQ-i 2.0 taxonomy of SpeechEQ: 5 composites x 3 subscales (SPEC §1).

This module is the single source of truth for subscale slugs, display names,
composites and scenario valences; every other part of the project imports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VALENCES: tuple[str, ...] = ("Positive", "Negative", "Conflict")


@dataclass(frozen=True)
class Composite:
    """One EQ-i 2.0 composite scale."""

    slug: str
    name: str


@dataclass(frozen=True)
class Subscale:
    """One EQ-i 2.0 subscale, with the composite it belongs to."""

    slug: str  # full slug, e.g. "decision_making_impulse_control"
    short_slug: str  # e.g. "impulse_control"
    name: str  # e.g. "Impulse Control"
    composite: Composite

    @property
    def eq_scale(self) -> str:
        """The raw `eq_scale` string, e.g. "Decision Making - Impulse Control"."""
        return f"{self.composite.name} - {self.name}"


_TABLE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Self-Perception", ("Self-Regard", "Self-Actualization", "Emotional Self-Awareness")),
    ("Self-Expression", ("Emotional Expression", "Assertiveness", "Independence")),
    ("Interpersonal", ("Interpersonal Relationships", "Empathy", "Social Responsibility")),
    ("Decision Making", ("Problem Solving", "Reality Testing", "Impulse Control")),
    ("Stress Management", ("Flexibility", "Stress Tolerance", "Optimism")),
)


def slugify(name: str) -> str:
    """Snake-case slug of a display name: "Self-Perception" -> "self_perception"."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


COMPOSITES: tuple[Composite, ...] = tuple(Composite(slugify(c), c) for c, _ in _TABLE)
SUBSCALES: tuple[Subscale, ...] = tuple(
    Subscale(f"{comp.slug}_{slugify(s)}", slugify(s), s, comp)
    for comp, (_, subs) in zip(COMPOSITES, _TABLE)
    for s in subs
)
SUBSCALE_SLUGS: tuple[str, ...] = tuple(s.slug for s in SUBSCALES)
COMPOSITE_SLUGS: tuple[str, ...] = tuple(c.slug for c in COMPOSITES)

_BY_SLUG = {s.slug: s for s in SUBSCALES}
_BY_EQ_SCALE = {s.eq_scale.lower(): s for s in SUBSCALES}
_COMPOSITE_BY_SLUG = {c.slug: c for c in COMPOSITES}


def subscale(slug: str) -> Subscale:
    """The subscale with this full slug; ValueError naming the slug otherwise."""
    try:
        return _BY_SLUG[slug]
    except KeyError:
        raise ValueError(f"unknown subscale slug {slug!r}; known: {', '.join(SUBSCALE_SLUGS)}") from None


def subscale_from_eq_scale(eq_scale: str) -> Subscale:
    """The subscale named by a raw `eq_scale` string such as "Interpersonal - Empathy"."""
    # Only a spaced dash separates composite and subscale: "Self-Expression" keeps its own dash.
    key = re.sub(r"\s+-\s+", " - ", eq_scale.strip()).lower()
    try:
        return _BY_EQ_SCALE[key]
    except KeyError:
        raise ValueError(f"unknown eq_scale {eq_scale!r}; expected '<Composite> - <Subscale>' of SPEC §1") from None


def composite(slug: str) -> Composite:
    """The composite with this slug; ValueError naming the slug otherwise."""
    try:
        return _COMPOSITE_BY_SLUG[slug]
    except KeyError:
        raise ValueError(f"unknown composite slug {slug!r}; known: {', '.join(COMPOSITE_SLUGS)}") from None


def composite_of(subscale_slug: str) -> str:
    """Composite slug of a full subscale slug."""
    return subscale(subscale_slug).composite.slug


def check_valence(valence: str) -> str:
    """The valence itself if it is one of SPEC §1's three; ValueError otherwise."""
    if valence not in VALENCES:
        raise ValueError(f"unknown scenario valence {valence!r}; expected one of {VALENCES}")
    return valence
