"""Checks a run makes before anything slow: a bad model name, model arg, flag or weights path fails in one line, by name.

Nothing here loads weights or data. An adapter's accepted arguments are read
from its constructor's signature (down its classes while they pass **kwargs on),
so a new adapter is checked without writing anything extra.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
from pathlib import Path

from eval_scripts.models.base import known_models
from eval_scripts.models.base import model_factory

# CLI flags that become model args, for the adapters that take weights.
WEIGHT_FLAGS = {"dtype": "--dtype", "device_map": "--device-map", "trust_remote_code": "--trust-remote-code"}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_KINDS = {"int": int, "float": (int, float), "bool": bool, "str": str}


def accepted_args(name: str) -> dict[str, inspect.Parameter]:
    """The keyword arguments adapter `name` accepts, by name (its own and those its classes pass **kwargs on to)."""
    factory = model_factory(name)
    params: dict[str, inspect.Parameter] = {}
    for cls in inspect.getmro(factory):
        if cls is object:
            break
        if "__init__" not in vars(cls):
            continue
        signature = inspect.signature(cls.__init__)
        for param in signature.parameters.values():
            if param.name != "self" and param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
                params.setdefault(param.name, param)
        if not any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):
            break
    for extra in getattr(factory, "extra_args", ()):  # taken from **kwargs by name
        params.setdefault(extra, inspect.Parameter(extra, inspect.Parameter.KEYWORD_ONLY))
    return params


def _expected_kind(param: inspect.Parameter) -> str | None:
    """int/float/bool/str when the parameter's annotation or default says so."""
    annotation = param.annotation if isinstance(param.annotation, str) else getattr(param.annotation, "__name__", "")
    for kind in ("bool", "int", "float", "str"):
        if re.search(rf"\b{kind}\b", annotation or ""):
            return kind
    default = param.default
    if default is not inspect.Parameter.empty and default is not None:
        return type(default).__name__ if type(default).__name__ in _KINDS else None
    return None


def check_model_args(name: str, args: dict, *, flags: dict | None = None) -> None:
    """ValueError naming the bad value when `args` (and the weight `flags`) cannot work for adapter `name`."""
    known = known_models()
    if name not in known:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(known)}")
    params = accepted_args(name)
    for key, value in (flags or {}).items():
        if value is not None and value is not False and key not in params:
            raise ValueError(f"{WEIGHT_FLAGS.get(key, key)} applies to models with weights; model {name!r} takes none")
    unknown = sorted(set(args) - set(params))
    if unknown:
        listing = ", ".join(sorted(params)) or "none"
        raise ValueError(f"model {name!r} does not take the model arg(s) {', '.join(unknown)}; it accepts: {listing}")
    for key, value in args.items():
        kind = _expected_kind(params[key])
        if kind is None or value is None:
            continue
        if not isinstance(value, _KINDS[kind]) or (kind in ("int", "float") and isinstance(value, bool)):
            raise ValueError(f"model arg {key}={value!r} for {name!r} must be {'an' if kind == 'int' else 'a'} {kind}")
    _check_requirements(name)
    _check_weights_source(name, args)


def _check_requirements(name: str) -> None:
    factory = model_factory(name)
    missing = [module for module in getattr(factory, "requires", ()) if importlib.util.find_spec(module) is None]
    if missing:
        extra = getattr(factory, "requires_extra", None)
        how = f"pip install 'speecheq[{extra}]'" if extra else f"pip install {' '.join(missing)}"
        raise ValueError(f"model {name!r} needs {', '.join(missing)}, which is not installed: {how}")


def _check_weights_source(name: str, args: dict) -> None:
    """A `pretrained=` that is neither tiny-random, an existing folder, nor a Hub id (cached, when offline) fails by name."""
    source = args.get("pretrained")
    if not isinstance(source, str) or source == "tiny-random":
        return
    path = Path(source).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"pretrained={source!r} is a file; give the model's folder")
        return
    if source.startswith((".", "/", "~")) or not _HUB_ID.match(source):
        raise ValueError(f"pretrained={source!r}: no such folder, and not a Hub id like 'Qwen/Qwen2.5-Omni-7B'")
    if _offline():
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(source, "config.json"), str):
            raise ValueError(f"pretrained={source!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set")


def _offline() -> bool:
    return any(os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on") for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
