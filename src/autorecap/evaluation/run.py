"""Run the memory on evaluation chats and measure it, per chat and per style.

Each chat is recapped from scratch with the given settings (message recaps, scene detection,
scene recaps), then folded into a running recap once per budget
(`running_scene_recap_max_tokens`). The running recap is what memory injects; it is compared
with the latest messages that fit the same budget. With the recall tier, the planted facts are
also counted apart among those whose message has left the prompt: a fact the prompt still shows
needs no memory to be there.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from autorecap.chat_search import ChatSearch
from autorecap.core import running
from autorecap.core.data import NAMESPACE
from autorecap.core.model import Chat, Message
from autorecap.core.recall import query_text
from autorecap.core.scenes import break_indexes
from autorecap.core.tokens import TokenCounter, get_counter
from autorecap.evaluation.corpus import CorpusChat, Question
from autorecap.evaluation.measures import (
    BreakMatch,
    answer_recall,
    answer_words,
    latest_messages,
    match_breaks,
    planted_found,
)
from autorecap.recap.backend import RecapBackend
from autorecap.recap.detection import detect_scene_breaks
from autorecap.recap.messages import recap_all
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recap.running_recap import update_running_recap
from autorecap.recap.scenes import recap_scenes
from autorecap.settings import Settings

BUDGETS = (1000, 2000, 4000)
RECALL_SHARE = 0.25
"""With the recall tier on, the share of a budget that recall takes (the running recap the
rest): 500 of 2,000 tokens, as `recall_max_tokens` has it. Against a fifth, on the dev and
generated chats, planted facts with recall 428 / 449 / 455 -> 434 / 450 / 455 of 463 at 1,000
/ 2,000 / 4,000 tokens (a long-form chat's answer ranks third to fifth among pieces of about
120 tokens); 0.3 did the same at 2,000 and 4,000."""


@dataclass
class ChatResult:
    """One chat's figures."""

    corpus: CorpusChat
    breaks: BreakMatch
    memory: dict[int, str] = field(default_factory=dict)
    """budget -> the running recap at that budget."""
    memory_recall: dict[int, float] = field(default_factory=dict)
    baseline_recall: dict[int, float] = field(default_factory=dict)
    memory_planted: dict[int, tuple[int, int]] = field(default_factory=dict)
    baseline_planted: dict[int, tuple[int, int]] = field(default_factory=dict)
    recall_recall: dict[int, float] = field(default_factory=dict)
    """budget -> answer recall of the running recap and what each question recalls, together
    within the budget (`RECALL_SHARE` of it for recall), the question as the newest message."""
    recall_planted: dict[int, tuple[int, int]] = field(default_factory=dict)
    recall_planted_hidden: dict[int, tuple[int, int]] = field(default_factory=dict)
    """budget -> `recall_planted` of the planted facts whose message has left the prompt (the
    memory covers it): a fact in the messages still shown is in the prompt without memory."""
    chat_tokens: int = 0
    failed_recaps: int = 0
    """Message and scene recaps the backend could not make (an LLM's refused answers): what
    the figures miss."""


@dataclass
class StyleRow:
    """The figures of every chat of one style and source, pooled."""

    style: str
    source: str
    chats: int
    messages: int
    breaks: BreakMatch
    questions: int
    memory_recall: dict[int, float]
    baseline_recall: dict[int, float]
    memory_planted: dict[int, tuple[int, int]]
    recall_recall: dict[int, float] = field(default_factory=dict)
    recall_planted: dict[int, tuple[int, int]] = field(default_factory=dict)
    recall_planted_hidden: dict[int, tuple[int, int]] = field(default_factory=dict)
    """`ChatResult.recall_planted_hidden`, summed."""


def copy_chat(chat: Chat) -> Chat:
    """A deep copy of a chat (its messages as new Message objects)."""
    fresh = Chat(chat_id=chat.id, header=copy.deepcopy(chat.header))
    for message in chat.messages:
        fresh.append(copy.deepcopy(dict(message)))
    return fresh


