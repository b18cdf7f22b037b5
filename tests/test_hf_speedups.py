"""The speed-ups of eval_scripts/models/hf_speedups.py: same answers as plain transformers, and a loud fallback.

Paths that only a GPU runs (varlen flash attention, the compiled static-cache decode step
with CUDA graphs) are tested on CUDA and skipped elsewhere; their CPU-side logic (packing,
the static cache, tracing the decode step as one graph) is tested here on the tiny models.
"""

from __future__ import annotations

import gc
import logging
import weakref

import numpy as np
import pytest
import torch

from eval_scripts import protocol
from eval_scripts import runner
from eval_scripts import store
from eval_scripts.models import hf_families
from eval_scripts.models import hf_speedups
from eval_scripts.models.base import build_model
from eval_scripts.models.memo import ClipMemo
from eval_scripts.prompts import load_template

FAMILIES = ["qwen2.5-omni", "qwen3-omni", "qwen2-audio"]
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _settings():
    template = load_template()
    return protocol.ProtocolSettings(template=template, system=template["system"])


def _queries(dialogues, round_=1):
    traj = protocol.Trajectory("generate", "random", 0)
    return [protocol.build_query(_settings(), d, round_, traj, "low" if round_ == 2 else None) for d in dialogues]


def _answers(run_dir):
    return [(r.uid, r.raw, r.choice, r.input_tokens, r.output_tokens) for _, r in store.iter_rounds(store.read_samples(run_dir))]


def _logprobs(run_dir):
    return [r.option_logprobs for _, r in store.iter_rounds(store.read_samples(run_dir)) if r.option_logprobs]


def _speedup_warnings(caplog):
    return [r for r in caplog.records if r.name == hf_speedups.__name__ and r.levelno == logging.WARNING]


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_answers_are_identical_with_and_without_the_speedups(family, real_rows, tmp_path):
    rows = real_rows.select(range(2))
    runs = {}
    for on in (True, False):
        model = build_model(family, pretrained="tiny-random", max_new_tokens=4, speedups=on)
        assert bool(model.describe()["speedups"]) is on
        config = runner.RunConfig(model=family, output_dir=str(tmp_path / str(on)), batch_size=2, choice_mode="both", n_bootstrap=0)
        runner.run(config, model=model, dataset=rows, progress=False)
        runs[on] = tmp_path / str(on)
    assert _answers(runs[True]) == _answers(runs[False])
    fast, plain = np.array(_logprobs(runs[True])), np.array(_logprobs(runs[False]))
    assert fast.shape == plain.shape == (2 * len(rows), 2)
    assert np.allclose(fast, plain, atol=1e-5, rtol=0)


def test_missing_internals_fall_back_to_plain_transformers_with_one_warning(dialogues, monkeypatch, caplog):
    import transformers.masking_utils

    plain = build_model("qwen2.5-omni", pretrained="tiny-random", max_new_tokens=6, speedups=False)
    with monkeypatch.context() as patch:
        patch.delattr(transformers.masking_utils, "AttentionMaskInterface")  # as if transformers had renamed it
        with caplog.at_level(logging.WARNING):
            model = build_model("qwen2.5-omni", pretrained="tiny-random", max_new_tokens=6)
    (warning,) = _speedup_warnings(caplog)
    assert "AttentionMaskInterface" in warning.getMessage() and "without the speed-ups" in warning.getMessage()
    assert model.describe()["speedups"] == [] and "AttentionMaskInterface" in model.describe()["speedups_off"]
    assert model.model.config.get_text_config()._attn_implementation == "sdpa"
    queries = _queries(dialogues[:1])
    assert [o.text for o in model.generate(queries)] == [o.text for o in plain.generate(queries)]


