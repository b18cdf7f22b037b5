"""The interactive loop (SPEC §8), sharded and resumable per dialogue like the runner, and its results.json.

Per profile, turn k = 1 .. max_turns:
1. the user's line and its emotion: turn 1 is the profile's opening, later
   lines come from the user backend (`user` role), read with the
   never-guess readers (a line that cannot be read is asked once more, then
   the dialogue fails by name);
2. the TTS speaks it with the emotion's tone instruction (profiles.USER_EMOTIONS);
3. the system under test (eval_scripts.responders) hears the whole dialogue
   so far (the user's turns as audio, its own replies as text) and answers in
   speech and text;
4. the stop judge decides: continue, user_ends, relief or stagnation; an
   unreadable decision counts as "continue" and is counted as missing; at
   turn max_turns the loop stops with turn_cap.
Then the turn judge rates every spoken reply 1-5 (hearing the user's turn and
the reply) and the dialogue judge the whole dialogue; an unreadable or failed
rating is missing (counted, never a score). Written: `DIR/dialogues/<id>.json`
and its audio under `DIR/dialogues/<id>/` (user_<k>.<ext>, model_<k>.wav),
`DIR/shards/rank<k>.jsonl` (one line per finished dialogue, the resume state),
`DIR/samples.jsonl` and `DIR/results.json`.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import importlib
import importlib.util
import json
import logging
import re
import shlex
import time
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import numpy as np

from eval_scripts import runner
from eval_scripts import store
from eval_scripts.generative import respond_in_order
from eval_scripts.interactive.agents import ROLES
from eval_scripts.interactive.agents import build_agents
from eval_scripts.interactive.agents import fill
from eval_scripts.interactive.agents import load_prompt
from eval_scripts.interactive.agents import profile_values
from eval_scripts.interactive.profiles import DEFAULT_PROFILES
from eval_scripts.interactive.profiles import USER_EMOTIONS
from eval_scripts.interactive.profiles import UserProfile
from eval_scripts.interactive.profiles import load_profiles
from eval_scripts.parsing import parse_judge_score
from eval_scripts.parsing import parse_label
from eval_scripts.parsing import parse_text_value
from eval_scripts.protocol import derive_seed
from eval_scripts.sharded import run_pending

logger = logging.getLogger(__name__)

DIALOGUES_DIR = "dialogues"
STOP_DECISIONS = ("continue", "user_ends", "relief", "stagnation")
STOP_REASONS = ("user_ends", "relief", "stagnation", "turn_cap")
USER_ATTEMPTS = 2
# What may change when a run is resumed (it changes no dialogue): the rest must match run_config.json.
RESUMABLE_CHANGES = ("output_dir", "limit", "batch_size", "overwrite", "mos", "n_bootstrap", "profiles")
# results.json keys that describe this invocation rather than the dialogues (a resumed or sharded run differs only there).
VOLATILE_KEYS = ("deployment", "timestamp_utc", "command", "num_processes")
MOS_CHOICES = ("auto", "none", "utmos")


@dataclass
class InteractConfig:
    """Every option of an interactive run (the CLI fills it; tests build it directly)."""

    model: str
    output_dir: str
    model_args: dict = field(default_factory=dict)
    user_llm: str = "scripted"
    user_llm_args: dict = field(default_factory=dict)
    tts: str = "espeak"
    tts_args: dict = field(default_factory=dict)
    judge: str = "scripted"
    judge_args: dict = field(default_factory=dict)
    profiles: str | None = None  # JSONL; default: eval_scripts/interactive/profiles_v1.jsonl (identified by content)
    prompts: dict = field(default_factory=dict)  # role -> prompt file replacing the default
    limit: int | None = None
    max_turns: int = 10
    seed: int = 0
    batch_size: int = 1  # dialogues advanced together (one request each per turn)
    mos: str = "auto"  # auto (utmos when installed), none, utmos, or package.module:Class
    n_bootstrap: int = 1000
    overwrite: bool = False

    def validate(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"--max-turns must be >= 1, got {self.max_turns}")
        if self.batch_size < 1:
            raise ValueError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {self.limit}")
        unknown = sorted(set(self.prompts) - set(ROLES))
        if unknown:
            raise ValueError(f"--prompt {', '.join(unknown)}: no such role; roles: {', '.join(ROLES)}")
        if self.mos not in MOS_CHOICES and ":" not in self.mos:
            raise ValueError(f"--mos must be one of {', '.join(MOS_CHOICES)} or package.module:Class; got {self.mos!r}")

    def public(self) -> dict:
        """The config as recorded in results.json (secret-looking args redacted)."""
        out = dataclasses.asdict(self)
        for key in ("model_args", "user_llm_args", "tts_args", "judge_args"):
            out[key] = runner.redact(out[key])
        out.pop("overwrite")
        return out


def profiles_fingerprint(profiles: list[UserProfile]) -> str:
    """SHA-256 of the profiles' content, in order (the same profiles from another path are the same run)."""
    return hashlib.sha256(json.dumps([p.as_dict() for p in profiles], sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def dialogue_folder(dialogue_id: str) -> str:
    return f"{DIALOGUES_DIR}/{dialogue_id}"


def reply_words(text: str | None, language: str) -> int:
    """Length of a reply's words: English words, or Chinese characters."""
    text = text or ""
    return len(re.findall(r"[\u4e00-\u9fff]", text)) if language == "zh" else len(re.findall(r"[A-Za-z0-9][A-Za-z0-9']*", text))


# ---------------------------------------------------------------- one chunk of dialogues


@dataclass
class _Dialogue:
    profile: UserProfile
    voice: str
    instructions: str
    turns: list[dict] = field(default_factory=list)
    conversation: list = field(default_factory=list)
    user_audio: dict = field(default_factory=dict)  # turn -> (array, rate) as spoken
    reply_audio: dict = field(default_factory=dict)  # turn -> (array, rate)
    stop_reason: str | None = None
    stop_detail: str | None = None
    error: str | None = None
    dialogue_rating: dict = field(default_factory=dict)

    @property
    def live(self) -> bool:
        return self.error is None and self.stop_reason is None

    def item(self, **extra) -> dict:
        return {"uid": self.profile.id, "profile": self.profile, "turns": self.turns, **extra}


class Agents:
    """What a chunk needs besides the system under test: the TTS, the user backend, the judges and the prompts."""

    def __init__(self, tts, user, judge, prompts: dict):
        self.tts, self.user, self.judge, self.prompts = tts, user, judge, prompts


def _user_lines(agents: Agents, live: list[_Dialogue], turn: int, seed: int) -> list[tuple[dict | None, str | None]]:
    """(line record, error) per live dialogue: turn 1 from the profile, later turns from the user backend (two tries)."""
    if turn == 1:
        return [({"user_text": d.profile.first_line, "user_emotion": d.profile.first_emotion, "user_raw": None}, None) for d in live]
    results: dict[int, tuple[dict | None, str | None]] = {}
    asking = list(range(len(live)))
    for attempt in range(1, USER_ATTEMPTS + 1):
        seeds = [derive_seed(seed, "user", live[k].profile.id, turn, attempt) for k in asking]
        replies = agents.user.answer("user", [live[k].item() for k in asking], seeds)
        retry = []
        for k, reply in zip(asking, replies):
            if reply.error:
                results[k] = (None, f"user LLM failed on turn {turn}: {reply.error}")
                continue
            line = parse_text_value(reply.text, "line")
            emotion = parse_label(reply.text, "emotion", tuple(USER_EMOTIONS))
            if line.label and emotion.label:
                results[k] = ({"user_text": line.label, "user_emotion": emotion.label, "user_raw": reply.text, "user_attempts": attempt}, None)
            else:
                why = line.detail if not line.label else emotion.detail
                results[k] = (None, f"user LLM answer on turn {turn} unreadable after {attempt} tries ({why}): {str(reply.text)[:200]!r}")
                retry.append(k)
        asking = retry
        if not asking:
            break
    return [results[k] for k in range(len(live))]


def _speak(agents: Agents, d: _Dialogue, turn: int, entry: dict, rate: int, run_dir: Path) -> None:
    """TTS of the user's line with its emotion; writes the clip and appends the user's audio turn to the conversation."""
    from eval_scripts.responders import Exchange
    from speecheq_dataset.audio import decode_audio
    from speecheq_dataset.audio import resample

    tone = USER_EMOTIONS[entry["user_emotion"]]
    speech = agents.tts.synthesize(entry["user_text"], tone, d.voice)
    path = f"{dialogue_folder(d.profile.id)}/user_{turn:02d}.{speech.extension}"
    store.write_bytes_atomic(run_dir / path, speech.data)
    audio, native = decode_audio(speech.data, name=str(run_dir / path))
    d.user_audio[turn] = (audio, native)
    d.conversation.append(Exchange("user", text=entry["user_text"], audio=resample(audio, native, rate), sampling_rate=rate))
    entry.update(user_tone=tone, user_audio=path, user_audio_s=len(audio) / native)


def run_chunk(model, agents: Agents, profiles: list[UserProfile], config: InteractConfig, run_dir: Path) -> list[dict]:
    """Every dialogue of a chunk, turn by turn, then its ratings; one record per profile, in order."""
    from eval_scripts.responders import Exchange
    from eval_scripts.responders import ReplyRequest
    from speecheq_dataset.audio import encode_wav

    dialogues = []
    for p in profiles:
        voice = agents.tts.voices({"speaker1_gender": p.gender, "speaker2_gender": p.gender, "language": p.language}, config.seed)[0]
        dialogues.append(_Dialogue(p, voice, fill(agents.prompts["system"], "instructions", profile_values(p))))
    for turn in range(1, config.max_turns + 1):
        live = [d for d in dialogues if d.live]
        if not live:
            break
        for d, (entry, error) in zip(live, _user_lines(agents, live, turn, config.seed)):
            if error:
                d.error = error
                continue
            entry = {"turn": turn, **entry}
            try:
                _speak(agents, d, turn, entry, model.sampling_rate, run_dir)
            except Exception as exc:  # a TTS failure fails this dialogue, named
                d.error = f"TTS failed on turn {turn}: {type(exc).__name__}: {exc}"
                continue
            d.turns.append(entry)
        live = [d for d in dialogues if d.live]
        if not live:
            break
        requests = [ReplyRequest(uid=f"{d.profile.id}/turn{turn}", instructions=d.instructions, conversation=list(d.conversation),
                                 seed=derive_seed(config.seed, "reply", d.profile.id, turn), meta={"dialogue_id": d.profile.id, "turn": turn})
                    for d in live]
        began = time.perf_counter()
        replies = respond_in_order(model, requests)
        share = (time.perf_counter() - began) / len(requests)
        for d, request, reply in zip(live, requests, replies):
            if reply.error or reply.audio is None or reply.audio.size == 0:
                d.error = f"model error on {request.uid}: {reply.error or 'no audio in the reply'}"
                continue
            path = f"{dialogue_folder(d.profile.id)}/model_{turn:02d}.wav"
            store.write_bytes_atomic(run_dir / path, encode_wav(reply.audio, reply.sampling_rate))
            d.reply_audio[turn] = (reply.audio, reply.sampling_rate)
            d.conversation.append(Exchange("assistant", text=reply.text or "", audio=reply.audio, sampling_rate=reply.sampling_rate))
            d.turns[-1].update(model_text=reply.text or "", model_audio=path, model_audio_s=len(reply.audio) / reply.sampling_rate,
                               model_sampling_rate=reply.sampling_rate, model_words=reply_words(reply.text, d.profile.language),
                               latency_s=reply.latency_s or share, input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
                               cost_usd=reply.cost_usd)
        live = [d for d in dialogues if d.live]
        if not live:
            break
        decisions = agents.judge.answer("stop", [d.item() for d in live], [derive_seed(config.seed, "stop", d.profile.id, turn) for d in live])
        for d, reply in zip(live, decisions):
            parsed = parse_label(reply.text, "decision", STOP_DECISIONS) if not reply.error else None
            label = parsed.label if parsed else None
            d.turns[-1].update(stop_decision=label, stop_status=parsed.status if parsed else "error",
                               stop_detail=(parsed.detail if parsed else reply.error) or None, stop_raw=reply.text)
            if label and label != "continue":
                d.stop_reason, d.stop_detail = label, _reason_of(reply.text)
            elif turn == config.max_turns:
                d.stop_reason, d.stop_detail = "turn_cap", f"reached {config.max_turns} turns"
    _rate(agents, [d for d in dialogues if d.error is None], config.seed)
    return [_record(d) for d in dialogues]


def _reason_of(text: str | None) -> str | None:
    return parse_text_value(text, "reason").label


def _rate(agents: Agents, dialogues: list[_Dialogue], seed: int) -> None:
    """Turn ratings of every reply, then a rating of each dialogue; unreadable or failed ratings are missing."""
    items, owners = [], []
    for d in dialogues:
        for k, entry in enumerate(d.turns):
            audio, rate = d.reply_audio[entry["turn"]]
            items.append(d.item(turns=d.turns[: k + 1], user_audio=d.user_audio[entry["turn"]], reply_audio=audio, reply_sr=rate))
            owners.append(entry)
    seeds = [derive_seed(seed, "turn", item["uid"], entry["turn"]) for item, entry in zip(items, owners)]
    for entry, reply in zip(owners, agents.judge.answer("turn", items, seeds) if items else []):
        entry.update(_rating("judge", reply))
    items = [d.item(stop_reason=d.stop_reason) for d in dialogues]
    ratings = agents.judge.answer("dialogue", items, [derive_seed(seed, "dialogue", d.profile.id) for d in dialogues]) if items else []
    for d, reply in zip(dialogues, ratings):
        d.dialogue_rating = _rating("dialogue", reply)


def _rating(prefix: str, reply) -> dict:
    """A rating's fields: score (None when missing), reason, read status, why it is missing, the judge's raw text."""
    if reply.error:
        return {f"{prefix}_score": None, f"{prefix}_reason": None, f"{prefix}_status": "error", f"{prefix}_detail": reply.error,
                f"{prefix}_raw": None}
    parsed = parse_judge_score(reply.text)
    return {f"{prefix}_score": parsed.score, f"{prefix}_reason": parsed.reason, f"{prefix}_status": parsed.status,
            f"{prefix}_detail": parsed.detail or None, f"{prefix}_raw": reply.text}


def _record(d: _Dialogue) -> dict:
    p = d.profile
    record = {"id": p.id, "status": "failed" if d.error else "ok", "error": d.error, "language": p.language, "category": p.category,
              "profile": p.as_dict(), "voice": d.voice, "stop_reason": None if d.error else d.stop_reason,
              "stop_detail": None if d.error else d.stop_detail, "n_turns": len(d.turns), "turns": d.turns}
    if not d.error:
        record.update(d.dialogue_rating)
    return record


# ---------------------------------------------------------------- MOS (optional)


class UtmosPredictor:
    """UTMOS through the `utmos` package (its weights are fetched by the package on first use)."""

    name = "utmos"

    def __init__(self):
        import utmos

        self._model = utmos.Score()

    def score(self, audio: np.ndarray, sampling_rate: int) -> float:
        import torch

        return float(self._model.calculate_wav(torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32)), sampling_rate))


