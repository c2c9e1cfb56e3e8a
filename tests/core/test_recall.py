"""The recall tier's pure logic (`autorecap.core.recall`): the words a query keeps, what a turn
asks about, the pieces hits give (and what they leave out), and the injection that fits."""

from __future__ import annotations

from typing import Any

import pytest

from autorecap import Chat, set_data
from autorecap.core.asking import (
    MOST_WORDS,
    TOLD_WEIGHT,
    answer_kinds,
    answer_weight,
    asked_words,
    names_a_sum,
    query_forms,
    query_words,
    text_words,
)
from autorecap.core.excerpts import PIECE_TOKENS, excerpt_answer_weight, excerpt_of
from autorecap.core.recall import (
    ANSWER_BOOST,
    ASKS_ALONE,
    NEIGHBOUR_SHARE,
    RECALL_KEY,
    REPEAT_SHARE,
    SHORTEST_CUT,
    RecallPiece,
    query_text,
    recall_pieces,
    recall_text,
    set_recall_slot,
)
from autorecap.core.scenes import add_recap_version, mark_break
from autorecap.core.slots import ExtensionPrompts
from autorecap.core.tokens import get_counter
from autorecap.settings import DEFAULT_RECALL_TEMPLATE, Settings

COUNTER = get_counter()
DATE = "2023-05-08T10:00:00.000Z"


def message(
    text: str, *, user: bool = False, hidden: bool = False, date: str | None = None
) -> dict[str, Any]:
    found: dict[str, Any] = {
        "name": "Tomas" if user else "Captain Mira",
        "is_user": user,
        "is_system": hidden,
        "mes": text,
        "extra": {},
    }
    if date is not None:
        found["send_date"] = date
    return found


def chat_of(*messages: dict[str, Any]) -> Chat:
    return Chat(list(messages), chat_id="recall")


def piece(index: int, text: str, score: float = 1.0) -> RecallPiece:
    return RecallPiece(index, "message", text, f"scene 1 · #{index}", score)


# --- query_words -------------------------------------------------------------------------------


def test_query_words_drop_stopwords_and_words_of_asking() -> None:
    assert query_words("Do you remember again what the password was?") == ["password"]
    assert query_words("Hey, tell me: where did we hide the astrolabe?") == ["hide", "astrolabe"]
    assert query_words("How many trees are in the orchard?") == ["trees", "orchard"]
    # A stemmer does not reach an irregular verb's other forms: they are searched for too,
    # after the words asked (never in their place), and not for a name.
    asked = "How much did Mistress Crane pay?"
    assert query_words(asked) == ["mistress", "crane", "pay"]
    assert query_forms(asked, query_words(asked)) == ["paid"]
    assert query_forms("When did Drew call? Where was Rose born?", ["drew", "rose", "born"]) == []
    assert query_forms("What had she heard when she knew?", ["heard", "knew"]) == [
        "hear",
        "known",
    ]  # not "know", a word of asking
    # one other form each: "give" with "gave" and "given" counted the verb three times; the
    # past first, as a story is told
    assert query_forms("What did Sando give me?", ["sando", "give"]) == ["gave"]
    assert query_forms("Where had she hidden the key?", ["hidden", "key"]) == ["hid"]
    assert query_forms("Who gave it to her?", ["gave"]) == ["give"]


def test_a_past_form_finds_the_answer_in_its_message() -> None:
    chat = chat_of(
        message("Mistress Crane came for the apple at last.", hidden=True),
        message("She paid eleven silver marks, all she had.", hidden=True),
    )
    pieces = recall_pieces(chat, [(0, 1.4), (1, 1.0)], "How much did Crane pay?", COUNTER)
    # "paid" matches "pay", and holds the number asked for: it comes first.
    assert [p.index for p in pieces] == [1, 0]


def test_a_trailing_called_or_named_asks_for_a_name_and_is_not_searched() -> None:
    assert query_words("What is Bramble's hen called?") == ["bramble", "hen"]
    assert query_words("and the ship, what was it named") == ["ship"]
    assert query_words("Who called the doctor?") == ["called", "doctor"]


def test_query_words_keep_codes_whole() -> None:
    assert query_words("The code was 14-02-27, on ship C-2209.") == [
        "code",
        "14-02-27",
        "ship",
        "c-2209",
    ]
    assert query_words("Meet at 7:45 by v2.3") == ["meet", "7:45", "v2.3"]


def test_query_words_are_lower_case_in_order_each_once() -> None:
    assert query_words("Astrolabe ASTROLABE brass astrolabe Brass galley") == [
        "astrolabe",
        "brass",
        "galley",
    ]


def test_query_words_drop_single_letters_but_keep_digits() -> None:
    assert query_words("x 7 y Z") == ["7"]


def test_query_words_drop_contracted_stopwords_and_ask_of_a_possessive_noun() -> None:
    assert query_words("Don't you recall Mira's promise?") == ["mira", "promise"]
    assert query_words("What was in Vane’s ledger? It's gone.") == ["vane", "ledger", "gone"]


def test_a_query_keeps_at_most_most_words() -> None:
    words = [f"word{i}" for i in range(MOST_WORDS + 10)]
    assert query_words(" ".join(words)) == words[:MOST_WORDS]


def test_a_query_of_common_words_keeps_none() -> None:
    assert query_words("What was it that you said to me, again?") == []
    assert query_words("") == []


# --- query_text --------------------------------------------------------------------------------


def test_query_text_is_the_newest_user_message_and_the_reply_before_it() -> None:
    """A message that names too little to search for ("how much was it?") asks about what
    the reply before it says."""
    messages = chat_of(
        message("an old question", user=True),
        message("an old reply"),
        message("the reply"),
        message("a hidden reply", hidden=True),
        message("And how much was it?", user=True),
    ).messages
    assert query_text(messages) == "And how much was it?\nthe reply"


def test_a_question_that_names_what_it_asks_about_is_the_whole_query() -> None:
    """A narrator's long reply would outnumber the question's words, and the search would
    look for the scene just played instead."""
    reply = "Rain hammers the quay while Marra counts the barrels and the Reach fog thickens. " * 4
    messages = chat_of(
        message(reply),
        message("What did the ferryman charge us at Harrow's Ford?", user=True),
    ).messages
    assert query_text(messages) == "What did the ferryman charge us at Harrow's Ford?"
    assert len(query_words("What did the ferryman charge us?")) >= ASKS_ALONE
    assert len(query_words("Yes, that one.")) < ASKS_ALONE


def test_query_text_skips_hidden_user_messages() -> None:
    messages = chat_of(
        message("the question", user=True),
        message("a reply"),
        message("a hidden question", user=True, hidden=True),
    ).messages
    assert query_text(messages) == "the question"


def test_query_text_ignores_replies_after_the_newest_user_message() -> None:
    messages = chat_of(
        message("before"),
        message("and then?", user=True),
        message("a reply being written"),
    ).messages
    assert query_text(messages) == "and then?\nbefore"


def test_query_text_without_a_user_message_is_empty() -> None:
    assert query_text(chat_of(message("narration only")).messages) == ""
    assert query_text([]) == ""


# --- recall_pieces -----------------------------------------------------------------------------


def test_a_visible_message_is_left_out() -> None:
    chat = chat_of(message("Mira hid the astrolabe."), message("Where?", user=True))
    set_data(chat.messages[0], "memory", "Mira hid the astrolabe in the galley.")
    assert recall_pieces(chat, [(0, 1.0)], "astrolabe", COUNTER) == []