def fresh_copy(chat: Chat) -> Chat:
    """A copy without any memory: no recaps, breaks or running recap (what a new user has)."""
    fresh = copy_chat(chat)
    fresh.metadata.pop("auto_recap_running_scene_recaps", None)
    for message in fresh.messages:
        extra = message.get("extra")
        if isinstance(extra, dict):
            extra.pop(NAMESPACE, None)
        for info in message.get("swipe_info") or []:
            if isinstance(info, dict) and isinstance(info.get("extra"), dict):
                info["extra"].pop(NAMESPACE, None)
    return fresh


def evaluate_chat(
    corpus: CorpusChat,
    *,
    budgets: Sequence[int] = BUDGETS,
    backend: RecapBackend | None = None,
    settings: Settings | None = None,
    counter: TokenCounter | None = None,
    recall: bool = True,
) -> ChatResult:
    """Recap one chat from scratch and measure it at each budget (and with `recall`, the
    running recap and the recall tier together, each question asked as the newest message)."""
    settings = settings or Settings()
    counter = counter or get_counter(settings.tokenizer)
    backend = backend or OfflineBackend(counter)
    chat = fresh_copy(corpus.chat)
    made = recap_all(chat, backend, settings, counter)
    detect_scene_breaks(chat, backend, settings)
    failures: list[str] = []
    recap_scenes(chat, backend, settings, counter, failures=failures)
    found = [index + 1 for index in break_indexes(chat.messages)]
    result = ChatResult(corpus, match_breaks(corpus.scene_starts, found))
    result.chat_tokens = sum(counter.count(m.text) for m in chat.messages)
    for budget in budgets:
        memory = _content(_folded(chat, backend, settings, counter, budget, failures))
        if recall:
            _measure_recall(result, chat, backend, settings, counter, budget)
        baseline = latest_messages(chat.messages, budget, counter)
        result.memory[budget] = memory
        result.memory_recall[budget] = answer_recall(corpus.questions, memory)
        result.baseline_recall[budget] = answer_recall(corpus.questions, baseline)
        result.memory_planted[budget] = planted_found(corpus.questions, memory)
        result.baseline_planted[budget] = planted_found(corpus.questions, baseline)
    result.failed_recaps += made.failed + len(failures)
    return result


def _folded(
    chat: Chat,
    backend: RecapBackend,
    settings: Settings,
    counter: TokenCounter,
    cap: int,
    failures: list[str],
) -> Chat:
    """A copy of `chat` (recapped, scenes closed) with its running recap at this cap; what
    could not be folded goes to `failures`."""
    folded = copy_chat(chat)
    update_running_recap(
        folded,
        backend,
        settings.model_copy(update={"running_scene_recap_max_tokens": cap}),
        counter,
        now_ms=0,
        failures=failures,
    )
    return folded


def _content(chat: Chat) -> str:
    version = running.current(chat)
    return str(version.get("content", "")) if version else ""


def _measure_recall(
    result: ChatResult,
    chat: Chat,
    backend: RecapBackend,
    settings: Settings,
    counter: TokenCounter,
    budget: int,
) -> None:
    """Each question asked as the newest message: the running recap at the rest of the budget
    and what the question recalls among the messages it covers (hidden, as auto-hide would)."""
    share = round(budget * RECALL_SHARE)
    failures: list[str] = []
    folded = _folded(chat, backend, settings, counter, budget - share, failures)
    result.failed_recaps += len(failures)
    memory = _content(folded)
    covered = running.covered_upto(folded)
    for message in folded.messages[: covered + 1]:
        message["is_system"] = True
    search = ChatSearch(folded)
    asked = settings.model_copy(update={"recall_max_tokens": share})
    # Each question asked as the product asks it: the newest message after the chat's last
    # reply (`query_text` adds the reply when the question names too little).
    recalled = {
        q.question: search.recall(
            asked, counter, query_text([*folded.messages, Message(is_user=True, mes=q.question)])
        )[0]
        for q in result.corpus.questions
    }
    scored = [
        (q, f"{memory}\n{recalled[q.question]}")
        for q in result.corpus.questions
        if answer_words(q.answer)
    ]
    result.recall_recall[budget] = (
        sum(answer_recall([q], text) for q, text in scored) / len(scored) if scored else 0.0
    )
    planted = [(q, text) for q, text in scored if q.planted]
    result.recall_planted[budget] = _found(planted)
    result.recall_planted_hidden[budget] = _found(
        [(q, text) for q, text in planted if 0 <= _said_upto(folded, q.answer) <= covered]
    )


