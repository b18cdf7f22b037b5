"""The judge of the semi-open tasks: it rates a model's answer against the reference emotion, 1-5, with a reason.

`scripted` (offline): emotion words of the answer and of the reference are
mapped onto families (happy, sad, angry, fearful, calm, surprised; English and
Chinese words): the reference's family alone = 5, among other guesses = 3,
another family of the same valence = 3, the other valence = 1, no emotion
named = 1; a reference naming no known emotion gets no rating (missing).
`openai` / `gemini`: a text LLM with prompts/multibench/semi_open_judge_v1.json
(its SHA-256 goes into results.json). Either way the answer is JSON text read
by eval_scripts.parsing.parse_judge_score: unreadable = missing, never a score.
"""

from __future__ import annotations

import json
import re

from eval_scripts.prompts import PROMPTS_DIR
from eval_scripts.prompts import PromptFile
from eval_scripts.prompts import load_prompt_file
from speecheq_dataset.chat import ChatReply

DEFAULT_PROMPT = PROMPTS_DIR / "multibench" / "semi_open_judge_v1.json"
FAMILIES: dict[str, tuple[str, ...]] = {
    "happy": ("happy", "happiness", "joy", "glad", "cheerful", "delighted", "excited", "excitement", "overjoyed", "thrilled", "elated",
              "开心", "高兴", "快乐", "兴奋", "喜悦"),
    "sad": ("sad", "sadness", "unhappy", "depressed", "lonely", "grief", "sorrow", "disappointed", "disappointment", "heartbroken",
            "难过", "伤心", "失望", "悲伤"),
    "angry": ("angry", "anger", "mad", "furious", "annoyed", "irritated", "frustrated", "frustration", "生气", "愤怒", "恼火"),
    "fearful": ("fear", "fearful", "afraid", "scared", "frightened", "nervous", "anxious", "anxiety", "worried", "panicked",
                "害怕", "紧张", "焦虑", "恐惧"),
    "calm": ("calm", "neutral", "relaxed", "content", "peaceful", "平静", "放松"),
    "surprised": ("surprised", "surprise", "shocked", "astonished", "惊讶", "吃惊"),
}
VALENCE = {"happy": "positive", "calm": "positive", "surprised": "positive", "sad": "negative", "angry": "negative", "fearful": "negative"}


def families(text: str | None) -> list[str]:
    """The emotion families a text names, in table order (English at word starts, Chinese anywhere)."""
    lowered = (text or "").lower()
    found = []
    for family, words in FAMILIES.items():
        if any((re.search(r"\b" + re.escape(w), lowered) if w.isascii() else w in lowered) for w in words):
            found.append(family)
    return found


def scripted_rating(answer: str | None, reference: str) -> dict | None:
    """The scripted judge's rating of an answer against a reference (None when the reference names no known emotion)."""
    wanted = families(reference)
    if not wanted:
        return None
    target, named = wanted[0], families(answer)
    if not named:
        return {"score": 1, "reason": "the answer names no emotion"}
    if target in named:
        if len(named) == 1:
            return {"score": 5, "reason": f"names the reference emotion ({target})"}
        return {"score": 3, "reason": f"the reference emotion ({target}) is one of several guesses ({', '.join(named)})"}
    if all(VALENCE[f] == VALENCE[target] for f in named):
        return {"score": 3, "reason": f"same direction ({VALENCE[target]}) but another emotion ({', '.join(named)} for {target})"}
    return {"score": 1, "reason": f"the opposite direction ({', '.join(named)} for {target})"}


class ScriptedJudge:
    """Offline lexical judge (module docstring); answers the JSON text an LLM judge would."""

    name = "scripted"

    def rate(self, items: list[dict], seeds: list[int]) -> list[ChatReply]:
        out = []
        for item in items:
            rating = scripted_rating(item["answer"], item["reference"])
            text = json.dumps(rating, ensure_ascii=False) if rating else f"I cannot grade this: the reference {item['reference']!r} names no emotion I know."
            out.append(ChatReply(text))
        return out

    def describe(self) -> dict:
        return {"backend": self.name, "families": sorted(FAMILIES)}

    def usage(self) -> None:
        return None


class ApiJudge:
    """A text LLM (OpenAI-compatible or Gemini) with the semi-open judge prompt."""

    def __init__(self, backend: str, prompt: PromptFile, *, model: str | None = None, **client_options):
        from eval_scripts.interactive.agents import DEFAULT_MODELS
        from eval_scripts.interactive.agents import build_client

        if "api_key" in client_options or "key" in client_options:
            raise ValueError(f"{backend}: API keys are never passed as arguments; set the environment variable (api_key_env=NAME)")
        client_options.pop("audio_model", None)  # the semi-open judge reads text only
        client_options.pop("audio_sr", None)
        self.name, self.prompt = backend, prompt
        self.client = build_client(backend, str(model or DEFAULT_MODELS[backend][0]), **client_options)

    def rate(self, items: list[dict], seeds: list[int]) -> list[ChatReply]:
        from speecheq_dataset.http_api import map_in_order

        def one(job):
            item, seed = job
            messages = [{"role": "system", "content": self.prompt["system"]},
                        {"role": "user", "content": self.prompt.fill("user", {k: item[k] for k in ("question", "reference", "answer")})}]
            return self.client.complete(messages, seed=seed, label=f"judge {item['id']}")

        return map_in_order(one, list(zip(items, seeds)), self.client.concurrency)

    def describe(self) -> dict:
        return {"backend": self.name, **self.client.describe()}

    def usage(self) -> dict:
        return self.client.usage.as_dict()


def build_judge(backend: str, prompt_path: str | None = None, **args):
    """The semi-open judge of a backend name, with its prompt file (scripted: none)."""
    prompt = load_prompt_file(prompt_path or DEFAULT_PROMPT, ("system", "user"))
    if backend == "scripted":
        if args:
            raise ValueError(f"the scripted judge takes no args; got {', '.join(sorted(args))}")
        return ScriptedJudge(), prompt
    if backend in ("openai", "gemini"):
        return ApiJudge(backend, prompt, **args), prompt
    raise ValueError(f"unknown judge {backend!r}; known: scripted, openai, gemini")
