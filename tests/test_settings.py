"""Settings (SPEC-NOTES §5), chat_enabled() (seed 002), profiles and the settings file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autorecap.profiles import DEFAULT_PROFILE, Profiles
from autorecap.settings import (
    DEFAULT_RUNNING_TEMPLATE,
    SETTING_NAMES,
    Settings,
    SettingsError,
    allowed_values,
    chat_enabled,
    parse_setting_value,
    validate_setting,
)

SPEC_DEFAULTS: dict[str, Any] = {
    "default_chat_enabled": True,
    "use_global_toggle_state": False,
    "global_toggle_state": True,
    "chats_enabled": {},
    "disabled_group_characters": {},
    "include_user_messages": True,
    "include_system_messages": True,
    "include_narrator_messages": True,
    "message_length_threshold": 0,
    "message_recap_context_limit": 10,
    "message_recap_context_type": "percent",
    "context_size": 8192,
    "tokenizer": "cl100k",
    "running_scene_recap_position": 2,
    "running_scene_recap_depth": 2,
    "running_scene_recap_role": 0,
    "running_scene_recap_scan": False,
    "running_scene_recap_exclude_latest": 1,
    "running_scene_recap_max_tokens": 2000,
    "message_recap_injection_enabled": False,
    "message_recap_position": 1,
    "message_recap_depth": 4,
    "message_recap_role": 0,
    "message_recap_scan": False,
    "auto_hide_scene_count": 2,
    "auto_scene_break_on_load": False,
    "auto_scene_break_on_new_message": True,
    "auto_scene_break_message_offset": 2,
    "auto_scene_break_minimum_scene_length": 10,
    "max_retries": 5,
    "save_debounce_ms": 1000,
    "refresh_debounce_ms": 300,
}


def test_every_setting_of_spec_notes_5_has_its_default() -> None:
    settings = Settings()
    for key, value in SPEC_DEFAULTS.items():
        assert getattr(settings, key) == value, key
    assert "{{running_recap}}" in settings.running_scene_recap_template
    assert settings.running_scene_recap_template == DEFAULT_RUNNING_TEMPLATE
    assert settings.running_scene_recap_template.startswith("# Story Memory")
    assert "{{memories}}" in settings.message_recap_template
    assert set(SPEC_DEFAULTS) | {"running_scene_recap_template", "message_recap_template"} <= set(
        SETTING_NAMES
    )


def test_every_setting_is_documented() -> None:
    for key in SETTING_NAMES:
        assert Settings.model_fields[key].description, key


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("message_recap_context_type", "percentage", "must be one of: percent, absolute"),
        ("running_scene_recap_position", 3, "must be one of: -1, 0, 1, 2"),
        ("running_scene_recap_role", "system", "must be one of: 0, 1, 2"),
        ("tokenizer", "gpt2", "must be one of: cl100k, o200k, llama3, qwen3, bytes"),
        ("context_size", 100, "must be a whole number from 256 to 10000000"),
        ("auto_hide_scene_count", -2, "must be a whole number >= -1"),
        ("include_user_messages", "maybe", "must be true or false"),
        ("chats_enabled", [1], 'must be a JSON object of true/false values ({"chat id": false})'),
        ("running_scene_recap_template", 5, "must be text"),
    ],
)
def test_a_bad_value_names_the_setting_and_the_allowed_values(
    key: str, value: Any, expected: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        validate_setting(key, value)
    assert str(caught.value) == f"setting {key!r} {expected} (got {value!r})"


def test_an_unknown_setting_suggests_the_closest() -> None:
    with pytest.raises(SettingsError, match=r"unknown setting 'context_sise' \(did you mean"):
        validate_setting("context_sise", 1)


def test_command_line_values_are_parsed_by_type() -> None:
    assert parse_setting_value("include_user_messages", "off") is False
    assert parse_setting_value("include_user_messages", "TRUE") is True
    assert parse_setting_value("context_size", "4096") == 4096
    assert parse_setting_value("running_scene_recap_position", "-1") == -1
    assert parse_setting_value("chats_enabled", '{"c1": false}') == {"c1": False}
    assert parse_setting_value("running_scene_recap_template", "42") == "42"
    with pytest.raises(SettingsError, match="whole number"):
        parse_setting_value("context_size", "big")


def test_allowed_values_wording() -> None:
    assert allowed_values("running_scene_recap_depth") == "a whole number from 0 to 10000"
    assert allowed_values("message_length_threshold") == "a whole number >= 0"
    assert allowed_values("llm_timeout_s") == "a number > 0"
    assert allowed_values("chats_enabled").startswith("a JSON object of true/false values")
    assert allowed_values("llm_temperature") == "a number from 0 to 2"


# seed 002: chat_enabled(): the global state wins when in use, else per chat, else default
@pytest.mark.parametrize(
    ("values", "chat", "expected"),
    [
        ({"use_global_toggle_state": True, "global_toggle_state": True}, "chat-123", True),
        (
            {
                "use_global_toggle_state": True,
                "global_toggle_state": False,
                "chats_enabled": {"chat-123": True},
            },
            "chat-123",
            False,
        ),
        ({"chats_enabled": {"chat-123": False}}, "chat-123", False),
        ({"chats_enabled": {"chat-123": False}}, "chat-new", True),
        ({"default_chat_enabled": False}, "chat-new", False),
        ({"default_chat_enabled": False, "chats_enabled": {"chat-new": True}}, "chat-new", True),
    ],
)
def test_chat_enabled_rule_of_seed_002(values: dict[str, Any], chat: str, expected: bool) -> None:
    assert chat_enabled(Settings.model_validate(values), chat) is expected


# --- profiles (seed 002, auto_load_profile) ----------------------------------------------------


def test_profiles_start_with_default_and_save_to_autorecap_home(home: Path) -> None:
    profiles = Profiles()
    assert profiles.path == home / "settings.json"
    assert profiles.profile_names() == [DEFAULT_PROFILE]
    assert profiles.settings_for("any") == Settings()
    profiles.set("context_size", 4096)
    saved = json.loads((home / "settings.json").read_text())
    assert saved["profiles"]["Default"] == {"context_size": 4096}
    assert Profiles().get("context_size") == 4096


def test_chat_binding_then_character_binding_then_active_profile(home: Path) -> None:
    profiles = Profiles()
    profiles.set("context_size", 4096)
    profiles.save_profile("Long")
    profiles.set("context_size", 32768, profile="Long")
    profiles.save_profile("Terse")
    profiles.set("auto_hide_scene_count", 0, profile="Terse")
    profiles.bind("Long", character="Mira.png")
    profiles.bind("Terse", chat="chat-7")
    fresh = Profiles()
    assert fresh.profile_for("chat-7", "Mira.png") == "Terse"
    assert fresh.profile_for("chat-8", "Mira.png") == "Long"
    assert fresh.profile_for("chat-9", "Bram.png") == DEFAULT_PROFILE
    assert fresh.settings_for("chat-8", "Mira.png").context_size == 32768
    assert fresh.settings_for("chat-9").context_size == 4096
    fresh.load_profile("Long")
    assert fresh.settings_for("chat-9").context_size == 32768
    assert fresh.settings_for("chat-7").auto_hide_scene_count == 0


def test_global_settings_apply_whatever_the_profile(home: Path) -> None:
    profiles = Profiles()
    profiles.save_profile("Other")
    profiles.bind("Other", chat="c1")
    profiles.set_chat_enabled("c1", False)
    assert not chat_enabled(profiles.settings_for("c1"), "c1")
    assert chat_enabled(profiles.settings_for("c2"), "c2")
    profiles.set_chat_enabled("c1", None)
    assert chat_enabled(profiles.settings_for("c1"), "c1")
    saved = json.loads((home / "settings.json").read_text())
    assert "chats_enabled" in saved["global"]
    assert "chats_enabled" not in saved["profiles"]["Other"]


def test_delete_profile_drops_bindings_and_falls_back(home: Path) -> None:
    profiles = Profiles()
    profiles.save_profile("Gone")
    profiles.bind("Gone", chat="c1")
    profiles.load_profile("Gone")
    profiles.delete_profile("Gone")
    assert profiles.active_profile == DEFAULT_PROFILE
    assert profiles.profile_for("c1") == DEFAULT_PROFILE
    assert profiles.bindings() == {"chats": {}, "characters": {}}


def test_reset_returns_to_the_default(home: Path) -> None:
    profiles = Profiles()
    profiles.set("tokenizer", "o200k")
    profiles.reset("tokenizer")
    assert profiles.get("tokenizer") == "cl100k"


def test_set_many_checks_every_value_before_saving_any(home: Path) -> None:
    profiles = Profiles()
    with pytest.raises(SettingsError, match="setting 'tokenizer' must be") as caught:
        profiles.set_many({"context_size": 4096, "tokenizer": "gpt2"})
    assert caught.value.field == "tokenizer"
    assert not profiles.path.exists()
    assert Profiles().get("context_size") == 8192
    profiles.set_many({"context_size": 4096, "use_global_toggle_state": True})
    again = Profiles()
    assert again.profile_values("Default") == {"context_size": 4096}
    assert again.get("use_global_toggle_state") is True


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (lambda p: p.delete_profile("Default"), "'Default' profile is the fallback"),
        (lambda p: p.load_profile("Nope"), "no profile named 'Nope': the profiles are Default"),
        (lambda p: p.bind("Default"), "bind a profile to exactly one of"),
        (lambda p: p.save_profile("   "), "a profile name must be 1 to 100 characters"),
        (lambda p: p.set("context_size", "big"), "setting 'context_size' must be"),
        (lambda p: p.get("nope"), "unknown setting 'nope'"),
    ],
)
def test_profile_errors(home: Path, action: Any, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        action(Profiles())


def test_a_broken_settings_file_is_reported_not_overwritten(home: Path) -> None:
    path = home / "settings.json"
    path.write_text("{not json")
    with pytest.raises(SettingsError, match="cannot read the settings file"):
        Profiles()
    assert path.read_text() == "{not json"
    path.write_text(json.dumps({"profiles": {"Default": {"context_size": "huge"}}}))
    with pytest.raises(SettingsError, match="profile 'Default': setting 'context_size'"):
        Profiles()
    path.write_text("[1, 2]")
    with pytest.raises(SettingsError, match="holds no autorecap settings"):
        Profiles()