def test_a_hidden_message_gives_its_text() -> None:
    chat = chat_of(message("Mira hid the *brass* astrolabe.", hidden=True))
    set_data(chat.messages[0], "memory", "Mira hid the astrolabe.")
    (found,) = recall_pieces(chat, [(0, 2.5)], "Where is the astrolabe?", COUNTER)
    assert found.kind == "message"
    assert found.index == 0
    assert found.text == "Mira hid the brass astrolabe."  # markup taken out
    assert found.score == 2.5


def test_a_word_matches_in_another_form() -> None:
    chat = chat_of(message("Counting the morning, nine silver.", hidden=True))
    (found,) = recall_pieces(chat, [(0, 1.0)], "What was the count?", COUNTER)
    assert found.text == "Counting the morning, nine silver."


def test_a_recalled_question_brings_the_start_of_its_answer() -> None:
    chat = chat_of(
        message("What did Fell owe us in the end? One night, supper?", user=True, hidden=True),
        message("*opens the ledger* That comes to four silver. Entered it.", hidden=True),
        message("And what did Fell answer?", user=True, hidden=True),
        message("He said goodbye.", hidden=False),
    )
    (found,) = recall_pieces(chat, [(0, 1.0)], "How much did Fell owe?", COUNTER)
    assert found.text.startswith("What did Fell owe us in the end?")
    # What is said, within ANSWER_TOKENS, before the gesture around it.
    assert found.text.endswith("→ That comes to four silver. Entered it.")
    assert " → " in found.text
    assert "#0-1" in found.source
    # Not when the answer is in the prompt already, nor for a match that asks nothing.
    (asked,) = recall_pieces(chat, [(2, 1.0)], "What did Fell answer?", COUNTER)
    assert asked.text == "And what did Fell answer?"
    # The answer is not given again on its own; found first, it is not added to the question.
    assert len(recall_pieces(chat, [(0, 2.0), (1, 1.0)], "How much did Fell owe?", COUNTER)) == 1
    both = chat_of(
        message("What did Fell owe us?", user=True, hidden=True),
        message("Fell owed us four silver.", hidden=True),
    )
    first, then = recall_pieces(both, [(1, 2.0), (0, 1.0)], "How much did Fell owe?", COUNTER)
    assert (first.text, then.text) == ("Fell owed us four silver.", "What did Fell owe us?")
    told = chat_of(message("Fell owed us four silver.", hidden=True), message("Yes.", hidden=True))
    (plain,) = recall_pieces(told, [(0, 1.0)], "How much did Fell owe?", COUNTER)
    assert "→" not in plain.text


def test_the_answer_to_a_recalled_question_is_what_is_said_not_the_gesture() -> None:
    chat = chat_of(
        message("What's the password for the smugglers' cellar?", user=True, hidden=True),
        message("*She leans in and whispers.* The password is 'marigold thunder'.", hidden=True),
        message("Orrin? He owes me eleven silver.", hidden=True),
        message("Thanks.", user=True, hidden=True),
        message("*counts it out slowly*", hidden=True),
    )
    (found,) = recall_pieces(chat, [(0, 1.0)], "What's the smugglers' password again?", COUNTER)
    assert found.text.endswith("→ The password is 'marigold thunder'.")
    # A word with a question mark asks nothing: its message comes alone.
    (alone,) = recall_pieces(chat, [(2, 1.0)], "How much silver does Orrin owe?", COUNTER)
    assert alone.text == "Orrin? He owes me eleven silver."
    # All gesture: the gesture is the answer.
    asked = chat_of(
        message("How much did you pay for the boat?", user=True, hidden=True),
        message("*counts out nine crowns on the table*", hidden=True),
    )
    (paid,) = recall_pieces(asked, [(0, 1.0)], "How much was the boat?", COUNTER)
    assert paid.text.endswith("→ counts out nine crowns on the table")


def test_a_short_question_after_a_match_brings_an_answer_told_in_a_gesture() -> None:
    chat = chat_of(
        message('I count coins into his hand. "Two to Carrowmere, inside. How much?"', hidden=True),
        message(
            "*The coachman names his price: seven marks and a ha'penny apiece.* "
            '"Mind the cushions, they\'re new."',
            hidden=True,
        ),
    )
    (found,) = recall_pieces(chat, [(0, 1.0)], "What was the coach fare to Carrowmere?", COUNTER)
    # "How much?" is two words, but it follows a match and asks for a number, as the query
    # does; what is said holds no number, so the gesture that does is the answer.
    assert "→ The coachman names his price: seven marks and a ha'penny apiece." in found.text
    assert "#0-1" in found.source
    # A gesture that holds no answer either is not taken over what is said.
    shrug = chat_of(
        message('"Two to Carrowmere. How much?"', hidden=True),
        message(
            "*He spits into the mud, saying nothing at all.* Ask the guildmaster.", hidden=True
        ),
    )
    (asked,) = recall_pieces(shrug, [(0, 1.0)], "What was the coach fare to Carrowmere?", COUNTER)
    assert asked.text.endswith("→ Ask the guildmaster.")
    # A short question that asks another kind of thing brings nothing along.
    (alone,) = recall_pieces(chat, [(0, 1.0)], "Who drove the coach to Carrowmere?", COUNTER)
    assert "→" not in alone.text


def test_the_answer_after_a_question_is_the_name_given_over_a_name_in_passing() -> None:
    """ "Is that the mail boat?" is answered two sentences on, with the boat's name in italics:
    the sentence that gives a name beats the one that only says who speaks, and a name in
    italics is no gesture."""
    chat = chat_of(
        message('The ketch comes in over the bar. "Is that the mail boat?"', hidden=True),
        message(
            '"Bigger would ground," said Callum, who was sitting on a bollard mending a lobster '
            "pot and pretending to take no interest at all in the boat or in anything else. "
            '"That\'s the *Marguerite Bell*, out of Harwich."',
            hidden=True,
        ),
    )
    (found,) = recall_pieces(chat, [(0, 1.0)], "What was the mail boat called?", COUNTER)
    assert found.text.endswith('→ "That\'s the Marguerite Bell, out of Harwich."')


def test_the_answer_after_a_question_is_a_sum_told_five_sentences_in() -> None:
    """A long reply puts the slate down and talks around it before it tells the sum: a sum
    told within `ANSWER_REACH` sentences starts the answer; a plain number that far does not."""

    def reply(last: str) -> str:
        return (
            "Teo put the slate down very carefully. He was quiet for a while. "
            "He pulled his knees up inside the coat. Ilka has her own. "
            f"Mine is separate, since Mum's went onto both of us. {last}"
        )

    question = "How much does Teo still owe on his contract?"
    asking = message('"Teo. Your contract. How much do you still owe?"', hidden=True)
    told = chat_of(asking, message(reply("The statement said 4,310 credits."), hidden=True))
    (found,) = recall_pieces(told, [(0, 1.0)], question, COUNTER)
    assert found.text.endswith("→ The statement said 4,310 credits.")
    number = chat_of(asking, message(reply("It took two years."), hidden=True))
    (other,) = recall_pieces(number, [(0, 1.0)], question, COUNTER)
    assert "→ Teo put the slate down" in other.text
    # a sum told further in beats a number in passing near the start
    passing = reply("The statement said 4,310 credits.").replace(
        "He was quiet for a while.", "He was quiet for two minutes."
    )
    (told_later,) = recall_pieces(
        chat_of(asking, message(passing, hidden=True)), [(0, 1.0)], question, COUNTER
    )
    assert told_later.text.endswith("→ The statement said 4,310 credits.")


