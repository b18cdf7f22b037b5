"""Speed-ups of the transformers audio LMs that reach into transformers internals, installed in one place.

`install(model, family, audio_token_id)` returns a `SpeedUps`; the adapter only
wraps each model call in `speedups.call(...)` and adds `speedups.generate_kwargs(...)`
to `generate`. What is installed, and why:

- Ragged prefill (`sdpa_ragged`): a prefill from an empty cache runs attention on each
  prompt's real tokens only: one variable-length flash call on a CUDA device in half
  precision (`torch.nn.attention.varlen`), else row by row with the unmasked causal SDPA
  kernel, exactly as at batch size 1. Stock sdpa builds a (batch, 1, L, L) mask for a
  left-padded batch and runs the masked kernel over every padded position; a padded batch
  was ~2x slower than its rows one at a time (tiny model, CPU). Decoding keeps the usual mask.
- Packed audio encoder: the Omni encoders cut every clip into ~100-position chunks and,
  unless the attention is "flash", loop over them one SDPA call each (~18 per query, per
  layer). Our attention takes the packed call instead: one varlen call on CUDA (half
  precision), else one SDPA call per distinct chunk length.
- Encoder memo: the audio-encoder output of each clip is kept as long as the clip lives,
  so round 2 does not re-encode the five clips round 1 already encoded (the Omni encoders
  encode each clip on its own, so a clip's output does not depend on its batch-mates).
- Last-position head: the LM head projects only each row's last position (these thinker
  classes have no `logits_to_keep`; the prompt's other positions are never read).
- On CUDA: transformers' static KV cache, whose decode step transformers compiles itself
  (CUDA graphs), its length rounded up to `CACHE_BUCKET` so that batches of other prompt
  lengths reuse the compiled step; and the end-of-sequence check deferred by one step so the
  host never waits on the device between steps (transformers enables that only on "mps").

Before touching the model, `install` checks that the internals these rely on exist in the
installed transformers (the thinker's layout changed between 5.17 and 5.24), then runs a
probe batch with and without the speed-ups and compares the logits. If a check fails,
nothing is installed and one warning says why: the adapter then runs plain transformers.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from dataclasses import dataclass, field

from eval_scripts.models.memo import ClipMemo

logger = logging.getLogger(__name__)

RAGGED_SDPA = "sdpa_ragged"  # the text decoder's attention implementation while installed
# transformers routes an attention implementation whose name contains "flash" to the packed
# (cu_seqlens) call in the Omni audio encoders; ours then runs one call per chunk length.
PACKED_AUDIO = "sdpa_packed_flash_api"
CACHE_BUCKET = 512  # static-cache lengths are rounded up to a multiple of this (fewer recompilations)


class SpeedUpsUnavailable(RuntimeError):
    """The installed transformers lacks an internal a speed-up relies on; the message names it."""


# ---------------------------------------------------------------- ragged prefill


class LeftPadding:
    """The prefill "mask" of `sdpa_ragged`: each row's number of real tokens, right-aligned (left padding)."""

    # Looks "already prepared" to transformers' mask preprocessing, which some models run a second
    # time on what generate prepared for a static cache (Qwen3-Omni's text model does).
    ndim = 4

    def __init__(self, lengths: list[int], length: int) -> None:
        self.lengths = lengths
        self.length = length  # the padded prompt length (a static cache holds more key slots)
        self._packing: dict = {}

    def packing(self, device):
        """(flat indices of the real tokens in a (batch x length) layout, int32 segment bounds) on `device`, made once for all layers."""
        if device not in self._packing:
            import torch

            starts = [(r * self.length + self.length - n, (r + 1) * self.length) for r, n in enumerate(self.lengths)]
            index = torch.cat([torch.arange(a, b) for a, b in starts]).to(device)
            bounds = torch.tensor([0, *self.lengths]).cumsum(0).to(device=device, dtype=torch.int32)
            self._packing[device] = (index, bounds)
        return self._packing[device]


