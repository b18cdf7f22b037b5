"""Hugging Face audio LMs: Qwen2.5-Omni and Qwen3-Omni (thinker only: text out), and Qwen2-Audio.

`pretrained=` takes a Hub id, a local folder, or the name of a built-in checkpoint
(`tiny-random`: the offline random-weight models that eval_scripts/models/tiny.py
registers). Batches are left-padded; decoding is greedy unless asked otherwise; the
runner orders batches longest-first and gets results back in input order.

Logprob mode appends the template's answer prefix (`{"selected": "Option `)
to the assistant turn and compares the next-token log-probabilities of "1"
and "2": one forward pass per query, nothing to parse.

What differs between the families is in `hf_families.py`; the speed-ups that reach
into transformers internals are installed by `hf_speedups.install` (`speedups=false`
runs plain transformers, with the same answers).
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from eval_scripts.models import hf_families
from eval_scripts.models import hf_speedups
from eval_scripts.models.base import ChoiceModel
from eval_scripts.models.base import ChoiceQuery
from eval_scripts.models.base import ModelOutput
from eval_scripts.models.base import register
from eval_scripts.models.hf_features import PAD_UNIT
from eval_scripts.models.hf_features import PerClipFeatures
from eval_scripts.models.hf_features import clip_log_mels

logger = logging.getLogger(__name__)

_DTYPES = ("auto", "float32", "float16", "bfloat16")
DEFAULT_MAX_NEW_TOKENS = 512  # room for the four explanation fields before "selected"
BUILT_IN_MAX_NEW_TOKENS = 32  # random weights never say "stop": a short budget unless told otherwise


@dataclass
class LoadedModel:
    """A model with its processor, and what results.json should say about it."""

    model: object
    processor: object
    description: dict
    label_note: str = ""  # shown after the adapter name, e.g. "tiny random weights"


# name -> builder(family, seed) of checkpoints made in-process (registered by their modules, e.g. tiny.py)
_BUILT_IN: dict[str, Callable[..., LoadedModel]] = {}


def built_in_checkpoint(name: str):
    """Register `builder(family, seed=...) -> LoadedModel` as `pretrained=name`."""

    def add(builder):
        _BUILT_IN[name] = builder
        return builder

    return add


def audio_only_processor(pretrained: str, processor_class_name: str, trust_remote_code: bool = False):
    """An omni family's processor built from its tokenizer, feature extractor and chat template only (no image/video parts).

    The full omni processors also load image/video processors, which need torchvision; the
    benchmark feeds text and audio only.
    """
    import transformers
    from transformers import AutoFeatureExtractor
    from transformers import AutoTokenizer
    from transformers.utils import cached_file

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
    processor_class = hf_families.audio_only(getattr(transformers, processor_class_name))
    return processor_class(image_processor=None, video_processor=None, feature_extractor=feature_extractor, tokenizer=tokenizer,
                           chat_template=template)


def load_audio_processor(pretrained: str, processor_class_name: str = "", trust_remote_code: bool = False):
    """The checkpoint's processor; for an omni family (its processor class named) whose full processor cannot load, the audio-only one."""
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


def single_token_ids(tokenizer, answers: tuple[str, str], model_name: str) -> tuple[int, int]:
    """The token id of each of two answers; ValueError when one is not a single token (logprob mode compares two tokens)."""
    ids = []
    for answer in answers:
        encoded = tokenizer.encode(answer, add_special_tokens=False)
        if len(encoded) != 1:
            raise ValueError(f"logprob mode needs single-token answers; {answer!r} is {len(encoded)} tokens for {model_name}")
        ids.append(encoded[0])
    return ids[0], ids[1]


