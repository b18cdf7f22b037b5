"""LLM and TTS backends of the pipeline against real HTTP servers on loopback, plus the offline engines and the extension point.

The OpenAI-compatible text backend goes through the shared ChatClient: success
(request shape), a malformed model answer then a good one (retried by the
stage with feedback), 429 then success, 500 until the attempts run out (the
item is `failed`, retried on the next run). The OpenAI speech backend: request
shape, one voice per speaker across a dialogue, 429 then success, 500 exhausted.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from builders.generation.llm import OpenAIChatBackend
from builders.generation.llm import build_text_backend
from builders.generation.matrix import plan_items
from builders.generation.scripted import ScriptedBackend
from builders.generation.stages import run_text_stage
from builders.generation.store import StageStore
from speecheq_dataset.tts_backends import Controls
from speecheq_dataset.tts_backends import EspeakTts
from speecheq_dataset.tts_backends import LocalModelTts
from speecheq_dataset.tts_backends import OpenAISpeechTts
from speecheq_dataset.tts_backends import PiperTts
from speecheq_dataset.tts_backends import Speech
from speecheq_dataset.tts_backends import apply_gain
from speecheq_dataset.tts_backends import build_tts
from speecheq_dataset.acoustics import clip_features
from speecheq_dataset.audio import decode_audio
from speecheq_dataset.audio import encode_wav
from speecheq_dataset.http_api import ApiCallError
from test_api_adapters import SENTINEL
from test_api_adapters import FakeApi
from test_api_adapters import json_answer

FAST = dict(backoff_base=0.001, backoff_max=0.002, max_attempts=3, timeout=10)
ITEMS = plan_items(1, 0, subscales=("self_expression_assertiveness",))


def chat_answer(text: str):
    return json_answer({"choices": [{"message": {"role": "assistant", "content": text}}], "usage": {"prompt_tokens": 50, "completion_tokens": 30}})


def scripted_scenario(record) -> tuple:
    """What a model would answer: the scripted backend's scenario for the item named in the prompt."""
    prompt = record["body"]["messages"][1]["content"]  # the stage prompt (later messages are retry feedback)
    item = next(i for i in ITEMS if f"delivers it): {i.valence} " in prompt)
    from builders.generation.llm import TextRequest

    return chat_answer(ScriptedBackend().complete(TextRequest("scenario", [], {"item": item.as_dict()})).text)


def _serve(monkeypatch, key_variable: str, responder):
    """A loopback server answering with `responder`, with the sentinel key in `key_variable`."""
    monkeypatch.setenv(key_variable, SENTINEL)
    fake = FakeApi(responder)
    yield fake
    fake.close()


@pytest.fixture
def chat_server(monkeypatch):
    yield from _serve(monkeypatch, "SPEECHEQ_TEST_GEN_KEY", scripted_scenario)


def backend(fake) -> OpenAIChatBackend:
    return build_text_backend("openai", model="test-llm", base_url=f"{fake.url}/v1", api_key_env="SPEECHEQ_TEST_GEN_KEY",
                              price_in=1.0, price_out=2.0, concurrency=2, **FAST)


def test_openai_backend_runs_a_stage_over_http_with_json_mode_seed_and_a_tally(chat_server, tmp_path):
    llm = backend(chat_server)
    stats = run_text_stage("scenario", ITEMS, tmp_path, llm, progress=False)
    assert stats.done == 3 and len(chat_server.requests) == 3
    body = chat_server.requests[0]["body"]
    assert body["model"] == "test-llm" and body["response_format"] == {"type": "json_object"} and isinstance(body["seed"], int)
    assert body["messages"][0]["role"] == "system" and "Interpersonal" not in body["messages"][1]["content"]
    assert "Self-Expression - Assertiveness" in body["messages"][1]["content"]
    assert chat_server.requests[0]["headers"]["authorization"] == f"Bearer {SENTINEL}"
    assert llm.usage() == {"calls": 3, "failed": 0, "input_tokens": 150, "output_tokens": 90, "cost_usd": 0.00033}
    assert SENTINEL not in json.dumps(llm.describe())


def test_malformed_model_json_then_success_is_retried_by_the_stage(chat_server, tmp_path):
    chat_server.script.append(chat_answer('{"title": "cut off'))
    stats = run_text_stage("scenario", ITEMS[:1], tmp_path, backend(chat_server), progress=False)
    record = StageStore(tmp_path, "scenario").load()[ITEMS[0].item_id]
    assert stats.done == 1 and stats.retried == 1 and record["attempts"] == {"scenario": 2}
    feedback = chat_server.requests[1]["body"]["messages"]
    assert feedback[-2]["role"] == "assistant" and "answer is not JSON" in feedback[-1]["content"]


