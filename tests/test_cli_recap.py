"""`autorecap recap`, `scenes`, `eval` and `demo`, run through the real entry point."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from autorecap.cli import _app as cli_app
from autorecap.cli.recap import recap as recap_command
from autorecap.core import running
from autorecap.core.data import NAMESPACE, edit_memory, get_data, get_memory
from autorecap.core.scenes import break_indexes, scenes
from autorecap.core.tokens import get_counter
from autorecap.profiles import SETTINGS_FILE
from autorecap.recap.backend import CombineRequest
from autorecap.sample import sample_chat_path
from autorecap.settings import Settings
from autorecap.stfiles.jsonl import read_chat, write_chat
from tests.recap.conftest import Recorded, Scripted
from tests.test_cli import run
from tests.test_pipeline import (
    PROXY_VARIABLES,
    AnsweringServer,
    answer_everything,
    completion,
    kind_of,
)

N_SAMPLE = 199


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """A copy of the bundled sample chat, as a file of its own."""
    path = tmp_path / "sample_chat.jsonl"
    shutil.copyfile(sample_chat_path(), path)
    return path


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[AnsweringServer]:
    """A loopback OpenAI-compatible server answering every pipeline request validly."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    answering = AnsweringServer()
    answering.fallback = answer_everything
    answering.start()
    try:
        yield answering
    finally:
        answering.stop()


@pytest.fixture
def dead_url() -> str:
    """A loopback base URL with nothing listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def words(text: str) -> str:
    """Rich wraps lines at 80 columns: compare text with whitespace collapsed."""
    return " ".join(text.split())


def raw_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().split(b"\n")]


def assert_recapped(path: Path, original: Path) -> None:
    """`path` is `original` recapped, in SillyTavern's format."""
    before = raw_lines(original)
    after = raw_lines(path)
    assert len(after) == len(before) == N_SAMPLE + 1
    header_before, header_after = before[0], after[0]
    assert set(header_after) == set(header_before)
    for key in header_before:
        if key != "chat_metadata":
            assert header_after[key] == header_before[key]
    metadata = header_after["chat_metadata"]
    for key, value in header_before["chat_metadata"].items():
        assert metadata[key] == value, key  # integrity and the rest, untouched
    storage = metadata["auto_recap_running_scene_recaps"]
    assert storage["chat_id"] == "sample_chat"
    assert len(storage["versions"]) >= 6
    assert storage["current_version"] == storage["versions"][-1]["version"]
    for old, new in zip(before[1:], after[1:], strict=True):
        for key in ("name", "mes", "send_date", "is_user"):
            assert new.get(key) == old.get(key)
        assert new["extra"][NAMESPACE]["memory"]
    breaks = [i for i, m in enumerate(after[1:]) if m["extra"][NAMESPACE].get("scene_break")]
    assert len(breaks) >= 7
    for index in breaks:
        data = after[index + 1]["extra"][NAMESPACE]
        assert data["scene_recap_memory"]
        assert data["scene_recap_versions"] == [data["scene_recap_memory"]]
    chat = read_chat(path)  # and it reads back
    assert len(chat.messages) == N_SAMPLE


# --- recap ----------------------------------------------------------------------------------


def test_recap_a_file_in_place(capsys: pytest.CaptureFixture[str], sample: Path) -> None:
    code, out, err = run(capsys, "recap", str(sample))
    assert code == 0, err
    text = words(out)
    assert f"sample_chat: {N_SAMPLE} message recap(s)" in text
    assert re.search(r"(\d+) new scene break\(s\), \1 scene recap\(s\)", text)
    assert f"written to {sample}" in text
    assert "Traceback" not in err
    assert_recapped(sample, sample_chat_path())

    # A second run finds everything done and changes nothing.
    written = sample.read_bytes()
    code, out, _ = run(capsys, "recap", str(sample))
    assert code == 0
    assert (
        "0 message recap(s), 0 new scene break(s), 0 scene recap(s), "
        "0 running recap version(s)" in words(out)
    )
    assert sample.read_bytes() == written


