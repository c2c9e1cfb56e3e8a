"""`jobs` and `worker`: the persistent queue of recap work."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from autorecap.autosave import install_signal_handlers
from autorecap.cli._app import DbOption, app, command_store, err, out, print_failures
from autorecap.cli.llm import ApiKeyEnvOption, BackendOption, BaseUrlOption, ModelOption
from autorecap.jobs.queue import STATES, JobQueue
from autorecap.jobs.runner import Worker
from autorecap.profiles import Profiles, profiles_of
from autorecap.recap.backend import RecapBackend
from autorecap.recap.backends import make_backend
from autorecap.settings import Settings
from autorecap.store.base import ChatStore

jobs_app = typer.Typer(help="The queue of recap jobs: list, retry, cancel, pause, resume.")
app.add_typer(jobs_app, name="jobs")


def _queue(db: str | None) -> JobQueue:
    return JobQueue(command_store(db))


@jobs_app.callback(invoke_without_command=True)
def jobs_default(ctx: typer.Context, db: DbOption = None) -> None:
    """With no subcommand: `jobs list`."""
    if ctx.invoked_subcommand is None:
        jobs_list(db=db)


@jobs_app.command("list")
def jobs_list(
    state: Annotated[
        list[str] | None, typer.Option("--state", help=f"Only these states: {', '.join(STATES)}.")
    ] = None,
    chat: Annotated[str | None, typer.Option(help="Only this chat's jobs.")] = None,
    db: DbOption = None,
) -> None:
    """List jobs: running, queued and failed first, with progress and errors."""
    queue = _queue(db)
    unknown = [s for s in state or () if s not in STATES]
    if unknown:
        from autorecap.jobs.queue import JobError

        raise JobError(f"unknown state {unknown[0]!r}: use one of {', '.join(STATES)}")
    counts = queue.counts(chat)
    out.print(
        ", ".join(f"{n} {name}" for name, n in counts.items())
        + ("  [yellow](paused)[/]" if queue.paused else "")
    )
    jobs = queue.list(states=state or STATES, chat_id=chat)
    order = {"running": 0, "queued": 1, "failed": 2, "cancelled": 3, "done": 4}
    jobs.sort(key=lambda j: (order.get(j.state, 9), -j.priority, j.id))
    if not jobs:
        return
    table = Table()
    for column in ("id", "state", "job", "tries", "progress", "updated", "error"):
        table.add_column(column)
    for job in jobs[:200]:
        table.add_row(
            str(job.id),
            job.state,
            escape(job.label),
            f"{job.attempts}/{job.max_retries + 1}",
            f"{job.progress:.0%}",
            datetime.fromtimestamp(job.updated_at).strftime("%H:%M:%S"),
            escape((job.error or "")[:80]),
        )
    out.print(table)
    if len(jobs) > 200:
        out.print(f"… and {len(jobs) - 200} more (filter with --state or --chat)")


@jobs_app.command("retry")
def jobs_retry(
    job_id: Annotated[int | None, typer.Argument(help="Job id.")] = None,
    failed: Annotated[
        bool, typer.Option("--failed", help="Every failed job instead (with --chat: its jobs).")
    ] = False,
    chat: Annotated[str | None, typer.Option(help="With --failed: only this chat's jobs.")] = None,
    db: DbOption = None,
) -> None:
    """Queue a failed or cancelled job again; `--failed`: every failed job (after fixing what
    made the LLM refuse them)."""
    if (job_id is None) == (not failed):
        raise typer.BadParameter("give a job id, or --failed for every failed job (not both)")
    if chat is not None and not failed:
        raise typer.BadParameter("--chat goes with --failed")
    queue = _queue(db)
    if job_id is not None:
        queue.retry(job_id)
        out.print(f"job {job_id} queued again")
        return
    if chat is not None and not queue.store.has_chat(chat) and not queue.list(chat_id=chat):
        raise typer.BadParameter(f"no chat {chat!r} in the store: `autorecap chats` lists them")
    count = queue.retry_failed(chat)
    where = f" of chat {chat!r}" if chat else ""
    out.print(f"{count} failed job{'s' * (count != 1)}{where} queued again")


@jobs_app.command("cancel")
def jobs_cancel(
    job_id: Annotated[int, typer.Argument(help="Job id.")], db: DbOption = None
) -> None:
    """Cancel a queued job (a running one stops when it can)."""
    out.print(f"job {job_id}: {_queue(db).cancel(job_id)}")


@jobs_app.command("pause")
def jobs_pause(db: DbOption = None) -> None:
    """Workers take no new jobs until `jobs resume`."""
    _queue(db).pause()
    out.print("queue paused")


@jobs_app.command("resume")
def jobs_resume(db: DbOption = None) -> None:
    """Workers take jobs again."""
    _queue(db).resume()
    out.print("queue resumed")


@jobs_app.command("prune")
def jobs_prune(
    days: Annotated[
        float, typer.Option(help="Keep the jobs that ended less than this many days ago.", min=0)
    ] = 7.0,
    db: DbOption = None,
) -> None:
    """Delete the jobs that ended done or cancelled more than --days ago (failed ones stay).
    A busy store keeps every job it ran otherwise."""
    count = _queue(db).prune(days * 86400)
    out.print(f"deleted {count} job(s) that ended more than {days:g} day(s) ago")


@app.command()
def worker(
    once: Annotated[
        bool, typer.Option("--once", help="Stop when the queue is empty (or paused).")
    ] = False,
    concurrency: Annotated[
        int | None, typer.Option(help="Jobs at once (default: llm_concurrency).", min=1)
    ] = None,
    backend: BackendOption = None,
    base_url: BaseUrlOption = None,
    model: ModelOption = None,
    api_key_env: ApiKeyEnvOption = None,
    lease: Annotated[
        float,
        typer.Option(
            help="Seconds a job stays claimed without news before another worker may take it over.",
            min=1,
        ),
    ] = 60.0,
    keys_file: Annotated[
        Path | None,
        typer.Option(
            "--keys-file",
            help="The keys file of `autorecap serve --keys-file`: each key's chats are then "
            "recapped with that key's own settings.",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Run queued jobs in this process (each chat's settings profile applies); without
    --once, wait for new ones until SIGTERM or Ctrl-C."""
    profiles_for = None
    if keys_file is not None:
        from autorecap.server.access import KeyRing  # the server's modules load only here

        KeyRing.from_file(keys_file)  # the same file as the server's, or a clear error
    queue = JobQueue(command_store(db), lease_s=lease)
    if keys_file is not None:
        profiles_for = _owners_profiles(queue.store)

    def backend_for(settings: Settings) -> RecapBackend:
        return make_backend(
            settings,
            backend=backend.value if backend else None,
            base_url=base_url,
            model=model,
            api_key_env=api_key_env,
        )

    runner = Worker(
        queue,
        backend_for,
        profiles_for=profiles_for,
        concurrency=concurrency or Settings().llm_concurrency,
    )
    import signal

    def stop(signum: int, frame: object) -> None:
        err.print("[dim]stopping after the jobs in progress…[/]")
        runner.stop()

    install_signal_handlers()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    err.print(f"[dim]worker {queue.worker_name}: {queue.counts()}[/]")
    stats = runner.run(until_empty=once)
    out.print(
        f"{stats.done} job(s) done, {stats.retried} to retry, {stats.failed} failed, "
        f"{stats.llm_skipped} unchanged (no LLM call)"
    )
    print_failures(stats.errors)
    if once and queue.paused:
        err.print("[yellow]the queue is paused[/]: `autorecap jobs resume` lets workers go on")
    if stats.failed:
        raise typer.Exit(1)


def _owners_profiles(store: ChatStore) -> Callable[[str], Profiles]:
    """A chat's settings file by its stored id, as a server with API keys on keeps them: the
    owner's (`alice/...`: alice's; a chat with no owner part: the installation's), read
    afresh for each chat the worker meets (it keeps a chat's settings from then on)."""
    from autorecap.server.access import owner_of

    owners: dict[str, Profiles] = {}

    def profiles_for(chat_id: str) -> Profiles:
        owner = owner_of(chat_id, keys_on=True)
        found = owners.get(owner)
        if found is None:
            found = owners[owner] = profiles_of(owner, store)
        else:
            found.reload()  # as changed meanwhile (the server's API, the command line)
        return found

    return profiles_for
