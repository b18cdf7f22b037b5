"""The cascade's text LLM: any transformers causal LM, or any OpenAI-compatible endpoint.

`build_text_lm(spec)`:
- a Hub id or local folder: `AutoModelForCausalLM` + its tokenizer's chat
  template, left-padded batches, greedy decoding (logprob scoring available);
- `tiny-random`: a tiny random-weight Qwen2 causal LM (eval_scripts/components/tiny.py);
- `openai:MODEL`: chat completions through `speecheq_dataset.chat.ChatClient`
  (OpenAI, or any compatible server with `base_url=`, e.g. vLLM serving Qwen3);
  the key comes from the environment only.

A conversation is a list of `{"role", "content"}` messages with text content;
a reply is a `speecheq_dataset.chat.ChatReply` whichever the backend.
"""

from __future__ import annotations

import abc
import logging
import time
from eval_scripts.models.tiny import TINY
from speecheq_dataset.chat import ChatReply

logger = logging.getLogger(__name__)

ENDPOINT_PREFIX = "openai:"
DEFAULT_MAX_NEW_TOKENS = 512
TINY_MAX_NEW_TOKENS = 32


class TextLM(abc.ABC):
    """Conversations in, one reply per conversation out, same order."""

    supports_logprob: bool = False

    @abc.abstractmethod
    def generate(self, conversations: list[list[dict]], seeds: list[int] | None = None) -> list[ChatReply]:
        """Greedy (or the server's) completion of each conversation; `seeds` go to servers that take one per request."""

    def score(self, conversations: list[list[dict]], prefix: str, answers: tuple[str, str]) -> list[tuple[float, float]]:
        """Log-probabilities of the two single-token answers right after `prefix` in the assistant turn."""
        raise NotImplementedError(f"{type(self).__name__} cannot score answers")

    @abc.abstractmethod
    def describe(self) -> dict:
        """Identity and settings (never secrets)."""


class HFTextLM(TextLM):
    """A transformers causal LM with a chat template."""

    supports_logprob = True

    def __init__(self, pretrained: str, *, max_new_tokens: int | None = None, dtype: str | None = None, device_map: str | None = None,
                 trust_remote_code: bool = False, seed: int = 0) -> None:
        import torch

        self.pretrained = pretrained
        if max_new_tokens is None:
            max_new_tokens = TINY_MAX_NEW_TOKENS if pretrained == TINY else DEFAULT_MAX_NEW_TOKENS
        self.max_new_tokens = int(max_new_tokens)
        if pretrained == TINY:
            from eval_scripts.components.tiny import build_tiny_causal_lm

            tiny = build_tiny_causal_lm(seed=seed)
            self.model, self.tokenizer = tiny.model, tiny.processor
            self._describe = dict(tiny.description)
        else:
            from transformers import AutoModelForCausalLM
            from transformers import AutoTokenizer

            logger.info("loading the text LLM from %s", pretrained)
            self.tokenizer = AutoTokenizer.from_pretrained(pretrained, trust_remote_code=trust_remote_code)
            kwargs = {"dtype": dtype or "auto", "trust_remote_code": trust_remote_code}
            if device_map is not None:
                kwargs["device_map"] = device_map
            self.model = AutoModelForCausalLM.from_pretrained(pretrained, **kwargs).eval()
            self._describe = {"pretrained": pretrained, "dtype": dtype or "auto", "trust_remote_code": bool(trust_remote_code)}
            if not getattr(self.tokenizer, "chat_template", None):
                raise ValueError(f"{pretrained}: the tokenizer has no chat template (the cascade needs a chat/instruct model)")
        if device_map is None:
            from accelerate import PartialState

            self.model.to(PartialState().device)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self._torch = torch

    def describe(self) -> dict:
        return {"kind": "transformers", "max_new_tokens": self.max_new_tokens, **self._describe}

    def prompts(self, conversations: list[list[dict]], prefix: str = "") -> list[str]:
        """Chat-templated prompts ending where the assistant starts (plus `prefix`); thinking off where the template has it."""
        return [self.tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True, enable_thinking=False) + prefix
                for c in conversations]

    def _encode(self, texts: list[str]):
        inputs = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        return {k: v.to(self.model.device) for k, v in inputs.items()}

    def generate(self, conversations: list[list[dict]], seeds: list[int] | None = None) -> list[ChatReply]:
        torch = self._torch
        began = time.perf_counter()
        inputs = self._encode(self.prompts(conversations))
        with torch.inference_mode():
            sequences = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False)
        new = sequences[:, inputs["input_ids"].shape[1] :].cpu()
        elapsed = time.perf_counter() - began
        eos = self.model.generation_config.eos_token_id
        stops = set(eos if isinstance(eos, list) else [eos]) | {self.tokenizer.eos_token_id, self.tokenizer.pad_token_id}
        replies = []
        for row in range(len(conversations)):
            tokens = new[row].tolist()
            ended = next((k for k, tok in enumerate(tokens) if tok in stops), len(tokens))
            text = self.tokenizer.decode(tokens[:ended], skip_special_tokens=True)
            replies.append(ChatReply(text=text, input_tokens=int(inputs["attention_mask"][row].sum()),
                                   output_tokens=min(ended + 1, len(tokens)), latency_s=elapsed))
        return replies

    def score(self, conversations: list[list[dict]], prefix: str, answers: tuple[str, str]) -> list[tuple[float, float]]:
        from eval_scripts.models.hf_audio_lm import single_token_ids

        torch = self._torch
        ids = single_token_ids(self.tokenizer, answers, self.pretrained)
        inputs = self._encode(self.prompts(conversations, prefix))
        with torch.inference_mode():
            logits = self.model(**inputs, logits_to_keep=1).logits[:, -1, :].float()
        logprobs = torch.log_softmax(logits, dim=-1).cpu()
        return [(float(logprobs[row, ids[0]]), float(logprobs[row, ids[1]])) for row in range(len(conversations))]


