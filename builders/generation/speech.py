"""The speech stage: render every line, then check and steer each test pair (SPEC §4, §9).

Context turns (1, 2, 3, 5) are rendered once. Each test pair (turns 4 and 6)
is rendered, measured and scored with contrast_v1; when the pair scores below
the pass mark, or misses the item's balance targets for the attributes the
engine can steer at synthesis time (duration through its rate, mean pitch
through its pitch parameter), it is rendered again with adjusted controls, up
to `max_syntheses` renderings in all (the first plus three regenerations).
Every rendering is kept as a candidate for the selection step; a turn with no
candidate that passes the contrast check rejects the dialogue, with its best
score in the reason. Loudness is left to a plain gain at selection time.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

from speecheq_dataset.acoustics import CONTRAST_V1
from speecheq_dataset.acoustics import ClipFeatures
from speecheq_dataset.acoustics import ContrastConstants
from speecheq_dataset.acoustics import contrast_score
from speecheq_dataset.fileio import write_bytes_atomic
from speecheq_dataset.http_api import ApiCallError
from speecheq_dataset.http_api import map_in_order

from ..features import FeatureCache
from ..features import clip_hash
from .matrix import Item
from .matrix import stable_seed
from .stages import UPSTREAM
from .stages import StageStats
from .stages import tally
from .store import FAILED
from .store import FINISHED
from .store import OK
from .store import REJECTED
from .store import StageStore
from .tts_backends import RATE_LIMITS
from .tts_backends import Controls
from .tts_backends import semitones_to_pitch_units

logger = logging.getLogger(__name__)

DURATION_MARGIN = 0.04  # |ln duration ratio| a steered pair should clear (~4 %)
PITCH_MARGIN_ST = 0.5
WIDEN_RATE = 0.08  # extra ln rate apart per regeneration for a pair below the pass mark
WIDEN_PITCH_ST = 1.0
CONTEXT_TURNS = (1, 2, 3, 5)


@dataclass(frozen=True)
class SpeechConfig:
    max_syntheses: int = 4
    constants: ContrastConstants = CONTRAST_V1


def _clip_record(name: str, speech, features: ClipFeatures, controls: Controls, audio_dir: Path, work_dir: Path) -> dict:
    path = audio_dir / f"{name}.{speech.extension}"
    write_bytes_atomic(path, speech.data)
    return {"file": path.relative_to(work_dir).as_posix(), "sha256": clip_hash(speech.data), "features": features.as_dict(),
            "controls": controls.as_dict()}


def next_controls(high: ClipFeatures, low: ClipFeatures, controls: tuple[Controls, Controls], targets: dict[str, int],
                  passed: bool, tts) -> tuple[Controls, Controls] | None:
    """Controls for the next rendering of a pair, or None when another rendering cannot help.

    A pair that passes is rendered again only to meet a steerable target it
    misses (by the margin); a pair below the pass mark is pushed further apart
    along its targets. Duration goes as 1/rate, so the clip that should be
    longer is slowed and the other sped up, half the correction each.
    """
    rate = [math.log(controls[0].rate), math.log(controls[1].rate)]
    pitch = [controls[0].pitch, controls[1].pitch]
    changed = False
    if "rate" in tts.controls and targets.get("duration"):
        sign = targets["duration"]
        gap = sign * math.log(max(high.duration_s, 1e-3) / max(low.duration_s, 1e-3))
        push = max(0.0, DURATION_MARGIN - gap) + (0.0 if passed else WIDEN_RATE)
        if push > 0:
            rate[0] -= sign * push / 2
            rate[1] += sign * push / 2
            changed = True
    if "pitch" in tts.controls and targets.get("pitch"):
        sign = targets["pitch"]
        gap = sign * (high.pitch_semitones - low.pitch_semitones)
        if math.isfinite(gap):
            push = max(0.0, PITCH_MARGIN_ST - gap) + (0.0 if passed else WIDEN_PITCH_ST)
            if push > 0:
                pitch[0] += semitones_to_pitch_units(tts, sign * push / 2)
                pitch[1] -= semitones_to_pitch_units(tts, sign * push / 2)
                changed = True
    if not changed:
        # Nothing to steer: a fresh rendering helps only an engine that does not repeat itself.
        return None if passed or getattr(tts, "deterministic", True) else controls
    low_rate, high_rate = RATE_LIMITS
    clamped = [min(high_rate, max(low_rate, math.exp(r))) for r in rate]
    new = (Controls(clamped[0], pitch[0]), Controls(clamped[1], pitch[1]))
    return None if new == controls else new


def render_item(item: Item, scenario: dict, dialogue: dict, tones: dict, verdict: dict, tts, cache: FeatureCache, work_dir: Path,
                config: SpeechConfig) -> dict:
    """Render one dialogue's clips and test-pair candidates; raises RejectedSpeech when a test turn cannot pass."""
    audio_dir = work_dir / "audio" / item.item_id
    voices = tts.voices(scenario, stable_seed("voices", item.seed))
    lines = {t["sentence_number"]: t["text"] for t in dialogue["conversation"]}
    speaker_voice = {n: voices[0] if n % 2 else voices[1] for n in range(1, 7)}

    def render(name: str, turn: int, tone: str, controls: Controls) -> dict:
        speech = tts.synthesize(lines[turn], tone, speaker_voice[turn], controls)
        features = cache.get(speech.data, name=f"{item.item_id}/{name}")
        return _clip_record(name, speech, features, controls, audio_dir, work_dir)

    clips = {}
    for turn in CONTEXT_TURNS:
        clips[str(turn)] = {**render(f"t{turn}", turn, tones["context"][f"turn{turn}"], Controls()), "tone": tones["context"][f"turn{turn}"]}
    pairs, problems = {}, []
    for turn in (4, 6):
        high_tone, low_tone = verdict[f"turn{turn}"]["high"], verdict[f"turn{turn}"]["low"]
        targets = item.targets.get(turn, {})
        controls: tuple[Controls, Controls] | None = (Controls(), Controls())
        candidates = []
        for attempt in range(1, config.max_syntheses + 1):
            high = render(f"t{turn}_high_{attempt}", turn, high_tone, controls[0])
            low = render(f"t{turn}_low_{attempt}", turn, low_tone, controls[1])
            fh, fl = ClipFeatures.from_dict(high["features"]), ClipFeatures.from_dict(low["features"])
            result = contrast_score(fh, fl, config.constants)
            candidates.append({"high": high, "low": low, "contrast": round(result.score, 4), "passed": result.passed})
            controls = next_controls(fh, fl, controls, targets, result.passed, tts)
            if controls is None:
                break
        pairs[str(turn)] = {"high_tone": high_tone, "low_tone": low_tone, "low_type": verdict[f"turn{turn}"].get("low_type"),
                            "candidates": candidates}
        if not any(c["passed"] for c in candidates):
            best = max(c["contrast"] for c in candidates)
            problems.append(f"turn {turn}: {config.constants.version} below {config.constants.pass_score:g} after "
                            f"{len(candidates)} syntheses (best {best:.2f}/{config.constants.max_score:g})")
    output = {"voices": list(voices), "clips": clips, "pairs": pairs, "tts": tts.describe()}
    if problems:
        raise RejectedSpeech(problems, output)
    return output


