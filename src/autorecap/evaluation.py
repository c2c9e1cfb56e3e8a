"""`autorecap eval`: how much of a chat's facts survives into what is injected.

Generated chats plant facts (a code, a name, a price, a date, a place) at known messages among
ordinary chatter. After recapping, recall@budget is the share of facts whose answer appears in
what memory injects within a token budget; the baseline keeps only the most recent messages that
fit the same budget, as a plain context window does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autorecap.core import running
from autorecap.core.memory import short_term_text, update_inclusion_flags
from autorecap.core.model import Chat, Message
from autorecap.core.tokens import TokenCounter, get_counter
from autorecap.llm.base import RecapBackend
from autorecap.llm.offline import OfflineBackend
from autorecap.pipeline import run_pipeline
from autorecap.recaps import recap_all
from autorecap.settings import Settings
from autorecap.testing import GeneratedChat, generate


@dataclass(frozen=True)
class EvalRow:
    """Recall at one chat size and one budget, over several chats."""

    size: int
    budget: int
    chats: int
    facts: int
    memory_recall: float
    baseline_recall: float

    @property
    def ratio(self) -> float:
        """Memory recall over baseline recall (inf when the baseline found nothing)."""
        if self.baseline_recall == 0:
            return float("inf") if self.memory_recall else 1.0
        return self.memory_recall / self.baseline_recall


def short_term_memory(messages: Sequence[Message], budget: int, counter: TokenCounter) -> str:
    """What the short-term tier injects with an absolute budget of `budget` tokens (the
    message recaps' join; the template's own line is left out so that it costs nothing)."""
    settings = Settings(message_recap_context_type="absolute", message_recap_context_limit=budget)
    included, _ = update_inclusion_flags(messages, settings, counter)
    return short_term_text(included, "{{memories}}")


def running_memory(chat: Chat, budget: int, backend: RecapBackend, counter: TokenCounter) -> str:
    """What the running recap injects when it is held to `budget` tokens (scenes found,
    recapped and folded into a copy of the chat)."""
    copy = copy_chat(chat)
    settings = Settings(running_scene_recap_max_tokens=budget)
    run_pipeline(copy, backend, settings, counter, now_ms=0)
    version = running.current(copy)
    return str(version.get("content", "")) if version else ""


def baseline_text(messages: Sequence[Message], budget: int, counter: TokenCounter) -> str:
    """The most recent visible messages (`Name: text` lines) that fit the budget."""
    lines: list[str] = []
    spent = 0
    for message in reversed(messages):
        if message.is_hidden:
            continue
        line = f"{message.name}: {message.text}"
        cost = counter.count(line) + (1 if lines else 0)
        if spent + cost > budget:
            break
        spent += cost
        lines.append(line)
    return "\n".join(reversed(lines))


def copy_chat(chat: Chat) -> Chat:
    """A deep copy of a chat (its messages as new Message objects)."""
    import copy

    fresh = Chat(chat_id=chat.id, header=copy.deepcopy(chat.header))
    for message in chat.messages:
        fresh.append(copy.deepcopy(dict(message)))
    return fresh


def recall(generated: GeneratedChat, text: str) -> tuple[int, int]:
    """(facts whose answer appears in `text`, all facts)."""
    found = sum(1 for fact in generated.facts if fact.answer in text)
    return found, len(generated.facts)


def evaluate(
    sizes: Sequence[int] = (1000, 2000),
    budgets: Sequence[int] = (1000, 2000),
    *,
    chats: int = 3,
    seed: int = 0,
    backend: RecapBackend | None = None,
    counter: TokenCounter | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[EvalRow]:
    """recall@budget of memory and of the recent-messages baseline, per size and budget."""
    backend = backend or OfflineBackend()
    counter = counter or get_counter()
    settings = Settings()
    rows: list[EvalRow] = []
    for size in sizes:
        totals = {budget: [0, 0, 0] for budget in budgets}  # memory found, baseline found, facts
        for number in range(chats):
            generated = generate(size, seed=seed + 1000 * number + size)
            if progress is not None:
                progress(f"recapping chat {number + 1}/{chats} of {size} messages")
            recap_all(generated.chat, backend, settings, counter)
            for budget in budgets:
                memory = running_memory(generated.chat, budget, backend, counter)
                found, facts = recall(generated, memory)
                base, _ = recall(generated, baseline_text(generated.chat.messages, budget, counter))
                totals[budget][0] += found
                totals[budget][1] += base
                totals[budget][2] += facts
        for budget in budgets:
            found, base, facts = totals[budget]
            rows.append(
                EvalRow(
                    size,
                    budget,
                    chats,
                    facts,
                    found / facts if facts else 0.0,
                    base / facts if facts else 0.0,
                )
            )
    return rows