class HFAudioLM(ChoiceModel):
    """Shared adapter of the transformers audio LMs (subclasses name their family in hf_families.FAMILIES)."""

    family: str = ""
    modes = frozenset({"generate", "logprob"})
    sampling_rate = 16000  # the Whisper-style feature extractors of all three families

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
        speedups: bool = True,
        static_cache: bool | str = "auto",
    ) -> None:
        self.facts = hf_families.family(self.family)
        self.pretrained = pretrained or self.facts.default_hub_id
        if dtype is not None and dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}; got {dtype!r}")
        built_in = self.pretrained in _BUILT_IN
        self._options(max_new_tokens, do_sample, temperature, seed, built_in)
        if built_in:
            loaded = _BUILT_IN[self.pretrained](self.family, seed=self.seed)
            label = f"{self.name} ({loaded.label_note or self.pretrained})"
            if dtype not in (None, "auto", "float32"):
                import torch

                loaded.model.to(getattr(torch, dtype))
        else:
            loaded = self._from_pretrained(dtype, device_map, trust_remote_code, attn_implementation)
            label = f"{self.name}:{self.pretrained}"
        self._adopt(loaded, label, to_device=device_map is None, speedups=speedups, static_cache=static_cache)

    @classmethod
    def from_loaded(cls, loaded: LoadedModel, label: str, *, max_new_tokens: int | None = None, do_sample: bool = False,
                    temperature: float = 1.0, seed: int = 0, speedups: bool = True, static_cache: bool | str = "auto") -> HFAudioLM:
        """The adapter around a model built elsewhere and already on its device (the GPU bench's full-size random thinker)."""
        self = cls.__new__(cls)
        self.facts = hf_families.family(cls.family)
        self.pretrained = loaded.description.get("pretrained", label)
        self._options(max_new_tokens, do_sample, temperature, seed, built_in=True)
        self._adopt(loaded, label, to_device=False, speedups=speedups, static_cache=static_cache)
        return self

    def _options(self, max_new_tokens, do_sample, temperature, seed, built_in: bool) -> None:
        if max_new_tokens is None:
            max_new_tokens = BUILT_IN_MAX_NEW_TOKENS if built_in else DEFAULT_MAX_NEW_TOKENS
        self.max_new_tokens = int(max_new_tokens)
        self.do_sample = bool(do_sample)
        self.temperature = float(temperature)
        self.seed = int(seed)

    def _adopt(self, loaded: LoadedModel, label: str, *, to_device: bool, speedups: bool, static_cache) -> None:
        """Take the loaded model and processor: device, eval mode, speed-ups, the clip-by-clip features."""
        self.model, self.processor = loaded.model, loaded.processor
        self.label = label
        self._describe = {"name": self.name, "pretrained": self.pretrained, "max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample}
        self._describe.update(loaded.description)
        if to_device:
            from accelerate import PartialState

            self.model.to(PartialState().device)
        self.model.eval()
        self.tokenizer = self.processor.tokenizer
        self.tokenizer.padding_side = "left"
        audio_token_id = self.tokenizer.convert_tokens_to_ids(self.facts.tokens["audio_token"])
        if speedups:
            self.speedups = hf_speedups.install(self.model, self.facts, audio_token_id, static_cache=static_cache)
        else:
            self.speedups = hf_speedups.SpeedUps(self.model, reason="speedups=false")
        self._describe.update(self.speedups.describe())
        # Our inputs come from a shallow copy of the processor whose feature extractor works
        # clip by clip (the processor itself stays stock, for callers who want its defaults).
        self._input_processor = self.processor
        if self.facts.per_clip_features:
            self._input_processor = copy.copy(self.processor)
            self._input_processor.feature_extractor = PerClipFeatures(self.processor.feature_extractor, unit=PAD_UNIT)
        self._answer_ids: dict[tuple[str, str], tuple[int, int]] = {}

    # -------------------------------------------------------------- loading

    def _from_pretrained(self, dtype, device_map, trust_remote_code, attn_implementation) -> LoadedModel:
        import transformers
        from transformers import AutoConfig

        model_class = getattr(transformers, self.facts.model_class)
        config = AutoConfig.from_pretrained(self.pretrained, trust_remote_code=trust_remote_code)
        if self.facts.thinker:  # full Omni checkpoints hold thinker + talker; we load the thinker (text output) only
            config = getattr(config, "thinker_config", None) or config
        kwargs = {"config": config, "trust_remote_code": trust_remote_code, "dtype": dtype or "auto"}
        if device_map is not None:
            kwargs["device_map"] = device_map
        if attn_implementation:
            kwargs["attn_implementation"] = attn_implementation
        logger.info("loading %s from %s", self.facts.model_class, self.pretrained)
        model = model_class.from_pretrained(self.pretrained, **kwargs)
        processor = load_audio_processor(self.pretrained, self.facts.processor_class if self.facts.vision else "", trust_remote_code)
        description = {"dtype": dtype or "auto", "device_map": device_map, "trust_remote_code": bool(trust_remote_code)}
        return LoadedModel(model=model, processor=processor, description=description)

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

    def clip_preparer(self):
        """`prepare_clips`'s work on one clip as a picklable function, for the runner's loader worker processes."""
        extractor = self._input_processor.feature_extractor
        if not isinstance(extractor, PerClipFeatures):
            return None
        return _ClipLogMels(extractor.extractor, self.sampling_rate, extractor.unit, extractor.gap)

    def adopt_prepared(self, clip, prepared) -> None:
        """Log-mels a loader worker process computed for `clip` with `clip_preparer()`."""
        if prepared is not None:
            self._input_processor.feature_extractor.adopt(clip.array, prepared, sampling_rate=self.sampling_rate)

    @staticmethod
    def audio_arrays(queries: list[ChoiceQuery]) -> list:
        """The batch's clips in prompt order (the order of the processor's audio inputs)."""
        return [p.clip.array for q in queries for p in q.parts if p.kind == "audio"]

    # -------------------------------------------------------------- answering

    def generate(self, queries: list[ChoiceQuery]) -> list[ModelOutput]:
        """One padded batch, greedy decoding (sampling seeded by the first query when asked)."""
        import torch

        began = time.perf_counter()
        inputs = self.encode(queries)
        prompt_len = inputs["input_ids"].shape[1]
        gen_kwargs = {"max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample}
        gen_kwargs.update(self.speedups.generate_kwargs(prompt_len, self.max_new_tokens))
        if self.do_sample:
            gen_kwargs["temperature"] = self.temperature
            torch.manual_seed(queries[0].seed % (2**63))
        with torch.inference_mode(), self.speedups.call(self.audio_arrays(queries), inputs["input_ids"]):
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
        with torch.inference_mode(), self.speedups.call(self.audio_arrays(queries), inputs["input_ids"]):
            logits = self.model(**inputs, use_cache=False).logits[:, -1, :].float()  # left padding: every prompt ends there
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


@dataclass(frozen=True)
class _ClipLogMels:
    """`clip_log_mels` of one clip at the model's rate (picklable: runs in a loader worker process)."""

    extractor: object
    sampling_rate: int
    unit: int
    gap: int

    def __call__(self, clip):
        if clip.sampling_rate != self.sampling_rate:
            return None
        return clip_log_mels(self.extractor, clip.array, {"sampling_rate": self.sampling_rate}, self.unit, self.gap)


@register("qwen2.5-omni")
class Qwen25Omni(HFAudioLM):
    """Qwen2.5-Omni thinker (text output), e.g. Qwen/Qwen2.5-Omni-7B or -3B."""

    name = "qwen2.5-omni"
    family = "qwen2.5-omni"


@register("qwen3-omni")
class Qwen3Omni(HFAudioLM):
    """Qwen3-Omni thinker (text output), e.g. Qwen/Qwen3-Omni-30B-A3B-Instruct (for speed, see the vLLM route)."""

    name = "qwen3-omni"
    family = "qwen3-omni"


@register("qwen2-audio")
class Qwen2Audio(HFAudioLM):
    """Qwen2-Audio, e.g. Qwen/Qwen2-Audio-7B-Instruct."""

    name = "qwen2-audio"
    family = "qwen2-audio"
