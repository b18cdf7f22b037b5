"""The user LLM and the judges over an API, from versioned prompt files; and the registry of agent backends.

Four roles, each answering JSON text that eval_scripts.parsing reads:
- `user`: the next line of the simulated user and its emotion (one of USER_EMOTIONS);
- `stop`: after every reply, continue / user_ends / relief / stagnation;
- `turn`: an audio-aware rating (1-5, with a reason) of one spoken reply,
  hearing the user's last turn and the reply as inline WAV audio;
- `dialogue`: a text rating (1-5, with a reason) of the whole dialogue.
Backends: `scripted` (interactive.scripted, offline), `openai` (any
OpenAI-compatible chat-completions endpoint through speecheq_dataset.chat;
audio parts as `input_audio`) and `gemini` (generateContent through
speecheq_dataset.gemini). The same OpenAI-style messages go to either API.
Each prompt file's SHA-256 is recorded in results.json.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from eval_scripts.interactive.profiles import USER_EMOTIONS
from eval_scripts.interactive.profiles import UserProfile
from eval_scripts.prompts import PROMPTS_DIR
from eval_scripts.prompts import PromptFile
from eval_scripts.prompts import load_prompt_file
from speecheq_dataset.audio import encode_wav
from speecheq_dataset.chat import ChatReply

ROLES = ("system", "user", "stop", "turn", "dialogue")
PROMPT_KEYS = {
    "system": ("instructions",),
    "user": ("system", "next"),
    "stop": ("system", "user"),
    "turn": ("system", "before_user_audio", "before_reply_audio", "after"),
    "dialogue": ("system", "user"),
}
DEFAULT_PROMPTS = {role: PROMPTS_DIR / "interact" / f"{role}_v1.json" for role in ROLES}
BACKENDS = ("scripted", "openai", "gemini")
DEFAULT_MODELS = {"openai": ("gpt-4o", "gpt-audio"), "gemini": ("gemini-2.5-pro", "gemini-2.5-pro")}  # (text, audio)


def load_prompt(role: str, path: str | Path | None = None) -> PromptFile:
    """A role's prompt file (default: prompts/interact/<role>_v1.json); errors name the file and the missing keys."""
    return load_prompt_file(path or DEFAULT_PROMPTS[role], PROMPT_KEYS[role])


def fill(prompt: PromptFile, key: str, values: dict) -> str:
    """A prompt text with its placeholders filled (PromptFile.fill)."""
    return prompt.fill(key, values)


def profile_values(profile: UserProfile) -> dict:
    """The placeholders every prompt may use."""
    return {**profile.as_dict(), "language": profile.language_name, "emotions": ", ".join(USER_EMOTIONS)}


def transcript(turns: list[dict]) -> str:
    """The conversation as text: each user line with its emotion, each reply's words."""
    lines = []
    for t in turns:
        lines.append(f"User ({t['user_emotion']}): {t['user_text']}")
        if t.get("model_text") is not None:
            lines.append(f"Assistant: {t['model_text'] or '(no words)'}")
    return "\n".join(lines) or "(nothing yet)"


def wav_part(audio, sampling_rate: int, target_rate: int) -> dict:
    """An input_audio content part holding base64 WAV."""
    data = base64.b64encode(encode_wav(audio, sampling_rate, target_rate)).decode("ascii")
    return {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}


