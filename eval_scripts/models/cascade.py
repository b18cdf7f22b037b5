"""`cascade`: the cascaded baseline of SPEC §5 — ASR + utterance-level SER + a text LLM.

Every clip a query plays is turned into text: its Whisper transcript and the
valence/arousal/dominance the audeering regressor hears in it. The text LLM
gets the runner's own prompt with each clip replaced by that rendering:
- `emo_num`: the three numbers, e.g. `arousal 0.62, valence 0.41, dominance 0.55`;
- `emo_des`: tone words from the documented `tones_v1` mapping
  (eval_scripts/components/tones.py), e.g. `energetic, animated; negative, displeased; ...`.
A short note added to the system prompt says what the bracketed renderings are.
So the cascade shows what is lost when speech becomes words plus emotion numbers.

Transcripts and V/A/D values are cached per clip by a hash of its samples at
the file's own rate (eval_scripts/components/cache.py; a clip is resampled to
16 kHz only when it is not cached), on disk under $SPEECHEQ_CACHE/clips or
<HF_HOME>/speecheq/clips: the other variant, repeated runs, personas and seeds
reuse them. Each round's `details` in samples.jsonl lists the clips the LLM was
given, in prompt order, with transcript and V/A/D (and the tone words for `emo_des`).

Model args: asr=, ser=, llm= (a Hub id, a local folder, or `tiny-random`; llm
also `openai:MODEL` for an OpenAI-compatible endpoint), variant=emo_num|emo_des,
asr_language= (default en; none = Whisper detects), cache= (true/false),
cache_dir=, seed=, max_new_tokens=, dtype=, device_map=, trust_remote_code=,
and for an endpoint LLM llm_base_url=, llm_api_key_env=, llm_concurrency=,
llm_temperature=, llm_max_tokens=, llm_price_in=, llm_price_out=, llm_timeout=,
llm_max_attempts=.
"""

from __future__ import annotations

import logging
import threading
import time

from eval_scripts.models.base import ChoiceModel
from eval_scripts.models.base import ChoiceQuery
from eval_scripts.models.base import Clip
from eval_scripts.models.base import ModelOutput
from eval_scripts.models.base import register
from eval_scripts.models.memo import ClipMemo

logger = logging.getLogger(__name__)

VARIANTS = ("emo_num", "emo_des")
DEFAULT_ASR = "openai/whisper-large-v3"
DEFAULT_SER = "audeering/wav2vec2-large-robust-12-ft-emotion-msp-dim"
DEFAULT_LLM = "Qwen/Qwen3-30B-A3B"
SAMPLING_RATE = 16_000
SYSTEM_NOTES = {
    "emo_num": (
        "You cannot hear the recordings. Each one is given in brackets as its transcript and the emotion a speech-emotion "
        "model measured in the voice, on a 0-1 scale: arousal (calm 0, excited 1), valence (negative 0, positive 1) and "
        "dominance (submissive 0, dominant 1)."
    ),
    "emo_des": (
        "You cannot hear the recordings. Each one is given in brackets as its transcript and a description of how the "
        "voice sounds (arousal; valence; dominance), from a speech-emotion model."
    ),
}


def render_clip(analysis: dict, variant: str) -> str:
    """The text that stands for one clip in the LLM's prompt."""
    transcript = analysis["transcript"].replace('"', "'")
    if variant == "emo_num":
        voice = ", ".join(f"{d} {analysis[d]:.2f}" for d in ("arousal", "valence", "dominance"))
        return f'[recording; transcript: "{transcript}"; voice: {voice}]'
    return f'[recording; transcript: "{transcript}"; voice sounds: {analysis["tone_words"]}]'


