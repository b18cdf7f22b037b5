"""Multi-Bench's interactive track (SPEC §8): a simulated user talks to a speech-output model; judges rate the replies.

- `profiles`: user profiles (JSONL) and the fixed list of user emotions with their TTS tone instructions;
- `scripted`: the deterministic offline user and judges (rules over the dialogue so far);
- `agents`: the user LLM and the judges over an API (OpenAI-compatible or Gemini), from versioned prompt files;
- `track`: the loop, sharded and resumable per dialogue, and results.json.
The command line is eval_scripts/interact.py (`speecheq interact`).
"""
