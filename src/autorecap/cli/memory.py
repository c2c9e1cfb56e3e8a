"""`inject`, `refresh`, `versions` and `toggle`: the memory of one chat."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from autorecap.autosave import load_target, target_chat_id
from autorecap.cli._app import (
    ChatArgument,
    DbOption,
    LenientOption,
    app,
    command_profiles,
    command_store,
    err,
    out,
    profiles_at,
    read_text_file,
)
from autorecap.core import running
from autorecap.core.names import cast_of, character_key_of, character_name_of, user_name_of
from autorecap.core.prompt import assemble_chat, assemble_text, history_from_chat
from autorecap.core.recall import set_recall_slot
from autorecap.errors import AutorecapError
from autorecap.profiles import Profiles
from autorecap.session import Session
from autorecap.settings import Settings, SettingsError, make_settings, parse_setting_value

DEFAULT_SYSTEM_PROMPT = (
    "You are {{char}} in an ongoing roleplay with {{user}}. Stay in character, keep to what has "
    "happened so far, and write {{char}}'s next reply."
)

DEFAULT_GROUP_PROMPT = (
    "You play {{cast}} in an ongoing group roleplay with {{user}}. Stay in character, keep to "
    "what has happened so far, and write the next reply of the one who speaks next."
)


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


class Format(StrEnum):
    messages = "messages"
    text = "text"


def _settings_with_overrides(
    profiles: Profiles, chat_id: str, character: str | None, sets: list[str]
) -> Settings:
    base = profiles.settings_for(chat_id, character).model_dump()
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep:
            raise SettingsError(f"--set takes KEY=VALUE, not {item!r}")
        base[key.strip()] = parse_setting_value(key.strip(), value)
    return make_settings(base)


@app.command()
def inject(
    chat: ChatArgument,
    fmt: Annotated[
        Format, typer.Option("--format", help="messages: a JSON list; text: one string.")
    ] = Format.messages,
    system: Annotated[
        Path | None, typer.Option("--system", help="File with the main prompt.")
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", help="KEY=VALUE: a setting for this run only (repeatable)."),
    ] = None,
    reserve: Annotated[int, typer.Option(help="Tokens kept free for the reply.", min=0)] = 0,
    query: Annotated[
        str | None,
        typer.Option(
            "--query",
            help="What the recall tier looks for (turns it on for this run); default: the "
            "chat's newest user message, when recall_enabled is on.",
        ),
    ] = None,
    lenient: LenientOption = False,
    db: DbOption = None,
) -> None:
    """Print the prompt SillyTavern would send for this chat, with the memory injected.

    Runs refresh_memory() on a copy in memory: nothing is written. The prompt goes to stdout;
    token counts, which messages were hidden or left out, and what was recalled go to stderr.
    """
    if query is not None and not query.strip():
        raise AutorecapError(
            "--query is empty: give the text recall looks for, or leave --query out to use "
            "the newest user message"
        )
    store = command_store(db, existing=True) if db is not None else None
    loaded, _ = load_target(chat, store=store, lenient=lenient)
    settings = _settings_with_overrides(
        command_profiles(db, store), loaded.id, character_key_of(loaded), overrides or []
    )
    if query is not None:
        settings = settings.model_copy(update={"recall_enabled": True})
    session = Session(loaded, settings=settings)
    if query is not None and session.enabled:
        text, session.last_recall = session.search.recall(settings, session.counter, query)
        set_recall_slot(session.slots, text, settings)
    user, char = user_name_of(loaded), character_name_of(loaded)
    cast = cast_of(loaded)
    group = loaded.is_group or len(cast) > 1
    if system is not None:
        main_prompt = read_text_file(system, "the system prompt")
    else:
        main_prompt = DEFAULT_GROUP_PROMPT if group else DEFAULT_SYSTEM_PROMPT
    main_prompt = (
        main_prompt.replace("{{cast}}", _listed(cast))
        .replace("{{char}}", char)
        .replace("{{user}}", user)
    )
    # Group chats name the speaker inside the content for chat completion; text lines carry
    # the name already.
    history = history_from_chat(loaded.messages, group=group and fmt is Format.messages)
    if fmt is Format.messages:
        result = assemble_chat(
            main_prompt,
            history,
            session.slots,
            session.counter,
            context_size=settings.context_size,
            reserve=reserve,
        )
        print(json.dumps(result.messages, ensure_ascii=False, indent=2))
    else:
        result = assemble_text(
            main_prompt,
            history,
            session.slots,
            session.counter,
            user_name=user,
            char_name=char,
            context_size=settings.context_size,
            reserve=reserve,
        )
        print(result.text)
    memory = session.last_result
    err.print(
        f"[bold]{escape(loaded.id)}[/]: {result.tokens} tokens of {settings.context_size} "
        f"({result.injected_tokens} injected, {result.history_tokens} history; "
        f"tokenizer {settings.tokenizer})",
        soft_wrap=True,
    )
    err.print(
        f"memory {'on' if session.enabled else 'off'}; injected: "
        f"{', '.join(result.injected) or 'nothing'}; "
        f"{len(result.included)} message(s) in the prompt, {len(result.hidden)} hidden, "
        f"{len(result.dropped)} left out for room; "
        f"{len(memory.included) if memory else 0} recap(s) in short-term memory",
        soft_wrap=True,
    )
    if settings.recall_enabled:
        recalled = ", ".join(f"[{p.source}]" for p in session.last_recall) or "nothing"
        if not session.last_recall and not result.hidden:
            recalled += (
                " (recall looks in what the prompt no longer shows: no message is hidden yet; "
                f"`autorecap recap {chat}` recaps the chat and hides its older scenes)"
            )
        err.print(f"recalled: {escape(recalled)}", soft_wrap=True)
    if result.hidden:
        err.print(f"hidden: {_ranges(result.hidden)}", soft_wrap=True)
    if result.dropped:
        err.print(f"left out: {_ranges(result.dropped)}", soft_wrap=True)


def _ranges(indexes: list[int]) -> str:
    parts: list[str] = []
    start = prev = None
    for index in sorted(indexes):
        if start is None:
            start = prev = index
        elif prev is not None and index == prev + 1:
            prev = index
        else:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = index
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(parts)


@app.command()
def refresh(chat: ChatArgument, db: DbOption = None, lenient: LenientOption = False) -> None:
    """Run refresh_memory() and save what it changed (flags, auto-hide) into the chat:
    the seeds' /recap-refresh-memory."""
    store = command_store(db, existing=True) if db is not None else None
    with Session(
        chat,
        store=store,
        profiles=command_profiles(db, store),
        save_debounce_ms=60_000,
        lenient=lenient,
    ) as session:
        result = session.last_result
        assert result is not None
        hidden = sum(c.end - c.start + 1 for c in result.hide_changes if c.hidden)
        shown = sum(c.end - c.start + 1 for c in result.hide_changes if not c.hidden)
        out.print(
            f"[bold]{escape(session.id)}[/]: memory {'on' if result.enabled else 'off'}; "
            f"{len(result.included)} recap(s) in short-term memory; "
            f"{result.flags_written} flag(s) changed; {hidden} message(s) hidden, "
            f"{shown} unhidden; running recap: "
            f"{len(result.text)} characters injected",
            soft_wrap=True,
        )
        for warning in session.warnings:
            err.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)