def test_429_then_success_and_500_exhausted_marks_the_item_failed_for_the_next_run(chat_server, tmp_path):
    chat_server.script.append(json_answer({}, status=429, headers={"Retry-After": "0"}))
    assert run_text_stage("scenario", ITEMS[:1], tmp_path, backend(chat_server), progress=False).done == 1
    chat_server.script.extend([(500, {}, f"down {SENTINEL}".encode())] * 3)
    other = tmp_path / "b"
    stats = run_text_stage("scenario", ITEMS[:1], other, backend(chat_server), progress=False)
    record = StageStore(other, "scenario").load()[ITEMS[0].item_id]
    assert stats.failed == 1 and record["status"] == "failed" and "gave up after 3 attempts" in record["reasons"][0]
    assert SENTINEL not in json.dumps(record)
    assert run_text_stage("scenario", ITEMS[:1], other, backend(chat_server), progress=False).done == 1  # redone, now fine


# -- OpenAI speech ------------------------------------------------------------------------------

def tone_wav(record) -> tuple:
    """A WAV whose pitch follows the requested voice and length the input text (so clips differ)."""
    body = record["body"]
    sr, freq = 24_000, 110 + 40 * (sum(map(ord, body["voice"])) % 7)
    seconds = 0.05 * len(body["input"].split()) / float(body.get("speed", 1.0))
    t = np.arange(int(seconds * sr)) / sr
    return 200, {"Content-Type": "audio/wav"}, encode_wav((0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32), sr)


@pytest.fixture
def speech_server(monkeypatch):
    yield from _serve(monkeypatch, "SPEECHEQ_TEST_TTS_KEY", tone_wav)


def openai_tts(fake) -> OpenAISpeechTts:
    return OpenAISpeechTts(base_url=f"{fake.url}/v1", api_key_env="SPEECHEQ_TEST_TTS_KEY", response_format="wav",
                           max_attempts=3, backoff_base=0.001, backoff_max=0.002, timeout=10)


def test_openai_speech_sends_text_instruction_voice_and_speed(speech_server):
    tts = openai_tts(speech_server)
    speech = tts.synthesize("Hello there, friend.", "Bright, beaming voice, quick and bouncing, thrilled for them.", "coral",
                            Controls(rate=1.2))
    request = speech_server.requests[0]
    assert request["path"] == "/v1/audio/speech" and request["headers"]["authorization"] == f"Bearer {SENTINEL}"
    assert request["body"] == {"model": "gpt-4o-mini-tts-2025-03-20", "input": "Hello there, friend.", "voice": "coral",
                               "instructions": "Bright, beaming voice, quick and bouncing, thrilled for them.", "response_format": "wav",
                               "speed": 1.2}
    assert speech.extension == "wav" and decode_audio(speech.data)[0].size > 0
    tts.synthesize("Plain.", "Flat.", "ash")
    assert "speed" not in speech_server.requests[1]["body"]  # the neutral rate is the API default


def test_openai_speech_429_then_success_and_500_exhausted(speech_server):
    tts = openai_tts(speech_server)
    speech_server.script.append(json_answer({"error": "slow down"}, status=429, headers={"Retry-After": "0"}))
    assert tts.synthesize("One two three.", "Loud, firm voice, crisp and quick, holding the line.", "onyx").data
    speech_server.script.extend([(500, {}, f"boom {SENTINEL}".encode())] * 3)
    with pytest.raises(ApiCallError, match="gave up after 3 attempts") as failure:
        tts.synthesize("Four.", "Soft voice.", "onyx")
    assert SENTINEL not in str(failure.value)
    assert len(speech_server.requests) == 2 + 3


