"""The one interface every recap backend implements."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date

from autorecap.errors import AutorecapError

_AUTOMATIC_NAME = re.compile(r"^Scene \d+(?: \(\d+-\d+\)|: .*)?$")
"""A scene name the detection gave ("Scene 4", "Scene 4: Tuesday", its word said most), not
the user: no day or place to head a recap line with."""


class LLMError(AutorecapError):
    """An LLM call that failed for good (after its retries). The message never holds a key."""

    http_status = 502

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class Failure(str):
    """A failure as the pipeline lists it ("scene 3: the LLM refused..."), with the error
    behind it: a job must know whether the LLM refused for good or may answer later."""

    error: AutorecapError

    def __new__(cls, line: str, error: AutorecapError) -> Failure:
        made = super().__new__(cls, line)
        made.error = error
        return made

    def raised(self) -> AutorecapError:
        """The error to raise for this failure: its line, of the kind of the error behind
        it (an LLM's refusal stays one)."""
        if isinstance(self.error, LLMError):
            return LLMError(str(self), status=self.error.status, retryable=self.error.retryable)
        return AutorecapError(str(self))


@dataclass(frozen=True)
class ContextMessage:
    """An earlier message shown with the one being recapped."""

    name: str
    text: str


@dataclass(frozen=True)
class RecapRequest:
    """What a message recap needs: the message, who wrote it, and what came before."""

    text: str
    name: str
    user: str = "User"
    char: str = "Assistant"
    context: tuple[ContextMessage, ...] = ()
    earlier_recaps: tuple[str, ...] = ()
    """Recaps of the messages just before, so that the offline engine can skip repeats."""
    max_tokens: int = 80
    day: date | None = None
    """The day the message was written, when the chat's dates are the story's own (a chat
    across days of sessions): "yesterday" in it can then be made a date."""


@dataclass(frozen=True)
class SceneMessage:
    """One message of a scene, with its recap when it has one."""

    index: int
    name: str
    text: str
    recap: str = ""
    narrator: bool = False


@dataclass(frozen=True)
class SceneRecapRequest:
    """A closed scene to recap."""

    messages: tuple[SceneMessage, ...]
    name: str = ""
    user: str = "User"
    char: str = "Assistant"
    max_tokens: int = 200
    day: date | None = None
    """The scene's day, when the chat's dates are the story's own (see `RecapRequest.day`)."""
    place: str = ""
    """Where the scene happens, when its opening says so."""


@dataclass(frozen=True)
class CombineRequest:
    """The running recap so far and the next scene's recap, to fold into a new version."""

    previous: str
    scene_recap: str
    scene_name: str
    max_tokens: int = 2000

    @property
    def line(self) -> str:
        """The new scene's line: "- " and its recap, with the scene's name in brackets
        before it when the recap does not open with its day or place ("[...]") and the user
        named the scene (an automatic name, "Scene 4: Tuesday", would put a word said in
        passing where a day or place goes)."""
        recap = _without_repeats(" ".join(self.scene_recap.split()), self.previous)
        name = self.scene_name.strip()
        if not recap.startswith("[") and name and not _AUTOMATIC_NAME.match(name):
            recap = f"[{name}] {recap}"
        return f"- {recap}".rstrip()


_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
_LABEL = re.compile(r"^((?:\[[^\]]*\]\s*)?(?:[A-Z][\w.'’-]*\s){0,3}[A-Z][\w.'’-]*:\s)(.*)$")
"""A sentence's head: the line's "[day · place]" and a speaker's "Name: "."""
REPEAT_WORDS = 4
"""The fewest words of a sentence left out for being said already (a short one may be new)."""


def _without_repeats(recap: str, previous: str) -> str:
    """The recap without the sentences the running recap says word for word already (a
    character's catchphrase, scene after scene); a speaker's label or the line's header goes
    to the next sentence kept."""
    if not previous:
        return recap
    sentences = [
        s for line in previous.splitlines() for s in _SENTENCE_END.split(line.removeprefix("- "))
    ]
    said = {_plain(s) for s in sentences}
    said |= {_plain(m.group(2)) for s in sentences if (m := _LABEL.match(s))}
    kept: list[str] = []
    head = ""
    speaking = ""
    for sentence in _SENTENCE_END.split(recap):
        match = _LABEL.match(sentence)
        label, body = (match.group(1), match.group(2)) if match else ("", sentence)
        if len(body.split()) >= REPEAT_WORDS and _plain(body) in said:
            head = label or head
            continue
        if head and not label:
            label, sentence = head, head + sentence
        elif head.startswith("[") and not label.startswith("["):
            label = head.split("]", 1)[0] + "] " + label
            sentence = label + body
        head = ""
        name = label.rsplit("]", 1)[-1].strip()
        if name and name == speaking and not label.startswith("["):
            sentence = body  # the one speaking already: no label again
        speaking = name or speaking
        kept.append(sentence)
    return " ".join(kept) if kept else recap


def _plain(sentence: str) -> str:
    return " ".join(re.findall(r"\w+", sentence.lower()))


@dataclass(frozen=True)
class MergeRequest:
    """What the combined recap needs: every message recap, oldest first."""

    recaps: tuple[str, ...]
    max_tokens: int = 1000


@dataclass(frozen=True)
class SceneBreakRequest:
    """Messages to look for scene breaks in. Each answer is the index of a message that ends
    a scene, in `[earliest, latest]` (far enough from the last break, not too close to the
    end), two of them at least `minimum` messages apart."""

    messages: tuple[SceneMessage, ...]
    earliest: int
    latest: int
    minimum: int = 1


@dataclass
class RecapResult:
    """A recap, with what the backend said on the side."""

    memory: str
    reasoning: str | None = None
    prefill: str | None = None
    extras: dict[str, object] = field(default_factory=dict)


@dataclass
class Usage:
    """What a backend has spent: calls to its model and the tokens they carried."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failed_calls: int = 0
    """Calls that got no answer (refused, timed out, an error status), among `calls`."""
    failed_prompt_tokens: int = 0
    """What those calls sent, by our count (a provider may bill a call that timed out)."""

    def add(self, other: Usage) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.failed_calls += other.failed_calls
        self.failed_prompt_tokens += other.failed_prompt_tokens


class RecapBackend(ABC):
    """Writes recaps. `name` says which backend it is (for logs and stored metadata)."""

    name: str = "backend"
    batch_tokens: int = 0
    """How many tokens of messages one call may recap together (`message_recaps`); 0: one
    message per call."""
    condense_to: float = 1.0
    """The share of `running_scene_recap_max_tokens` a condensed running recap is asked to fit
    in. Below 1, the next scenes' lines are appended without a call until the cap is reached
    again (a backend whose calls cost, an LLM's); 1 keeps as much as the cap allows."""

    @property
    def usage(self) -> Usage:
        """What this backend has spent so far (nothing, for the offline engine)."""
        found: Usage | None = self.__dict__.get("_usage")
        if found is None:
            found = self.__dict__["_usage"] = Usage()
        return found

    @abstractmethod
    def message_recap(self, request: RecapRequest) -> RecapResult:
        """The recap of one message. Raises `LLMError` when it cannot be made."""

    def message_recaps(
        self, requests: Sequence[RecapRequest]
    ) -> list[RecapResult | AutorecapError]:
        """The recaps of consecutive messages, in order, each a result or the error that
        stopped it. A backend that can recap several messages in one call overrides this."""
        results: list[RecapResult | AutorecapError] = []
        for request in requests:
            try:
                results.append(self.message_recap(request))
            except AutorecapError as error:
                results.append(error)
        return results

    @abstractmethod
    def scene_recap(self, request: SceneRecapRequest) -> RecapResult:
        """The recap of one closed scene."""

    @abstractmethod
    def combine(self, request: CombineRequest) -> RecapResult:
        """The next running recap: the previous one with the new scene folded in, within
        `max_tokens` (the caller enforces the cap too)."""

    @abstractmethod
    def find_scene_breaks(self, request: SceneBreakRequest) -> list[int]:
        """The indexes of the messages that end a scene within the request's range, in order
        (none: an empty list)."""

    def merge_recaps(self, request: MergeRequest) -> RecapResult:
        """The combined recap: the message recaps merged into one narrative within
        `max_tokens` (the caller enforces the cap too)."""
        raise AutorecapError(f"the {self.name} backend cannot merge recaps into a combined recap")

    def close(self) -> None:  # noqa: B027 - optional: only backends holding resources need it
        """Release what the backend holds (HTTP connections)."""
