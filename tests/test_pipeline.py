"""The recap pipeline: scene detection, scene recaps, the running recap and its cap, end to end
(offline, and against a real OpenAI-compatible server on loopback)."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from autorecap.core import running
from autorecap.core.data import get_data, get_memory
from autorecap.core.dates import as_utc
from autorecap.core.model import Chat
from autorecap.core.scenes import (
    add_recap_version,
    break_indexes,
    content_hash,
    edit_recap,
    mark_break,
    recap_versions,
    scenes,
)
from autorecap.core.tokens import TokenCounter, get_counter
from autorecap.evaluation import Question, copy_chat, evaluate_chat, from_generated
from autorecap.recap import (
    detect_scene_breaks,
    enforce_cap,
    recap_scenes,
    run_pipeline,
    update_running_recap,
)
from autorecap.recap.backend import LLMError, RecapResult, SceneRecapRequest
from autorecap.recap.offline.cues import SESSION_LENGTH, SESSION_PAUSE
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recap.openai_compat import OpenAICompatBackend
from autorecap.sample import sample_chat_path, sample_scenes
from autorecap.settings import Settings
from autorecap.stfiles.jsonl import read_chat
from autorecap.testing import generate
from tests.recap.conftest import LLMServer, Recorded, Scripted

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")


# --- a loopback server that can answer any pipeline request --------------------------------------


def completion(content: str) -> Scripted:
    """A chat-completions answer with `content`."""
    return Scripted(
        "completion",
        body={
            "id": "chatcmpl-auto",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "loopback",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
        },
    )


def prompt_of(request: Recorded) -> str:
    return str(request.json["messages"][0]["content"])


def kind_of(request: Recorded) -> str:
    """Which pipeline stage sent the request, told by the default prompts."""
    prompt = prompt_of(request)
    if "scene_breaks_at" in prompt:
        return "break"
    if "Recap the scene" in prompt:
        return "scene"
    if "running memory" in prompt:
        return "combine"
    if "For each of the" in prompt:
        return "messages"
    if "Write the note for" in prompt:
        return "message"
    return "unknown"


def message_recap_answer(prompt: str) -> str:
    name = re.search(r"Message from (.*):\n", prompt)
    return f"LLM message recap ({name.group(1) if name else '?'})."


def batch_answer(prompt: str) -> str:
    lines = re.findall(r"^\[(\d+)\] ([^:\n]+): ", prompt, re.M)
    # Each line its own (the same line for two messages is refused as a model repeating).
    return "\n".join(f"[{n}] LLM message recap ({name}), line {n}." for n, name in lines)


def break_answer(prompt: str) -> str:
    match = re.search(r"from (\d+) to (\d+), that is", prompt)
    assert match is not None
    earliest, latest = int(match.group(1)), int(match.group(2))
    return json.dumps({"scene_breaks_at": [min(earliest + 2, latest)], "reason": "a new place"})


def scene_recap_answer(prompt: str) -> str:
    match = re.search(r"One scene \((.*); when and where:", prompt)
    return f"LLM scene recap of {match.group(1) if match else '?'}."


def combine_answer(prompt: str) -> str:
    """The lines asked to be condensed, each older one cut to its first sentence."""
    lines = [line for line in prompt.splitlines() if line.startswith("- ")]
    return "\n".join([*(line.split(". ")[0] for line in lines[:-1]), lines[-1]])


def answer_everything(request: Recorded) -> Scripted:
    """A valid answer to every kind of pipeline request."""
    prompt = prompt_of(request)
    kind = kind_of(request)
    if kind == "break":
        return completion(break_answer(prompt))
    if kind == "scene":
        return completion(scene_recap_answer(prompt))
    if kind == "combine":
        return completion(combine_answer(prompt))
    if kind == "messages":
        return completion(batch_answer(prompt))
    return completion(message_recap_answer(prompt))


class AnsweringServer(LLMServer):
    """`LLMServer`: scripted answers first; when the script is empty, `fallback(request)`."""

    def __init__(self) -> None:
        super().__init__()
        self.fallback: Callable[[Recorded], Scripted] | None = None

    def _next(self, recorded: Recorded) -> Scripted:
        with self._lock:
            self.requests.append(recorded)
            if self._script:
                return self._script.popleft()
        if self.fallback is not None:
            return self.fallback(recorded)
        return Scripted("status", status=418, body={"error": {"message": "nothing scripted"}})

    def kinds(self) -> list[str]:
        return [kind_of(r) for r in self.requests]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[AnsweringServer]:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    answering = AnsweringServer()
    answering.start()
    try:
        yield answering
    finally:
        answering.stop()


@pytest.fixture
def llm(server: AnsweringServer) -> Iterator[Callable[..., OpenAICompatBackend]]:
    """Backends aimed at `server`, with no real backoff waits; closed after the test."""
    made: list[OpenAICompatBackend] = []

    def factory(**options: Any) -> OpenAICompatBackend:
        options.setdefault("base_url", server.url)
        options.setdefault("sleep", lambda _seconds: None)
        options.setdefault("backoff_s", 0.0)
        options.setdefault("timeout_s", 5.0)
        options.setdefault("retries", 0)
        options.setdefault("api_key_env", "AUTORECAP_TEST_NO_KEY")
        options.setdefault("own_recap_tokens", 0)  # every message asked, short or not
        backend = OpenAICompatBackend(**options)
        made.append(backend)
        return backend

    yield factory
    for backend in made:
        backend.close()


# --- helpers ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return get_counter()


def plain_chat(n: int, chat_id: str = "plain") -> Chat:
    """`n` alternating messages with nothing that looks like a scene change."""
    return Chat(
        [
            {
                "name": "Tomas" if i % 2 == 0 else "Captain Mira",
                "is_user": i % 2 == 0,
                "is_system": False,
                "mes": f"Message {i}: we talk on the deck of the Kestrel about the weather.",
                "extra": {},
            }
            for i in range(n)
        ],
        chat_id=chat_id,
    )


def recap_text(k: int) -> str:
    """A three-sentence scene recap (about 55 tokens) with facts unique to scene `k` (a
    sentence an earlier line says word for word is left out of a new line)."""
    return (
        f"Mira paid Osric Hesk {100 + k} crowns at Berth {k}. "
        f"The Kestrel lifted for Aster Hollow with Tomas aboard and chart {k} hidden in the "
        "flour barrel. "
        f"Rook Danner's Grey Widow followed them past the Cinder Line at dusk on day {k}."
    )


def scene_chat(closed: int, length: int = 10, open_tail: int = 3) -> Chat:
    """`closed` scenes of `length` messages, each with a recap on its break, then an open
    scene of `open_tail` messages."""
    chat = plain_chat(closed * length + open_tail, chat_id="scenes")
    for k in range(closed):
        end = (k + 1) * length - 1
        mark_break(chat.messages[end])
        members = chat.messages[k * length : end + 1]
        add_recap_version(chat.messages[end], recap_text(k + 1), scene_hash=content_hash(members))
    return chat


def closed_scenes(chat: Chat) -> list[Any]:
    return [s for s in scenes(chat.messages) if s.closed]


# --- the offline detector on chats with known scenes ---------------------------------------------

GENERATED = [
    (200, 1, False),
    (300, 2, False),
    (400, 3, False),
    (500, 4, False),
    (250, 5, True),
    (350, 6, True),
    (600, 7, False),
    (150, 8, False),
    (450, 9, True),
    (300, 10, False),
    (800, 11, False),
    (300, 12, True),
]


def test_offline_detector_finds_generated_scene_ends() -> None:
    backend = OfflineBackend()
    ends_total = found_total = hits = extras = 0
    per_chat: list[str] = []
    for size, seed, group in GENERATED:
        generated = generate(size, seed=seed, group=group)
        found = detect_scene_breaks(generated.chat, backend, Settings())
        ends = generated.scene_ends
        hit = sum(1 for end in ends if any(abs(end - f) <= 2 for f in found))
        extra = sum(1 for f in found if not any(abs(end - f) <= 2 for end in ends))
        per_chat.append(f"{size}/{seed}{'g' if group else ''}: {hit}/{len(ends)} +{extra}")
        ends_total += len(ends)
        found_total += len(found)
        hits += hit
        extras += extra
    recall = hits / ends_total
    extra_rate = extras / found_total
    print(
        f"detector: {len(GENERATED)} chats, {ends_total} scene ends, {found_total} breaks found, "
        f"recall {recall:.1%} (within 2 messages), extra breaks {extra_rate:.1%}; "
        + "; ".join(per_chat)
    )
    assert recall >= 0.8
    assert extra_rate <= 0.2


def test_offline_detector_on_the_sample_chat() -> None:
    chat = read_chat(sample_chat_path())
    expected = sample_scenes()
    found = detect_scene_breaks(chat, OfflineBackend(), Settings())
    ends = [scene["end"] for scene in expected]
    assert ends[-1] == len(chat.messages) - 1  # the last scene ends with the chat
    for end in ends[:-1]:
        assert any(abs(end - f) <= 2 for f in found), (end, found)
    extra = [f for f in found if not any(abs(end - f) <= 2 for end in ends)]
    # The epilogue (a narrator's message, then "That night, in the aft cabin...") reads as a
    # scene of its own; the sample's scene list keeps it in the last scene.
    assert extra in ([], [195]), (extra, ends)
    assert found == break_indexes(chat.messages)


# --- detect_scene_breaks: its settings ----------------------------------------------------------


@pytest.mark.parametrize(("minimum", "offset"), [(10, 2), (25, 0), (15, 30), (40, 5)])
def test_detection_respects_minimum_length_and_offset(minimum: int, offset: int) -> None:
    chat = generate(300, seed=21).chat
    n = len(chat.messages)
    settings = Settings(
        auto_scene_break_minimum_scene_length=minimum, auto_scene_break_message_offset=offset
    )
    found = detect_scene_breaks(chat, OfflineBackend(), settings)
    assert found
    assert found == break_indexes(chat.messages)

    def session(index: int) -> bool:  # the scene after `index` starts after hours of silence
        before, after = chat.messages[index].send_time, chat.messages[index + 1].send_time
        assert before is not None
        assert after is not None
        return (as_utc(after) - as_utc(before)).total_seconds() >= SESSION_PAUSE

    # Every scene has `minimum` messages, the first included, unless a session starts it
    # (then at least SESSION_LENGTH).
    assert found[0] >= minimum - 1 or (found[0] >= SESSION_LENGTH - 1 and session(found[0]))
    for earlier, later in itertools.pairwise(found):
        short = later - earlier < minimum  # the scene from `earlier + 1` to `later`
        assert not short or (
            later - earlier >= SESSION_LENGTH and (session(earlier) or session(later))
        ), (earlier, later)
    assert max(found) <= n - 1 - offset  # the newest `offset` messages are left alone
    checked = [i for i, m in enumerate(chat.messages) if get_data(m, "auto_scene_break_checked")]
    assert checked == list(range(n - offset))
    for number, index in enumerate(found, start=1):
        name = get_data(chat.messages[index], "scene_break_name")
        assert re.fullmatch(rf"Scene {number}(: \S.*)?", name), name
        assert get_data(chat.messages[index], "scene_break_visible") is True


def _texting(sessions: list[int], *, pace: timedelta, pause: timedelta) -> Chat:
    """A chat of two whose sessions have these numbers of messages, `pace` apart within a
    session and `pause` between sessions; every message on the same subject, so that only
    the clock tells the sessions apart."""
    chat = Chat(chat_id="texting", header={"chat_metadata": {}})
    when = datetime(2024, 1, 8, 19, 0, tzinfo=UTC)
    for number, size in enumerate(sessions):
        if number:
            when += pause
        for i in range(size):
            chat.append(
                {
                    "name": "Owen" if i % 2 else "Callum",
                    "is_user": i % 2 == 0,
                    "mes": f"the shop is fine, dad is fine, the shop again {number} {i}",
                    "send_date": when.strftime("%B %-d, %Y %-I:%M%p").lower().capitalize(),
                }
            )
            when += pace
    return chat


def test_a_session_after_hours_of_silence_may_be_shorter_than_the_minimum() -> None:
    """Texting sessions are often a handful of messages: one that starts after hours of
    silence opens a scene although the last scene has fewer than the minimum length."""
    sizes = [12, 4, 3, 14, 5, 12]
    chat = _texting(sizes, pace=timedelta(minutes=1), pause=timedelta(days=2))
    found = detect_scene_breaks(chat, OfflineBackend(), Settings())
    ends = list(itertools.accumulate(sizes))[:-1]
    assert found == [end - 1 for end in ends]
    # The other cues keep the minimum: the same chat, one session, finds nothing.
    calm = _texting([sum(sizes)], pace=timedelta(minutes=1), pause=timedelta(0))
    assert detect_scene_breaks(calm, OfflineBackend(), Settings()) == []


def test_a_slow_chat_s_usual_pause_starts_no_short_scenes() -> None:
    """In a chat whose messages come hours apart (play by post), such a pause is its pace: it
    needs ten times the usual pause to start a session shorter than the minimum."""
    chat = _texting([40], pace=timedelta(hours=5), pause=timedelta(0))
    found = detect_scene_breaks(chat, OfflineBackend(), Settings())
    assert all(later - earlier >= 10 for earlier, later in itertools.pairwise([-1, *found]))


def test_detection_starts_after_the_last_break() -> None:
    chat = generate(300, seed=22).chat
    mark_break(chat.messages[150], "Manual")
    found = detect_scene_breaks(chat, OfflineBackend(), Settings())
    assert found
    assert found[0] >= 150 + 10
    assert break_indexes(chat.messages) == [150, *found]
    assert get_data(chat.messages[150], "scene_break_name") == "Manual"
    checked = [i for i, m in enumerate(chat.messages) if get_data(m, "auto_scene_break_checked")]
    assert checked == list(range(151, 298))
    first_name = get_data(chat.messages[found[0]], "scene_break_name")
    assert first_name.startswith("Scene 2")  # numbering goes on after the existing break
    # Nothing is left to examine: a second run finds nothing and changes nothing.
    assert detect_scene_breaks(chat, OfflineBackend(), Settings()) == []
    assert break_indexes(chat.messages) == [150, *found]


def test_detection_needs_room_for_a_whole_scene() -> None:
    chat = generate(11, seed=3).chat  # 11 - 2 (offset) < 10 (minimum)
    assert detect_scene_breaks(chat, OfflineBackend(), Settings()) == []
    assert break_indexes(chat.messages) == []
    assert not any(get_data(m, "auto_scene_break_checked") for m in chat.messages)


# --- detect_scene_breaks with an LLM --------------------------------------------------------------


LLM_BREAKS = Settings(scene_break_detection="llm")


def test_llm_break_answers_out_of_range_or_not_json_are_retried_then_ignored(
    server: AnsweringServer, llm: Callable[..., OpenAICompatBackend]
) -> None:
    chat = plain_chat(30)  # minimum 10, offset 2: one request, for breaks in 9..27
    server.reply('{"scene_breaks_at": [3], "reason": "too early"}')
    server.reply("The scene ends at message twelve, I think.")
    server.reply('{"scene_breaks_at": [28]}')
    found = detect_scene_breaks(chat, llm(break_retries=2), LLM_BREAKS)
    assert found == []
    assert break_indexes(chat.messages) == []
    assert len(server.requests) == 3
    assert server.remaining == 0
    assert "from 9 to 27, that is" in prompt_of(server.requests[0])
    assert all(get_data(m, "auto_scene_break_checked") for m in chat.messages[:28])
    assert not any(get_data(m, "auto_scene_break_checked") for m in chat.messages[28:])


def test_llm_break_retry_then_valid_answer_is_marked(
    server: AnsweringServer, llm: Callable[..., OpenAICompatBackend]
) -> None:
    chat = plain_chat(30)
    server.reply("no idea")
    server.reply('{"scene_breaks_at": [12], "reason": "dawn"}')
    found = detect_scene_breaks(chat, llm(break_retries=2), LLM_BREAKS)
    assert found == [12]
    assert break_indexes(chat.messages) == [12]
    assert get_data(chat.messages[12], "scene_break_name").startswith("Scene 1")
    assert get_data(chat.messages[12], "scene_break_cause") == "llm"
    assert len(server.requests) == 2  # every break of the window asked at once


def test_llm_break_answer_in_a_code_fence_is_accepted(
    server: AnsweringServer, llm: Callable[..., OpenAICompatBackend]
) -> None:
    chat = plain_chat(30)
    server.reply('Here you go:\n```json\n{"scene_breaks_at": [14], "reason": "new place"}\n```')
    found = detect_scene_breaks(chat, llm(), LLM_BREAKS)
    assert found == [14]
    assert get_data(chat.messages[14], "scene_break") is True
    assert len(server.requests) == 1


def test_llm_breaks_are_read_from_the_batched_recaps_without_a_call_of_their_own(
    server: AnsweringServer, llm: Callable[..., OpenAICompatBackend], counter: TokenCounter
) -> None:
    chat = plain_chat(30)
    lines = [f"[{n}] {'NEW SCENE: ' if n == 16 else ''}Talk number {n}." for n in range(1, 31)]
    server.reply("\n".join(lines))
    stats = run_pipeline(chat, llm(), LLM_BREAKS, counter, now_ms=0)
    assert stats.messages.made == 30
    assert server.kinds()[0] == "messages"  # one call for 30 messages...
    assert "break" not in server.kinds()  # ...and none for the breaks
    assert stats.breaks_found == [14]  # message 15 opens the new scene
    assert get_data(chat.messages[15], "scene_start") is True
    assert get_data(chat.messages[14], "scene_break_cause") == "llm"


def test_a_failing_scene_break_request_is_reported_not_raised(
    server: AnsweringServer, llm: Callable[..., OpenAICompatBackend], counter: TokenCounter
) -> None:
    """Was a bug:
    `detect_scene_breaks` lets an LLMError out of `run_pipeline`, which throws away every
    message recap made before it (the CLI then writes nothing)."""

    def fail_breaks(request: Recorded) -> Scripted:
        if kind_of(request) == "break":
            return Scripted("status", status=500, body={"error": {"message": "overloaded"}})
        return answer_everything(request)

    server.fallback = fail_breaks
    chat = plain_chat(30)
    raised: LLMError | None = None
    settings = LLM_BREAKS.model_copy(update={"skip_unused_message_recaps": True})
    try:  # no message recaps: the breaks are asked for by windows
        stats = run_pipeline(chat, llm(), settings, counter, now_ms=0)
    except LLMError as error:
        raised = error
    assert raised is None, f"run_pipeline raised instead of reporting the failure: {raised}"
    assert "break" in server.kinds()
    assert any("scene" in failure and "500" in failure for failure in stats.failures)


# --- recap_scenes ---------------------------------------------------------------------------------


@pytest.fixture
def marked_chat() -> Chat:
    """A generated chat with its true scene breaks marked."""
    generated = generate(150, seed=3)
    for end in generated.scene_ends:
        mark_break(generated.chat.messages[end])
    assert len(generated.scene_ends) >= 4
    return generated.chat


def test_every_closed_scene_gets_one_recap_version_and_reruns_add_nothing(
    marked_chat: Chat, counter: TokenCounter
) -> None:
    closed = closed_scenes(marked_chat)
    made = recap_scenes(marked_chat, OfflineBackend(), Settings(), counter)
    assert made == len(closed)
    for scene in closed:
        message = marked_chat.messages[scene.end]
        assert len(recap_versions(message)) == 1
        assert get_data(message, "scene_recap_current_index") == 0
        assert get_data(message, "scene_recap_memory")
        assert counter.count(get_data(message, "scene_recap_memory")) <= 250
        members = marked_chat.messages[scene.start : scene.end + 1]
        assert get_data(message, "scene_recap_hash") == content_hash(members)
        assert get_data(message, "scene_recap_metadata") == {
            "backend": "offline",
            "start": scene.start,
            "end": scene.end,
        }
    open_scene = scenes(marked_chat.messages)[-1]
    assert not open_scene.closed
    assert get_data(marked_chat.messages[open_scene.end], "scene_recap_memory") is None

    assert recap_scenes(marked_chat, OfflineBackend(), Settings(), counter) == 0
    assert all(len(recap_versions(marked_chat.messages[s.end])) == 1 for s in closed)


def test_an_edited_message_makes_its_scene_recap_stale(
    marked_chat: Chat, counter: TokenCounter
) -> None:
    recap_scenes(marked_chat, OfflineBackend(), Settings(), counter)
    closed = closed_scenes(marked_chat)
    target = closed[1]
    message = marked_chat.messages[target.start + 2]
    message["mes"] = "Mira reveals the vault code 9921 and swears Tomas to secrecy."
    assert recap_scenes(marked_chat, OfflineBackend(), Settings(), counter) == 1
    end = marked_chat.messages[target.end]
    assert len(recap_versions(end)) == 2
    assert get_data(end, "scene_recap_current_index") == 1
    members = marked_chat.messages[target.start : target.end + 1]
    assert get_data(end, "scene_recap_hash") == content_hash(members)
    assert "9921" in get_data(end, "scene_recap_memory")
    others = [s for s in closed if s != target]
    assert all(len(recap_versions(marked_chat.messages[s.end])) == 1 for s in others)


def test_a_user_written_scene_recap_is_kept_unless_forced(
    marked_chat: Chat, counter: TokenCounter
) -> None:
    recap_scenes(marked_chat, OfflineBackend(), Settings(), counter)
    first = closed_scenes(marked_chat)[0]
    end = marked_chat.messages[first.end]
    edit_recap(end, "My own recap of the first scene.")
    marked_chat.messages[first.start + 1]["mes"] = "Something else entirely happened here."
    assert recap_scenes(marked_chat, OfflineBackend(), Settings(), counter) == 0
    assert get_data(end, "scene_recap_memory") == "My own recap of the first scene."
    assert len(recap_versions(end)) == 2

    made = recap_scenes(marked_chat, OfflineBackend(), Settings(), counter, force=True)
    assert made == len(closed_scenes(marked_chat))
    assert len(recap_versions(end)) == 3
    assert get_data(end, "scene_recap_memory") != "My own recap of the first scene."
    assert recap_versions(end)[1] == "My own recap of the first scene."  # kept as a version
    assert get_data(end, "scene_recap_metadata")["backend"] == "offline"


def test_a_failing_scene_recap_is_reported(marked_chat: Chat, counter: TokenCounter) -> None:
    class Failing(OfflineBackend):
        def scene_recap(self, request: SceneRecapRequest) -> RecapResult:
            raise LLMError("the LLM answered with an empty scene recap")

    failures: list[str] = []
    assert recap_scenes(marked_chat, Failing(), Settings(), counter, failures=failures) == 0
    assert len(failures) == len(closed_scenes(marked_chat))
    assert failures[0] == "scene 1: the LLM answered with an empty scene recap"


# --- update_running_recap -------------------------------------------------------------------------


def test_one_running_version_per_closed_scene_but_the_latest(counter: TokenCounter) -> None:
    chat = scene_chat(5)
    ends = [s.end for s in closed_scenes(chat)]
    assert update_running_recap(chat, OfflineBackend(), Settings(), counter, now_ms=1234) == 4
    versions = running.versions(chat)
    assert [v["version"] for v in versions] == [0, 1, 2, 3]
    assert [v["scene_count"] for v in versions] == [1, 2, 3, 4]
    assert [v["new_scene_index"] for v in versions] == ends[:4]
    assert [v["prev_scene_index"] for v in versions] == [0, *ends[:3]]
    assert {v["excluded_count"] for v in versions} == {1}
    assert {v["timestamp"] for v in versions} == {1234}
    storage = chat.metadata[running.STORAGE_KEY]
    assert storage["current_version"] == 3
    assert storage["chat_id"] == "scenes"
    content = running.current(chat)["content"]  # type: ignore[index]
    for k in (1, 2, 3, 4):
        assert f"Osric Hesk {100 + k} crowns" in content
    assert "Osric Hesk 105 crowns" not in content  # the latest scene waits

    assert update_running_recap(chat, OfflineBackend(), Settings(), counter, now_ms=1235) == 0

    # A sixth scene closes: the fifth may go in now.
    mark_break(chat.messages[-1])
    add_recap_version(chat.messages[-1], recap_text(6), scene_hash="h6")
    assert update_running_recap(chat, OfflineBackend(), Settings(), counter, now_ms=1236) == 1
    newest = running.versions(chat)[-1]
    assert newest["scene_count"] == 5
    assert newest["prev_scene_index"] == ends[3]
    assert newest["new_scene_index"] == ends[4]
    assert "Osric Hesk 105 crowns" in newest["content"]


@pytest.mark.parametrize(("waiting", "expected"), [(0, 5), (2, 3), (4, 1), (5, 0)])
def test_exclude_latest_setting(counter: TokenCounter, waiting: int, expected: int) -> None:
    chat = scene_chat(5)
    settings = Settings(running_scene_recap_exclude_latest=waiting)
    assert update_running_recap(chat, OfflineBackend(), settings, counter, now_ms=0) == expected
    versions = running.versions(chat)
    assert len(versions) == expected
    assert all(v["excluded_count"] == waiting for v in versions)
    assert [v["scene_count"] for v in versions] == list(range(1, expected + 1))


@pytest.mark.parametrize(("closed", "waiting"), [(5, 6), (5, 9), (2, 3)])
def test_exclude_latest_larger_than_the_scene_count_folds_nothing(
    counter: TokenCounter, closed: int, waiting: int
) -> None:
    """Was a bug:
    `closed[: len(closed) - waiting]` with more scenes waiting than closed is a negative
    slice: with 5 closed scenes and 6 waiting, the oldest 4 are folded in (with 9, the oldest
    1; with 2 closed and 3 waiting, 1)."""
    chat = scene_chat(closed)
    settings = Settings(running_scene_recap_exclude_latest=waiting)
    assert update_running_recap(chat, OfflineBackend(), settings, counter, now_ms=0) == 0
    assert running.versions(chat) == []


def _scene_number(line: str) -> int:
    """Which scene of `scene_chat` a running recap line is (by any of its unique facts)."""
    match = re.search(r"Osric Hesk 1(\d\d) crowns|Berth (\d+)|chart (\d+)|day (\d+)", line)
    assert match is not None, line
    return int(next(group for group in match.groups() if group))


@pytest.mark.parametrize(("closed", "drops"), [(8, False), (20, True)])
def test_running_recap_stays_under_a_small_cap(
    counter: TokenCounter, closed: int, drops: bool
) -> None:
    """Lines are shortened (never below their most telling sentence), the oldest first, before
    any is dropped: 8 scenes all stay in 200 tokens, of 20 the oldest go."""
    chat = scene_chat(closed)
    settings = Settings(running_scene_recap_max_tokens=200, running_scene_recap_exclude_latest=0)
    assert update_running_recap(chat, OfflineBackend(), settings, counter, now_ms=0) == closed
    full_lines = {s.number + 1: f"- {s.recap}" for s in closed_scenes(chat)}
    dropped_some = shortened_some = False
    for step, version in enumerate(running.versions(chat), start=1):
        content = version["content"]
        assert counter.count(content) <= 200
        lines = content.splitlines()
        assert _scene_number(lines[-1]) == step  # the newest scene, with its fact
        numbers = [_scene_number(line) for line in lines]  # each keeps its most telling fact
        assert numbers == list(range(numbers[0], step + 1))  # only the oldest are dropped
        dropped_some |= numbers[0] > 1
        shortened = [line != full_lines[n] for n, line in zip(numbers, lines, strict=True)]
        for line, n, short in zip(lines, numbers, shortened, strict=True):
            if short:
                assert len(line) < len(full_lines[n])
        # The oldest lines are shortened first: no whole line before a shortened one.
        assert shortened == sorted(shortened, reverse=True)
        shortened_some |= any(shortened)
    assert dropped_some == drops
    assert shortened_some


def test_a_scene_is_appended_without_a_call_while_the_recap_fits(
    server: AnsweringServer, llm: Callable[..., OpenAICompatBackend], counter: TokenCounter
) -> None:
    chat = scene_chat(4)
    settings = Settings(running_scene_recap_exclude_latest=0, running_scene_recap_max_tokens=150)
    server.fallback = answer_everything
    assert update_running_recap(chat, llm(), settings, counter, now_ms=0) == 4
    contents = [v["content"] for v in running.versions(chat)]
    assert contents[1] == f"{contents[0]}\n- {recap_text(2)}"  # appended: no call
    assert all(counter.count(c) <= 150 for c in contents)
    # Scene 3 did not fit as it was: the LLM condensed the older lines (only they were sent)
    # so that the recap is about half the cap (`condense_to`) with the new scene's line kept
    # word for word, and the next scenes fit again without a call.
    assert server.kinds()[0] == "combine"
    prompt = prompt_of(server.requests[0])
    assert prompt.endswith(f"- {recap_text(2)}")
    assert recap_text(1) in prompt
    assert recap_text(3) not in prompt
    assert "at most 50 tokens" in prompt  # 75, less the new line kept whole (floor 50)
    assert contents[2].endswith(f"\n- {recap_text(3)}")
    assert len(server.requests) < 3


def test_newest_scene_keeps_its_line_when_its_recap_alone_exceeds_the_cap(
    counter: TokenCounter,
) -> None:
    """Was a bug: with a 200-token cap and the default 250-token scene recaps, every running recap
    version is the tail of the newest scene recap: its label and its first sentences are cut
    away (enforce_cap dropped a single line's *first* sentences)."""
    chat = read_chat(sample_chat_path())
    settings = Settings(running_scene_recap_max_tokens=200)
    run_pipeline(chat, OfflineBackend(), settings, counter, now_ms=0)
    versions = running.versions(chat)
    closed = closed_scenes(chat)
    assert len(versions) >= 6
    for step, version in enumerate(versions, start=1):
        assert counter.count(version["content"]) <= 200
        last = version["content"].splitlines()[-1]
        header = re.match(r"- (\[[^\]]+\] )?", last)
        assert header is not None
        recap = closed[step - 1].recap
        # The newest line is its scene's recap, with the same day and place, shortened to its
        # most telling sentences when the recap alone passes the cap.
        assert recap.startswith(last[2 : header.end()]), (step, last)
        for sentence in re.split(r"(?<=[.!?])\s+", last[header.end() :]):
            # (a clause kept without the one before it opens with a capital letter)
            said = sentence.split(": ")[-1].rstrip(".!?…")
            assert said[:1].lower() + said[1:] in recap or said in recap, (step, sentence)


def test_a_failing_combine_stops_folding_and_is_reported(
    server: AnsweringServer, llm: Callable[..., OpenAICompatBackend], counter: TokenCounter
) -> None:
    chat = scene_chat(4)
    settings = Settings(running_scene_recap_exclude_latest=0, running_scene_recap_max_tokens=100)
    server.error(500)
    server.error(500)
    backend = llm(retries=1)
    failures: list[str] = []
    added = update_running_recap(chat, backend, settings, counter, now_ms=0, failures=failures)
    assert added == 1  # scene 1 fits as it is; scene 2 needs condensing, which fails
    assert len(server.requests) == 2  # scene 2 tried twice, scenes 3 and 4 not at all
    assert failures == [
        "running recap, scene 2: the LLM server answered 500 (scripted 500) "
        "(gave up after 2 attempts)"
    ]
    assert [v["new_scene_index"] for v in running.versions(chat)] == [9]

    # The server is back: the folding goes on from scene 2, on top of what was kept.
    server.fallback = answer_everything
    assert update_running_recap(chat, backend, settings, counter, now_ms=1) == 3
    assert f"- {recap_text(1)}" in prompt_of(server.requests[2])
    versions = running.versions(chat)
    assert [v["scene_count"] for v in versions] == [1, 2, 3, 4]
    assert [v["new_scene_index"] for v in versions] == [9, 19, 29, 39]
    assert all(counter.count(v["content"]) <= 100 for v in versions)


def test_a_scene_whose_recap_failed_is_not_skipped_by_the_running_recap(
    counter: TokenCounter,
) -> None:
    """Was a bug: a closed scene with no recap (its scene recap failed) is silently left out, later
    scenes are folded past it, and once it gets its recap it is never folded in (the running
    recap only looks past `new_scene_index`). `scene_count` is off by the skipped scenes."""

    class FailsOnce(OfflineBackend):
        failing = True

        def scene_recap(self, request: SceneRecapRequest) -> RecapResult:
            if self.failing and request.messages[0].index == 10:
                raise LLMError("the LLM server answered 503")
            return super().scene_recap(request)

    chat = plain_chat(43)
    for end in (9, 19, 29, 39):
        mark_break(chat.messages[end])
    chat.messages[15]["mes"] = "Scene two: Mira hands Tomas the brass key numbered 7734."
    backend = FailsOnce()
    settings = Settings(running_scene_recap_exclude_latest=0)
    first = run_pipeline(chat, backend, settings, counter, now_ms=0, detect=False)
    assert first.failures == ["scene 2: the LLM server answered 503"]
    backend.failing = False
    second = run_pipeline(chat, backend, settings, counter, now_ms=1, detect=False)
    assert second.failures == []
    assert "7734" in get_data(chat.messages[19], "scene_recap_memory")
    content = running.current(chat)["content"]  # type: ignore[index]
    assert "7734" in content
    assert running.current(chat)["scene_count"] == 4  # type: ignore[index]


# --- enforce_cap ----------------------------------------------------------------------------------

SENTENCES = " ".join(
    f"Sentence {i} says that Osric Hesk was paid {i * 7} crowns at Port Vell." for i in range(40)
)
LINES = "\n".join(
    f"- Scene {i}: Mira paid {i * 3} crowns. Tomas kept the chart safe in the barrel."
    for i in range(80)
)


@pytest.mark.parametrize(
    ("text", "cap"),
    [
        (SENTENCES, 200),
        ("word " * 3000, 200),
        (LINES, 200),
        (LINES, 60),
        ("x" * 4000, 200),
        ("Kestrel,Hesk;340/188:" * 200, 120),
        ("- Scene 1: fine.\n" + "y" * 3000, 200),
    ],
    ids=[
        "one-long-line",
        "one-line-no-sentences",
        "many-lines",
        "many-lines-tiny-cap",
        "no-spaces",
        "no-spaces-punctuation",
        "newest-line-no-spaces",
    ],
)
def test_enforce_cap_fits(text: str, cap: int, counter: TokenCounter) -> None:
    assert counter.count(text) > cap
    result = enforce_cap(text, cap, counter)
    assert counter.count(result) <= cap
    assert result.strip()


def test_enforce_cap_keeps_the_newest_scene_and_leaves_short_text_alone(
    counter: TokenCounter,
) -> None:
    assert enforce_cap("Short recap.", 200, counter) == "Short recap."
    capped = enforce_cap(LINES, 200, counter)
    assert capped.splitlines()[-1].startswith("- Scene 79: Mira paid 237 crowns")
    assert "- Scene 0:" not in capped  # the oldest go first


# --- run_pipeline end to end ------------------------------------------------------------------


@pytest.fixture(scope="module")
def recapped_sample() -> tuple[Chat, Any]:
    chat = read_chat(sample_chat_path())
    stats = run_pipeline(chat, OfflineBackend(), Settings(), get_counter(), now_ms=42)
    return chat, stats


def test_run_pipeline_on_the_sample_chat(
    recapped_sample: tuple[Chat, Any], counter: TokenCounter
) -> None:
    chat, stats = recapped_sample
    n = len(chat.messages)
    assert stats.failures == []
    assert stats.messages.made == n
    assert all(get_memory(m) for m in chat.messages)
    assert len(stats.breaks_found) >= 7
    assert stats.breaks_found == break_indexes(chat.messages)
    closed = closed_scenes(chat)
    assert stats.scene_recaps == len(closed)
    assert all(s.recap for s in closed)
    assert stats.running_versions == len(closed) - 1
    storage = chat.metadata[running.STORAGE_KEY]
    assert storage["chat_id"] == "sample_chat"
    assert [v["version"] for v in storage["versions"]] == list(range(len(closed) - 1))
    assert storage["current_version"] == len(closed) - 2
    content = running.current(chat)["content"]  # type: ignore[index]
    assert counter.count(content) <= Settings().running_scene_recap_max_tokens
    facts = " ".join(fact for scene in sample_scenes() for fact in scene["facts"])
    for name in ("Hesk", "Aster Hollow", "Rook Danner", "Frostmonth", "Lumen Reach", "Jory Pell"):
        assert name in facts
        assert name in content, name


def test_run_pipeline_twice_adds_nothing(
    recapped_sample: tuple[Chat, Any], counter: TokenCounter
) -> None:
    chat = copy_chat(recapped_sample[0])
    before = running.current(chat)
    stats = run_pipeline(chat, OfflineBackend(), Settings(), counter, now_ms=43)
    assert stats.messages.made == 0
    assert stats.breaks_found == []
    assert stats.scene_recaps == 0
    assert stats.running_versions == 0
    assert running.current(chat) == before


def test_evaluation_beats_the_recent_messages_baseline() -> None:
    corpus = from_generated(generate(300, seed=3), "narrated", "generated")
    result = evaluate_chat(corpus, budgets=(500,))
    assert result.breaks.true > 0
    assert result.memory_recall[500] > result.baseline_recall[500]
    assert result.memory_planted[500][0] > result.baseline_planted[500][0]


def test_evaluation_counts_apart_the_planted_facts_the_prompt_still_shows() -> None:
    corpus = from_generated(generate(300, seed=3), "narrated", "generated")
    before = evaluate_chat(corpus, budgets=(500,))
    last = corpus.chat.messages[-1]
    last["mes"] = f"{last.text} The lockbox code is 7713-QX."
    corpus.questions.append(Question("What is the lockbox code?", "7713-QX", planted=True))
    after = evaluate_chat(corpus, budgets=(500,))
    # The newest message is in the prompt, not in the memory: one more planted fact (missed
    # by the memory), and none more among those that left the prompt.
    found, planted = after.recall_planted[500]
    assert (found, planted) == (before.recall_planted[500][0], before.recall_planted[500][1] + 1)
    assert after.recall_planted_hidden[500] == before.recall_planted_hidden[500]
    hidden_found, hidden = after.recall_planted_hidden[500]
    assert 0 < hidden < planted
    assert hidden_found <= found
    assert "7713-QX" not in after.memory[500]
