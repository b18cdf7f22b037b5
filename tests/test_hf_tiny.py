"""The Hugging Face adapters with tiny random-weight models built offline, on real clips."""

from __future__ import annotations

import pytest
import torch

from eval_scripts import protocol
from eval_scripts import runner
from eval_scripts import store
from eval_scripts.models.base import build_model
from eval_scripts.prompts import load_template

FAMILIES = ["qwen2.5-omni", "qwen3-omni", "qwen2-audio"]


@pytest.fixture(scope="module", params=FAMILIES)
def tiny(request):
    return build_model(request.param, pretrained="tiny-random", max_new_tokens=6)


def _settings(**kw):
    template = load_template()
    return protocol.ProtocolSettings(template=template, system=template["system"], **kw)


def _audio_runs(ids: list[int], audio_id: int) -> list[tuple[int, int]]:
    """(start, length) of each run of audio placeholder tokens."""
    runs, k = [], 0
    while k < len(ids):
        if ids[k] == audio_id:
            start = k
            while k < len(ids) and ids[k] == audio_id:
                k += 1
            runs.append((start, k - start))
        else:
            k += 1
    return runs


@pytest.mark.parametrize(
    "round_, inference, history",
    [(1, "sequential", "audio"), (2, "sequential", "audio"), (2, "direct", "audio"), (2, "sequential", "text")],
)
def test_model_inputs_interleave_the_right_clips_in_order(tiny, dialogues, round_, inference, history):
    settings = _settings(inference=inference, history=history)
    traj = protocol.Trajectory("generate", "low_first", 0)
    turn4 = protocol.context_level(settings, "low") if round_ == 2 else None
    query = protocol.build_query(settings, dialogues[0], round_, traj, turn4)
    expected_cols = [p.clip.column for p in query.parts if p.kind == "audio"]
    if history == "audio":
        first = ["turn1_audio", "turn2_audio", "turn3_audio"]
        first += [f"turn4_audio_{'high' if inference == 'direct' else 'low'}", "turn5_audio"] if round_ == 2 else []
        turn = 4 if round_ == 1 else 6
        assert expected_cols == first + [f"turn{turn}_audio_low", f"turn{turn}_audio_high"]
    else:
        assert expected_cols == ["turn6_audio_low", "turn6_audio_high"]

    inputs = tiny.encode([query])
    processor = tiny.processor
    # 1) the audio features are those of the query's clips, in order of appearance
    got = inputs["input_features"]
    valid = inputs["feature_attention_mask"].sum(-1).tolist()
    clips = [p.clip.array for p in query.parts if p.kind == "audio"]
    assert got.shape[0] == len(expected_cols) == len(clips)
    for row, (clip, n_valid) in enumerate(zip(clips, valid)):
        alone = processor.feature_extractor(clip, sampling_rate=16000, return_tensors="pt", padding="max_length")["input_features"][0]
        assert abs(n_valid - len(clip) / 160) <= 1  # 10-ms frames of this very clip
        # every frame but the boundary one equals the clip's own features
        assert torch.allclose(got[row, :, : n_valid - 1], alone[:, : n_valid - 1], atol=1e-4)
    # 2) each clip's placeholder run sits where the prompt puts it, with text between them verbatim
    ids = inputs["input_ids"][0].tolist()
    audio_id = processor.tokenizer.convert_tokens_to_ids(processor.tokenizer.audio_token)
    runs = _audio_runs(ids, audio_id)
    assert len(runs) == len(expected_cols)
    # longer clips get more placeholder tokens: the runs follow the clips' lengths in order
    durations = [p.clip.duration_s for p in query.parts if p.kind == "audio"]
    for (_, n_a), (_, n_b), d_a, d_b in zip(runs, runs[1:], durations, durations[1:]):
        if d_a > d_b + 0.5:
            assert n_a > n_b
        elif d_b > d_a + 0.5:
            assert n_b > n_a
    collapsed, k = [], 0
    for start, n in runs:
        collapsed += ids[k:start] + [audio_id]
        k = start + n
    collapsed += ids[k:]
    assert processor.tokenizer.decode(collapsed) == tiny.prompt_text(query)


def test_tiny_models_are_labelled_and_deterministic(tiny):
    description = tiny.describe()
    assert description["pretrained"] == "tiny-random" and "tiny random weights" in description["weights"]
    assert "tiny random weights" in description["label"]
    again = build_model(tiny.name, pretrained="tiny-random", max_new_tokens=6)
    for a, b in zip(tiny.model.state_dict().values(), again.model.state_dict().values()):
        assert torch.equal(a, b)


def _answers(run_dir):
    return [
        (r.uid, r.raw, r.choice, r.input_tokens, r.output_tokens, r.turn4_in_context)
        for _, r in store.iter_rounds(store.read_samples(run_dir))
    ]