def _ragged_prefill_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, attention_mask=None, **kwargs):
    """A left-padded causal prefill from an empty cache becomes `LeftPadding`; anything else gets the usual sdpa mask."""
    from transformers.masking_utils import causal_mask_function
    from transformers.masking_utils import sdpa_mask

    if isinstance(attention_mask, LeftPadding):  # prepared by generate, seen again by the model
        return attention_mask
    plain = kwargs.get("mask_function", causal_mask_function) is causal_mask_function
    # q_length is a Python int: in a (compiled) decode step the test stops here.
    if plain and q_length > 1 and attention_mask is not None and attention_mask.dim() == 2 and kv_length >= q_length:
        if not kv_offset and not q_offset and attention_mask.shape[-1] >= q_length:
            import torch

            real = attention_mask[:, :q_length].bool()
            lengths = real.sum(-1)
            right_aligned = torch.arange(q_length, device=real.device)[None, :] >= (q_length - lengths)[:, None]
            if torch.equal(real, right_aligned) and not attention_mask[:, q_length:].any():
                return LeftPadding(lengths.tolist(), q_length)
    return sdpa_mask(batch_size=batch_size, q_length=q_length, kv_length=kv_length, q_offset=q_offset, kv_offset=kv_offset,
                     attention_mask=attention_mask, **kwargs)


def _ragged_sdpa(module, query, key, value, attention_mask, **kwargs):
    """SDPA on each prompt's real tokens only (left padding); padded positions get zeros.

    No real token attends to a padded one, so the zeros never reach a real position.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if not isinstance(attention_mask, LeftPadding):
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    n = attention_mask.length
    key, value = key[:, :, :n], value[:, :, :n]  # a static cache holds empty slots after the prompt
    kernel = varlen_kernel(query)
    if kernel is not None:
        return packed_causal_attention(query, key, value, attention_mask, kwargs.get("scaling"), kernel), None
    batch, heads, length, _ = query.shape
    out = query.new_zeros(batch, length, heads, value.shape[-1])
    for row, real in enumerate(attention_mask.lengths):
        start = length - real
        q, k, v = (t[row : row + 1, :, start:] for t in (query, key, value))
        out[row, start:] = sdpa_attention_forward(module, q, k, v, None, **kwargs)[0][0]
    return out, None


def packed_causal_attention(query, key, value, padding: LeftPadding, scaling, kernel):
    """Causal attention of a left-padded batch as one variable-length call over its real tokens.

    query (batch, heads, L, dim), key/value (batch, kv heads, L, dim); returns (batch, L, heads, dim), zeros at padding.
    """
    batch, heads, length, dim = query.shape
    index, bounds = padding.packing(query.device)
    packed = [t.transpose(1, 2).reshape(batch * length, t.shape[1], dim).index_select(0, index) for t in (query, key, value)]
    out = kernel(*packed, bounds, max(padding.lengths), scaling, causal=True)
    full = query.new_zeros(batch * length, heads, dim)
    full.index_copy_(0, index, out.to(full.dtype))
    return full.view(batch, length, heads, dim)


def varlen_kernel(query):
    """torch's variable-length flash attention as `kernel(q, k, v, bounds, max_len, scale, causal)`, where it runs; else None.

    It needs a CUDA tensor in half precision and a torch that has `torch.nn.attention.varlen`.
    """
    import torch

    if not (query.is_cuda and query.dtype in (torch.float16, torch.bfloat16)):
        return None
    found = _varlen_attn()
    if found is None:
        return None
    varlen_attn, params = found

    def kernel(q, k, v, bounds, max_len, scale, causal):
        extra = {}
        if "window_size" in params:
            extra["window_size"] = (-1, 0) if causal else (-1, -1)
        else:
            extra["is_causal"] = causal
        if q.shape[1] != k.shape[1]:
            if "enable_gqa" in params:
                extra["enable_gqa"] = True
            else:
                k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
        if "num_splits" in params:
            extra["num_splits"] = 1  # no split-KV: results independent of the batch
        return varlen_attn(q, k, v, bounds, bounds, max_len, max_len, scale=scale, **extra)

    return kernel


@functools.lru_cache(maxsize=1)
def _varlen_attn():
    """(torch.nn.attention.varlen.varlen_attn, its parameter names), or None when this torch lacks a usable one."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    params = frozenset(inspect.signature(varlen_attn).parameters)
    if "window_size" not in params and "is_causal" not in params:
        return None
    return varlen_attn, params


