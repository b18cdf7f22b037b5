"""Hugging Face audio LMs: Qwen2.5-Omni and Qwen3-Omni (thinker only: text out), and Qwen2-Audio.

`pretrained=` takes a Hub id, a local folder, or `tiny-random` (the offline
random-weight model of eval_scripts/models/tiny.py). Batches are left-padded;
decoding is greedy unless asked otherwise; the runner orders batches
longest-first and gets results back in input order.

Logprob mode appends the template's answer prefix (`{"selected": "Option `)
to the assistant turn and compares the next-token log-probabilities of "1"
and "2": one forward pass per query, nothing to parse.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import time

from eval_scripts.models.base import ChoiceModel
from eval_scripts.models.base import ChoiceQuery
from eval_scripts.models.base import ModelOutput
from eval_scripts.models.base import register
from eval_scripts.models.memo import ClipMemo

logger = logging.getLogger(__name__)

_DTYPES = ("auto", "float32", "float16", "bfloat16")
RAGGED_SDPA = "sdpa_ragged"  # our attention implementation name (see `use_ragged_prefill`)
DEFAULT_MAX_NEW_TOKENS = 512  # room for the four explanation fields before "selected"
TINY_MAX_NEW_TOKENS = 32


class LeftPadding:
    """The prefill "mask" of `sdpa_ragged`: each row's number of real tokens, right-aligned (left padding)."""

    def __init__(self, lengths: list[int]) -> None:
        self.lengths = lengths


def _ragged_prefill_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, attention_mask=None, **kwargs):
    """A left-padded causal prefill with an empty cache becomes `LeftPadding`; anything else gets the usual sdpa mask."""
    from transformers.masking_utils import causal_mask_function
    from transformers.masking_utils import sdpa_mask

    plain = kwargs.get("mask_function", causal_mask_function) is causal_mask_function
    if plain and q_length > 1 and q_length == kv_length and not q_offset and not kv_offset and attention_mask is not None and attention_mask.dim() == 2:
        import torch

        lengths = attention_mask.sum(-1)
        right_aligned = torch.arange(kv_length, device=attention_mask.device)[None, :] >= (kv_length - lengths)[:, None]
        if int(lengths.min()) < kv_length and torch.equal(attention_mask.bool(), right_aligned):
            return LeftPadding(lengths.tolist())
    return sdpa_mask(batch_size=batch_size, q_length=q_length, kv_length=kv_length, q_offset=q_offset, kv_offset=kv_offset,
                     attention_mask=attention_mask, **kwargs)


def _ragged_sdpa(module, query, key, value, attention_mask, **kwargs):
    """SDPA that runs a left-padded prefill row by row on its real tokens only (causal kernel, no 4-D mask).

    Padded positions get zeros: no real token attends to them, so they never reach a real position.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if not isinstance(attention_mask, LeftPadding):
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    batch, heads, length, _ = query.shape
    out = query.new_zeros(batch, length, heads, value.shape[-1])
    for row, n in enumerate(attention_mask.lengths):
        start = length - n
        q, k, v = (t[row : row + 1, :, start:] for t in (query, key, value))
        out[row, start:] = sdpa_attention_forward(module, q, k, v, None, **kwargs)[0][0]
    return out, None


def use_ragged_prefill(model) -> bool:
    """Switch the decoder's attention from "sdpa" to "sdpa_ragged"; other choices (flash, eager) are left alone.

    With left padding, stock sdpa materialises a (batch, 1, L, L) mask and runs the masked
    kernel over every padded position: a padded batch prefill was ~2x slower than its rows
    one at a time (tiny model, CPU). Row by row each prompt takes the unmasked causal kernel,
    exactly as at batch size 1; decoding (one query token) keeps the usual small mask.
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(RAGGED_SDPA, _ragged_sdpa)
    AttentionMaskInterface.register(RAGGED_SDPA, _ragged_prefill_mask)
    config = getattr(model.config, "text_config", None) or model.config
    if config._attn_implementation != "sdpa":
        return False
    config._attn_implementation = RAGGED_SDPA
    return True


