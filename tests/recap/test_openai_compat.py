"""`OpenAICompatBackend` against a real loopback chat-completions server (tests/llm/conftest.py):
the request it sends, prefills, reasoning, retries with backoff, timeouts, errors, the API key,
and `extract_json` / `split_reasoning` / `make_backend`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import date
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from autorecap.recap.answers import extract_json, split_reasoning
from autorecap.recap.backend import (
    CombineRequest,
    ContextMessage,
    LLMError,
    RecapRequest,
    RecapResult,
    SceneMessage,
    SceneRecapRequest,
)
from autorecap.recap.backends import make_backend
from autorecap.recap.chat_client import MAX_BACKOFF_S
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recap.openai_compat import OpenAICompatBackend
from autorecap.settings import Settings

from .conftest import LLMServer, SleepRecorder

MakeClient = Callable[..., OpenAICompatBackend]
KEY = "sk-secret-123"

REQUEST = RecapRequest(
    text="Mira pays Harrow Vane 40 crowns for the chart of the Cinder Line.",
    name="Captain Mira",
    user="Tomas",
    char="Captain Mira",
    context=(
        ContextMessage("Tomas", "We need that chart before the storm."),
        ContextMessage("Harrow Vane", "Forty crowns, not a copper less."),
    ),
    max_tokens=80,
)


def prompt_of(server: LLMServer, index: int = -1) -> str:
    messages = server.requests[index].json["messages"]
    assert messages[0]["role"] == "user"
    return str(messages[0]["content"])


# --- a normal answer and the request it answers ---------------------------------------------


def test_a_normal_answer_becomes_the_recap(llm_server: LLMServer, make_client: MakeClient) -> None:
    llm_server.reply("  Mira bought the Cinder Line chart from Harrow Vane for 40 crowns.\n")
    backend = make_client(model="qwen3-8b", temperature=0.2, max_tokens=400)

    result = backend.message_recap(REQUEST)

    assert result.memory == "Mira bought the Cinder Line chart from Harrow Vane for 40 crowns."
    assert result.reasoning is None
    assert result.prefill is None
    assert backend.calls == 1
    sent = llm_server.last
    assert sent.method == "POST"
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["content-type"] == "application/json"
    body = sent.json
    assert body["model"] == "qwen3-8b"
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == min(400, max(80 * 4, 64))
    assert body["stream"] is False
    assert [m["role"] for m in body["messages"]] == ["user"]
    prompt = prompt_of(llm_server)
    assert REQUEST.text in prompt
    assert "from Captain Mira:" in prompt
    assert "Tomas: We need that chart before the storm." in prompt
    assert "Harrow Vane: Forty crowns, not a copper less." in prompt
    assert "between Tomas and Captain Mira" in prompt
    assert "{{" not in prompt


def test_an_httpx_client_passed_in_stays_open_and_one_made_is_closed(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    """The caller who passes its own httpx client (a pool shared with other work) closes it;
    the backend closes only the one it made. What the calls cost is counted once, on the
    backend, whichever object sent them."""
    llm_server.reply("Mira bought the chart.").reply("Mira bought the chart.")
    with httpx.Client(timeout=5.0) as shared:
        backend = make_client(http=shared)
        backend.message_recap(REQUEST)
        backend.close()
        assert not shared.is_closed
        assert backend.usage is backend.client.usage
        assert (backend.usage.calls, backend.calls) == (1, 1)
    own = make_client()
    own.message_recap(REQUEST)
    own.close()
    with pytest.raises(RuntimeError, match="closed"):
        own.message_recap(REQUEST)


def test_model_is_left_out_when_empty_and_max_tokens_is_capped(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("ok")
    backend = make_client(model="", max_tokens=100)
    backend.message_recap(RecapRequest(text="Hello there.", name="Tomas", max_tokens=80))
    body = llm_server.last.json
    assert "model" not in body
    assert body["max_tokens"] == 100  # min(backend max, 4 x the recap's cap)


def test_a_custom_prompt_is_rendered_with_every_placeholder(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("ok")
    backend = make_client(
        message_prompt="{{user}}|{{char}}|{{name}}|{{message}}|{{context}}|{{other}}"
    )
    backend.message_recap(RecapRequest(text="Hi.", name="Tomas", user="T", char="C"))
    assert prompt_of(llm_server) == "T|C|Tomas|Hi.|(none)|{{other}}"


def test_a_trailing_slash_on_the_base_url_is_tolerated(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("ok")
    make_client(base_url=llm_server.url + "/").message_recap(REQUEST)
    assert llm_server.last.path == "/v1/chat/completions"


def test_extra_headers_are_sent(llm_server: LLMServer, make_client: MakeClient) -> None:
    llm_server.reply("ok")
    make_client(headers={"X-Title": "autorecap"}).message_recap(REQUEST)
    assert llm_server.last.headers["x-title"] == "autorecap"


# --- prefill ---------------------------------------------------------------------------------


def test_prefill_is_a_trailing_assistant_message_and_is_stored(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("Mira bought the chart.")
    result = make_client(prefill="Recap: ").message_recap(REQUEST)
    messages = llm_server.last.json["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[-1]["content"] == "Recap: "
    assert result.prefill == "Recap: "
    assert result.memory == "Mira bought the chart."


def test_an_echoed_prefill_is_removed(llm_server: LLMServer, make_client: MakeClient) -> None:
    llm_server.reply("Recap: Mira bought the chart.")
    result = make_client(prefill="Recap: ").message_recap(REQUEST)
    assert result.memory == "Mira bought the chart."
    assert result.prefill == "Recap: "


def test_no_prefill_sends_no_assistant_message(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("Recap: kept as written.")
    result = make_client(prefill="").message_recap(REQUEST)
    assert [m["role"] for m in llm_server.last.json["messages"]] == ["user"]
    assert result.memory == "Recap: kept as written."
    assert result.prefill is None


# --- reasoning -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "memory", "reasoning"),
    [
        ("<think>Who paid whom?</think>Mira paid Vane.", "Mira paid Vane.", "Who paid whom?"),
        ("<THINK>a</THINK>Mira <think>b</think>paid.", "Mira paid.", "a\n\nb"),
        ("Mira paid Vane.<think>unfinished thoughts", "Mira paid Vane.", "unfinished thoughts"),
        (
            "the prefill opened it</think>\nMira paid Vane.",
            "Mira paid Vane.",
            "the prefill opened it",
        ),
    ],
    ids=["closed", "two-blocks-any-case", "unclosed", "lone-closing-tag"],
)
def test_think_blocks_are_split_off_into_reasoning(
    llm_server: LLMServer, make_client: MakeClient, content: str, memory: str, reasoning: str
) -> None:
    llm_server.reply(content)
    result = make_client().message_recap(REQUEST)
    assert result.memory == memory
    assert result.reasoning == reasoning
    assert "think>" not in result.memory


def test_an_unclosed_leading_think_with_nothing_after_it_is_an_empty_recap(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("<think>I ran out of tokens while thinking")
    with pytest.raises(LLMError, match="no recap"):
        make_client(answer_retries=0).message_recap(REQUEST)


def test_reasoning_content_field_is_reasoning(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("Mira paid Vane.", reasoning_content="The user wants a recap.")
    result = make_client().message_recap(REQUEST)
    assert result.memory == "Mira paid Vane."
    assert result.reasoning == "The user wants a recap."


def test_reasoning_content_and_think_blocks_are_joined(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("<think>second</think>Done.", reasoning_content="first")
    result = make_client().message_recap(REQUEST)
    assert result.memory == "Done."
    assert result.reasoning == "first\n\nsecond"


def test_a_prefill_that_opens_a_think_block(llm_server: LLMServer, make_client: MakeClient) -> None:
    llm_server.reply("weighing it</think>Mira paid Vane.")
    result = make_client(prefill="<think>").message_recap(REQUEST)
    assert result.memory == "Mira paid Vane."
    assert result.reasoning == "weighing it"
    assert result.prefill == "<think>"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", ("plain", [])),
        ("<think>x</think> y ", ("y", ["x"])),
        ("a<think>\nmulti\nline\n</think>b", ("ab", ["\nmulti\nline\n"])),
        ("<think>open", ("", ["open"])),
        ("x</think>y", ("y", ["x"])),
    ],
)
def test_split_reasoning(text: str, expected: tuple[str, list[str]]) -> None:
    assert split_reasoning(text) == expected


# --- retries and backoff ---------------------------------------------------------------------


def test_429_then_success(
    llm_server: LLMServer, make_client: MakeClient, sleeps: SleepRecorder
) -> None:
    llm_server.error(429, {"error": {"message": "slow down"}}, retry_after="0").reply("ok")
    backend = make_client(retries=3)
    assert backend.message_recap(REQUEST).memory == "ok"
    assert backend.calls == 2
    assert len(llm_server.requests) == 2
    assert len(sleeps.delays) == 1
    assert sleeps.delays[0] <= 0.01  # never longer than the first backoff step


def test_retry_after_zero_means_retry_at_once(
    llm_server: LLMServer, make_client: MakeClient, sleeps: SleepRecorder
) -> None:
    """Regression: `retry_after or backoff` treated `Retry-After: 0` as absent."""
    llm_server.error(429, retry_after="0").reply("ok")
    make_client(retries=3, backoff_s=0.5).message_recap(REQUEST)
    assert sleeps.delays == [0.0]


def test_retry_after_is_honoured(
    llm_server: LLMServer, make_client: MakeClient, sleeps: SleepRecorder
) -> None:
    llm_server.error(429, retry_after="2").error(503, retry_after="1.5").reply("ok")
    backend = make_client(retries=3)
    assert backend.message_recap(REQUEST).memory == "ok"
    assert sleeps.delays == [2.0, 1.5]
    assert backend.calls == 3


def test_retry_after_is_capped_and_bad_values_fall_back_to_backoff(
    llm_server: LLMServer, make_client: MakeClient, sleeps: SleepRecorder
) -> None:
    llm_server.error(429, retry_after="3600").error(429, retry_after="soon").reply("ok")
    make_client(retries=3).message_recap(REQUEST)
    assert sleeps.delays == [MAX_BACKOFF_S, 0.02]


def test_500_502_503_then_success(
    llm_server: LLMServer, make_client: MakeClient, sleeps: SleepRecorder
) -> None:
    llm_server.error(500).error(502, "Bad Gateway").error(503).reply("finally")
    backend = make_client(retries=3)
    assert backend.message_recap(REQUEST).memory == "finally"
    assert backend.calls == 4
    assert sleeps.delays == pytest.approx([0.01, 0.02, 0.04])
    # every attempt sent the same request
    assert len({r.raw for r in llm_server.requests}) == 1


def test_a_persistent_500_gives_up_after_one_plus_retries_attempts(
    llm_server: LLMServer, make_client: MakeClient, sleeps: SleepRecorder
) -> None:
    for _ in range(5):
        llm_server.error(500, {"error": {"message": "the GPU caught fire"}})
    backend = make_client(retries=4)
    with pytest.raises(LLMError) as caught:
        backend.message_recap(REQUEST)
    message = str(caught.value)
    assert "gave up after 5 attempts" in message
    assert "500" in message
    assert "the GPU caught fire" in message
    assert caught.value.status == 500
    assert caught.value.retryable
    assert backend.calls == 5
    assert len(llm_server.requests) == 5
    assert sleeps.delays == pytest.approx([0.01, 0.02, 0.04, 0.08])


def test_backoff_is_capped(
    llm_server: LLMServer, make_client: MakeClient, sleeps: SleepRecorder
) -> None:
    for _ in range(5):
        llm_server.error(503)
    with pytest.raises(LLMError, match="gave up after 5 attempts"):
        make_client(retries=4, backoff_s=10).message_recap(REQUEST)
    assert sleeps.delays == [10, 20, MAX_BACKOFF_S, MAX_BACKOFF_S]


def test_retries_zero_makes_one_attempt(
    llm_server: LLMServer, make_client: MakeClient, sleeps: SleepRecorder
) -> None:
    llm_server.error(503)
    backend = make_client(retries=0)
    with pytest.raises(LLMError, match="503") as caught:
        backend.message_recap(REQUEST)
    assert "gave up" not in str(caught.value)
    assert backend.calls == 1
    assert sleeps.delays == []


def test_retries_are_logged_as_warnings(
    llm_server: LLMServer, make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.error(500).reply("ok")
    with caplog.at_level(logging.WARNING, logger="autorecap.llm"):
        make_client().message_recap(REQUEST)
    warnings = [r for r in caplog.records if r.name == "autorecap.llm"]
    assert len(warnings) == 1
    assert "retrying" in warnings[0].getMessage()


# --- timeouts --------------------------------------------------------------------------------


def test_a_timeout_is_retried_then_fails(
    llm_server: LLMServer, make_client: MakeClient, sleeps: SleepRecorder
) -> None:
    llm_server.reply("too late", delay=1.0).reply("too late", delay=1.0)
    backend = make_client(timeout_s=0.3, retries=1)
    with pytest.raises(LLMError, match=r"did not answer within 0\.3 s") as caught:
        backend.message_recap(REQUEST)
    assert "gave up after 2 attempts" in str(caught.value)
    assert backend.calls == 2
    assert len(llm_server.requests) == 2
    assert sleeps.delays == [0.01]


def test_a_timeout_then_a_prompt_answer_succeeds(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("too late", delay=1.0).reply("in time")
    backend = make_client(timeout_s=0.3, retries=2)
    assert backend.message_recap(REQUEST).memory == "in time"
    assert backend.calls == 2


def test_a_slow_answer_within_the_timeout_succeeds(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("slow but fine", delay=0.1)
    backend = make_client(timeout_s=2.0, retries=0)
    assert backend.message_recap(REQUEST).memory == "slow but fine"
    assert backend.calls == 1


# --- errors that are not retried -------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_fail_at_once_with_the_servers_message(
    llm_server: LLMServer, make_client: MakeClient, sleeps: SleepRecorder, status: int
) -> None:
    llm_server.error(status, {"error": {"message": f"server says no ({status})"}})
    llm_server.reply("never reached")
    backend = make_client(retries=3)
    with pytest.raises(LLMError) as caught:
        backend.message_recap(REQUEST)
    message = str(caught.value)
    assert f"answered {status}" in message
    if status in (401, 403):  # a refused key's answer may quote the key: it is never repeated
        assert "server says no" not in message
    else:
        assert f"server says no ({status})" in message
    assert "gave up" not in message
    assert caught.value.status == status
    assert not caught.value.retryable
    assert backend.calls == 1
    assert len(llm_server.requests) == 1
    assert llm_server.remaining == 1
    assert sleeps.delays == []


def test_401_names_the_api_key_variable(llm_server: LLMServer, make_client: MakeClient) -> None:
    llm_server.error(401, {"error": {"message": "Incorrect API key provided"}})
    with pytest.raises(LLMError, match=r"check the API key in \$MY_TEST_KEY"):
        make_client(api_key_env="MY_TEST_KEY").message_recap(REQUEST)
    # The proxy's backend names no variable: the key is the one its client sent.
    llm_server.error(401, {"error": {"message": "Incorrect API key provided"}})
    with pytest.raises(LLMError, match=r"check the API key the client sent"):
        make_client(api_key_env="", key=lambda: "sk-client").message_recap(REQUEST)


def test_404_hints_at_the_base_url(llm_server: LLMServer, make_client: MakeClient) -> None:
    llm_server.error(404, "Not Found")
    with pytest.raises(LLMError, match="check the base URL") as caught:
        make_client(base_url=llm_server.origin).message_recap(REQUEST)
    assert "(Not Found)" in str(caught.value)
    assert llm_server.last.path == "/chat/completions"  # no /v1: the hint says why it 404s


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"error": "plain string error"}, "plain string error"),
        ({"message": "top-level message"}, "top-level message"),
        ({"detail": "something else"}, '{"detail": "something else"}'),
        ("text body\n", "text body"),
    ],
)
def test_error_bodies_of_every_shape_are_quoted(
    llm_server: LLMServer, make_client: MakeClient, body: Any, detail: str
) -> None:
    llm_server.error(400, body)
    with pytest.raises(LLMError) as caught:
        make_client().message_recap(REQUEST)
    assert f"({detail})" in str(caught.value)


def test_a_malformed_json_body_is_an_error(llm_server: LLMServer, make_client: MakeClient) -> None:
    llm_server.malformed()
    backend = make_client()
    with pytest.raises(LLMError, match="not JSON") as caught:
        backend.message_recap(REQUEST)
    assert backend.calls == 1
    assert "is the base URL the API's (it usually ends in /v1)?" in str(caught.value)
    assert (backend.usage.failed_calls, backend.usage.calls) == (1, 1)
    assert backend.usage.failed_prompt_tokens > 0


def test_a_json_body_that_is_not_an_object_is_an_error(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.not_object()
    with pytest.raises(LLMError, match="not a JSON object"):
        make_client().message_recap(REQUEST)


@pytest.mark.parametrize(
    "body",
    [{"id": "x", "object": "chat.completion"}, {"choices": []}, {"choices": [{"text": "hi"}]}],
    ids=["no-choices", "empty-choices", "no-message"],
)
def test_an_answer_without_choices_is_an_error(
    llm_server: LLMServer, make_client: MakeClient, body: dict[str, Any]
) -> None:
    llm_server.raw_json(body)
    with pytest.raises(LLMError, match=r"choices\[0\]\.message"):
        make_client().message_recap(REQUEST)


@pytest.mark.parametrize("content", ["", "   \n ", None])
def test_an_empty_answer_is_an_error(
    llm_server: LLMServer, make_client: MakeClient, content: str | None
) -> None:
    for _ in range(3):
        llm_server.reply(content)
    with pytest.raises(LLMError, match="no recap"):
        make_client(answer_retries=2).message_recap(REQUEST)
    assert len(llm_server.requests) == 3  # asked again twice, then the error is kept


def test_content_that_is_not_text_is_kept_as_json(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply([{"type": "text", "text": "Mira paid."}])
    result = make_client().message_recap(REQUEST)
    assert json.loads(result.memory) == [{"type": "text", "text": "Mira paid."}]


def test_a_dropped_connection_is_retried(
    llm_server: LLMServer, make_client: MakeClient, sleeps: SleepRecorder
) -> None:
    llm_server.drop().reply("ok")
    backend = make_client(retries=2)
    assert backend.message_recap(REQUEST).memory == "ok"
    assert backend.calls == 2
    assert sleeps.delays == [0.01]


def test_connection_refused_is_retried_then_fails(
    dead_port: int, make_client: MakeClient, sleeps: SleepRecorder
) -> None:
    backend = make_client(base_url=f"http://127.0.0.1:{dead_port}/v1", retries=2)
    with pytest.raises(LLMError, match="cannot reach the LLM server") as caught:
        backend.message_recap(REQUEST)
    assert f"127.0.0.1:{dead_port}" in str(caught.value)
    assert "gave up after 3 attempts" in str(caught.value)
    assert backend.calls == 3
    assert sleeps.delays == pytest.approx([0.01, 0.02])


# --- the API key -----------------------------------------------------------------------------


def test_the_api_key_goes_into_the_authorization_header(
    llm_server: LLMServer, make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_TEST_KEY", KEY)
    llm_server.reply("ok")
    make_client(api_key_env="MY_TEST_KEY").message_recap(REQUEST)
    sent = llm_server.last
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in sent.raw.decode()  # only in the header, never in the body


def test_the_key_is_read_at_call_time(
    llm_server: LLMServer, make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = make_client(api_key_env="MY_TEST_KEY")
    monkeypatch.setenv("MY_TEST_KEY", "sk-later")
    llm_server.reply("ok")
    backend.message_recap(REQUEST)
    assert llm_server.last.headers["authorization"] == "Bearer sk-later"


def test_no_key_no_authorization_header(
    llm_server: LLMServer, make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MY_TEST_KEY", raising=False)
    llm_server.reply("ok").reply("ok")
    make_client(api_key_env="MY_TEST_KEY").message_recap(REQUEST)
    make_client(api_key_env="").message_recap(REQUEST)
    assert all("authorization" not in r.headers for r in llm_server.requests)


@pytest.mark.parametrize("status", [401, 500])
def test_a_key_echoed_in_an_error_body_is_masked(
    llm_server: LLMServer, make_client: MakeClient, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    monkeypatch.setenv("MY_TEST_KEY", KEY)
    llm_server.error(status, {"error": {"message": f"Incorrect API key provided: {KEY}."}})
    with pytest.raises(LLMError) as caught:
        make_client(api_key_env="MY_TEST_KEY", retries=0).message_recap(REQUEST)
    assert KEY not in str(caught.value)
    if status == 401:  # a refused key's body is not quoted at all (it may hold part of the key)
        assert "Incorrect API key" not in str(caught.value)
    else:
        assert "Incorrect API key provided: ***." in str(caught.value)


def test_a_key_the_model_repeats_in_a_recap_is_masked(
    llm_server: LLMServer, make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The recap is stored and shown: the upstream key must not reach it.
    monkeypatch.setenv("MY_TEST_KEY", KEY)
    llm_server.reply(f"Mira paid with the key {KEY} at the gate.")
    backend = make_client(api_key_env="MY_TEST_KEY")
    recap = backend.message_recap(REQUEST).memory
    assert KEY not in recap
    assert recap == "Mira paid with the key *** at the gate."


def test_a_refused_keys_text_error_body_is_not_quoted(
    llm_server: LLMServer, make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_TEST_KEY", KEY)
    llm_server.error(403, f"forbidden for Bearer {KEY}")
    with pytest.raises(LLMError) as caught:
        make_client(api_key_env="MY_TEST_KEY").message_recap(REQUEST)
    assert KEY not in str(caught.value)
    assert "forbidden for Bearer" not in str(caught.value)  # a 403's body is not quoted
    assert KEY[:10] not in str(caught.value)


def test_a_key_echoed_at_the_end_of_a_long_error_body_does_not_leak_in_part(
    llm_server: LLMServer, make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the error detail was cut to 300 characters *before* the key was masked, so
    a key straddling the cut was not recognised and its first characters ended up in the
    error."""
    key = "sk-live-0123456789abcdefghijklmnopqrstuv"
    monkeypatch.setenv("MY_TEST_KEY", key)
    llm_server.error(401, {"error": {"message": "x" * 280 + " key: " + key}})
    with pytest.raises(LLMError) as caught:
        make_client(api_key_env="MY_TEST_KEY").message_recap(REQUEST)
    assert key[:12] not in str(caught.value)