def build_mos(choice: str):
    """(predictor or None, why there is none): `auto` uses utmos when installed; a failure to load is reported, not fatal."""
    if choice == "none":
        return None, "switched off (--mos none)"
    if choice == "auto" and importlib.util.find_spec("utmos") is None:
        return None, "no MOS predictor installed (pip install utmos)"
    try:
        if ":" in choice:
            module, _, cls = choice.partition(":")
            return getattr(importlib.import_module(module), cls)(), None
        return UtmosPredictor(), None
    except Exception as exc:
        if choice == "utmos" and isinstance(exc, ImportError):
            raise ValueError("--mos utmos needs the utmos package: pip install utmos") from None
        logger.warning("MOS predictor %s could not be loaded: %s", choice, exc)
        return None, f"{choice} could not be loaded: {type(exc).__name__}: {exc}"


def mos_summary(predictor, why: str | None, run_dir: Path, records: list[dict]) -> dict:
    """Mean predicted MOS of every reply of the finished dialogues (and per dialogue), or why there is none."""
    from speecheq_dataset.audio import decode_audio

    if predictor is None:
        return {"predictor": None, "mean": None, "n": 0, "per_dialogue": {}, "note": why}
    per_dialogue, scores = {}, []
    for record in records:
        if record["status"] != "ok":
            continue
        mine = []
        for t in record["turns"]:
            audio, rate = decode_audio(run_dir / t["model_audio"])
            mine.append(predictor.score(audio, rate))
        per_dialogue[record["id"]] = float(np.mean(mine)) if mine else None
        scores += mine
    name = getattr(predictor, "name", type(predictor).__name__)
    return {"predictor": name, "mean": float(np.mean(scores)) if scores else None, "n": len(scores), "per_dialogue": per_dialogue, "note": None}