def test_recap_of_a_chat_too_short_for_a_running_recap_says_when_it_comes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "short.jsonl"
    path.write_text(
        '{"user_name": "Ann", "character_name": "Bo"}\n'
        '{"name": "Ann", "is_user": true, "mes": "Hello there, Bo."}\n'
        '{"name": "Bo", "is_user": false, "mes": "Hi Ann, the kettle is on."}\n',
        encoding="utf-8",
    )
    code, _, err = run(capsys, "recap", str(path))
    assert code == 0, err
    assert "no running recap yet" in words(err)
    assert "0 closed scene(s) of 2 message(s)" in words(err)
    assert "after 60 messages at the latest (scene_max_messages)" in words(err)


def test_recap_to_an_output_file_leaves_the_source_alone(
    capsys: pytest.CaptureFixture[str], sample: Path, tmp_path: Path
) -> None:
    original = sample.read_bytes()
    target = tmp_path / "out" / "recapped.jsonl"
    target.parent.mkdir()
    code, out, err = run(capsys, "recap", str(sample), "-o", str(target))
    assert code == 0, err
    assert f"written to {target}" in words(out)
    assert sample.read_bytes() == original
    assert_recapped(target, sample)


def test_recap_a_stored_chat(
    capsys: pytest.CaptureFixture[str], sample: Path, tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "import", str(sample))
    assert code == 0
    assert "stored sample_chat" in words(out)
    original = sample.read_bytes()
    code, out, err = run(capsys, "recap", "sample_chat")
    assert code == 0, err
    assert "written to store:sample_chat" in words(out)
    assert sample.read_bytes() == original  # the store, not the file, was written
    exported = tmp_path / "exported.jsonl"
    code, _, err = run(capsys, "export", "sample_chat", "-o", str(exported))
    assert code == 0, err
    assert_recapped(exported, sample)


def test_recap_with_an_openai_compatible_server(
    capsys: pytest.CaptureFixture[str], sample: Path, server: AnsweringServer
) -> None:
    code, out, err = run(
        capsys, "recap", str(sample), "--backend", "openai", "--base-url", server.url
    )
    assert code == 0, err
    chat = read_chat(sample)
    # A message of at most `llm_own_recap_tokens` is its own recap; the others the LLM's.
    counter, own = get_counter(), Settings().llm_own_recap_tokens
    short = [m for m in chat.messages if counter.count(m.text) <= own]
    assert 0 < len(short) < N_SAMPLE // 5
    for message in chat.messages:
        if message in short:
            assert get_memory(message) == f"{message.name}: {' '.join(message.text.split())}"
        else:
            assert get_memory(message).startswith("LLM message recap (")
    assert re.fullmatch(r"LLM message recap \(Tomas\), line \d+\.", get_memory(chat.messages[1]))
    # Scenes by the cues (the default `scene_break_detection`), recapped by the LLM.
    closed = [s for s in scenes(chat.messages) if s.closed]
    assert len(closed) >= 6
    assert {get_data(chat.messages[s.end], "scene_break_cause") for s in closed} <= {
        "cues",
        "length",
    }
    asked = 0
    for scene in closed:
        if scene.recap == f"LLM scene recap of {scene.name}.":
            asked += 1
            continue
        # A scene whose message recaps run only a little over the cap is trimmed offline:
        # its recap is some of those recaps, word for word.
        said = " ".join(get_memory(m) for m in chat.messages[scene.start : scene.end + 1])
        assert all(part in said for part in re.findall(r"LLM message recap[^.]*\.", scene.recap))
        assert scene.recap.count("LLM message recap") >= 1
    assert asked >= 3
    # Each scene line is appended to the running recap as it is: no condensing call.
    versions = running.versions(chat)
    assert len(versions) == len(closed) - 1
    lines = versions[-1]["content"].splitlines()
    assert lines == [CombineRequest("", s.recap, s.name).line for s in closed[:-1]]
    kinds = Counter(server.kinds())
    # Several messages per call (llm_batch_tokens): a few calls for 199 messages.
    assert kinds["messages"] + kinds["message"] <= N_SAMPLE // 5
    assert set(kinds) <= {"messages", "message", "scene"}
    assert kinds["scene"] == asked
    calls = sum(kinds.values())
    assert f"{N_SAMPLE} message recap(s), {len(closed)} new scene break(s)" in words(out)
    assert re.search(rf"LLM: {calls} call\(s\), [\d,]+ prompt token\(s\)", words(out))
    assert chat.metadata["integrity"] == "b7e3c9a2-4f1d-4c8e-9a56-2d7f0e81c3b4"


