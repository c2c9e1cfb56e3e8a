"""`settings`: read and change settings, and manage profiles."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from autorecap.autosave import load_target, target_chat_id
from autorecap.cli._app import DbOption, app, command_profiles, command_store, err, out, profiles_at
from autorecap.core.names import character_key_of
from autorecap.errors import AutorecapError
from autorecap.profiles import Profiles
from autorecap.settings import (
    GLOBAL_KEYS,
    SETTING_NAMES,
    Settings,
    allowed_values,
    parse_setting_value,
)

settings_app = typer.Typer(
    help="Read and change settings (`autorecap settings` lists them all), and manage profiles.",
    no_args_is_help=False,
    invoke_without_command=True,
)
profile_app = typer.Typer(help="Named profiles: save, load, delete, bind to a chat or character.")
settings_app.add_typer(profile_app, name="profile")
app.add_typer(settings_app, name="settings")

_PROFILE = Annotated[
    str | None, typer.Option("--profile", help="Profile to use (default: the active one).")
]


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value


@settings_app.callback()
def settings_list(
    ctx: typer.Context,
    profile: _PROFILE = None,
    chat: Annotated[
        str | None,
        typer.Option(
            "--chat",
            help="Show the settings this chat runs with (a chat file or a stored chat's id).",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """List every setting with its value."""
    if ctx.invoked_subcommand is not None:
        return
    if chat:
        # Bound by its id or by its character, as the chat is opened: read it for both.
        store = command_store(db, existing=True) if db is not None else None
        chat_id, character = target_chat_id(chat), None
        try:
            loaded, _ = load_target(chat, store=store, lenient=True)
            chat_id, character = loaded.id, character_key_of(loaded)
        except AutorecapError:  # a chat to come (the proxy's): its own binding only
            err.print(
                f"no chat {chat!r} to read: its character's profile, if it has one, is not "
                "taken into account",
                soft_wrap=True,
                markup=False,
            )
        profiles = command_profiles(db, store)
        name = profiles.profile_for(chat_id, character)
        current = profiles.settings_for(chat_id, character)
        title = f"settings of chat {chat_id!r} (profile {name!r})"
    else:
        profiles = profiles_at(db)
        name = profile or profiles.active_profile
        current = _settings_of(profiles, name)
        title = f"settings (profile {name!r})"
    defaults = Settings()
    table = Table(title=escape(title))
    table.add_column("setting", no_wrap=True)
    table.add_column("value")
    table.add_column("allowed")
    table.add_column("what it does")
    for key in SETTING_NAMES:
        value = getattr(current, key)
        changed = value != getattr(defaults, key)
        shown = escape(_shown(value))
        table.add_row(
            key + (" [dim](global)[/]" if key in GLOBAL_KEYS else ""),
            f"[bold]{shown}[/]" if changed else shown,
            allowed_values(key),
            Settings.model_fields[key].description or "",
        )
    out.print(table)


def _settings_of(profiles: Profiles, name: str) -> Settings:
    values = {key: profiles.get(key, name) for key in SETTING_NAMES}
    return Settings.model_validate(values)


@settings_app.command("get")
def settings_get(
    key: Annotated[str, typer.Argument(help="Setting name.")],
    profile: _PROFILE = None,
    db: DbOption = None,
) -> None:
    """Print one setting's value (as JSON for anything but text)."""
    out.print(escape(_shown(profiles_at(db).get(key, profile))), soft_wrap=True)


@settings_app.command("set", context_settings={"ignore_unknown_options": True})
def settings_set(
    key: Annotated[str, typer.Argument(help="Setting name.")],
    value: Annotated[str, typer.Argument(help="New value: true/false, a number, text, JSON.")],
    profile: _PROFILE = None,
    db: DbOption = None,
) -> None:
    """Change one setting (validated first: nothing is saved if the value is not allowed)."""
    profiles = profiles_at(db)
    stored = profiles.set(key, parse_setting_value(key, value), profile)
    where = "global" if key in GLOBAL_KEYS else f"profile {profile or profiles.active_profile!r}"
    out.print(f"{key} = {escape(_shown(stored))} ({where})", soft_wrap=True)