class RejectedSpeech(Exception):
    def __init__(self, reasons: list[str], output: dict):
        super().__init__("; ".join(reasons))
        self.reasons, self.output = reasons, output


def run_speech_stage(items: list[Item], work_dir: Path, tts, cache: FeatureCache, *, config: SpeechConfig = SpeechConfig(),
                     progress: bool = True) -> StageStats:
    """The speech stage over the items (resumable like the text stages)."""
    work_dir = Path(work_dir)
    store = StageStore(work_dir, "speech")
    done = store.load()
    upstream = [StageStore(work_dir, name).load() for name in UPSTREAM["speech"]]
    todo = [item for item in items if done.get(item.item_id, {}).get("status") not in FINISHED
            and all(records.get(item.item_id, {}).get("status") == OK for records in upstream)]
    stats = StageStats("speech", skipped=sum(done.get(i.item_id, {}).get("status") in FINISHED for i in items))

    def process(item: Item) -> str:
        record = {"item_id": item.item_id, "stage": "speech", "item": item.as_dict(), "time": time.time()}
        inputs = [records[item.item_id]["output"] for records in upstream]
        try:
            record.update(status=OK, output=render_item(item, *inputs, tts, cache, work_dir, config))
        except RejectedSpeech as exc:
            record.update(status=REJECTED, reasons=exc.reasons, output=exc.output)
        except (RuntimeError, OSError, ApiCallError, ValueError) as exc:  # engine or API failure: retried on the next run
            logger.warning("speech %s: %s", item.item_id, exc)
            record.update(status=FAILED, reasons=[f"{type(exc).__name__}: {exc}"])
        store.append(record)
        return record["status"]

    statuses = map_in_order(process, todo, getattr(tts, "concurrency", 1), progress="speech  " if progress else None)
    # "retried": a test pair needed more than one rendering
    return tally(stats, todo, statuses, store.load(),
                 lambda record: any(len(p["candidates"]) > 1 for p in (record.get("output") or {}).get("pairs", {}).values()))