def test_no_log_record_holds_the_key(
    llm_server: LLMServer,
    make_client: MakeClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("MY_TEST_KEY", KEY)
    llm_server.error(500, {"error": {"message": f"upstream rejected {KEY}"}})
    llm_server.error(429, f"rate limited for {KEY}", retry_after="0")
    llm_server.reply("ok")
    with caplog.at_level(logging.DEBUG):
        result = make_client(api_key_env="MY_TEST_KEY").message_recap(REQUEST)
    assert result.memory == "ok"
    assert len(llm_server.requests) == 3
    assert any(r.levelno == logging.WARNING for r in caplog.records)  # the retries
    assert any(r.levelno == logging.DEBUG for r in caplog.records)  # httpx's own trace
    for record in caplog.records:
        assert KEY not in record.getMessage()
        assert KEY not in repr(record.args)
    assert KEY not in caplog.text


# --- construction, make_backend --------------------------------------------------------------


@pytest.mark.parametrize("url", ["127.0.0.1:8080/v1", "localhost/v1", "ftp://host/v1", ""])
def test_a_base_url_without_a_scheme_is_refused(url: str) -> None:
    with pytest.raises(LLMError, match="must start with http:// or https://"):
        OpenAICompatBackend(base_url=url)


def test_a_misspelt_server_option_is_refused_not_ignored() -> None:
    """The server's options pass through to `ChatClient`: a typo is an error at once."""
    with pytest.raises(TypeError, match="temprature"):
        OpenAICompatBackend(base_url="http://127.0.0.1:9/v1", temprature=0.2)
    backend = OpenAICompatBackend(base_url="http://127.0.0.1:9/v1", max_tokens=123)
    try:
        assert (backend.max_tokens, backend.client.max_tokens) == (123, 123)
        assert backend.usage is backend.client.usage
    finally:
        backend.close()


def test_make_backend_defaults_to_offline() -> None:
    backend = make_backend(Settings())
    assert isinstance(backend, OfflineBackend)
    assert backend.name == "offline"


def test_make_backend_openai_takes_the_settings_values() -> None:
    settings = Settings(
        recap_backend="openai",
        llm_base_url="http://127.0.0.1:9/v1/",
        llm_model="tiny",
        llm_api_key_env="MY_TEST_KEY",
        llm_temperature=0.7,
        llm_max_tokens=123,
        llm_timeout_s=4.5,
        llm_retries=6,
        message_recap_prompt="Recap {{message}}",
        message_recap_prefill="Recap:",
        llm_own_recap_tokens=7,
    )
    backend = make_backend(settings)
    try:
        assert isinstance(backend, OpenAICompatBackend)
        assert backend.name == "openai"
        assert backend.client.base_url == "http://127.0.0.1:9/v1"
        assert backend.client.model == "tiny"
        assert backend.client.api_key_env == "MY_TEST_KEY"
        assert backend.client.temperature == 0.7
        assert backend.max_tokens == 123
        assert backend.client.timeout_s == 4.5
        assert backend.client.retries == 6
        assert backend.message_prompt == "Recap {{message}}"
        assert backend.prefill == "Recap:"
        assert backend.own_recap_tokens == 7
    finally:
        backend.close()


def test_make_backend_overrides_and_the_backend_argument() -> None:
    backend = make_backend(Settings(), backend="openai", model="other", retries=None)
    try:
        assert isinstance(backend, OpenAICompatBackend)
        assert backend.client.model == "other"
        assert backend.client.retries == Settings().llm_retries  # None overrides are ignored
        assert backend.client.base_url == Settings().llm_base_url
    finally:
        backend.close()
    assert isinstance(
        make_backend(Settings(recap_backend="openai"), backend="offline"), OfflineBackend
    )


def test_make_backend_refuses_an_unknown_backend() -> None:
    with pytest.raises(LLMError, match="unknown recap backend 'gpt5'"):
        make_backend(Settings(), backend="gpt5")


def test_make_backend_talks_to_the_server(
    llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_TEST_KEY", KEY)
    settings = Settings(
        recap_backend="openai",
        llm_base_url=llm_server.url,
        llm_model="loop",
        llm_api_key_env="MY_TEST_KEY",
        message_recap_prefill="Recap: ",
        llm_own_recap_tokens=0,
    )
    llm_server.reply("Mira paid.")
    backend = make_backend(settings)
    try:
        result = backend.message_recap(REQUEST)
    finally:
        backend.close()
    assert result.memory == "Mira paid."
    assert result.prefill == "Recap: "
    assert llm_server.last.json["model"] == "loop"
    assert llm_server.last.headers["authorization"] == f"Bearer {KEY}"


# --- extract_json ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"scene_break": true}\n```', {"scene_break": True}),
        ('```\n{"x": [1, 2]}\n```', {"x": [1, 2]}),
        ('Sure! Here is the JSON:\n```JSON\n{"ok": "yes"}\n```\nAnything else?', {"ok": "yes"}),
        ('Here you go: {"title": "Dawn", "n": 2} Hope that helps.', {"title": "Dawn", "n": 2}),
        ('{"a": {"b": "}"}} trailing } braces', {"a": {"b": "}"}}),
        ("[1, 2, 3]", [1, 2, 3]),
        ('The list: [{"a": 1}] done', [{"a": 1}]),
        ('not json {oops} then {"real": true}', {"real": True}),
    ],
)
def test_extract_json(text: str, expected: Any) -> None:
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["", "no JSON at all", "{not: json}", "```json\n{broken\n```"])
def test_extract_json_without_json_is_an_error(text: str) -> None:
    with pytest.raises(LLMError, match="no JSON"):
        extract_json(text)


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
_PROSE = st.text(
    alphabet=st.characters(blacklist_characters="{}[]`"),
    max_size=60,
)