@pytest.mark.slow
def test_batch_of_4_equals_batch_of_1_under_greedy_decoding(tiny, real_rows, tmp_path):
    rows = real_rows
    results = {}
    for batch in (1, 4):
        config = runner.RunConfig(model=tiny.name, output_dir=str(tmp_path / f"b{batch}"), batch_size=batch, choice_mode="both", n_bootstrap=0)
        results[batch] = runner.run(config, model=tiny, dataset=rows, progress=False)
    assert _answers(tmp_path / "b1") == _answers(tmp_path / "b4")
    assert results[1]["metrics"] == results[4]["metrics"]
    assert results[1]["by_choice_mode"] == results[4]["by_choice_mode"]
    generated = [raw for uid, raw, *_ in _answers(tmp_path / "b1") if "/generate/" in uid]
    assert len(generated) == 2 * len(rows) and all(raw is not None for raw in generated)
    assert results[1]["label"] == f"{tiny.name} (tiny random weights) [both]"


@pytest.mark.slow
def test_logprob_mode_scores_the_two_answer_tokens(tiny, dialogues):
    query = protocol.build_query(_settings(), dialogues[1], 1, protocol.Trajectory("logprob", "random", 0))
    (out,) = tiny.score([query])
    lp1, lp2 = out.option_logprobs
    assert lp1 < 0 and lp2 < 0 and out.choice == (1 if lp1 > lp2 else 2)
    # the same numbers by hand: next-token distribution after the answer prefix
    inputs = tiny.encode([query], answer_prefix=True)
    with torch.inference_mode():
        logits = tiny.model(**inputs).logits[0, -1].float()
    ref = torch.log_softmax(logits, -1)
    one, two = (tiny.tokenizer.encode(a, add_special_tokens=False)[0] for a in ("1", "2"))
    assert abs(ref[one].item() - lp1) < 1e-4 and abs(ref[two].item() - lp2) < 1e-4
    assert tiny.prompt_text(query, query.meta["answer_prefix"]).endswith('<|im_start|>assistant\n{"selected": "Option ')


@pytest.mark.slow
def test_short_feature_padding_gives_the_processor_default_logits(dialogues):
    """Qwen2.5-Omni's processor pads every clip to 30 s; we pad just past the longest clip (faster)."""
    model = build_model("qwen2.5-omni", pretrained="tiny-random")
    queries = [protocol.build_query(_settings(), d, 2, protocol.Trajectory("generate", "random", 0), "high") for d in dialogues[:2]]
    ours = model.encode(queries)
    texts = [model.prompt_text(q) for q in queries]
    audio = [p.clip.array for q in queries for p in q.parts if p.kind == "audio"]
    default = model.processor(text=texts, audio=audio, return_tensors="pt", text_kwargs={"padding": True})
    assert default["input_features"].shape[-1] == 3000 > ours["input_features"].shape[-1]
    assert torch.equal(ours["input_ids"], default["input_ids"])
    with torch.inference_mode():
        assert torch.equal(model.model(**ours).logits, model.model(**default).logits)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.slow
def test_a_checkpoint_folder_loads_through_from_pretrained(family, dialogues, tmp_path):
    """pretrained=<folder>: AutoConfig, from_pretrained, and the processor (audio-only for the omni models)."""
    from eval_scripts.models.tiny import save_tiny

    folder = save_tiny(family, tmp_path / family)
    loaded = build_model(family, pretrained=str(folder), max_new_tokens=6)
    reference = build_model(family, pretrained="tiny-random", max_new_tokens=6)
    assert loaded.describe()["pretrained"] == str(folder) and "tiny" not in loaded.describe()["label"]
    for (name, a), (_, b) in zip(reference.model.state_dict().items(), loaded.model.state_dict().items()):
        assert torch.equal(a, b), name
    query = protocol.build_query(_settings(), dialogues[0], 1, protocol.Trajectory("generate", "random", 0))
    assert loaded.prompt_text(query) == reference.prompt_text(query)
    assert [o.text for o in loaded.generate([query])] == [o.text for o in reference.generate([query])]


@pytest.mark.slow
@pytest.mark.parametrize("name, kwargs", [("qwen2.5-omni", {"pretrained": "tiny-random", "max_new_tokens": 6}), ("prosody", {"rule": "closest_to_catalyst"})])
def test_loading_ahead_in_a_thread_gives_the_same_answers(name, kwargs, real_rows, tmp_path):
    answers = {}
    for ahead in (0, 1):
        model = build_model(name, **kwargs)  # a fresh adapter: nothing cached from the other run
        # batch 1 = chunks of two dialogues, so the loader works on the next chunk while the model answers
        config = runner.RunConfig(model=name, output_dir=str(tmp_path / f"ahead{ahead}"), batch_size=1, prefetch=ahead, n_bootstrap=0)
        results = runner.run(config, model=model, dataset=real_rows, progress=False)
        assert results["deployment"]["session"]["prefetch"] == ahead
        answers[ahead] = _answers(tmp_path / f"ahead{ahead}")
    assert answers[0] == answers[1]