def reference_kernel(q, k, v, bounds, max_len, scale, causal):
    """The variable-length kernel's contract in plain SDPA, segment by segment (tests the packing on CPU)."""
    import torch

    out = q.new_empty(q.shape[0], q.shape[1], v.shape[-1])
    edges = bounds.tolist()
    for start, end in zip(edges, edges[1:]):
        seg = [t[start:end].transpose(0, 1)[None] for t in (q, k, v)]
        if seg[0].shape[1] != seg[1].shape[1]:
            seg[1], seg[2] = (t.repeat_interleave(seg[0].shape[1] // t.shape[1], dim=1) for t in seg[1:])
        out[start:end] = torch.nn.functional.scaled_dot_product_attention(*seg, is_causal=causal, scale=scale)[0].transpose(0, 1)
    return out


# ---------------------------------------------------------------- packed audio encoder


def _packed_audio_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, cu_seq_lens_q=None, **kwargs):
    """Bidirectional attention within each packed chunk (the Omni audio encoders' call); query (1, heads, T, dim).

    One varlen call where it runs; else one SDPA call per distinct chunk length (exactly the
    per-chunk unmasked kernel the encoder would otherwise call, on a batch of equal chunks).
    """
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if cu_seq_lens_q is None or query.shape[0] != 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))  # (T, heads, dim)
    kernel = varlen_kernel(query)
    if kernel is not None:
        longest = kwargs.get("max_length_q")  # transformers computes it once per encoder call
        if longest is None:
            longest = int((cu_seq_lens_q[1:] - cu_seq_lens_q[:-1]).max())
        out = kernel(q, k, v, cu_seq_lens_q.to(torch.int32), int(longest), scaling, causal=False)
        return out[None], None
    edges = cu_seq_lens_q.tolist()
    lengths = [b - a for a, b in zip(edges, edges[1:])]
    out = q.new_empty(q.shape[0], q.shape[1], v.shape[-1])
    by_length: dict[int, list[int]] = {}
    for start, n in zip(edges, lengths):
        by_length.setdefault(n, []).append(start)
    for n, starts in by_length.items():
        index = (torch.tensor(starts)[:, None] + torch.arange(n)[None, :]).to(q.device)  # (chunks, n)
        group = [t[index].transpose(1, 2) for t in (q, k, v)]  # (chunks, heads, n, dim)
        out[index] = sdpa_attention_forward(module, *group, None, dropout=0.0, scaling=scaling, is_causal=False)[0]
    return out[None], None


# ---------------------------------------------------------------- encoder memo


class AudioEncoderMemo:
    """Audio-encoder outputs per clip, so round 2 does not re-encode the history clips round 1 encoded.

    Installed over the inner model's `get_audio_features`; active only inside `batch(...)`,
    which names the call's clips (kept in a `ClipMemo`, as long as the clip lives) and their
    audio-token counts (runs of the audio placeholder in `input_ids`, in clip order). Any
    mismatch falls back to the plain encoder call.
    """

    def __init__(self, owner, audio_token_id: int) -> None:
        self.owner = owner
        self.encode_audio = owner.get_audio_features
        self.audio_token_id = audio_token_id
        self._clips: list | None = None
        self._lengths: list[int] = []
        self.memo = ClipMemo()
        owner.get_audio_features = self  # the instance attribute shadows the class method

    def remove(self) -> None:
        if self.owner.__dict__.get("get_audio_features") is self:
            del self.owner.get_audio_features

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
    """While inside, the LM head sees only each row's last position (left padding puts every prompt's last token there)."""
    hook = model.lm_head.register_forward_pre_hook(lambda module, args: (args[0][:, -1:, :], *args[1:]))
    try:
        yield
    finally:
        hook.remove()


