"""`eval`: what the memory remembers, per style of chat, on the shipped corpora and yours; the
recaps by the offline engine or an LLM."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from autorecap.cli._app import app, err, out, profiles_at
from autorecap.cli.llm import (
    ApiKeyEnvOption,
    Backend,
    BaseUrlOption,
    ModelOption,
    print_usage,
    warn_if_no_key,
)
from autorecap.errors import AutorecapError
from autorecap.recap.backend import RecapBackend
from autorecap.recap.backends import make_backend
from autorecap.recap.openai_compat import OpenAICompatBackend

if TYPE_CHECKING:  # the evaluation is imported only when `eval` runs
    from autorecap.evaluation.run import StyleRow
    from autorecap.settings import Settings


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
    base_url: BaseUrlOption = None,
    model: ModelOption = None,
    api_key_env: ApiKeyEnvOption = None,
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
    warn_if_no_key(engine)
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
        f"recaps by the LLM at {engine.client.base_url}"
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
        probe.client.chat([{"role": "user", "content": "Reply with the word: ready"}], max_tokens=8)
    finally:
        probe.close()


def _print_eval_usage(engine: RecapBackend, chat_tokens: int, failed_recaps: int) -> None:
    """What an LLM was asked for the figures, and how many recaps it did not give (answers
    refused as no recap, or calls never answered): exit 1 then, as `recap` does, since the
    figures miss those recaps."""
    print_usage(engine, chat_tokens, "the chats'")
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