def test_a_one_word_gesture_is_no_name_in_italics() -> None:
    chat = chat_of(
        message("Where did you hide the key?", user=True, hidden=True),
        message("*Shrugs.* *Sighs.* Under the loose stone by the Old Mill.", hidden=True),
    )
    (found,) = recall_pieces(chat, [(0, 1.0)], "Where is the key hidden?", COUNTER)
    assert found.text.endswith("→ Under the loose stone by the Old Mill.")


def test_a_message_excluded_from_the_memory_is_not_recalled() -> None:
    chat = chat_of(
        message("(retcon) Mira sold the violet lens for nine crowns.", hidden=True),
        message("Mira kept the violet lens in her coat.", hidden=True),
    )
    set_data(chat.messages[0], "exclude", True)
    set_data(chat.messages[0], "memory", "Mira sold the violet lens.")
    pieces = recall_pieces(chat, [(0, 2.0), (1, 1.0)], "What about the violet lens?", COUNTER)
    assert [p.index for p in pieces] == [1]


def test_a_hidden_message_whose_recap_alone_matches_gives_its_recap() -> None:
    chat = chat_of(message("They talked for a while.", hidden=True))
    set_data(chat.messages[0], "memory", "Mira made Tomas quartermaster.")
    (found,) = recall_pieces(chat, [(0, 1.0)], "Who is quartermaster?", COUNTER)
    assert found.kind == "recap"
    assert found.text == "Mira made Tomas quartermaster."
    assert found.source.endswith("recap")


def test_a_visible_break_gives_its_scene_recap() -> None:
    chat = chat_of(
        message("At the market.", hidden=True),
        message("They left the market."),
        message("Next?", user=True),
    )
    mark_break(chat.messages[1])
    add_recap_version(
        chat.messages[1], "At the Glass Market they sold the kestrel.", scene_hash="h"
    )
    (found,) = recall_pieces(chat, [(1, 1.0)], "What happened to the kestrel?", COUNTER)
    assert found.kind == "scene"
    assert found.text == "At the Glass Market they sold the kestrel."
    assert found.source == "scene 1 · scene recap"
    # A scene wholly in the prompt (none of its messages hidden) needs no recap of it.
    chat.messages[0]["is_system"] = False
    assert recall_pieces(chat, [(1, 1.0)], "What happened to the kestrel?", COUNTER) == []


def test_a_hit_that_holds_no_asked_word_is_left_out() -> None:
    chat = chat_of(message("Nothing about it here.", hidden=True))
    assert recall_pieces(chat, [(0, 1.0)], "astrolabe", COUNTER) == []


def test_a_note_out_of_character_is_not_recalled() -> None:
    note = message("(OOC: the astrolabe scene was great, brb)", hidden=True)
    set_data(note, "memory", "Tomas: the astrolabe scene was great, brb.")
    chat = chat_of(
        note, message("(OOC: loving it) Mira hides the astrolabe in the galley.", hidden=True)
    )
    found = recall_pieces(chat, [(0, 2.0), (1, 1.0)], "where is the astrolabe?", COUNTER)
    assert [p.index for p in found] == [1]
    assert "loving" not in found[0].text


def test_hits_outside_the_chat_are_left_out() -> None:
    chat = chat_of(message("The astrolabe.", hidden=True))
    assert recall_pieces(chat, [(5, 1.0), (-1, 1.0), (1, 1.0)], "astrolabe", COUNTER) == []


def test_pieces_keep_the_order_of_the_hits() -> None:
    chat = chat_of(
        message("The astrolabe was brass.", hidden=True),
        message("The astrolabe was stolen.", hidden=True),
        message("The astrolabe came back.", hidden=True),
    )
    found = recall_pieces(chat, [(2, 3.0), (0, 2.0), (1, 1.0)], "astrolabe", COUNTER)
    assert [p.index for p in found] == [2, 0, 1]


def test_the_answer_a_message_or_two_after_the_best_match_comes_back() -> None:
    """The question names the scene ("the yard at Qasr Melen") as its first message does; the
    answer comes two messages later and matches one common word: a neighbour of the best
    match that holds the kind of answer asked for is taken; one that does not is not."""
    chat = chat_of(
        message("*The caravan yard of Qasr Melen smells of tar and salt.*", hidden=True),
        message("*She kneels by the grey camels and checks their feet.*", hidden=True),
        message("You have thirty-seven camels, and two of them are lame.", hidden=True),
        message("The camels will do. We leave at dawn.", hidden=True),
    )
    asked = "How many camels were in the caravan yard at Qasr Melen?"
    found = recall_pieces(chat, [(0, 9.0)], asked, COUNTER)
    assert [p.index for p in found] == [0, 2]  # the neighbours without a number are not
    assert found[1].score == pytest.approx(9.0 * NEIGHBOUR_SHARE * ANSWER_BOOST)
    # A question that wants no kind of answer looks at the match alone.
    assert [p.index for p in recall_pieces(chat, [(0, 9.0)], "camels yard Melen", COUNTER)] == [0]


def test_a_neighbour_that_shares_no_word_is_taken_for_the_answer_it_tells() -> None:
    """The match names what is asked about; the next message tells the answer in none of the
    question's words: its sentence that tells it comes back, the rest of it does not."""
    chat = chat_of(
        message("The ledger says a girl from Merrowgate gave her voice at the gate.", hidden=True),
        message(
            "*I stare at the margin.* The third of November. *My hands have gone cold.* "
            "That is the night she went, and I never knew it.",
            hidden=True,
        ),
        message("*She shakes her head slowly and says nothing at all.*", hidden=True),
    )
    asked = "On what date did the girl from Merrowgate give her voice?"
    found = recall_pieces(chat, [(0, 9.0)], asked, COUNTER)
    assert [p.index for p in found] == [0, 1]
    assert "third of November" in found[1].text
    assert "stare" not in found[1].text
    assert found[1].score == pytest.approx(9.0 * NEIGHBOUR_SHARE * ANSWER_BOOST)


def test_a_long_neighbour_gives_the_sentence_that_tells_the_answer() -> None:
    long_turn = (
        "The strike fund box sits on the table between us, and Hendrik taps its lid twice. "
        + "Nobody in the room says a word for a long while. " * 12
        + "Then he counts it out: 1,312 gulden, every coin of it."
    )
    chat = chat_of(
        message("The strike fund was kept in a tin box under the counter.", hidden=True),
        message(long_turn, hidden=True),
    )
    found = recall_pieces(chat, [(0, 9.0)], "How much money was in the strike fund box?", COUNTER)
    assert [p.index for p in found] == [0, 1]
    assert "1,312 gulden" in found[1].text


def test_a_piece_the_running_recap_already_says_is_left_out() -> None:
    text = "Mira hid the brass astrolabe under the galley floorboards."
    chat = chat_of(message(text, hidden=True))
    known = "Earlier, Mira hid the brass astrolabe under the galley floorboards at night."
    assert recall_pieces(chat, [(0, 1.0)], "astrolabe", COUNTER, known=known) == []
    partly = "Mira hid the astrolabe."  # fewer than REPEAT_SHARE of the piece's words
    assert REPEAT_SHARE > 0.5
    assert len(recall_pieces(chat, [(0, 1.0)], "astrolabe", COUNTER, known=partly)) == 1
    assert len(recall_pieces(chat, [(0, 1.0)], "astrolabe", COUNTER, known="")) == 1


