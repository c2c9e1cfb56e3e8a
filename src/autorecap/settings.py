"""Every setting, declared once: name, type, default, allowed values and help.

The names are the seeds' own (SPEC-NOTES §5), so settings interoperate with ST-Auto-Recap. The
CLI, the API and the docs read this declaration; a bad value is a `SettingsError` that names the
setting and what it accepts.
"""

from __future__ import annotations

import difflib
import json
from typing import Annotated, Any, Final, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autorecap.errors import AutorecapError

DEFAULT_RUNNING_TEMPLATE: Final = (
    "# Story Memory\n\n"
    "The following is a cumulative memory of key scenes and developments from the roleplay so "
    "far.\n\n{{running_recap}}"
)
"""The seeds' default running-recap template (seed 001)."""
DEFAULT_MESSAGE_TEMPLATE: Final = "Recent events, one line per message:\n{{memories}}"
DEFAULT_LONG_TERM_TEMPLATE: Final = "Things to remember from this chat:\n{{memories}}"
DEFAULT_COMBINED_TEMPLATE: Final = "The story so far, in short:\n{{combined_recap}}"
DEFAULT_COMBINED_RECAP_PROMPT: Final = (
    "Below are the notes of a long chat, one per message, oldest first. Merge them into one "
    "narrative of at most {{max_tokens}} tokens: plain past-tense prose that keeps who did what, "
    "where and when, and every name, number, place, promise, decision and relationship that "
    "still matters; the oldest events may be said most briefly. Answer with the narrative "
    "alone.\n\n{{recaps}}"
)
DEFAULT_RECALL_TEMPLATE: Final = (
    "Earlier in this chat, what may matter to the newest message (where each comes from in "
    "brackets):\n{{recall}}"
)
DEFAULT_MESSAGE_RECAP_PROMPT: Final = (
    "You keep the notes of a long chat between {{user}} and {{char}}, so that they can be "
    "reminded later of what happened.\n"
    "Write the note for {{name}}'s message: one or two short sentences in the past tense that "
    "say who did what, where and when, keeping every name, number, date, place, object, "
    "promise, decision and change in a relationship it states. Leave out style, quotes, notes "
    "out of character (OOC) and what the earlier messages already said.\n\n"
    "Earlier messages:\n{{context}}\n\n"
    "Message from {{name}}:\n{{message}}\n\n"
    "Answer with the note alone."
)
DEFAULT_MESSAGE_BATCH_PROMPT: Final = (
    "You keep the notes of a long chat between {{user}} and {{char}}. Before these messages: "
    "{{earlier}}\n\n"
    "{{messages}}\n\n"
    "For each of the {{count}} messages above, write one line: its number in square brackets, "
    "then one short past-tense sentence saying who did what, where and when, keeping every "
    "name, number, date, place, object, promise and decision the message states. When a "
    "message opens a new scene (the time, the place or the situation changes, or a new "
    "conversation starts after a pause), write NEW SCENE: after its number. Nothing else: no "
    "quotes, no comments, no notes out of character (OOC), no lines of your own."
)
DEFAULT_SCENE_RECAP_PROMPT: Final = (
    "One scene ({{name}}; when and where: {{when}}) of a long chat between {{user}} and "
    "{{char}}, as {{source}}:\n\n{{messages}}\n\n"
    "Recap the scene in at most {{max_tokens}} tokens: plain past-tense sentences saying who "
    "did what, where and when (the day and place first if known), keeping every name, number, "
    "date, place, object, promise, decision and change in a relationship. Answer with the "
    "recap alone."
)
DEFAULT_RUNNING_RECAP_PROMPT: Final = (
    "Here are the oldest lines of the running memory of a long chat, one line per scene, "
    "oldest first. The memory has grown too long: rewrite these lines as at most "
    "{{max_tokens}} tokens (the newer lines stay as they are). Shorten the oldest most and "
    "merge lines if you must; keep each line's day and place, and the names, numbers, dates, "
    "places, debts, promises, decisions and relationships that still matter. Answer with the "
    'lines alone, each starting with "- ".\n\n{{previous}}'
)
DEFAULT_SCENE_BREAK_PROMPT: Final = (
    "Below are numbered messages of a chat (some shown as a short note). A scene ends where "
    "the place, the time or the situation clearly changes, or a conversation ends and another "
    "starts later. Give the number of every message, from {{earliest}} to {{latest}}, that is "
    "the LAST message of a scene (at least {{minimum}} messages apart; none if no scene ends). "
    "Answer with JSON only: "
    '{"scene_breaks_at": [<numbers>], "reason": "<a few words>"}.\n\n{{messages}}'
)

