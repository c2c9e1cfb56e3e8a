"""The command line, run through its real entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autorecap import sample_chat_path
from autorecap.cli import main

HEADER = '{"chat_metadata":{},"user_name":"unused","character_name":"unused"}'


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run `autorecap ARGS...` in process; return (exit code, stdout, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_check_passes_on_every_fixture(
    capsys: pytest.CaptureFixture[str], fixtures_dir: Path
) -> None:
    files = sorted(str(p) for p in fixtures_dir.rglob("*.jsonl"))
    code, out, _ = run(capsys, "check", *files)
    assert code == 0
    assert out.count(": ok (") == len(files)
    assert "warning line 2: 'mes' is a number, not text; read as '42'" in out


def test_check_reports_every_problem_and_changes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = (
        HEADER + "\n"
        '{"mes":"a","swipe_id":3,"swipes":["a"]}\n'
        "\n"
        "{broken\n"
        '{"mes":"b","mes":"c","is_user":"yes"}\n'
        '{"mes":"d","extra":{"auto_summarize_memory":{"memory":"old"}}}\n'
        '{"mes":"e","send_date":"someday"}'
    ).encode()
    path = tmp_path / "messy.jsonl"
    path.write_bytes(data)
    code, out, _ = run(capsys, "check", str(path))
    assert code == 1
    assert "errors" in out.splitlines()[0]
    expected = [
        "warning line 2: 'swipe_id' 3 is out of range: there are 1 swipe(s)",
        "warning line 3: blank line (kept as-is)",
        "error line 4: message line is not valid JSON",
        "warning line 5: the key 'mes' appears twice",
        "warning line 5: 'is_user' is a string, not true/false",
        "warning line 6: recap data under the old key extra.auto_summarize_memory",
        "warning line 7: 'send_date' 'someday' is not a date form SillyTavern writes",
    ]
    for line in expected:
        assert line in out
    assert path.read_bytes() == data


def test_check_json_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(HEADER + '\n{"mes":1}')
    code, out, _ = run(capsys, "check", "--json", str(path))
    assert code == 0
    report = json.loads(out)
    assert report[0]["ok"] is True
    assert report[0]["problems"][0]["line"] == 2


def test_check_missing_file_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "check", str(tmp_path / "gone.jsonl"))
    assert code == 1
    assert "no chat file at" in out


def test_show_sample(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", "--sample")
    assert code == 0
    assert "sample_chat" in out
    assert "hidden" in out
    assert "tokens in all" in out


def test_show_lists_recap_data_and_token_counts(
    capsys: pytest.CaptureFixture[str], fixtures_dir: Path
) -> None:
    path = str(fixtures_dir / "handmade/modern-solo.jsonl")
    code, out, _ = run(capsys, "show", "--full", path)
    assert code == 0
    assert "The storm 4-6" in out
    assert "8 messages, 1 hidden, 1 with a recap; 190 tokens in all" in " ".join(out.split())
    code, out, _ = run(capsys, "show", "--json", path)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [row["index"] for row in rows] == list(range(8))
    storm = rows[6]
    assert storm["recap"] == "The mainmast splits in the storm; Mira injures her hand."
    assert storm["included"] is True
    assert storm["scene_break"] is True
    assert storm["scene_name"] == "The storm 4-6"
    assert storm["line"] == 8
    assert rows[4]["hidden"] is True
    assert rows[4]["role"] == "narrator"
    assert rows[1]["role"] == "user"
    assert sum(row["tokens"] for row in rows) == 190


def test_show_with_another_tokenizer_and_limit(
    capsys: pytest.CaptureFixture[str], fixtures_dir: Path
) -> None:
    path = str(fixtures_dir / "handmade/modern-solo.jsonl")
    code, out, _ = run(capsys, "show", "--tokenizer", "bytes", "--limit", "2", path)
    assert code == 0
    assert "(bytes)" in out
    assert "│ 5 │" not in out
    assert "│ 7 │" in out


def test_show_errors_are_one_clear_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "show")
    assert code == 1
    assert "error: name a chat file to show, or pass --sample" in err
    code, _, err = run(capsys, "show", "--tokenizer", "gpt2", str(sample_chat_path()))
    assert code == 1
    assert "unknown tokenizer 'gpt2': use one of cl100k, o200k, llama3, qwen3, bytes" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(HEADER + "\n{oops")
    code, _, err = run(capsys, "show", str(bad))
    assert code == 1
    assert f'line 2 of "{bad}"' in err
    code, out, _ = run(capsys, "show", "--lenient", "--json", str(bad))
    assert code == 0
    assert out == ""  # the only message line is malformed, and kept


def test_home_honours_autorecap_home(capsys: pytest.CaptureFixture[str], home: Path) -> None:
    code, out, _ = run(capsys, "home")
    assert code == 0
    assert out.strip() == str(home)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.startswith("autorecap 0.")


def test_installed_script_prints_no_traceback(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("autorecap")
    result = subprocess.run(
        [str(script), "show", str(tmp_path / "missing.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: no chat file at")