def test_when_the_text_is_known_its_recap_can_still_come_back() -> None:
    chat = chat_of(message("Mira hid the astrolabe.", hidden=True))
    set_data(chat.messages[0], "memory", "The astrolabe went under the floorboards by the stove.")
    (found,) = recall_pieces(
        chat, [(0, 1.0)], "astrolabe", COUNTER, known="Mira hid the astrolabe."
    )
    assert found.kind == "recap"


def long_message(target: int, count: int = 40) -> str:
    sentences = [f"Sentence number {i} is about the weather and the sea." for i in range(count)]
    sentences[target] = "The astrolabe lies under the galley floorboards."
    return " ".join(sentences)


def test_a_long_message_is_cut_to_the_sentences_that_hold_asked_words() -> None:
    text = long_message(20)
    assert COUNTER.count(text) > PIECE_TOKENS
    chat = chat_of(message(text, hidden=True))
    (found,) = recall_pieces(chat, [(0, 1.0)], "Where is the astrolabe?", COUNTER)
    assert found.text.startswith("The astrolabe lies under the galley floorboards.")
    assert "Sentence number 21 " in found.text  # what follows, which often answers it
    assert "Sentence number 19 " not in found.text
    assert "Sentence number 3 " not in found.text
    assert COUNTER.count(found.text) <= PIECE_TOKENS


def test_a_long_message_with_many_matches_stays_within_piece_tokens() -> None:
    sentences = []
    for i in range(40):
        sentences.append(f"Sentence number {i} is about the weather and the sea.")
        if i % 3 == 0:
            sentences.append(f"The astrolabe was seen at point {i}.")
    chat = chat_of(message(" ".join(sentences), hidden=True))
    (found,) = recall_pieces(chat, [(0, 1.0)], "astrolabe", COUNTER)
    assert found.text.startswith("The astrolabe was seen at point 0.")
    assert "…" in found.text  # the gaps are marked
    assert "Sentence number 2 " not in found.text
    assert COUNTER.count(found.text) <= PIECE_TOKENS


def test_the_sentence_with_the_rarest_asked_word_is_kept_before_the_common_ones() -> None:
    # Every sentence says "plum"; only one says "lullaby", late in the message: that one
    # answers the question, and the sentences that merely share a word make way for it.
    sentences = [f"The plum tree number {i} stood by the old well in the frost." for i in range(30)]
    sentences[25] = "Then came a lullaby: Sleep, Little Millwheel, the water's gone still."
    chat = chat_of(message(" ".join(sentences), hidden=True))
    (found,) = recall_pieces(chat, [(0, 1.0)], "What lullaby came out of the plum?", COUNTER)
    assert "Sleep, Little Millwheel" in found.text
    assert COUNTER.count(found.text) <= PIECE_TOKENS
    assert found.text.index("Millwheel") > found.text.index("plum")  # still in the text's order


@pytest.mark.parametrize(
    ("question", "kinds"),
    [
        ("How much did Juno pay for the impeller?", {"number", "money"}),
        ("What combination opened the safe?", {"number", "code"}),
        ("What's the number on my cabin door?", {"number", "code"}),
        ("What was the vault code again?", {"number", "code"}),
        ("How many guards were on the gate?", {"number"}),
        ("Is the number still on the door?", set()),
        ("I know what your number is.", set()),
        ("What was the code word at the gate?", {"words"}),
        ("What was the coach fare to Carrowmere?", {"number", "money"}),
        ("What's the rent on the flat?", {"number", "money"}),
        ("What was the vault haul valued at?", {"number", "money"}),
        ("What was the toll on Kettle Bridge?", {"number", "money"}),
        ("Did the billiard room have a piano?", set()),
        ("When did we first meet Elodie?", {"date"}),
        ("What was the last day Tallow could take the crates?", {"date"}),
        ("What was the date on the letter?", {"date"}),
        ("What's the deadline on the contract?", {"date"}),
        ("Is today the day?", set()),
        ("What were the deadlines?", {"date"}),
        ("What was her birthday again?", {"date"}),
        # told, not asked: no date wanted
        ("*What was a lovely day soon turned grim.*", set()),
        ("We'll miss the deadline if we stop.", set()),
        ("Who shot the captain?", {"name"}),
        ("What was the boat called?", {"name"}),
        ("What nickname did Sando give me?", {"name"}),
        ("Where did Maudry fall?", {"place"}),
        ("At what address did Corvane ask them to call?", {"place"}),
        ("The rain has stopped, let's go.", set()),
        ("What password did Sefa give the keeper?", {"words"}),
        ("What was the new gate word at Saltmarrow?", {"words"}),
        ("What did Tobiah answer at the hatch?", {"words"}),
        ("What did Veyra whisper through the grille?", {"words"}),
        ("What word broke the cipher?", {"words"}),
        ("What am I supposed to say at Quill's back door?", {"words"}),
        ("What do I answer at the sentry post?", {"words"}),
        ("Remind me the numbers for the wheel on the treasury door?", {"number", "code"}),
        ("What were the digits on the lock?", {"number", "code"}),
        # told, not asked: no number wanted
        ("We went over the numbers twice.", set()),
        # a word with someone, what someone told: no words in quotes asked for
        ("Can I have a word with you?", set()),
        ("What did he tell you about the ship?", set()),
    ],
)
def test_answer_kinds_come_from_the_question_words(question: str, kinds: set[str]) -> None:
    assert answer_kinds(question) == kinds


@pytest.mark.parametrize(
    "said",
    [
        "“Fourpence ha'penny a head,” he said.",
        "It was tuppence last summer.",
        "A halfpenny for the boy.",
        "A farthing more for the box.",
    ],
)
def test_old_money_in_one_word_answers_how_much(said: str) -> None:
    """ "Fourpence" says its number in one word: a piece that holds it answers "how much" as
    a piece with "4d" would, and counts `ANSWER_BOOST` times its match, and `TOLD_WEIGHT`
    again as a sum of money."""
    chat = chat_of(message(f"The ferry over the Wend: {said}", hidden=True))
    (found,) = recall_pieces(chat, [(0, 2.0)], "What did the ferry cost?", COUNTER)
    assert found.score == pytest.approx(2.0 * ANSWER_BOOST * TOLD_WEIGHT)
    for other in ("he spat over the side.", "Penny and Spence spat over the side."):
        plain = chat_of(message(f"The ferry over the Wend: {other}", hidden=True))
        (unboosted,) = recall_pieces(plain, [(0, 2.0)], "What did the ferry cost?", COUNTER)
        assert unboosted.score == 2.0  # names are no money


def test_the_answer_a_sentence_or_two_after_the_match_is_kept() -> None:
    # The asked words are in one sentence; the name that answers comes two sentences later,
    # and the filler between them holds no name.
    sentences = [f"the tide was low and the gulls were loud, number {i}." for i in range(30)]
    sentences[10] = "Before that I had a boat with my brother, out of the north sands."
    sentences[11] = "long-lining, a bit of salvage, hard work."
    sentences[12] = "She was called the Patience Dray, after our mother's joke."
    text = " ".join(s[0].upper() + s[1:] for s in sentences)
    assert COUNTER.count(text) > PIECE_TOKENS
    chat = chat_of(message(text, hidden=True))
    (found,) = recall_pieces(
        chat, [(0, 1.0)], "What was the name of the boat he owned with his brother?", COUNTER
    )
    assert "Patience Dray" in found.text
    assert found.text.index("brother") < found.text.index("Patience Dray")
    assert COUNTER.count(found.text) <= PIECE_TOKENS


