"""Planted facts: per-chat pools of subjects and unique answers, and the drafts drawn from them."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from autorecap.testing._words import (
    CODE_CONTAINERS,
    CODE_LOCATIONS,
    EVENTS,
    FACT_FIRST_NAMES,
    FACT_KINDS,
    FACT_LAST_NAMES,
    FACT_PLACE_PREFIXES,
    FACT_PLACE_SUFFIXES,
    HIDDEN_ITEMS,
    HIDERS,
    MONTHS,
    PRICED_ITEMS,
    ROLE_CLAUSES,
    ROLES,
    SELLERS,
    FactKind,
)


@dataclass
class FactDraft:
    """A fact about to be planted: its kind, its subject (`a`, `b`) and its unique answer."""

    kind: FactKind
    a: str
    b: str
    answer: str

    @property
    def question(self) -> str:
        return self.kind.question.format(a=self.a, b=self.b)

    @property
    def clause(self) -> str:
        return self.kind.clause.format(a=self.a, b=self.b, ans=self.answer)


class FactPools:
    """Per chat: shuffled subjects and answers of every fact kind, handed out without repeats."""

    def __init__(self, rng: random.Random, names_in_use: Sequence[str]) -> None:
        self._rng = rng
        taken = " ".join(names_in_use)
        self._firsts = [w for w in FACT_FIRST_NAMES if w not in taken]
        self._prefixes = [w for w in FACT_PLACE_PREFIXES if w not in taken]
        self._subjects: dict[str, list[tuple[str, str]]] = {}
        self._answers: dict[str, list[str]] = {}

    def draw(self, kind_name: str) -> FactDraft | None:
        """The next unused subject and answer of that kind; None once either runs out."""
        if kind_name not in self._subjects:
            self._fill(kind_name)
        subjects = self._subjects[kind_name]
        answers = self._answers[kind_name]
        if not subjects or not answers:
            return None
        a, b = subjects.pop()
        return FactDraft(FACT_KINDS[kind_name], a, b, answers.pop())

    def _fill(self, kind_name: str) -> None:
        rng = self._rng
        subjects: list[tuple[str, str]]
        answers: list[str]
        if kind_name == "code":
            subjects = [(c, loc) for c in CODE_CONTAINERS for loc in CODE_LOCATIONS]
            answers = [str(n) for n in rng.sample(range(1000, 10000), len(subjects))]
        elif kind_name == "name":
            subjects = [(r, cl) for r in ROLES for cl in ROLE_CLAUSES]
            answers = [f"{f} {s}" for f in self._firsts for s in FACT_LAST_NAMES]
        elif kind_name == "price":
            subjects = [(s, i) for s in SELLERS for i in PRICED_ITEMS]
            answers = [f"{n} crowns" for n in rng.sample(range(120, 990), len(subjects))]
        elif kind_name == "date":
            subjects = [(e, r) for e in EVENTS for r in ROLES]
            answers = [f"{d}th of {m}" for d in range(10, 29) for m in MONTHS]
        else:
            subjects = [(h, i) for h in HIDERS for i in HIDDEN_ITEMS]
            answers = [f"{p} {s}" for p in self._prefixes for s in FACT_PLACE_SUFFIXES]
        rng.shuffle(subjects)
        rng.shuffle(answers)
        self._subjects[kind_name] = subjects
        self._answers[kind_name] = answers
