"""Whole chats: scenes, their openings and planted facts, and SillyTavern-shaped messages."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from autorecap.core.data import NAMESPACE
from autorecap.core.model import Chat
from autorecap.testing._facts import FactDraft, FactPools
from autorecap.testing._results import GeneratedChat, PlantedFact, Scene
from autorecap.testing._words import (
    FACT_KIND_NAMES,
    FACT_KIND_WEIGHTS,
    NPC_DOINGS,
    OOC_REASONS,
    OOC_TAILS,
    PLACES,
    TITLE_HEADS,
    Place,
)
from autorecap.testing._writer import Content, Writer, cap

_EPOCH = datetime(2026, 3, 2)
_DAYS: dict[int, str] = {}  # day number -> ISO date, a cache for `_stamp`


def _stamp(ms: int) -> str:
    """`ms` milliseconds after `_EPOCH` as an ISO date like SillyTavern's: `...T18:11:40.512Z`."""
    seconds, millis = divmod(ms, 1000)
    days, seconds = divmod(seconds, 86_400)
    day = _DAYS.get(days)
    if day is None:
        day = _DAYS[days] = (_EPOCH + timedelta(days=days)).date().isoformat()
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    return f"{day}T{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}Z"


class Builder(Writer):
    """Builds one chat of `n` messages, scene by scene, from the arguments of `generate`."""

    def __init__(
        self,
        n: int,
        *,
        seed: int,
        group: bool,
        with_recaps: bool,
        scene_length: tuple[int, int],
        facts_per_scene: tuple[int, int],
        hidden_rate: float,
        swipe_rate: float,
        narrator_rate: float,
        user: str,
        character: str,
    ) -> None:
        super().__init__(seed=seed, group=group, user=user, character=character)
        self.n = n
        self.group = group
        self.with_recaps = with_recaps
        self.scene_length = scene_length
        self.facts_per_scene = facts_per_scene
        self.hidden_rate = hidden_rate
        self.swipe_rate = swipe_rate
        self.narrator_rate = narrator_rate
        self.pools = FactPools(self.rng, [user, *self.characters])
        self.seen: set[str] = set()
        self.ms = 18 * 3_600_000 + self._below(3_600_000)

    # -- top level ---------------------------------------------------------------------------

    def build(self, chat_id: str) -> GeneratedChat:
        rng = self.rng
        header: dict[str, Any] = {
            "chat_metadata": {"integrity": self._uuid()},
            "user_name": "unused",
            "character_name": "unused",
        }
        chat = Chat(header=header, chat_id=chat_id)
        result = GeneratedChat(chat=chat)
        bounds = self._scene_bounds()
        recent: list[Place] = []
        for number, (start, end) in enumerate(bounds):
            choices = [p for p in PLACES if all(p is not r for r in recent)] or list(PLACES)
            place = self._pick(choices)
            recent = [*recent[-3:], place]
            self.prev_place, self.place = (self.place if number else None), place
            self._base_ctx.clear()
            self.intent = self.topic = ""
            title = (
                self._pick(place.titles)
                if rng.random() < 0.5
                else f"{self._pick(TITLE_HEADS)} {place.prep} {place.name}"
            )
            result.scenes.append(Scene(start=start, end=end, title=title, place=place.name))
            facts = self._fact_positions(start, end)
            self._scene(chat, result, number, start, end, facts)
        return result

    def _uuid(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:]}"

    def _scene_bounds(self) -> list[tuple[int, int]]:
        bounds: list[tuple[int, int]] = []
        start = 0
        low, high = self.scene_length
        while start < self.n:
            end = min(start + self._int(low, high), self.n) - 1
            bounds.append((start, end))
            start = end + 1
        return bounds

    def _fact_positions(self, start: int, end: int) -> dict[int, FactDraft]:
        # Never the scene's opening message; not its last one either when the scene is long
        # enough to avoid it.
        eligible = list(range(start + 1, end if end - start >= 2 else end + 1))
        want = min(self._int(*self.facts_per_scene), len(eligible))
        positions = sorted(self.rng.sample(eligible, want)) if want else []
        drafts: dict[int, FactDraft] = {}
        for position in positions:
            draft = self._draw_fact()
            if draft is None:
                break
            drafts[position] = draft
        return drafts

    def _draw_fact(self) -> FactDraft | None:
        rng = self.rng
        kind = rng.choices(FACT_KIND_NAMES, FACT_KIND_WEIGHTS)[0]
        draft = self.pools.draw(kind)
        if draft is not None:
            return draft
        for other in FACT_KIND_NAMES:
            draft = self.pools.draw(other)
            if draft is not None:
                return draft
        return None

    # -- one scene ---------------------------------------------------------------------------

    def _scene(
        self,
        chat: Chat,
        result: GeneratedChat,
        number: int,
        start: int,
        end: int,
        facts: dict[int, FactDraft],
    ) -> None:
        rng = self.rng
        if number:
            self.ms += self._int(15 * 60_000, 18 * 3_600_000)  # a session break
        prev = ""  # role of the previous message: "user", "char", "narrator" or "hidden"
        last_char = self.characters[0]
        for index in range(start, end + 1):
            if index == start:
                if rng.random() < (0.65 if number else 0.4):
                    chat.append(self._narrator(opening=True)[0])
                    prev = "narrator"
                else:
                    last_char = self._pick_character(last_char, fresh=False)
                    chat.append(self._character(last_char, opening=True)[0])
                    prev = "char"
                continue
            draft = facts.get(index)
            roll = rng.random()
            if roll < self.hidden_rate and draft is None:
                chat.append(self._hidden())
                prev = "hidden"
                continue
            if roll < self.hidden_rate + self.narrator_rate:
                role = "narrator"
            elif prev == "user":
                role = "char"
            elif prev == "char":
                role = "user" if rng.random() < (0.65 if self.group else 0.85) else "char"
            else:
                role = "user" if rng.random() < 0.5 else "char"
            if role == "narrator":
                message, fact_text = self._narrator(draft=draft)
            elif role == "user":
                message, fact_text = self._user(draft=draft)
            else:
                last_char = self._pick_character(last_char, fresh=prev == "char")
                message, fact_text = self._character(last_char, draft=draft)
            if draft is not None:
                result.facts.append(
                    PlantedFact(
                        index=index,
                        scene=number,
                        question=draft.question,
                        answer=draft.answer,
                        text=fact_text,
                    )
                )
            chat.append(message)
            prev = role

    def _pick_character(self, last: str, *, fresh: bool) -> str:
        if len(self.characters) == 1:
            return last
        if fresh:
            return self._pick([c for c in self.characters if c != last])
        return self._pick(self.characters)

    # -- messages ----------------------------------------------------------------------------

    def _unique(self, make: Callable[[int], Content]) -> Content:
        """`make(attempt)` until its text is new to this chat (a few tries past 2,000 messages)."""
        tries = 60 if self.n <= 2000 else 6
        content = make(0)
        attempt = 1
        while content.text in self.seen and attempt < tries:
            content = make(attempt)
            attempt += 1
        self.seen.add(content.text)
        return content

    def _tick(self, low_s: int, high_s: int) -> int:
        self.ms += self._int(low_s * 1000, high_s * 1000)
        return self.ms

    def _recap(self, message: dict[str, Any], content: Content) -> None:
        if self.with_recaps:
            message["extra"][NAMESPACE] = {"memory": content.recap, "include": None}

    def _user(self, *, draft: FactDraft | None) -> tuple[dict[str, Any], str]:
        """A user message, and the fact sentence planted in it (if `draft`)."""
        listener = self._pick(self.characters)
        intent, topic = self._intent_topic()
        fact_text = ""

        def make(attempt: int) -> Content:
            nonlocal fact_text
            count = self._int(1, 3) + (attempt // 10)
            blocks, fact_text = self._body("user", listener, listener, intent, topic, count, draft)
            return Content(
                self._render(blocks), self._chatter_recap(self.user, listener, intent, topic, draft)
            )

        content = self._unique(make)
        message: dict[str, Any] = {
            "name": self.user,
            "is_user": True,
            "is_system": False,
            "send_date": _stamp(self._tick(15, 240)),
            "mes": content.text,
            "extra": {},
        }
        self._recap(message, content)
        return message, fact_text

    def _hidden(self) -> dict[str, Any]:
        """A hidden out-of-character note from the user (`is_system: true`, no recap)."""
        c = self._short(self.characters[0])

        def make(attempt: int) -> Content:
            reason = self._pick(OOC_REASONS)
            tail = self._pick(OOC_TAILS).format(c=c, place=self.place.name)
            if attempt > 3:
                tail += self._pick((" 🙏", " ty!", " :)", " ❤️", " lol"))
            return Content(f"(OOC: {reason}.{tail})" if tail else f"(OOC: {reason})", "")

        content = self._unique(make)
        return {
            "name": self.user,
            "is_user": True,
            "is_system": True,
            "send_date": _stamp(self._tick(5, 90)),
            "mes": content.text,
            "extra": {},
        }

    def _narrator(
        self, *, opening: bool = False, draft: FactDraft | None = None
    ) -> tuple[dict[str, Any], str]:
        """A narrator message, and the fact sentence planted in it (if `draft`)."""
        rng = self.rng
        fact_text = ""

        def make(attempt: int) -> Content:
            nonlocal fact_text
            if opening:
                return self._opening_content(None, attempt)
            ctx = self._ctx(self._short(self._pick(self.characters)), self.user_short)
            npc = self._pick(self.place.npcs)
            doing = self._pick(NPC_DOINGS).format_map(ctx)
            sentences = [f"{cap(npc)} {doing}."]
            for _ in range(self._int(0, 2) + attempt // 10):
                sentences.append(self._environment(ctx))
            if rng.random() < 0.4:
                sentences.reverse()
            recap = f"At {self.place.name}, {npc} {doing}."
            if draft is not None:
                fact_text = self._pick(draft.kind.narrated).format_map(self._fact_fields(draft))
                sentences.insert(self._int(0, len(sentences)), fact_text)
                recap = f"At {self.place.name}, it comes out that {draft.clause}."
            text = " ".join(sentences)
            return Content(f"*{text}*" if rng.random() < 0.7 else text, recap)

        content = self._unique(make)
        message: dict[str, Any] = {
            "name": "Narrator",
            "is_user": False,
            "is_system": False,
            "send_date": _stamp(self._tick(10, 120)),
            "mes": content.text,
            "extra": {"type": "narrator"},
        }
        self._recap(message, content)
        return message, fact_text

    def _character(
        self, name: str, *, opening: bool = False, draft: FactDraft | None = None
    ) -> tuple[dict[str, Any], str]:
        """A character reply with its swipes, and the fact sentence planted in it (if `draft`).

        The fact goes into the active swipe only; the other swipes are alternative replies."""
        rng = self.rng
        listener = self.user
        intent, topic = self._intent_topic()
        fact_text = ""

        def make_plain(attempt: int) -> Content:
            if opening:
                return self._opening_content(name, attempt)
            count = self._int(2, 7) + attempt // 10
            blocks, _ = self._body("char", name, listener, intent, topic, count, None)
            return Content(
                self._render(blocks), self._chatter_recap(name, listener, intent, topic, None)
            )

        def make_active(attempt: int) -> Content:
            nonlocal fact_text
            if draft is None:
                return make_plain(attempt)
            count = self._int(2, 6) + attempt // 10
            blocks, fact_text = self._body("char", name, listener, intent, topic, count, draft)
            return Content(
                self._render(blocks), self._chatter_recap(name, listener, intent, topic, draft)
            )

        swipe_count = 1 if rng.random() >= self.swipe_rate else self._int(2, 3)
        active = self._below(swipe_count)
        contents: list[Content] = []
        for k in range(swipe_count):
            if k == active:
                contents.append(self._unique(make_active))
                continue
            alternative = make_plain(0)
            attempt = 1
            while any(alternative.text == other.text for other in contents) and attempt < 60:
                alternative = make_plain(attempt)
                attempt += 1
            contents.append(alternative)
        # Swipes are generated one after another; the message shows the active one's times.
        times: list[tuple[str, str]] = []
        for k in range(swipe_count):
            started = self._tick(1, 4) if k == 0 else self._tick(8, 90)
            finished = self._tick(4, 40)
            times.append((_stamp(started), _stamp(finished)))
        started_at, finished_at = times[active]
        swipe_info: list[dict[str, Any]] = [
            {
                "send_date": f,
                "gen_started": s,
                "gen_finished": f,
                "extra": {"api": "openai", "model": "some-model-v1"},
            }
            for s, f in times
        ]
        message: dict[str, Any] = {
            "name": name,
            "is_user": False,
            "is_system": False,
            "send_date": finished_at,
            "mes": contents[active].text,
            "extra": {"api": "openai", "model": "some-model-v1"},
            "gen_started": started_at,
            "gen_finished": finished_at,
        }
        if self.group:
            message["force_avatar"] = f"characters/{name}.png"
            message["original_avatar"] = f"{name}.png"
        message["swipe_id"] = active
        message["swipes"] = [content.text for content in contents]
        message["swipe_info"] = swipe_info
        if self.with_recaps:
            recap = {"memory": contents[active].recap, "include": None}
            message["extra"][NAMESPACE] = recap
            swipe_info[active]["extra"][NAMESPACE] = dict(recap)
        return message, fact_text
