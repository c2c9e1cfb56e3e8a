"""`autorecap inject`, `refresh`, `versions` and `toggle`, run in process on real chat files."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from autorecap import sample_chat_path
from tests.conftest import FIXTURES, fixture_files
from tests.test_cli import run

RECAP_V1 = "A storm split the mainmast."
"""Only in version 1 (the current one) of modern-solo's running recap."""
RECAP_V0 = "wary of the new navigator."
"""Only in version 0."""
MAIN_MIRA = "You are Captain Mira"
SUMMARY = re.compile(r"^(.+): \d+ tokens of \d+ \(\d+ injected, \d+ history; tokenizer \w+\)$")

ALL_CHATS = [*fixture_files(), sample_chat_path()]


def copy_chat(source: Path, folder: Path) -> Path:
    """A copy under the same file name (so the same chat id)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.name
    shutil.copyfile(source, target)
    return target


@pytest.fixture
def mira(tmp_path: Path) -> Path:
    return copy_chat(FIXTURES / "handmade" / "modern-solo.jsonl", tmp_path / "chats")


def inject_messages(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, str]]:
    code, out, err = run(capsys, "inject", *args)
    assert code == 0, err
    messages: list[dict[str, str]] = json.loads(out)
    return messages


def inject_text(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = run(capsys, "inject", "--format", "text", *args)
    assert code == 0, err
    assert out.endswith("\n")
    return out[:-1]  # print() added one newline


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def memory_of(message: dict[str, Any]) -> dict[str, Any]:
    extra = message.get("extra")
    data = extra.get("auto_recap_memory") if isinstance(extra, dict) else None
    return data if isinstance(data, dict) else {}


def with_recap(messages: list[dict[str, str]]) -> list[int]:
    return [i for i, m in enumerate(messages) if RECAP_V1 in m["content"]]


def no_traceback(out: str, err: str) -> None:
    assert "Traceback" not in out + err


# --- inject --------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ALL_CHATS, ids=lambda p: p.name)
def test_inject_every_chat_both_formats_and_never_writes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, source: Path
) -> None:
    path = copy_chat(source, tmp_path)
    before = path.read_bytes()

    code, out, err = run(capsys, "inject", str(path))
    assert code == 0, err
    messages = json.loads(out)
    assert isinstance(messages, list)
    assert messages
    for message in messages:
        assert set(message) == {"role", "content"}
        assert message["role"] in {"system", "user", "assistant"}
        assert isinstance(message["content"], str)
    summary = SUMMARY.match(err.splitlines()[0])
    assert summary is not None, err
    assert summary.group(1) == path.stem
    assert re.search(r"^memory (on|off); injected: ", err, re.MULTILINE)
    main = next(m["content"] for m in messages if m["content"].startswith("You "))
    character = re.match(r"You are (.+?) in an ongoing roleplay with ", main)
    assert character is not None or main.startswith("You play ")  # a group: its cast

    code, out, err = run(capsys, "inject", "--format", "text", str(path))
    assert code == 0, err
    # The text prompt ends with the name of the one asked to reply (a group: who spoke last).
    asked = re.escape(character.group(1)) if character else "[^:\n]+"
    assert re.search(rf"\n{asked}:\n$", out)
    assert SUMMARY.match(err.splitlines()[0])

    assert path.read_bytes() == before
    assert source.read_bytes() == before


def test_inject_places_the_running_recap_before_the_main_prompt_by_default(
    capsys: pytest.CaptureFixture[str], mira: Path
) -> None:
    messages = inject_messages(capsys, str(mira))
    assert messages[0]["role"] == "system"
    assert RECAP_V1 in messages[0]["content"]
    assert messages[1]["role"] == "system"
    assert messages[1]["content"].startswith(MAIN_MIRA)
    assert with_recap(messages) == [0]

    text = inject_text(capsys, str(mira))
    assert text.count(RECAP_V1) == 1
    assert text.index(RECAP_V1) < text.index(MAIN_MIRA)
    assert text.endswith("\nCaptain Mira:")


def test_inject_set_overrides_place_the_recap_as_the_last_message(
    capsys: pytest.CaptureFixture[str], mira: Path
) -> None:
    sets = ["--set", "running_scene_recap_position=1", "--set", "running_scene_recap_depth=0"]
    messages = inject_messages(capsys, str(mira), *sets)
    assert messages[0]["content"].startswith(MAIN_MIRA)
    assert messages[-1]["role"] == "system"
    assert with_recap(messages) == [len(messages) - 1]
    assert messages[-2]["content"].startswith("*I bind her hand")

    text = inject_text(capsys, str(mira), *sets)
    last_line = "Tomas: *I bind her hand"
    assert text.index(MAIN_MIRA) < text.index(last_line) < text.index(RECAP_V1)
    assert text.endswith("injured hand.\nCaptain Mira:")
    # Only for this run: nothing was saved.
    assert with_recap(inject_messages(capsys, str(mira))) == [0]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "running_scene_recap_position=7",
            "setting 'running_scene_recap_position' must be one of: -1, 0, 1, 2 (got 7)",
        ),
        ("running_scene_recap_depth=deep", "setting 'running_scene_recap_depth' must be "),
        ("running_scene_recap_position", "--set takes KEY=VALUE"),
        ("no_such_setting=1", "unknown setting 'no_such_setting'"),
    ],
)
def test_inject_bad_set_is_one_clear_error(
    capsys: pytest.CaptureFixture[str], mira: Path, setting: str, message: str
) -> None:
    code, out, err = run(capsys, "inject", str(mira), "--set", setting)
    assert code == 1
    assert message in err
    assert out == ""
    no_traceback(out, err)


def test_inject_system_file_is_the_main_prompt(
    capsys: pytest.CaptureFixture[str], mira: Path, tmp_path: Path
) -> None:
    system = tmp_path / "main.txt"
    system.write_text("Narrate a sea tale in the second person. MAIN-FROM-FILE", encoding="utf-8")
    messages = inject_messages(capsys, str(mira), "--system", str(system))
    assert messages[1] == {
        "role": "system",
        "content": "Narrate a sea tale in the second person. MAIN-FROM-FILE",
    }
    assert not any(m["content"].startswith(MAIN_MIRA) for m in messages)
    text = inject_text(capsys, str(mira), "--system", str(system))
    assert "\nNarrate a sea tale in the second person. MAIN-FROM-FILE\nTomas: " in text
    assert MAIN_MIRA not in text


def test_inject_text_group_chat_names_each_line_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Chat completion: group characters' content carries "Name: " (setOpenAIMessages).
    path = copy_chat(FIXTURES / "handmade" / "group.jsonl", tmp_path)
    messages = inject_messages(capsys, str(path))
    assert messages[1:] == [
        {"role": "assistant", "content": "Juno: The caravan halts at the dry well."},
        {
            "role": "assistant",
            "content": "Bram: Dry? It held water last spring. Someone has poisoned or plugged it.",
        },
        {"role": "user", "content": "Bram, check the stones. Juno, keep watch on the ridge."},
        {
            "role": "assistant",
            "content": "Juno: Riders on the ridge. Three of them, flying the grey banner.",
        },
        {"role": "system", "content": "The wind carries the smell of smoke from the east."},
    ]
    # Text completion: each line is "Name: text" once (formatMessageHistoryItem); the group
    # prefix of the chat-completion content must not be doubled into "Juno: Juno: ...".
    text = inject_text(capsys, str(path))
    assert text.endswith(
        "\nJuno: The caravan halts at the dry well.\n"
        "Bram: Dry? It held water last spring. Someone has poisoned or plugged it.\n"
        "Ada: Bram, check the stones. Juno, keep watch on the ridge.\n"
        "Juno: Riders on the ridge. Three of them, flying the grey banner.\n"
        "The wind carries the smell of smoke from the east.\n"
        "Juno:"
    )


def test_inject_a_chat_of_several_characters_as_a_group_without_its_marks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A chat written elsewhere: several characters speak, but its messages carry no
    # `original_avatar` and it is not under "group chats/". It is still a group.
    lines = (FIXTURES / "handmade" / "group.jsonl").read_text(encoding="utf-8").splitlines()
    plain = [lines[0]]
    for line in lines[1:]:
        message = json.loads(line)
        message.pop("original_avatar", None)
        plain.append(json.dumps(message))
    path = tmp_path / "elsewhere.jsonl"
    path.write_text("\n".join(plain) + "\n", encoding="utf-8")
    messages = inject_messages(capsys, str(path))
    assert messages[0]["content"].startswith("You play Juno and Bram in an ongoing group")
    assert messages[1] == {
        "role": "assistant",
        "content": "Juno: The caravan halts at the dry well.",
    }
    assert messages[2]["content"].startswith("Bram: Dry?")


# --- toggle --------------------------------------------------------------------------------------


def settings_json(home: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((home / "settings.json").read_text(encoding="utf-8"))
    return data


def test_toggle_off_for_one_chat_then_inject_has_no_recap(
    capsys: pytest.CaptureFixture[str], mira: Path, home: Path
) -> None:
    code, out, err = run(capsys, "toggle", "off", str(mira))
    assert code == 0, err
    assert "memory is off for 'modern-solo'" in out
    assert settings_json(home)["global"]["chats_enabled"] == {"modern-solo": False}

    code, out, err = run(capsys, "inject", str(mira))
    assert code == 0, err
    assert with_recap(json.loads(out)) == []
    assert "memory off; injected: nothing" in err
    assert RECAP_V1 not in inject_text(capsys, str(mira))

    code, out, err = run(capsys, "toggle", "on", str(mira))
    assert code == 0, err
    assert settings_json(home)["global"]["chats_enabled"] == {"modern-solo": True}
    code, out, err = run(capsys, "inject", str(mira))
    assert with_recap(json.loads(out)) == [0]
    assert "memory on; injected: auto_recap_memory_scene" in err


def test_toggle_global_writes_the_settings_file(
    capsys: pytest.CaptureFixture[str], mira: Path, home: Path
) -> None:
    code, out, err = run(capsys, "toggle", "--global", "off")
    assert code == 0, err
    values = settings_json(home)["global"]
    assert values["use_global_toggle_state"] is True
    assert values["global_toggle_state"] is False
    code, out, err = run(capsys, "inject", str(mira))
    assert with_recap(json.loads(out)) == []
    assert "memory off" in err

    code, out, err = run(capsys, "toggle", "--global", "on")
    assert code == 0, err
    values = settings_json(home)["global"]
    assert values["use_global_toggle_state"] is True
    assert values["global_toggle_state"] is True
    run(capsys, "toggle", "off", str(mira))  # the chat's own switch does not count now
    code, out, err = run(capsys, "inject", str(mira))
    assert with_recap(json.loads(out)) == [0]

    code, out, err = run(capsys, "toggle", "--global", "per-chat")
    assert code == 0, err
    assert settings_json(home)["global"]["use_global_toggle_state"] is False
    code, out, err = run(capsys, "inject", str(mira))
    assert with_recap(json.loads(out)) == []  # the chat's own switch (off) counts again
    assert "memory off" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["per-chat", "CHAT"], "per-chat goes with --global; for one chat use on or off"),
        (["on"], "name the chat to switch, or use --global"),
        (["off"], "name the chat to switch, or use --global"),
        (["--global", "on", "CHAT"], "--global switches every chat: name no chat with it"),
    ],
)
def test_toggle_errors(
    capsys: pytest.CaptureFixture[str], mira: Path, args: list[str], message: str
) -> None:
    args = [str(mira) if a == "CHAT" else a for a in args]
    code, out, err = run(capsys, "toggle", *args)
    assert code == 1
    assert message in err
    no_traceback(out, err)


# --- refresh -------------------------------------------------------------------------------------


def check_mira_auto_hidden(messages: list[dict[str, Any]]) -> None:
    """auto_hide_scene_count 2, breaks at 3 and 6: messages 0-3 auto-hidden; 4 was hidden by
    the user (never marked); 5-7 visible."""
    assert len(messages) == 8
    for index in range(4):
        assert messages[index]["is_system"] is True, index
        assert memory_of(messages[index]).get("auto_hidden") is True, index
    assert messages[4]["is_system"] is True
    assert "auto_hidden" not in memory_of(messages[4])
    for index in range(5, 8):
        assert messages[index]["is_system"] is False, index
        assert "auto_hidden" not in memory_of(messages[index]), index
    # The active swipe's own extra follows (SPEC-NOTES §4.1).
    assert memory_of(messages[0]["swipe_info"][0]).get("auto_hidden") is True
    assert memory_of(messages[2]["swipe_info"][1]).get("auto_hidden") is True


def test_refresh_saves_auto_hide_into_the_file(
    capsys: pytest.CaptureFixture[str], mira: Path
) -> None:
    original = lines_of(FIXTURES / "handmade" / "modern-solo.jsonl")
    code, out, err = run(capsys, "refresh", str(mira))
    assert code == 0, err
    assert "modern-solo: memory on" in out
    assert "4 message(s) hidden, 0 unhidden" in out
    saved = lines_of(mira)
    check_mira_auto_hidden(saved[1:])
    assert [m["mes"] for m in saved[1:]] == [m["mes"] for m in original[1:]]
    header = saved[0]["chat_metadata"]
    assert header["integrity"] == original[0]["chat_metadata"]["integrity"]
    assert header["auto_recap_running_scene_recaps"]["current_version"] == 1

    after_first = mira.read_bytes()
    code, out, err = run(capsys, "refresh", str(mira))
    assert code == 0, err
    assert "0 message(s) hidden, 0 unhidden" in out
    assert mira.read_bytes() == after_first


def test_refresh_a_stored_chat_by_id(
    capsys: pytest.CaptureFixture[str], mira: Path, tmp_path: Path
) -> None:
    before = mira.read_bytes()
    code, out, err = run(capsys, "import", str(mira))
    assert code == 0, err
    code, out, err = run(capsys, "refresh", "modern-solo")
    assert code == 0, err
    assert "4 message(s) hidden" in out
    exported = tmp_path / "exported.jsonl"
    code, out, err = run(capsys, "export", "modern-solo", "-o", str(exported))
    assert code == 0, err
    check_mira_auto_hidden(lines_of(exported)[1:])
    assert mira.read_bytes() == before  # the store was changed, not the imported file


# --- versions ------------------------------------------------------------------------------------


def versions_json(capsys: pytest.CaptureFixture[str], chat: Path) -> list[dict[str, Any]]:
    code, out, err = run(capsys, "versions", "--json", str(chat))
    assert code == 0, err
    versions: list[dict[str, Any]] = json.loads(out)
    return versions


def test_versions_lists_them_with_the_current_one_marked(
    capsys: pytest.CaptureFixture[str], mira: Path
) -> None:
    before = mira.read_bytes()
    code, out, err = run(capsys, "versions", str(mira))
    assert code == 0, err
    marked = [line for line in out.splitlines() if "◀ injected" in line]
    assert len(marked) == 1
    assert re.match(r"^\W*1 ◀ injected", marked[0])
    assert any(re.match(r"^\W*0\s", line) for line in out.splitlines())

    versions = versions_json(capsys, mira)
    assert [v["version"] for v in versions] == [0, 1]
    assert RECAP_V0 in versions[0]["content"]
    assert RECAP_V1 in versions[1]["content"]
    assert versions[1]["new_scene_index"] == 6
    assert mira.read_bytes() == before  # listing never writes


def test_versions_select_changes_what_inject_places(
    capsys: pytest.CaptureFixture[str], mira: Path
) -> None:
    code, out, err = run(capsys, "versions", "--select", "0", str(mira))
    assert code == 0, err
    assert "version 0 is now injected" in out
    assert (
        lines_of(mira)[0]["chat_metadata"]["auto_recap_running_scene_recaps"]["current_version"]
        == 0
    )
    messages = inject_messages(capsys, str(mira))
    assert RECAP_V0 in messages[0]["content"]
    assert not any(RECAP_V1 in m["content"] for m in messages)
    code, out, err = run(capsys, "versions", str(mira))
    marked = [line for line in out.splitlines() if "◀ injected" in line]
    assert len(marked) == 1
    assert re.match(r"^\W*0 ◀ injected", marked[0])


def test_versions_edit_adds_a_version_that_is_injected(
    capsys: pytest.CaptureFixture[str], mira: Path, tmp_path: Path
) -> None:
    edited = tmp_path / "edited.txt"
    edited.write_text("  Edited recap: the chart was forged.\n", encoding="utf-8")
    code, out, err = run(capsys, "versions", "--edit", str(edited), str(mira))
    assert code == 0, err
    assert "added version 2; it is now injected" in out
    versions = versions_json(capsys, mira)
    assert [v["version"] for v in versions] == [0, 1, 2]
    assert versions[2]["content"] == "Edited recap: the chart was forged."
    messages = inject_messages(capsys, str(mira))
    assert "Edited recap: the chart was forged." in messages[0]["content"]
    assert not any(RECAP_V1 in m["content"] for m in messages)
    text = inject_text(capsys, str(mira))
    assert text.index("Edited recap: the chart was forged.") < text.index(MAIN_MIRA)


def test_versions_errors(capsys: pytest.CaptureFixture[str], mira: Path, tmp_path: Path) -> None:
    code, out, err = run(capsys, "versions", "--select", "99", str(mira))
    assert code == 1
    assert "no running recap version 99: the versions are 0, 1" in err
    no_traceback(out, err)

    edited = tmp_path / "edited.txt"
    edited.write_text("x", encoding="utf-8")
    code, out, err = run(capsys, "versions", "--select", "0", "--edit", str(edited), str(mira))
    assert code == 1
    assert "use --select or --edit, not both" in err

    code, out, err = run(capsys, "versions", "--edit", str(tmp_path / "missing.txt"), str(mira))
    assert code == 1
    assert "cannot read" in err
    no_traceback(out, err)
    versions = versions_json(capsys, mira)
    assert [v["version"] for v in versions] == [0, 1]
    assert RECAP_V1 in inject_messages(capsys, str(mira))[0]["content"]


@pytest.mark.parametrize("option", ["--select", "--edit"])
def test_versions_that_fails_leaves_the_file_as_it_was(
    capsys: pytest.CaptureFixture[str], mira: Path, tmp_path: Path, option: str
) -> None:
    before = mira.read_bytes()
    value = "99" if option == "--select" else str(tmp_path / "missing.txt")
    code, out, err = run(capsys, "versions", option, value, str(mira))
    assert code == 1, out + err
    assert mira.read_bytes() == before


@pytest.fixture
def recapped_sample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "sample.jsonl"
    shutil.copy(sample_chat_path(), path)
    code, _, err = run(capsys, "recap", str(path))
    assert code == 0, err
    return path


def test_inject_query_recalls_a_hidden_message_and_says_so(
    capsys: pytest.CaptureFixture[str], recapped_sample: Path
) -> None:
    before = recapped_sample.read_bytes()
    code, out, err = run(
        capsys, "inject", str(recapped_sample), "--query", "What did the violet lens cost?"
    )
    assert code == 0, err
    recalled = [m for m in json.loads(out) if m["content"].startswith("Earlier in this chat")]
    assert len(recalled) == 1
    assert "Nine crowns" in recalled[0]["content"]
    assert re.search(r"recalled: \[scene \d+ · #\d+ · ", err)
    assert recapped_sample.read_bytes() == before  # inject never writes

    code, _, err = run(capsys, "inject", str(recapped_sample), "--query", " ")
    assert code == 1
    assert "--query is empty: give the text recall looks for" in err
    # the tier is on by default: the newest user message is the query
    code, out, err = run(capsys, "inject", str(recapped_sample))
    assert code == 0, err
    assert "recalled:" in err
    code, out, err = run(capsys, "inject", str(recapped_sample), "--set", "recall_enabled=false")
    assert code == 0, err
    assert "Earlier in this chat" not in out
    assert "recalled:" not in err


def test_remember_pins_lists_and_forgets(
    capsys: pytest.CaptureFixture[str], recapped_sample: Path
) -> None:
    assert run(capsys, "remember", str(recapped_sample), "14")[0] == 0
    code, out, _ = run(capsys, "remember", str(recapped_sample))
    assert code == 0
    assert out.startswith("#14: ")
    code, out, err = run(capsys, "inject", str(recapped_sample), "--set", "long_term_enabled=true")
    assert code == 0, err
    assert any(m["content"].startswith("Things to remember") for m in json.loads(out))
    assert run(capsys, "remember", str(recapped_sample), "14", "--forget")[0] == 0
    assert "no message is pinned" in run(capsys, "remember", str(recapped_sample))[1]
    code, _, err = run(capsys, "remember", str(recapped_sample), "999")
    assert code != 0
    assert "no message 999" in err
    code, _, err = run(capsys, "remember", str(recapped_sample), "-1")  # not an option
    assert code != 0
    assert "no message -1: the chat has 199 (0 to 198)" in err


def test_remember_says_what_changed_and_whether_the_tier_injects(
    capsys: pytest.CaptureFixture[str], recapped_sample: Path
) -> None:
    before = recapped_sample.read_bytes()
    code, out, err = run(capsys, "remember", str(recapped_sample), "10", "--forget")
    assert code == 0
    assert "message 10 is not pinned already: nothing changed" in out
    assert recapped_sample.read_bytes() == before  # nothing written
    code, out, err = run(capsys, "remember", str(recapped_sample), "10")
    assert "pinned: message 10" in out
    assert "while long_term_enabled is off: `autorecap settings set long_term_enabled true`" in err
    assert run(capsys, "settings", "set", "long_term_enabled", "true")[0] == 0
    code, out, err = run(capsys, "remember", str(recapped_sample), "10")
    assert "message 10 is pinned already: nothing changed" in out
    assert "long_term_enabled" not in err


def test_combined_makes_lists_and_selects_versions(
    capsys: pytest.CaptureFixture[str], recapped_sample: Path
) -> None:
    code, out, _ = run(capsys, "combined", str(recapped_sample))
    assert code == 0
    assert "no combined recap yet" in out
    assert run(capsys, "combined", str(recapped_sample), "--make")[0] == 0
    code, out, err = run(capsys, "combined", str(recapped_sample), "--make")
    assert code == 0, err
    assert re.search(r"^\* version 1: 199 recap\(s\), ", out, re.MULTILINE)
    assert "the combined recap is not injected while combined_recap_enabled is off" in err
    code, out, err = run(capsys, "combined", str(recapped_sample), "--select", "0")
    assert code == 0, err
    assert re.search(r"^\* version 0: ", out, re.MULTILINE)
    code, out, err = run(
        capsys, "inject", str(recapped_sample), "--set", "combined_recap_enabled=true"
    )
    assert any(m["content"].startswith("The story so far") for m in json.loads(out))
    code, _, err = run(capsys, "combined", str(recapped_sample), "--select", "9")
    assert code != 0
    assert "no combined recap version 9" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, 'cannot read the system prompt "'),
        (b"\xff\xfe not text", "is not UTF-8 text: save it as UTF-8"),
    ],
)
def test_inject_system_file_that_cannot_be_read_is_one_clear_error(
    capsys: pytest.CaptureFixture[str],
    mira: Path,
    tmp_path: Path,
    content: bytes | None,
    message: str,
) -> None:
    system = tmp_path / "main.txt"
    if content is not None:
        system.write_bytes(content)
    code, out, err = run(capsys, "inject", str(mira), "--system", str(system))
    assert code == 1
    assert message in err
    no_traceback(out, err)
    code, out, err = run(capsys, "versions", str(mira), "--edit", str(system))
    assert code == 1
    assert message.replace("system prompt", "recap") in err
    no_traceback(out, err)


def test_every_command_on_a_chat_file_reads_it_leniently_when_asked(
    capsys: pytest.CaptureFixture[str], mira: Path
) -> None:
    """A chat whose bad line `recap --lenient` kept can still be viewed and changed: each
    command that reads the file takes --lenient, and the bad line stays where it was."""
    with mira.open("a", encoding="utf-8") as file:
        file.write('{"name": "Tomas", "mes": "cut off')
    code, _, err = run(capsys, "scenes", str(mira))
    assert code == 1
    assert "--lenient" in err
    for command in (
        ["scenes", str(mira)],
        ["versions", str(mira)],
        ["refresh", str(mira)],
        ["remember", str(mira)],
        ["combined", str(mira)],
    ):
        code, out, err = run(capsys, *command, "--lenient")
        assert code == 0, (command, err)
        no_traceback(out, err)
    assert mira.read_text(encoding="utf-8").endswith('{"name": "Tomas", "mes": "cut off')