class PerClipFeatures:
    """The feature extractor run clip by clip, each padded only to its own length; log-mels of the valid frames only.

    The Whisper extractor pads every clip to one length and computes the STFT over the
    padding too: a batch's 40 clips padded to its longest cost ~2.4x their separate
    extraction (the big complex spectrogram no longer fits in cache). Each clip here gets
    at least `gap` zero samples and whole seconds, so its valid frames are exactly those the
    processor's 30-s padding gives and do not depend on batch-mates. Only the valid frames
    are kept (the Omni encoders read just the frames `feature_attention_mask` marks; the rest
    of the batch tensor is zeros).

    Features live in a `ClipMemo` (as long as their clip): round 2 reuses round 1's, and
    those computed ahead by the runner's loader thread (`HFAudioLM.prepare_clips`) are found.
    """

    def __init__(self, extractor, unit: int = 16000, gap: int = 400) -> None:
        self.extractor = extractor
        self.unit, self.gap = unit, gap
        self.memo = ClipMemo()  # (clip array, extractor kwargs) -> log-mels

    def __getattr__(self, name):
        return getattr(self.extractor, name)

    def clip_features(self, clip, **kwargs):
        """Log-mels (mels x valid frames) of one clip (thread-safe)."""
        import numpy as np

        key = tuple(sorted(kwargs.items()))
        known = self.memo.get(clip, key)
        if known is not None:
            return known
        samples = np.asarray(clip, dtype=np.float32)
        target = ((len(samples) + self.gap) // self.unit + 1) * self.unit
        call = dict(kwargs, padding="max_length", max_length=target, truncation=False, return_attention_mask=True, return_tensors="np")
        out = self.extractor([samples], **call)
        valid = int(out["attention_mask"][0].sum())
        features = np.ascontiguousarray(out["input_features"][0][:, :valid])
        self.memo.put(clip, key, features)
        return features

    def __call__(self, audio, **kwargs):
        import numpy as np
        from transformers import BatchFeature

        return_tensors = kwargs.pop("return_tensors", None)
        for name in ("padding", "max_length", "truncation", "return_attention_mask", "pad_to_multiple_of"):
            kwargs.pop(name, None)
        clips = [audio] if isinstance(audio, np.ndarray) and audio.ndim == 1 else list(audio)
        parts = [self.clip_features(c, **kwargs) for c in clips]
        frames = max(f.shape[-1] for f in parts)
        # np.empty + explicit zeroing: np.zeros of a fresh ~30 MB block page-faults on every write (10x slower).
        features = np.empty((len(parts), parts[0].shape[0], frames), dtype=np.float32)
        mask = np.zeros((len(parts), frames), dtype=np.int32)
        for i, f in enumerate(parts):
            features[i, :, : f.shape[-1]] = f
            features[i, :, f.shape[-1] :] = 0.0
            mask[i, : f.shape[-1]] = 1
        return BatchFeature({"input_features": features, "attention_mask": mask}, tensor_type=return_tensors)


class AudioEncoderCache:
    """Audio-encoder outputs per clip, so round 2 does not re-encode the history clips round 1 encoded.

    The Omni encoders encode each clip on its own (attention within the clip's windows), so
    a clip's output does not depend on its batch-mates. Installed over the inner model's
    `get_audio_features`; active only inside `batch(...)`, which names the call's clips
    (kept in a `ClipMemo`, as long as the clip lives) and their audio-token counts (runs of
    the audio placeholder in `input_ids`, in clip order). Any mismatch falls back to the
    plain encoder call.
    """

    def __init__(self, inner, audio_token_id: int) -> None:
        self.encode_audio = inner.get_audio_features
        self.audio_token_id = audio_token_id
        self._clips: list | None = None
        self._lengths: list[int] = []
        self.memo = ClipMemo()
        inner.get_audio_features = self  # the instance attribute shadows the class method

    @contextlib.contextmanager
    def batch(self, clips: list, input_ids):
        """Within this block, the encoder call is for these clips (in order) of these prompts."""
        import numpy as np

        is_audio = (input_ids == self.audio_token_id).flatten().cpu().numpy().astype(np.int8)
        edges = np.diff(np.concatenate([[0], is_audio, [0]]))
        self._lengths = (np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)).tolist()
        self._clips = clips
        try:
            yield
        finally:
            self._clips, self._lengths = None, []

    def __call__(self, input_features, feature_attention_mask=None, audio_feature_lengths=None, **kwargs):
        import torch
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        clips = self._clips
        if clips is None or feature_attention_mask is None or len(clips) != input_features.shape[0] or len(self._lengths) != len(clips):
            return self.encode_audio(input_features, feature_attention_mask, audio_feature_lengths, **kwargs)
        hits = {}
        for i, clip in enumerate(clips):
            known = self.memo.get(clip, "encoder")
            if known is not None and known.shape[0] == self._lengths[i]:
                hits[i] = known
        missing = [i for i in range(len(clips)) if i not in hits]
        if missing:
            rows = torch.tensor(missing, device=input_features.device)
            encoded = self.encode_audio(input_features[rows], feature_attention_mask[rows], None, **kwargs).last_hidden_state
            lengths = [self._lengths[i] for i in missing]
            if sum(lengths) != encoded.shape[0]:
                return self.encode_audio(input_features, feature_attention_mask, audio_feature_lengths, **kwargs)
            for i, part in zip(missing, encoded.split(lengths)):
                hits[i] = part
                self.memo.put(clips[i], "encoder", part)
        hidden = torch.cat([hits[i] for i in range(len(clips))])
        return BaseModelOutputWithPooling(last_hidden_state=hidden, pooler_output=hidden)


