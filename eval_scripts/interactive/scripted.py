"""The scripted (offline, deterministic) simulated user and judges of the interactive track.

They stand in for the LLMs so the whole loop runs with no network: each
reads the structured dialogue so far (never a prompt) and answers the same
JSON an LLM would, which then goes through the same readers
(eval_scripts.parsing). Choices are seeded by the run seed, the profile and
the turn, so a re-run gives the same dialogue.

How the user reacts (scripted_v1.json holds the lines and cue words):
- each model reply gets a quality: -1 when it is unintelligible (fewer than
  three words of the profile's language, or mostly symbols) or dismissive
  ("calm down", "随便"), +1 when it shows care or offers help ("that sounds",
  "我们可以"), else 0;
- the user's mood starts below zero (per category) and adds each quality;
  at mood >= 1 the user is relieved and says so; after as many -1 replies in a
  row as the category's patience the user says goodbye; after a 0 reply the
  user repeats the complaint; after a -1 reply the user pushes back; after a
  +1 reply that is not yet enough the user softens.
The stop judge reads the transcript: a farewell ends the dialogue
(user_ends), a relieved line with a relieved emotion ends it (relief), two
user lines in a row that repeat themselves (or two identical replies) end it
(stagnation); else the dialogue goes on, up to the turn cap. The turn judge
rates each reply 1-5 from its words and its loudness against the user's
emotion; the dialogue judge from the turn ratings and how the dialogue ended.
"""

from __future__ import annotations

import functools
import json
import math
import random
import re
import unicodedata
from importlib import resources

import numpy as np

from eval_scripts.interactive.profiles import NEGATIVE_EMOTIONS
from eval_scripts.interactive.profiles import RELIEVED_EMOTIONS
from eval_scripts.interactive.profiles import UserProfile
from speecheq_dataset.chat import ChatReply

SCRIPT_FILE = "scripted_v1.json"
_PUNCTUATION = set(".,!?;:'\"-()…，。！？；：、“”‘’（）—")
SILENT_DBFS = -50.0
LOUD_DBFS = -14.0


@functools.lru_cache(maxsize=1)
def script() -> dict:
    """The packaged lines, emotions and cue words."""
    return json.loads((resources.files("eval_scripts.interactive") / SCRIPT_FILE).read_text(encoding="utf-8"))


def has_cue(text: str, kind: str, language: str) -> bool:
    """Whether `text` holds a cue word of `kind` (English: at a word start; Chinese: anywhere)."""
    lowered = (text or "").lower()
    for cue in script()["cues"][language][kind]:
        if language == "en" and re.search(r"\b" + re.escape(cue), lowered):
            return True
        if language != "en" and cue in lowered:
            return True
    return False


def _plausible_word(word: str) -> bool:
    """An English-looking word: at most 15 letters, a vowel, and no case changes inside ("ecrnQecrn" is not one)."""
    return len(word) <= 15 and bool(re.search(r"[aeiouyAEIOUY]", word)) and (word.islower() or word.isupper() or word.istitle())


def intelligible(text: str | None, language: str) -> bool:
    """Readable words: no control or replacement characters, at least 95 % letters, blanks and punctuation, and at least
    three words (Chinese: characters), of which (English) at least 70 % look like words."""
    text = (text or "").strip()
    if not text or "\ufffd" in text or any(unicodedata.category(ch) == "Cc" for ch in text if ch not in "\n\t\r"):
        return False
    if sum(ch.isalnum() or ch.isspace() or ch in _PUNCTUATION for ch in text) / len(text) < 0.95:
        return False
    if language == "zh":
        return len(re.findall(r"[\u4e00-\u9fff]", text)) >= 3
    words = re.findall(r"[A-Za-z][A-Za-z']*", text)
    return len(words) >= 3 and sum(_plausible_word(w.strip("'")) for w in words) >= 0.7 * len(words)


def reply_quality(text: str | None, language: str) -> int:
    """-1 (unintelligible or dismissive), +1 (shows care or offers help), 0 (neither)."""
    if not intelligible(text, language) or has_cue(text, "dismissive", language):
        return -1
    return 1 if has_cue(text, "caring", language) else 0


def _pick(options: list, seed: int, *parts) -> object:
    return random.Random("\x1f".join(str(p) for p in (seed, *parts))).choice(options)


def user_stage(profile: UserProfile, replies: list[str | None]) -> str:
    """The stage of the user's next line after these model replies (see the module docstring)."""
    qualities = [reply_quality(r, profile.language) for r in replies]
    mood = script()["start_mood"][profile.category] + sum(qualities)
    if qualities and qualities[-1] > 0 and mood >= 1:
        return "relief"
    patience = script()["patience"][profile.category]
    if len(qualities) >= patience and all(q < 0 for q in qualities[-patience:]):
        return "goodbye"
    return {-1: "pushback", 0: "repeat", 1: "softening"}[qualities[-1]] if qualities else "continue"


