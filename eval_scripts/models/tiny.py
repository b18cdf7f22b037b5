"""Tiny random-weight versions of the Hugging Face audio LMs, built offline from configs.

They have the real architectures (audio encoder + decoder, the real processor
classes, the real chat structure) at toy sizes with seeded random weights, so
the whole pipeline (processor, left padding, batching, generation, logprob
scoring, sharding) runs in seconds on a CPU with no download. Their answers
are meaningless: results are labelled "tiny random weights".

Sizes: byte-level BPE vocabulary of 1024 (+ the family's special tokens), hidden
size 64, 2 decoder layers, 2 audio-encoder layers.
"""

from __future__ import annotations

import contextlib
import functools
import json

from eval_scripts.models.hf_audio_lm import LoadedModel
from eval_scripts.models.hf_audio_lm import built_in_checkpoint
from eval_scripts.models.hf_families import FAMILIES
from eval_scripts.models.hf_families import audio_only
from eval_scripts.models.hf_families import config_token_ids
from eval_scripts.models.hf_families import family as family_facts

TINY = "tiny-random"
_HIDDEN = 64
_VOCAB = 1024  # byte-level BPE size before special tokens
_INIT_RANGE = 0.2  # wider than the usual 0.02 so random logits are far apart: greedy picks never hinge on rounding

_CHATML = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # as in the released tokenizers (names only; ids are ours)

# ChatML with audio placeholders, the layout of the released chat templates (our own Jinja).
_OMNI_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'audio' %}{AUDIO_BOS}{AUDIO}{AUDIO_EOS}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_QWEN2_AUDIO_TEMPLATE = (
    "{% set audio_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'audio' %}{% set audio_count.value = audio_count.value + 1 %}"
    "Audio {{ audio_count.value }}: <|audio_bos|><|AUDIO|><|audio_eos|>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_tokenizer(family: str):
    """A byte-level BPE Qwen2Tokenizer with ChatML and the family's audio/vision tokens.

    Its merges are learned here, deterministically, from our own prompt files, so
    prompts have realistic token counts (a pure byte vocabulary would make every
    character a token and inflate the prompt about 2.5-fold).
    """
    from tokenizers import AddedToken
    from transformers import Qwen2Tokenizer

    specials = dict(family_facts(family).tokens)
    vocab, merges = _bpe_vocab_and_merges()
    vocab = dict(vocab)
    for token in (*_CHATML, *specials.values()):
        vocab[token] = len(vocab)
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=specials,
    )
    tokenizer.add_tokens([AddedToken(t, special=True, normalized=False) for t in (*_CHATML, *specials.values())], special_tokens=True)
    tokenizer.padding_side = "left"
    return tokenizer


# Named, not globbed: a new prompt file must not change the tiny tokenizer, and with it every tiny model's answers.
TOKENIZER_CORPUS = ("forced_choice_v1.json", "personas_v1.json")


@functools.lru_cache(maxsize=1)
def _bpe_vocab_and_merges() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Byte-level BPE (1024 entries: 256 bytes + merges) trained on the runner's prompt files (TOKENIZER_CORPUS)."""
    from tokenizers import Tokenizer
    from tokenizers import models
    from tokenizers import pre_tokenizers
    from tokenizers import trainers

    from eval_scripts.prompts import PROMPTS_DIR

    corpus: list[str] = []

    def strings(node) -> None:
        if isinstance(node, str):
            corpus.append(node)
        elif isinstance(node, dict):
            for value in node.values():
                strings(value)

    for name in TOKENIZER_CORPUS:
        strings(json.loads((PROMPTS_DIR / name).read_text(encoding="utf-8")))
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=_VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(corpus, trainer)
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    return model["vocab"], merges


def _template(family: str) -> str:
    if family == "qwen2-audio":
        return _QWEN2_AUDIO_TEMPLATE
    tokens = family_facts(family).tokens
    return (
        _OMNI_TEMPLATE.replace("{AUDIO_BOS}", tokens["audio_bos_token"])
        .replace("{AUDIO_EOS}", tokens["audio_eos_token"])
        .replace("{AUDIO}", tokens["audio_token"])
    )


def _text_config(vocab_size: int, **extra) -> dict:
    return dict(
        vocab_size=vocab_size,
        hidden_size=_HIDDEN,
        intermediate_size=2 * _HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        initializer_range=_INIT_RANGE,
        **extra,
    )


def _vision_config(**extra) -> dict:
    """The smallest vision tower the omni thinkers accept (never run: the benchmark is audio + text)."""
    return dict(depth=1, hidden_size=32, intermediate_size=32, num_heads=2, out_hidden_size=_HIDDEN, **extra)


