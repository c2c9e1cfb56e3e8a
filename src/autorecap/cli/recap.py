"""`recap`, `scenes` and `demo`: making memory."""

from __future__ import annotations

import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

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
    print_failures,
)
from autorecap.cli.llm import (
    ApiKeyEnvOption,
    BackendOption,
    BaseUrlOption,
    ModelOption,
    print_usage,
    warn_if_no_key,
)
from autorecap.core import running
from autorecap.core.data import cleared_recap, get_data, get_memory, update_data
from autorecap.core.names import character_key_of
from autorecap.core.scenes import mark_break, rename_break, scenes, set_visible, unmark_break
from autorecap.core.tokens import get_counter
from autorecap.errors import AutorecapError
from autorecap.jobs.drive import recap_on_queue
from autorecap.jobs.handlers import enqueue_pipeline
from autorecap.jobs.queue import JobQueue
from autorecap.recap.backends import make_backend
from autorecap.recap.pipeline import run_pipeline
from autorecap.session import Session
from autorecap.stfiles.jsonl import write_chat
from autorecap.store import SQLiteStore

if TYPE_CHECKING:
    from autorecap.core.model import Chat
    from autorecap.settings import Settings
    from autorecap.store.base import ChatStore


@app.command()
def recap(
    chat: ChatArgument,
    backend: BackendOption = None,
    base_url: BaseUrlOption = None,
    model: ModelOption = None,
    api_key_env: ApiKeyEnvOption = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write here instead of in place.")
    ] = None,
    force: Annotated[
        bool, typer.Option(help="Redo every message recap, including ones you edited yourself.")
    ] = False,
    lenient: LenientOption = False,
    job_retries: Annotated[
        int,
        typer.Option(
            help="Queue retries of a failing job (each LLM call is already retried llm_retries "
            "times; `autorecap worker` uses max_retries).",
            min=0,
        ),
    ] = 0,
    no_wait: Annotated[
        bool,
        typer.Option(
            "--no-wait", help="Stored chats: only queue the jobs (`autorecap worker` runs them)."
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Recap a chat: message recaps, scene breaks, scene recaps and the running recap, written
    back in SillyTavern's format (in place, or to --output)."""
    store = command_store(db, existing=True) if db is not None else None
    loaded, from_file = load_target(chat, store=store, lenient=lenient)
    stamp = _stamp(loaded.path) if from_file else None
    settings = command_profiles(db, store).settings_for(loaded.id, character_key_of(loaded))
    engine = make_backend(
        settings,
        backend=backend.value if backend else None,
        base_url=base_url,
        model=model,
        api_key_env=api_key_env,
    )
    warn_if_no_key(engine)
    if no_wait:
        if from_file:
            raise AutorecapError(
                "--no-wait needs a stored chat (a worker finds it in the store): "
                "`autorecap import FILE` first"
            )
        queue = JobQueue(store or command_store(None))
        ids = enqueue_pipeline(queue, loaded, settings)
        out.print(f"queued {len(ids)} job(s) for {escape(loaded.id)}; `autorecap worker` runs them")
        return
    settings = settings.model_copy(update={"max_retries": job_retries})
    counter = get_counter(settings.tokenizer)
    started = time.perf_counter()
    if force:
        for message in loaded.messages:  # the queue redoes what has no recap: clear them first
            if get_memory(message) or get_data(message, "error"):
                update_data(message, cleared_recap(message))
    with tempfile.TemporaryDirectory() as folder:
        # The work runs on the job queue: a stored chat's own (persistent: `autorecap worker`
        # resumes it), or for a file a queue in a temporary database for this run.
        work_store = (
            store or command_store(None) if not from_file else SQLiteStore(Path(folder) / "work.db")
        )
        if from_file:
            work_store.import_chat(loaded, chat_id=loaded.id, replace=True)
        elif force:
            work_store.save(loaded, full=True)
        with _progress() as bars:
            tasks: dict[str, TaskID] = {}

            def progress(state: dict[str, tuple[int, int]]) -> None:
                for kind, (finished, total) in state.items():
                    if kind not in tasks:
                        tasks[kind] = bars.add_task(kind.replace("_", " "), total=total)
                    bars.update(tasks[kind], completed=finished, total=total)

            try:
                with _sigterm_interrupts():
                    result, stats = recap_on_queue(
                        work_store, loaded.id, engine, settings, backoff_s=0.5, progress=progress
                    )
            except KeyboardInterrupt:
                _keep_what_is_done(work_store, loaded, from_file, stamp, output)
                raise typer.Exit(130) from None
            finally:
                engine.close()
        result.path = loaded.path  # a file's chat stays a file's chat (running recap id rule)
        Session(result, settings=settings).refresh()  # flags and auto-hide, as SillyTavern does
        if from_file:
            assert loaded.path is not None
            if output is None and _stamp(loaded.path) != stamp:
                raise AutorecapError(
                    f'"{loaded.path}" changed while it was being recapped (SillyTavern saved '
                    "it?): nothing was written; run `autorecap recap` again, or use -o OUT"
                )
            target = write_chat(result, output or loaded.path, backups=0 if output else 1)
        else:
            work_store.save(result, full=True)
            target = (
                write_chat(result, output) if output is not None else Path(f"store:{loaded.id}")
            )
        work_store.close()
    current = running.current(result)
    out.print(
        f"[bold]{escape(loaded.id)}[/]: {stats.message_recaps} message recap(s), "
        f"{stats.breaks_found} new scene break(s), {stats.scene_recaps} scene recap(s), "
        f"{stats.running_versions} running recap version(s); running recap "
        f"{counter.count(str(current.get('content', ''))) if current else 0} tokens; "
        f"{stats.jobs_done} job(s); {time.perf_counter() - started:.1f} s; "
        f"written to {escape(str(target))}",
        soft_wrap=True,
    )
    if engine.usage.calls:
        print_usage(engine, sum(counter.count(m.text) for m in result.messages))
    print_failures(stats.failures)
    if stats.failures:
        if current is None and any(f.startswith("scene recap") for f in stats.failures):
            err.print(
                "no running recap yet: it folds the scenes in order, and waits for a scene "
                "whose recap failed; `autorecap recap` again retries what failed",
                soft_wrap=True,
                markup=False,
            )
        raise typer.Exit(1)
    if current is None:
        _why_no_running_recap(result, settings)


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM stops a recap as Ctrl-C does (what is done is kept), not the process at once."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave SIGTERM as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _keep_what_is_done(
    work_store: ChatStore,
    loaded: Chat,
    from_file: bool,
    stamp: tuple[int, int] | None,
    output: Path | None,
) -> None:
    """After an interrupt: the recaps made so far go into the chat file (a stored chat has
    them already, its other jobs still queued), and how to finish is said."""
    done = work_store.load_chat(loaded.id)
    recaps = sum(1 for m in done.messages if get_memory(m))
    if not from_file:
        err.print(
            f"interrupted: {recaps} message recap(s) of {loaded.id!r} are stored; the rest is "
            "queued (`autorecap worker` or `autorecap recap` again finishes it)",
            soft_wrap=True,
            markup=False,
        )
        return
    assert loaded.path is not None
    if output is None and _stamp(loaded.path) != stamp:
        err.print(
            f'interrupted: "{loaded.path}" changed meanwhile (SillyTavern saved it?): nothing '
            "was written",
            soft_wrap=True,
            markup=False,
        )
        return
    done.path = loaded.path
    target = write_chat(done, output or loaded.path, backups=0 if output else 1)
    err.print(
        f"interrupted: what was done is kept in {target} ({recaps} message recap(s)); "
        "`autorecap recap` again does the rest",
        soft_wrap=True,
        markup=False,
    )


def _why_no_running_recap(chat: Chat, settings: Settings) -> None:
    """Say why a chat recapped without failures has no running recap yet, and when it will."""
    closed = sum(1 for scene in scenes(chat.messages) if scene.closed)
    waiting = settings.running_scene_recap_exclude_latest
    err.print(
        f"no running recap yet: it folds the closed scenes but the newest {waiting} (still in "
        f"the prompt), and this chat has {closed} closed scene(s) of {len(chat.messages)} "
        f"message(s); a scene closes at a scene break, or after {settings.scene_max_messages} "
        "messages at the latest (scene_max_messages)",
        soft_wrap=True,
        markup=False,
    )


def _stamp(path: Path | None) -> tuple[int, int] | None:
    if path is None:
        return None
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description:<16}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    )