# ---------------------------------------------------------------- scoring


def summarise(records: list[dict], *, n_bootstrap: int, seed: int) -> dict:
    """Turn and dialogue ratings (means with bootstrap intervals over dialogues), turns, stop reasons, missing counts."""
    from speecheq_metric import grouped_mean_ci

    done = [r for r in records if r["status"] == "ok"]
    if not done:
        return {"n_dialogues": len(records), "n_completed": 0}
    turn = grouped_mean_ci([[t.get("judge_score") for t in r["turns"]] for r in done], n_bootstrap=n_bootstrap, seed=seed)
    dialogue = grouped_mean_ci([[r.get("dialogue_score")] for r in done], n_bootstrap=n_bootstrap, seed=seed)
    stops = {reason: sum(r["stop_reason"] == reason for r in done) for reason in STOP_REASONS}
    turns = [t for r in done for t in r["turns"]]
    return {
        "turn_score": turn["mean"], "turn_score_ci95": turn["ci95"], "n_rated_turns": turn["n_rated"],
        "turn_judge_missing": turn["n_missing"], "turn_judge_errors": sum(t.get("judge_status") == "error" for t in turns),
        "dialogue_score": dialogue["mean"], "dialogue_score_ci95": dialogue["ci95"], "dialogue_judge_missing": dialogue["n_missing"],
        "mean_turns": float(np.mean([r["n_turns"] for r in done])), "stop_reasons": stops,
        "stop_judge_missing": sum(t.get("stop_decision") is None for t in turns),
        "n_dialogues": len(records), "n_completed": len(done),
    }


