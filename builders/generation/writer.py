"""Write selected dialogues in the raw layout of SPEC §2.1: `<subscale_slug>/<dataset_id>/metadata.json` + audio/01..08.

The folder is assembled beside its destination and renamed into place, so a
crash never leaves half a dialogue; the dataset builder reads the result
unchanged (`speecheq dataset build`).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from speecheq_dataset.raw import METADATA_FILE
from speecheq_dataset.taxonomy import subscale as subscale_by_slug
from speecheq_dataset.tts_backends import Speech
from speecheq_dataset.tts_backends import apply_gain

from .balance import Choice
from .matrix import Item

GENERATOR = "speecheq-generate/1"
SCENARIO_ORDER = (
    "title", "context", "description", "scenario_valence",
    "speaker1_name", "speaker1_role", "speaker1_gender", "speaker1_persona", "speaker1_voice",
    "speaker2_name", "speaker2_role", "speaker2_gender", "speaker2_persona_1", "speaker2_persona_2", "speaker2_persona_3",
    "speaker2_persona_high", "speaker2_persona_low", "speaker2_voice", "eq_skill_tested", "target_social_intent",
)  # fmt: skip


def _speech(work_dir: Path, clip: dict) -> Speech:
    path = work_dir / clip["file"]
    return Speech(path.read_bytes(), path.suffix.lstrip("."))


def assemble(item: Item, dataset_id: str, records: dict, choices: dict[int, Choice], work_dir: Path, meta: dict) -> tuple[dict, list[tuple[str, Speech]]]:
    """(metadata.json content, [(clip stem, audio)]) of one selected dialogue."""
    scenario, dialogue, speech = records["scenario"], records["dialogue"], records["speech"]
    lines = {t["sentence_number"]: t["text"] for t in dialogue["conversation"]}
    failures = scenario.get("speaker2_failure_types", [])
    low_type = speech["pairs"]["4"].get("low_type")
    persona_low = scenario["speaker2_persona_3"] if failures[1:2] == [low_type] else scenario["speaker2_persona_2"]
    full = {**scenario, "speaker1_voice": speech["voices"][0], "speaker2_voice": speech["voices"][1],
            "speaker2_persona_high": scenario["speaker2_persona_1"], "speaker2_persona_low": persona_low}
    metadata_scenario = {key: full[key] for key in SCENARIO_ORDER if key in full}
    clips: list[tuple[str, Speech, int, str, str, dict]] = []  # stem, audio, turn, level, tone, synthesis
    for stem, turn in (("01", 1), ("02", 2)):
        clip = speech["clips"][str(turn)]
        clips.append((stem, _speech(work_dir, clip), turn, "high", clip["tone"], {"controls": clip["controls"], "gain_db": 0.0}))
    for turn, (cat_stem, high_stem, low_stem) in ((4, ("03", "04", "05")), (6, ("06", "07", "08"))):
        choice = choices[turn]
        catalyst = speech["clips"][str(turn - 1)]
        candidate = speech["pairs"][str(turn)]["candidates"][choice.candidate]
        pair = speech["pairs"][str(turn)]
        clips.append((cat_stem, apply_gain(_speech(work_dir, catalyst), choice.gain_catalyst), turn - 1, "high", catalyst["tone"],
                      {"controls": catalyst["controls"], "gain_db": choice.gain_catalyst}))
        clips.append((high_stem, apply_gain(_speech(work_dir, candidate["high"]), choice.gain_high), turn, "high", pair["high_tone"],
                      {"controls": candidate["high"]["controls"], "gain_db": choice.gain_high, "contrast": candidate["contrast"]}))
        clips.append((low_stem, apply_gain(_speech(work_dir, candidate["low"]), choice.gain_low), turn, "low", pair["low_tone"],
                      {"controls": candidate["low"]["controls"], "gain_db": choice.gain_low, "contrast": candidate["contrast"]}))
    clips.sort(key=lambda c: c[0])
    audio_files = [{"sentence_number": turn, "speaker": "speaker1" if turn % 2 else "speaker2", "text": lines[turn], "eq_level": level,
                    "audio_path": f"audio/{stem}.{audio.extension}", "tone_description": tone}
                   for stem, audio, turn, level, tone, _ in clips]
    sub = subscale_by_slug(item.subscale)
    metadata = {
        "scenario": metadata_scenario,
        "conversation": dialogue["conversation"],
        "eq_scale": sub.eq_scale,
        "audio_files": audio_files,
        "generation_metadata": {
            "timestamp": datetime.datetime.fromtimestamp(meta["time"], datetime.timezone.utc).strftime("%Y%m%d_%H%M%S"),
            "dataset_id": dataset_id,
            "subscale_slug": item.subscale,
            "output_path": f"{item.subscale}/{dataset_id}",
            "audio_files_count": len(audio_files),
            "generation_version": "v2",
            "generator": {"name": GENERATOR, **meta["generator"], "item_id": item.item_id, "scenario_type": item.scenario_type,
                          "item_seed": item.seed},
            "synthesis": {stem: synthesis for stem, _, _, _, _, synthesis in clips},
        },
    }
    return metadata, [(stem, audio) for stem, audio, *_ in clips]


def signature(metadata: dict, clips: list[tuple[str, Speech]]) -> str:
    """A content hash of a dialogue folder (skip rewriting what is already there)."""
    digest = hashlib.sha256(json.dumps(metadata, sort_keys=True).encode())
    for stem, audio in clips:
        digest.update(stem.encode() + hashlib.sha256(audio.data).digest())
    return digest.hexdigest()


def write_dialogue(out_dir: Path, subscale: str, dataset_id: str, metadata: dict, clips: list[tuple[str, Speech]]) -> Path:
    """Write one dialogue folder, assembled in a hidden temporary folder and renamed into place (replacing an older version)."""
    final = out_dir / subscale / dataset_id
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{dataset_id}-", dir=final.parent))
    try:
        (tmp / "audio").mkdir()
        for stem, audio in clips:
            (tmp / "audio" / f"{stem}.{audio.extension}").write_bytes(audio.data)
        (tmp / METADATA_FILE).write_text(json.dumps(metadata, indent=2, ensure_ascii=False), encoding="utf-8")
        # A crash between these two lines leaves the folder missing, never half written; the next run
        # sees it missing and writes it again (written.json is only saved after the whole set).
        shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