def test_recap_with_llm_scene_detection_asks_by_windows_only_without_recaps(
    capsys: pytest.CaptureFixture[str], sample: Path, server: AnsweringServer
) -> None:
    """`scene_break_detection llm` with no message recaps to read the breaks from (they are
    skipped as nothing injects them): the LLM is shown the messages a window at a time."""
    for key, value in (("scene_break_detection", "llm"), ("skip_unused_message_recaps", "true")):
        assert run(capsys, "settings", "set", key, value)[0] == 0
    code, _, err = run(
        capsys, "recap", str(sample), "--backend", "openai", "--base-url", server.url
    )
    assert code == 0, err
    chat = read_chat(sample)
    assert not any(get_memory(m) for m in chat.messages)
    kinds = Counter(server.kinds())
    assert kinds["break"] >= 1
    assert not kinds["messages"]
    assert not kinds["message"]
    causes = [get_data(chat.messages[i], "scene_break_cause") for i in break_indexes(chat.messages)]
    assert "llm" in causes


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_recap_keeps_what_it_has_done(
    capsys: pytest.CaptureFixture[str], sample: Path, server: AnsweringServer, stop: int
) -> None:
    # The recaps a slow LLM has made (and been paid for) were thrown away: the work ran in a
    # temporary database and the file was written only at the end (found by a newcomer test).
    assert run(capsys, "settings", "set", "llm_batch_tokens", "0")[0] == 0  # one per call
    server.fallback = lambda request: dataclasses.replace(answer_everything(request), delay=0.1)
    before = sample.read_bytes()
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from autorecap.cli import main; main()",
            "recap",
            str(sample),
            "--backend",
            "openai",
            "--base-url",
            server.url,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while len(server.requests) < 12 and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(stop)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert "interrupted: what was done is kept in" in " ".join(err.split())
    kept = read_chat(sample)
    recapped = sum(1 for m in kept.messages if get_memory(m))
    assert 0 < recapped < N_SAMPLE
    assert [m.text for m in kept.messages] == [
        m.text for m in read_chat(sample_chat_path()).messages
    ]
    assert sample.read_bytes() != before
    # The next run does only the rest.
    server.fallback = answer_everything
    asked = len(server.requests)
    code, _, err = run(
        capsys, "recap", str(sample), "--backend", "openai", "--base-url", server.url
    )
    assert code == 0, err
    assert all(get_memory(m) for m in read_chat(sample).messages)
    assert len(server.requests) - asked < N_SAMPLE


def test_recap_with_an_unreachable_server_fails_cleanly(
    capsys: pytest.CaptureFixture[str], sample: Path, dead_url: str
) -> None:
    """Exit 1, one clear line, no traceback, and nothing made up in the file: the messages
    keep errors, not recaps; the scenes the cues find (no LLM needed) are marked, with no
    recap, and no running recap is made."""
    assert run(capsys, "settings", "set", "llm_retries", "0")[0] == 0
    assert run(capsys, "settings", "set", "llm_own_recap_tokens", "0")[0] == 0  # all asked
    code, out, err = run(
        capsys, "recap", str(sample), "--backend", "openai", "--base-url", dead_url
    )
    assert code == 1
    assert "Traceback" not in err
    assert re.search(r"; (\d+) call\(s\) got no answer, about [\d,]+ prompt token", words(out))
    reported = [line for line in err.splitlines() if line.startswith(("error:", "failed:"))]
    assert reported
    expected = f"cannot reach the LLM server at {dead_url} (ConnectError): is it running"
    assert all(expected in line for line in reported)
    before = read_chat(sample_chat_path())
    after = read_chat(sample)
    assert after.header["chat_metadata"]["integrity"] == before.metadata["integrity"]
    assert [(m.name, m.text) for m in after.messages] == [(m.name, m.text) for m in before.messages]
    assert not any(get_memory(m) for m in after.messages)
    assert all(get_data(m, "error") for m in after.messages)
    found = break_indexes(after.messages)
    assert found
    assert {get_data(after.messages[i], "scene_break_cause") for i in found} <= {"cues", "length"}
    assert not any(s.recap for s in scenes(after.messages))
    assert running.versions(after) == []


