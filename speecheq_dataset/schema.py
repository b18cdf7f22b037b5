"""The `datasets.Features` of one SpeechEQ dialogue row (SPEC §2), and its column documentation.

One row = one dialogue: identity, taxonomy, the scenario's text fields under
their raw names, six turn texts, eight tone instructions and eight audio clips
(the turn-4 and turn-6 test candidates as `..._high` / `..._low`).
"""

from __future__ import annotations

import datasets

from .columns import CLIP_COLUMNS
from .columns import TEXT_COLUMNS
from .columns import TONE_COLUMNS

# Scenario fields of SPEC §2.1 in the raw `scenario` object (v1 and v2), in raw order.
SCENARIO_FIELDS: tuple[str, ...] = (
    "title",
    "context",
    "description",
    "speaker1_name",
    "speaker1_role",
    "speaker1_gender",
    "speaker1_persona",
    "speaker1_voice",
    "speaker2_name",
    "speaker2_role",
    "speaker2_gender",
    "speaker2_persona_1",
    "speaker2_persona_2",
    "speaker2_persona_3",
    "speaker2_persona_high",
    "speaker2_persona_low",
    "speaker2_voice",
    "eq_skill_tested",
)
# Added by generator version 2; None in v1 rows.
V2_SCENARIO_FIELDS: tuple[str, ...] = ("scenario_valence", "target_social_intent")

IDENTITY_COLUMNS: tuple[str, ...] = (
    "id",
    "subscale",
    "subscale_name",
    "composite",
    "composite_name",
    "eq_scale",
    *V2_SCENARIO_FIELDS,
    "generation_version",
    "timestamp",
)

# Column -> one-line meaning; rendered as the card's column table.
COLUMN_DOCS: dict[str, str] = {
    "id": "the generator's `dataset_id` (unique per dialogue)",
    "subscale": "EQ-i 2.0 subscale slug, e.g. `decision_making_impulse_control`",
    "subscale_name": "subscale display name, e.g. `Impulse Control`",
    "composite": "composite slug, e.g. `decision_making`",
    "composite_name": "composite display name, e.g. `Decision Making`",
    "eq_scale": "raw `eq_scale`, `<Composite> - <Subscale>`",
    "scenario_valence": "`Positive`, `Negative` or `Conflict` (v2; null in v1)",
    "target_social_intent": "what a resonant reply achieves (v2; null in v1)",
    "generation_version": "`v1` or `v2` (generator metadata version)",
    "timestamp": "generation timestamp of the raw folder",
    **{f: f"scenario `{f}` (raw name)" for f in SCENARIO_FIELDS},
    **{c: f"text of turn {c[4]} ({'catalyst' if int(c[4]) % 2 else 'test subject'})" for c in TEXT_COLUMNS},
    **{
        c: f"TTS instruction of clip `{c.replace('_tone', '_audio')}`"
        for c in TONE_COLUMNS
    },
    **{
        c: (
            f"turn {c[4]} candidate, {'resonant (high EQ)' if c.endswith('high') else 'dissonant (low EQ)'}; same words as its pair"
            if c[4] in "46"
            else f"turn {c[4]} clip ({'catalyst' if int(c[4]) % 2 else 'test subject'})"
        )
        for c in CLIP_COLUMNS
    },
    "duration_s": "total duration of the eight clips in seconds (decoded)",
}


def _string() -> datasets.Value:
    return datasets.Value("string")


FEATURES = datasets.Features(
    {
        **{name: _string() for name in IDENTITY_COLUMNS},
        **{name: _string() for name in SCENARIO_FIELDS},
        **{name: _string() for name in TEXT_COLUMNS},
        **{name: _string() for name in TONE_COLUMNS},
        **{name: datasets.Audio() for name in CLIP_COLUMNS},
        "duration_s": datasets.Value("float64"),
    }
)
assert set(FEATURES) == set(COLUMN_DOCS), "every column must be documented"
