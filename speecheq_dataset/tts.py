"""Offline speech for the embedded sample: espeak-ng, with each tone instruction turned into prosody.

A tone instruction ("Heavy low trailing pitch, slow and soft") is matched
against TONE_RULES, a table of keyword rules; each rule that matches adds its
offsets to a neutral baseline once, and the sum is clamped to espeak-ng's
ranges. The result drives espeak-ng's pitch (-p), speed in words per minute
(-s), amplitude (-a), word gap (-g) and, via SSML, the pitch range.

The rules follow SPEC §3 (what a delivery sounds like) and deliberately avoid
SPEC §9's shortcut (the resonant clip is always the slower, quieter one): a
resonant reply to *Positive* news is bright, fast and loud; to *Negative*
news heavy, slow and soft; in *Conflict* clipped, firm and falling. So which
clip is slower or louder depends on the scenario, not on the label.

Audio is espeak-ng's own 16-bit PCM WAV (22.05 kHz mono), stored as is (lossless).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from dataclasses import replace
from pathlib import Path
from xml.sax.saxutils import escape

logger = logging.getLogger(__name__)

# Bump when rules, baseline or voices change: the sample cache is keyed by it.
RENDERER_VERSION = "espeak-prosody-1"
ESPEAK = "espeak-ng"


@dataclass(frozen=True)
class Prosody:
    """espeak-ng delivery settings of one clip."""

    pitch: int = 50  # -p, 0..99
    rate: int = 165  # -s, words per minute
    amplitude: int = 100  # -a, 0..200
    word_gap: int = 0  # -g, units of 10 ms
    pitch_range: int = 100  # SSML <prosody range="N%">

    def clamped(self) -> Prosody:
        """The same settings limited to what espeak-ng accepts (and to intelligible speech)."""
        return Prosody(
            pitch=min(95, max(5, self.pitch)),
            rate=min(320, max(100, self.rate)),
            amplitude=min(200, max(40, self.amplitude)),
            word_gap=min(25, max(0, self.word_gap)),
            pitch_range=min(250, max(10, self.pitch_range)),
        )


NEUTRAL = Prosody()


@dataclass(frozen=True)
class ToneRule:
    """Keyword rule: when `pattern` occurs in a tone instruction, add these offsets (once)."""

    name: str
    pattern: str  # regex over the lower-cased instruction; word-start anchored
    pitch: int = 0
    rate: int = 0
    amplitude: int = 0
    word_gap: int = 0
    pitch_range: int = 0


# Ordered by the families of SPEC §3-4 (resonant deliveries first, then the dissonant ones).
TONE_RULES: tuple[ToneRule, ...] = (
    # Positive resonance: bright pitch, laughing, high energy.
    ToneRule("bright", r"bright|beaming|radiant|sparkl", pitch=12, rate=15, amplitude=20, pitch_range=40),
    ToneRule("laughing", r"laugh|giggl|grin|delight|joy|thrill|squeal", pitch=8, rate=15, amplitude=15, pitch_range=30),
    ToneRule("excited", r"excit|high energy|energetic|animated|elat|bursting|bouncing|punching", rate=25, amplitude=20),
    # Negative resonance: heavy, trailing pitch, breathless, slow.
    ToneRule("heavy", r"heavy|weary|somb|grave|defeated|drained|numb", pitch=-10, rate=-25, amplitude=-20, pitch_range=-30),
    ToneRule("trailing", r"trail|fading|sigh", pitch=-4, rate=-10, amplitude=-10, word_gap=2),
    ToneRule("soft", r"soft|quiet|whisper|hushed|murmur", amplitude=-25, rate=-10),
    ToneRule("breathless", r"breath|choked|breaking|cracking|trembl|tearful", rate=-10, amplitude=-10, pitch_range=20),
    ToneRule("slow", r"slow|long pause|unhurried|measured|lingering", rate=-30, word_gap=2),
    # Conflict resonance: staccato, clipped, hard consonants, falling pitch, firm.
    ToneRule("staccato", r"staccato|clipped|crisp|hard consonant|curt", rate=25, word_gap=2, amplitude=15),
    ToneRule("firm", r"firm|steady|level|resolute|grounded|controlled", pitch=-6, amplitude=15, pitch_range=-25),
    ToneRule("falling", r"falling", pitch=-6, pitch_range=-15),
    # Dissonant deliveries.
    ToneRule("snappy", r"snap|sharp|defensive|bark|bitter|irritat|exasperat", pitch=6, rate=35, amplitude=40),
    ToneRule("angry", r"angry|furious|shout|loud|forceful|harsh|demand", pitch=5, rate=15, amplitude=45),
    ToneRule("rushed", r"rush|hurr|impatient|brisk|rapid|fast|quick", rate=50),
    ToneRule("anxious", r"anxious|panick|frantic|shaky|nervous|jitter|desperate", pitch=15, rate=35, pitch_range=40),
    ToneRule("condescending", r"condescend|patroniz|sing-song|drawn-out|lectur|over-enunciat", pitch=8, rate=-30, word_gap=3, pitch_range=60),
    ToneRule("toxic_positivity", r"toxic|chirpy|perky|bubbly|over-the-top", pitch=18, rate=25, amplitude=25, pitch_range=50),
    ToneRule("apathetic", r"apathetic|flat|monotone|bored|listless|indifferent|dull|disengag|drawl|shrug", pitch=-8, rate=-20, amplitude=-30, pitch_range=-70),
    # Context-turn colour.
    ToneRule("warm", r"warm|gentle|tender|sincere", pitch=-2, rate=-10, amplitude=-5),
    ToneRule("hesitant", r"hesitant|halting|unsure|uncertain|guarded|careful|wary|braced", rate=-20, word_gap=3, amplitude=-10),
    ToneRule("tense", r"tense|urgent|pressing", rate=20, amplitude=15, pitch=4),
)
_COMPILED = tuple((rule, re.compile(r"\b(?:" + rule.pattern + r")")) for rule in TONE_RULES)


def _rules_of(tone: str) -> list[ToneRule]:
    text = (tone or "").lower()
    return [rule for rule, regex in _COMPILED if regex.search(text)]


def matched_rules(tone: str) -> list[str]:
    """Names of the rules a tone instruction triggers, in table order."""
    return [rule.name for rule in _rules_of(tone)]


def prosody_for(tone: str, base: Prosody = NEUTRAL) -> Prosody:
    """Prosody of a tone instruction: base plus every matching rule's offsets, clamped."""
    result = base
    for rule in _rules_of(tone):
        result = replace(
            result,
            pitch=result.pitch + rule.pitch,
            rate=result.rate + rule.rate,
            amplitude=result.amplitude + rule.amplitude,
            word_gap=result.word_gap + rule.word_gap,
            pitch_range=result.pitch_range + rule.pitch_range,
        )
    return result.clamped()