def judge_checks(records: list[dict]) -> dict:
    """Position and verbosity checks of the turn judge: correlation of its rating with reply length and with the turn index."""
    from speecheq_metric import score_length_correlation

    turns = [t for r in records if r["status"] == "ok" for t in r["turns"]]
    scores = [t.get("judge_score") for t in turns]
    return {
        "score_vs_reply_seconds": score_length_correlation(scores, [t["model_audio_s"] for t in turns]),
        "score_vs_reply_words": score_length_correlation(scores, [t["model_words"] for t in turns]),
        "score_vs_turn_index": score_length_correlation(scores, [t["turn"] for t in turns]),
    }


def build_results(config: InteractConfig, records: list[dict], *, model, agents: Agents, profiles_info: dict, mos: dict,
                  num_processes: int) -> dict:
    """results.json of an interactive run."""
    overall = summarise(records, n_bootstrap=config.n_bootstrap, seed=config.seed)
    overall["mos"] = mos["mean"]
    groups = {}
    for key in ("language", "category"):
        values = sorted({r[key] for r in records})
        groups[f"per_{key}"] = {v: summarise([r for r in records if r[key] == v], n_bootstrap=config.n_bootstrap, seed=config.seed)
                                for v in values}
    description = model.describe()
    turns = [t for r in records if r["status"] == "ok" for t in r["turns"]]
    latencies = [t["latency_s"] for t in turns if t.get("latency_s")]
    return {
        "track": "interact",
        "model": description,
        "label": description.get("label") or config.model,
        "config": config.public(),
        "metrics": overall if overall.get("n_completed") else None,
        **groups,
        "judge_checks": judge_checks(records),
        "mos": mos,
        "prompts": {role: prompt.record() for role, prompt in agents.prompts.items()},
        "user_llm": agents.user.describe(),
        "judge": agents.judge.describe(),
        "tts": agents.tts.describe(),
        "profiles": profiles_info,
        "usage": {"user_llm": agents.user.usage(), "judge": agents.judge.usage()},
        "seed": config.seed,
        "versions": runner.package_versions(),
        "git_hash": runner.git_hash(),
        "num_processes": num_processes,
        "failed_dialogues": [{"id": r["id"], "error": r["error"]} for r in records if r["status"] != "ok"],
        "deployment": {"replies": len(turns), "mean_latency_s": float(np.mean(latencies)) if latencies else None},
    }