@pytest.mark.slow
def test_loading_in_worker_processes_gives_the_same_answers(real_rows, tmp_path, monkeypatch):
    """--loader-workers: decoding and log-mels in spawned processes (the GPU default), handed back to the adapter."""
    from transformers import WhisperFeatureExtractor

    extract, here = WhisperFeatureExtractor.__call__, []
    monkeypatch.setattr(WhisperFeatureExtractor, "__call__", lambda *args, **kwargs: here.append(1) or extract(*args, **kwargs))
    answers, log_mels_here = {}, {}
    for workers in (0, 2):
        here.clear()
        model = build_model("qwen2.5-omni", pretrained="tiny-random", max_new_tokens=6)
        config = runner.RunConfig(model=model.name, output_dir=str(tmp_path / f"w{workers}"), batch_size=1, prefetch=1,
                                  loader_workers=workers, n_bootstrap=0)
        results = runner.run(config, model=model, dataset=real_rows, progress=False)
        assert results["deployment"]["session"]["loader_workers"] == workers
        answers[workers], log_mels_here[workers] = _answers(tmp_path / f"w{workers}"), len(here)
    assert answers[0] == answers[2]
    assert log_mels_here == {0: 8 * len(real_rows), 2: 0}  # with workers, every clip's log-mels were made in a worker


def test_log_mels_prepared_ahead_are_the_ones_encode_uses(real_rows, monkeypatch):
    from transformers import WhisperFeatureExtractor

    model = build_model("qwen2.5-omni", pretrained="tiny-random")
    dialogue = runner.dialogue_from_row(real_rows[0], 16000)
    model.prepare_clips(protocol.heard_clips(_settings(), dialogue))
    extract, calls = WhisperFeatureExtractor.__call__, []
    monkeypatch.setattr(WhisperFeatureExtractor, "__call__", lambda *args, **kwargs: calls.append(1) or extract(*args, **kwargs))
    query = protocol.build_query(_settings(), dialogue, 2, protocol.Trajectory("generate", "random", 0), "low")
    ahead = model.encode([query])
    assert calls == []  # all seven clips of the round-2 prompt were ready
    monkeypatch.undo()
    plain = build_model("qwen2.5-omni", pretrained="tiny-random").encode([query])
    assert ahead.keys() == plain.keys() and all(torch.equal(ahead[k], plain[k]) for k in plain)


def test_log_mels_made_by_a_worker_process_are_the_ones_encode_uses(real_rows, monkeypatch):
    """`clip_preparer()` is what the runner's loader worker processes run; `adopt_prepared` hands the result back."""
    import pickle

    from transformers import WhisperFeatureExtractor

    model = build_model("qwen2.5-omni", pretrained="tiny-random")
    dialogue = runner.dialogue_from_row(real_rows[0], 16000)
    prepare = pickle.loads(pickle.dumps(model.clip_preparer()))  # as a spawned worker receives it
    for clip in dialogue.clips.values():
        model.adopt_prepared(clip, pickle.loads(pickle.dumps(prepare(clip))))
    extract, calls = WhisperFeatureExtractor.__call__, []
    monkeypatch.setattr(WhisperFeatureExtractor, "__call__", lambda *args, **kwargs: calls.append(1) or extract(*args, **kwargs))
    query = protocol.build_query(_settings(), dialogue, 2, protocol.Trajectory("generate", "random", 0), "low")
    adopted = model.encode([query])
    assert calls == []
    monkeypatch.undo()
    plain = build_model("qwen2.5-omni", pretrained="tiny-random").encode([query])
    assert all(torch.equal(adopted[k], plain[k]) for k in plain)
    assert build_model("qwen2-audio", pretrained="tiny-random").clip_preparer() is None  # its processor pads to 30 s itself


def test_a_new_prompt_file_does_not_change_the_tiny_tokenizer(tmp_path, monkeypatch):
    """The tiny models' tokenizer is trained on named prompt files, so adding a prompt leaves every tiny answer as it was."""
    import shutil

    import eval_scripts.prompts
    from eval_scripts.models import tiny

    before = tiny._bpe_vocab_and_merges()
    copy = tmp_path / "prompts"
    shutil.copytree(eval_scripts.prompts.PROMPTS_DIR, copy)
    (copy / "new_task_v1.json").write_text('{"instructions": "' + "entirely new words like zephyr quixotic " * 50 + '"}')
    monkeypatch.setattr(eval_scripts.prompts, "PROMPTS_DIR", copy)
    tiny._bpe_vocab_and_merges.cache_clear()
    try:
        assert tiny._bpe_vocab_and_merges() == before
        (copy / tiny.TOKENIZER_CORPUS[0]).write_text('{"system": "zephyr quixotic"}')  # the named files do count
        tiny._bpe_vocab_and_merges.cache_clear()
        assert tiny._bpe_vocab_and_merges() != before
    finally:
        tiny._bpe_vocab_and_merges.cache_clear()
