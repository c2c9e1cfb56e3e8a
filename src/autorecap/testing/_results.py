"""What `generate` returns: the chat, its scenes and its planted facts."""

from __future__ import annotations

from dataclasses import dataclass, field

from autorecap.core.model import Chat


@dataclass(frozen=True)
class PlantedFact:
    """A fact stated once in the chat, with a question whose answer is a short exact string."""

    index: int
    """Index of the message that states the fact."""
    scene: int
    """Number (0-based) of the scene that message belongs to."""
    question: str
    """A question the fact answers, e.g. "What is the code of the vault under the old mill?"."""
    answer: str
    """The short answer, e.g. "4417" or "Harrow Vane": it appears verbatim in the message's
    text and in no other message of the chat."""
    text: str
    """The planted sentence, exactly as it appears in the message's `mes`."""


@dataclass(frozen=True)
class Scene:
    """A scene: consecutive messages at one place. Scenes are contiguous and cover the chat."""

    start: int
    """Index of the scene's first message (the one that announces the new time and place)."""
    end: int
    """Index of the scene's last message (inclusive)."""
    title: str
    """A short title, e.g. "Hard Bargains at the Glass Market"."""
    place: str
    """Where the scene happens, as written in the text (e.g. "the Glass Market")."""


@dataclass
class GeneratedChat:
    """A generated chat and its ground truth: scenes and planted facts."""

    chat: Chat
    scenes: list[Scene] = field(default_factory=list)
    facts: list[PlantedFact] = field(default_factory=list)

    @property
    def scene_ends(self) -> list[int]:
        """End index of every scene but the last: the messages after which a scene break goes."""
        return [scene.end for scene in self.scenes[:-1]]
