"""`import`, `export`, `chats`, `delete` and `settings` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import run


def test_import_export_round_trip(
    capsys: pytest.CaptureFixture[str], fixtures_dir: Path, tmp_path: Path, home: Path
) -> None:
    files = sorted(fixtures_dir.rglob("*.jsonl"))
    code, out, _ = run(capsys, "import", *map(str, files))
    assert code == 0
    assert "stored modern-solo (8 messages)" in out
    assert "stored Aqua-1673181146000 (1 message)" in out
    assert (home / "autorecap.db").exists()
    code, out, _ = run(capsys, "chats")
    assert code == 0
    assert "modern-solo" in out
    assert "group" in out
    for path in files:
        target = tmp_path / path.name
        chat_id = path.name.removesuffix(".jsonl")
        code, _, _ = run(capsys, "export", chat_id, "-o", str(target))
        assert code == 0
        assert target.read_bytes() == path.read_bytes()


def test_import_errors(
    capsys: pytest.CaptureFixture[str], fixtures_dir: Path, tmp_path: Path
) -> None:
    path = str(fixtures_dir / "handmade/group.jsonl")
    assert run(capsys, "import", path)[0] == 0
    code, _, err = run(capsys, "import", path)
    assert code == 1
    assert "a chat with id 'group' is already stored: pass --replace" in err
    assert run(capsys, "import", "--replace", path)[0] == 0
    assert run(capsys, "import", "--as", "group-copy", path)[0] == 0
    code, _, err = run(capsys, "import", "--as", "x", path, path)
    assert code == 1
    assert "--as names one chat" in err
    code, _, err = run(capsys, "import", path, str(fixtures_dir / "handmade/group.jsonl"))
    assert "two files would be stored as 'group'" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"chat_metadata":{}}\n{oops')
    code, _, err = run(capsys, "import", str(bad))
    assert code == 1
    assert "line 2 of" in err
    code, out, _ = run(capsys, "import", "--lenient", str(bad))
    assert code == 0
    assert "1 line(s) kept as-is" in out


def test_export_and_delete_unknown_chat(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "export", "ghost", "-o", str(tmp_path / "g.jsonl"))
    assert code == 1
    assert "no stored chat with id 'ghost'" in err
    code, _, err = run(capsys, "delete", "--yes", "ghost")
    assert code == 1
    assert "no stored chat with id 'ghost'" in err


def test_delete(capsys: pytest.CaptureFixture[str], fixtures_dir: Path) -> None:
    run(capsys, "import", str(fixtures_dir / "handmade/group.jsonl"))
    code, out, _ = run(capsys, "delete", "--yes", "group")
    assert code == 0
    code, out, _ = run(capsys, "chats")
    assert "no stored chats yet" in out


def test_chats_with_an_explicit_database(
    capsys: pytest.CaptureFixture[str], fixtures_dir: Path, tmp_path: Path
) -> None:
    db = tmp_path / "other.db"
    run(capsys, "import", "--db", str(db), str(fixtures_dir / "handmade/group.jsonl"))
    _code, out, _ = run(capsys, "chats", "--db", str(db))
    assert "group" in out
    _code, out, _ = run(capsys, "chats")
    assert "no stored chats yet" in out


def test_settings_commands(capsys: pytest.CaptureFixture[str], home: Path) -> None:
    code, out, _ = run(capsys, "settings")
    assert code == 0
    assert "running_scene_recap_position" in out
    assert run(capsys, "settings", "get", "context_size")[1].strip() == "8192"
    code, out, _ = run(capsys, "settings", "set", "context_size", "16384")
    assert code == 0
    assert "context_size = 16384 (profile 'Default')" in out
    assert run(capsys, "settings", "get", "context_size")[1].strip() == "16384"
    code, out, _ = run(capsys, "settings", "set", "chats_enabled", '{"c1": false}')
    assert "(global)" in out
    code, out, _ = run(capsys, "settings", "set", "long_term_position", "-1")  # a value
    assert (code, out.strip()) == (0, "long_term_position = -1 (profile 'Default')")
    code, _, err = run(capsys, "settings", "set", "recall_max_tokens", "-5")
    assert code == 1
    assert "recall_max_tokens" in err
    assert "No such option" not in err
    code, _, err = run(capsys, "settings", "set", "message_recap_context_type", "percentage")
    assert code == 1
    assert (
        "setting 'message_recap_context_type' must be one of: percent, absolute "
        "(got 'percentage')" in err
    )
    code, _, err = run(capsys, "settings", "get", "contxt_size")
    assert "did you mean 'context_size'" in err
    assert run(capsys, "settings", "reset", "context_size")[0] == 0
    assert run(capsys, "settings", "get", "context_size")[1].strip() == "8192"
    saved = json.loads((home / "settings.json").read_text())
    assert saved["global"]["chats_enabled"] == {"c1": False}


def test_profile_commands(capsys: pytest.CaptureFixture[str], home: Path) -> None:
    run(capsys, "settings", "set", "auto_hide_scene_count", "4")
    assert run(capsys, "settings", "profile", "save", "Long")[0] == 0
    run(capsys, "settings", "set", "--profile", "Long", "context_size", "32768")
    assert run(capsys, "settings", "profile", "bind", "Long", "--chat", "c1")[0] == 0
    code, out, _ = run(capsys, "settings", "profile", "list")
    assert "Default (active): auto_hide_scene_count=4" in out
    assert "Long: auto_hide_scene_count=4, context_size=32768" in out
    assert "chat 'c1' uses 'Long'" in out
    code, out, _ = run(capsys, "settings", "--chat", "c1")
    assert "profile 'Long'" in out
    assert run(capsys, "settings", "profile", "load", "Long")[0] == 0
    assert run(capsys, "settings", "get", "context_size")[1].strip() == "32768"
    code, _, err = run(capsys, "settings", "profile", "delete", "Default")
    assert code == 1
    assert "cannot be deleted" in err
    assert run(capsys, "settings", "profile", "unbind", "--chat", "c1")[0] == 0
    assert run(capsys, "settings", "profile", "delete", "Long")[0] == 0
    code, out, _ = run(capsys, "settings", "profile", "list")
    assert "Long" not in out


def test_a_chat_file_runs_with_the_profile_bound_to_its_path_or_its_character(
    capsys: pytest.CaptureFixture[str], fixtures_dir: Path, home: Path
) -> None:
    # `settings --chat` says what the chat really runs with: bound by its id (a file's path
    # binds its name) or by its character, as `inject` and `recap` open it.
    path = str(fixtures_dir / "handmade/modern-solo.jsonl")
    assert run(capsys, "settings", "profile", "save", "Lean")[0] == 0
    run(capsys, "settings", "set", "--profile", "Lean", "recall_enabled", "true")
    code, out, _ = run(capsys, "settings", "profile", "bind", "Lean", "--chat", path)
    assert code == 0
    assert "chat 'modern-solo' uses profile 'Lean'" in out
    for named in (path, "modern-solo"):
        out = run(capsys, "settings", "--chat", named)[1]
        assert "profile 'Lean'" in out
    _, _, err = run(capsys, "inject", path, "--format", "text")
    assert "recalled:" in err  # recall is on: the binding applies to the file
    assert run(capsys, "settings", "profile", "unbind", "--chat", path)[1].strip() == (
        "binding removed"
    )
    code, out, _ = run(capsys, "settings", "profile", "unbind", "--chat", path)
    assert code == 0
    assert "has no profile of its own: nothing changed" in out
    character = "Captain Mira"  # a chat without an avatar: by its name
    assert run(capsys, "settings", "profile", "bind", "Lean", "--character", character)[0] == 0
    assert "profile 'Lean'" in run(capsys, "settings", "--chat", path)[1]
    code, out, err = run(capsys, "settings", "--chat", "a-chat-to-come")
    assert code == 0
    assert "profile 'Default'" in out
    assert "not taken into account" in err


@pytest.mark.parametrize(
    "command",
    [
        ("remember", "nell", "2"),
        ("inject", "nell"),
        ("scenes", "nell"),
        ("settings", "--chat", "x"),
    ],
)
def test_a_mistyped_db_makes_no_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: tuple[str, ...]
) -> None:
    missing = tmp_path / "nope" / "x.db"
    code, _, err = run(capsys, *command, "--db", str(missing))
    assert code == 1
    assert f"no database at '{missing}': check --db" in err
    assert not missing.parent.exists()