# espeak-ng voice variants per speaker slot and gender (two speakers of one gender still differ).
_VOICES = {
    ("speaker1", "female"): "en-us+f2",
    ("speaker1", "male"): "en-us+m3",
    ("speaker2", "female"): "en-us+f4",
    ("speaker2", "male"): "en-us+m7",
}
_VOICE_NAME = re.compile(r"^[a-z]{2,3}(-[a-z0-9]+)*(\+[a-z0-9]+)?$", re.IGNORECASE)


# espeak-ng's base voice per language code (the speaker's variant, +f2 etc., is kept).
_LANGUAGE_VOICES = {"en": "en-us", "zh": "cmn"}


def voice_for(speaker: str, gender: str | None, requested: str | None = None, language: str = "en") -> str:
    """espeak-ng voice of a speaker: `requested` if it is an espeak voice name, else by slot, gender and language (en, zh)."""
    if requested and _VOICE_NAME.match(requested) and "-" in requested:
        return requested
    if language not in _LANGUAGE_VOICES:
        raise ValueError(f"no espeak-ng voice for language {language!r}; known: {', '.join(_LANGUAGE_VOICES)}")
    voice = _VOICES.get((speaker, (gender or "").strip().lower()), "en-us+m3" if speaker == "speaker1" else "en-us+f4")
    return voice.replace("en-us", _LANGUAGE_VOICES[language], 1)


def espeak_available() -> bool:
    """True if the espeak-ng binary is on PATH."""
    return shutil.which(ESPEAK) is not None


def espeak_command(text: str, prosody: Prosody, voice: str, wav_path: Path | str) -> list[str]:
    """The espeak-ng command line that renders `text` with `prosody` into wav_path."""
    ssml = f'<speak><prosody range="{prosody.pitch_range}%">{escape(text)}</prosody></speak>'
    return [
        ESPEAK, "-m", "-v", voice,
        "-p", str(prosody.pitch), "-s", str(prosody.rate), "-a", str(prosody.amplitude), "-g", str(prosody.word_gap),
        "-w", os.fspath(wav_path), ssml,
    ]  # fmt: skip


def synthesize(text: str, tone: str, voice: str) -> bytes:
    """WAV bytes of `text` spoken with the prosody of the tone instruction."""
    return render(text, prosody_for(tone), voice)


def render(text: str, prosody: Prosody, voice: str) -> bytes:
    """WAV bytes of `text` spoken by espeak-ng `voice` with these prosody settings (clamped to espeak's ranges)."""
    if not espeak_available():
        raise RuntimeError(f"{ESPEAK} not found on PATH: install it (Debian: apt-get install espeak-ng)")
    with tempfile.TemporaryDirectory(prefix="speecheq-tts-") as tmp:
        wav = Path(tmp) / "clip.wav"
        command = espeak_command(text, prosody.clamped(), voice, wav)
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        if done.returncode != 0 or not wav.is_file() or wav.stat().st_size <= 44:
            raise RuntimeError(f"{ESPEAK} failed for voice {voice!r}, text {text[:40]!r}: {done.stderr.strip()}")
        return wav.read_bytes()


def synthesize_many(jobs: list[tuple[str, str, str]], max_workers: int | None = None) -> list[bytes]:
    """synthesize(text, tone, voice) for each job, in parallel (espeak runs as separate processes)."""
    workers = max_workers or min(8, (os.cpu_count() or 2) * 2)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: synthesize(*job), jobs))