def _audio_config(**extra) -> dict:
    return dict(
        num_mel_bins=128,
        encoder_layers=2,
        encoder_attention_heads=2,
        encoder_ffn_dim=2 * _HIDDEN,
        d_model=_HIDDEN,
        initializer_range=_INIT_RANGE,
        **extra,
    )


def tiny_processor(family: str):
    """The family's processor class (audio-only for the omni families) with our tokenizer, a 128-mel Whisper extractor and template."""
    import transformers
    from transformers import WhisperFeatureExtractor

    fam = family_facts(family)
    processor_class = getattr(transformers, fam.processor_class)
    parts = dict(feature_extractor=WhisperFeatureExtractor(feature_size=128), tokenizer=tiny_tokenizer(family), chat_template=_template(family))
    if fam.vision:
        processor_class = audio_only(processor_class)
        parts.update(image_processor=None, video_processor=None)  # audio + text only: no torchvision needed
    return processor_class(**parts)


def tiny_config(family: str, tokenizer):
    """The tiny model config of a family, its special-token ids those of `tokenizer`."""
    import transformers

    fam = family_facts(family)
    config_class = getattr(transformers, fam.model_class.replace("ForConditionalGeneration", "Config"))
    vocab_size = len(tokenizer)
    common = dict(pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    token_ids = config_token_ids(fam, tokenizer)
    if family == "qwen2.5-omni":
        return config_class(
            audio_config=_audio_config(output_dim=_HIDDEN, n_window=100),
            vision_config=_vision_config(fullatt_block_indexes=[0]),
            text_config=_text_config(vocab_size, rope_scaling={"type": "default", "rope_type": "default", "mrope_section": [4, 2, 2]}, **common),
            initializer_range=_INIT_RANGE,
            **token_ids,
        )
    if family == "qwen3-omni":
        return config_class(
            audio_config=_audio_config(output_dim=_HIDDEN, n_window=50, downsample_hidden_size=32),
            vision_config=_vision_config(deepstack_visual_indexes=[0]),
            text_config=_text_config(
                vocab_size,
                head_dim=16,
                moe_intermediate_size=32,
                num_experts=4,
                num_experts_per_tok=2,
                rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [4, 2, 2], "mrope_interleaved": True},
                **common,
            ),
            initializer_range=_INIT_RANGE,
            **token_ids,
        )
    return config_class(audio_config=_audio_config(), text_config=_text_config(vocab_size, **common), initializer_range=_INIT_RANGE, **token_ids)


def seeded_model(model_class, config, seed: int, device=None, dtype=None):
    """`model_class(config)` with weights from torch's generator seeded with `seed` (the global generator is left as it was)."""
    import torch

    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)  # the random init is the model: seed it so every process builds the same weights
    try:
        with torch.device(device) if device is not None else contextlib.nullcontext():
            model = model_class(config) if dtype is None else model_class._from_config(config, dtype=dtype)
    finally:
        torch.random.set_rng_state(generator_state)
    return model.eval()


@built_in_checkpoint(TINY)
def build_tiny(family: str, seed: int = 0) -> LoadedModel:
    """The tiny random-weight model of a family ("qwen2.5-omni", "qwen3-omni", "qwen2-audio"), seeded."""
    import transformers

    if family not in FAMILIES:
        raise ValueError(f"no tiny model for {family!r}; families: {', '.join(FAMILIES)}")
    processor = tiny_processor(family)
    tokenizer = processor.tokenizer
    model_class = getattr(transformers, family_facts(family).model_class)
    model = seeded_model(model_class, tiny_config(family, tokenizer), seed)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    n_params = sum(p.numel() for p in model.parameters())
    return LoadedModel(
        model=model,
        processor=processor,
        label_note="tiny random weights",
        description={
            "pretrained": TINY,
            "weights": "tiny random weights (built offline from a config; answers are meaningless)",
            "architecture": model_class.__name__,
            "parameters": int(n_params),
            "init_seed": int(seed),
        },
    )


def save_tiny(family: str, folder, seed: int = 0):
    """Write the tiny model as a checkpoint folder that `pretrained=<folder>` loads like a Hub model.

    Omni families are saved without image/video processors (their full processors need
    torchvision), so loading them exercises the audio-only fallback of the adapters.
    """
    from pathlib import Path

    folder = Path(folder)
    tiny = build_tiny(family, seed=seed)
    tiny.model.save_pretrained(folder)
    if not family_facts(family).vision:
        tiny.processor.save_pretrained(folder)
    else:
        tiny.processor.tokenizer.save_pretrained(folder)
        tiny.processor.feature_extractor.save_pretrained(folder)
        (folder / "chat_template.jinja").write_text(tiny.processor.chat_template, encoding="utf-8")
    return folder