def _long(sentences: dict[int, str], count: int = 30) -> str:
    """A long message of filler sentences (no quote, number or name) with these in place."""
    filler = ["the tide was low and the gulls were loud over the flats."] * count
    for at, sentence in sentences.items():
        filler[at] = sentence
    text = " ".join(s[0].upper() + s[1:] for s in filler)
    assert COUNTER.count(text) > PIECE_TOKENS
    return text


def test_a_question_about_what_was_said_keeps_the_spoken_words() -> None:
    # The hatch is named in several sentences; the words given at it are a quote with no asked
    # word, after the knock.
    text = _long(
        {
            8: "Rosa and Tobiah move aside a rack of wet coveralls and find the hatch.",
            9: "Tobiah knocks on the hatch: three quick, two slow.",
            10: "A voice comes muffled through the steel.",
            11: '"Salt and ember," he says, with great seriousness.',
            20: "The hatch swings inward on oiled hinges.",
            24: "Tobiah closes the hatch behind them and bolts it.",
        }
    )
    chat = chat_of(message(text, hidden=True))
    (found,) = recall_pieces(chat, [(0, 1.0)], "What did Tobiah answer at the hatch?", COUNTER)
    assert "Salt and ember" in found.text
    assert COUNTER.count(found.text) <= PIECE_TOKENS


def test_a_name_said_just_before_the_match_is_kept() -> None:
    text = _long(
        {
            10: "That's the Marguerite Bell, out of Harwich, forty ton and leaky.",
            11: "Old Sam Tilley has had her thirty years.",
            12: "She brings the mail, the papers and coal for the coastguard.",
            20: "the mail was sorted on an upturned fish box.",
        }
    )
    chat = chat_of(message(text, hidden=True))
    (found,) = recall_pieces(
        chat, [(0, 1.0)], "What was the ketch that brought the mail called?", COUNTER
    )
    assert "Marguerite Bell" in found.text


def test_an_answer_in_the_sentence_after_the_match_counts_the_answer_boost() -> None:
    text = _long({12: '"Jory lent him the lot.', 13: 'Eleven pounds four shillings, by Lammas."'})
    chat = chat_of(message(text, hidden=True))
    (found,) = recall_pieces(chat, [(0, 2.0)], "How much did Jory lend him?", COUNTER)
    assert "Eleven pounds" in found.text
    assert found.score == pytest.approx(2.0 * ANSWER_BOOST * TOLD_WEIGHT)


def test_an_answer_in_the_sentence_before_the_match_counts_the_answer_boost() -> None:
    """The words come first, what they were after: "'Pike and lantern,' I tell him. That
    was the word Brann gave us." The piece is worth what it tells."""
    text = _long(
        {
            12: '"Pike and lantern," I tell him at the door.',
            13: "That was the password Brann gave us.",
        }
    )
    chat = chat_of(message(text, hidden=True))
    (found,) = recall_pieces(chat, [(0, 2.0)], "What password did Brann give us?", COUNTER)
    assert "Pike and lantern" in found.text
    assert found.score == pytest.approx(2.0 * ANSWER_BOOST * TOLD_WEIGHT)


@pytest.mark.parametrize(
    "sum_", ["$2,400", "three hundred dollars", "seven salt-chits", "forty guineas", "€80"]
)
def test_a_question_about_money_wants_a_sum_over_another_number(sum_: str) -> None:
    """ "How much was in the envelope?": of the sentences after the match, the one naming a sum
    is kept over those with another number ("one last thing", "the twenty-sixth"), and a piece
    whose sum follows its match counts `TOLD_WEIGHT` times one with another number."""
    question = "How much was in the envelope from the bank?"
    asked, wanted = asked_words(question), answer_kinds(question)
    match = "Denny brings out a long white envelope from the bank."
    text = _long(
        {
            10: match,
            11: "He had one last thing to say about it.",
            12: "It was the twenty-sixth, two days after the fire.",
            13: f"He said it was {sum_} and to be smart with it.",
        }
    )
    excerpt = excerpt_of(text, asked, COUNTER, wanted, limit=COUNTER.count(match) + 20)
    assert sum_ in excerpt
    assert "one last thing" not in excerpt
    told = _long({10: match, 11: f"He said it was {sum_} and to be smart with it."})
    (found,) = recall_pieces(chat_of(message(told, hidden=True)), [(0, 2.0)], question, COUNTER)
    assert found.score == pytest.approx(2.0 * ANSWER_BOOST * TOLD_WEIGHT)
    plain = _long({10: match, 11: "It held two letters and one photograph."})
    (other,) = recall_pieces(chat_of(message(plain, hidden=True)), [(0, 2.0)], question, COUNTER)
    assert other.score == pytest.approx(2.0 * ANSWER_BOOST)


def _far_excerpt(question: str, around: dict[int, str], at: int, sentence: str) -> str:
    """The excerpt, for `question`, of a long message with the sentences `around` (its match at
    10) and `sentence` at `at`, in room for the match and about one sentence more."""
    limit = COUNTER.count(around[10]) + 25
    text = _long({**around, at: sentence})
    return excerpt_of(text, asked_words(question), COUNTER, answer_kinds(question), limit=limit)


def test_a_sum_told_five_sentences_after_the_match_is_kept_and_another_number_is_not() -> None:
    """A long turn names the envelope, talks around it, then tells the sum: a sentence that tells
    the answer outright is kept up to five sentences after a match; another number that far is
    not."""
    question = "How much was in the envelope from the bank?"
    around = {
        10: "Denny brings out a long white envelope from the bank.",
        11: "It was Monday after the fire.",
        12: "He sat in the truck a long while.",
        13: "Nobody else saw it happen.",
    }
    told = _far_excerpt(question, around, 15, "He said it was $2,400, cash.")
    assert "$2,400" in told
    farther = _far_excerpt(question, around, 16, "He said it was $2,400, cash.")
    assert "$2,400" not in farther
    number = _far_excerpt(question, around, 15, "He waited there two more hours.")
    assert "two more hours" not in number


@pytest.mark.parametrize(
    "named",
    [
        "That's the Marguerite Bell, out of Harwich.",
        "His name's Admiral Pudding, and he runs the place.",
        "They called her Mother Lancet after that.",
    ],
)
def test_a_question_about_a_name_wants_a_name_given_over_a_name_in_passing(named: str) -> None:
    question = "What was the ketch that brings the mail called?"
    told = _long({10: "The ketch brings the mail on Tuesdays.", 11: named})
    (found,) = recall_pieces(chat_of(message(told, hidden=True)), [(0, 2.0)], question, COUNTER)
    assert named in found.text
    assert found.score == pytest.approx(2.0 * ANSWER_BOOST * TOLD_WEIGHT)
    passing = _long({10: "The ketch brings the mail.", 11: "Sam Tilley waves from the quay."})
    (other,) = recall_pieces(chat_of(message(passing, hidden=True)), [(0, 2.0)], question, COUNTER)
    assert other.score == pytest.approx(2.0 * ANSWER_BOOST)


@pytest.mark.parametrize(
    ("question", "said"),
    [
        ("How much did Spence owe the bank?", "Spence came by at nine."),
        ("How much did she owe?", "She wore two gold rings and owed him nothing."),
        ("How much did he owe?", "He owed a grand total of 3 apologies."),
        ("What was the ship called?", "I called Mira about the ship at nine."),
        ("What was the ship called?", "That's Tuesday's ship, Mira says."),
    ],
)
def test_a_number_or_a_name_in_passing_is_not_told_outright(question: str, said: str) -> None:
    assert answer_weight(said, answer_kinds(question), asked_words(question)) == 1.0