@settings_app.command("reset")
def settings_reset(
    key: Annotated[str, typer.Argument(help="Setting name.")],
    profile: _PROFILE = None,
    db: DbOption = None,
) -> None:
    """Put one setting back to its default."""
    profiles = profiles_at(db)
    profiles.reset(key, profile)
    out.print(f"{key} = {escape(_shown(getattr(Settings(), key)))} (default)", soft_wrap=True)


@profile_app.command("list")
def profile_list(db: DbOption = None) -> None:
    """List the profiles, what each changes, and the bindings."""
    profiles = profiles_at(db)
    active = profiles.active_profile
    for name in profiles.profile_names():
        marker = " [green](active)[/]" if name == active else ""
        values = profiles.profile_values(name)
        changes = ", ".join(f"{k}={_shown(v)}" for k, v in sorted(values.items())) or "defaults"
        out.print(f"[bold]{escape(name)}[/]{marker}: {escape(changes)}", soft_wrap=True)
    bindings = profiles.bindings()
    for kind, table in (("chat", bindings["chats"]), ("character", bindings["characters"])):
        for target, name in sorted(table.items()):
            out.print(f"  {kind} {escape(target)!r} uses {escape(name)!r}", soft_wrap=True)


@profile_app.command("save")
def profile_save(
    name: Annotated[str, typer.Argument(help="Profile name.")],
    source: Annotated[
        str | None, typer.Option("--from", help="Copy this profile (default: the active one).")
    ] = None,
    db: DbOption = None,
) -> None:
    """Save a profile: a copy of the active profile's settings (or of --from)."""
    profiles_at(db).save_profile(name, source)
    out.print(f"saved profile {escape(name)!r}")


@profile_app.command("load")
def profile_load(
    name: Annotated[str, typer.Argument(help="Profile name.")], db: DbOption = None
) -> None:
    """Make a profile the active one (used by chats with no profile of their own)."""
    profiles_at(db).load_profile(name)
    out.print(f"active profile: {escape(name)!r}")


@profile_app.command("delete")
def profile_delete(
    name: Annotated[str, typer.Argument(help="Profile name.")], db: DbOption = None
) -> None:
    """Delete a profile and its bindings (not Default)."""
    profiles_at(db).delete_profile(name)
    out.print(f"deleted profile {escape(name)!r}")


_CHAT = Annotated[
    str | None, typer.Option("--chat", help="A chat file or a chat's id (a file's is its name).")
]
_CHARACTER = Annotated[
    str | None, typer.Option("--character", help="A character (its avatar file or name).")
]


@profile_app.command("bind")
def profile_bind(
    name: Annotated[str, typer.Argument(help="Profile name.")],
    chat: _CHAT = None,
    character: _CHARACTER = None,
    db: DbOption = None,
) -> None:
    """Use a profile whenever a chat (or any chat of a character) opens."""
    chat_id = target_chat_id(chat) if chat is not None else None  # a file: by its chat's id
    profiles_at(db).bind(name, chat=chat_id, character=character)
    target = f"chat {chat_id!r}" if chat_id is not None else f"character {character!r}"
    out.print(f"{escape(target)} uses profile {escape(name)!r}")


@profile_app.command("unbind")
def profile_unbind(chat: _CHAT = None, character: _CHARACTER = None, db: DbOption = None) -> None:
    """Remove a chat's or a character's profile."""
    chat_id = target_chat_id(chat) if chat is not None else None
    if profiles_at(db).unbind(chat=chat_id, character=character):
        out.print("binding removed")
    else:
        target = f"chat {chat_id!r}" if chat_id is not None else f"character {character!r}"
        out.print(f"{escape(target)} has no profile of its own: nothing changed")
