"""Seeded generation of realistic long SillyTavern roleplay chats, with ground truth.

`generate(n, seed=...)` builds a chat of `n` messages in an airship adventure setting and returns
it together with what an evaluation needs to know about it:

- **Scenes** (`GeneratedChat.scenes`): contiguous runs of messages, each at its own place. A new
  scene opens the way real chats do, with a message (usually the narrator's, else the
  character's) that moves the story in time and place ("Two days later, the Kestrel noses into
  Berth Nine at Port Anvil."). The place name then recurs inside the scene and the props, people,
  sounds and topics of conversation come from that place's own word bank. Nothing like "SCENE" or
  "---" marks a boundary: a detector has to find it from the text. `GeneratedChat.scene_ends`
  lists where scene breaks belong.
- **Facts** (`GeneratedChat.facts`): short answers (codes, names, prices, dates, places) planted
  inside ordinary mid-scene messages, each with a question it answers. Every answer is unique in
  the chat and appears verbatim in its own message and nowhere else: ordinary chatter never
  contains digits or the invented names the answers are made of.

Messages look like SillyTavern's: user and character lines with `*actions*` and quoted speech,
character replies with `swipes`/`swipe_info` (some with two or three alternatives), narrator
messages, hidden out-of-character notes (`is_system: true`), ISO send dates that always increase
(with a longer gap at scene changes), and in group chats `original_avatar`/`force_avatar`.
`with_recaps=True` stores a one-sentence recap on every visible message, as ST-Auto-Recap would.

The same arguments always give the same chat (only `random.Random(seed)` is used), and 10,000
messages take a fraction of a second. `generate_chat(...)` is `generate(...).chat`.
"""

from __future__ import annotations

from autorecap.core.model import Chat
from autorecap.testing import _builder
from autorecap.testing._results import GeneratedChat, PlantedFact, Scene

__all__ = ["GeneratedChat", "PlantedFact", "Scene", "generate", "generate_chat"]


def generate(
    n_messages: int,
    *,
    seed: int = 0,
    group: bool = False,
    with_recaps: bool = False,
    scene_length: tuple[int, int] = (12, 40),
    facts_per_scene: tuple[int, int] = (1, 3),
    hidden_rate: float = 0.02,
    swipe_rate: float = 0.12,
    narrator_rate: float = 0.05,
    user: str = "Tomas",
    character: str = "Captain Mira",
    chat_id: str = "",
) -> GeneratedChat:
    """Generate a chat of `n_messages` messages with its scenes and planted facts.

    - `seed`: the same arguments always give the same chat (byte for byte once serialized).
    - `group`: a group chat where `character` and one or two companions speak, each message
      carrying `original_avatar`/`force_avatar`.
    - `with_recaps`: store a one-sentence recap on every visible message (and its active swipe).
    - `scene_length`: inclusive range of scene lengths in messages (the last scene may be shorter).
    - `facts_per_scene`: inclusive range of facts planted per scene; fewer when a scene is too
      short, or (only with extreme settings) when the question pools run out.
    - `hidden_rate`, `swipe_rate`, `narrator_rate`: chances that a mid-scene message is a hidden
      out-of-character note, that a character reply has 2-3 swipes, that a message is narration.
    - `user`, `character`: the persona's and the (main) character's names.
    - `chat_id`: defaults to `generated-<n>-<seed>` (`generated-group-<n>-<seed>` for groups).
    """
    if n_messages < 0:
        raise ValueError(f"n_messages must be 0 or more, not {n_messages}")
    low, high = scene_length
    if not 1 <= low <= high:
        raise ValueError(
            f"scene_length must be (min, max) with 1 <= min <= max, not {scene_length}"
        )
    if not 0 <= facts_per_scene[0] <= facts_per_scene[1]:
        raise ValueError(
            f"facts_per_scene must be (min, max) with 0 <= min <= max, not {facts_per_scene}"
        )
    for label, rate in (
        ("hidden_rate", hidden_rate),
        ("swipe_rate", swipe_rate),
        ("narrator_rate", narrator_rate),
    ):
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"{label} must be between 0 and 1, not {rate}")
    if hidden_rate + narrator_rate > 1.0:
        raise ValueError("hidden_rate + narrator_rate must not exceed 1")
    if not user.strip() or not character.strip():
        raise ValueError("user and character names must not be empty")
    builder = _builder.Builder(
        n_messages,
        seed=seed,
        group=group,
        with_recaps=with_recaps,
        scene_length=scene_length,
        facts_per_scene=facts_per_scene,
        hidden_rate=hidden_rate,
        swipe_rate=swipe_rate,
        narrator_rate=narrator_rate,
        user=user,
        character=character,
    )
    default_id = (
        f"generated-group-{n_messages}-{seed}" if group else f"generated-{n_messages}-{seed}"
    )
    return builder.build(chat_id or default_id)


def generate_chat(
    n_messages: int,
    *,
    seed: int = 0,
    with_recaps: bool = False,
    user: str = "Tomas",
    character: str = "Captain Mira",
    chat_id: str = "",
    group: bool = False,
    scene_length: tuple[int, int] = (12, 40),
    facts_per_scene: tuple[int, int] = (1, 3),
    hidden_rate: float = 0.02,
    swipe_rate: float = 0.12,
    narrator_rate: float = 0.05,
) -> Chat:
    """A chat of `n_messages` messages, identical for identical arguments: `generate(...).chat`."""
    return generate(
        n_messages,
        seed=seed,
        group=group,
        with_recaps=with_recaps,
        scene_length=scene_length,
        facts_per_scene=facts_per_scene,
        hidden_rate=hidden_rate,
        swipe_rate=swipe_rate,
        narrator_rate=narrator_rate,
        user=user,
        character=character,
        chat_id=chat_id,
    ).chat
