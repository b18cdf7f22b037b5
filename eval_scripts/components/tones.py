"""The cascade's `emo_des` variant: valence/arousal/dominance values turned into tone words (`tones_v1`).

The regressor's outputs lie roughly in [0, 1] (0.5 = the middle of its
training corpus). Each dimension is cut into five bands at 0.2, 0.4, 0.6 and
0.8 (a value on a cut goes to the band above); each band has a short phrase,
and a clip's description lists arousal, then valence, then dominance:

| band | arousal | valence | dominance |
|---|---|---|---|
| < 0.2 | very calm, low-energy | very negative | very submissive, hesitant |
| 0.2-0.4 | calm, subdued | negative, displeased | yielding, tentative |
| 0.4-0.6 | moderately animated | emotionally neutral | even, neither yielding nor forceful |
| 0.6-0.8 | energetic, animated | positive, pleased | assertive, confident |
| >= 0.8 | highly aroused, intense | very positive, delighted | very dominant, forceful |

Values outside [0, 1] fall in the outer bands. The table is the whole
mapping; change it only under a new version name (it enters results.json).
"""

from __future__ import annotations

import bisect

TONES_VERSION = "tones_v1"
CUTS: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)
PHRASES: dict[str, tuple[str, ...]] = {
    "arousal": ("very calm, low-energy", "calm, subdued", "moderately animated", "energetic, animated", "highly aroused, intense"),
    "valence": ("very negative", "negative, displeased", "emotionally neutral", "positive, pleased", "very positive, delighted"),
    "dominance": ("very submissive, hesitant", "yielding, tentative", "even, neither yielding nor forceful", "assertive, confident",
                  "very dominant, forceful"),
}
ORDER: tuple[str, ...] = ("arousal", "valence", "dominance")


def band(value: float) -> int:
    """Band index 0..4 of a value (a value on a cut goes to the band above)."""
    return bisect.bisect_right(CUTS, float(value))


def tone_words(vad: dict[str, float]) -> str:
    """The description of one clip, e.g. 'energetic, animated; negative, displeased; assertive, confident'."""
    return "; ".join(PHRASES[d][band(vad[d])] for d in ORDER)
