"""Reading and writing SillyTavern chat files: fixtures, forms, and every error message."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

import autorecap
from autorecap import Chat, ChatFileError, read_chat, set_data, write_chat
from autorecap.stfiles import jsonl
from autorecap.stfiles.jsonl import parse_chat, serialize_chat
from tests.conftest import fixture_files

HEADER = b'{"chat_metadata":{},"user_name":"unused","character_name":"unused"}'


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_round_trips_byte_for_byte(path: Path, tmp_path: Path) -> None:
    original = path.read_bytes()
    chat = read_chat(path)
    assert serialize_chat(chat) == original
    copy = tmp_path / path.name
    write_chat(chat, copy)
    assert copy.read_bytes() == original


def test_fixture_list_is_complete() -> None:
    names = {p.name for p in fixture_files()}
    expected = {"group.jsonl", "modern-solo.jsonl", "odd-types.jsonl", "legacy-solo.jsonl"}
    assert expected <= names
    assert len(names) >= 8


def test_chat_knows_its_id_header_and_metadata(fixtures_dir: Path) -> None:
    chat = read_chat(fixtures_dir / "handmade" / "modern-solo.jsonl")
    assert chat.id == "modern-solo"
    assert chat.metadata["integrity"] == "0f8e2a71-4c1d-4b9e-9f0a-5d2c7e1b3a44"
    assert chat.metadata is chat.header["chat_metadata"]
    assert chat.messages[0].name == "Captain Mira"
    assert chat.messages[4].is_hidden
    assert chat.messages[4].is_narrator
    assert chat.messages[0].line == 2
    assert not chat.is_group


def test_old_header_form_and_missing_chat_metadata(fixtures_dir: Path) -> None:
    legacy = read_chat(fixtures_dir / "handmade" / "legacy-solo.jsonl")
    assert legacy.user_name == "Ren"
    assert legacy.character_name == "Archivist Vell"
    aqua = read_chat(fixtures_dir / "real" / "Aqua-1673181146000.jsonl")
    assert "chat_metadata" not in aqua.header
    original = (fixtures_dir / "real" / "Aqua-1673181146000.jsonl").read_bytes()
    assert aqua.metadata == {}  # created on demand...
    assert serialize_chat(aqua) == original  # ...and left out while it stays empty
    aqua.metadata["note"] = 1
    assert serialize_chat(aqua).split(b"\n")[0] == (
        b'{"user_name":"You","character_name":"Aqua","create_date":1674559896839,'
        b'"chat_metadata":{"note":1}}'
    )


def test_group_chat(fixtures_dir: Path) -> None:
    chat = read_chat(fixtures_dir / "handmade" / "group.jsonl")
    assert chat.is_group
    assert [m.character_key for m in chat.messages[:3]] == ["Juno.png", "Bram.png", "Ada"]
    assert chat.messages[4].is_narrator


def test_odd_types_are_read_not_dropped(fixtures_dir: Path) -> None:
    chat = read_chat(fixtures_dir / "handmade" / "odd-types.jsonl")
    first, second, third, fourth, _ = chat.messages
    assert first["mes"] == 42
    assert first.text == "42"
    assert first.extra is None
    assert second["extra"] is None
    assert third.swipes == ["pick one", "second choice here"]
    assert fourth.swipe_id == 1
    assert chat.messages[4]["vendor_field"] == {"keep": [1, 2, {"deep": True}]}


def test_send_date_in_all_three_forms(fixtures_dir: Path) -> None:
    odd = read_chat(fixtures_dir / "handmade" / "odd-types.jsonl").messages
    assert odd[0].send_time == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)  # epoch ms
    assert odd[1].send_time == datetime(2025, 1, 1, tzinfo=UTC)  # ISO
    assert odd[3].send_time == datetime(2025, 2, 25, 15, 47)  # "February 25, 2025 3:47pm"
    megumin = read_chat(fixtures_dir / "real" / "Megumin-1673323621108.jsonl").messages
    assert megumin[0].send_time == datetime(2023, 4, 21, 20, 2, 47, 124000)
    assert autorecap.Message({"send_date": "not a date"}).send_time is None


def test_a_changed_message_is_written_the_way_sillytavern_writes_it() -> None:
    data = HEADER + b'\n{ "name" : "A", "mes" : "caf\\u00e9", "n": 1.0 }\n{"name":"B","mes":"b"}'
    chat = parse_chat(data, chat_id="c")
    chat.messages[0]["mes"] = "café 🌊"
    lines = serialize_chat(chat).split(b"\n")
    assert lines[0] == HEADER
    assert lines[1] == '{"name":"A","mes":"café 🌊","n":1}'.encode()
    assert lines[2] == b'{"name":"B","mes":"b"}'


def test_setting_a_value_to_itself_changes_no_byte() -> None:
    data = HEADER + b'\r\n{ "name":"A", "mes":"x", "t":1E+2 }\r\n'
    chat = parse_chat(b"\xef\xbb\xbf" + data, chat_id="c")
    chat.messages[0]["mes"] = "x"
    chat.messages[0]["t"] = 100.0
    assert serialize_chat(chat) == b"\xef\xbb\xbf" + data


def test_int_and_float_and_bool_are_told_apart() -> None:
    chat = parse_chat(HEADER + b'\n{"a":1,"b":true}', chat_id="c")
    chat.messages[0]["a"] = 1.0
    chat.messages[0]["b"] = 1
    assert serialize_chat(chat).split(b"\n")[1] == b'{"a":1,"b":1}'


def test_appending_uses_the_files_line_end_and_keeps_the_trailing_newline() -> None:
    data = HEADER + b'\r\n{"mes":"a"}\r\n'
    chat = parse_chat(data, chat_id="c")
    chat.append({"name": "B", "mes": "b"})
    assert serialize_chat(chat) == data + b'{"name":"B","mes":"b"}\r\n'


def test_new_chat_is_written_as_sillytavern_would(tmp_path: Path) -> None:
    chat = Chat([{"name": "A", "is_user": True, "mes": "hi"}], chat_id="new")
    path = write_chat(chat, tmp_path / "new.jsonl")
    assert path.read_bytes() == (
        b'{"chat_metadata":{},"user_name":"unused","character_name":"unused"}\n'
        b'{"name":"A","is_user":true,"mes":"hi"}'
    )


def test_blank_lines_are_kept_in_place() -> None:
    data = HEADER + b'\n\n{"mes":"a"}\n   \n{"mes":"b"}\n\n'
    chat = parse_chat(data, chat_id="c")
    assert len(chat.messages) == 2
    assert [k.line for k in chat.kept_lines] == [2, 4, 6]
    assert serialize_chat(chat) == data


def test_lenient_read_keeps_bad_lines_and_writes_them_back(tmp_path: Path) -> None:
    data = HEADER + b'\n{"mes":"a"}\n{oops\n[1,2]\n\xff\xfe\n{"mes":"b"}'
    path = tmp_path / "bad.jsonl"
    path.write_bytes(data)
    chat = read_chat(path, lenient=True)
    assert [m["mes"] for m in chat.messages] == ["a", "b"]
    assert [(k.line, k.reason.split(" (")[0]) for k in chat.kept_lines] == [
        (3, "is not valid JSON"),
        (4, "is a list, not a JSON object"),
        (5, "is not valid UTF-8"),
    ]
    set_data(chat.messages[1], "memory", "recap")
    write_chat(chat, path)
    lines = path.read_bytes().split(b"\n")
    assert lines[:5] == data.split(b"\n")[:5]
    assert json.loads(lines[5]) == {"mes": "b", "extra": {"auto_recap_memory": {"memory": "recap"}}}


def test_kept_lines_follow_the_nearest_surviving_message() -> None:
    data = HEADER + b'\n{"mes":"a"}\n{"mes":"b"}\n{bad\n{"mes":"c"}'
    chat = parse_chat(data, chat_id="c", lenient=True)
    del chat.messages[1]
    assert serialize_chat(chat) == HEADER + b'\n{"mes":"a"}\n{bad\n{"mes":"c"}'
    del chat.messages[0]
    assert serialize_chat(chat) == HEADER + b'\n{bad\n{"mes":"c"}'


# ---- one test per error message ------------------------------------------------------------


def test_error_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_bytes(HEADER + b'\n{"mes":"a"}\n{"mes": "b",}\n{"mes":"c"}')
    with pytest.raises(ChatFileError) as caught:
        read_chat(path)
    message = str(caught.value)
    assert message.startswith(f'line 3 of "{path}": message line is not valid JSON')
    assert "--lenient" in message
    assert [p.line for p in caught.value.problems] == [3]


def test_error_counts_further_bad_lines() -> None:
    with pytest.raises(ChatFileError, match=r"\(and 2 more bad line\(s\)\)") as caught:
        parse_chat(HEADER + b"\n{\n[]\n7", chat_id="c")
    assert [p.line for p in caught.value.problems] == [2, 3, 4]


def test_error_not_an_object() -> None:
    with pytest.raises(ChatFileError, match=r"line 2 of .*is a string, not a JSON object"):
        parse_chat(HEADER + b'\n"just text"', chat_id="c")


def test_error_not_utf8() -> None:
    with pytest.raises(ChatFileError, match=r"line 2 of .*is not valid UTF-8 \(byte 9\)"):
        parse_chat(HEADER + b'\n{"mes":"\xe9"}', chat_id="c")


def test_error_nan_is_not_json() -> None:
    with pytest.raises(ChatFileError, match="NaN is not valid JSON"):
        parse_chat(HEADER + b'\n{"mes":NaN}', chat_id="c")


def test_error_bad_header() -> None:
    with pytest.raises(ChatFileError, match=r"line 1 of .*the header is not valid JSON"):
        parse_chat(b'{"chat_metadata":\n{"mes":"a"}', chat_id="c")


def test_error_chat_metadata_not_an_object() -> None:
    with pytest.raises(ChatFileError, match="chat_metadata is a list, not an object"):
        parse_chat(b'{"chat_metadata":[]}\n{"mes":"a"}', chat_id="c")


def test_error_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"\xef\xbb\xbf\n")
    with pytest.raises(ChatFileError, match="is empty: a SillyTavern chat file starts with"):
        read_chat(path)


def test_error_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ChatFileError, match=r"no chat file at .*check the path"):
        read_chat(tmp_path / "nope.jsonl")


def test_error_folder_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ChatFileError, match="is a folder, not a chat file"):
        read_chat(tmp_path)


def test_error_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "locked.jsonl"
    path.write_bytes(HEADER)

    def deny(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", deny)
    with pytest.raises(ChatFileError, match="permission denied; check the file's permissions"):
        read_chat(path)


def test_error_other_read_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(self: Path) -> bytes:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(Path, "read_bytes", fail)
    with pytest.raises(ChatFileError, match=r"cannot read .*Input/output error"):
        read_chat(tmp_path / "x.jsonl")


def test_error_write_without_a_path() -> None:
    with pytest.raises(ChatFileError, match=r"was not read from a file.*pass a path"):
        write_chat(Chat([{"mes": "a"}], chat_id="mem"))


def test_error_changed_metadata_over_a_bad_header() -> None:
    chat = parse_chat(b'{"chat_metadata":\n{"mes":"a"}', chat_id="c", lenient=True)
    assert serialize_chat(chat) == b'{"chat_metadata":\n{"mes":"a"}'
    chat.metadata["x"] = 1
    with pytest.raises(ChatFileError, match=r"the header.*fix line 1 before writing"):
        serialize_chat(chat)


def test_error_chat_metadata_of_wrong_type_on_access() -> None:
    chat = parse_chat(b'{"chat_metadata":5}', chat_id="c", lenient=True)
    with pytest.raises(TypeError, match="chat_metadata is int, not an object"):
        _ = chat.metadata


def test_chat_id_is_the_file_name_without_jsonl() -> None:
    assert jsonl.chat_id_for(Path("/x/Captain Mira - 2026-03-02@18h11m40s.jsonl")) == (
        "Captain Mira - 2026-03-02@18h11m40s"
    )
    assert jsonl.chat_id_for(Path("notes.txt")) == "notes.txt"


def test_written_file_keeps_permissions(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(HEADER)
    os.chmod(path, 0o640)
    chat = read_chat(path)
    chat.metadata["x"] = 1
    write_chat(chat)
    assert (os.stat(path).st_mode & 0o777) == 0o640


def test_the_fixture_copies_are_the_shared_originals() -> None:
    """tests/fixtures holds a copy of shared/fixtures for checkouts without shared/: it must
    never drift from (or be edited away from) the originals."""
    shared = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "st-chats"
    local = Path(__file__).resolve().parents[1] / "fixtures" / "st-chats"
    copies = sorted(p.relative_to(local) for p in local.rglob("*.jsonl"))
    assert copies
    if shared.is_dir():
        originals = sorted(p.relative_to(shared) for p in shared.rglob("*.jsonl"))
        assert copies == originals
        for relative in copies:
            assert (local / relative).read_bytes() == (shared / relative).read_bytes(), relative
