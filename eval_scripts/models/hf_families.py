"""What differs between the Hugging Face audio-LM families, in one table: classes, checkpoints, special tokens, processor quirks.

The adapter (`hf_audio_lm.py`), the tiny random-weight models (`tiny.py`) and the
full-size GPU bench (`bench/bench_gpu.py`) read these facts from here, so a new
family is one more row. Token texts are those of the released tokenizers; their
ids come from whichever tokenizer is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_OMNI_FEATURES_WHY = (
    "log-mels clip by clip, each padded just past its own end: Qwen2.5-Omni's processor pads every clip "
    "to 30 s (the encoder reads only the valid frames, so padding less gives identical token ids and logits "
    "for a fraction of the STFT work); Qwen3-Omni's pads to the batch's longest, and the one unpadded clip "
    "gets one frame (one audio token) fewer than when padded, so a prompt would depend on its batch-mates"
)


@dataclass(frozen=True)
class HFFamily:
    """One family of transformers audio LMs."""

    name: str
    model_class: str  # the transformers class we run (for the omni models: the thinker, text out)
    default_hub_id: str
    tokens: dict[str, str]  # role -> special token text ("audio_token", "audio_bos_token", ...)
    token_id_fields: dict[str, str]  # role -> the model config attribute holding that token's id
    processor_class: str
    thinker: bool = False  # the checkpoint holds thinker + talker: load `thinker_config` only
    # The omni processors also require image/video processors (torchvision); we feed text and
    # audio only, so when the full processor cannot load we build its class audio-only (`audio_only`).
    vision: bool = False
    # Log-mels clip by clip (see _OMNI_FEATURES_WHY); False keeps the processor's own padding
    # (Qwen2-Audio: its encoder requires exactly 3000 frames, i.e. 30 s).
    per_clip_features: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)


_QWEN25_OMNI_TOKENS = {
    "audio_token": "<|AUDIO|>",
    "audio_bos_token": "<|audio_bos|>",
    "audio_eos_token": "<|audio_eos|>",
    "image_token": "<|IMAGE|>",
    "video_token": "<|VIDEO|>",
    "vision_bos_token": "<|vision_bos|>",
    "vision_eos_token": "<|vision_eos|>",
}
_QWEN3_OMNI_TOKENS = {
    "audio_token": "<|audio_pad|>",
    "audio_bos_token": "<|audio_start|>",
    "audio_eos_token": "<|audio_end|>",
    "image_token": "<|image_pad|>",
    "video_token": "<|video_pad|>",
    "vision_bos_token": "<|vision_start|>",
    "vision_eos_token": "<|vision_end|>",
}

FAMILIES: dict[str, HFFamily] = {
    family.name: family
    for family in (
        HFFamily(
            name="qwen2.5-omni",
            model_class="Qwen2_5OmniThinkerForConditionalGeneration",
            processor_class="Qwen2_5OmniProcessor",
            default_hub_id="Qwen/Qwen2.5-Omni-7B",
            tokens=_QWEN25_OMNI_TOKENS,
            token_id_fields={
                "audio_token": "audio_token_index",
                "image_token": "image_token_index",
                "video_token": "video_token_index",
                "audio_bos_token": "audio_start_token_id",
                "audio_eos_token": "audio_end_token_id",
                "vision_bos_token": "vision_start_token_id",
                "vision_eos_token": "vision_end_token_id",
            },
            thinker=True,
            vision=True,
            per_clip_features=True,
            notes=(_OMNI_FEATURES_WHY,),
        ),
        HFFamily(
            name="qwen3-omni",
            model_class="Qwen3OmniMoeThinkerForConditionalGeneration",
            processor_class="Qwen3OmniMoeProcessor",
            default_hub_id="Qwen/Qwen3-Omni-30B-A3B-Instruct",
            tokens=_QWEN3_OMNI_TOKENS,
            token_id_fields={
                "audio_token": "audio_token_id",
                "image_token": "image_token_id",
                "video_token": "video_token_id",
                "audio_bos_token": "audio_start_token_id",
                "vision_bos_token": "vision_start_token_id",
            },
            thinker=True,
            vision=True,
            per_clip_features=True,
            notes=(_OMNI_FEATURES_WHY, "MoE: ~1 token/s in plain transformers; serve it with vLLM (docs/runner.md)"),
        ),
        HFFamily(
            name="qwen2-audio",
            model_class="Qwen2AudioForConditionalGeneration",
            processor_class="Qwen2AudioProcessor",
            default_hub_id="Qwen/Qwen2-Audio-7B-Instruct",
            tokens={"audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>", "audio_eos_token": "<|audio_eos|>"},
            token_id_fields={"audio_token": "audio_token_index"},
            notes=("its encoder requires exactly 3000 frames (30 s), so the processor's padding stays",),
        ),
    )
}


def family(name: str) -> HFFamily:
    """The family called `name`; unknown names fail with the list."""
    if name not in FAMILIES:
        raise ValueError(f"unknown Hugging Face audio-LM family {name!r}; families: {', '.join(FAMILIES)}")
    return FAMILIES[name]


def config_token_ids(fam: HFFamily, tokenizer) -> dict[str, int]:
    """Model-config keyword arguments giving the family's special tokens the ids `tokenizer` has (models built from a config)."""
    ids = {}
    for role, attribute in fam.token_id_fields.items():
        token_id = tokenizer.convert_tokens_to_ids(fam.tokens[role])
        if token_id is None or token_id == tokenizer.unk_token_id:
            raise ValueError(f"{fam.name}: the tokenizer has no {fam.tokens[role]!r} ({role})")
        ids[attribute] = token_id
    return ids


def audio_only(processor_class):
    """A subclass of an omni processor that accepts no image/video processor (audio + text only)."""

    class AudioOnlyProcessor(processor_class):
        def check_argument_for_proper_class(self, argument_name, argument):
            if argument is None and argument_name in ("image_processor", "video_processor"):
                return None
            return super().check_argument_for_proper_class(argument_name, argument)

        @property
        def model_input_names(self):
            names = list(self.tokenizer.model_input_names) + list(self.feature_extractor.model_input_names)
            return list(dict.fromkeys(names + ["feature_attention_mask"]))

    AudioOnlyProcessor.__name__ = f"AudioOnly{processor_class.__name__}"
    return AudioOnlyProcessor
