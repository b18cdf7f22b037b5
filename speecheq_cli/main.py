"""The `speecheq` console script: a thin front door over the project's parts.

Each subcommand lives in its own home and is imported only when used, so
`speecheq dataset ...` never pays for torch/transformers and vice versa.
"""

from __future__ import annotations

import importlib
import logging
import sys

# subcommand -> (module, function taking argv, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "demo": ("speecheq_cli.demo", "main", "offline main job on the embedded sample (no GPU, network or weights)"),
    "dataset": ("builders.cli", "main", "build, sample, and push the SpeechEQ dataset"),
    "metric": ("builders.metric_space", "main", "publish the metric module as a Hub Space"),
    "generate": ("builders.generation.cli", "main", "generate new dialogues: scenario -> dialogue -> tones -> filter -> speech"),
    "validate": ("builders.validate", "main", "acoustic contrast of every test pair of a raw folder (and the oracle check)"),
    "audit": ("builders.audit", "main", "shortcut audit: accuracy of single-feature delivery rules"),
    "human-check": ("builders.human_check", "main", "export / import the human-check annotation sheet (Cohen's kappa)"),
    "publish": ("builders.publish", "main", "validate, export and push a generated folder (dry run by default)"),
    "eval": ("eval_scripts.run", "main", "run a model on the benchmark (same as eval_scripts/run.py)"),
    "report": ("eval_scripts.report", "main", "leaderboard and figures from several runs"),
    "respond": ("eval_scripts.respond", "main", "generative track: a speech-output model answers; ERS of its replies"),
    "interact": ("eval_scripts.interact", "main", "interactive track: a simulated user talks with a speech-output model; judges rate it"),
    "multibench": ("eval_scripts.multibench.cli", "main", "Multi-Bench utterance tasks on a local JSONL + audio folder"),
}


def _usage() -> str:
    lines = ["usage: speecheq COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<11} {help_}" for name, (_, _, help_) in SUBCOMMANDS.items()]
    lines += ["", "Run `speecheq COMMAND --help` for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Dispatch `speecheq COMMAND ...` to the command's module."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in SUBCOMMANDS:
        print(f"speecheq: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from speecheq_dataset.secrecy import install_log_scrubber

    install_log_scrubber()  # no key the process reads may reach a log line
    module_name, function_name, _ = SUBCOMMANDS[command]
    run = getattr(importlib.import_module(module_name), function_name)
    return int(run(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