def test_openai_voices_differ_between_speakers_and_stay_fixed_in_a_dialogue(speech_server, tmp_path):
    from builders.features import FeatureCache
    from builders.generation.speech import SpeechConfig
    from builders.generation.speech import render_item

    item = ITEMS[0]
    scripted = ScriptedBackend()
    from builders.generation.llm import TextRequest

    scenario = json.loads(scripted.complete(TextRequest("scenario", [], {"item": item.as_dict()})).text)
    dialogue = json.loads(scripted.complete(TextRequest("dialogue", [], {"item": item.as_dict(), "scenario": scenario})).text)
    tones = {"context": {f"turn{n}": "Warm voice at an easy pace, curious and open to hearing more." for n in (1, 2, 3, 5)}}
    verdict = {f"turn{t}": {"high": "Firm, level voice, slow, measured phrases, holding the boundary.",
                            "low": "Sharp, loud voice, fast and biting, taking it as a personal attack.", "low_type": "defensive_snappy"}
               for t in (4, 6)}
    try:
        render_item(item, scenario, dialogue, tones, verdict, openai_tts(speech_server), FeatureCache(), tmp_path,
                    SpeechConfig(max_syntheses=1))
    except Exception as exc:  # a synthetic tone pair may fail the contrast check; the voices are what this test reads
        assert "contrast_v1 below" in str(exc)
    voices = {}
    for request in speech_server.requests:
        turn = next(t["sentence_number"] for t in dialogue["conversation"] if t["text"] == request["body"]["input"])
        voices.setdefault("speaker1" if turn % 2 else "speaker2", set()).add(request["body"]["voice"])
    assert len(voices["speaker1"]) == 1 and len(voices["speaker2"]) == 1 and voices["speaker1"] != voices["speaker2"]


# -- offline engines and the extension point ------------------------------------------------------

def test_espeak_controls_move_rate_and_pitch_and_a_gain_moves_only_the_level():
    tts = EspeakTts()
    text, tone = "We can fix this together if we start right now.", "Firm, level voice, staccato with hard consonants, grounding them."
    base = clip_features(*decode_audio(tts.synthesize(text, tone, "en-us+m3").data))
    slow = clip_features(*decode_audio(tts.synthesize(text, tone, "en-us+m3", Controls(rate=0.8)).data))
    high = clip_features(*decode_audio(tts.synthesize(text, tone, "en-us+m3", Controls(pitch=20)).data))
    assert slow.duration_s / base.duration_s == pytest.approx(1 / 0.8, rel=0.1)
    assert high.pitch_semitones - base.pitch_semitones == pytest.approx(20 * EspeakTts.pitch_unit_semitones, abs=1.5)
    speech = tts.synthesize(text, tone, "en-us+m3")
    quieter = clip_features(*decode_audio(apply_gain(speech, -6.0).data))
    predicted = base.with_gain(-6.0)
    assert quieter.rms_db == pytest.approx(predicted.rms_db, abs=0.05)
    for name in ("duration_s", "pitch_hz", "zcr", "centroid_hz"):
        assert getattr(quieter, name) == pytest.approx(getattr(predicted, name), rel=0.02)
    with pytest.raises(ValueError, match="attenuation only"):
        apply_gain(speech, 3.0)


@pytest.mark.slow
def test_piper_renders_offline_from_the_packaged_voice_with_rate_as_a_control():
    tts = PiperTts()
    text = "I know it's late. It will be ready in twenty minutes."
    normal = clip_features(*decode_audio(tts.synthesize(text, "Steady voice at an easy pace, staying present with them.", "x").data))
    fast = clip_features(*decode_audio(tts.synthesize(text, "Steady voice at an easy pace, staying present.", "x", Controls(rate=1.4)).data))
    slow_words = clip_features(*decode_audio(tts.synthesize(text, "Heavy voice, slow with long pauses, trailing off.", "x").data))
    assert 1.0 < normal.duration_s < 8.0 and math.isfinite(normal.pitch_hz)
    assert fast.duration_s < normal.duration_s * 0.85
    assert slow_words.duration_s > normal.duration_s * 1.15  # the tone words act through piper's length scale


class SineModel(LocalModelTts):
    """A stand-in 'local model': its pitch follows the voice, its length the words and the rate control."""

    name = "sine-model"
    controls = frozenset({"rate"})

    def generate(self, text, instruction, voice, controls):
        sr = 16_000
        t = np.arange(int(sr * 0.2 * len(text.split()) / controls.rate)) / sr
        return 0.2 * np.sin(2 * np.pi * (140 if voice == "speaker1" else 220) * t), sr


def test_a_local_model_plugs_in_by_module_path_and_unknown_backends_fail_loudly():
    tts = build_tts("test_generation_backends:SineModel")
    speech = tts.synthesize("one two three four", "any", "speaker2", Controls(rate=1.25))
    assert isinstance(speech, Speech) and speech.extension == "wav"
    assert clip_features(*decode_audio(speech.data)).duration_s == pytest.approx(0.64, abs=0.05)
    with pytest.raises(ValueError, match="unknown TTS backend 'nope'; known: espeak, piper, openai"):
        build_tts("nope")
    with pytest.raises(ValueError, match="cannot load TTS backend"):
        build_tts("no_such_module_xyz:Thing")
    with pytest.raises(ValueError, match="unknown LLM backend 'gpt'"):
        build_text_backend("gpt")