def test_recap_failures_of_a_short_chat_are_stored_and_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, dead_url: str
) -> None:
    """Too short for scene detection, the run goes on past its failed message recaps: each
    message keeps an `error`, the file is written, and the command exits 1."""
    assert run(capsys, "settings", "set", "llm_retries", "0")[0] == 0
    assert run(capsys, "settings", "set", "llm_own_recap_tokens", "0")[0] == 0  # all asked
    path = tmp_path / "short.jsonl"
    lines = ['{"chat_metadata":{"integrity":"keep-me"},"user_name":"unused","character_name":"x"}']
    lines += [
        json.dumps({"name": "Tomas" if i % 2 else "Mira", "is_user": bool(i % 2), "mes": f"Hi {i}"})
        for i in range(5)
    ]
    path.write_text("\n".join(lines))
    code, out, err = run(capsys, "recap", str(path), "--backend", "openai", "--base-url", dead_url)
    assert code == 1
    assert "Traceback" not in err
    failed = [line for line in err.splitlines() if line.startswith("failed:")]
    # One line for the five that failed alike.
    assert len(failed) == 1
    assert failed[0].startswith(
        "failed: message 0 … message 4 (5 alike): cannot reach the LLM server at"
    )
    assert "0 message recap(s)" in words(out)
    chat = read_chat(path)
    assert chat.metadata["integrity"] == "keep-me"
    for message in chat.messages:
        assert get_memory(message) == ""
        assert str(get_data(message, "error")).startswith("cannot reach the LLM server")


def test_a_failed_scene_recap_says_why_there_is_no_running_recap(
    capsys: pytest.CaptureFixture[str], sample: Path, server: AnsweringServer
) -> None:
    def refuse_scenes(request: Recorded) -> Scripted:
        if kind_of(request) == "scene":
            return Scripted("status", status=400, body={"error": {"message": "too long"}})
        return answer_everything(request)

    server.fallback = refuse_scenes
    code, out, err = run(
        capsys, "recap", str(sample), "--backend", "openai", "--base-url", server.url
    )
    assert code == 1
    assert "failed: scene recap: scene 1: the LLM server answered 400" in words(err)
    assert "0 running recap version(s)" in words(out)
    assert "waits for a scene whose recap failed; `autorecap recap` again retries" in words(err)


def test_recap_force_keeps_what_its_help_promises(
    capsys: pytest.CaptureFixture[str], sample: Path
) -> None:
    """Was a bug: `--force` is documented as "Redo recaps that exist (not user-edited ones)", yet it
    overwrites recaps the user edited (`needs_recap(force=True)` ignores `edited`)."""
    force_help = get_type_hints(recap_command, include_extras=True)["force"].__metadata__[0].help
    assert run(capsys, "recap", str(sample))[0] == 0
    chat = read_chat(sample)
    edit_memory(chat.messages[3], "My own recap of message three.")
    machine = get_memory(chat.messages[4])
    chat.messages[4]["mes"] = "Completely new text about a cursed lighthouse and 77 gulls."
    write_chat(chat)
    code, _, err = run(capsys, "recap", str(sample), "--force")
    assert code == 0, err
    after = read_chat(sample)
    assert get_memory(after.messages[4]) != machine  # redone
    assert "lighthouse" in get_memory(after.messages[4])
    if "not user-edited" in force_help:
        assert get_memory(after.messages[3]) == "My own recap of message three."
        assert get_data(after.messages[3], "edited") is True


# --- scenes ---------------------------------------------------------------------------------


def test_scenes_list_mark_rename_unmark(capsys: pytest.CaptureFixture[str], sample: Path) -> None:
    code, out, _ = run(capsys, "scenes", str(sample))
    assert code == 0
    assert "0-198 (open)" in out

    original_lines = sample.read_bytes().split(b"\n")
    code, out, _ = run(capsys, "scenes", str(sample), "mark", "24", "Hiring")
    assert code == 0
    assert "mark: message 24" in out
    lines = sample.read_bytes().split(b"\n")
    changed = [i for i, (a, b) in enumerate(zip(original_lines, lines, strict=True)) if a != b]
    assert changed == [25]  # only message 24's line (after the header)
    data = json.loads(lines[25])["extra"][NAMESPACE]
    assert data["scene_break"] is True
    assert data["scene_break_name"] == "Hiring"
    assert data["scene_break_visible"] is True

    run(capsys, "scenes", str(sample), "mark", "50")
    code, out, _ = run(capsys, "scenes", str(sample))
    assert code == 0
    for expected in ("0-24", "Hiring", "25-50", "Scene 2", "51-198 (open)"):
        assert expected in out

    code, out, _ = run(capsys, "scenes", str(sample), "rename", "24", "Departure")
    assert code == 0
    assert "rename: message 24" in out
    chat = read_chat(sample)
    assert get_data(chat.messages[24], "scene_break_name") == "Departure"

    code, out, _ = run(capsys, "scenes", str(sample), "unmark", "24")
    assert code == 0
    chat = read_chat(sample)
    assert get_data(chat.messages[24], "scene_break") is False
    assert break_indexes(chat.messages) == [50]
    code, out, _ = run(capsys, "scenes", str(sample))
    assert "0-50" in out
    assert "51-198 (open)" in out