@contextlib.contextmanager
def last_position_head(model):
    """While generating, the LM head sees only each row's last position (left padding puts it there).

    These model classes have no `logits_to_keep`, so generate's prefill would project every
    prompt position onto the vocabulary (batch x ~1900 x vocab floats) to read one column:
    at batch 8 that cost more than the whole text prefill's attention. Generation reads
    only `logits[:, -1]`, so the answers are the same.
    """
    head = getattr(model, "lm_head", None)
    if head is None:
        yield
        return
    hook = head.register_forward_pre_hook(lambda module, args: (args[0][:, -1:, :], *args[1:]))
    try:
        yield
    finally:
        hook.remove()


def audio_only_processor(pretrained: str, processor_class_name: str, trust_remote_code: bool = False):
    """An omni family's processor built from its tokenizer, feature extractor and chat template only (no image/video parts).

    The full omni processors also load image/video processors, which need torchvision; the
    benchmark feeds text and audio only.
    """
    import transformers
    from transformers import AutoFeatureExtractor
    from transformers import AutoTokenizer
    from transformers.utils import cached_file

    from eval_scripts.models.tiny import audio_only

    tokenizer = AutoTokenizer.from_pretrained(pretrained, trust_remote_code=trust_remote_code)
    feature_extractor = AutoFeatureExtractor.from_pretrained(pretrained, trust_remote_code=trust_remote_code)
    template = None
    for name in ("chat_template.jinja", "chat_template.json"):
        found = cached_file(pretrained, name, _raise_exceptions_for_missing_entries=False)
        if found:
            text = open(found, encoding="utf-8").read()
            template = json.loads(text)["chat_template"] if name.endswith(".json") else text
            break
    template = template or getattr(tokenizer, "chat_template", None)
    if not template:
        raise ValueError(f"{pretrained}: no chat template (chat_template.jinja/.json or in the tokenizer)")
    processor_class = audio_only(getattr(transformers, processor_class_name))
    return processor_class(image_processor=None, video_processor=None, feature_extractor=feature_extractor, tokenizer=tokenizer,
                           chat_template=template)


def single_token_ids(tokenizer, answers: tuple[str, str], model_name: str) -> tuple[int, int]:
    """The token id of each of two answers; ValueError when one is not a single token (logprob mode compares two tokens)."""
    ids = []
    for answer in answers:
        encoded = tokenizer.encode(answer, add_special_tokens=False)
        if len(encoded) != 1:
            raise ValueError(f"logprob mode needs single-token answers; {answer!r} is {len(encoded)} tokens for {model_name}")
        ids.append(encoded[0])
    return ids[0], ids[1]


def load_audio_processor(pretrained: str, processor_class_name: str = "", trust_remote_code: bool = False):
    """The checkpoint's processor; for an omni family whose full processor cannot load, the audio-only one."""
    from transformers import AutoProcessor

    try:
        processor = AutoProcessor.from_pretrained(pretrained, trust_remote_code=trust_remote_code)
    except (ImportError, OSError, ValueError) as exc:
        if not processor_class_name:
            raise
        # The omni processors also load image/video processors (which need torchvision);
        # we only feed text and audio, so build the processor from those parts instead.
        logger.info("%s: full processor unavailable (%s); building an audio-only one", pretrained, exc)
        processor = None
    if processor is None or not hasattr(processor, "feature_extractor"):
        processor = audio_only_processor(pretrained, processor_class_name, trust_remote_code)
    return processor