class SceneAction(StrEnum):
    list = "list"
    mark = "mark"
    unmark = "unmark"
    rename = "rename"
    hide = "hide"
    show = "show"


@app.command("scenes")
def scenes_command(
    chat: ChatArgument,
    action: Annotated[
        SceneAction,
        typer.Argument(help="list, mark N [NAME], unmark N, rename N NAME, hide N, show N"),
    ] = (SceneAction.list),
    index: Annotated[int | None, typer.Argument(help="Message index (0-based).")] = None,
    name: Annotated[str | None, typer.Argument(help="Scene name (rename, or mark).")] = None,
    db: DbOption = None,
    lenient: LenientOption = False,
) -> None:
    """List a chat's scenes, or mark, unmark, rename, hide or show the scene break at message N
    (a hidden break does not count for auto-hide)."""
    store = command_store(db, existing=True) if db is not None else None
    loaded, from_file = load_target(chat, store=store, lenient=lenient)
    if action is SceneAction.list:
        _print_scenes(loaded)
        return
    if index is None:
        raise AutorecapError(f"`scenes {action.value}` needs a message index")
    count = len(loaded.messages)
    if not 0 <= index < count:
        raise AutorecapError(f"no message {index}: the chat has {count} (0 to {count - 1})")
    message = loaded.messages[index]
    if action is SceneAction.mark:
        mark_break(message, name, cause="user")
    elif action is SceneAction.unmark:
        unmark_break(message)
    elif action in (SceneAction.hide, SceneAction.show):
        set_visible(message, action is SceneAction.show)
    else:
        if not name:
            raise AutorecapError("`scenes rename N NAME` needs the new name")
        rename_break(message, name)
    if from_file:
        write_chat(loaded)
    else:
        (store or command_store(None)).save(loaded, changed=[message])
    out.print(f"{action.value}: message {index}")