@given(
    value=st.dictionaries(st.text(), _JSON, max_size=5),
    preamble=_PROSE,
    trailing=_PROSE,
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 2]),
    fenced=st.booleans(),
)
def test_extract_json_finds_any_embedded_object(
    value: dict[str, Any],
    preamble: str,
    trailing: str,
    ascii_only: bool,
    indent: int | None,
    fenced: bool,
) -> None:
    encoded = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    if fenced:
        encoded = f"```json\n{encoded}\n```"
    assert extract_json(f"{preamble}{encoded}{trailing}") == value


def test_part_of_a_key_quoted_by_a_401_never_reaches_the_error(
    llm_server: LLMServer, make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found in review: a 401 body quoting the key's first characters leaked them (masking only
    caught the whole key). A refused key's body is now left out."""
    monkeypatch.setenv("MY_TEST_KEY", KEY)
    llm_server.error(401, {"error": {"message": f"bad key {KEY[:13]}..."}})
    with pytest.raises(LLMError) as caught:
        make_client(api_key_env="MY_TEST_KEY", retries=0).message_recap(REQUEST)
    assert KEY[:13] not in str(caught.value)
    assert "$MY_TEST_KEY" in str(caught.value)


# --- refused answers, batches, usage ------------------------------------------------------------


def test_an_answer_echoing_the_prompt_is_asked_again(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("Earlier messages:\n(none)")
    llm_server.reply(REQUEST.text)  # the message copied back
    llm_server.reply("Mira bought the Cinder Line chart from Harrow Vane for 40 crowns.")
    result = make_client(answer_retries=2).message_recap(REQUEST)
    assert result.memory == "Mira bought the Cinder Line chart from Harrow Vane for 40 crowns."
    assert len(llm_server.requests) == 3


def test_an_echo_after_the_retries_is_an_error_that_names_the_cause(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    for _ in range(2):
        llm_server.reply("Message from Captain Mira:\n" + REQUEST.text)
    with pytest.raises(LLMError, match="label 'Message from'"):
        make_client(answer_retries=1).message_recap(REQUEST)


BATCH = [
    RecapRequest(text=f"Message {n}: Mira counts {n * 10} crowns into the chest.", name="Mira")
    for n in (1, 2, 3)
]


def test_several_messages_are_recapped_in_one_call(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("[1] Mira counted 10 crowns.\n[2] NEW SCENE: Mira counted 20.\n[3] 30 more.")
    results = make_client().message_recaps(BATCH)
    assert [r.memory for r in results if isinstance(r, RecapResult)] == [
        "Mira counted 10 crowns.",
        "Mira counted 20.",
        "30 more.",
    ]
    assert [r.extras["scene_start"] for r in results if isinstance(r, RecapResult)] == [
        False,
        True,
        False,
    ]
    assert len(llm_server.requests) == 1
    prompt = prompt_of(llm_server)
    for n, request in enumerate(BATCH, 1):
        assert f"[{n}] Mira: {request.text}" in prompt
    assert "For each of the 3 messages" in prompt


def test_a_short_message_is_its_own_recap_with_no_call(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    """An LLM's recap of "6 til 2" is no shorter than it: a message of at most
    `own_recap_tokens` is its own recap, and only the others are sent."""
    short = RecapRequest(text="6  til\n2", name="Sam")
    backend = make_client(own_recap_tokens=24)
    assert backend.message_recap(short).memory == "Sam: 6 til 2"
    assert llm_server.requests == []
    llm_server.reply("[1] Mira counted 10 crowns.\n[2] Mira counted 30 crowns.")
    long = [
        RecapRequest(
            text=f"{r.text} " + "She counts them twice, slowly, by lamplight." * 2, name="Mira"
        )
        for r in BATCH
    ]
    results = backend.message_recaps([long[0], short, long[2]])
    assert [r.memory for r in results if isinstance(r, RecapResult)] == [
        "Mira counted 10 crowns.",
        "Sam: 6 til 2",
        "Mira counted 30 crowns.",
    ]
    assert len(llm_server.requests) == 1
    assert "6 til 2" not in prompt_of(llm_server)
    # All short: no call at all.
    assert [
        r.memory for r in backend.message_recaps([short, short]) if isinstance(r, RecapResult)
    ] == [
        "Sam: 6 til 2",
        "Sam: 6 til 2",
    ]
    assert len(llm_server.requests) == 1


def test_a_short_message_s_note_out_of_character_is_left_out(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    backend = make_client(own_recap_tokens=24)
    said = RecapRequest(text="(OOC: brb, dinner) The gate code is 4471.", name="Sam")
    assert backend.message_recap(said).memory == "Sam: The gate code is 4471."
    assert backend.message_recap(RecapRequest(text="((brb))", name="Sam")).memory == "Sam: ((brb))"
    assert llm_server.requests == []


def test_a_line_missing_from_a_batch_is_asked_for_alone(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("[1] Mira counted 10 crowns.\n[3] Mira counted 30.")
    llm_server.reply("Mira counted 20 crowns.")
    results = make_client().message_recaps(BATCH)
    assert [r.memory for r in results if isinstance(r, RecapResult)] == [
        "Mira counted 10 crowns.",
        "Mira counted 20 crowns.",
        "Mira counted 30.",
    ]
    assert len(llm_server.requests) == 2
    second = prompt_of(llm_server)
    assert BATCH[1].text in second
    assert BATCH[0].text not in second
    assert "For each of" not in second


def test_lines_a_batch_never_gives_are_asked_alone_then_kept_as_errors(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    """A model too weak for numbered lines: after the batch's retries, each message it left is
    asked in a call of its own; what fails there too keeps its error."""
    llm_server.reply("[1] Mira counted 10 crowns.")
    llm_server.reply("[1] (none)\n[2] (none)")
    llm_server.reply("Mira counted 20 crowns.")  # message 2, alone
    llm_server.reply("(none)").reply("Message 3: Mira counts")  # message 3, alone, twice
    results = make_client(answer_retries=1).message_recaps(BATCH)
    assert [r.memory for r in results[:2] if isinstance(r, RecapResult)] == [
        "Mira counted 10 crowns.",
        "Mira counted 20 crowns.",
    ]
    assert isinstance(results[2], LLMError)
    assert "labelled the message" in str(results[2])
    assert len(llm_server.requests) == 5
    assert "Message from Mira:" in llm_server.requests[2].json["messages"][0]["content"]


def test_usage_is_the_servers_count_or_ours(llm_server: LLMServer, make_client: MakeClient) -> None:
    llm_server.raw_json(
        {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Mira paid."}}],
            "usage": {"prompt_tokens": 123, "completion_tokens": 4},
        }
    )
    llm_server.reply("Mira paid Vane.")  # no usage: counted here
    backend = make_client()
    backend.message_recap(REQUEST)
    assert (backend.usage.calls, backend.usage.prompt_tokens) == (1, 123)
    backend.message_recap(REQUEST)
    assert backend.usage.calls == 2
    assert backend.usage.prompt_tokens > 123 + 50  # the prompt holds the message and context
    assert backend.usage.completion_tokens == 4 + backend.counter.count("Mira paid Vane.")


def test_the_same_line_for_several_messages_is_refused(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    """A small model repeating itself: a long line given for two different messages recaps
    neither (a short one may: "Tomas agreed." for two messages that both agree)."""
    same = "Mira counted the crowns into the iron chest."
    llm_server.reply(f"[1] {same}\n[2] {same}\n[3] Mira shut the chest.")
    llm_server.reply("[1] Mira counted 10 crowns.\n[2] Mira counted 20 more.")
    results = make_client(answer_retries=1).message_recaps(BATCH)
    assert [r.memory for r in results if isinstance(r, RecapResult)] == [
        "Mira counted 10 crowns.",
        "Mira counted 20 more.",
        "Mira shut the chest.",
    ]
    assert len(llm_server.requests) == 2


def test_a_short_line_may_recap_two_messages(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("[1] Mira agreed.\n[2] Mira agreed.\n[3] Mira shut the chest.")
    results = make_client(answer_retries=1).message_recaps(BATCH)
    assert [r.memory for r in results if isinstance(r, RecapResult)] == [
        "Mira agreed.",
        "Mira agreed.",
        "Mira shut the chest.",
    ]


# --- what a scene recap and the running recap cost ----------------------------------------------


def _scene(recaps: list[str], *, max_tokens: int = 250) -> SceneRecapRequest:
    texts = [
        "*Mira counts the coins twice.* Forty crowns, and not one more, or the deal is off.",
        "Tomas hands over the purse and the chart without a word, eyes on the harbour.",
    ]
    return SceneRecapRequest(
        messages=tuple(
            SceneMessage(i, name, text, recap)
            for i, (name, text, recap) in enumerate(
                zip(["Captain Mira", "Tomas"], texts, recaps, strict=True)
            )
        ),
        name="Scene 1: The purse",
        user="Tomas",
        char="Captain Mira",
        max_tokens=max_tokens,
        day=date(2023, 5, 8),
        place="Port Anvil",
    )


def test_message_recaps_that_fit_are_the_scene_recap_with_no_call(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    backend = make_client()
    result = backend.scene_recap(_scene(["Mira asked 40 crowns.", "He paid her."]))
    assert result.memory == ("[8 May 2023 · Port Anvil] Mira asked 40 crowns. Tomas: He paid her.")
    assert backend.calls == 0


def test_a_recap_that_names_its_speaker_is_sent_without_a_label(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("Mira sold the chart to Tomas for 40 crowns in Port Anvil.")
    backend = make_client()
    named = "Mira asked 40 crowns for the chart."
    backend.scene_recap(_scene([named, "He paid her at once."], max_tokens=15))
    prompt = prompt_of(llm_server)
    assert f"\n{named}\n" in prompt  # "Mira ..." says who
    assert "\nTomas: He paid her at once." in prompt  # "He ..." does not
    assert "as recaps of its messages" in prompt


def test_only_the_oldest_lines_are_sent_to_be_condensed(
    llm_server: LLMServer, make_client: MakeClient
) -> None:
    llm_server.reply("- [1-6] Mira and Tomas crossed six ports and paid every debt.")
    backend = make_client()
    lines = [
        f"- [Scene {k}] Mira paid Osric {100 + k} crowns at Berth {k} in Port {k}."
        for k in range(1, 9)
    ]
    request = CombineRequest(
        previous="\n".join(lines[:-1]), scene_recap=lines[-1][2:], scene_name="8", max_tokens=90
    )
    result = backend.combine(request)
    prompt = prompt_of(llm_server)
    kept = result.memory.splitlines()[1:]
    assert kept == lines[-len(kept) :]  # the newest lines, word for word, the new one last
    assert kept
    assert len(kept) < len(lines)
    assert all(line in prompt for line in lines[: -len(kept)])
    assert not any(line in prompt for line in kept)
    assert (
        result.memory.splitlines()[0]
        == "- [1-6] Mira and Tomas crossed six ports and paid every debt."
    )
