"""Column names of a SpeechEQ dialogue row, and the raw clip order (SPEC §2.1).

The names are a public interface: the Hub viewer, the runner and users rely on them.
"""

from __future__ import annotations

# Raw clip index (01..08 in the generator's audio/ folder) -> audio column.
CLIP_COLUMNS: tuple[str, ...] = (
    "turn1_audio",  # 01: catalyst, turn 1
    "turn2_audio",  # 02: test subject, turn 2
    "turn3_audio",  # 03: catalyst, turn 3 (emotional peak)
    "turn4_audio_high",  # 04: test turn 4, resonant (high EQ)
    "turn4_audio_low",  # 05: test turn 4, dissonant (low EQ)
    "turn5_audio",  # 06: catalyst, turn 5 (sustain)
    "turn6_audio_high",  # 07: test turn 6, resonant
    "turn6_audio_low",  # 08: test turn 6, dissonant
)
# Tone instruction (the TTS prompt) of each clip, same order as CLIP_COLUMNS.
TONE_COLUMNS: tuple[str, ...] = tuple(c.replace("_audio", "_tone") for c in CLIP_COLUMNS)
TEXT_COLUMNS: tuple[str, ...] = tuple(f"turn{n}_text" for n in range(1, 7))
TEST_TURNS: tuple[int, ...] = (4, 6)
CATALYST_TURNS: tuple[int, ...] = (1, 3, 5)


def audio_column(turn: int, level: str | None = None) -> str:
    """Audio column of a turn; test turns 4 and 6 need level "high" or "low"."""
    if turn in TEST_TURNS:
        if level not in ("high", "low"):
            raise ValueError(f"turn {turn} is a test turn: level must be 'high' or 'low', got {level!r}")
        return f"turn{turn}_audio_{level}"
    if turn not in (1, 2, 3, 5):
        raise ValueError(f"no turn {turn} in a SpeechEQ dialogue (turns 1..6)")
    if level is not None:
        raise ValueError(f"turn {turn} has a single clip; got level {level!r}")
    return f"turn{turn}_audio"


def tone_column(turn: int, level: str | None = None) -> str:
    """Tone-instruction column matching audio_column(turn, level)."""
    return audio_column(turn, level).replace("_audio", "_tone")