class HFAudioLM(ChoiceModel):
    """Shared adapter of the transformers audio LMs (subclasses name the family and model class)."""

    family: str = ""
    model_class_name: str = ""
    processor_class_name: str = ""  # omni processors: rebuilt audio-only when the full one cannot load
    default_hub_id: str = ""
    modes = frozenset({"generate", "logprob"})
    sampling_rate = 16000  # the Whisper-style feature extractors of all three families
    # Log-mels clip by clip, each padded just past its own end (`PerClipFeatures`).
    # Qwen3-Omni: its processor pads to the longest, and the one unpadded clip gets one
    # frame (so one audio token) fewer than when padded, so a prompt would depend on its
    # batch-mates (found with the tiny model). Qwen2.5-Omni: its processor pads every clip
    # to 30 s; the encoder reads only the valid frames, so padding less gives identical
    # token ids and logits at a fraction of the feature-extraction cost.
    # Qwen2-Audio keeps 30 s: its encoder requires exactly 3000 frames.
    pad_past_longest: bool = False
    _PAD_UNIT = 16000  # samples (1 s)

    def __init__(
        self,
        pretrained: str | None = None,
        dtype: str | None = None,
        device_map: str | None = None,
        trust_remote_code: bool = False,
        max_new_tokens: int | None = None,
        do_sample: bool = False,
        temperature: float = 1.0,
        seed: int = 0,
        attn_implementation: str | None = None,
    ) -> None:
        import torch

        self.pretrained = pretrained or self.default_hub_id
        if max_new_tokens is None:
            # A random-weight model never says "stop": give it a short budget unless told otherwise.
            max_new_tokens = TINY_MAX_NEW_TOKENS if self.pretrained == "tiny-random" else DEFAULT_MAX_NEW_TOKENS
        self.max_new_tokens = int(max_new_tokens)
        self.do_sample = bool(do_sample)
        self.temperature = float(temperature)
        self.seed = int(seed)
        if dtype is not None and dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}; got {dtype!r}")
        self._describe = {"name": self.name, "pretrained": self.pretrained, "max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample}
        if self.pretrained == "tiny-random":
            from eval_scripts.models.tiny import build_tiny

            tiny = build_tiny(self.family, seed=self.seed)
            self.model, self.processor = tiny.model, tiny.processor
            self._describe.update(tiny.description)
            self.label = f"{self.name} (tiny random weights)"
            if dtype not in (None, "auto", "float32"):
                self.model.to(getattr(torch, dtype))
        else:
            self.model, self.processor = self._from_pretrained(dtype, device_map, trust_remote_code, attn_implementation)
            self._describe.update(dtype=dtype or "auto", device_map=device_map, trust_remote_code=bool(trust_remote_code))
            self.label = f"{self.name}:{self.pretrained}"
        if device_map is None:
            from accelerate import PartialState

            self.model.to(PartialState().device)
        self.model.eval()
        if use_ragged_prefill(self.model):
            self._describe["attn_implementation"] = RAGGED_SDPA
        # Our inputs come from a shallow copy of the processor whose feature extractor works
        # clip by clip (the processor itself stays stock, for callers who want its defaults).
        self._input_processor = self.processor
        if self.pad_past_longest:
            self._input_processor = copy.copy(self.processor)
            self._input_processor.feature_extractor = PerClipFeatures(self.processor.feature_extractor, unit=self._PAD_UNIT)
        self._audio_cache = None
        inner = getattr(self.model, "model", None)
        if self.pad_past_longest and hasattr(inner, "get_audio_features"):
            audio_token_id = self.processor.tokenizer.convert_tokens_to_ids(self.processor.audio_token)
            self._audio_cache = AudioEncoderCache(inner, audio_token_id)
        self.tokenizer = self.processor.tokenizer
        self.tokenizer.padding_side = "left"
        self._answer_ids: dict[str, tuple[int, int]] = {}

    # -------------------------------------------------------------- loading

    def _from_pretrained(self, dtype, device_map, trust_remote_code, attn_implementation):
        import transformers
        from transformers import AutoConfig

        model_class = getattr(transformers, self.model_class_name)
        config = AutoConfig.from_pretrained(self.pretrained, trust_remote_code=trust_remote_code)
        # Full Omni checkpoints hold thinker + talker; we load the thinker (text output) only.
        config = getattr(config, "thinker_config", None) or config
        kwargs = {"config": config, "trust_remote_code": trust_remote_code, "dtype": dtype or "auto"}
        if device_map is not None:
            kwargs["device_map"] = device_map
        if attn_implementation:
            kwargs["attn_implementation"] = attn_implementation
        logger.info("loading %s from %s", self.model_class_name, self.pretrained)
        model = model_class.from_pretrained(self.pretrained, **kwargs)
        return model, load_audio_processor(self.pretrained, self.processor_class_name, trust_remote_code)

    # -------------------------------------------------------------- prompts

    def messages(self, query: ChoiceQuery) -> list[dict]:
        """The query as a chat: system text, then the user turn with text and audio interleaved."""
        content = []
        for part in query.parts:
            if part.kind == "audio":
                content.append({"type": "audio", "audio": part.clip.array})
            else:
                content.append({"type": "text", "text": part.text})
        return [
            {"role": "system", "content": [{"type": "text", "text": query.system}]},
            {"role": "user", "content": content},
        ]

    def prompt_text(self, query: ChoiceQuery, answer_prefix: str = "") -> str:
        """Chat-templated prompt (audio placeholders unexpanded), ending where the assistant starts."""
        text = self.processor.apply_chat_template(self.messages(query), tokenize=False, add_generation_prompt=True)
        return text + answer_prefix

    def encode(self, queries: list[ChoiceQuery], answer_prefix: bool = False):
        """Processor inputs of a batch (left padded, audio in order of appearance), on the model's device."""
        texts = [self.prompt_text(q, q.meta.get("answer_prefix", "") if answer_prefix else "") for q in queries]
        audio = self.audio_arrays(queries)
        for q in queries:
            for p in q.parts:
                if p.kind == "audio" and p.clip.sampling_rate != self.sampling_rate:
                    raise ValueError(f"{q.uid}: clip {p.clip.column} is at {p.clip.sampling_rate} Hz, the model needs {self.sampling_rate}")
        kwargs = {"text": texts, "return_tensors": "pt", "text_kwargs": {"padding": True}}
        if audio:
            kwargs["audio"] = audio
            kwargs["sampling_rate"] = self.sampling_rate
        inputs = self._input_processor(**kwargs)
        device = self.model.device
        dtype = self.model.dtype
        return {k: (v.to(device=device, dtype=dtype) if v.is_floating_point() else v.to(device)) for k, v in inputs.items()}

    def prepare_clips(self, clips: list) -> None:
        """Log-mels of a dialogue's clips ahead of its queries (called from the runner's loader thread)."""
        extractor = self._input_processor.feature_extractor
        if not isinstance(extractor, PerClipFeatures):
            return
        for clip in clips:
            if clip.sampling_rate == self.sampling_rate:  # encode() rejects the others, naming them
                extractor.clip_features(clip.array, sampling_rate=self.sampling_rate)

    @staticmethod
    def audio_arrays(queries: list[ChoiceQuery]) -> list:
        """The batch's clips in prompt order (the order of the processor's audio inputs)."""
        return [p.clip.array for q in queries for p in q.parts if p.kind == "audio"]

    def audio_cache(self, queries: list[ChoiceQuery], inputs: dict):
        """Context of one model call on `inputs` (the `encode` of `queries`): its clips' encoder outputs are cached."""
        audio = self.audio_arrays(queries)
        if self._audio_cache is None or not audio:
            return contextlib.nullcontext()
        return self._audio_cache.batch(audio, inputs["input_ids"])

    # -------------------------------------------------------------- answering

    def generate(self, queries: list[ChoiceQuery]) -> list[ModelOutput]:
        """One padded batch, greedy decoding (sampling seeded by the first query when asked)."""
        import torch

        began = time.perf_counter()
        inputs = self.encode(queries)
        prompt_len = inputs["input_ids"].shape[1]
        gen_kwargs = {"max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample}
        if self.do_sample:
            gen_kwargs["temperature"] = self.temperature
            torch.manual_seed(queries[0].seed % (2**63))
        with torch.inference_mode(), last_position_head(self.model), self.audio_cache(queries, inputs):
            sequences = self.model.generate(**inputs, **gen_kwargs)
        if not isinstance(sequences, torch.Tensor):  # some models return (text_ids, audio)
            sequences = sequences[0] if isinstance(sequences, tuple) else sequences.sequences
        new_tokens = sequences[:, prompt_len:].cpu()
        elapsed = time.perf_counter() - began
        outputs = []
        pad, eos = self.tokenizer.pad_token_id, self._eos_ids()
        for row, query in enumerate(queries):
            tokens = new_tokens[row].tolist()
            n_out = len(tokens)
            for k, tok in enumerate(tokens):
                if tok in eos or tok == pad:
                    n_out = k + (1 if tok in eos else 0)
                    break
            text = self.tokenizer.decode(tokens[:n_out], skip_special_tokens=True)
            n_in = int(inputs["attention_mask"][row].sum())
            outputs.append(ModelOutput(text=text, input_tokens=n_in, output_tokens=n_out, latency_s=elapsed))
        return outputs

    def score(self, queries: list[ChoiceQuery]) -> list[ModelOutput]:
        """One forward pass per batch: log-probabilities of "1" and "2" right after the answer prefix."""
        import torch

        began = time.perf_counter()
        inputs = self.encode(queries, answer_prefix=True)
        with torch.inference_mode(), self.audio_cache(queries, inputs):
            logits = self.last_logits(inputs).float()
        logprobs = torch.log_softmax(logits, dim=-1).cpu()
        elapsed = time.perf_counter() - began
        outputs = []
        for row, query in enumerate(queries):
            id1, id2 = self._answer_token_ids(tuple(query.meta.get("answer_choices", ("1", "2"))))
            lp1, lp2 = float(logprobs[row, id1]), float(logprobs[row, id2])
            choice = 1 if lp1 > lp2 else 2 if lp2 > lp1 else None  # an exact tie names no option
            n_in = int(inputs["attention_mask"][row].sum())
            outputs.append(ModelOutput(choice=choice, option_logprobs=(lp1, lp2), input_tokens=n_in, output_tokens=0, latency_s=elapsed))
        return outputs

    def last_logits(self, inputs: dict):
        """Next-token logits at the last position only.

        These model classes have no `logits_to_keep`; the LM head over every prompt
        position would cost (prompt length x vocabulary) for nothing, so we run the
        inner model and apply the head to the final hidden state (left padding puts
        every prompt's last token there).
        """
        inner, head = getattr(self.model, "model", None), getattr(self.model, "lm_head", None)
        if inner is None or head is None:
            return self.model(**inputs).logits[:, -1, :]
        hidden = inner(**inputs, use_cache=False).last_hidden_state
        return head(hidden[:, -1, :])

    def _answer_token_ids(self, answers: tuple[str, str]) -> tuple[int, int]:
        """Token ids of the two answers; each must be a single token (true of digits in Qwen tokenizers)."""
        if answers not in self._answer_ids:
            self._answer_ids[answers] = single_token_ids(self.tokenizer, answers, self.pretrained)
        return self._answer_ids[answers]

    def _eos_ids(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        ids = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return ids

    def describe(self) -> dict:
        return dict(self._describe, label=self.label)


@register("qwen2.5-omni")
class Qwen25Omni(HFAudioLM):
    """Qwen2.5-Omni thinker (text output), e.g. Qwen/Qwen2.5-Omni-7B or -3B."""

    name = "qwen2.5-omni"
    family = "qwen2.5-omni"
    model_class_name = "Qwen2_5OmniThinkerForConditionalGeneration"
    processor_class_name = "Qwen2_5OmniProcessor"
    pad_past_longest = True
    default_hub_id = "Qwen/Qwen2.5-Omni-7B"


@register("qwen3-omni")
class Qwen3Omni(HFAudioLM):
    """Qwen3-Omni thinker (text output), e.g. Qwen/Qwen3-Omni-30B-A3B-Instruct (for speed, see the vLLM route)."""

    name = "qwen3-omni"
    family = "qwen3-omni"
    model_class_name = "Qwen3OmniMoeThinkerForConditionalGeneration"
    processor_class_name = "Qwen3OmniMoeProcessor"
    pad_past_longest = True
    default_hub_id = "Qwen/Qwen3-Omni-30B-A3B-Instruct"


@register("qwen2-audio")
class Qwen2Audio(HFAudioLM):
    """Qwen2-Audio, e.g. Qwen/Qwen2-Audio-7B-Instruct."""

    name = "qwen2-audio"
    family = "qwen2-audio"
    model_class_name = "Qwen2AudioForConditionalGeneration"
    default_hub_id = "Qwen/Qwen2-Audio-7B-Instruct"