@pytest.mark.parametrize(
    "said",
    [
        "She had three marks on her arm.",
        "He bought fifty-two pounds of flour.",
        "It wore ten crowns of thorns.",
        "He won two games.",
    ],
)
def test_a_weight_or_a_mark_is_no_sum(said: str) -> None:
    assert not names_a_sum(said)


def test_sums_in_the_worlds_and_the_stories_money() -> None:
    for said in ("That'll be fourteen stivers, miss.", "The fund is at 1,312 gulden.", "50 gp"):
        assert names_a_sum(said)


@pytest.mark.parametrize(
    "said",
    [
        "I slid him a fiver.",
        "That's a quid, mate.",
        "He wanted one sovereign for the lot.",
        "A franc a night, meals extra.",
        "The bounty was a million credits.",
        "Sixteen pieces of silver, counted out.",
        "Two bits a ride.",
    ],
)
def test_a_sum_counted_by_a_or_by_its_note_is_told_outright(said: str) -> None:
    question = "How much did the ferryman charge?"
    assert answer_weight(said, answer_kinds(question), asked_words(question)) == TOLD_WEIGHT


def test_the_money_word_check_never_turns_a_sum_away() -> None:
    """`names_a_sum` skips the search when a text has no money word: on every message of the
    dev chats, and on sums said every way, it answers as the search alone does."""
    from autorecap.core import asking
    from autorecap.evaluation.corpus import shipped

    texts = [m.text for corpus in shipped("dev") for m in corpus.chat.messages]
    texts += ["£3 10s", "a ha’penny", "half-penny", "two salt-chits", "pieces of eight", "50 gp"]
    texts += ["Two silver's a lot of money.", "a ha'penny", "a penny's worth", "a quid's worth"]
    texts += ["A shilling's worth of bread.", "A dollar's worth of nails.", "Five crowns'd do it."]
    assert sum(1 for t in texts if names_a_sum(t)) > 100
    for text in texts:
        assert names_a_sum(text) == (asking._MONEY.search(text) is not None), text


@pytest.mark.parametrize(
    "code", ["Yarrow 226", "NM-44718-K", "R-2290", "KD-7741-VESPER", "III-VII-II-IX"]
)
def test_a_question_about_a_number_that_names_a_thing_wants_a_code(code: str) -> None:
    """ "What was the claim number?" is told by a code or a figure of several digits, not by a
    count or a day in passing ("two of them", "the 12th")."""
    question = "What was the claim number on the file?"
    wanted, asked = answer_kinds(question), asked_words(question)
    assert answer_weight(f"The tag on it read {code}.", wanted, asked) == TOLD_WEIGHT
    for passing in ("Two of them came by.", "It was the 12th, a Tuesday."):
        assert answer_weight(passing, wanted, asked) == 1.0
    counted = "How many files were there?"
    assert answer_weight(f"It read {code}.", answer_kinds(counted), asked_words(counted)) == 1.0


@pytest.mark.parametrize(
    "said",
    [
        "She wore a crown of paper.",
        "He left a mark on the door.",
        "I had a yen for it.",
        "A buck stood in the clearing.",
        "It was a sovereign state.",
        "He weighed a pound, no more.",
        "A pound-of-flesh deal.",
        "She kept a guinea pig.",
        "He drew a dollar sign.",
        "A quid pro quo, then.",
        "A Franc from the north rode in.",
        "Two bits of string.",
        "Pieces of gold armour lay about.",
    ],
)
def test_a_crown_a_mark_or_a_yen_counted_by_a_is_no_sum(said: str) -> None:
    assert not names_a_sum(said)


@pytest.mark.parametrize(
    ("said", "holds"),
    [
        ("The third of November.", True),
        ("We sailed in May, after the thaw.", True),
        ("On 8 may the ferry ran.", True),
        ("Sept. 4, at the latest.", True),
        ("I stare at the margin.", False),
        ("We may go to the market.", False),
        ("They decided to march on.", False),
        ("She came back on the nineteenth of Tammuzet.", True),
        ("The third day of Thaw, at dawn.", True),
        ("A tenth of the profit is ours.", False),
        ("The second of our boats sank.", False),
        ("One third of London flooded.", False),
        ("He was the first of Brann's men.", False),
        ("Aegon, the Third of His Name.", False),
    ],
)
def test_a_month_is_a_date_and_a_word_that_starts_like_one_is_not(said: str, holds: bool) -> None:
    wanted = answer_kinds("On what date did she leave?")
    assert (answer_weight(said, wanted, frozenset()) > 0) is holds


@pytest.mark.parametrize("said", ["There were thirteen of them.", "Room nineteen, top floor."])
def test_thirteen_to_nineteen_are_numbers(said: str) -> None:
    """ "fourteen" is no "four": the teens hold the number a question asks for."""
    question = "How many guards were at the gate?"
    assert answer_weight(said, answer_kinds(question), asked_words(question)) == 1.0


def test_a_short_quote_tells_the_words_asked_for_and_a_line_of_dialogue_only_holds_them() -> None:
    question = "What did Tobiah answer at the hatch?"
    wanted, asked = answer_kinds(question), asked_words(question)
    assert answer_weight('"Salt and ember," Tobiah says.', wanted, asked) == TOLD_WEIGHT
    said = '"We should go before the bell, the stokers will be back soon," Tobiah says.'
    assert answer_weight(said, wanted, asked) == 1.0
    # the narration between two quotes is no quote
    two = (
        '"We should go before the bell and the stokers are back," Tobiah says. '
        '"They will all be angry with us, every one."'
    )
    assert answer_weight(two, wanted, asked) == 1.0


@pytest.mark.parametrize(
    "said",
    [
        "\"When the keeper asks you at the gate tonight, the word is 'salt remembers'.\"",
        "He said it was ‘Marigold’ all along.",
        "The word was 'marigold', she said.",
    ],
)
def test_words_in_single_quotes_tell_the_words_asked_for(said: str) -> None:
    """A word said is quoted in single quotes inside speech, or in British style."""
    question = "What was the password at the gate?"
    assert answer_weight(said, answer_kinds(question), asked_words(question)) == TOLD_WEIGHT


def test_words_after_a_word_of_saying_and_a_colon_tell_the_words_asked_for() -> None:
    """ "And you'll say: *the heron sleeps crooked.*" quotes the words in italics, which a
    roleplay otherwise gives its actions; recall reads it with the italics taken off."""
    question = "What am I supposed to say at the back door?"
    wanted, asked = answer_kinds(question), asked_words(question)
    for said in ("\"And you'll say: *the heron sleeps crooked.*", "And you'll say: the heron."):
        assert answer_weight(said, wanted, asked) == TOLD_WEIGHT
    for other in (
        "He smiles. *Go.*",
        "I say *nothing* and walk off into the long grey rain of the night.",
        "Let me say: this business with the mill owners has gone on for far too long now.",
    ):
        assert answer_weight(other, wanted, asked) < TOLD_WEIGHT


@pytest.mark.parametrize(
    ("said", "weight"),
    [
        ("He's up at 3 Gallows Stair now, above the candlemaker's.", TOLD_WEIGHT),
        ("The office is at 221B Baker Street.", TOLD_WEIGHT),
        ("He moved to Gallows Stair in the spring.", 1.0),  # a place in passing
        ("We met in 1907 Dressler and I.", 1.0),  # a year before a name
        ("Two of the men came back.", 0.0),
    ],
)
def test_an_address_tells_where_outright(said: str, weight: float) -> None:
    question = "What was the address Maudie gave me for Quill's new place?"
    assert answer_weight(said, answer_kinds(question), asked_words(question)) == weight


