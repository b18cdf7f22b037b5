"""Tiny random-weight versions of the cascade's and the trajectory track's models, built offline from configs.

Same classes as the real models (Whisper, the wav2vec2 V/A/D regressor, the
CSER with a WavLM encoder, a Qwen2 causal LM, a wav2vec2 emotion classifier,
the full Qwen2.5-Omni with its talker and token2wav), the real processors and
the real generation paths, at toy sizes with seeded weights: every code path
runs in seconds on a CPU with no download. Outputs are meaningless and every
description says "tiny random weights".
"""

from __future__ import annotations

import functools

from eval_scripts.models.hf_audio_lm import LoadedModel
from eval_scripts.models.tiny import _INIT_RANGE
from eval_scripts.models.tiny import TINY
from eval_scripts.models.tiny import _bpe_vocab_and_merges
from eval_scripts.models.tiny import build_tiny
from eval_scripts.models.tiny import seeded_model
from eval_scripts.models.tiny import tiny_tokenizer

WEIGHTS = "tiny random weights (built offline from a config; outputs are meaningless)"
WHISPER_SPECIALS = ("<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>", "<|startoflm|>",
                    "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>")
WHISPER_TIMESTAMPS = 1501  # <|0.00|> .. <|30.00|>, as in the released vocabularies
CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# The emotion labels of common audio emotion classifiers (e.g. the SUPERB ER task: neu, hap, ang, sad).
TINY_EMOTION_LABELS = ("neu", "hap", "ang", "sad")
_SMALL = 32


def _describe(model, **extra) -> dict:
    return {"pretrained": TINY, "weights": WEIGHTS, "architecture": type(model).__name__,
            "parameters": int(sum(p.numel() for p in model.parameters())), **extra}


def _conv_stack() -> dict:
    """wav2vec2-family feature encoder at the real strides (320 samples per frame at 16 kHz), narrow channels."""
    return dict(conv_dim=(_SMALL,) * 7, conv_stride=(5, 2, 2, 2, 2, 2, 2), conv_kernel=(10, 3, 3, 3, 3, 2, 2),
                num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, hidden_size=_SMALL, num_hidden_layers=2,
                num_attention_heads=2, intermediate_size=2 * _SMALL, initializer_range=_INIT_RANGE)


@functools.lru_cache(maxsize=1)
def _whisper_tokenizer():
    from tokenizers import AddedToken
    from transformers import WhisperTokenizer

    vocab, merges = _bpe_vocab_and_merges()
    vocab = dict(vocab)
    for token in WHISPER_SPECIALS:
        vocab[token] = len(vocab)
    tokenizer = WhisperTokenizer(vocab=vocab, merges=merges)
    tokenizer.add_tokens([AddedToken(t, special=True, normalized=False) for t in WHISPER_SPECIALS], special_tokens=True)
    tokenizer.add_tokens([AddedToken(f"<|{i * 0.02:.2f}|>", normalized=False) for i in range(WHISPER_TIMESTAMPS)])
    return tokenizer


def build_tiny_whisper(seed: int = 0, **dims) -> LoadedModel:
    """WhisperForConditionalGeneration (80 mel bins, d_model 64, 2 + 2 layers) with an English/transcribe prompt.

    `dims` override the WhisperConfig sizes (the benchmark builds the architecture of a released size this way).
    """
    import copy

    from transformers import WhisperConfig
    from transformers import WhisperFeatureExtractor
    from transformers import WhisperForConditionalGeneration
    from transformers import WhisperProcessor

    tokenizer = copy.deepcopy(_whisper_tokenizer())
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in WHISPER_SPECIALS}
    eot = ids["<|endoftext|>"]
    config = WhisperConfig(
        vocab_size=len(tokenizer), num_mel_bins=80, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_source_positions=1500, max_target_positions=448,
        pad_token_id=eot, bos_token_id=eot, eos_token_id=eot, decoder_start_token_id=ids["<|startoftranscript|>"],
        suppress_tokens=[], begin_suppress_tokens=[eot], init_std=_INIT_RANGE,
    )
    config.update(dims)
    model = seeded_model(WhisperForConditionalGeneration, config, seed)
    generation = model.generation_config
    generation.lang_to_id = {"<|en|>": ids["<|en|>"]}
    generation.task_to_id = {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]}
    generation.no_timestamps_token_id = ids["<|notimestamps|>"]
    generation.prev_sot_token_id = ids["<|startofprev|>"]
    generation.is_multilingual = True
    generation.decoder_start_token_id = ids["<|startoftranscript|>"]
    generation.max_length = config.max_target_positions
    generation.begin_suppress_tokens = [eot]
    # A trained Whisper never emits timestamps after <|notimestamps|>; random weights would, so they are suppressed.
    generation.suppress_tokens = list(range(ids["<|notimestamps|>"] + 1, len(tokenizer)))
    processor = WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tokenizer)
    return LoadedModel(model=model, processor=processor, description=_describe(model, init_seed=int(seed)))


