"""Speech building blocks of the cascade and the emotion-trajectory track.

- `asr`: Whisper transcription (transformers);
- `ser`: the audeering wav2vec2 dimensional regression model (arousal, dominance, valence), our own head class;
- `cser`: the continuous SER of SPEC §7 (per-second encoder features -> BiLSTM -> V/A/D);
- `vad`: the frame-level V/A/D extractor interface, trajectories with named columns and their CSV files;
- `tones`: the documented V/A/D -> tone-word mapping of the cascade's `emo_des` variant;
- `textlm`: a text LLM, transformers causal LM or OpenAI-compatible endpoint;
- `emotion_labels`: an audio emotion classifier mapped to the categorical-ERS labels;
- `cache`: per-clip results on disk, keyed by a hash of the audio;
- `tiny`: offline random-weight versions of each model, built from configs.

Every component takes a Hub id, a local folder, or `tiny-random`. Heavy imports
(torch, transformers) happen inside functions, so importing a module is cheap.
"""