def role_messages(role: str, prompt: PromptFile, item: dict, audio_sr: int) -> list[dict]:
    """The chat messages of one item for `role` (OpenAI style; GeminiClient converts them)."""
    values = profile_values(item["profile"])
    turns = item["turns"]
    if role == "user":
        messages = [{"role": "system", "content": fill(prompt, "system", values)}]
        for t in turns:
            messages.append({"role": "assistant", "content": json.dumps({"line": t["user_text"], "emotion": t["user_emotion"]}, ensure_ascii=False)})
            messages.append({"role": "user", "content": t.get("model_text") or "(no words)"})
        messages[-1]["content"] += "\n\n" + fill(prompt, "next", values)
        return messages
    if role == "stop":
        return [{"role": "system", "content": fill(prompt, "system", values)},
                {"role": "user", "content": fill(prompt, "user", {**values, "transcript": transcript(turns)})}]
    if role == "dialogue":
        return [{"role": "system", "content": fill(prompt, "system", values)},
                {"role": "user", "content": fill(prompt, "user", {**values, "transcript": transcript(turns), "stop_reason": item["stop_reason"]})}]
    if role == "turn":
        before = fill(prompt, "before_user_audio", {**values, "transcript": transcript(turns[:-1])})
        user_audio, user_sr = item["user_audio"]
        content = [{"type": "text", "text": before}, wav_part(user_audio, user_sr, audio_sr),
                   {"type": "text", "text": fill(prompt, "before_reply_audio", values)}, wav_part(item["reply_audio"], item["reply_sr"], audio_sr),
                   {"type": "text", "text": fill(prompt, "after", values)}]
        return [{"role": "system", "content": fill(prompt, "system", values)}, {"role": "user", "content": content}]
    raise ValueError(f"no role {role!r}; roles: {', '.join(ROLES[1:])}")


def build_client(backend: str, model: str, **options):
    """A ChatClient (openai) or GeminiClient (gemini) for `model`."""
    if backend == "openai":
        from speecheq_dataset.chat import ChatClient

        return ChatClient(model, **options)
    if backend == "gemini":
        from speecheq_dataset.gemini import GeminiClient

        return GeminiClient(model, **options)
    raise ValueError(f"no API backend {backend!r}; known: openai, gemini")


class ApiAgents:
    """The roles answered by an LLM over an API; `audio_model=` (default per backend) rates the spoken replies."""

    def __init__(self, backend: str, prompts: dict[str, PromptFile], *, model: str | None = None, audio_model: str | None = None,
                 audio_sr: int = 16_000, json_mode: bool = False, **client_options):
        if "api_key" in client_options or "key" in client_options:
            raise ValueError(f"{backend}: API keys are never passed as arguments; set the environment variable (api_key_env=NAME)")
        text_default, audio_default = DEFAULT_MODELS[backend] if backend in DEFAULT_MODELS else (None, None)
        self.name = backend
        self.prompts = prompts
        self.audio_sr = int(audio_sr)
        self.json_mode = bool(json_mode)
        self.text_client = build_client(backend, str(model or text_default), **client_options)
        audio_model = str(audio_model or (model if model and backend == "gemini" else audio_default))
        self.audio_client = self.text_client if audio_model == self.text_client.model else build_client(backend, audio_model, **client_options)

    def answer(self, role: str, items: list[dict], seeds: list[int]) -> list[ChatReply]:
        from speecheq_dataset.http_api import map_in_order

        client = self.audio_client if role == "turn" else self.text_client
        options = {"json_mode": True} if self.json_mode and role != "turn" else {}

        def one(job: tuple[dict, int]) -> ChatReply:
            item, seed = job
            messages = role_messages(role, self.prompts[role], item, self.audio_sr)
            return client.complete(messages, seed=seed, label=f"{role} {item['uid']}", **options)

        return map_in_order(one, list(zip(items, seeds)), client.concurrency)

    def describe(self) -> dict:
        out = {"backend": self.name, "text": self.text_client.describe(), "audio_sr": self.audio_sr}
        if self.audio_client is not self.text_client:
            out["audio"] = self.audio_client.describe()
        return out

    def usage(self) -> dict:
        clients = {id(c): c for c in (self.text_client, self.audio_client)}.values()
        totals: dict = {}
        for client in clients:
            for key, value in client.usage.as_dict().items():
                totals[key] = round(totals.get(key, 0) + value, 6)
        return totals

    def close(self) -> None:
        for client in {id(c): c for c in (self.text_client, self.audio_client)}.values():
            client.close()


def build_agents(backend: str, prompts: dict[str, PromptFile], **args):
    """The agents of a backend name (scripted, openai, gemini); unknown names fail with the known ones."""
    if backend == "scripted":
        if args:
            raise ValueError(f"the scripted backend takes no args; got {', '.join(sorted(args))}")
        from eval_scripts.interactive.scripted import ScriptedAgents

        return ScriptedAgents()
    if backend in ("openai", "gemini"):
        return ApiAgents(backend, prompts, **args)
    raise ValueError(f"unknown agent backend {backend!r}; known: {', '.join(BACKENDS)}")