def build_tiny_vad_regressor(seed: int = 0) -> LoadedModel:
    """The audeering architecture (layer-norm wav2vec2 + regression head), labels arousal, dominance, valence."""
    from transformers import Wav2Vec2Config
    from transformers import Wav2Vec2FeatureExtractor

    from eval_scripts.components.ser import AUDEERING_ORDER
    from eval_scripts.components.ser import Wav2Vec2ForVadRegression

    config = Wav2Vec2Config(**_conv_stack(), feat_extract_norm="layer", do_stable_layer_norm=True, conv_bias=True, final_dropout=0.1,
                            id2label=dict(enumerate(AUDEERING_ORDER)), problem_type="regression")
    model = seeded_model(Wav2Vec2ForVadRegression, config, seed)
    extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True,
                                         return_attention_mask=True)
    return LoadedModel(model=model, processor=extractor, description=_describe(model, init_seed=int(seed)))


def build_tiny_cser(seed: int = 0, lstm_hidden_size: int = 16) -> LoadedModel:
    """The CSER with a tiny WavLM encoder and a 2-layer BiLSTM of width `lstm_hidden_size` (published order of outputs)."""
    from transformers import Wav2Vec2FeatureExtractor
    from transformers import WavLMConfig

    from eval_scripts.components.cser import CSERConfig
    from eval_scripts.components.cser import CSERModel

    encoder = WavLMConfig(**_conv_stack(), feat_extract_norm="layer", do_stable_layer_norm=True, conv_bias=True, num_buckets=32,
                          max_bucket_distance=64).to_dict()
    config = CSERConfig(encoder_config=encoder, lstm_hidden_size=lstm_hidden_size, initializer_range=_INIT_RANGE)
    model = seeded_model(CSERModel, config, seed)
    extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True,
                                         return_attention_mask=True)
    return LoadedModel(model=model, processor=extractor, description=_describe(model, init_seed=int(seed)))


def build_tiny_causal_lm(seed: int = 0) -> LoadedModel:
    """Qwen2ForCausalLM (hidden 64, 2 layers) with the tiny byte-level BPE tokenizer and a ChatML chat template."""
    from transformers import Qwen2Config
    from transformers import Qwen2ForCausalLM

    tokenizer = tiny_tokenizer("qwen2-audio")
    tokenizer.chat_template = CHATML_TEMPLATE
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=32768, initializer_range=_INIT_RANGE,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True)
    model = seeded_model(Qwen2ForCausalLM, config, seed)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return LoadedModel(model=model, processor=tokenizer, description=_describe(model, init_seed=int(seed)))


def build_tiny_emotion_classifier(seed: int = 0) -> LoadedModel:
    """Wav2Vec2ForSequenceClassification with the four labels neu, hap, ang, sad."""
    from transformers import Wav2Vec2Config
    from transformers import Wav2Vec2FeatureExtractor
    from transformers import Wav2Vec2ForSequenceClassification

    config = Wav2Vec2Config(**_conv_stack(), id2label=dict(enumerate(TINY_EMOTION_LABELS)), classifier_proj_size=_SMALL)
    model = seeded_model(Wav2Vec2ForSequenceClassification, config, seed)
    extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True,
                                         return_attention_mask=False)
    return LoadedModel(model=model, processor=extractor, description=_describe(model, init_seed=int(seed)))


# The full Qwen2.5-Omni (thinker + talker + token2wav). Codec ids sit at the top of the talker's small
# vocabulary; the talker's text-side special tokens reuse vision tokens of the thinker's tokenizer
# (an audio-only prompt never contains them), so the thinker's tokenizer stays that of build_tiny.
TINY_CODEC_VOCAB = 64
TINY_SPEAKER = "Chelsie"  # the released model's default speaker name
_CODEC = {"pad": 60, "start": 61, "end": 62, "mask": 63}