def test_the_thinker_layout_of_older_transformers_is_detected(caplog):
    """transformers 5.17 kept the audio tower on the thinker and `thinker.model` was the text model."""
    model = build_model("qwen2.5-omni", pretrained="tiny-random", speedups=False).model
    inner = model.model
    model.audio_tower = inner.audio_tower
    model.model = inner.language_model
    with caplog.at_level(logging.WARNING):
        speedups = hf_speedups.install(model, hf_families.family("qwen2.5-omni"), audio_token_id=3)
    (warning,) = _speedup_warnings(caplog)
    assert "layout" in speedups.reason and "layout" in warning.getMessage()
    assert speedups.installed == [] and not speedups.static_cache
    assert model.config.get_text_config()._attn_implementation == "sdpa"  # nothing was changed
    assert "get_audio_features" not in vars(model.model) and "get_audio_features" not in vars(inner)


@pytest.mark.parametrize("broken", ["_ragged_sdpa", "_packed_audio_attention"])
def test_a_speedup_that_changes_the_outputs_is_caught_by_the_probe(broken, dialogues, monkeypatch, caplog):
    def wrong(module, query, key, value, attention_mask, **kwargs):  # right shape, wrong numbers
        return query.transpose(1, 2) * 0.5, None

    plain = build_model("qwen2.5-omni", pretrained="tiny-random", max_new_tokens=6, speedups=False)
    monkeypatch.setattr(hf_speedups, broken, wrong)
    with caplog.at_level(logging.WARNING):
        model = build_model("qwen2.5-omni", pretrained="tiny-random", max_new_tokens=6)
    (warning,) = _speedup_warnings(caplog)
    expected = "logits" if broken == "_ragged_sdpa" else "audio features"
    assert f"the probe's {expected} differ" in warning.getMessage()
    assert model.describe()["speedups"] == []
    monkeypatch.undo()
    queries = _queries(dialogues[:1])
    assert [o.text for o in model.generate(queries)] == [o.text for o in plain.generate(queries)]
    assert [o.option_logprobs for o in model.score(queries)] == [o.option_logprobs for o in plain.score(queries)]