@pytest.mark.parametrize(
    "said",
    [
        "Don't touch the boys' toys, 'tis late.",
        "'Tis the boys' toys.",
        "I told 'em they were comin' for us.",
        "We went 'round the Smiths' place.",
        "It was rock 'n' roll all night.",
    ],
)
def test_an_apostrophe_is_no_single_quote(said: str) -> None:
    """A dropped letter ("'em", "'tis", "comin'") or a plural's apostrophe ("the boys'") quotes
    nothing."""
    question = "What was the password at the gate?"
    assert answer_weight(said, answer_kinds(question), asked_words(question)) == 0.0


def test_died_is_found_by_die() -> None:
    """Porter's stemmer parts "die" from "died": the question finds the message all the same."""
    assert asked_words("When did Walt die?") & text_words("Walt died on the ninth.")


def test_without_a_question_word_only_the_next_sentence_follows_a_match() -> None:
    sentences = [f"Sentence number {i} is about the weather and the sea." for i in range(40)]
    sentences[20] = "The astrolabe lies under the galley floorboards."
    chat = chat_of(message(" ".join(sentences), hidden=True))
    (found,) = recall_pieces(chat, [(0, 1.0)], "the astrolabe", COUNTER)
    assert "Sentence number 21 " in found.text
    assert "Sentence number 22 " not in found.text


def test_a_long_sentence_is_cut_around_the_asked_word() -> None:
    filler = ", ".join(["the deck creaked as the crew hauled ropes and the wind pushed"] * 8)
    text = f"Short intro here. {filler} and then Mira hid the astrolabe in the galley."
    chat = chat_of(message(text, hidden=True))
    (found,) = recall_pieces(chat, [(0, 1.0)], "Where is the astrolabe?", COUNTER)
    assert "astrolabe" in found.text


def test_a_name_in_the_possessive_is_recalled() -> None:
    chat = chat_of(message("Kessler's orders were to hold the pass.", hidden=True))
    assert len(recall_pieces(chat, [(0, 1.0)], "Who is Kessler?", COUNTER)) == 1


def test_sources_say_the_scene_the_index_and_the_day() -> None:
    chat = chat_of(
        message("Opening.", date="2023-05-07T09:00:00.000Z"),
        message("The scene ends.", date="2023-05-07T10:00:00.000Z"),
        message("The astrolabe was hidden.", hidden=True, date=DATE),
        message("The astrolabe, again, with no date.", hidden=True),
        message("A hidden one that is recapped.", hidden=True, date="2024-12-31T23:00:00.000Z"),
    )
    mark_break(chat.messages[1])
    set_data(chat.messages[4], "memory", "The astrolabe was sold.")
    found = recall_pieces(chat, [(2, 3.0), (3, 2.0), (4, 1.0)], "astrolabe", COUNTER)
    assert [p.source for p in found] == [
        "scene 2 · #2 · 8 May 2023",
        "scene 2 · #3",
        "scene 2 · #4 · 31 December 2024 · recap",
    ]


# --- recall_text -------------------------------------------------------------------------------


def test_nothing_to_recall_is_empty() -> None:
    assert recall_text([], DEFAULT_RECALL_TEMPLATE, 400, COUNTER) == ("", [])
    pieces = [piece(0, "The astrolabe.")]
    assert recall_text(pieces, DEFAULT_RECALL_TEMPLATE, 0, COUNTER) == ("", [])


def test_the_lines_go_into_the_template() -> None:
    pieces = [piece(3, "The astrolabe was hidden.")]
    text, chosen = recall_text(pieces, "Recalled:\n{{recall}}\n(end)", 400, COUNTER)
    assert text == "Recalled:\n- [scene 1 · #3] The astrolabe was hidden.\n(end)"
    assert chosen == pieces
    plain, _ = recall_text(pieces, "  ", 400, COUNTER)
    assert plain == "- [scene 1 · #3] The astrolabe was hidden."


def test_pieces_come_out_in_chat_order() -> None:
    pieces = [piece(5, "fifth", 3.0), piece(1, "first", 2.0), piece(3, "third", 1.0)]
    text, chosen = recall_text(pieces, DEFAULT_RECALL_TEMPLATE, 400, COUNTER)
    assert [p.index for p in chosen] == [1, 3, 5]
    assert text.index("first") < text.index("third") < text.index("fifth")
    assert text.startswith(DEFAULT_RECALL_TEMPLATE.replace("{{recall}}", ""))


def test_the_best_pieces_that_fit_max_tokens_are_kept() -> None:
    best = piece(9, "The astrolabe lies under the galley floorboards by the stove.", 3.0)
    other = piece(2, "The sextant lies in the captain's chest by the window.", 2.0)
    template = DEFAULT_RECALL_TEMPLATE
    alone, _ = recall_text([best], template, 400, COUNTER)
    both, _ = recall_text([best, other], template, 400, COUNTER)
    budget = COUNTER.count(alone) + 2
    assert COUNTER.count(both) > budget
    text, chosen = recall_text([best, other], template, budget, COUNTER)
    assert chosen == [best]
    assert COUNTER.count(text) <= budget


def test_a_piece_too_long_for_the_budget_makes_way_for_a_shorter_one() -> None:
    huge = piece(1, " ".join(["the long tale of the astrolabe"] * 40), 3.0)
    short = piece(2, "The sextant.", 1.0)
    text, chosen = recall_text([huge, short], DEFAULT_RECALL_TEMPLATE, 80, COUNTER)
    assert chosen == [short]
    assert "sextant" in text


def test_with_the_query_a_piece_too_long_for_the_room_left_is_cut_to_fit() -> None:
    """Two long pieces, room for one and a half: the second is cut to its sentences that
    match the query best, the answer among them, rather than left out (a third of the budget
    unused); without the query, or with less room than `SHORTEST_CUT`, it is left out."""
    filler = [f"The gulls wheeled over mooring number {i} in the grey." for i in range(12)]
    first = piece(4, " ".join(["The ferry chain creaked at the Marram crossing.", *filler]), 3.0)
    told = [*filler[:6], "The ferryman Brand charged fourpence a head.", *filler[6:]]
    second = piece(9, " ".join(told), 2.0)
    query = "What did Brand charge for the ferry?"
    budget = COUNTER.count(recall_text([first], DEFAULT_RECALL_TEMPLATE, 999, COUNTER)[0]) + 60
    text, chosen = recall_text([first, second], DEFAULT_RECALL_TEMPLATE, budget, COUNTER, query)
    assert [p.index for p in chosen] == [4, 9]
    assert "fourpence" in chosen[1].text
    assert COUNTER.count(chosen[1].text) < COUNTER.count(second.text)
    assert COUNTER.count(text) <= budget
    _, without = recall_text([first, second], DEFAULT_RECALL_TEMPLATE, budget, COUNTER)
    assert [p.index for p in without] == [4]
    tight = budget - 60 + SHORTEST_CUT - 20
    _, little = recall_text([first, second], DEFAULT_RECALL_TEMPLATE, tight, COUNTER, query)
    assert [p.index for p in little] == [4]