@app.command()
def versions(
    chat: ChatArgument,
    select: Annotated[
        int | None, typer.Option("--select", help="Inject version N from now on.")
    ] = None,
    edit: Annotated[
        Path | None, typer.Option("--edit", help="Add a version with this file's text.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the versions as JSON.")] = False,
    db: DbOption = None,
    lenient: LenientOption = False,
) -> None:
    """List the running recap's versions; select one, or add an edited one."""
    if select is not None and edit is not None:
        raise AutorecapError("use --select or --edit, not both")
    store = command_store(db, existing=True) if db is not None else None
    # Check everything first, on a read-only copy: a command that fails writes nothing.
    loaded, _ = load_target(chat, store=store, lenient=lenient)
    probe = Session(
        loaded,
        settings=command_profiles(db, store).settings_for(loaded.id, character_key_of(loaded)),
    )
    if select is None and edit is None:  # listing reads; it never writes
        _print_versions(probe, as_json)
        return
    text = ""
    if select is not None:
        running.select_version(loaded, select)  # raises for an unknown version
    elif edit is not None:
        text = read_text_file(edit, "the recap").strip()
        if not text:
            raise AutorecapError(f'"{edit}" is empty: write the recap text into it')
        running.edit_version(loaded, text, now_ms=0)  # raises when there is no recap yet
    with Session(
        chat,
        store=store,
        profiles=command_profiles(db, store),
        save_debounce_ms=60_000,
        lenient=lenient,
    ) as session:
        if select is not None:
            session.select_version(select)
            out.print(f"version {select} is now injected")
        else:
            version = session.edit_running_recap(text)
            out.print(f"added version {version['version']}; it is now injected")


