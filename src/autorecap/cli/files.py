"""`check` and `show`: look at chat files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from autorecap.cli._app import app, out
from autorecap.core.data import INCLUDED, get_data, get_memory
from autorecap.core.model import Chat, Message
from autorecap.core.tokens import DEFAULT_TOKENIZER, TOKENIZERS, TokenCounter
from autorecap.errors import AutorecapError
from autorecap.sample import sample_chat_path
from autorecap.stfiles.check import CheckReport, check_chat_file
from autorecap.stfiles.jsonl import read_chat


@app.command()
def check(
    files: Annotated[list[Path], typer.Argument(help="Chat files (.jsonl) to check.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Report every problem in chat files, line by line. Changes nothing.

    Exits with 1 when any file has an error (a line a strict read refuses); warnings alone exit 0.
    """
    reports = [check_chat_file(path) for path in files]
    if as_json:
        payload = [
            {
                "path": str(report.path),
                "ok": report.ok,
                "format": report.describe_format(),
                "problems": [
                    {"line": p.line, "severity": p.severity, "message": p.message}
                    for p in report.problems
                ],
            }
            for report in reports
        ]
        print(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        for report in reports:
            _print_report(report)
    if not all(report.ok for report in reports):
        raise typer.Exit(1)


def _print_report(report: CheckReport) -> None:
    status = "[green]ok[/]" if report.ok else "[red]errors[/]"
    out.print(
        f"[bold]{escape(str(report.path))}[/]: {status} ({report.describe_format()})",
        soft_wrap=True,
    )
    for problem in report.problems:
        colour = "red" if problem.severity == "error" else "yellow"
        where = f"line {problem.line}" if problem.line else "file"
        out.print(
            f"  [{colour}]{problem.severity}[/] {where}: {escape(problem.message)}", soft_wrap=True
        )
    if not report.problems:
        out.print("  no problems found")


@app.command()
def show(
    file: Annotated[
        Path | None, typer.Argument(help="Chat file (.jsonl). Omit it with --sample.")
    ] = None,
    sample: Annotated[bool, typer.Option("--sample", help="Show the bundled sample chat.")] = False,
    tokenizer: Annotated[
        str,
        typer.Option(help=f"Tokenizer for the counts: {', '.join(TOKENIZERS)}."),
    ] = DEFAULT_TOKENIZER,
    lenient: Annotated[
        bool, typer.Option("--lenient", help="Keep malformed lines instead of stopping.")
    ] = False,
    full: Annotated[bool, typer.Option("--full", help="Do not shorten long texts.")] = False,
    limit: Annotated[int | None, typer.Option(help="Show only the last N messages.", min=1)] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the messages as JSON lines instead.")
    ] = False,
) -> None:
    """List a chat's messages with their recap data and token counts."""
    if sample:
        file = sample_chat_path()
    if file is None:
        raise AutorecapError("name a chat file to show, or pass --sample for the bundled one")
    counter = TokenCounter(tokenizer)
    chat = read_chat(file, lenient=lenient)
    if as_json:
        start = max(0, len(chat.messages) - limit) if limit else 0
        for index, message in enumerate(chat.messages[start:], start):
            print(json.dumps(_message_summary(index, message, counter), ensure_ascii=False))
    else:
        _print_chat(chat, counter, full=full, limit=limit)


def _message_summary(index: int, message: Message, counter: TokenCounter) -> dict[str, object]:
    return {
        "index": index,
        "line": message.line,
        "name": message.name,
        "role": _role(message),
        "hidden": message.is_hidden,
        "tokens": counter.count(message.text),
        "text": message.text,
        "recap": get_memory(message) or None,
        "included": get_data(message, "include") == INCLUDED,
        "error": get_data(message, "error"),
        "scene_break": bool(get_data(message, "scene_break")),
        "scene_name": get_data(message, "scene_break_name"),
    }


def _role(message: Message) -> str:
    if message.is_user:
        return "user"
    return "narrator" if message.is_narrator else "character"


def _print_chat(chat: Chat, counter: TokenCounter, *, full: bool, limit: int | None) -> None:
    table = Table(title=f"{chat.id}  ({len(chat.messages)} messages)", expand=True)
    table.add_column("#", justify="right", style="dim", no_wrap=True)
    table.add_column("speaker", no_wrap=True, max_width=18)
    table.add_column("tok", justify="right", no_wrap=True)
    table.add_column("message", ratio=3)
    table.add_column("recap", ratio=2)
    start = max(0, len(chat.messages) - limit) if limit else 0
    total = visible = recaps = hidden = 0
    for index, message in enumerate(chat.messages):
        tokens = counter.count(message.text)
        total += tokens
        if message.is_hidden:
            hidden += 1
        else:
            visible += tokens
        if get_memory(message):
            recaps += 1
        if index >= start:
            table.add_row(
                str(index),
                _speaker(message),
                str(tokens),
                escape(_shorten(message.text, full)),
                _recap_cell(message, full),
            )
    out.print(table)
    out.print(
        f"{len(chat.messages)} messages, {hidden} hidden, {recaps} with a recap; "
        f"{total} tokens in all, {visible} in visible messages ({counter.name})"
    )


def _speaker(message: Message) -> str:
    name = escape(message.name or "?")
    if message.is_hidden:
        return f"[dim]{name} (hidden)[/]"
    if message.is_user:
        return f"[cyan]{name}[/]"
    if message.is_narrator:
        return f"[magenta]{name}[/]"
    swipes = message.swipes
    if swipes and len(swipes) > 1 and message.swipe_id is not None:
        return f"{name} [dim]{message.swipe_id + 1}/{len(swipes)}[/]"
    return name


def _recap_cell(message: Message, full: bool) -> str:
    parts: list[str] = []
    if get_data(message, "scene_break"):
        scene = get_data(message, "scene_break_name") or "scene break"
        parts.append(f"[bold blue]▌ {escape(str(scene))}[/]")
    error = get_data(message, "error")
    memory = get_memory(message)
    if error:
        parts.append(f"[red]error: {escape(_shorten(str(error), full))}[/]")
    elif memory:
        colour = "green" if get_data(message, "include") == INCLUDED else "yellow"
        parts.append(f"[{colour}]{escape(_shorten(memory, full))}[/]")
    return "\n".join(parts)


def _shorten(text: str, full: bool, width: int = 160) -> str:
    flat = " ".join(text.split())
    if full or len(flat) <= width:
        return flat
    return flat[: width - 1] + "…"
