"""The SpeechEQ generation pipeline (SPEC §3–4, §9): scenario -> dialogue -> tones -> filter -> speech.

Each stage is a separate, resumable step that appends one record per item to
a JSONL file under `OUT_DIR/.speecheq-generate/`; a final selection step
balances delivery across the set and writes the raw layout of SPEC §2.1, which
`speecheq dataset build` consumes unchanged. Entry point: `run_pipeline`
(`speecheq generate`).
"""
