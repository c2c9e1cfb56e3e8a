"""`OfflineBackend.message_recap`: the extractive engine's recaps are deterministic, keep what a
memory needs (numbers, names, places, planted facts), and never exceed the token cap."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from autorecap.core.data import get_data
from autorecap.core.model import Chat
from autorecap.core.tokens import TokenCounter
from autorecap.recap.backend import CombineRequest, RecapRequest
from autorecap.recap.detection import scene_title
from autorecap.recap.messages import build_request, recap_all
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.settings import Settings
from autorecap.testing import generate

COUNTER = TokenCounter("cl100k")
BACKEND = OfflineBackend(COUNTER)


def recap(
    text: str, name: str = "Mira", max_tokens: int = 80, earlier_recaps: tuple[str, ...] = ()
) -> str:
    request = RecapRequest(
        text=text, name=name, max_tokens=max_tokens, earlier_recaps=earlier_recaps
    )
    return BACKEND.message_recap(request).memory


LONG_MESSAGE = (
    '*Mira leans over the chart table.* "Listen carefully, Tomas. The vault under the old mill '
    "opens with 4417, and only Harrow Vane knows it. We leave Port Anvil at dawn. The wind is "
    "cold tonight and the crew is tired. Nobody sleeps well before a long crossing. I promised "
    'the harbour master we would pay the 60 crowns we owe him before we go."'
)


# --- determinism and content -----------------------------------------------------------------


def test_the_same_message_gives_the_same_recap() -> None:
    first = recap(LONG_MESSAGE)
    assert first
    assert all(recap(LONG_MESSAGE) == first for _ in range(3))
    assert (
        OfflineBackend().message_recap(RecapRequest(text=LONG_MESSAGE, name="Mira")).memory == first
    )


def test_a_recap_is_shorter_than_a_long_message() -> None:
    assert COUNTER.count(recap(LONG_MESSAGE)) < COUNTER.count(LONG_MESSAGE)


def test_a_code_and_a_name_are_kept() -> None:
    text = (
        "Listen. The vault opens with 4417 and only Harrow Vane knows it. The wind is cold "
        "tonight and the crew is tired of waiting around."
    )
    memory = recap(text)
    assert "4417" in memory
    assert "Harrow Vane" in memory


def test_the_best_sentence_is_kept_when_it_barely_overflows_the_cap() -> None:
    """Regression (fact loss): the soft cap of this 27-token message is 24 tokens; the
    informative sentence costs 21 plus 4 for "Mira: ". It used to be skipped whole, and the filler
    sentence that fits was kept instead."""
    text = (
        "The vault under the old mill opens with 4417, and only Harrow Vane knows it. "
        "The wind is cold."
    )
    memory = recap(text)
    assert memory != "Mira: The wind is cold."
    assert "4417" in memory


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "The weather is grey. We should get moving soon. The password for the vault is "
            "Cobalt Nine, and the door is at 12 Salt Street.",
            ["Cobalt Nine", "12 Salt Street"],
        ),
        (
            "I am tired of all this waiting around. Pell sold the Kestrel's spare sail for 85 "
            "crowns at the Glass Market. It is what it is.",
            ["Pell", "85 crowns", "Glass Market"],
        ),
    ],
)
def test_numbers_names_and_places_are_kept(text: str, kept: list[str]) -> None:
    memory = recap(text, name="Tomas")
    for fragment in kept:
        assert fragment in memory


def test_the_name_prefix() -> None:
    assert recap("We sail at dawn from Port Anvil.", name="Captain Mira").startswith(
        "Captain Mira: "
    )
    assert recap("We sail at dawn from Port Anvil.", name="  ") == (
        "We sail at dawn from Port Anvil."
    )


def test_an_empty_message_has_an_empty_recap() -> None:
    assert recap("") == ""
    assert recap("   \n\t ") == ""
    assert recap("***") == ""


def test_markup_asterisks_are_removed() -> None:
    memory = recap("*Mira draws her sword.* **Nobody** moves, or Pell dies at 3 bells.")
    assert "*" not in memory
    assert "Mira draws her sword." in memory or "Nobody moves" in memory


def test_abbreviations_do_not_split_sentences() -> None:
    text = "Mr. Pell paid 40 crowns to Dr. Vance at St. Ives. It rained."
    memory = recap(text, name="Narrator")
    assert "Mr. Pell paid 40 crowns to Dr. Vance at St. Ives." in memory
    assert not memory.endswith("Mr.")


def test_sentences_repeating_earlier_recaps_are_skipped() -> None:
    text = (
        "The Kestrel leaves Port Anvil at dawn with Harrow Vane aboard. "
        "Pell counts 40 crowns into the strongbox below decks."
    )
    alone = recap(text)
    assert "Port Anvil" in alone
    after = recap(
        text,
        earlier_recaps=("Mira: The Kestrel leaves Port Anvil at dawn with Harrow Vane aboard.",),
    )
    assert "Port Anvil" not in after
    assert "40 crowns" in after


def test_a_message_that_only_repeats_still_gets_a_recap() -> None:
    text = "The Kestrel leaves Port Anvil at dawn with Harrow Vane aboard."
    memory = recap(text, earlier_recaps=(text,))
    assert memory.startswith("Mira: ")
    assert len(memory) > len("Mira: ")


def test_half_quotes_are_balanced() -> None:
    memory = recap('"We leave at dawn. Pell owes us 40 crowns," Mira says. The end.')
    assert memory.count('"') % 2 == 0


# --- the hard cap ----------------------------------------------------------------------------

_WORD = st.text(
    alphabet=st.characters(
        whitelist_categories=("Ll", "Lu", "Nd"), max_codepoint=0x24F
    ),  # Latin letters incl. accented ones, and digits
    min_size=1,
    max_size=10,
)
_PUNCT = st.sampled_from(["", "", "", ",", ".", "!", "?", "…", "*", '"', "Mr."])
_SPACED_TEXT = st.lists(st.tuples(_WORD, _PUNCT), max_size=300).map(
    lambda words: " ".join(w + p for w, p in words)
)
HUGE_SENTENCE = " ".join(["the airship drifts over the silent harbour"] * 150)
UNICODE_TEXT = "Émile paie 40 couronnes à Zoë. Ça coûte cher! Die Brücke über Ærø ist weg… Ok."


@settings(max_examples=200, deadline=None)
@given(
    text=st.one_of(_SPACED_TEXT, st.text(max_size=1500)),
    name=st.one_of(st.sampled_from(["", "Mira", "Captain Mira", "Zoë"]), st.text(max_size=40)),
    max_tokens=st.integers(min_value=8, max_value=300),
)
@example(text="", name="Mira", max_tokens=80)
@example(text=HUGE_SENTENCE, name="Mira", max_tokens=40)
@example(text=HUGE_SENTENCE, name="Captain Mira", max_tokens=80)
@example(text=UNICODE_TEXT * 20, name="Zoë", max_tokens=40)
def test_a_recap_never_exceeds_its_cap(text: str, name: str, max_tokens: int) -> None:
    request = RecapRequest(text=text, name=name, max_tokens=max_tokens)
    memory = BACKEND.message_recap(request).memory
    assert COUNTER.count(memory) <= max_tokens
    assert BACKEND.message_recap(request).memory == memory  # deterministic too


@pytest.mark.parametrize("max_tokens", [8, 12, 80])
def test_the_cap_holds_for_small_caps_with_ordinary_words(max_tokens: int) -> None:
    for text in (HUGE_SENTENCE, LONG_MESSAGE, UNICODE_TEXT * 5):
        memory = recap(text, name="Mira", max_tokens=max_tokens)
        assert COUNTER.count(memory) <= max_tokens
        assert memory.startswith("Mira: ")


@pytest.mark.parametrize(
    ("text", "name", "max_tokens"),
    [
        ("我们在黎明时分起航船长说我们必须在风暴来临之前到达港口" * 10, "Mira", 80),
        ("a" * 2000, "Mira", 80),
        ("The ship sails at dawn. It is fine.", "Captain Mira Longname Of The Seven Seas", 8),
    ],
    ids=["cjk-no-spaces", "one-long-word", "name-longer-than-cap"],
)
def test_the_cap_holds_for_text_without_spaces_and_long_names(
    text: str, name: str, max_tokens: int
) -> None:
    """Regression: the hard cap used to be enforced only by cutting whole words, always keeping
    the first word and the name prefix: text with no whitespace (CJK, a long token) or a name
    longer than the cap gave a recap far over `max_tokens` (336 tokens for the CJK case)."""
    memory = recap(text, name=name, max_tokens=max_tokens)
    assert COUNTER.count(memory) <= max_tokens


# --- planted facts in generated chats --------------------------------------------------------

SEEDS = range(6)
OBSERVED_RATE = 0.905
"""Share of planted facts whose answer the offline recap kept, over SEEDS (135 of 147 facts),
when this test was written."""


def _fact_keeping() -> tuple[int, int]:
    kept = total = 0
    settings_ = Settings()
    for seed in SEEDS:
        generated = generate(300, seed=seed)
        stats = recap_all(generated.chat, BACKEND, settings_, COUNTER)
        assert stats.failed == 0
        for fact in generated.facts:
            total += 1
            memory = get_data(generated.chat.messages[fact.index], "memory") or ""
            kept += fact.answer in memory
    return kept, total


def test_a_code_in_a_long_clause_is_kept_over_a_gesture() -> None:
    text = (
        "Ennis Council's buying. *slides the stamped paper across* Claim's registered with the "
        "harbourmaster, all legal and boring, number 7-SABLE-22 if anybody asks, and anybody "
        "who isn't us touches that lens, they're thieves, not salvagers. Sit on it, Tams, I "
        "know you want to draw a moustache on the seal."
    )
    assert "7-SABLE-22" in recap(text, name="Juno", max_tokens=80)


def test_a_kept_clause_reads_on_from_the_one_before_it() -> None:
    text = (
        "*She lifts the plum to her ear.* A woman's voice comes out of it, soft and slightly "
        "hoarse, singing in the old valley way, the words blurred with age: Sleep, little "
        "Millwheel, the water's gone still, the miller is dreaming up on the hill."
    )
    said = recap(text, name="Ysolde", max_tokens=200)
    assert "Sleep, little Millwheel" in said  # not "Sleep. Little Millwheel"
    assert ". Little" not in said


def test_planted_facts_survive_in_their_messages_recaps() -> None:
    """The goal: at least 90% of planted facts survive into the recap of the message that
    states them (the first version of the engine kept 59%)."""
    kept, total = _fact_keeping()
    print(f"offline fact-keeping rate: {kept}/{total} = {kept / total:.3f}")
    assert total > 100
    assert kept / total >= 0.90
    assert kept / total >= OBSERVED_RATE - 0.015  # no regression from what was measured


def test_a_single_recap_of_a_fact_message_matches_recap_all() -> None:
    generated = generate(300, seed=0)
    chat = generated.chat
    settings_ = Settings()
    fact = generated.facts[0]
    direct = BACKEND.message_recap(build_request(chat, fact.index, settings_, COUNTER)).memory
    recap_all(chat, BACKEND, settings_, COUNTER)
    assert get_data(chat.messages[fact.index], "memory") == direct


def test_a_name_before_the_text_names_the_speaker_once() -> None:
    """SillyTavern puts a group character's name before its text ("Mae: ..."), and, with
    names in content, a single character's too: the recap names each speaker once."""
    chat = Chat(chat_id="group", header={"chat_metadata": {}})
    for name, text in [
        ("Assistant", "Mae: The safe is a Kessler Imperial, four wheels, installed in 1919."),
        ("Rook", "Rook: Then we need the locksmith on Bell Lane before Thursday."),
    ]:
        chat.append({"name": name, "is_user": False, "mes": text})
    defaults = Settings()
    recaps = [
        BACKEND.message_recap(build_request(chat, i, defaults, COUNTER)).memory for i in range(2)
    ]
    assert recaps[0].startswith("Mae: ")
    assert recaps[1].startswith("Rook: ")
    assert all(": Mae" not in r and ": Rook" not in r for r in recaps)