def test_scenes_errors(capsys: pytest.CaptureFixture[str], sample: Path) -> None:
    original = sample.read_bytes()
    code, _, err = run(capsys, "scenes", str(sample), "mark", "199")
    assert code == 1
    assert words(err) == "error: no message 199: the chat has 199 (0 to 198)"
    code, _, err = run(capsys, "scenes", str(sample), "unmark", "3")
    assert code == 1
    assert words(err) == "error: that message is not a scene break"
    code, _, err = run(capsys, "scenes", str(sample), "rename", "3", "Name")
    assert code == 1
    assert "not a scene break: mark it first" in err
    code, _, err = run(capsys, "scenes", str(sample), "mark")
    assert code == 1
    assert "`scenes mark` needs a message index" in err
    assert sample.read_bytes() == original  # failed commands write nothing
    run(capsys, "scenes", str(sample), "mark", "10")
    code, _, err = run(capsys, "scenes", str(sample), "rename", "10")
    assert code == 1
    assert "needs the new name" in err
    assert "Traceback" not in err
    run(capsys, "scenes", str(sample), "unmark", "10")
    chat = read_chat(sample)
    assert break_indexes(chat.messages) == []
    assert sample.read_bytes() != original  # the break left its data behind (as ST does)


# --- eval and demo --------------------------------------------------------------------------


