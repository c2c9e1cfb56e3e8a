"""The text of messages: dialogue, actions, surroundings, scene openings and their recaps.

`Writer` holds what the text depends on (the random source, the names, the current place, what
the conversation is about) and composes sentences from the word banks of `_words`. `Builder`
extends it into whole messages and chats.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from autorecap.testing._facts import FactDraft
from autorecap.testing._words import (
    CHARACTER_ACTIONS,
    GENERIC_LINES,
    GLOBAL_TOPICS,
    GROUP_COMPANIONS,
    INTENT_NAMES,
    INTENTS,
    NAME_TITLES,
    PLACE_REMARKS,
    PLACES,
    POSSESSIVES,
    REPLIES,
    SUBJECTS,
    TIME_CUES,
    USER_ACTIONS,
    Place,
)

_T = TypeVar("_T")


def cap(text: str) -> str:
    """`text` with its first letter upper-cased (the rest left alone, unlike `str.capitalize`)."""
    return text[:1].upper() + text[1:]


def _with_pronoun(sentence: str, name: str, pronoun: str) -> str:
    """ "Mira nods." -> "She nods.", "Mira's hand..." -> "Her hand...", after a first mention."""
    if sentence.startswith(name + "'s "):
        return ("His" if pronoun == "He" else "Her") + sentence[len(name) + 2 :]
    if sentence.startswith(name + " "):
        return pronoun + sentence[len(name) :]
    return sentence


def _short_name(name: str) -> str:
    words = name.split()
    if len(words) > 1 and words[0] in NAME_TITLES:
        words = words[1:]
    return words[0] if words else name


@dataclass
class Content:
    """One message's text (or one swipe's) and its recap."""

    text: str
    recap: str


class Writer:
    """Composes message text for one chat, from one seeded random source.

    Every random choice goes through `self.rng` in a fixed order, so the same seed and names
    always give the same text."""

    def __init__(self, *, seed: int, group: bool, user: str, character: str) -> None:
        self.rng = random.Random(seed)
        self._random = self.rng.random
        self._shorts: dict[str, str] = {}
        self._caps: dict[str, str] = {}
        self._base_ctx: dict[tuple[str, str], dict[str, str]] = {}
        self.user = user
        self.user_short = self._short(user)
        self.characters = [character]
        if group:
            companions = [c for c in GROUP_COMPANIONS if c not in (user, character)]
            self.characters += self.rng.sample(companions, self._pick((1, 2)))
        self.place = PLACES[0]
        self.prev_place: Place | None = None
        self.intent = ""  # of the last line spoken
        self.topic = ""  # what the scene's conversation is about at the moment

    def _pick(self, seq: Sequence[_T]) -> _T:
        """`rng.choice`, but several times faster (one `random()` call)."""
        return seq[int(self._random() * len(seq))]

    def _int(self, low: int, high: int) -> int:
        """`rng.randint(low, high)`, the fast way."""
        return low + int(self._random() * (high - low + 1))

    def _below(self, n: int) -> int:
        return int(self._random() * n)

    def _short(self, name: str) -> str:
        short = self._shorts.get(name)
        if short is None:
            short = self._shorts[name] = _short_name(name)
        return short

    def _intent_topic(self) -> tuple[str, str]:
        """What the next line is about: usually a reply to the last one, on the same topic."""
        r = self._random
        replies = REPLIES.get(self.intent, INTENT_NAMES) if r() < 0.7 else INTENT_NAMES
        self.intent = replies[int(r() * len(replies))]
        if not self.topic or r() < 0.4:
            topics = self.place.topics if r() < 0.7 else GLOBAL_TOPICS
            self.topic = topics[int(r() * len(topics))]
        return self.intent, self.topic

    def _ctx(self, c: str, listener: str, topic: str = "") -> dict[str, str]:
        """Template slots for one message (one prop and one bystander per message)."""
        key = (c, listener)
        base = self._base_ctx.get(key)
        if base is None:
            place = self.place
            base = self._base_ctx[key] = {
                "c": c,
                "their": POSSESSIVES.get(c, "their"),
                "listener": listener,
                "user": self.user_short,
                "place": place.name,
                "Place": cap(place.name),
                "prep": place.prep,
            }
        ctx = base.copy()
        npcs = self.place.npcs
        npc = npcs[int(self._random() * len(npcs))]
        props = self.place.props
        ctx["npc"] = npc
        ctx["Npc"] = self._cap(npc)
        ctx["prop"] = props[int(self._random() * len(props))]
        ctx["topic"] = topic
        ctx["Topic"] = self._cap(topic)
        return ctx

    def _cap(self, text: str) -> str:
        capped = self._caps.get(text)
        if capped is None:
            capped = self._caps[text] = cap(text)
        return capped

    def _environment(self, ctx: dict[str, str]) -> str:
        place = self.place
        roll = self._random()
        bank = place.sights if roll < 0.5 else place.sounds if roll < 0.75 else place.smells
        return bank[int(self._random() * len(bank))].format_map(ctx)

    def _body(
        self,
        voice: str,
        actor: str,
        listener: str,
        intent: str,
        topic: str,
        count: int,
        draft: FactDraft | None,
    ) -> tuple[list[tuple[str, list[str]]], str]:
        """Blocks of ("a", action sentences) / ("d", speech sentences), and the fact sentence.

        `voice` is "user" (first person) or "char" (third person, the user is "you"). `actor` is
        who {c} names in actions: the speaker for a character, the one spoken to for the user.
        The first speech sentence carries the message's intent and topic.
        """
        r = self._random
        actor_short = self._short(actor)
        ctx = self._ctx(actor_short, self._short(listener), topic)
        pronoun = "" if voice == "user" else SUBJECTS.get(ctx["their"], "")
        main_lines = INTENTS[intent].lines
        follow_ups = INTENTS[intent].follow_ups
        is_user = voice == "user"
        # Layout: alternating blocks of actions and speech, each at least one sentence long.
        most = min(count, 4)
        least = 1 if is_user or count < 2 else 2
        n_blocks = least + int(r() * (most - least + 1)) if most > least else least
        action_first = n_blocks > 1 and r() < (0.4 if is_user else 0.65)
        sizes = [1] * n_blocks
        for _ in range(count - n_blocks):
            sizes[int(r() * n_blocks)] += 1
        actions = USER_ACTIONS if is_user else CHARACTER_ACTIONS
        blocks: list[tuple[str, list[str]]] = []
        used: set[str] = set()
        said_main = False
        for number, size in enumerate(sizes):
            is_action = (number % 2 == 0) == action_first
            sentences: list[str] = []
            for _ in range(size):
                if is_action:
                    if is_user or r() < 0.6:
                        sentence = actions[int(r() * len(actions))].format_map(ctx)
                        if (
                            sentences
                            and pronoun
                            and sentences[-1].startswith((actor_short, pronoun + " "))
                        ):
                            sentence = _with_pronoun(sentence, actor_short, pronoun)
                    else:
                        sentence = self._environment(ctx)
                elif not said_main:
                    sentence = main_lines[int(r() * len(main_lines))].format_map(ctx)
                    said_main = True
                else:
                    roll = r()
                    pool = (
                        follow_ups if roll < 0.5 else PLACE_REMARKS if roll < 0.7 else GENERIC_LINES
                    )
                    sentence = pool[int(r() * len(pool))].format_map(ctx)
                if sentence not in used:
                    used.add(sentence)
                    sentences.append(sentence)
            kind = "a" if is_action else "d"
            if blocks and blocks[-1][0] == kind:
                blocks[-1][1].extend(sentences)
            elif sentences:
                blocks.append((kind, sentences))
        fact_text = ""
        if draft is not None:
            fact_text = self._pick(draft.kind.said).format_map(self._fact_fields(draft))
            target = self._pick([sentences for kind, sentences in blocks if kind == "d"])
            target.insert(1 + int(r() * len(target)), fact_text)
        return blocks, fact_text

    def _fact_fields(self, draft: FactDraft) -> dict[str, str]:
        return {
            "a": draft.a,
            "A": cap(draft.a),
            "b": draft.b,
            "B": cap(draft.b),
            "ans": draft.answer,
            "place": self.place.name,
            "prep": self.place.prep,
        }

    @staticmethod
    def _render(blocks: list[tuple[str, list[str]]]) -> str:
        parts = []
        for kind, sentences in blocks:
            joined = " ".join(sentences)
            parts.append(f"*{joined}*" if kind == "a" else f'"{joined}"')
        return " ".join(parts)

    def _chatter_recap(
        self, speaker: str, listener: str, intent: str, topic: str, draft: FactDraft | None
    ) -> str:
        listener_short = self._short(listener)
        if draft is not None:
            return f"{speaker} tells {listener_short} that {draft.clause}."
        verb = INTENTS[intent].recap.format(listener=listener_short, topic=topic)
        return f"{speaker} {verb} {self.place.prep} {self.place.name}."

    def _opening_content(self, speaker: str | None, attempt: int) -> Content:
        """The first message of a scene: a time cue, the arrival at the new place, a look around.

        `speaker` None is the narrator (names everyone); else the character (says "you")."""
        rng = self.rng
        place = self.place
        cue = self._pick(TIME_CUES)
        c = self._short(speaker if speaker is not None else self._pick(self.characters))
        others = [self._short(n) for n in self.characters]
        if speaker is None:
            who = (
                f"{self.user_short} and {c}"
                if len(others) == 1
                else f"{self.user_short} and the others"
            )
        else:
            who = f"you and {c}" if len(others) == 1 else "you and the others"
        topic = self._pick(place.topics)
        ctx = self._ctx(c, self.user_short, topic)
        arrival = self._pick(place.arrivals).format(who=who)
        if self.prev_place is None:  # the chat's first message: no time cue, just the setting
            first = f"{cap(arrival)}."
            recap_head = f"{self.user} and {self.characters[0]} are {place.prep} {place.name}"
        else:
            style = rng.random()
            if style < 0.55:
                first = f"{cue}, {arrival}."
            elif style < 0.8:
                first = f"{cue}, with {self.prev_place.name} far behind, {arrival}."
            else:
                first = f"{cue}, {place.prep} {place.name}."
            recap_head = (
                f"{cue}, {self.user} and {self.characters[0]} arrive {place.prep} {place.name}"
            )
        look = [self._environment(ctx) for _ in range(self._int(1, 2) + attempt // 10)]
        look = list(dict.fromkeys(look))
        if speaker is None:
            text = " ".join([first, *look])
            return Content(f"*{text}*" if rng.random() < 0.75 else text, f"{recap_head}.")
        remark = self._pick(PLACE_REMARKS).format_map(ctx)
        line = self._pick(INTENTS[self._pick(("observe", "plan", "warn"))].lines).format_map(ctx)
        speech = [remark, line] if rng.random() < 0.5 else [line]
        action = self._pick(CHARACTER_ACTIONS).format_map(ctx)
        blocks: list[tuple[str, list[str]]] = [("a", [first, *look]), ("d", speech)]
        if rng.random() < 0.4:
            blocks.append(("a", [action]))
        return Content(self._render(blocks), f"{recap_head}.")
