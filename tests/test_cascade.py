"""The cascaded baseline (SPEC §5): Whisper + the audeering V/A/D regressor + a text LLM.

Tiny random-weight models built offline from configs drive the real code paths
on real clips from ../shared/data; the regressor's head is our own class and
must load the published checkpoint layout and its own checkpoints bit-exactly.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from eval_scripts import protocol
from eval_scripts import store
from eval_scripts.components import cache as clip_cache
from eval_scripts.components.asr import WhisperTranscriber
from eval_scripts.components.ser import AUDEERING_ORDER
from eval_scripts.components.ser import UtteranceSER
from eval_scripts.components.ser import Wav2Vec2ForVadRegression
from eval_scripts.components.ser import label_columns
from eval_scripts.components.textlm import build_text_lm
from eval_scripts.components.tiny import build_tiny_vad_regressor
from eval_scripts.components.tones import tone_words
from eval_scripts.models.base import build_model
from eval_scripts.models.cascade import render_clip
from eval_scripts.prompts import load_template
from speecheq_dataset.columns import CLIP_COLUMNS
from test_api_adapters import SENTINEL
from test_api_adapters import FakeApi
from test_api_adapters import json_answer

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TINY = dict(asr="tiny-random", ser="tiny-random", llm="tiny-random")


@pytest.fixture(scope="module")
def clips(dialogues):
    """Four real clips of one dialogue at 16 kHz (3-8 s each)."""
    return [dialogues[0].clips[c].array for c in CLIP_COLUMNS[:4]]


@pytest.fixture(scope="module")
def whisper():
    return WhisperTranscriber("tiny-random")


# ---------------------------------------------------------------- ASR


@pytest.mark.slow
def test_tiny_whisper_transcribes_real_clips_independently_of_the_batch(whisper, clips):
    together = whisper.transcribe(clips)
    assert together == [whisper.transcribe([c])[0] for c in clips]
    assert all(isinstance(t, str) and t for t in together)
    assert whisper.describe()["architecture"] == "WhisperForConditionalGeneration"


@pytest.mark.slow
def test_a_clip_longer_than_30_s_goes_through_long_form_decoding(whisper, clips, monkeypatch):
    calls = []
    real = whisper._decode
    monkeypatch.setattr(whisper, "_decode", lambda batch, long_form: calls.append((len(batch), long_form)) or real(batch, long_form))
    long = np.concatenate(clips * 3)
    assert len(long) > 30 * 16000
    texts = whisper.transcribe([clips[0], long])
    assert calls == [(1, False), (1, True)] and len(texts) == 2 and all(isinstance(t, str) for t in texts)


# ---------------------------------------------------------------- SER head


def test_regression_head_saves_and_loads_its_own_checkpoint_bit_exactly(tmp_path, clips):
    tiny = build_tiny_vad_regressor(seed=3)
    tiny.model.save_pretrained(tmp_path)
    tiny.processor.save_pretrained(tmp_path)
    loaded = Wav2Vec2ForVadRegression.from_pretrained(tmp_path).eval()
    before, after = tiny.model.state_dict(), loaded.state_dict()
    assert list(before) == list(after) and all(torch.equal(before[k], after[k]) for k in before)
    values = tiny.processor(clips[0], sampling_rate=16000, return_tensors="pt")["input_values"]
    with torch.inference_mode():
        # Same weights, same pooled state; the head's matmul may differ in the last bit because memory-mapped
        # weights are not 64-byte aligned (another SIMD path), so outputs are compared to float32 resolution.
        before_out, after_out = tiny.model(values), loaded(values)
    assert torch.equal(before_out.pooled, after_out.pooled)
    torch.testing.assert_close(before_out.logits, after_out.logits, rtol=0, atol=1e-6)
    # The parameter names are the published checkpoint's layout, so from_pretrained loads audeering's weights.
    assert {name.split(".")[0] for name in after} == {"wav2vec2", "classifier"}
    assert {"classifier.dense.weight", "classifier.dense.bias", "classifier.out_proj.weight", "classifier.out_proj.bias"} <= set(after)
    assert _close(UtteranceSER(str(tmp_path)).predict(clips), UtteranceSER("tiny-random", seed=3).predict(clips))


def test_outputs_are_read_by_name_never_by_position(tmp_path, clips):
    tiny = build_tiny_vad_regressor(seed=1)
    expected = UtteranceSER("tiny-random", seed=1).predict(clips[:2])
    perm = [2, 0, 1]  # output row k of the new head = row perm[k] of the old one
    head = tiny.model.classifier.out_proj
    head.weight.data, head.bias.data = head.weight.data[perm].clone(), head.bias.data[perm].clone()
    tiny.model.config.id2label = {k: AUDEERING_ORDER[perm[k]] for k in range(3)}
    tiny.model.config.label2id = {v: k for k, v in tiny.model.config.id2label.items()}
    tiny.model.save_pretrained(tmp_path)
    tiny.processor.save_pretrained(tmp_path)
    assert _close(UtteranceSER(str(tmp_path)).predict(clips[:2]), expected)


def _close(a: list[dict], b: list[dict]) -> bool:
    return [sorted(x) for x in a] == [sorted(x) for x in b] and all(abs(x[k] - y[k]) <= 1e-6 for x, y in zip(a, b) for k in x)


@pytest.mark.parametrize(
    "id2label, expected",
    [
        ({0: "arousal", 1: "dominance", 2: "valence"}, {"valence": 2, "arousal": 0, "dominance": 1}),  # audeering (SPEC §5)
        ({0: "Arousal", 1: "Valence", 2: "Dominance"}, {"valence": 1, "arousal": 0, "dominance": 2}),  # published CSER (SPEC §7), any case
        ({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, {"valence": 2, "arousal": 0, "dominance": 1}),  # unnamed: audeering order
    ],
)
def test_label_columns_map_dimension_names_to_outputs(id2label, expected):
    assert label_columns(id2label) == expected


def test_label_columns_refuse_labels_that_do_not_name_the_dimensions():
    with pytest.raises(ValueError, match="do not name valence, arousal and dominance"):
        label_columns({0: "happy", 1: "sad", 2: "angry"})


# ---------------------------------------------------------------- emo_des mapping and rendering


@pytest.mark.parametrize(
    "value, arousal_words",
    [(-0.3, "very calm, low-energy"), (0.0, "very calm, low-energy"), (0.2, "calm, subdued"), (0.399, "calm, subdued"),
     (0.4, "moderately animated"), (0.6, "energetic, animated"), (0.8, "highly aroused, intense"), (1.7, "highly aroused, intense")],
)
def test_tone_bands_cut_at_0_2_0_4_0_6_0_8_with_a_cut_going_up(value, arousal_words):
    assert tone_words({"arousal": value, "valence": 0.5, "dominance": 0.5}) == f"{arousal_words}; emotionally neutral; even, neither yielding nor forceful"


def test_render_clip_gives_the_numbers_or_the_words():
    analysis = {"transcript": 'He said "no"', "arousal": 0.6251, "valence": 0.41, "dominance": 0.549, "tone_words": "w1; w2; w3"}
    assert render_clip(analysis, "emo_num") == "[recording; transcript: \"He said 'no'\"; voice: arousal 0.63, valence 0.41, dominance 0.55]"
    assert render_clip(analysis, "emo_des") == "[recording; transcript: \"He said 'no'\"; voice sounds: w1; w2; w3]"


# ---------------------------------------------------------------- per-clip cache


def test_audio_digest_depends_on_samples_and_rate_only():
    a = np.linspace(-0.5, 0.5, 16000, dtype=np.float32)
    b = a.copy()
    assert clip_cache.audio_digest(a, 16000) == clip_cache.audio_digest(b, 16000)
    assert clip_cache.audio_digest(a, 16000) != clip_cache.audio_digest(a, 24000)
    b[7] += 1e-6
    assert clip_cache.audio_digest(a, 16000) != clip_cache.audio_digest(b, 16000)


def test_clip_cache_survives_the_process_and_recomputes_a_torn_entry(tmp_path, caplog):
    description = {"kind": "whisper", "pretrained": "x", "version": 1}
    first = clip_cache.ClipCache("asr", description, root=tmp_path)
    first.put("ab" * 32, {"transcript": "hello"})
    again = clip_cache.ClipCache("asr", description, root=tmp_path)
    assert again.get("ab" * 32) == {"transcript": "hello"} and again.stats()["hits"] == 1
    assert clip_cache.ClipCache("asr", {**description, "version": 2}, root=tmp_path).get("ab" * 32) is None
    (again.folder / "cd" / ("cd" * 32 + ".json")).parent.mkdir(parents=True)
    (again.folder / "cd" / ("cd" * 32 + ".json")).write_text('{"transcr', encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        assert again.get("cd" * 32) is None
    assert "unreadable cache entry" in caplog.text
    assert clip_cache.ClipCache("asr", description, root=tmp_path, enabled=False).get("ab" * 32) is None


def test_cache_root_follows_speecheq_cache_else_hf_home(monkeypatch, tmp_path):
    from huggingface_hub import constants

    monkeypatch.setenv("SPEECHEQ_CACHE", str(tmp_path))
    assert clip_cache.cache_root() == tmp_path / "clips"
    monkeypatch.delenv("SPEECHEQ_CACHE")
    assert clip_cache.cache_root() == clip_cache.Path(constants.HF_HOME) / "speecheq" / "clips"


# ---------------------------------------------------------------- text LLM


def test_tiny_causal_lm_generates_and_scores():
    lm = build_text_lm("tiny-random")
    conversation = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Option 1 or Option 2?"}]
    first, again = lm.generate([conversation]), lm.generate([conversation])
    assert first[0].text == again[0].text and 0 < first[0].output_tokens <= 32 and first[0].input_tokens > 5
    (lp1, lp2), = lm.score([conversation], '{"selected": "Option ', ("1", "2"))
    assert lp1 < 0 and lp2 < 0 and lp1 != lp2


def test_text_lm_options_are_checked_by_backend():
    with pytest.raises(ValueError, match="unknown options"):
        build_text_lm("tiny-random", base_url="http://x")
    with pytest.raises(ValueError, match="unknown endpoint options"):
        build_text_lm("openai:gpt", dtype="bfloat16")


@pytest.fixture
def chat_server(monkeypatch):
    monkeypatch.setenv("SPEECHEQ_TEST_CHAT_KEY", SENTINEL)
    fake = FakeApi(lambda record: json_answer({"choices": [{"message": {"role": "assistant", "content": '{"selected": "Option 2"}'}}],
                                               "usage": {"prompt_tokens": 900, "completion_tokens": 9}}))
    yield fake
    fake.close()


def _queries(dialogue, history="audio"):
    template = load_template()
    settings = protocol.ProtocolSettings(template=template, system=template["system"], history=history)
    trajectory = protocol.Trajectory("generate", "high_first", 0)
    return [protocol.build_query(settings, dialogue, 1, trajectory), protocol.build_query(settings, dialogue, 2, trajectory, "low")]


@pytest.mark.slow
def test_cascade_with_an_endpoint_llm_sends_text_only_and_records_what_it_gave(chat_server, dialogues, tmp_path):
    model = build_model("cascade", **{**TINY, "llm": "openai:test-llm"}, llm_base_url=f"{chat_server.url}/v1",
                        llm_api_key_env="SPEECHEQ_TEST_CHAT_KEY", llm_max_attempts=2, cache_dir=str(tmp_path))
    assert model.modes == frozenset({"generate"})
    queries = _queries(dialogues[0])
    outputs = model.generate(queries)
    assert [o.text for o in outputs] == ['{"selected": "Option 2"}'] * 2 and outputs[0].input_tokens == 900
    requests = sorted(chat_server.requests, key=lambda r: [q.seed for q in queries].index(r["body"]["seed"]))  # sent concurrently
    for query, output, request in zip(queries, outputs, requests):
        messages = request["body"]["messages"]
        assert [m["role"] for m in messages] == ["system", "user"] and isinstance(messages[1]["content"], str)
        assert "You cannot hear the recordings" in messages[0]["content"] and "input_audio" not in json.dumps(request["body"])
        audio = [p.clip for p in query.parts if p.kind == "audio"]
        assert [c["column"] for c in output.details["clips"]] == [c.column for c in audio]
        for clip in output.details["clips"]:
            assert render_clip(clip, "emo_num") in messages[1]["content"]
    assert len(outputs[1].details["clips"]) == 7  # round 2: turns 1-5 and both turn-6 options
    assert SENTINEL not in json.dumps(model.describe())


@pytest.mark.slow
def test_cascade_logprob_mode_with_a_transformers_llm(dialogues, tmp_path):
    model = build_model("cascade", **TINY, cache_dir=str(tmp_path))
    outputs = model.score(_queries(dialogues[1], history="text"))
    for output in outputs:
        assert output.choice in (1, 2) and len(output.option_logprobs) == 2 and output.details["variant"] == "emo_num"
    assert [len(o.details["clips"]) for o in outputs] == [2, 2]  # history=text: only the two options are clips


def test_cascade_rejects_unknown_args_and_variants(tmp_path):
    with pytest.raises(ValueError, match="variant must be one of emo_num, emo_des"):
        build_model("cascade", **TINY, variant="emo_txt", cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"unknown model args \['temprature'\]"):
        build_model("cascade", **TINY, temprature=0.3, cache_dir=str(tmp_path))


# ---------------------------------------------------------------- end to end through the runner


@pytest.mark.slow
def test_cascade_runs_end_to_end_on_the_embedded_sample_and_the_second_variant_reuses_every_clip(tmp_path, capsys):
    from eval_scripts.run import main

    runs = {}
    for variant in ("emo_num", "emo_des"):
        out = tmp_path / variant
        args = ["--model", "cascade", "--output-dir", str(out), "--limit", "2", "--batch-size", "4", "--n-bootstrap", "50", "--no-progress",
                "--model-args", f"asr=tiny-random,ser=tiny-random,llm=tiny-random,variant={variant},cache_dir={tmp_path / 'cache'}"]
        assert main(args) == 0
        runs[variant] = (store.read_samples(out), json.loads((out / "results.json").read_text()))
    assert "cascade:emo_des" in capsys.readouterr().out
    first, second = runs["emo_num"][1]["model"], runs["emo_des"][1]["model"]
    assert first["cache"]["asr"]["misses"] == first["cache"]["ser"]["misses"] == 16  # 2 dialogues x 8 clips, each computed once
    assert second["cache"]["asr"]["misses"] == second["cache"]["ser"]["misses"] == 0  # the other variant redoes nothing
    assert len(list((tmp_path / "cache").glob("asr-*/*/*.json"))) == len(list((tmp_path / "cache").glob("ser-*/*/*.json"))) == 16
    given = {}
    for variant, (records, _) in runs.items():
        for record, entry in store.iter_rounds(records):
            clips = entry.details["clips"]
            assert entry.details["variant"] == variant and len(clips) == (5 if entry.round == 1 else 7)
            for clip in clips:
                assert isinstance(clip["transcript"], str) and all(isinstance(clip[d], float) for d in ("valence", "arousal", "dominance"))
                if variant == "emo_des":
                    assert clip["tone_words"] == tone_words(clip)
                given.setdefault((record.id, clip["column"]), set()).add(tuple(clip[k] for k in ("transcript", "valence", "arousal", "dominance")))
    assert len(given) == 16 and all(len(seen) == 1 for seen in given.values())  # both variants gave the LLM the same per-clip values