def test_eval_prints_one_row_per_style_and_set(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # One line per row. Rich's own `_width`: undoing a patch of `width` would fix the console
    # at the width it had (tables in later tests then wrapped, depending on the test order).
    monkeypatch.setattr(cli_app.out, "_width", 200)
    code, out, err = run(capsys, "eval", "--sets", "generated", "--budgets", "1000,2000")
    assert code == 0, err
    rows = {}
    for line in out.splitlines():
        cells = [cell.strip() for cell in re.split(r"[│|┃]", line) if cell.strip()]
        if len(cells) == 13 and cells[1] == "generated":
            rows[cells[0]] = cells
    assert set(rows) == {"narrated", "group", "proxy", "group proxy"}
    for cells in rows.values():
        assert re.fullmatch(r"\d+/\d+ \(\d+%\)", cells[4])  # breaks found
        assert cells[5].isdigit()  # extra
        for cell, with_recall in zip(cells[6:8], cells[9:11], strict=True):
            memory, latest = (int(x.strip(" %")) for x in cell.split("/"))
            assert memory > latest  # the memory beats the latest messages at each budget
            # and the questions asked as the newest message recall as much in the same budget
            # (recall takes a quarter of it from the running recap: on a generated chat of 600
            # messages, whose running recap at 1,000 tokens holds nine answer words in ten
            # already, that may cost a point)
            assert int(with_recall.strip(" %")) >= memory - 1
        assert re.fullmatch(r"\d+/\d+", cells[11])  # planted facts with recall
        # of which those whose message left the prompt: fewer, and none found that is not there
        found, planted = (int(x) for x in cells[11].split("/"))
        hidden_found, hidden = (int(x) for x in cells[12].split("/"))
        assert 0 < hidden < planted
        assert hidden_found <= found
        assert planted - hidden >= found - hidden_found
    assert "generated/generated-narrated-0 (600 messages)" in err


def test_eval_measures_a_folder_of_chats_with_truth(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_app.out, "_width", 200)
    script = tmp_path / "tiny.chat.txt"
    lines = ["# title: tiny", "# style: sessions", "# user: Ann", "# char: Bo", "# dates: iso"]
    for day in range(1, 4):
        lines.append(f"=== 2024-03-0{day} 10:00")
        lines += [f"{'Ann' if i % 2 else 'Bo'}: day {day} talk number {i}" for i in range(12)]
    lines += ["--- questions", "Q: What did they talk about?", "A: talk"]
    script.write_text("\n".join(lines), encoding="utf-8")
    code, out, err = run(
        capsys, "eval", "--sets", "", "--corpus", str(tmp_path), "--budgets", "500", "--no-proxy"
    )
    assert code == 0, err
    row = next(line for line in out.splitlines() if "sessions" in line)
    assert "2/2 (100%)" in row


def _eval_three_days(
    capsys: pytest.CaptureFixture[str], folder: Path, *options: str
) -> tuple[int, str, str]:
    """`eval` with `options` on a tiny sessions chat written in `folder` (three days, one
    question) whose lines are too long to be their own recaps: an LLM is asked for each."""
    lines = ["# title: tiny", "# style: sessions", "# user: Ann", "# char: Bo", "# dates: iso"]
    for day in range(1, 4):
        lines.append(f"=== 2024-03-0{day} 10:00")
        lines += [
            f"{'Ann' if i % 2 else 'Bo'}: on day {day} we talked about the harbour, the boats "
            f"that came in with the tide and the nets we mended, and this is line {i} of it"
            for i in range(12)
        ]
    lines += ["--- questions", "Q: What did they mend?", "A: the nets"]
    (folder / "tiny.chat.txt").write_text("\n".join(lines), encoding="utf-8")
    return run(
        capsys,
        "eval",
        *("--sets", "", "--corpus", str(folder), "--budgets", "500", "--no-proxy"),
        *options,
    )


def _recapped_by(server: AnsweringServer, code: int, out: str, err: str) -> None:
    """`eval` ran through this server: it says so, and the messages were recapped by it (the
    scene recaps and the running recap of a chat this small are the message recaps
    themselves: no call needed)."""
    assert code == 0, err
    assert f"recaps by the LLM at {server.url}" in out
    assert Counter(kind_of(r) for r in server.requests)["messages"] > 0


def test_eval_through_an_llm(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: AnsweringServer,
) -> None:
    monkeypatch.setattr(cli_app.out, "_width", 250)
    code, out, err = _eval_three_days(
        capsys, tmp_path, "--backend", "openai", "--base-url", server.url
    )
    _recapped_by(server, code, out, err)
    spent = re.search(r"LLM: (\d+) call\(s\), ([\d,]+) prompt token", words(out))
    assert spent is not None
    # every request but the first, the check that the server answers, which costs nothing
    assert int(spent.group(1)) == len(server.requests) - 1
    assert kind_of(server.requests[0]) not in ("messages", "scene", "combine", "break")
    assert int(spent.group(2).replace(",", "")) > 0
    row = next(line for line in out.splitlines() if "sessions" in line)
    assert "2/2 (100%)" in row


def test_eval_through_the_llm_the_settings_name(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: AnsweringServer,
) -> None:
    """Without --base-url, the LLM is the one `autorecap settings` set up, as for `recap`."""
    monkeypatch.setattr(cli_app.out, "_width", 250)
    assert run(capsys, "settings", "set", "llm_base_url", server.url)[0] == 0
    code, out, err = _eval_three_days(capsys, tmp_path, "--backend", "openai")
    _recapped_by(server, code, out, err)


def test_eval_through_an_llm_whose_answers_are_no_recaps_says_how_many_failed(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: AnsweringServer,
) -> None:
    """A server that answers, but with the prompt's own scaffolding: every message recap is
    refused and kept as an error, and the figures say they are made without them."""
    monkeypatch.setattr(cli_app.out, "_width", 250)
    server.fallback = lambda request: completion("Later messages:\n(none)")
    code, out, err = _eval_three_days(
        capsys, tmp_path, "--backend", "openai", "--base-url", server.url
    )
    assert code == 1  # as `recap` does: the figures miss what failed
    failed = re.search(r"error: (\d+) recap\(s\) failed and were kept as errors", words(err))
    assert failed is not None
    assert int(failed.group(1)) == 36 + 2  # the 36 messages, and the two closed scenes
    assert "memory against" in out  # the figures are still printed


def test_eval_through_an_llm_that_is_down_says_so_at_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, dead_url: str
) -> None:
    code, out, err = _eval_three_days(
        capsys, tmp_path, "--backend", "openai", "--base-url", dead_url
    )
    assert code == 1
    assert "Traceback" not in err
    assert f"error: cannot reach the LLM server at {dead_url}" in words(err)
    assert "retrying" not in err  # the check is not retried: it fails at once
    assert "memory against" not in out  # no table of figures made without recaps