def user_line(profile: UserProfile, turns: list[dict], seed: int) -> dict:
    """The user's next line and its emotion after `turns` (each with its `model_text`)."""
    turn = len(turns) + 1
    if turn == 1:
        return {"line": profile.first_line, "emotion": profile.first_emotion}
    stage = user_stage(profile, [t.get("model_text") for t in turns])
    data = script()
    emotions = data["stage_emotions"][stage]
    emotions = emotions[profile.category] if isinstance(emotions, dict) else emotions
    said = {t["user_text"] for t in turns}
    bank = [line.format(topic=profile.topic) for line in data["lines"][profile.language][stage]]
    line = _pick([b for b in bank if b not in said] or bank, seed, profile.id, turn, "line")  # a person rarely says the same line twice
    return {"line": line, "emotion": _pick(emotions, seed, profile.id, turn, "emotion")}


def stop_decision(profile: UserProfile, turns: list[dict]) -> dict:
    """The stop judge's decision after the last turn: continue, user_ends, relief or stagnation, with a reason."""
    language, last = profile.language, turns[-1]
    if has_cue(last["user_text"], "farewell", language):
        return {"decision": "user_ends", "reason": "the user said goodbye"}
    if last["user_emotion"] in RELIEVED_EMOTIONS and has_cue(last["user_text"], "relief", language):
        return {"decision": "relief", "reason": f"the user sounds relieved ({last['user_emotion']})"}
    if len(turns) >= 2:
        previous = turns[-2]
        if has_cue(last["user_text"], "repeat", language) and has_cue(previous["user_text"], "repeat", language):
            return {"decision": "stagnation", "reason": "the user has repeated the complaint twice"}
        if last.get("model_text") and last.get("model_text") == previous.get("model_text"):
            return {"decision": "stagnation", "reason": "the model gave the same reply twice"}
    return {"decision": "continue", "reason": "the conversation is still open"}


def loudness_dbfs(audio: np.ndarray | None) -> float:
    """RMS level in dB full scale (-inf for silence or no audio)."""
    if audio is None or len(audio) == 0:
        return -math.inf
    rms = float(np.sqrt(np.mean(np.square(audio.astype(np.float64)))))
    return 20 * math.log10(rms) if rms > 0 else -math.inf


def turn_rating(profile: UserProfile, user_emotion: str, reply_text: str | None, reply_audio: np.ndarray | None) -> dict:
    """A 1-5 emotional-alignment rating of one spoken reply, with the reason."""
    level = loudness_dbfs(reply_audio)
    if level < SILENT_DBFS:
        return {"score": 1, "reason": f"the reply is silent ({level:.0f} dBFS)"}
    quality = reply_quality(reply_text, profile.language)
    if not intelligible(reply_text, profile.language):
        return {"score": 1, "reason": "the words of the reply make no sense"}
    score, reasons = 3, []
    if quality > 0:
        score, reasons = score + 1, reasons + ["it acknowledges the user's feelings or offers help"]
    if quality < 0:
        score, reasons = score - 1, reasons + ["it brushes the user off"]
    if user_emotion in NEGATIVE_EMOTIONS:
        if level > LOUD_DBFS:
            score, reasons = score - 1, reasons + [f"it is loud ({level:.0f} dBFS) for a user who feels {user_emotion}"]
        elif quality > 0:
            score, reasons = score + 1, reasons + [f"its calm level suits a user who feels {user_emotion}"]
    score = min(5, max(1, score))
    return {"score": score, "reason": "; ".join(reasons) or "a plain reply that neither helps nor hurts"}


def dialogue_rating(turn_scores: list[int | None], stop_reason: str) -> dict:
    """A 1-5 rating of the whole dialogue from its turn ratings and how it ended."""
    rated = [s for s in turn_scores if s is not None]
    base = math.floor(sum(rated) / len(rated) + 0.5) if rated else 3
    shift = {"relief": 1, "user_ends": -1, "stagnation": -1}.get(stop_reason, 0)
    score = min(5, max(1, base + shift))
    how = {"relief": "the user ended relieved", "user_ends": "the user gave up", "stagnation": "the talk went in circles",
           "turn_cap": "it ran to the turn cap"}.get(stop_reason, stop_reason)
    return {"score": score, "reason": f"mean turn rating {base if rated else 'n/a'}; {how}"}


class ScriptedAgents:
    """The user and the three judges, offline: each answers the JSON text an LLM would."""

    name = "scripted"

    def answer(self, role: str, items: list[dict], seeds: list[int]) -> list[ChatReply]:
        """One reply per item for `role` (user, stop, turn, dialogue); see track.py for the items' fields."""
        out = []
        for item, seed in zip(items, seeds):
            profile = item["profile"]
            if role == "user":
                data = user_line(profile, item["turns"], seed)
            elif role == "stop":
                data = stop_decision(profile, item["turns"])
            elif role == "turn":
                last = item["turns"][-1]
                data = turn_rating(profile, last["user_emotion"], last.get("model_text"), item["reply_audio"])
            elif role == "dialogue":
                data = dialogue_rating([t.get("judge_score") for t in item["turns"]], item["stop_reason"])
            else:
                raise ValueError(f"scripted agents have no role {role!r}")
            out.append(ChatReply(json.dumps(data, ensure_ascii=False)))
        return out

    def describe(self) -> dict:
        return {"backend": self.name, "script": script()["version"]}

    def usage(self) -> dict | None:
        return None

    def close(self) -> None:
        pass
