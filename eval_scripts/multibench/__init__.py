"""Multi-Bench's four utterance tasks (SPEC §8): emotion recognition, paralinguistic recognition, style inference, emotion inference.

`tasks` (the local data layout and the questions), `judge` (the semi-open
judge), `examples` (our tiny example sets, spoken with espeak-ng), `run`
(the sharded, resumable runner over the runner's model adapters) and `cli`
(`speecheq multibench TASK --data DIR ...`).
"""