def test_eval_llm_options_need_the_openai_backend(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = _eval_three_days(capsys, tmp_path, "--base-url", "http://127.0.0.1:8080/v1")
    assert code == 1
    expected = "--base-url, --model and --api-key-env are for the LLM's recaps: add --backend"
    assert expected in words(err)
    assert "memory against" not in out


def _chat_with_truth(folder: Path, truth: str, messages: int = 30) -> None:
    rows = [
        {"name": "Ann" if i % 2 else "Bo", "is_user": bool(i % 2), "mes": f"line {i}"}
        for i in range(messages)
    ]
    header = {"user_name": "Ann", "character_name": "Bo", "chat_metadata": {}}
    lines = [json.dumps(header), *(json.dumps(row) for row in rows)]
    (folder / "mine.jsonl").write_text("\n".join(lines), encoding="utf-8")
    (folder / "mine.truth.json").write_text(truth, encoding="utf-8")


@pytest.mark.parametrize(
    ("truth", "message"),
    [
        ("[1, 2]", "mine.truth.json: the file: Input should be an object"),
        ('{"questions": [{"q": "x"}]}', "mine.truth.json: questions.0.question: Field required"),
        ('{"questions": ["what?"]}', "mine.truth.json: questions.0: Input should be"),
        ('{"scene_starts": ["ten"]}', "mine.truth.json: scene_starts.0: Input should be"),
        ('{"scene_starts": [5000]}', "holds 5000, but a scene start is the index"),
        ('{"scene_starts": [0]}', "from 1 to 29 in this chat"),
        ('{"scene_starts": [10, 10]}', "scene_starts holds an index twice"),
        ("{", "mine.truth.json: the file: Invalid JSON"),
    ],
)
def test_eval_says_what_is_wrong_with_a_truth_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, truth: str, message: str
) -> None:
    _chat_with_truth(tmp_path, truth)
    code, _, err = run(capsys, "eval", "--sets", "", "--corpus", str(tmp_path), "--no-proxy")
    assert code == 1
    assert message in " ".join(err.split()), err
    assert "Traceback" not in err


def test_eval_shows_no_figure_it_cannot_measure(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chat given with neither scene starts nor questions: its breaks and answer recall
    are "-", not 0%."""
    monkeypatch.setattr(cli_app.out, "_width", 200)
    _chat_with_truth(tmp_path, "{}")
    code, out, err = run(
        capsys, "eval", "--sets", "", "--corpus", str(tmp_path), "--budgets", "500", "--no-proxy"
    )
    assert code == 0, err
    row = next(line for line in out.splitlines() if "file" in line)
    assert "%" not in row, row


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("# step: abc\n", "'# step:' takes whole seconds"),
        (b"# title: x\n\xff\xfe bad", "is not UTF-8 text"),
    ],
)
def test_eval_says_what_is_wrong_with_a_script(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str | bytes, message: str
) -> None:
    path = tmp_path / "bad.chat.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    code, _, err = run(capsys, "eval", "--sets", "", "--corpus", str(tmp_path), "--no-proxy")
    assert code == 1
    assert message in err, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budgets", "many"], "--budgets takes whole numbers"),
        (["--sets", "mine"], "unknown set 'mine'"),
        (["--sets", "", "--corpus", "/nonexistent"], "no folder /nonexistent"),
    ],
)
def test_eval_rejects_bad_arguments(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = run(capsys, "eval", *args)
    assert code == 1
    assert message in err


def test_demo(capsys: pytest.CaptureFixture[str], home: Path) -> None:
    code, out, err = run(capsys, "demo")
    assert code == 0, err
    text = words(out)
    assert f"{N_SAMPLE} messages" in text
    assert "The running recap (injected)" in text
    assert "Aster Hollow" in text
    assert "# Story Memory" in text
    tokens = re.search(
        r"history before memory: (\d+) tokens; after auto-hide: (\d+) tokens of history "
        r"\((\d+) messages hidden\) \+ (\d+) tokens of memory = (\d+) tokens in the prompt",
        text,
    )
    assert tokens is not None
    before, after, hidden, memory, total = map(int, tokens.groups())
    assert after < before
    assert hidden > 0
    assert memory > 0
    assert total >= after + memory  # plus the system prompt
    written = [p for p in home.rglob("*") if p.is_file() and p.name != SETTINGS_FILE]
    assert written == []
