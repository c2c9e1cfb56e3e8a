"""`remember` and `combined`: the seeds' other tiers of one chat, long-term memory (the
message recaps the user pins) and the combined recap (every message recap merged into one)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from autorecap.autosave import load_target
from autorecap.cli._app import (
    ChatArgument,
    DbOption,
    LenientOption,
    app,
    command_profiles,
    command_store,
    err,
    out,
)
from autorecap.core import combined
from autorecap.core.data import get_memory
from autorecap.core.names import character_key_of
from autorecap.core.pins import is_pinned, pinned_indexes, set_pinned
from autorecap.core.tokens import get_counter
from autorecap.errors import AutorecapError
from autorecap.recap.backends import make_backend
from autorecap.recap.combined_recap import update_combined_recap
from autorecap.stfiles.jsonl import write_chat

if TYPE_CHECKING:
    from autorecap.core.model import Chat
    from autorecap.store.base import ChatStore


@app.command(context_settings={"ignore_unknown_options": True})  # "-1" is an index, no option
def remember(
    chat: ChatArgument,
    index: Annotated[
        int | None, typer.Argument(help="Message index (0-based); none: list the pinned ones.")
    ] = None,
    forget: Annotated[bool, typer.Option("--forget", help="Unpin the message.")] = False,
    db: DbOption = None,
    lenient: LenientOption = False,
) -> None:
    """Pin message N's recap in the long-term tier ("remember this"), unpin it (--forget), or
    list the pinned messages. The tier injects them with `long_term_enabled` on."""
    store = command_store(db, existing=True) if db is not None else None
    loaded, from_file = load_target(chat, store=store, lenient=lenient)
    if index is None:
        pinned = pinned_indexes(loaded.messages)
        for i in pinned:
            out.print(f"#{i}: {escape(get_memory(loaded.messages[i]) or loaded.messages[i].text)}")
        if not pinned:
            out.print("no message is pinned")
        return
    count = len(loaded.messages)
    if not 0 <= index < count:
        raise AutorecapError(f"no message {index}: the chat has {count} (0 to {count - 1})")
    message = loaded.messages[index]
    if is_pinned(message) != forget:
        out.print(f"message {index} is {'not ' if forget else ''}pinned already: nothing changed")
    else:
        set_pinned(message, not forget)
        if from_file:
            write_chat(loaded)
        else:
            (store or command_store(None)).save(loaded, changed=[message])
        out.print(f"{'forgotten' if forget else 'pinned'}: message {index}")
    _tier_off_hint(loaded, db, store, "long_term_enabled", "pinned messages are")


@app.command("combined")
def combined_command(
    chat: ChatArgument,
    select: Annotated[
        int | None, typer.Option("--select", help="Inject this version from now on.")
    ] = None,
    make: Annotated[
        bool,
        typer.Option("--make", help="Merge the message recaps into a new version now."),
    ] = False,
    db: DbOption = None,
    lenient: LenientOption = False,
) -> None:
    """The combined recap (every message recap merged into one narrative, injected with
    `combined_recap_enabled`): list its versions, select one, or make one now (with the chat's
    recap backend)."""
    store = command_store(db, existing=True) if db is not None else None
    loaded, from_file = load_target(chat, store=store, lenient=lenient)
    if make:
        settings = command_profiles(db, store).settings_for(loaded.id, character_key_of(loaded))
        backend = make_backend(settings)
        failures: list[str] = []
        made = update_combined_recap(
            loaded,
            backend,
            settings,
            get_counter(settings.tokenizer),
            now_ms=int(time.time() * 1000),
            failures=failures,
            force=True,
        )
        backend.close()
        if failures:
            raise AutorecapError(failures[0])
        if not made:
            raise AutorecapError("no message has a recap yet: run `autorecap recap` first")
    if select is not None:
        combined.select_version(loaded, select)
    if make or select is not None:
        if from_file:
            write_chat(loaded)
        else:
            (store or command_store(None)).save(loaded, header=True)
    now = combined.current(loaded)
    for version in reversed(combined.versions(loaded)):
        mark = "*" if version is now else " "
        out.print(
            f"{mark} version {version.get('version')}: {version.get('message_count')} recap(s), "
            f"{escape(str(version.get('content', '')))}"
        )
    if now is None:
        out.print("no combined recap yet: `autorecap combined CHAT --make` makes one")
    else:
        _tier_off_hint(loaded, db, store, "combined_recap_enabled", "the combined recap is")


def _tier_off_hint(
    chat: Chat, db: str | None, store: ChatStore | None, setting: str, what: str
) -> None:
    """Say so when the tier a command fills injects nothing for this chat (off by default,
    as in the seeds), and how to turn it on."""
    settings = command_profiles(db, store).settings_for(chat.id, character_key_of(chat))
    if not getattr(settings, setting):
        err.print(
            f"note: {what} not injected while {setting} is off: "
            f"`autorecap settings set {setting} true` turns it on",
            soft_wrap=True,
            markup=False,
        )