def test_an_action_between_asterisks_is_a_sentence_of_its_own() -> None:
    """Dialogue roleplay writes gestures between asterisks with no full stop before the
    speech ("*leans in* Stamped Hobbs & Carrow"): the recap keeps what is said without the
    gesture."""
    text = (
        "*Leans in to look at the lock in the bad light* Stamped Hobbs & Carrow on the back, 1911."
    )
    memory = recap(text, name="Nadia")
    assert "Hobbs & Carrow" in memory
    assert "bad light" not in memory


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("The docks", "- [The docks] They sold the kestrel."),  # the user's name for it
        ("Scene 2: Tuesday", "- They sold the kestrel."),  # a word said in passing
        ("Scene 4 (120-141)", "- They sold the kestrel."),
        ("", "- They sold the kestrel."),
    ],
)
def test_a_running_recap_line_is_headed_only_by_a_name_the_user_gave(name: str, line: str) -> None:
    assert CombineRequest("", "They sold the kestrel.", name).line == line
    dated = CombineRequest("", "[4 May] They sold the kestrel.", name).line
    assert dated == "- [4 May] They sold the kestrel."


def test_a_scene_is_named_for_what_it_is_about_not_a_day_or_a_quoted_word() -> None:
    said = [
        {"name": "Mae", "is_user": False, "mes": "I've done worse on a Tuesday. *Keep walking.*"},
        {"name": "Rook", "is_user": True, "mes": 'She whispers "Keep your voice down" to me.'},
        {"name": "Mae", "is_user": False, "mes": "We meet at the Copper Kettle tonight."},
        {"name": "Rook", "is_user": True, "mes": "Fine, the Copper Kettle it is, on Tuesday."},
        {"name": "Mae", "is_user": False, "mes": 'Worse than a Tuesday. "Keep up," she says.'},
    ]
    chat = Chat(said, chat_id="c")
    assert scene_title(chat.messages, 3) == "Scene 4: Copper Kettle"