# ---------------------------------------------------------------- the run


def identity(config: InteractConfig, profiles_sha: str, prompts: dict) -> dict:
    """What must match for a run directory to be resumed."""
    public = config.public()
    for key in RESUMABLE_CHANGES:
        public.pop(key, None)
    public.pop("prompts", None)  # the files' hashes stand for them
    return {"config": public, "profiles_sha256": profiles_sha, "prompts_sha256": {r: p.sha256 for r, p in prompts.items()}, "track": "interact"}


def build_agents_for(config: InteractConfig, prompts: dict) -> Agents:
    """The TTS, user backend and judges of the config (checked before the model loads)."""
    from speecheq_dataset.tts_backends import build_tts

    tts = build_tts(config.tts, **config.tts_args)
    user = build_agents(config.user_llm, prompts, **config.user_llm_args)
    judge = build_agents(config.judge, prompts, **config.judge_args)
    return Agents(tts, user, judge, prompts)


def interact(config: InteractConfig, *, model=None, agents: Agents | None = None, mos_predictor=None, progress: bool = True,
             command: list[str] | None = None) -> dict | None:
    """Run (or resume) the interactive track; results.json's content on the main process, None elsewhere.

    `model`, `agents` and `mos_predictor` may be given ready-made (tests); else they come from the config.
    """
    from eval_scripts.responders import build_responder

    config.validate()
    profiles = load_profiles(config.profiles)
    profiles_info = {"path": str(config.profiles or DEFAULT_PROFILES), "sha256": profiles_fingerprint(profiles), "n": len(profiles)}
    profiles = profiles[: config.limit] if config.limit else profiles
    prompts = {role: load_prompt(role, config.prompts.get(role)) for role in ROLES}
    if agents is None:
        agents = build_agents_for(config, prompts)
    agents.prompts = prompts
    if mos_predictor is None:
        mos_predictor, mos_note = build_mos(config.mos)
    else:
        mos_note = None
    accelerator = runner.make_accelerator()
    is_main = accelerator.is_main_process
    run_dir = Path(config.output_dir)
    runner.prepare_run_dir(run_dir, identity(config, profiles_info["sha256"], prompts), config.overwrite, is_main, (DIALOGUES_DIR,))
    accelerator.wait_for_everyone()
    if model is None:
        model = build_responder(config.model, **config.model_args)

    ids = [p.id for p in profiles]

    def process(chunk: list[int]) -> list[dict]:
        records = run_chunk(model, agents, [profiles[k] for k in chunk], config, run_dir)
        for record in records:  # the dialogue's file first; its shard line (appended next) marks it done
            store.write_json_atomic(run_dir / f"{dialogue_folder(record['id'])}.json", record)
        return records

    done = run_pending(accelerator, run_dir, ids, process, chunk_size=config.batch_size, progress=progress, desc=f"interact {config.model}")
    if done is None:
        return None
    ordered = done.records
    mos = mos_summary(mos_predictor, mos_note, run_dir, ordered)
    results = build_results(config, ordered, model=model, agents=agents, profiles_info=profiles_info, mos=mos,
                            num_processes=accelerator.num_processes)
    results["deployment"]["session"] = {"dialogues": done.new, "wall_s": done.wall_s}
    results["timestamp_utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    results["command"] = shlex.join(command) if command else None
    store.write_jsonl_atomic(run_dir / store.SAMPLES_FILE, ordered)
    store.write_json_atomic(run_dir / store.RESULTS_FILE, results)
    return results
