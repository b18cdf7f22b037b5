"""The generation plan: balanced over subscale x valence x scenario type, seeded, with balanced delivery targets."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders.generation.matrix import SCENARIO_TYPES
from builders.generation.matrix import TARGET_ATTRIBUTES
from builders.generation.matrix import item_from_dict
from builders.generation.matrix import plan_items
from builders.generation.matrix import replacement_for
from speecheq_dataset.taxonomy import SUBSCALE_SLUGS
from speecheq_dataset.taxonomy import VALENCES


@pytest.mark.parametrize("per_cell", [1, 2, 3])
def test_every_cell_gets_per_cell_items_and_scenario_types_are_balanced(per_cell):
    items = plan_items(per_cell, seed=7)
    assert len(items) == 45 * per_cell and len({i.item_id for i in items}) == len(items)
    assert set(Counter(i.cell for i in items).values()) == {per_cell}
    assert set(i.cell for i in items) == {(s, v) for s in SUBSCALE_SLUGS for v in VALENCES}
    overall = Counter(i.scenario_type for i in items)
    assert set(overall) <= set(SCENARIO_TYPES) and max(overall.values()) - min(overall.values()) <= len(VALENCES)
    for valence in VALENCES:
        counts = Counter(i.scenario_type for i in items if i.valence == valence)
        assert max(counts.values()) - min(counts.values()) <= 1


def test_the_plan_is_seeded():
    assert plan_items(1, 3) == plan_items(1, 3)
    assert [i.targets for i in plan_items(1, 3)] == [i.targets for i in plan_items(1, 3)]
    assert [(i.scenario_type, i.seed) for i in plan_items(1, 3)] != [(i.scenario_type, i.seed) for i in plan_items(1, 4)]


@given(per_cell=st.integers(min_value=1, max_value=4), seed=st.integers(min_value=0, max_value=10_000))
def test_delivery_targets_are_balanced_on_pairs_and_on_trajectories(per_cell, seed):
    items = plan_items(per_cell, seed)
    for attribute in TARGET_ATTRIBUTES:
        signs = [i.targets[turn][attribute] for i in items for turn in (4, 6)]
        # each valence x composite group deals ++, --, +-, -+ in complementary blocks: within 2 per group of even split
        assert abs(sum(signs)) <= 2 * 15
        agree = sum(i.targets[4][attribute] == i.targets[6][attribute] for i in items)
        assert abs(agree - len(items) / 2) <= 15
    for group in {i.group for i in items}:
        members = [i for i in items if i.group == group]
        for attribute in TARGET_ATTRIBUTES:
            assert abs(sum(i.targets[t][attribute] for i in members for t in (4, 6))) <= 2


def test_a_replacement_keeps_cell_type_and_targets_and_round_trips():
    item = plan_items(1, 0)[5]
    new = replacement_for(item, 1, 0)
    assert (new.cell, new.scenario_type, new.targets, new.replicate) == (item.cell, item.scenario_type, item.targets, 1)
    assert new.item_id != item.item_id and new.seed != item.seed
    assert item_from_dict(new.as_dict()) == new and item_from_dict(new.as_dict()).targets == new.targets


def test_unknown_subscales_fail_by_name():
    with pytest.raises(ValueError, match="unknown subscale slug 'empathy'"):
        plan_items(1, 0, subscales=("empathy",))