def build_tiny_omni_talker(seed: int = 0) -> LoadedModel:
    """Qwen2_5OmniForConditionalGeneration with a tiny thinker, talker and token2wav (DiT + BigVGAN at 24 kHz) and one speaker."""
    import torch
    from transformers import Qwen2_5OmniConfig
    from transformers import Qwen2_5OmniForConditionalGeneration

    thinker = build_tiny("qwen2.5-omni", seed=seed)
    text = thinker.model.config
    tokenizer = thinker.processor.tokenizer
    token = tokenizer.convert_tokens_to_ids
    talker = dict(
        vocab_size=TINY_CODEC_VOCAB, tts_codec_pad_token_id=_CODEC["pad"], tts_codec_start_token_id=_CODEC["start"],
        tts_codec_end_token_id=_CODEC["end"], tts_codec_mask_token_id=_CODEC["mask"],
        tts_text_start_token_id=token("<|vision_bos|>"), tts_text_end_token_id=token("<|vision_eos|>"),
        tts_text_pad_token_id=token("<|VIDEO|>"), audio_token_index=text.audio_token_index, image_token_index=text.image_token_index,
        video_token_index=text.video_token_index, vision_start_token_id=text.vision_start_token_id,
        vision_end_token_id=text.vision_end_token_id, audio_start_token_id=text.audio_start_token_id,
        audio_end_token_id=text.audio_end_token_id, embedding_size=text.text_config.hidden_size, hidden_size=_SMALL,
        intermediate_size=2 * _SMALL, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 1, 1]}, initializer_range=_INIT_RANGE,
    )
    dit = dict(hidden_size=_SMALL, num_hidden_layers=2, num_attention_heads=2, head_dim=16, ff_mult=2, emb_dim=16,
               num_embeds=TINY_CODEC_VOCAB, mel_dim=80, enc_emb_dim=16, enc_dim=16, enc_channels=[16, 16, 16, 16, 48],
               enc_attention_channels=8, enc_se_channels=8, enc_res2net_scale=2, look_ahead_layers=[1], look_backward_layers=[0])
    # The released upsampling rates (5*3*2*2*2*2 = 240 samples per mel frame, 24 kHz), narrow channels.
    vocoder = dict(mel_dim=80, upsample_initial_channel=64, resblock_kernel_sizes=[3], resblock_dilation_sizes=[[1, 3, 5]],
                   upsample_rates=[5, 3, 2, 2, 2, 2], upsample_kernel_sizes=[11, 7, 4, 4, 4, 4])
    config = Qwen2_5OmniConfig(thinker_config=text.to_dict(), talker_config=talker,
                               token2wav_config={"dit_config": dit, "bigvgan_config": vocoder})
    model = seeded_model(Qwen2_5OmniForConditionalGeneration, config, seed)
    generator = torch.Generator().manual_seed(seed)
    model.speaker_map = {TINY_SPEAKER: {"bos_token": token("<|IMAGE|>"), "cond": torch.randn(16, generator=generator),
                                        "ref_mel": torch.randn(1, 30, 80, generator=generator)}}
    return LoadedModel(model=model, processor=thinker.processor, description=_describe(model, init_seed=int(seed), talker=True))


def save_tiny_omni_talker(folder, seed: int = 0):
    """Write the tiny full Qwen2.5-Omni as a checkpoint folder (weights, spk_dict.pt, tokenizer, feature extractor, chat template).

    `pretrained=<folder>` then loads it exactly as a released checkpoint (the processor through the audio-only fallback).
    """
    from pathlib import Path

    import torch

    folder = Path(folder)
    tiny = build_tiny_omni_talker(seed=seed)
    tiny.model.save_pretrained(folder)
    torch.save(tiny.model.speaker_map, folder / "spk_dict.pt")
    tiny.processor.tokenizer.save_pretrained(folder)
    tiny.processor.feature_extractor.save_pretrained(folder)
    (folder / "chat_template.jinja").write_text(tiny.processor.chat_template, encoding="utf-8")
    return folder


def load_component(pretrained: str, *, tiny, load, seed: int = 0, device: str | None = None) -> tuple[object, object, dict | None]:
    """(model, processor, tiny description or None) of a component, in eval mode on `device` (default: this process's device).

    `tiny(seed)` builds the random-weight model for `tiny-random`; `load(pretrained)` returns (model, processor) otherwise.
    """
    if pretrained == TINY:
        built = tiny(seed=seed)
        model, processor, description = built.model, built.processor, built.description
    else:
        (model, processor), description = load(pretrained), None
    if device is None:
        from accelerate import PartialState

        device = PartialState().device
    model.to(device)
    return model.eval(), processor, description