def _print_scenes(chat: object) -> None:
    from autorecap.core.model import Chat

    assert isinstance(chat, Chat)
    found = scenes(chat.messages)
    if not found:
        out.print("no messages")
        return
    table = Table(title=f"scenes of {chat.id}")
    for column in ("#", "messages", "name", "recap"):
        table.add_column(column)
    for scene in found:
        table.add_row(
            str(scene.number + 1),
            f"{scene.start}-{scene.end}" + ("" if scene.closed else " (open)"),
            escape(scene.name),
            escape(" ".join(scene.recap.split())[:200]),
        )
    out.print(table)


@app.command()
def demo() -> None:
    """The bundled sample chat recapped offline: its scenes, its running recap, the assembled
    prompt, and token counts before and after memory and auto-hide. Writes nothing of yours."""
    from autorecap.core.prompt import assemble_chat, history_from_chat
    from autorecap.sample import sample_chat_path
    from autorecap.session import Session
    from autorecap.settings import Settings
    from autorecap.stfiles.jsonl import read_chat

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sample_chat.jsonl"
        shutil.copyfile(sample_chat_path(), path)
        chat = read_chat(path)
        settings = Settings()
        counter = get_counter(settings.tokenizer)
        history_before = history_from_chat(chat.messages)
        before = sum(counter.count(item.content) for item in history_before if not item.hidden)
        out.rule("[bold]1. The sample chat")
        out.print(f"{len(chat.messages)} messages, {before} tokens of visible history")
        with _progress() as bars:
            tasks: dict[str, TaskID] = {}

            def progress(stage: str, done: int, total: int) -> None:
                if stage not in tasks:
                    tasks[stage] = bars.add_task(stage, total=max(total, 1))
                bars.update(tasks[stage], completed=done, total=max(total, 1))

            run_pipeline(
                chat,
                make_backend(settings, backend="offline"),
                settings,
                counter,
                now_ms=int(time.time() * 1000),
                progress=progress,
            )
        out.rule("[bold]2. Scenes found")
        _print_scenes(chat)
        current = running.current(chat)
        out.rule("[bold]3. The running recap (injected)")
        if current:
            out.print(escape(str(current.get("content", ""))))
        session = Session(chat, settings=settings)
        history = history_from_chat(chat.messages)
        prompt = assemble_chat(
            "You are Captain Mira Vale. Stay in character.",
            history,
            session.slots,
            counter,
            context_size=settings.context_size,
        )
        out.rule("[bold]4. The prompt that would be sent")
        for message in prompt.messages[:4]:
            out.print(f"[bold]{message['role']}[/]: {escape(message['content'][:300])}…")
        out.print(f"… {len(prompt.messages)} messages in all")
        after = prompt.history_tokens
        out.rule("[bold]5. Tokens")
        out.print(
            f"history before memory: {before} tokens; after auto-hide: {after} tokens of "
            f"history ({len(prompt.hidden)} messages hidden) + {prompt.injected_tokens} tokens "
            f"of memory = {prompt.tokens} tokens in the prompt"
        )