def _print_versions(session: Session, as_json: bool) -> None:
    all_versions = session.running_versions()
    current = running.current(session.chat)
    if as_json:
        print(json.dumps(all_versions, ensure_ascii=False, indent=2))
        return
    if not all_versions:
        out.print("no running recap yet: `autorecap recap CHAT` makes one")
        return
    table = Table(title=f"running recap versions of {session.id}")
    for column in ("version", "when", "scenes", "ends at", "tokens", "text"):
        table.add_column(column)
    for version in reversed(all_versions):
        number = version.get("version")
        marker = " ◀ injected" if current is version else ""
        stamp = version.get("timestamp")
        when = (
            datetime.fromtimestamp(stamp / 1000).strftime("%Y-%m-%d %H:%M")
            if isinstance(stamp, int | float)
            else ""
        )
        content = str(version.get("content", ""))
        table.add_row(
            f"{number}{marker}",
            when,
            str(version.get("scene_count", "")),
            str(version.get("new_scene_index", "")),
            str(session.counter.count(content)),
            escape(" ".join(content.split())[:120]),
        )
    out.print(table)


class ToggleState(StrEnum):
    on = "on"
    off = "off"
    per_chat = "per-chat"


@app.command()
def toggle(
    state: Annotated[ToggleState, typer.Argument(help="on, off, or (with --global) per-chat.")],
    chat: Annotated[
        str | None, typer.Argument(help="A chat file or stored chat id (not with --global).")
    ] = None,
    global_: Annotated[
        bool, typer.Option("--global", help="Switch memory for every chat at once.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Turn memory on or off for one chat, or for all chats (--global on|off|per-chat)."""
    profiles = profiles_at(db)
    if global_:
        if chat is not None:
            raise AutorecapError("--global switches every chat: name no chat with it")
        if state is ToggleState.per_chat:
            profiles.set("use_global_toggle_state", False)
            out.print("memory follows each chat's own switch")
        else:
            profiles.set("use_global_toggle_state", True)
            profiles.set("global_toggle_state", state is ToggleState.on)
            out.print(f"memory is {state.value} for every chat")
        return
    if chat is None:
        raise AutorecapError("name the chat to switch, or use --global")
    if state is ToggleState.per_chat:
        raise AutorecapError("per-chat goes with --global; for one chat use on or off")
    chat_id = target_chat_id(chat)
    profiles.set_chat_enabled(chat_id, state is ToggleState.on)
    note = ""
    if profiles.get("use_global_toggle_state"):
        note = (
            " (the global switch is in use, so this takes effect with `toggle --global per-chat`)"
        )
    out.print(f"memory is {state.value} for {escape(chat_id)!r}{escape(note)}", soft_wrap=True)