Position = Literal[-1, 0, 1, 2]
Role = Literal[0, 1, 2]
POSITION_NAMES: Final = {-1: "none", 0: "in prompt", 1: "in chat", 2: "before prompt"}
ROLE_NAMES: Final = {0: "system", 1: "user", 2: "assistant"}

_Depth = Annotated[int, Field(ge=0, le=10_000)]


class Settings(BaseModel):
    """All of autorecap's settings with their defaults (SPEC-NOTES §5)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True)

    # --- enabling memory (global; seed 002, chat_enabled()) ---
    default_chat_enabled: bool = Field(True, description="Memory is on in chats with no toggle.")
    use_global_toggle_state: bool = Field(
        False, description="One switch for every chat (global_toggle_state) instead of per chat."
    )
    global_toggle_state: bool = Field(True, description="The global switch, when it is used.")
    chats_enabled: dict[str, bool] = Field(
        default_factory=dict, description="Per-chat switches: chat id -> on/off."
    )
    disabled_group_characters: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Group id -> character keys whose messages are left out of memory.",
    )
    # --- which messages count (seed 002, check_message_exclusion) ---
    include_user_messages: bool = Field(True, description="Recap the user's messages.")
    include_system_messages: bool = Field(True, description="Recap hidden/system messages.")
    include_narrator_messages: bool = Field(True, description="Recap narrator messages.")
    message_length_threshold: int = Field(
        0, ge=0, description="Messages shorter than this many tokens are not recapped."
    )
    # --- the short-term token budget (seed 003) ---
    message_recap_context_limit: int = Field(
        10, ge=0, description="Short-term memory budget: percent of context_size, or tokens."
    )
    message_recap_context_type: Literal["percent", "absolute"] = Field(
        "percent", description="How message_recap_context_limit is read."
    )
    context_size: int = Field(8192, ge=256, le=10_000_000, description="Context size in tokens.")
    tokenizer: Literal["cl100k", "o200k", "llama3", "qwen3", "bytes"] = Field(
        "cl100k", description="Tokenizer for every count ('bytes' is SillyTavern's estimate)."
    )
    # --- the running scene recap injection (seeds 000-002) ---
    running_scene_recap_position: Position = Field(
        2, description="-1 none, 0 in prompt (after main), 1 in chat (at depth), 2 before prompt."
    )
    running_scene_recap_depth: _Depth = Field(2, description="Depth for position 1 (in chat).")
    running_scene_recap_role: Role = Field(0, description="0 system, 1 user, 2 assistant.")
    running_scene_recap_scan: bool = Field(False, description="Let World Info scan the recap.")
    running_scene_recap_template: str = Field(
        DEFAULT_RUNNING_TEMPLATE, description="Injection text; {{running_recap}} is the recap."
    )
    running_scene_recap_exclude_latest: int = Field(
        1, ge=0, description="Latest scenes left out of the running recap until later."
    )
    running_scene_recap_max_tokens: int = Field(
        2000, ge=50, description="Cap on the running recap's length in tokens."
    )
    # --- the short-term message recap injection (SPEC-NOTES §4.4; off by default) ---
    message_recap_injection_enabled: bool = Field(
        False, description="Also inject the included message recaps."
    )
    message_recap_template: str = Field(
        DEFAULT_MESSAGE_TEMPLATE, description="Injection text; {{memories}} is the recaps."
    )
    message_recap_position: Position = Field(1, description="Like running_scene_recap_position.")
    message_recap_depth: _Depth = Field(4, description="Depth for position 1 (in chat).")
    message_recap_role: Role = Field(0, description="0 system, 1 user, 2 assistant.")
    message_recap_scan: bool = Field(False, description="Let World Info scan the recaps.")
    # --- the long-term tier: message recaps the user pinned (seed 003; off by default) ---
    long_term_enabled: bool = Field(
        False,
        description="Inject the recaps of the messages you pinned (remember), in their own slot.",
    )
    long_term_max_tokens: int = Field(
        500, ge=0, le=20_000, description="Longest long-term injection (the newest pins kept)."
    )
    long_term_template: str = Field(
        DEFAULT_LONG_TERM_TEMPLATE, description="Injection text; {{memories}} is the pinned recaps."
    )
    long_term_position: Position = Field(0, description="Like running_scene_recap_position.")
    long_term_depth: _Depth = Field(2, description="Depth for position 1 (in chat).")
    long_term_role: Role = Field(0, description="0 system, 1 user, 2 assistant.")
    long_term_scan: bool = Field(False, description="Let World Info scan the pinned recaps.")
    # --- the combined recap: every message recap merged into one narrative (off by default) ---
    combined_recap_enabled: bool = Field(
        False,
        description="Merge the message recaps into one narrative (versioned) and inject it.",
    )
    combined_recap_max_tokens: int = Field(
        1000, ge=50, le=20_000, description="Longest combined recap in tokens."
    )
    combined_recap_template: str = Field(
        DEFAULT_COMBINED_TEMPLATE,
        description="Injection text; {{combined_recap}} is the combined recap.",
    )
    combined_recap_position: Position = Field(2, description="Like running_scene_recap_position.")
    combined_recap_depth: _Depth = Field(2, description="Depth for position 1 (in chat).")
    combined_recap_role: Role = Field(0, description="0 system, 1 user, 2 assistant.")
    combined_recap_scan: bool = Field(False, description="Let World Info scan the recap.")
    combined_recap_prompt: str = Field(
        DEFAULT_COMBINED_RECAP_PROMPT,
        description="Prompt to merge the message recaps: {{recaps}}, {{max_tokens}}.",
    )
    # --- the recall tier: past pieces the newest message asks about ---
    recall_enabled: bool = Field(
        True,
        description="Before each generation, bring back the hidden messages, message recaps and "
        "scene recaps that best match the newest user message (and the last reply).",
    )
    recall_max_tokens: int = Field(
        500, ge=0, le=20_000, description="Longest recall injection in tokens."
    )
    recall_template: str = Field(
        DEFAULT_RECALL_TEMPLATE, description="Injection text; {{recall}} is the recalled pieces."
    )
    recall_position: Position = Field(1, description="Like running_scene_recap_position.")
    recall_depth: _Depth = Field(
        1, description="Depth for position 1 (in chat); 1: just before the newest message."
    )
    recall_role: Role = Field(0, description="0 system, 1 user, 2 assistant.")
    recall_scan: bool = Field(False, description="Let World Info scan the recalled pieces.")
    # --- auto-hide and scenes (seed 003) ---
    auto_hide_scene_count: int = Field(
        2, ge=-1, description="Keep the last N scenes visible; 0 hides all, -1 turns it off."
    )
    auto_hide_only_recapped: bool = Field(
        True,
        description="Auto-hide hides no message past the last scene in the current running "
        "recap, so that what is hidden is always in the memory (off: the seeds' rule alone).",
    )
    auto_scene_break_on_load: bool = Field(False, description="Detect scene breaks on load.")
    auto_scene_break_on_new_message: bool = Field(
        True, description="Detect scene breaks as messages arrive."
    )
    auto_scene_break_message_offset: int = Field(
        2, ge=0, description="Newest messages left unchecked by scene detection."
    )
    auto_scene_break_minimum_scene_length: int = Field(
        10,
        ge=1,
        description="Fewest messages in a scene, except before a session that starts after "
        "three hours of silence (a texting chat's sessions are often a few messages).",
    )
    scene_max_messages: int = Field(
        60,
        ge=2,
        le=100_000,
        description="A scene with no break found closes after this many messages (at its "
        "likeliest point), so that memory never waits for a break that does not come.",
    )
    scene_max_tokens: int = Field(
        6000,
        ge=200,
        description="...or once its messages hold this many tokens, so that a scene always "
        "fits the recap model's input.",
    )
    scene_break_detection: Literal["cues", "llm"] = Field(
        "cues",
        description="How breaks are found: the offline cues (any backend), or the cues and "
        "the LLM (recap_backend openai).",
    )
    # --- making recaps (issue: recap backends) ---
    recap_backend: Literal["offline", "openai"] = Field(
        "offline", description="Who writes recaps: the offline engine, or an OpenAI-compatible LLM."
    )
    llm_base_url: str = Field(
        "http://127.0.0.1:8080/v1", description="Base URL of the OpenAI-compatible server."
    )
    llm_model: str = Field("", description="Model name sent to the server ('' lets it choose).")
    llm_api_key_env: str = Field(
        "OPENAI_API_KEY", description="Environment variable that holds the API key (if any)."
    )
    llm_temperature: float = Field(0.3, ge=0, le=2, description="Sampling temperature.")
    llm_max_tokens: int = Field(400, ge=1, description="Most tokens one LLM answer may use.")
    llm_timeout_s: float = Field(120, gt=0, description="Seconds to wait for one LLM answer.")
    llm_concurrency: int = Field(
        4, ge=1, le=64, description="LLM calls made at once for message recaps."
    )
    llm_retries: int = Field(
        3, ge=0, le=20, description="Retries of one LLM call on 429, 5xx and timeouts."
    )
    message_recap_prompt: str = Field(
        DEFAULT_MESSAGE_RECAP_PROMPT,
        description="Prompt for a message recap: {{message}}, {{name}}, {{context}}, {{user}}, "
        "{{char}}.",
    )
    message_batch_prompt: str = Field(
        DEFAULT_MESSAGE_BATCH_PROMPT,
        description="Prompt for the recaps of several messages in one call: {{messages}} "
        "(numbered), {{count}}, {{earlier}}, {{user}}, {{char}}.",
    )
    llm_batch_tokens: int = Field(
        3000,
        ge=0,
        le=100_000,
        description="Messages recapped together in one LLM call, up to this many tokens of "
        "them (0: one message per call).",
    )
    llm_own_recap_tokens: int = Field(
        24,
        ge=0,
        le=1000,
        description="A message of at most this many tokens is its own recap, with no LLM call "
        "(0: every message is asked).",
    )
    llm_answer_retries: int = Field(
        2,
        ge=0,
        le=10,
        description="Retries when an LLM answer is not a recap (empty, the prompt's own labels, "
        "the message copied back); then the message keeps the error.",
    )
    skip_unused_message_recaps: bool = Field(
        False,
        description="Make no message recaps while nothing injects them "
        "(message_recap_injection_enabled off): fewer LLM calls; scenes are then recapped from "
        "their messages.",
    )
    message_recap_prefill: str = Field(
        "", description="Start of the LLM's answer (an assistant prefill), kept as 'prefill'."
    )
    message_recap_context_messages: int = Field(
        3, ge=0, le=50, description="Earlier messages shown with the one being recapped."
    )
    message_recap_max_tokens: int = Field(
        80, ge=8, le=2000, description="Longest message recap in tokens (enforced offline)."
    )
    scene_recap_prompt: str = Field(
        DEFAULT_SCENE_RECAP_PROMPT,
        description="Prompt for a scene recap: {{messages}}, {{name}}, {{when}}, {{source}}, "
        "{{user}}, {{char}}, {{max_tokens}}.",
    )
    scene_recap_max_tokens: int = Field(
        250, ge=20, le=4000, description="Longest scene recap in tokens."
    )
    running_recap_prompt: str = Field(
        DEFAULT_RUNNING_RECAP_PROMPT,
        description="Prompt to condense the running recap's oldest lines when a new scene's "
        "line does not fit (the newest lines and the new scene's line stay as they are): "
        "{{previous}} (the oldest lines), {{max_tokens}}, and for context {{scene}} and {{name}} "
        "(the new scene's recap and name).",
    )
    scene_break_prompt: str = Field(
        DEFAULT_SCENE_BREAK_PROMPT,
        description="Prompt to find scene breaks: {{messages}}, {{earliest}}, {{latest}}, "
        "{{minimum}}.",
    )
    scene_break_retries: int = Field(
        2, ge=0, le=10, description="Retries when a scene-break answer is invalid."
    )
    # --- jobs and timing ---
    max_retries: int = Field(5, ge=0, le=100, description="Retries of a failing recap job.")
    save_debounce_ms: int = Field(1000, ge=0, description="Debounce of chat saves (seed 004).")
    refresh_debounce_ms: int = Field(300, ge=0, description="Debounce of memory refreshes.")


SETTING_NAMES: Final[tuple[str, ...]] = tuple(Settings.model_fields)
GLOBAL_KEYS: Final = frozenset(
    {"use_global_toggle_state", "global_toggle_state", "chats_enabled", "disabled_group_characters"}
)
"""Settings that belong to the installation, not to a profile."""


class SettingsError(AutorecapError):
    """A setting name or value that autorecap does not accept. `field` names the setting at
    fault, when there is one (the REST API's error `field`)."""

    http_status = 422

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def allowed_values(key: str) -> str:
    """What a setting accepts, in words ("one of: percent, absolute", "a whole number >= 0")."""
    field = _field(key)
    annotation = field.annotation
    if get_origin(annotation) is Literal:
        choices = ", ".join(str(v) for v in get_args(annotation))
        return f"one of: {choices}"
    if annotation is bool:
        return "true or false"
    if annotation in (int, float):
        kind = "a whole number" if annotation is int else "a number"
        low = next((m.ge for m in field.metadata if getattr(m, "ge", None) is not None), None)
        above = next((m.gt for m in field.metadata if getattr(m, "gt", None) is not None), None)
        high = next((m.le for m in field.metadata if getattr(m, "le", None) is not None), None)
        if low is not None and high is not None:
            return f"{kind} from {low} to {high}"
        if low is not None:
            return f"{kind} >= {low}"
        if above is not None:
            return f"{kind} > {above}"
        return kind
    if annotation is str:
        return "text"
    args = get_args(annotation)
    if get_origin(annotation) is dict and len(args) == 2:
        if args[1] is bool:
            return 'a JSON object of true/false values ({"chat id": false})'
        if get_origin(args[1]) is list:
            return 'a JSON object of lists of names ({"group id": ["Name"]})'
    return "a JSON object"


def validate_setting(key: str, value: Any) -> Any:
    """Check one value for one setting; return it converted to the setting's type."""
    _field(key)
    try:
        probe = Settings.model_validate({key: value})
    except ValidationError as error:
        raise SettingsError(
            f"setting {key!r} must be {allowed_values(key)} (got {value!r})", field=key
        ) from _first(error)
    return getattr(probe, key)


def parse_setting_value(key: str, text: str) -> Any:
    """Read a value typed on the command line (`true`, `12`, `percent`, `{"a": 1}`)."""
    field = _field(key)
    value: Any = text
    if field.annotation is bool:
        lowered = text.strip().lower()
        truthy = {"true", "on", "yes", "1"}
        falsy = {"false", "off", "no", "0"}
        if lowered in truthy | falsy:
            value = lowered in truthy
    elif field.annotation is not str:
        try:
            value = json.loads(text)
        except ValueError:
            value = text
    return validate_setting(key, value)


def make_settings(values: dict[str, Any]) -> Settings:
    """Build settings from stored values, naming the first bad one if there is one."""
    unknown = [key for key in values if key not in Settings.model_fields]
    if unknown:
        raise SettingsError(
            f"unknown setting {unknown[0]!r}: see `autorecap settings` for the list",
            field=unknown[0],
        )
    for key, value in values.items():
        validate_setting(key, value)
    return Settings.model_validate(values)


def require_setting(key: str) -> None:
    """Raise `SettingsError` (with a suggestion) unless `key` names a setting."""
    _field(key)


def chat_enabled(settings: Settings, chat_id: str) -> bool:
    """Seed 002's `chat_enabled()`: the global switch when in use, else the chat's own switch,
    else `default_chat_enabled`."""
    if settings.use_global_toggle_state:
        return settings.global_toggle_state
    state = settings.chats_enabled.get(chat_id)
    return settings.default_chat_enabled if state is None else state


def _field(key: str) -> Any:
    field = Settings.model_fields.get(key)
    if field is None:
        close = difflib.get_close_matches(key, SETTING_NAMES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SettingsError(
            f"unknown setting {key!r}{hint}: see `autorecap settings` for the list", field=key
        )
    return field


def _first(error: ValidationError) -> Exception | None:
    errors = error.errors()
    return ValueError(errors[0]["msg"]) if errors else None
