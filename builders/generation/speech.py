"""The speech stage: render every line, then check and steer each test pair (SPEC §4, §9).

Context turns (1, 2, 3, 5) are rendered once. Each test pair (turns 4 and 6)
is rendered, measured and scored with contrast_v1; when the pair scores below
the pass mark, or misses the item's balance targets for the attributes the
engine can steer at synthesis time (duration through its rate, mean pitch
through its pitch parameter, pitch range through its range parameter), it is
rendered again with adjusted controls, up
to `max_syntheses` renderings in all (the first plus three regenerations).
Every rendering is kept as a candidate for the selection step; a turn with no
candidate that passes the contrast check rejects the dialogue, with its best
score in the reason. Loudness is left to a plain gain at selection time.
When the selected set still exceeds the audit bound, `add_counter_renderings`
renders pairs on the majority side of the worst feature once more, steered
the other way, and the selection runs again.
"""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

from speecheq_dataset.acoustics import CONTRAST_V1
from speecheq_dataset.acoustics import ClipFeatures
from speecheq_dataset.acoustics import ContrastConstants
from speecheq_dataset.acoustics import contrast_score
from speecheq_dataset.files import write_bytes_atomic
from speecheq_dataset.http_api import ApiCallError
from speecheq_dataset.http_api import map_in_order
from speecheq_dataset.tts_backends import RANGE_LIMITS
from speecheq_dataset.tts_backends import RATE_LIMITS
from speecheq_dataset.tts_backends import Controls
from speecheq_dataset.tts_backends import semitones_to_pitch_units

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

logger = logging.getLogger(__name__)

DURATION_MARGIN = 0.04  # |ln duration ratio| a steered pair should clear (~4 %)
PITCH_MARGIN_ST = 0.5
RANGE_MARGIN = 0.08  # |ln pitch-range ratio|
WIDEN_RATE = 0.08  # extra ln rate apart per regeneration for a pair below the pass mark
WIDEN_PITCH_ST = 1.0
WIDEN_RANGE = 0.15
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
    along its targets. Each correction is split between the two clips (half
    each): rate for duration (which goes as 1/rate), the pitch parameter for
    mean pitch, the range factor for pitch range.
    """
    log_values = {"rate": [math.log(c.rate) for c in controls], "range": [math.log(c.range) for c in controls]}
    pitch = [controls[0].pitch, controls[1].pitch]
    changed = False
    if "rate" in tts.controls and targets.get("duration"):
        sign = targets["duration"]
        gap = sign * math.log(max(high.duration_s, 1e-3) / max(low.duration_s, 1e-3))
        push = max(0.0, DURATION_MARGIN - gap) + (0.0 if passed else WIDEN_RATE)
        if push > 0:  # duration goes as 1/rate
            log_values["rate"][0] -= sign * push / 2
            log_values["rate"][1] += sign * push / 2
            changed = True
    if "range" in tts.controls and targets.get("pitch_range"):
        sign = targets["pitch_range"]
        if high.pitch_range_st > 0 and low.pitch_range_st > 0:
            gap = sign * math.log(high.pitch_range_st / low.pitch_range_st)
            push = max(0.0, RANGE_MARGIN - gap) + (0.0 if passed else WIDEN_RANGE)
            if push > 0:
                log_values["range"][0] += sign * push / 2
                log_values["range"][1] -= sign * push / 2
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

    def limited(value: float, limits: tuple[float, float]) -> float:
        return min(limits[1], max(limits[0], math.exp(value)))

    new = tuple(Controls(limited(log_values["rate"][i], RATE_LIMITS), pitch[i], 0.0, limited(log_values["range"][i], RANGE_LIMITS))
                for i in (0, 1))
    return None if new == controls else new


class Renderer:
    """Renders one dialogue's lines with fixed voices, measuring (cached) and storing every clip under the work folder."""

    def __init__(self, item: Item, dialogue: dict, voices: tuple[str, str], tts, cache: FeatureCache, work_dir: Path):
        self.item, self.tts, self.cache, self.work_dir = item, tts, cache, work_dir
        self.audio_dir = work_dir / "audio" / item.item_id
        self.lines = {t["sentence_number"]: t["text"] for t in dialogue["conversation"]}
        self.voice = {n: voices[0] if n % 2 else voices[1] for n in range(1, 7)}

    def clip(self, name: str, turn: int, tone: str, controls: Controls) -> dict:
        speech = self.tts.synthesize(self.lines[turn], tone, self.voice[turn], controls)
        features = self.cache.get(speech.data, name=f"{self.item.item_id}/{name}")
        return _clip_record(name, speech, features, controls, self.audio_dir, self.work_dir)

    def pair(self, turn: int, tones: tuple[str, str], controls: tuple[Controls, Controls], tag: str,
             constants: ContrastConstants) -> tuple[dict, ClipFeatures, ClipFeatures]:
        """One candidate rendering of a test pair: (record, resonant features, dissonant features)."""
        high = self.clip(f"t{turn}_high_{tag}", turn, tones[0], controls[0])
        low = self.clip(f"t{turn}_low_{tag}", turn, tones[1], controls[1])
        fh, fl = ClipFeatures.from_dict(high["features"]), ClipFeatures.from_dict(low["features"])
        result = contrast_score(fh, fl, constants)
        return {"high": high, "low": low, "contrast": round(result.score, 4), "passed": result.passed}, fh, fl