def test_packed_causal_attention_is_row_by_row_attention_on_the_real_tokens():
    generator = torch.Generator().manual_seed(0)
    batch, heads, kv_heads, length, dim = 3, 4, 2, 9, 8
    query = torch.randn(batch, heads, length, dim, generator=generator)
    key, value = (torch.randn(batch, kv_heads, length, dim, generator=generator) for _ in range(2))
    lengths = [5, 9, 1]
    out = hf_speedups.packed_causal_attention(query, key, value, hf_speedups.LeftPadding(lengths, length), dim**-0.5, hf_speedups.reference_kernel)
    assert out.shape == (batch, length, heads, dim)
    for row, n in enumerate(lengths):
        start = length - n
        q = query[row : row + 1, :, start:]
        k, v = (t[row : row + 1, :, start:].repeat_interleave(heads // kv_heads, dim=1) for t in (key, value))
        expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)[0].transpose(0, 1)
        assert torch.allclose(out[row, start:], expected, atol=1e-6)
        assert not out[row, :start].any()  # padding stays zero


@pytest.mark.parametrize("family", ["qwen2.5-omni", pytest.param("qwen3-omni", marks=pytest.mark.slow)])
def test_the_varlen_path_taken_on_cuda_gives_the_row_by_row_answers(family, dialogues, monkeypatch):
    """The packing around the CUDA-only varlen kernel, for the whole model: the kernel's contract in plain SDPA stands in for it."""
    calls = []

    def stand_in(query):
        calls.append(tuple(query.shape))
        return hf_speedups.reference_kernel

    queries = _queries(dialogues[:3])
    plain = build_model(family, pretrained="tiny-random", max_new_tokens=6)
    expected = ([o.text for o in plain.generate(queries)], [o.option_logprobs for o in plain.score(queries)])
    monkeypatch.setattr(hf_speedups, "varlen_kernel", stand_in)
    packed = build_model(family, pretrained="tiny-random", max_new_tokens=6)
    assert [o.text for o in packed.generate(queries)] == expected[0]
    assert np.allclose([o.option_logprobs for o in packed.score(queries)], expected[1], atol=1e-5)
    assert any(shape[0] == 3 for shape in calls) and any(shape[0] == 1 for shape in calls)  # the decoder's batch and the encoder's packed call


@pytest.mark.parametrize("family", ["qwen2.5-omni", "qwen3-omni"])
def test_the_packed_audio_encoder_gives_each_clip_exactly_its_own_encoding(family, dialogues):
    """One SDPA call per chunk length over a batch of clips = the stock per-chunk loop, bit for bit, whatever the batch-mates."""
    model = build_model(family, pretrained="tiny-random")
    owner, config = model.model.model, model.model.model.audio_tower.config
    assert config._attn_implementation == hf_speedups.PACKED_AUDIO
    clips = [c.array for c in dialogues[0].clips.values()][:5]
    extractor = model._input_processor.feature_extractor

    def encode(arrays):
        feats = extractor(arrays, sampling_rate=16000, return_tensors="pt")
        with torch.inference_mode():
            out = owner.get_audio_features(feats["input_features"], feats["attention_mask"]).last_hidden_state
        return out

    packed_all = encode(clips)
    config._attn_implementation = "sdpa"
    try:
        stock_all = encode(clips)
        stock_alone = [encode([c]) for c in clips]
    finally:
        config._attn_implementation = hf_speedups.PACKED_AUDIO
    assert torch.equal(packed_all, stock_all)
    assert torch.equal(packed_all, torch.cat(stock_alone))


@pytest.mark.parametrize("family", ["qwen2.5-omni", "qwen3-omni", pytest.param("qwen2-audio", marks=pytest.mark.slow)])
def test_the_static_cache_gives_the_dynamic_cache_answers(family, dialogues):
    """On a GPU the static cache is the default (transformers compiles its decode step); here it runs eagerly."""
    static = build_model(family, pretrained="tiny-random", max_new_tokens=6, static_cache=True)
    dynamic = build_model(family, pretrained="tiny-random", max_new_tokens=6)
    assert "static_cache" in static.describe()["speedups"] and "static_cache" not in dynamic.describe()["speedups"]
    assert static.speedups.generate_kwargs(1700, 128) == {"cache_implementation": "static", "max_cache_len": 2048}
    queries = _queries(dialogues[:2]) + _queries(dialogues[:1], round_=2)
    assert [o.text for o in static.generate(queries)] == [o.text for o in dynamic.generate(queries)]


@pytest.mark.slow
def test_the_decode_step_traces_as_one_graph(dialogues):
    """transformers compiles the static-cache decode step with fullgraph=True on a GPU: our hooks and attention must not break it."""
    from transformers import CompileConfig

    static = build_model("qwen2.5-omni", pretrained="tiny-random", max_new_tokens=8, static_cache=True)
    compile_config = CompileConfig(backend="eager", fullgraph=True, mode=None)  # dynamo's tracing, no code generation
    compile_config._compile_all_devices = True  # transformers compiles on accelerators only
    static.model.generation_config.compile_config = compile_config
    dynamic = build_model("qwen2.5-omni", pretrained="tiny-random", max_new_tokens=8)
    queries = _queries(dialogues[:2])
    assert [o.text for o in static.generate(queries)] == [o.text for o in dynamic.generate(queries)]
    assert hasattr(static.model, "_compiled_call")  # the decode steps ran through torch.compile, in one graph


def test_round_2_encodes_only_the_clips_round_1_has_not(dialogues):
    model = build_model("qwen2.5-omni", pretrained="tiny-random", max_new_tokens=2)
    encoded = []
    model.model.model.audio_tower.register_forward_pre_hook(lambda m, args, kwargs: encoded.append(len(kwargs["feature_lens"])), with_kwargs=True)
    model.generate(_queries(dialogues[:1], round_=1))  # turns 1-3 and both turn-4 options
    model.generate(_queries(dialogues[:1], round_=2))  # adds turn 5 and both turn-6 options
    model.generate(_queries(dialogues[:1], round_=2))  # nothing new
    assert encoded == [5, 3]


@pytest.mark.slow
def test_the_adapter_keeps_no_clip_alive(real_rows):
    model = build_model("qwen2.5-omni", pretrained="tiny-random", max_new_tokens=2)
    dialogue = runner.dialogue_from_row(real_rows[1], 16000)
    model.prepare_clips(list(dialogue.clips.values()))
    model.generate(_queries([dialogue]))
    alive = [weakref.ref(c.array) for c in dialogue.clips.values()]
    del dialogue
    gc.collect()
    assert all(ref() is None for ref in alive)


def test_a_clip_memo_entry_lives_exactly_as_long_as_its_clip():
    memo = ClipMemo()
    clip = np.ones(16000, dtype=np.float32)
    memo.put(clip, "log-mels", "value")
    assert memo.get(clip, "log-mels") == "value" and memo.get(clip, "other") is None and len(memo) == 1
    address = id(clip)
    del clip
    gc.collect()
    assert len(memo) == 0
    # A new array at the freed address is a different clip: nothing stale may be found for it. (CPython
    # usually hands the freed address out again at once; whether it does depends on the allocator's state.)
    fresh = [np.zeros(16000, dtype=np.float32) for _ in range(50)]
    assert all(memo.get(array, "log-mels") is None for array in fresh)
    reused = [array for array in fresh if id(array) == address]
    assert all(memo.get(array, "log-mels") is None for array in reused)
    memo.put([0.0], "x", "lists cannot be weakly referenced, so they are not memoised")
    assert len(memo) == 0


@cuda
def test_the_varlen_kernel_matches_the_reference_on_cuda():
    generator = torch.Generator(device="cuda").manual_seed(0)
    query = torch.randn(3, 8, 64, 64, device="cuda", dtype=torch.bfloat16, generator=generator)
    key, value = (torch.randn(3, 4, 64, 64, device="cuda", dtype=torch.bfloat16, generator=generator) for _ in range(2))
    kernel = hf_speedups.varlen_kernel(query)
    if kernel is None:
        pytest.skip("this torch has no torch.nn.attention.varlen")
    padding = hf_speedups.LeftPadding([64, 17, 40], 64)
    fast = hf_speedups.packed_causal_attention(query, key, value, padding, 0.125, kernel)
    reference = hf_speedups.packed_causal_attention(query, key, value, padding, 0.125, hf_speedups.reference_kernel)
    assert torch.allclose(fast.float(), reference.float(), atol=2e-2)


@cuda
def test_the_compiled_static_cache_on_cuda_gives_the_eager_answers(dialogues):
    queries = _queries(dialogues[:2])
    fast = build_model("qwen2.5-omni", pretrained="tiny-random", max_new_tokens=8)  # static cache + compiled step: the CUDA default
    assert "static_cache" in fast.describe()["speedups"]
    plain = build_model("qwen2.5-omni", pretrained="tiny-random", max_new_tokens=8, speedups=False)
    assert [o.text for o in fast.generate(queries)] == [o.text for o in plain.generate(queries)]


class _Cache:
    def __init__(self, croppable: bool) -> None:
        self.is_croppable = croppable


@pytest.mark.parametrize(
    "device, cache, returned, assistant, deferred",
    [
        ("cuda", None, False, False, True),
        ("cuda", _Cache(False), False, False, True),  # our generate never returns its cache
        ("cuda", _Cache(False), True, False, False),  # a returned cache must be rolled back: only if croppable
        ("cuda", _Cache(True), True, False, True),
        ("cuda", None, False, True, False),  # assisted decoding keeps the per-step check
        ("mps", None, False, False, True),  # transformers' own case, unchanged
        ("cpu", None, False, False, False),  # CPU tensors have no events to defer with
    ],
)
def test_the_stop_check_is_deferred_on_cuda_by_transformers_own_rule(device, cache, returned, assistant, deferred):
    assert hf_speedups._defer_on_cuda_or_mps(torch.device(device), cache, returned, assistant) is deferred


@cuda
def test_deferring_the_stop_check_on_cuda_keeps_the_answers(dialogues, monkeypatch):
    from transformers.generation.utils import DeferredStopCheck

    queries = _queries(dialogues[:2])
    model = build_model("qwen2.5-omni", pretrained="tiny-random", max_new_tokens=8)
    assert "deferred_stop_check" in model.describe()["speedups"]
    deferred = [o.text for o in model.generate(queries)]
    monkeypatch.setattr(DeferredStopCheck, "is_supported", staticmethod(lambda device, cache, cache_is_returned, is_assistant: False))
    assert [o.text for o in model.generate(queries)] == deferred
