"""The generation plan: a balanced, seeded matrix of subscale x valence x scenario type, with delivery targets.

Every subscale x valence cell gets `per_cell` items. Scenario types are dealt
round-robin in a seeded order, so each type occurs equally often (within one)
overall and within each valence. Each test pair (turns 4 and 6) gets a
delivery target per attribute (duration, loudness, pitch, pitch range): is the
resonant clip the larger one? Targets are balanced within each valence x
composite group (half larger, half smaller, in seeded order), so no delivery
attribute can carry the label (SPEC §9); with one dialogue per cell, balancing
within a cell would force turns 4 and 6 to be opposite, a pattern of its own,
so the two turns of a dialogue get each of ++, --, +-, -+ equally often.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from dataclasses import dataclass
from dataclasses import field

from speecheq_dataset.taxonomy import SUBSCALES
from speecheq_dataset.taxonomy import VALENCES
from speecheq_dataset.taxonomy import subscale as subscale_by_slug

SCENARIO_TYPES: tuple[str, ...] = ("workplace", "medical", "educational", "family", "friends", "public_places")
TARGET_ATTRIBUTES: tuple[str, ...] = ("duration", "loudness", "pitch", "pitch_range")
TEST_TURNS: tuple[int, ...] = (4, 6)


def stable_seed(*parts) -> int:
    """A 32-bit seed from any values (stable across runs and Python versions, unlike hash())."""
    digest = hashlib.sha256("\0".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:4], "big")


@dataclass(frozen=True)
class Item:
    """One dialogue to generate: its cell, scenario type, seed and delivery targets."""

    item_id: str
    subscale: str
    valence: str
    scenario_type: str
    replicate: int
    seed: int
    # turn -> attribute -> +1 (resonant clip larger) or -1 (smaller)
    targets: dict[int, dict[str, int]] = field(default_factory=dict, compare=False)

    @property
    def cell(self) -> tuple[str, str]:
        return (self.subscale, self.valence)

    @property
    def group(self) -> tuple[str, str]:
        """The valence x composite group within which delivery targets are balanced."""
        return (self.valence, subscale_by_slug(self.subscale).composite.slug)

    def dataset_id(self, run_seed: int) -> str:
        """The raw folder name / `dataset_id` of this item's dialogue."""
        return f"gen{run_seed}_{hashlib.sha256(self.item_id.encode()).hexdigest()[:12]}"

    def as_dict(self) -> dict:
        return {"item_id": self.item_id, "subscale": self.subscale, "valence": self.valence, "scenario_type": self.scenario_type,
                "replicate": self.replicate, "seed": self.seed,
                "targets": {str(turn): dict(t) for turn, t in self.targets.items()}}


def item_id_for(subscale: str, valence: str, replicate: int) -> str:
    return f"{subscale}.{valence.lower()}.{replicate:03d}"


def plan_items(
    per_cell: int,
    seed: int,
    *,
    scenario_types: tuple[str, ...] = SCENARIO_TYPES,
    subscales: tuple[str, ...] | None = None,
    valences: tuple[str, ...] = VALENCES,
    first_replicate: int = 0,
) -> list[Item]:
    """`per_cell` items for every subscale x valence cell, replicates first_replicate.., balanced and seeded."""
    if per_cell < 0:
        raise ValueError(f"per_cell must be >= 0, got {per_cell}")
    if not scenario_types:
        raise ValueError("at least one scenario type is needed")
    subscales = tuple(subscales) if subscales else tuple(s.slug for s in SUBSCALES)
    for slug in subscales:
        subscale_by_slug(slug)  # unknown slugs fail here, by name
    rng = random.Random(stable_seed("plan", seed, first_replicate))
    items: list[Item] = []
    for valence in valences:
        order = list(subscales)
        rng.shuffle(order)
        offset = rng.randrange(len(scenario_types))
        k = 0
        for replicate in range(first_replicate, first_replicate + per_cell):
            for slug in order:
                kind = scenario_types[(offset + k) % len(scenario_types)]
                k += 1
                item_id = item_id_for(slug, valence, replicate)
                items.append(Item(item_id, slug, valence, kind, replicate, stable_seed("item", seed, item_id)))
    return assign_targets(items, seed)


def assign_targets(items: list[Item], seed: int) -> list[Item]:
    """The items with balanced delivery targets per valence x composite group and attribute.

    Each dialogue gets one of the four (turn 4, turn 6) patterns ++, --, +-, -+,
    dealt in complementary blocks ({++, --} and {+-, -+}, seeded order), so that
    half the pairs have the resonant clip larger and the two turns agree as
    often as chance: no rule gains on pairs or on trajectories.
    """
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, item in enumerate(items):
        groups[item.group].append(index)
    targets: list[dict[int, dict[str, int]]] = [{turn: {} for turn in TEST_TURNS} for _ in items]
    for group, members in sorted(groups.items()):
        for attribute in TARGET_ATTRIBUTES:
            rng = random.Random(stable_seed("targets", seed, *group, attribute, items[members[0]].replicate))
            order = list(members)
            rng.shuffle(order)
            blocks = [[(+1, +1), (-1, -1)], [(+1, -1), (-1, +1)]]
            rng.shuffle(blocks)
            for block in blocks:
                rng.shuffle(block)
            patterns = [pattern for block in blocks for pattern in block]
            for k, index in enumerate(order):
                for turn, sign in zip(TEST_TURNS, patterns[k % len(patterns)]):
                    targets[index][turn][attribute] = sign
    return [Item(i.item_id, i.subscale, i.valence, i.scenario_type, i.replicate, i.seed, t) for i, t in zip(items, targets)]


def replacement_for(item: Item, replicate: int, seed: int) -> Item:
    """A new item that takes a rejected item's place: same cell, scenario type and targets, a new replicate and seed.

    Inheriting the targets keeps the plan's balance exact however many items are rejected.
    """
    item_id = item_id_for(item.subscale, item.valence, replicate)
    return Item(item_id, item.subscale, item.valence, item.scenario_type, replicate, stable_seed("item", seed, item_id),
                {turn: dict(t) for turn, t in item.targets.items()})


def item_from_dict(data: dict) -> Item:
    """The inverse of Item.as_dict."""
    targets = {int(turn): {k: int(v) for k, v in t.items()} for turn, t in data.get("targets", {}).items()}
    return Item(data["item_id"], data["subscale"], data["valence"], data["scenario_type"], int(data["replicate"]),
                int(data["seed"]), targets)
