"""Raw generator output: validation faults, v2 metadata, strict vs default builds (SPEC §2.1)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from speecheq_dataset import raw
from speecheq_dataset.builder import SpeechEQConfig
from speecheq_dataset.builder import build_raw
from speecheq_dataset.columns import CLIP_COLUMNS
from speecheq_dataset.taxonomy import SUBSCALES
from speecheq_dataset.taxonomy import subscale_from_eq_scale

# A real dialogue used as the base of every fault (copied, never edited in place).
BASE_SLUG = "self_expression_independence"
BASE_ID = "20251208_215232_000054_09b6cb8e"


def _edit_metadata(folder: Path, edit) -> None:
    path = folder / "metadata.json"
    metadata = json.loads(path.read_text())
    edit(metadata)
    path.write_text(json.dumps(metadata))


def _delete_clip(folder: Path) -> None:
    (folder / "audio" / "05.mp3").unlink()


def _add_extra_clip(folder: Path) -> None:
    shutil.copy(folder / "audio" / "08.mp3", folder / "audio" / "09.mp3")


def _duplicate_clip(folder: Path) -> None:
    shutil.copy(folder / "audio" / "04.mp3", folder / "audio" / "04.wav")


def _garble_clip(folder: Path) -> None:
    (folder / "audio" / "03.mp3").write_bytes(b"this is not audio at all " * 40)


def _empty_clip(folder: Path) -> None:
    (folder / "audio" / "02.mp3").write_bytes(b"")


def _candidate_texts_differ(folder: Path) -> None:
    def edit(m):
        low = next(e for e in m["audio_files"] if e["sentence_number"] == 6 and e["eq_level"] == "low")
        low["text"] = low["text"] + " Seriously."

    _edit_metadata(folder, edit)


def _conversation_differs(folder: Path) -> None:
    _edit_metadata(folder, lambda m: m["conversation"][1].update(text="Something else entirely."))


def _unknown_eq_scale(folder: Path) -> None:
    _edit_metadata(folder, lambda m: m.update(eq_scale="Interpersonal - Telepathy"))


def _unknown_folder_slug(folder: Path) -> Path:
    target = folder.parent.parent / "interpersonal_telepathy" / folder.name
    target.parent.mkdir()
    folder.rename(target)
    return target


def _bad_json(folder: Path) -> None:
    (folder / "metadata.json").write_text("{not json")


def _bad_valence(folder: Path) -> None:
    _edit_metadata(folder, lambda m: m["scenario"].update(scenario_valence="Ecstatic"))


def _zero_sample_wav(folder: Path) -> None:
    import io
    import wave

    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
    (folder / "audio" / "02.mp3").unlink()
    (folder / "audio" / "02.wav").write_bytes(buffer.getvalue())


def _symlink_loop(folder: Path) -> None:
    clip = folder / "audio" / "07.mp3"
    clip.unlink()
    clip.symlink_to(clip)


def _dangling_symlink(folder: Path) -> None:
    clip = folder / "audio" / "07.mp3"
    clip.unlink()
    clip.symlink_to(folder / "nowhere.mp3")


def _set(path: str, value):
    """A mutation setting metadata key path 'a.b.0.c' to value."""

    def mutate(folder: Path) -> None:
        def edit(m):
            *parents, last = path.split(".")
            target = m
            for key in parents:
                target = target[int(key)] if key.isdigit() else target[key]
            target[int(last) if last.isdigit() else last] = value

        _edit_metadata(folder, edit)

    return mutate


FAULTS = [
    # (fault, mutation, expected code, words the message must contain)
    ("missing clip", _delete_clip, "missing_clip", "05"),
    ("extra clip", _add_extra_clip, "extra_clip", "09.mp3"),
    ("clip twice", _duplicate_clip, "extra_clip", "04"),
    ("undecodable clip", _garble_clip, "undecodable_clip", "03.mp3"),
    ("empty clip", _empty_clip, "empty_clip", "02.mp3"),
    ("zero-sample wav", _zero_sample_wav, "empty_clip", "02.wav"),  # 8.17: was undecodable_clip
    ("symlink loop", _symlink_loop, "unreadable_clip", "07.mp3 is a symbolic link that loops"),  # 8.17: was extra_clip
    ("dangling symlink", _dangling_symlink, "unreadable_clip", "missing file"),
    ("candidate texts differ", _candidate_texts_differ, "candidate_text_mismatch", "turn 6"),
    ("conversation vs audio_files", _conversation_differs, "turn_text_mismatch", "turn 2"),
    ("unknown eq_scale", _unknown_eq_scale, "unknown_subscale", "Telepathy"),
    ("unknown folder slug", _unknown_folder_slug, "unknown_subscale", "interpersonal_telepathy"),
    ("metadata not JSON", _bad_json, "bad_metadata", "not valid JSON"),
    ("unknown valence", _bad_valence, "bad_metadata", "Ecstatic"),
    # 8.7: wrong types are rejected by name, never coerced and never a traceback.
    ("eq_scale a number", _set("eq_scale", 5), "bad_metadata", "eq_scale must be a string, got int 5"),
    ("clip text null", _set("audio_files.3.text", None), "bad_metadata", "audio_files[3].text must be a string, got NoneType"),
    ("subscale_slug a list", _set("generation_metadata.subscale_slug", ["x"]), "bad_metadata", "subscale_slug must be a string"),
    ("sentence_number a list", _set("audio_files.0.sentence_number", [1]), "bad_metadata", "sentence_number must be an integer 1..6, got list [1]"),
    ("sentence_number a bool", _set("conversation.2.sentence_number", True), "bad_metadata", "sentence_number must be an integer"),
    ("tone a number", _set("audio_files.4.tone_description", 123), "bad_metadata", "tone_description must be a string or null, got int 123"),
    ("tone an object", _set("audio_files.4.tone_description", {"a": 1}), "bad_metadata", "got dict {'a': 1}"),
    ("scenario field an object", _set("scenario.title", {"a": 1}), "bad_metadata", "scenario.title must be a string or null"),
    ("dataset_id a list", _set("generation_metadata.dataset_id", ["x"]), "bad_metadata", "dataset_id must be a string"),
    ("audio_files an object", _set("audio_files", {"a": 1}), "bad_metadata", "'audio_files' must be a JSON list"),
    ("conversation entry a string", _set("conversation.0", "hello"), "bad_metadata", "conversation[0] must be an object"),
]


@pytest.mark.parametrize(("fault", "mutate", "code", "words"), FAULTS, ids=[f[0] for f in FAULTS])
def test_each_fault_yields_its_named_error(real_raw_dir, tmp_path, copy_dialogue, fault, mutate, code, words):
    folder = copy_dialogue(real_raw_dir / BASE_SLUG / BASE_ID, tmp_path)
    folder = mutate(folder) or folder
    with pytest.raises(raw.RawDialogueError) as caught:
        raw.read_dialogue(folder)
    message = str(caught.value)
    assert caught.value.code == code and code in raw.FAULT_CODES
    assert str(folder) in message, "the error names the folder"
    assert code in message, "the error names the fault kind"
    assert words in message, f"the error names the bad value ({words!r})"


@pytest.mark.parametrize("strict", [False, True])
def test_wrong_typed_metadata_never_aborts_a_build(real_raw_dir, tmp_path, copy_dialogue, strict):
    # 8.7: these ended a non-strict build in DatasetGenerationError, and a strict one in a traceback.
    folders = _three_dialogues(real_raw_dir, tmp_path / "raw", copy_dialogue)
    _set("audio_files.0.sentence_number", [1])(folders[1])
    if strict:
        with pytest.raises(raw.RawDialogueError, match="bad_metadata.*sentence_number"):
            build_raw(tmp_path / "raw", strict=True, cache_dir=tmp_path / "cache")
        return
    dataset, rejected = build_raw(tmp_path / "raw", cache_dir=tmp_path / "cache")
    assert len(dataset) == 2 and [(r.folder, r.code) for r in rejected] == [(folders[1], "bad_metadata")]


def test_an_unexpected_error_in_one_folder_rejects_only_that_folder(real_raw_dir, tmp_path, copy_dialogue, monkeypatch):
    folders = _three_dialogues(real_raw_dir, tmp_path / "raw", copy_dialogue)
    real_read = raw.read_dialogue

    def read(folder):
        if folder == folders[0]:
            raise AttributeError("'NoneType' object has no attribute 'strip'")
        return real_read(folder)

    monkeypatch.setattr(raw, "read_dialogue", read)
    rejected = []
    assert len(list(raw.iter_dialogues(tmp_path / "raw", rejected=rejected))) == 2
    assert [(r.folder, r.code) for r in rejected] == [(folders[0], "invalid_dialogue")]
    assert "AttributeError" in rejected[0].detail


def test_stray_files_and_hidden_entries_are_reported_not_silently_skipped(real_raw_dir, tmp_path, copy_dialogue):
    # 8.16
    folders = _three_dialogues(real_raw_dir, tmp_path / "raw", copy_dialogue)
    root = tmp_path / "raw"
    (root / "notes.txt").write_text("x")
    (folders[0].parent / "README.md").write_text("x")
    (root / ".git").mkdir()
    (folders[0].parent / ".trash").mkdir()
    scan = raw.scan_raw_dir(root)
    assert scan.folders == sorted(folders)
    assert sorted(scan.stray_files) == sorted([root / "notes.txt", folders[0].parent / "README.md"])
    assert sorted(scan.hidden) == sorted([root / ".git", folders[0].parent / ".trash"])
    warnings = scan.warnings()
    assert any("notes.txt: a file where" in w for w in warnings) and any(".git: hidden, skipped" in w for w in warnings)


def test_unmodified_copy_is_valid(real_raw_dir, tmp_path, copy_dialogue):
    folder = copy_dialogue(real_raw_dir / BASE_SLUG / BASE_ID, tmp_path)
    dialogue = raw.read_dialogue(folder)
    assert dialogue.id == BASE_ID
    assert dialogue.fields["subscale"] == BASE_SLUG
    assert dialogue.fields["generation_version"] == "v1"
    assert dialogue.fields["scenario_valence"] is None
    assert dialogue.fields["turn4_tone_low"] == "Speak with a tense, controlling tone, displaying anxiety and irritation."
    assert [p.name for p in dialogue.clip_paths] == [f"{i:02d}.mp3" for i in range(1, 9)]
    assert dialogue.fields["duration_s"] == pytest.approx(sum(dialogue.clip_durations))


def test_v2_metadata_fields_and_untrusted_audio_path(real_raw_dir, tmp_path, copy_dialogue):
    folder = copy_dialogue(real_raw_dir / BASE_SLUG / BASE_ID, tmp_path)

    def to_v2(m):
        m["scenario"].update(scenario_valence="Conflict", target_social_intent="Hold the boundary kindly.")
        m["generation_metadata"]["generation_version"] = "v2"
        for entry in m["audio_files"]:
            entry["audio_path"] = "/home/author/does/not/exist/" + entry["audio_path"].rsplit("/", 1)[-1]

    _edit_metadata(folder, to_v2)
    fields = raw.read_dialogue(folder).fields
    assert (fields["scenario_valence"], fields["target_social_intent"], fields["generation_version"]) == (
        "Conflict",
        "Hold the boundary kindly.",
        "v2",
    )


def test_whitespace_layout_is_not_a_text_mismatch(real_raw_dir, tmp_path, copy_dialogue):
    folder = copy_dialogue(real_raw_dir / BASE_SLUG / BASE_ID, tmp_path)
    original = raw.read_dialogue(folder).fields["turn1_text"]
    _edit_metadata(folder, lambda m: m["conversation"][0].update(text="  " + m["conversation"][0]["text"].replace(" ", "  ") + "\n"))
    relaid = raw.read_dialogue(folder).fields["turn1_text"]  # no turn_text_mismatch raised
    assert relaid != original and " ".join(relaid.split()) == original


@pytest.mark.parametrize("sub", SUBSCALES, ids=[s.slug for s in SUBSCALES])
def test_every_eq_scale_string_resolves(sub):
    assert subscale_from_eq_scale(sub.eq_scale) is sub
    assert subscale_from_eq_scale(f"  {sub.composite.name}   -  {sub.name} ") is sub


def _three_dialogues(real_raw_dir: Path, root: Path, copy) -> list[Path]:
    return [copy(p.parent, root) for p in sorted(real_raw_dir.glob("*/*/metadata.json"))[:3]]


def test_default_build_skips_and_reports_faulty_folders(real_raw_dir, tmp_path, copy_dialogue):
    folders = _three_dialogues(real_raw_dir, tmp_path / "raw", copy_dialogue)
    _garble_clip(folders[1])
    dataset, rejected = build_raw(tmp_path / "raw", cache_dir=tmp_path / "cache")
    assert len(dataset) == 2
    assert set(dataset["id"]) == {folders[0].name, folders[2].name}
    assert [(r.folder, r.code) for r in rejected] == [(folders[1], "undecodable_clip")]
    # A cache hit still reports the rejection.
    _, rejected_again = build_raw(tmp_path / "raw", cache_dir=tmp_path / "cache")
    assert [(r.folder, r.code) for r in rejected_again] == [(folders[1], "undecodable_clip")]


def test_strict_build_fails_on_first_fault_with_named_error(real_raw_dir, tmp_path, copy_dialogue):
    folders = _three_dialogues(real_raw_dir, tmp_path / "raw", copy_dialogue)
    _candidate_texts_differ(folders[2])
    with pytest.raises(raw.RawDialogueError, match=f"{folders[2].name}: candidate_text_mismatch"):
        build_raw(tmp_path / "raw", strict=True, cache_dir=tmp_path / "cache")


def test_duplicate_ids_are_rejected(real_raw_dir, tmp_path, copy_dialogue):
    folders = _three_dialogues(real_raw_dir, tmp_path / "raw", copy_dialogue)
    twin = folders[0].parent / "copy_of_first"
    shutil.copytree(folders[0], twin)
    dialogues = list(raw.iter_dialogues(tmp_path / "raw", rejected=(rejected := [])))
    assert len(dialogues) == 3
    assert [(r.folder, r.code) for r in rejected] == [(twin, "duplicate_id")]


def test_changed_raw_folder_is_rebuilt_not_served_stale(real_raw_dir, tmp_path, copy_dialogue):
    folders = _three_dialogues(real_raw_dir, tmp_path / "raw", copy_dialogue)
    first, _ = build_raw(tmp_path / "raw", cache_dir=tmp_path / "cache")
    shutil.rmtree(folders[0])
    second, _ = build_raw(tmp_path / "raw", cache_dir=tmp_path / "cache")
    assert (len(first), len(second)) == (3, 2)


def test_config_errors_name_the_bad_value(tmp_path):
    with pytest.raises(TypeError, match="'yes'"):
        SpeechEQConfig(data_dir=str(tmp_path), strict="yes")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        SpeechEQConfig(data_dir=str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="data_dir"):
        SpeechEQConfig()


def test_folder_without_dialogues_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        raw.find_dialogue_folders(tmp_path)
    with pytest.raises(FileNotFoundError, match="missing"):
        raw.find_dialogue_folders(tmp_path / "missing")


def test_clip_slots_follow_column_order():
    assert [f"{n}{lvl}" for _, n, lvl in raw.CLIP_SLOTS] == ["1high", "2high", "3high", "4high", "4low", "5high", "6high", "6low"]
    assert len(CLIP_COLUMNS) == len(raw.CLIP_SLOTS)