def _found(pairs: Sequence[tuple[Question, str]]) -> tuple[int, int]:
    """(planted answers held by the text each is paired with, pairs)."""
    return sum(planted_found([q], text)[0] for q, text in pairs), len(pairs)


def _said_upto(chat: Chat, answer: str) -> int:
    """The last message that says `answer` (-1: none does, and a fact no message says is
    counted among none that left the prompt)."""
    lowered = answer.lower()
    said = [i for i, m in enumerate(chat.messages) if lowered in m.text.lower()]
    return said[-1] if said else -1


def evaluate_chats(
    chats: Sequence[CorpusChat],
    *,
    budgets: Sequence[int] = BUDGETS,
    backend: RecapBackend | None = None,
    settings: Settings | None = None,
    progress: Callable[[str], None] | None = None,
    recall: bool = True,
) -> list[ChatResult]:
    """`evaluate_chat` for each chat."""
    results = []
    for corpus in chats:
        if progress is not None:
            progress(f"{corpus.source}/{corpus.name} ({len(corpus.chat.messages)} messages)")
        results.append(
            evaluate_chat(
                corpus, budgets=budgets, backend=backend, settings=settings, recall=recall
            )
        )
    return results


def by_style(results: Sequence[ChatResult], budgets: Sequence[int] = BUDGETS) -> list[StyleRow]:
    """Pool the results per (style, source): breaks summed, recall weighted by questions (a
    budget that some chat of the row was not measured at is left out of it)."""
    groups: dict[tuple[str, str], list[ChatResult]] = {}
    for result in results:
        groups.setdefault((result.corpus.style, result.corpus.source), []).append(result)
    rows = []
    for (style, source), members in groups.items():
        questions = sum(len(r.corpus.questions) for r in members)

        rows.append(
            StyleRow(
                style,
                source,
                len(members),
                sum(len(r.corpus.chat.messages) for r in members),
                BreakMatch(
                    sum(r.breaks.true for r in members),
                    sum(r.breaks.found for r in members),
                    sum(r.breaks.extra for r in members),
                ),
                questions,
                {
                    b: _pooled(members, lambda r: r.memory_recall, b)
                    for b in budgets
                    if all(b in r.memory_recall for r in members)
                },
                {
                    b: _pooled(members, lambda r: r.baseline_recall, b)
                    for b in budgets
                    if all(b in r.baseline_recall for r in members)
                },
                _summed(members, lambda r: r.memory_planted, budgets),
                {
                    b: _pooled(members, lambda r: r.recall_recall, b)
                    for b in budgets
                    if all(b in r.recall_recall for r in members)
                },
                _summed(members, lambda r: r.recall_planted, budgets),
                _summed(members, lambda r: r.recall_planted_hidden, budgets),
            )
        )
    return rows


def _summed(
    members: Sequence[ChatResult],
    pick: Callable[[ChatResult], dict[int, tuple[int, int]]],
    budgets: Sequence[int],
) -> dict[int, tuple[int, int]]:
    """The chats' (found, of) counts summed per budget (the budgets every chat has)."""
    return {
        b: (sum(pick(r)[b][0] for r in members), sum(pick(r)[b][1] for r in members))
        for b in budgets
        if all(b in pick(r) for r in members)
    }


def _pooled(
    members: Sequence[ChatResult], pick: Callable[[ChatResult], dict[int, float]], budget: int
) -> float:
    """The chats' recall at `budget`, weighted by their number of questions."""
    weight = sum(len(r.corpus.questions) for r in members) or 1
    return sum(pick(r)[budget] * len(r.corpus.questions) for r in members) / weight