@pytest.mark.parametrize("query", ["", "Where is the astrolabe, and what is the vault code?"])
@pytest.mark.parametrize("max_tokens", [1, 20, 35, 50, 64, 90, 130, 200, 400])
def test_the_injection_never_exceeds_max_tokens(max_tokens: int, query: str) -> None:
    texts = [
        "Mira hid the brass astrolabe under the galley floorboards.",
        "The code of the vault is 14-02-27.",
        "Ночью «Пустельга» ушла из гавани.",
        "Tomas owes Ulla Galloway 384 crowns, due at the Glass Market.",
        "The ship C-2209 was sold for 586 crowns.",
        "Kessler's orders: hold the pass until the fog lifts, then signal twice.",
    ]
    pieces = [
        RecallPiece(i * 7, "message", text, f"scene {i + 1} · #{i * 7} · 8 May 2023", 9.0 - i)
        for i, text in enumerate(texts)
    ]
    text, chosen = recall_text(pieces, DEFAULT_RECALL_TEMPLATE, max_tokens, COUNTER, query)
    assert COUNTER.count(text) <= max_tokens
    assert bool(text) == bool(chosen)
    assert all(p.text in text for p in chosen)
    if max_tokens >= 400:
        assert len(chosen) == len(pieces)


def test_set_recall_slot_places_the_text_as_the_settings_say() -> None:
    slots = ExtensionPrompts()
    settings = Settings(recall_position=1, recall_depth=3, recall_role=1, recall_scan=True)
    set_recall_slot(slots, "recalled", settings)
    slot = slots.get(RECALL_KEY)
    assert slot is not None
    assert (slot.value, slot.position, slot.depth, slot.role, slot.scan) == (
        "recalled",
        1,
        3,
        1,
        True,
    )
    set_recall_slot(slots, "", Settings())
    assert slots.value(RECALL_KEY) == ""
    assert RECALL_KEY in slots


@pytest.mark.parametrize(
    ("question", "said", "weight"),
    [
        (
            "What was the key word stitched into the sampler?",
            "The red stitches on the sampler spell out a word. WHELKSTONE.",
            TOLD_WEIGHT,
        ),
        (
            "Whose name was on the cat's collar?",
            'On the collar, in small worn capitals, there\'s a name. "ELSA SANDBERG," I read out.',
            TOLD_WEIGHT,
        ),
        (
            "Whose name was on the cat's collar?",
            'On the collar there was a name. "Elsa Sandberg," she said.',
            TOLD_WEIGHT,
        ),
        # announced, but nothing of the kind follows: a name is wanted, none is told
        ("Whose name was on the cat's collar?", "The collar had a name. It was worn away.", 0.0),
        # a name in passing, announced by nothing
        ("Whose name was on the cat's collar?", "The collar was red. She gave it to Theo.", 1.0),
        # what only looks like an announcement
        ("Whose name was on the cat's collar?", "I forgot his name. Then Theo came in.", 1.0),
        ("Whose name was on the collar?", "You have my word. The collar is Theo's.", 1.0),
        ("What was the abort word?", "Whoever sees it says one word. Chrysanthemum.", TOLD_WEIGHT),
        ("What was the abort word?", "He hasn't said a word. Chrysanthemum, I think.", 0.0),
    ],
)
def test_what_a_sentence_announces_the_next_one_tells_outright(
    question: str, said: str, weight: float
) -> None:
    assert excerpt_answer_weight(said, answer_kinds(question), asked_words(question)) == weight


def test_a_word_read_off_in_a_sentence_of_its_own_is_kept_in_a_long_message() -> None:
    """The sentence after the one that announces a word is kept before another that names the
    sampler; announced by nothing, it is not."""
    question = "What was the key word stitched into grandmother's sampler?"
    asked, wanted = asked_words(question), answer_kinds(question)
    hearth = "Grandmother's sampler hangs above the hearth in a black frame."
    announced = "The red stitches on the sampler spell out a word."
    sentences = {
        4: hearth,
        10: announced,
        11: "WHELKSTONE.",
        20: "Grandmother worked the sampler as a girl, the summer the lighthouse was built.",
    }
    limit = COUNTER.count(announced) + COUNTER.count(hearth) + 2
    assert "WHELKSTONE" in excerpt_of(_long(sentences), asked, COUNTER, wanted, limit=limit)
    plain = _long({**sentences, 10: "The red stitches on the sampler are new."})
    assert "WHELKSTONE" not in excerpt_of(plain, asked, COUNTER, wanted, limit=limit)


@pytest.mark.parametrize(
    ("said", "weight"),
    [
        ("It's dated November 14, 2022, and it is short.", TOLD_WEIGHT),
        ('"July ninth. A Sunday."', TOLD_WEIGHT),
        ("'On the twenty-second of August: forty crates, lamp oil.'", TOLD_WEIGHT),
        ("Done in the tenth month of the fourth year of Tianqing.", TOLD_WEIGHT),
        ("That night the sluice was shut.", 1.0),
        ("The third of His reforms came that spring.", 1.0),  # a season, and no day named
        ("Those 2 may leave when they like.", 1.0),  # a number, and "may" a verb
        ("We march 3 miles before the sluice.", 1.0),
        ("In April both of them left.", 1.0),
    ],
)
def test_a_day_named_tells_when_outright_and_a_time_of_day_only_holds_it(
    said: str, weight: float
) -> None:
    question = "When did they shut the sluice?"
    assert answer_weight(said, answer_kinds(question), asked_words(question)) == weight


def test_a_day_named_five_sentences_after_the_match_is_kept_and_a_time_of_day_is_not() -> None:
    question = "When did Shu Heng pay off the loan?"
    around = {
        10: "Shu Heng had written the last of the loan on the slip.",
        11: "The debt is discharged.",
        12: "Nothing further is owed by either party.",
        13: "The seal was pressed in deep.",
    }
    named = "Done in the tenth month of the fourth year of Tianqing."
    assert "Tianqing" in _far_excerpt(question, around, 15, named)
    assert "evening" not in _far_excerpt(question, around, 15, "Done that evening, in the rain.")


def test_a_request_to_tell_brings_the_reply_and_the_reply_counts_as_its_answer() -> None:
    """ "Tell me about Walt. When he died, what happened." asks without a question mark, and
    sentences follow it: the reply is taken along, and the piece counts the day it names as
    an answer told outright, though the sentences around the request name none."""
    chat = chat_of(
        message(
            '"Edie, tell me about Walt. When he died, what happened to the boat. I am sorry to '
            'make you go through it again. I know it is all in the file somewhere."',
            hidden=True,
        ),
        message(
            'She takes the kettle off and sits down. "July ninth. A Sunday. Hot, flat calm."',
            hidden=True,
        ),
    )
    question = "On what date did Walt die out on the boat?"
    (found,) = recall_pieces(chat, [(0, 2.0)], question, COUNTER)
    assert "→" in found.text
    assert "July ninth" in found.text
    assert "#0-1" in found.source
    assert found.score == pytest.approx(2.0 * ANSWER_BOOST * TOLD_WEIGHT)
    # Said without a request, the same words bring no reply.
    plain = chat_of(
        message('"Walt died, and the boat sat there. I know it is all in the file."', hidden=True),
        message('She takes the kettle off and sits down. "July ninth. A Sunday."', hidden=True),
    )
    found_plain = recall_pieces(plain, [(0, 2.0)], question, COUNTER)[0]
    assert "→" not in found_plain.text
    # "Tell me about it" agrees; it asks nothing.
    agreeing = chat_of(
        message('"Tell me about it. Walt died and the boat just sat there."', hidden=True),
        message('She takes the kettle off and sits down. "July ninth. A Sunday."', hidden=True),
    )
    found_agreeing = recall_pieces(agreeing, [(0, 2.0)], question, COUNTER)[0]
    assert "→" not in found_agreeing.text