class EndpointTextLM(TextLM):
    """Chat completions through the shared ChatClient (retries, ordered concurrency, usage tally)."""

    def __init__(self, model: str, **client_options) -> None:
        from speecheq_dataset.chat import ChatClient

        self.client = ChatClient(model, **client_options)

    def describe(self) -> dict:
        return {"kind": "openai-compatible", **self.client.describe()}

    def generate(self, conversations: list[list[dict]], seeds: list[int] | None = None) -> list[ChatReply]:
        from speecheq_dataset.http_api import map_in_order

        seeds = seeds or [None] * len(conversations)

        return map_in_order(lambda job: self.client.complete(job[0], seed=job[1], label="cascade llm"), list(zip(conversations, seeds)),
                            self.client.concurrency)


ENDPOINT_OPTIONS = ("base_url", "api_key_env", "concurrency", "max_attempts", "timeout", "temperature", "max_tokens", "price_in",
                    "price_out", "backoff_base", "backoff_max", "retry_after_max", "key_required")
HF_OPTIONS = ("max_new_tokens", "dtype", "device_map", "trust_remote_code", "seed")


def build_text_lm(spec: str, **options) -> TextLM:
    """`openai:MODEL` -> endpoint; anything else (Hub id, folder, tiny-random) -> transformers; unknown options fail by name."""
    if spec.startswith(ENDPOINT_PREFIX):
        unknown = sorted(set(options) - set(ENDPOINT_OPTIONS))
        if unknown:
            raise ValueError(f"text LLM {spec!r}: unknown endpoint options {unknown}; known: {', '.join(ENDPOINT_OPTIONS)}")
        return EndpointTextLM(spec[len(ENDPOINT_PREFIX):], **options)
    unknown = sorted(set(options) - set(HF_OPTIONS))
    if unknown:
        raise ValueError(f"text LLM {spec!r}: unknown options {unknown}; known: {', '.join(HF_OPTIONS)}")
    return HFTextLM(spec, **options)