@register("cascade")
class CascadeModel(ChoiceModel):
    """Whisper -> audeering V/A/D -> text LLM (see the module docstring)."""

    name = "cascade"
    # Clips arrive at their files' own rate and are keyed by those samples; only a clip missing from the
    # cache is resampled to the components' 16 kHz, so a cached run skips resampling (half its decoding cost).
    sampling_rate = None

    def __init__(
        self,
        asr: str = DEFAULT_ASR,
        ser: str = DEFAULT_SER,
        llm: str = DEFAULT_LLM,
        variant: str = "emo_num",
        asr_language: str | None = "en",
        cache: bool = True,
        cache_dir: str | None = None,
        seed: int = 0,
        max_new_tokens: int | None = None,
        dtype: str | None = None,
        device_map: str | None = None,
        trust_remote_code: bool = False,
        **llm_options,
    ) -> None:
        from eval_scripts.components.asr import WhisperTranscriber
        from eval_scripts.components.cache import ClipCache
        from eval_scripts.components.ser import UtteranceSER
        from eval_scripts.components.textlm import ENDPOINT_PREFIX
        from eval_scripts.components.textlm import build_text_lm
        from eval_scripts.components.tones import TONES_VERSION

        if variant not in VARIANTS:
            raise ValueError(f"cascade: variant must be one of {', '.join(VARIANTS)}; got {variant!r}")
        unknown = [k for k in llm_options if not k.startswith("llm_")]
        if unknown:
            raise ValueError(f"cascade: unknown model args {sorted(unknown)}")
        self.variant = variant
        self.tones_version = TONES_VERSION
        options = {k[len("llm_"):]: v for k, v in llm_options.items()}
        if str(llm).startswith(ENDPOINT_PREFIX):
            if max_new_tokens is not None:
                options.setdefault("max_tokens", int(max_new_tokens))
        else:
            options.update(max_new_tokens=max_new_tokens, dtype=dtype, device_map=device_map, trust_remote_code=bool(trust_remote_code),
                           seed=int(seed))
        self.asr = WhisperTranscriber(str(asr), language=asr_language or None, seed=int(seed), dtype=dtype)
        self.ser = UtteranceSER(str(ser), seed=int(seed))
        self.llm = build_text_lm(str(llm), **options)
        self.modes = frozenset({"generate", "logprob"}) if self.llm.supports_logprob else frozenset({"generate"})
        self.asr_cache = ClipCache("asr", self.asr.describe(), root=cache_dir, enabled=bool(cache))
        self.ser_cache = ClipCache("ser", self.ser.describe(), root=cache_dir, enabled=bool(cache))
        self._digests = ClipMemo()  # clip array -> audio hash, computed once per clip
        self._lock = threading.Lock()  # the runner's loader thread may analyse clips while the model answers
        self.front_end_s = 0.0  # time spent hashing, transcribing and rating clips (caching makes it small)
        self.labels = {"asr": str(asr), "ser": str(ser), "llm": str(llm)}

    # -------------------------------------------------------------- clips

    def _digest(self, clip: Clip) -> str:
        from eval_scripts.components.cache import audio_digest

        known = self._digests.get(clip.array, "digest")
        if known is None:
            known = audio_digest(clip.array, clip.sampling_rate)
            self._digests.put(clip.array, "digest", known)
        return known

    def analyse(self, clips: list[Clip]) -> list[dict]:
        """Transcript and V/A/D of each clip (from the cache, else computed and stored), in input order."""
        from eval_scripts.components.tones import tone_words

        from speecheq_dataset.audio import resample

        with self._lock:
            began = time.perf_counter()
            digests = [self._digest(c) for c in clips]
            by_digest = dict(zip(digests, clips))
            found_asr = {d: self.asr_cache.get(d) for d in by_digest}
            found_ser = {d: self.ser_cache.get(d) for d in by_digest}
            missing = [d for d in by_digest if found_asr[d] is None or found_ser[d] is None]
            audio = {d: resample(by_digest[d].array, by_digest[d].sampling_rate, SAMPLING_RATE) for d in missing}
            need = [d for d in missing if found_asr[d] is None]
            for d, text in zip(need, self.asr.transcribe([audio[d] for d in need]) if need else []):
                found_asr[d] = {"transcript": text}
                self.asr_cache.put(d, found_asr[d])
            need = [d for d in missing if found_ser[d] is None]
            for d, vad in zip(need, self.ser.predict([audio[d] for d in need]) if need else []):
                found_ser[d] = vad
                self.ser_cache.put(d, vad)
            self.front_end_s += time.perf_counter() - began
        out = []
        for clip, d in zip(clips, digests):
            vad = found_ser[d]
            analysis = {"column": clip.column, "transcript": found_asr[d]["transcript"],
                        **{k: float(vad[k]) for k in ("valence", "arousal", "dominance")}}
            if self.variant == "emo_des":
                analysis["tone_words"] = tone_words(vad)
            out.append(analysis)
        return out

    def prepare_clips(self, clips: list[Clip]) -> None:
        """Transcribe and rate a dialogue's clips ahead of its queries (the runner's loader thread)."""
        self.analyse(clips)

    # -------------------------------------------------------------- prompts

    def conversation(self, query: ChoiceQuery, analyses: dict[int, dict]) -> tuple[list[dict], dict]:
        """The LLM's messages for a query (clips rendered as text) and the record of what it was given."""
        pieces, given = [], []
        for part in query.parts:
            if part.kind == "audio" and part.clip is not None:
                analysis = analyses[id(part.clip)]
                pieces.append(render_clip(analysis, self.variant))
                given.append(dict(analysis))
            else:
                pieces.append(part.text)
        system = f"{query.system}\n\n{SYSTEM_NOTES[self.variant]}" if query.system else SYSTEM_NOTES[self.variant]
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "".join(pieces)}]
        return messages, {"variant": self.variant, "clips": given}

    def _conversations(self, queries: list[ChoiceQuery]) -> tuple[list[list[dict]], list[dict]]:
        clips = {id(p.clip): p.clip for q in queries for p in q.parts if p.kind == "audio" and p.clip is not None}
        analyses = dict(zip(clips, self.analyse(list(clips.values()))))
        pairs = [self.conversation(q, analyses) for q in queries]
        return [m for m, _ in pairs], [d for _, d in pairs]

    # -------------------------------------------------------------- answering

    def generate(self, queries: list[ChoiceQuery]) -> list[ModelOutput]:
        conversations, details = self._conversations(queries)
        replies = self.llm.generate(conversations, seeds=[q.seed for q in queries])
        return [ModelOutput(text=r.text, input_tokens=r.input_tokens, output_tokens=r.output_tokens, cost_usd=r.cost_usd, error=r.error,
                            details=d) for r, d in zip(replies, details)]

    def score(self, queries: list[ChoiceQuery]) -> list[ModelOutput]:
        if not self.llm.supports_logprob:
            raise NotImplementedError("cascade: logprob mode needs a transformers LLM (an endpoint gives text only)")
        conversations, details = self._conversations(queries)
        outputs = []
        prefix = queries[0].meta.get("answer_prefix", "") if queries else ""
        answers = tuple(queries[0].meta.get("answer_choices", ("1", "2"))) if queries else ("1", "2")
        for (lp1, lp2), d in zip(self.llm.score(conversations, prefix, answers), details):
            choice = 1 if lp1 > lp2 else 2 if lp2 > lp1 else None
            outputs.append(ModelOutput(choice=choice, option_logprobs=(lp1, lp2), output_tokens=0, details=d))
        return outputs

    def describe(self) -> dict:
        llm = self.llm.describe()
        return {
            "name": self.name,
            "label": f"cascade:{self.variant} ({self.labels['asr']} + {self.labels['ser']} + {self.labels['llm']})",
            "variant": self.variant,
            "tones": self.tones_version if self.variant == "emo_des" else None,
            "asr": self.asr.describe(),
            "ser": self.ser.describe(),
            "llm": llm,
            "cache": {"asr": self.asr_cache.stats(), "ser": self.ser_cache.stats()},
            "front_end_s": round(self.front_end_s, 3),
        }