def test_a_running_recap_line_leaves_out_what_earlier_lines_say_word_for_word() -> None:
    before = (
        "- [4 March] Hale: Don't like coincidences at all. We go now.\n"
        "- Nell: That is three lies in ten minutes."
    )
    scene = (
        "[5 March] Hale: Don't like coincidences at all. The safe code is 3309. "
        "Nell: That is three lies in ten minutes. Hale: Fine. Nell: We go now."
    )
    line = CombineRequest(before, scene, "").line
    # The speaker of a sentence kept keeps their label; a short sentence may be new.
    assert line == "- [5 March] Hale: The safe code is 3309. Fine. Nell: We go now."
    # A scene that says only what was said keeps its line whole (never an empty one).
    again = "Hale: Don't like coincidences at all."
    assert CombineRequest(before, again, "").line == f"- {again}"


def test_a_scene_is_not_named_as_the_scene_before_it() -> None:
    """A journey's scenes all mention where it goes: the next one is named for what else it
    mentions most, unless that is all it mentions."""
    said = [
        {"name": "Mae", "is_user": False, "mes": "Past the Cinder Line by noon, then."},
        {"name": "Rook", "is_user": True, "mes": "The Cinder Line again. And Port Anvil after."},
        {"name": "Mae", "is_user": False, "mes": "We dock at Port Anvil, past the Cinder Line."},
    ]
    chat = Chat(said, chat_id="c")
    assert scene_title(chat.messages, 1) == "Scene 2: Cinder Line"
    assert scene_title(chat.messages, 2, before="Scene 2: Cinder Line") == "Scene 3: Port Anvil"
    alone = Chat(
        [{"name": "Mae", "is_user": False, "mes": "Back to the Cinder Line."}], chat_id="d"
    )
    assert scene_title(alone.messages, 2, before="Scene 2: Cinder Line") == "Scene 3: Cinder Line"