# ---------------------------------------------------------------- install


@dataclass
class SpeedUps:
    """What `install` put in place on one model; the adapter's view of it."""

    model: object
    installed: list[str] = field(default_factory=list)  # names of the active speed-ups
    static_cache: bool = False
    encoder_memo: AudioEncoderMemo | None = None
    reason: str | None = None  # why the plain path runs (install's warning), if it does
    _undo: list = field(default_factory=list, repr=False)

    def call(self, clips: list, input_ids):
        """Context of one model call on prompts `input_ids` hearing `clips` (in prompt order)."""
        stack = contextlib.ExitStack()
        if "last_position_head" in self.installed:
            stack.enter_context(last_position_head(self.model))
        if self.encoder_memo is not None and clips:
            stack.enter_context(self.encoder_memo.batch(clips, input_ids))
        return stack

    def generate_kwargs(self, prompt_length: int, max_new_tokens: int) -> dict:
        """Extra `generate` arguments: the static cache, sized to a multiple of CACHE_BUCKET."""
        if not self.static_cache:
            return {}
        need = prompt_length + max_new_tokens
        return {"cache_implementation": "static", "max_cache_len": -(-need // CACHE_BUCKET) * CACHE_BUCKET}

    def describe(self) -> dict:
        """For results.json: the active speed-ups, or why there are none."""
        out: dict = {"speedups": list(self.installed)}
        if "ragged_prefill" in self.installed:
            out["attn_implementation"] = RAGGED_SDPA
        if self.reason:
            out["speedups_off"] = self.reason
        return out

    def remove(self) -> None:
        """Undo every change `install` made to the model (its outputs are then plain transformers')."""
        while self._undo:
            self._undo.pop()()
        self.installed, self.static_cache, self.encoder_memo = [], False, None


def install(model, family, audio_token_id: int | None = None, *, static_cache: bool | str = "auto", probe: bool = True) -> SpeedUps:
    """Install the speed-ups on `model` (a transformers model of `family`, an `HFFamily`); see the module docstring.

    static_cache: True, False, or "auto" (on when the model is on a CUDA device). Falls back to
    the plain path, with one warning naming the reason, when an internal is missing or the
    probe's logits differ.
    """
    import transformers

    speedups = SpeedUps(model)
    try:
        parts = _check_internals(model, family, audio_token_id)
        inputs = _probe_inputs(model, parts) if probe else None
        plain = _probe_outputs(speedups, inputs) if probe else None
        _apply(speedups, parts, family, audio_token_id, static_cache)
        if probe:
            _compare(model, _probe_outputs(speedups, inputs), plain)
        # Last, once all else stands: it changes a transformers class for the whole process (see _defer_on_cuda_or_mps).
        if getattr(model.device, "type", "cpu") == "cuda" and _defer_stop_checks_on_cuda():
            speedups.installed.append("deferred_stop_check")
    except SpeedUpsUnavailable as exc:
        speedups.remove()
        speedups.reason = f"transformers {transformers.__version__}: {exc}"
        logger.warning("%s: running plain transformers, without the speed-ups (%s)", family.name, speedups.reason)
    return speedups


@dataclass
class _Parts:
    """The pieces of the model the speed-ups reach (transformers >= 5.24 layout)."""

    text_config: object
    audio_owner: object | None = None  # the module whose get_audio_features the thinker calls
    audio_config: object | None = None
    audio_attentions: list = field(default_factory=list)


def _check_internals(model, family, audio_token_id) -> _Parts:
    """The internals the speed-ups rely on, or SpeedUpsUnavailable naming the first one missing."""
    import torch

    def need(condition, what: str) -> None:
        if not condition:
            raise SpeedUpsUnavailable(f"no {what}")

    try:
        from transformers import AttentionInterface  # noqa: F401
        from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: F401
        from transformers.masking_utils import AttentionMaskInterface  # noqa: F401
        from transformers.masking_utils import causal_mask_function  # noqa: F401
        from transformers.masking_utils import sdpa_mask
    except ImportError as exc:
        raise SpeedUpsUnavailable(f"attention/mask interfaces ({exc})") from exc
    need({"batch_size", "q_length", "kv_length", "q_offset", "kv_offset", "attention_mask"} <= set(inspect.signature(sdpa_mask).parameters),
         "sdpa_mask(batch_size, q_length, kv_length, q_offset, kv_offset, attention_mask)")
    text_config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    need(hasattr(text_config, "_attn_implementation"), "config._attn_implementation")
    need(isinstance(getattr(model, "lm_head", None), torch.nn.Linear), "lm_head")
    parts = _Parts(text_config=text_config)
    if not family.per_clip_features:
        return parts
    # The thinker layout of transformers >= 5.24: thinker.model holds audio_tower and language_model
    # and owns get_audio_features (5.17 kept audio_tower on the thinker and model was the text model).
    inner = getattr(model, "model", None)
    need(inner is not None and hasattr(inner, "audio_tower") and hasattr(inner, "language_model"),
         "thinker.model.audio_tower / .language_model (the thinker layout of transformers >= 5.24)")
    need(callable(getattr(inner, "get_audio_features", None)), "thinker.model.get_audio_features")
    params = list(inspect.signature(inner.get_audio_features).parameters)
    need(params[:3] == ["input_features", "feature_attention_mask", "audio_feature_lengths"],
         f"get_audio_features(input_features, feature_attention_mask, audio_feature_lengths) (found {params[:3]})")
    need(audio_token_id is not None, "audio token id")
    parts.audio_owner = inner
    parts.audio_config = inner.audio_tower.config
    need(hasattr(parts.audio_config, "_attn_implementation"), "audio_config._attn_implementation")
    try:
        from transformers.utils.generic import is_flash_attention_requested
    except ImportError:
        is_flash_attention_requested = None
    parts.audio_attentions = [m for m in inner.audio_tower.modules() if type(m).__name__.endswith("AudioAttention")]
    packable = is_flash_attention_requested is not None and is_flash_attention_requested(requested_attention_implementation=PACKED_AUDIO)
    if not packable or not parts.audio_attentions or not all("cu_seqlens" in inspect.signature(m.forward).parameters for m in parts.audio_attentions):
        parts.audio_attentions = []  # the packed encoder call is optional: the rest still applies
    return parts


def _apply(speedups: SpeedUps, parts: _Parts, family, audio_token_id, static_cache) -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    model = speedups.model
    AttentionInterface.register(RAGGED_SDPA, _ragged_sdpa)
    AttentionMaskInterface.register(RAGGED_SDPA, _ragged_prefill_mask)
    AttentionInterface.register(PACKED_AUDIO, _packed_audio_attention)
    # flash/eager choices are left alone: the ragged prefill replaces stock sdpa only.
    if parts.text_config._attn_implementation == "sdpa":
        _set_attention(speedups, parts.text_config, RAGGED_SDPA)
        speedups.installed.append("ragged_prefill")
    if parts.audio_attentions and parts.audio_config._attn_implementation == "sdpa":
        _set_attention(speedups, parts.audio_config, PACKED_AUDIO)
        speedups.installed.append("packed_audio_encoder")
    if parts.audio_owner is not None:
        speedups.encoder_memo = AudioEncoderMemo(parts.audio_owner, audio_token_id)
        speedups._undo.append(speedups.encoder_memo.remove)
        speedups.installed.append("encoder_memo")
    speedups.installed.append("last_position_head")
    on_cuda = getattr(model.device, "type", "cpu") == "cuda"
    if static_cache is True or (static_cache == "auto" and on_cuda):
        from transformers import GenerationConfig

        if hasattr(GenerationConfig(), "max_cache_len"):
            speedups.static_cache = True
            speedups.installed.append("static_cache")
        elif static_cache is True:
            raise SpeedUpsUnavailable("GenerationConfig.max_cache_len (static cache sizing)")


def _set_attention(speedups: SpeedUps, config, name: str) -> None:
    before = config._attn_implementation
    config._attn_implementation = name
    speedups._undo.append(lambda: setattr(config, "_attn_implementation", before))


def _defer_stop_checks_on_cuda() -> bool:
    """Let transformers defer its end-of-sequence check by one step on CUDA too (it does on "mps"); True if in place."""
    try:
        from transformers.generation.utils import DeferredStopCheck
    except ImportError:
        return False
    current = DeferredStopCheck.__dict__.get("is_supported")
    if getattr(current, "__func__", None) is _defer_on_cuda_or_mps:
        return True
    if current is None or list(inspect.signature(DeferredStopCheck.is_supported).parameters) != ["device", "cache", "cache_is_returned", "is_assistant"]:
        return False
    DeferredStopCheck.is_supported = staticmethod(_defer_on_cuda_or_mps)
    return True


def _defer_on_cuda_or_mps(device, cache, cache_is_returned, is_assistant) -> bool:
    # transformers' own rule (see DeferredStopCheck.is_supported), with "cuda" beside "mps".
    if device.type not in ("mps", "cuda") or is_assistant:
        return False
    return cache is None or cache.is_croppable or not cache_is_returned


def _probe_inputs(model, parts: _Parts) -> dict:
    """A small left-padded text batch, and two clips' log-mels whose encoder chunks differ in length."""
    import torch

    device = model.device
    # Ordinary token ids: far below every family's special tokens, and below the tiny vocabulary.
    ids = torch.randint(10, min(200, parts.text_config.vocab_size), (2, 9), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, :4] = 0  # the second prompt is 5 tokens, left-padded
    inputs = {"text": {"input_ids": ids.to(device), "attention_mask": mask.to(device)}}
    if parts.audio_owner is not None:
        window = int(getattr(parts.audio_config, "n_window", 100))
        frames = [2 * window + 50, 4 * window + 30]  # the encoders cut 2 * n_window frames per chunk
        mels = parts.audio_config.num_mel_bins
        generator = torch.Generator().manual_seed(1)
        features = torch.zeros(2, mels, max(frames))
        feature_mask = torch.zeros(2, max(frames), dtype=torch.long)
        for i, n in enumerate(frames):
            features[i, :, :n] = torch.randn(mels, n, generator=generator)
            feature_mask[i, :n] = 1
        inputs["audio"] = (parts.audio_owner, features.to(device=device, dtype=model.dtype), feature_mask.to(device))
    return inputs


def _probe_outputs(speedups: SpeedUps, inputs: dict) -> dict:
    import torch

    text = inputs["text"]
    out = {}
    with torch.inference_mode():
        with speedups.call([], text["input_ids"]):
            out["logits"] = speedups.model(**text, use_cache=False).logits[:, -1, :].float()
        if "audio" in inputs:
            owner, features, mask = inputs["audio"]
            out["audio features"] = owner.get_audio_features(features, mask).last_hidden_state.float()
    return out


def _compare(model, fast: dict, plain: dict) -> None:
    """The installed model must give the plain model's probe outputs (fp32: to 1e-4; half precision: to 0.1, relative)."""
    import torch

    tolerance = 1e-4 if model.dtype == torch.float32 else 0.1
    for name, reference in plain.items():
        scale = max(float(reference.abs().max()), 1.0)
        error = float((fast[name] - reference).abs().max())
        if not error <= tolerance * scale:  # also catches NaN
            raise SpeedUpsUnavailable(f"the probe's {name} differ from plain transformers' by {error:.3g} (relative tolerance {tolerance})")