def render_item(item: Item, scenario: dict, dialogue: dict, tones: dict, verdict: dict, tts, cache: FeatureCache, work_dir: Path,
                config: SpeechConfig) -> dict:
    """Render one dialogue's clips and test-pair candidates; raises RejectedSpeech when a test turn cannot pass."""
    voices = tts.voices(scenario, stable_seed("voices", item.seed))
    renderer = Renderer(item, dialogue, voices, tts, cache, work_dir)
    clips = {}
    for turn in CONTEXT_TURNS:
        tone = tones["context"][f"turn{turn}"]
        clips[str(turn)] = {**renderer.clip(f"t{turn}", turn, tone, Controls()), "tone": tone}
    pairs, problems = {}, []
    for turn in (4, 6):
        pair_tones = (verdict[f"turn{turn}"]["high"], verdict[f"turn{turn}"]["low"])
        controls: tuple[Controls, Controls] | None = (Controls(), Controls())
        candidates = []
        for attempt in range(1, config.max_syntheses + 1):
            candidate, fh, fl = renderer.pair(turn, pair_tones, controls, str(attempt), config.constants)
            candidates.append(candidate)
            controls = next_controls(fh, fl, controls, item.targets.get(turn, {}), candidate["passed"], tts)
            if controls is None:
                break
        pairs[str(turn)] = {"high_tone": pair_tones[0], "low_tone": pair_tones[1], "low_type": verdict[f"turn{turn}"].get("low_type"),
                            "candidates": candidates}
        if not any(c["passed"] for c in candidates):
            best = max(c["contrast"] for c in candidates)
            problems.append(f"turn {turn}: {config.constants.version} below {config.constants.pass_score:g} after "
                            f"{len(candidates)} syntheses (best {best:.2f}/{config.constants.max_score:g})")
    output = {"voices": list(voices), "clips": clips, "pairs": pairs, "tts": tts.describe()}
    if problems:
        raise RejectedSpeech(problems, output)
    return output


# audit feature -> the steerable target attribute behind it
STEERABLE = {"duration_s": ("duration", "rate"), "pitch_hz": ("pitch", "pitch"), "pitch_range_st": ("pitch_range", "range")}


def add_counter_renderings(work_dir: Path, items: dict[str, Item], pair_sides: dict[tuple[str, int], float], feature: str, tts,
                           cache: FeatureCache, *, seed: int, config: SpeechConfig = SpeechConfig()) -> int:
    """One more rendering, steered the other way, for enough pairs on the majority side of `feature`; returns how many.

    `pair_sides` maps (item_id, turn) to 1.0 when the selected resonant clip is the larger on `feature`
    (0.0 smaller, 0.5 undecided). The new candidates join the speech records, so the next selection can flip them.
    """
    if feature not in STEERABLE or STEERABLE[feature][1] not in tts.controls or not pair_sides:
        return 0
    attribute = STEERABLE[feature][0]
    share = sum(pair_sides.values()) / len(pair_sides)
    majority = 1.0 if share > 0.5 else 0.0
    needed = math.ceil(abs(share - 0.5) * len(pair_sides)) + 1
    keys = sorted(k for k, side in pair_sides.items() if side == majority)
    random.Random(stable_seed("counter", seed, feature)).shuffle(keys)
    store = StageStore(work_dir, "speech")
    records = store.load()
    dialogues = {item_id: r["output"] for item_id, r in StageStore(work_dir, "dialogue").load().items() if r.get("status") == OK}
    done = 0
    for item_id, turn in keys[: 2 * needed]:  # some renderings will not flip: try twice as many as needed
        record = records[item_id]
        output = record["output"]
        pair = output["pairs"][str(turn)]
        last = pair["candidates"][-1]
        fh, fl = ClipFeatures.from_dict(last["high"]["features"]), ClipFeatures.from_dict(last["low"]["features"])
        controls = (Controls.from_dict(last["high"]["controls"]), Controls.from_dict(last["low"]["controls"]))
        flipped = next_controls(fh, fl, controls, {attribute: -1 if majority else +1}, True, tts)
        if flipped is None:
            continue
        renderer = Renderer(items[item_id], dialogues[item_id], tuple(output["voices"]), tts, cache, work_dir)
        candidate, _, _ = renderer.pair(turn, (pair["high_tone"], pair["low_tone"]), flipped, f"c{len(pair['candidates']) + 1}",
                                        config.constants)
        pair["candidates"].append(candidate)
        store.append({**record, "time": record["time"]})  # the same record, one candidate more (the last record wins)
        done += 1
    return done


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
