"""`recap`, `scenes`, `eval` and `demo`: making memory."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

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
    LOOPBACK,
    DbOption,
    LenientOption,
    app,
    command_profiles,
    command_store,
    err,
    out,
    print_failures,
    profiles_at,
)
from autorecap.core import combined, running
from autorecap.core.data import cleared_recap, get_data, get_memory, update_data
from autorecap.core.names import character_key_of
from autorecap.core.pins import is_pinned, pinned_indexes, set_pinned
from autorecap.core.scenes import mark_break, rename_break, scenes, set_visible, unmark_break
from autorecap.core.tokens import get_counter
from autorecap.errors import AutorecapError
from autorecap.jobs.drive import recap_on_queue
from autorecap.jobs.handlers import enqueue_pipeline
from autorecap.jobs.queue import JobQueue
from autorecap.recap.backend import RecapBackend
from autorecap.recap.backends import make_backend
from autorecap.recap.combined_recap import update_combined_recap
from autorecap.recap.openai_compat import OpenAICompatBackend
from autorecap.recap.pipeline import run_pipeline
from autorecap.session import Session
from autorecap.stfiles.jsonl import write_chat
from autorecap.store import SQLiteStore

if TYPE_CHECKING:  # the evaluation is imported only when `eval` runs
    from autorecap.core.model import Chat
    from autorecap.evaluation.run import StyleRow
    from autorecap.settings import Settings
    from autorecap.store.base import ChatStore

_CHAT_ARG = Annotated[str, typer.Argument(help="A chat file (.jsonl) or the id of a stored chat.")]


class Backend(StrEnum):
    offline = "offline"
    openai = "openai"


@app.command()
def recap(
    chat: _CHAT_ARG,
    backend: Annotated[
        Backend | None, typer.Option(help="offline (default) or openai (any compatible server).")
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="The LLM server's base URL (…/v1).")] = None,
    model: Annotated[str | None, typer.Option(help="Model name to ask for.")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Environment variable holding the API key.")
    ] = None,
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
    _warn_if_no_key(engine)
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
    usage = engine.usage
    if usage.calls:
        chat_tokens = sum(counter.count(m.text) for m in result.messages) or 1
        failed = (
            f"; {usage.failed_calls} call(s) got no answer, about "
            f"{usage.failed_prompt_tokens:,} prompt token(s) sent to them"
            if usage.failed_calls
            else ""
        )
        out.print(
            f"LLM: {usage.calls} call(s), {usage.prompt_tokens:,} prompt token(s) "
            f"({usage.prompt_tokens / chat_tokens:.2f} per token of the chat's {chat_tokens:,}), "
            f"{usage.completion_tokens:,} completion token(s){failed}",
            soft_wrap=True,
        )
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


def _warn_if_no_key(engine: RecapBackend) -> None:
    """A remote LLM server asked without a key answers 401 for every call: say so first."""
    if not isinstance(engine, OpenAICompatBackend) or not engine.api_key_env:
        return
    host = urlsplit(engine.base_url).hostname or ""
    if host in LOOPBACK or os.environ.get(engine.api_key_env):
        return
    err.print(
        f"warning: ${engine.api_key_env} is not set: {engine.base_url} gets no API key "
        "(set it, or name another variable with --api-key-env)",
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
    chat: _CHAT_ARG,
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


@app.command(context_settings={"ignore_unknown_options": True})  # "-1" is an index, no option
def remember(
    chat: _CHAT_ARG,
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
    chat: _CHAT_ARG,
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


@app.command("eval")
def eval_command(
    sets: Annotated[
        str,
        typer.Option(
            "--sets", help="Which shipped chats: dev, heldout, generated (comma-separated)."
        ),
    ] = "dev,heldout,generated",
    corpus: Annotated[
        list[Path] | None,
        typer.Option(
            "--corpus",
            help="Also a folder of chats: *.chat.txt scripts, or SillyTavern *.jsonl files each "
            "with a NAME.truth.json beside it (repeatable).",
        ),
    ] = None,
    budgets: Annotated[
        str, typer.Option(help="Token budgets, comma-separated.")
    ] = "1000,2000,4000",
    proxy: Annotated[
        bool, typer.Option(help="Also measure each chat as the proxy sees it (no names, no dates).")
    ] = True,
    seed: Annotated[int, typer.Option(help="Seed of the generated chats.")] = 0,
    recall: Annotated[
        bool,
        typer.Option(
            help="Also measure with the recall tier: each question asked as the newest "
            "message, the running recap and what it recalls sharing each budget."
        ),
    ] = True,
    backend: Annotated[
        Backend,
        typer.Option(
            help="Who writes the recaps: offline (default) or openai (any compatible server: "
            "every chat is recapped through it, and the running recap folded once per budget, "
            "twice with the recall tier)."
        ),
    ] = Backend.offline,
    base_url: Annotated[str | None, typer.Option(help="The LLM server's base URL (…/v1).")] = None,
    model: Annotated[str | None, typer.Option(help="Model name to ask for.")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Environment variable holding the API key.")
    ] = None,
) -> None:
    """Memory quality per style of chat: scene breaks found (within 2 messages) and extra, and
    the share of the answers to questions about each chat's past that the running recap holds
    at each budget, against keeping the latest messages that fit the same budget. Default
    settings; the recaps by the offline engine, or with --backend openai by the LLM your
    settings name (llm_base_url, llm_model, its prompts), or the options say."""
    from autorecap.evaluation import by_style, evaluate_chats
    from autorecap.evaluation.corpus import gather
    from autorecap.settings import Settings

    try:
        budget_list = [int(x) for x in budgets.split(",") if x.strip()]
    except ValueError:
        raise AutorecapError("--budgets takes whole numbers, like 1000,2000,4000") from None
    if not budget_list or min(budget_list) < 50:
        raise AutorecapError("--budgets takes whole numbers of at least 50, like 1000,2000,4000")
    chats = gather(
        [s.strip() for s in sets.split(",") if s.strip()], corpus or [], proxy=proxy, seed=seed
    )
    if not chats:
        raise AutorecapError("no chats to measure: check --sets and --corpus")
    llm = {"base_url": base_url, "model": model, "api_key_env": api_key_env}
    if backend is Backend.offline and any(value is not None for value in llm.values()):
        raise AutorecapError(
            "--base-url, --model and --api-key-env are for the LLM's recaps: add --backend openai"
        )
    # The LLM as you set it up (`autorecap settings`: its URL, model, key, prompts), the
    # options above it; the memory's own settings stay at their defaults, as in the README.
    yours = profiles_at(None).settings_for() if backend is Backend.openai else Settings()
    engine = make_backend(yours, backend=backend.value, **llm)
    _warn_if_no_key(engine)
    try:
        if isinstance(engine, OpenAICompatBackend):
            _check_llm(yours, llm)
        results = evaluate_chats(
            chats,
            budgets=budget_list,
            backend=engine,
            progress=lambda text: err.print(f"[dim]{escape(text)}[/]"),
            recall=recall,
        )
    finally:
        engine.close()
    who = (
        f"recaps by the LLM at {engine.base_url}"
        if isinstance(engine, OpenAICompatBackend)
        else "offline engine"
    )
    table = Table(title=f"memory against the latest messages ({who})")
    for column in ("style", "set", "chats", "messages", "breaks found", "extra"):
        table.add_column(column, justify="left" if column in ("style", "set") else "right")
    for budget in budget_list:
        table.add_column(f"recall@{budget}\nmemory / latest", justify="right")
    planted_at = 2000 if 2000 in budget_list else budget_list[0]
    table.add_column(f"planted@{planted_at}", justify="right")
    if recall:
        for budget in budget_list:
            table.add_column(f"with recall\n@{budget}", justify="right")
        table.add_column(f"planted@{planted_at}\nwith recall", justify="right")
        table.add_column("of them hidden\n(left the prompt)", justify="right")
    for row in sorted(by_style(results, budget_list), key=lambda r: (r.style, r.source)):
        found, planted = row.memory_planted[planted_at]
        table.add_row(
            row.style,
            row.source,
            str(row.chats),
            str(row.messages),
            f"{row.breaks.found}/{row.breaks.true} ({row.breaks.found_share:.0%})"
            if row.breaks.true
            else "-",  # no scene start given: nothing to compare with
            str(row.breaks.extra) if row.breaks.true else "-",
            *(
                f"{row.memory_recall[b]:.0%} / {row.baseline_recall[b]:.0%}"
                if row.questions
                else "-"  # no question: nothing to measure
                for b in budget_list
            ),
            f"{found}/{planted}" if planted else "-",
            *(_recall_cells(row, budget_list, planted_at) if recall else ()),
        )
    out.print(table)
    _print_eval_usage(
        engine, sum(r.chat_tokens for r in results), sum(r.failed_recaps for r in results)
    )


def _check_llm(settings: Settings, llm: dict[str, str | None]) -> None:
    """One small call, not retried, before any recap: a server that is down or refuses the
    key says so at once, before hundreds of recaps fail one by one (and the call is not
    counted among those the figures cost)."""
    probe = make_backend(settings, backend="openai", retries=0, timeout_s=30.0, **llm)
    try:
        assert isinstance(probe, OpenAICompatBackend)
        probe.chat([{"role": "user", "content": "Reply with the word: ready"}], max_tokens=8)
    finally:
        probe.close()


def _print_eval_usage(engine: RecapBackend, chat_tokens: int, failed_recaps: int) -> None:
    """What an LLM was asked for the figures, and how many recaps it did not give (answers
    refused as no recap, or calls never answered): exit 1 then, as `recap` does, since the
    figures miss those recaps."""
    usage = engine.usage
    if usage.calls:
        retried = (
            f"; {usage.failed_calls} attempt(s) got no answer and were retried or given up"
            if usage.failed_calls
            else ""
        )
        out.print(
            f"LLM: {usage.calls} call(s), {usage.prompt_tokens:,} prompt token(s) "
            f"({usage.prompt_tokens / max(chat_tokens, 1):.2f} per token of the chats' "
            f"{chat_tokens:,}), {usage.completion_tokens:,} completion token(s){retried}",
            soft_wrap=True,
        )
    if failed_recaps:
        err.print(
            f"error: {failed_recaps} recap(s) failed and were kept as errors (answers that were "
            "no recap, or no answer): these figures are what the memory holds without them "
            "(`autorecap recap` on one chat shows why)",
            soft_wrap=True,
        )
        raise typer.Exit(1)


def _recall_cells(row: StyleRow, budgets: list[int], planted_at: int) -> list[str]:
    found, planted = row.recall_planted.get(planted_at, (0, 0))
    # A fact whose message the prompt still shows needs no memory: the hidden ones are those
    # the memory alone must bring back.
    hidden_found, hidden = row.recall_planted_hidden.get(planted_at, (0, 0))
    return [
        *(
            f"{row.recall_recall[b]:.0%}" if b in row.recall_recall and row.questions else "-"
            for b in budgets
        ),
        f"{found}/{planted}" if planted else "-",
        f"{hidden_found}/{hidden}" if hidden else "-",
    ]


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
