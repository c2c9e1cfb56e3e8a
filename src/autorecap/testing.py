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

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from autorecap.core.data import NAMESPACE
from autorecap.core.model import Chat

__all__ = ["GeneratedChat", "PlantedFact", "Scene", "generate", "generate_chat"]


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


# --------------------------------------------------------------------------------------------
# Word banks. Chatter never contains digits, nor any of the invented words fact answers are made
# of (_FACT_FIRST_NAMES, _FACT_PLACE_PREFIXES), so no answer can turn up by accident. Mid-scene
# chatter also avoids the time words scene openings use (later, morning, night, dawn, ...).
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Place:
    name: str
    prep: str  # "at", "in" or "on": how one is at the place
    arrivals: tuple[str, ...]  # clauses after a time cue; {who} is a plural subject
    sights: tuple[str, ...]  # sentences; may use {place}
    sounds: tuple[str, ...]
    smells: tuple[str, ...]
    props: tuple[str, ...]
    npcs: tuple[str, ...]
    topics: tuple[str, ...]
    titles: tuple[str, ...]


_PLACES: tuple[_Place, ...] = (
    _Place(
        name="Port Anvil",
        prep="in",
        arrivals=(
            "the Kestrel noses into Berth Nine at Port Anvil",
            "{who} come down the gangplank into the noise of Port Anvil",
            "the docks of Port Anvil open up below the Kestrel's keel",
        ),
        sights=(
            "Cranes swing cargo nets between the moored hulls of Port Anvil.",
            "Gulls fight over fish heads on the tarred planks.",
            "Every berth in Port Anvil flies a different flag.",
            "Coils of rope lie everywhere, waiting to trip the careless.",
            "A customs launch drifts along the quay, its crew bored and watchful.",
        ),
        sounds=(
            "Somewhere a winch screams under a heavy load.",
            "Dock-hands shout tallies from ship to ship.",
            "The harbour bell clangs twice.",
        ),
        smells=(
            "The air tastes of tar and salt.",
            "It smells of fish, coal smoke and wet hemp.",
            "A warm gust carries the smell of frying dough from a quayside stall.",
        ),
        props=(
            "a coil of tarred rope",
            "a dock pass stamped in red",
            "a crumpled cargo manifest",
            "a battered tin cup",
            "a gull feather",
            "a loose belaying pin",
        ),
        npcs=(
            "a dock-hand with a broken nose",
            "a bored customs clerk",
            "a boy selling hot pies",
            "an old rigger mending a net",
        ),
        topics=(
            "the berth fee",
            "the new customs inspection",
            "the dock-hands' strike",
            "the ship that burned at the far quay",
            "the rumour on the waterfront",
            "the missing cargo",
        ),
        titles=("Departures from Port Anvil", "Trouble on the Quay", "Berth Nine"),
    ),
    _Place(
        name="the Glass Market",
        prep="at",
        arrivals=(
            "{who} push into the crowded aisles of the Glass Market",
            "the crowds carry {who} through the gates of the Glass Market",
            "{who} cross the last rope bridge to the Glass Market",
        ),
        sights=(
            "Lanterns of coloured glass hang over every stall in the Glass Market.",
            "Light breaks into rainbows on the stall awnings.",
            "A juggler tosses three glass balls and never drops one.",
            "Shelves of lenses catch the light like a field of eyes.",
            "Half the Glass Market seems to be haggling at the top of its voice.",
        ),
        sounds=(
            "Glass chimes tinkle in the breeze.",
            "A stallholder bangs a spoon on a pot to draw buyers.",
            "Somewhere a tray of glasses shatters, and a crowd cheers.",
        ),
        smells=(
            "It smells of hot sand and furnace smoke.",
            "Roasting nuts and lamp oil scent the air.",
            "A sweet, burnt smell drifts from the glassblowers' furnaces.",
        ),
        props=(
            "a cracked green lens",
            "a blown-glass float",
            "a string of glass beads",
            "a tiny glass bird",
            "a ground-crystal prism",
            "a chipped magnifying glass",
        ),
        npcs=(
            "a glassblower with scorched sleeves",
            "a lens-grinder in thick spectacles",
            "a pickpocket pretending to browse",
            "a stallholder with a voice like a foghorn",
        ),
        topics=(
            "the price of lenses",
            "the pickpocket in the crowd",
            "the stall that sells star charts",
            "the glassblowers' guild",
            "the forged seal going round",
            "the cracked prism",
        ),
        titles=("Haggling at the Glass Market", "Prisms and Pickpockets", "Broken Glass"),
    ),
    _Place(
        name="the Rusted Anchor",
        prep="at",
        arrivals=(
            "{who} shoulder through the door of the Rusted Anchor",
            "{who} claim the corner table at the Rusted Anchor",
            "the warmth of the Rusted Anchor swallows {who} whole",
        ),
        sights=(
            "The back room of the Rusted Anchor is thick with pipe smoke.",
            "A fire sulks in the grate.",
            "Someone has carved a ship into every table of the Rusted Anchor.",
            "The barkeep polishes the same mug over and over.",
            "Cards slap down at a table near the stairs.",
        ),
        sounds=(
            "A fiddler saws out a sea shanty, badly.",
            "Dice rattle in a cup somewhere behind you.",
            "Laughter erupts from the bar and dies away.",
        ),
        smells=(
            "It smells of spilled ale and damp wool.",
            "Pipe smoke hangs in a blue haze.",
            "The stew on the fire smells better than it looks.",
        ),
        props=(
            "a tin cup of dark rum",
            "a greasy deck of cards",
            "a bowl of thin stew",
            "a wax-sealed letter",
            "a pewter tankard",
            "a stub of candle",
        ),
        npcs=(
            "the barkeep",
            "a one-eyed card player",
            "a drunk rigger singing to himself",
            "a serving girl with a tray of mugs",
        ),
        topics=(
            "the card game in the back",
            "the stranger buying drinks for everyone",
            "the barkeep's gossip",
            "the man watching the door",
            "the sealed letter",
            "the room upstairs",
        ),
        titles=("Drinks at the Rusted Anchor", "A Corner Table", "Last Orders"),
    ),
    _Place(
        name="the Kestrel's deck",
        prep="on",
        arrivals=(
            "{who} stand together on the Kestrel's deck as the ship climbs",
            "the Kestrel is aloft again, and {who} are up on the Kestrel's deck",
            "the wind finds {who} on the Kestrel's deck",
        ),
        sights=(
            "The Kestrel's deck tilts gently as she catches a crosswind.",
            "Cloud islands drift far below the rail.",
            "The patched mainsail bellies out overhead.",
            "A grease-smudged toolbox sits lashed to the mast.",
            "The wheel creaks as it turns under a steady hand.",
        ),
        sounds=(
            "Rigging hums like a plucked string.",
            "The engine thrums somewhere beneath the boards.",
            "A loose block bangs against the mast until someone ties it off.",
        ),
        smells=(
            "The wind tastes of rain and coal smoke.",
            "It smells of wet canvas and engine oil.",
            "Cold, clean air stings the nose.",
        ),
        props=(
            "a brass spyglass",
            "a coil of safety line",
            "a dented speaking-trumpet",
            "a weather-stained logbook",
            "a pair of flying goggles",
            "a marlinspike",
        ),
        npcs=(
            "Élodie, up to her elbows in a hatch",
            "Jory with his ledger",
            "the lookout in the crow's nest",
            "the helmsman",
        ),
        topics=(
            "the wind shift to the west",
            "the patched mainsail",
            "the course past the Cinder Line",
            "the pressure in the boiler",
            "the ship on our tail",
            "the watch rota",
        ),
        titles=("On Deck", "A Steady Wind", "Above the Clouds"),
    ),
    _Place(
        name="the engine room of the Kestrel",
        prep="in",
        arrivals=(
            "{who} climb down into the engine room of the Kestrel",
            "the heat of the engine room of the Kestrel hits {who} like a wall",
            "{who} squeeze past the boiler into the engine room of the Kestrel",
        ),
        sights=(
            "Pipes sweat and hiss along every wall of the engine room of the Kestrel.",
            "The boiler glows a dull orange behind its grille.",
            "Gauges twitch, their needles never quite still.",
            "Spanners hang in neat rows, each in its painted outline.",
            "A kettle balances on a steam pipe, very nearly boiling.",
        ),
        sounds=(
            "The pistons pound like a giant's heartbeat.",
            "A valve shrieks and settles.",
            "Something metal pings as it cools.",
        ),
        smells=(
            "The air is thick with oil and hot iron.",
            "It smells of coal dust and scorched grease.",
            "Steam leaves a taste of rust on the tongue.",
        ),
        props=(
            "an oily rag",
            "a pressure gauge",
            "a heavy spanner",
            "a tin of grease",
            "a spare valve",
            "a coal shovel",
        ),
        npcs=("Élodie", "the stoker", "a boiler-boy black with soot", "Jory, counting coal sacks"),
        topics=(
            "the cracked valve",
            "the coal we have left",
            "the rattle in the drive shaft",
            "the boiler's temper",
            "the new piston",
            "the stoker's pay",
        ),
        titles=("Below Decks", "Steam and Iron", "The Cracked Valve"),
    ),
    _Place(
        name="the old mill",
        prep="at",
        arrivals=(
            "{who} pick their way up the river path to the old mill",
            "the broken waterwheel of the old mill looms up ahead of {who}",
            "{who} slip through a gap in the fence around the old mill",
        ),
        sights=(
            "The waterwheel of the old mill hangs still, half its paddles gone.",
            "Flour dust lies thick on every beam.",
            "Ivy has pulled a window of the old mill clean out of its frame.",
            "Rats scatter from a pile of rotten sacks.",
            "Millstones lean against the wall like giant coins.",
        ),
        sounds=(
            "The river chuckles under the floorboards.",
            "A loose shutter knocks in the wind.",
            "Pigeons clatter up into the rafters.",
        ),
        smells=(
            "It smells of mould and old grain.",
            "The air is damp and sour.",
            "A whiff of lamp oil suggests someone was here not long ago.",
        ),
        props=(
            "a rusted lantern",
            "a torn flour sack",
            "a wooden cog",
            "a broken padlock",
            "a muddy boot print",
            "a crowbar",
        ),
        npcs=(
            "a tramp asleep in the loft",
            "a watchman with a cudgel",
            "the miller's widow",
            "a boy fishing from the sluice",
        ),
        topics=(
            "the fresh boot print",
            "the trapdoor under the millstones",
            "the broken padlock",
            "the foreman who used to work here",
            "the smugglers' signal lamp",
            "the river path",
        ),
        titles=("The Old Mill", "Dust and Millstones", "Under the Waterwheel"),
    ),
    _Place(
        name="Lumen Reach",
        prep="in",
        arrivals=(
            "the Kestrel limps into Lumen Reach",
            "{who} step off the lift cage into the streets of Lumen Reach",
            "the towers of Lumen Reach rise out of the haze ahead of {who}",
        ),
        sights=(
            "Rope bridges tie the towers of Lumen Reach together.",
            "Gardens hang dripping from the underside of the city.",
            "Every dock in Lumen Reach flies a different flag.",
            "A lamplit tram clatters along a cable overhead.",
            "Street preachers shout from upturned crates.",
        ),
        sounds=(
            "Bells answer each other from tower to tower.",
            "Somebody is hammering in a workshop close by.",
            "A street band plays something brassy and out of tune.",
        ),
        smells=(
            "The streets smell of frying onions, hot tar and money.",
            "Wet greenery scents the air from the hanging gardens.",
            "Incense drifts out of a temple doorway.",
        ),
        props=(
            "a tram token",
            "a city map printed on silk",
            "a paper twist of sugared almonds",
            "a tower pass",
            "a street-seller's pamphlet",
            "a copper bell",
        ),
        npcs=(
            "a tower guard in a plumed helmet",
            "a street preacher",
            "a flower seller",
            "a courier running between towers",
        ),
        topics=(
            "the tower guard",
            "the city's landing tax",
            "the lodestone under the city",
            "the preacher's warning",
            "the tram cable",
            "the guild that runs the docks",
        ),
        titles=("Arrival at Lumen Reach", "Streets of Lumen Reach", "The Floating City"),
    ),
    _Place(
        name="the guild archive",
        prep="in",
        arrivals=(
            "{who} are shown into the guild archive by a yawning clerk",
            "the heavy doors of the guild archive close behind {who}",
            "{who} climb the spiral stair to the guild archive",
        ),
        sights=(
            "Shelves of the guild archive vanish up into the gloom.",
            "Map drawers line the walls, each labelled in faded ink.",
            "A clerk dozes over a ledger the size of a door.",
            "Dust floats in the slanting light from a high window.",
            "A brass globe of the sky islands stands in the middle of the guild archive.",
        ),
        sounds=(
            "Pages whisper somewhere in the stacks.",
            "A ladder squeals on its rail.",
            "A clerk coughs, loudly and pointedly.",
        ),
        smells=(
            "It smells of old paper and candle wax.",
            "The air is dry enough to make the throat itch.",
            "Leather bindings give off a faint, sweet smell.",
        ),
        props=(
            "a faded survey map",
            "a clerk's quill",
            "a cracked leather folio",
            "a reading lens on a chain",
            "a bundle of letters tied with string",
            "an index card",
        ),
        npcs=(
            "a yawning clerk",
            "the head archivist",
            "a student copying maps",
            "a guild inspector",
        ),
        topics=(
            "the missing survey map",
            "the archivist's rule book",
            "the old expedition record",
            "the torn index",
            "the guild's reading fee",
            "the sealed drawer",
        ),
        titles=("Among the Maps", "The Guild Archive", "Old Records"),
    ),
    _Place(
        name="the lighthouse at Gull Point",
        prep="at",
        arrivals=(
            "{who} climb the cliff path to the lighthouse at Gull Point",
            "the beam of the lighthouse at Gull Point sweeps over {who}",
            "{who} reach the foot of the lighthouse at Gull Point",
        ),
        sights=(
            "The lighthouse at Gull Point leans a little, as if listening to the sea.",
            "Salt has eaten the paint off the door.",
            "The spiral stair winds up into darkness.",
            "Waves burst white against the rocks below.",
            "The great lens turns slowly at the top of the tower.",
        ),
        sounds=(
            "Wind moans through the cracks in the tower.",
            "The sea booms against the cliff.",
            "Gulls wheel and scream around the lamp room.",
        ),
        smells=(
            "It smells of seaweed and paraffin.",
            "Cold spray salts the air.",
            "Old smoke lingers in the lamp room.",
        ),
        props=(
            "a keeper's logbook",
            "a can of paraffin",
            "a storm lantern",
            "a rusted key on a nail",
            "a brass telescope",
            "a tangle of fishing line",
        ),
        npcs=(
            "the lighthouse keeper",
            "the keeper's grandson",
            "a fisherman on the rocks",
            "a coastguard",
        ),
        topics=(
            "the keeper's logbook",
            "the light seen out at sea",
            "the wreck on the rocks",
            "the cliff path",
            "the signal code",
            "the keeper's story",
        ),
        titles=("The Lighthouse at Gull Point", "Signals at Sea", "The Keeper's Tale"),
    ),
    _Place(
        name="the salt flats",
        prep="on",
        arrivals=(
            "the Kestrel sets down on the salt flats",
            "{who} walk out onto the salt flats",
            "the white glare of the salt flats spreads out before {who}",
        ),
        sights=(
            "The salt flats stretch white and empty to every horizon.",
            "The crust cracks into hexagons underfoot.",
            "Heat shimmer turns distant rocks into floating islands.",
            "A line of bleached posts marks an old road across the salt flats.",
            "The bones of a wagon stick up out of the salt.",
        ),
        sounds=(
            "The salt crunches with every step.",
            "There is no sound at all but the wind.",
            "A hawk cries, very high.",
        ),
        smells=(
            "The air tastes of salt and dust.",
            "It smells of nothing at all, which is somehow worse.",
            "Heat rises off the ground in waves.",
        ),
        props=(
            "a water skin",
            "a salt-crusted compass",
            "a wide-brimmed hat",
            "a pair of smoked goggles",
            "a surveyor's stake",
            "a sun-bleached skull",
        ),
        npcs=(
            "a salt miner",
            "a caravan guide",
            "a surveyor with a theodolite",
            "a lone prospector with a mule",
        ),
        topics=(
            "the water we have left",
            "the old road",
            "the salt miners' warning",
            "the heat",
            "the buried wagon",
            "the mirage",
        ),
        titles=("Crossing the Salt Flats", "White Ground", "Mirages"),
    ),
    _Place(
        name="the customs house",
        prep="at",
        arrivals=(
            "{who} join the long queue at the customs house",
            "{who} are marched into the customs house by two officers",
            "the doors of the customs house swing open in front of {who}",
        ),
        sights=(
            "Clerks behind brass grilles stamp paper after paper at the customs house.",
            "A portrait of the harbour commissioner glares down from the wall.",
            "Confiscated crates are stacked to the ceiling.",
            "The queue at the customs house barely moves.",
            "A notice lists forbidden cargo in tiny print.",
        ),
        sounds=(
            "Stamps thump down like a slow drumbeat.",
            "An officer barks a name, then another.",
            "Someone argues loudly about a fine.",
        ),
        smells=(
            "It smells of ink and floor polish.",
            "The air is stale with too many waiting bodies.",
            "Sealing wax melts somewhere with a sharp smell.",
        ),
        props=(
            "a landing permit",
            "a stamped receipt",
            "a cargo declaration",
            "a numbered ticket stub",
            "an inkpad",
            "a confiscation notice",
        ),
        npcs=("a customs officer", "a clerk behind a grille", "a weeping merchant", "a guard"),
        topics=(
            "the landing permit",
            "the inspection of the hold",
            "the fine for late papers",
            "the confiscated cargo",
            "the commissioner's new decree",
            "the clerk who keeps staring",
        ),
        titles=("Papers, Please", "The Customs House", "Stamps and Fines"),
    ),
    _Place(
        name="the Shear",
        prep="in",
        arrivals=(
            "the Kestrel slides between the first drifting rocks of the Shear",
            "{who} watch the cliffs of the Shear close in around the ship",
            "the winds of the Shear seize the Kestrel",
        ),
        sights=(
            "Rocks the size of houses drift through the Shear.",
            "The canyon walls of the Shear are scarred with old wrecks.",
            "Cloud pours over the rim like a slow waterfall.",
            "Loose stones tumble upward in the crosswind.",
            "A broken mast juts out of a ledge.",
        ),
        sounds=(
            "Wind screams through the gaps between the rocks.",
            "Stone grinds on stone somewhere close.",
            "The hull groans in the gusts.",
        ),
        smells=(
            "The air smells of wet stone and ozone.",
            "It smells of cold iron.",
            "Grit stings the eyes and nose.",
        ),
        props=(
            "a rope ladder",
            "a grappling hook",
            "a chart of the Shear",
            "a storm lamp",
            "a sounding line",
            "a fender",
        ),
        npcs=(
            "Jory at the rail",
            "Élodie shouting up from below",
            "the lookout",
            "the helmsman",
        ),
        topics=(
            "the course through the Shear",
            "the drifting rock field",
            "the wreck on the ledge",
            "the crosswind",
            "the damaged hull",
            "the way out",
        ),
        titles=("Into the Shear", "Drifting Rocks", "Threading the Needle"),
    ),
    _Place(
        name="Aster Hollow",
        prep="at",
        arrivals=(
            "the clouds part, and Aster Hollow lies below the Kestrel",
            "{who} scramble down into the crater of Aster Hollow",
            "{who} finally stand at the broken gate of Aster Hollow",
        ),
        sights=(
            "The crater of Aster Hollow is a mile across and black as soot.",
            "A shattered dome sits at the centre of Aster Hollow.",
            "Crystal veins glow faintly in the rock.",
            "Fallen pillars lie like dominoes across the crater floor.",
            "Strange symbols are carved around every doorway.",
        ),
        sounds=(
            "Something hums deep inside the rock.",
            "Pebbles trickle down the crater walls.",
            "An echo answers every footstep a moment too late.",
        ),
        smells=(
            "The air smells of dust and lightning.",
            "It smells old, like a tomb opened for the first time.",
            "A metallic tang hangs in the air.",
        ),
        props=(
            "a crystal shard",
            "a carved stone disc",
            "a rusted orrery gear",
            "a guttering torch",
            "a rubbing of the symbols",
            "a coil of climbing rope",
        ),
        npcs=(
            "a figure on the crater rim",
            "a robed pilgrim",
            "a treasure hunter",
            "Jory",
        ),
        topics=(
            "the orrery",
            "the carved doorway",
            "the humming in the rock",
            "the shattered dome",
            "the way down",
            "what Aldric found here",
        ),
        titles=("Aster Hollow", "The Crater", "The Orrery"),
    ),
    _Place(
        name="Hesk's counting house",
        prep="at",
        arrivals=(
            "{who} climb the narrow stair to Hesk's counting house",
            "a clerk lets {who} into Hesk's counting house without a word",
            "{who} wait in the cold hall of Hesk's counting house",
        ),
        sights=(
            "Ledgers line every wall of Hesk's counting house.",
            "A scale on the desk is weighed down with coins.",
            "The clerks never look up from their columns.",
            "An iron safe squats in the corner like a toad.",
            "The window of Hesk's counting house is barred on the inside.",
        ),
        sounds=(
            "Pens scratch without pause.",
            "Coins clink as a clerk counts them into stacks.",
            "A clock ticks, loud in the silence.",
        ),
        smells=(
            "It smells of ink and cold ashes.",
            "The air is chilly and dry.",
            "A faint smell of pomade hangs about the desk.",
        ),
        props=(
            "a promissory note",
            "a stack of silver coins",
            "a ledger bound in black",
            "a quill pen",
            "a wax seal",
            "a blotter",
        ),
        npcs=("Hesk", "a pale clerk", "a hired bruiser by the door", "an old debtor"),
        topics=(
            "the debt to Hesk",
            "the interest on the loan",
            "the Kestrel as collateral",
            "Hesk's bruiser",
            "the signed note",
            "the deadline",
        ),
        titles=("Old Debts", "At Hesk's Counting House", "The Price of a Ship"),
    ),
    _Place(
        name="the wreck of the Lark",
        prep="at",
        arrivals=(
            "{who} reach the wreck of the Lark on its lonely cloud island",
            "the Kestrel hovers over the wreck of the Lark while {who} drop down",
            "{who} climb aboard the wreck of the Lark",
        ),
        sights=(
            "The wreck of the Lark lies on her side, ribs showing.",
            "Moss covers what is left of her name board.",
            "The captain's cabin of the Lark is open to the sky.",
            "Rusted cannon point at nothing.",
            "Birds nest in the broken rigging.",
        ),
        sounds=(
            "The hull creaks as the wind shifts it.",
            "Loose planks rattle underfoot.",
            "A door bangs somewhere below.",
        ),
        smells=(
            "It smells of rot and rain.",
            "Old tar and moss scent the air.",
            "A sour smell rises from the flooded hold.",
        ),
        props=(
            "a rusted cutlass",
            "a water-stained logbook",
            "a tarnished badge",
            "a broken sextant",
            "a cracked bottle",
            "a scrap of sailcloth",
        ),
        npcs=(
            "a scavenger with a sack",
            "a salvage diver",
            "an old salvager",
            "a boy hunting for brass",
        ),
        topics=(
            "the Lark's last voyage",
            "the missing crew",
            "the captain's cabin",
            "the flooded hold",
            "the torn logbook",
            "the scavenger camp",
        ),
        titles=("The Wreck of the Lark", "Ghosts of the Lark", "Salvage"),
    ),
    _Place(
        name="the chapel on Bell Hill",
        prep="at",
        arrivals=(
            "{who} climb the worn steps to the chapel on Bell Hill",
            "the bell of the chapel on Bell Hill is ringing as {who} arrive",
            "{who} duck into the chapel on Bell Hill out of the wind",
        ),
        sights=(
            "Candles gutter in the draughty nave of the chapel on Bell Hill.",
            "A stained-glass sky ship glows above the altar.",
            "Prayer ribbons flutter from the rafters.",
            "The pews of the chapel on Bell Hill are carved with the names of lost crews.",
            "A hooded figure kneels near the front.",
        ),
        sounds=(
            "The bell rope creaks in the tower.",
            "Someone is murmuring a prayer.",
            "The door thuds shut behind a latecomer.",
        ),
        smells=(
            "It smells of wax and cold stone.",
            "Incense drifts from a brass burner.",
            "Damp plaster gives the air a chalky taste.",
        ),
        props=(
            "a prayer ribbon",
            "a tallow candle",
            "a brass offering bowl",
            "a worn hymnal",
            "a carved wooden token",
            "a memorial plaque",
        ),
        npcs=("the old priest", "a hooded worshipper", "a bell-ringer", "a widow lighting candles"),
        topics=(
            "the name carved on the pew",
            "the priest's memory",
            "the memorial plaque",
            "the hooded figure",
            "the offering bowl",
            "the bell tower",
        ),
        titles=("The Chapel on Bell Hill", "Candles for the Lost", "Confessions"),
    ),
)

_GLOBAL_TOPICS = (
    "the chart",
    "the debt to Hesk",
    "the brass key",
    "Rook Danner's ship",
    "the route past the Cinder Line",
    "the crew's pay",
    "the storm front to the west",
    "Jory's gambling",
    "the rumour about Aster Hollow",
    "Aldric's last letter",
)

_TITLE_HEADS = (
    "A Deal",
    "Trouble",
    "Old Debts",
    "A Quiet Hour",
    "Bad News",
    "A Stranger",
    "Second Thoughts",
    "Loose Ends",
    "An Offer",
    "The Warning",
    "Hard Bargains",
    "Close Call",
    "Unfinished Business",
    "A Favour Owed",
    "The Long Wait",
    "Secrets",
)

_TIME_CUES = (
    "Two days later",
    "Three days later",
    "Four days later",
    "A week later",
    "Some hours later",
    "A few hours later",
    "The next morning",
    "The following morning",
    "The next evening",
    "That same evening",
    "Late that night",
    "By nightfall",
    "At first light",
    "Just before dawn",
    "Around noon the next day",
    "At dusk",
    "Long after midnight",
    "Early the next morning",
    "The following afternoon",
    "By the next evening",
)

# Dialogue: intent -> (main lines with a {topic}, follow-ups without one, recap verb phrase).
_INTENTS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "ask": (
        (
            "What do you make of {topic}?",
            "Tell me straight, {listener}: how bad is {topic}?",
            "Has anyone {prep} {place} said a word about {topic}?",
            "Do you trust what we heard about {topic}?",
            "Why does nobody want to talk about {topic}?",
            "Be honest with me. Is {topic} going to be a problem?",
            "How long have you known about {topic}?",
        ),
        (
            "I want the truth this time.",
            "Take your time.",
            "And don't give me the short version.",
            "I'm listening.",
            "Well?",
            "You can tell me.",
            "I'd rather hear it from you than from a stranger.",
        ),
        "asks {listener} about {topic}",
    ),
    "warn": (
        (
            "Keep your voice down about {topic}.",
            "If {topic} goes wrong, we are finished {prep} {place}.",
            "Don't mention {topic} in front of {npc}.",
            "I've seen people get hurt over {topic}, {listener}.",
            "Watch yourself. {Topic} is not a game.",
            "One careless word about {topic} and the whole of {place} will know.",
        ),
        (
            "I mean it.",
            "People here have long memories.",
            "Eyes open.",
            "Don't make me say it twice.",
        ),
        "warns {listener} about {topic}",
    ),
    "plan": (
        (
            "We deal with {topic} first, then we get out of {place}.",
            "Here's what we do about {topic}: we wait, we watch, and we let them move first.",
            "If we split up, one of us can look into {topic}.",
            "Give me an hour {prep} {place} and I'll have {topic} sorted.",
            "We deal with {topic} at first light, before anyone is awake.",
            "Leave {topic} to me. You keep an eye on {npc}.",
        ),
        ("Simple enough.", "Any objections?", "We keep it quiet.", "No heroics."),
        "lays out a plan for {topic}",
    ),
    "reassure": (
        (
            "Nobody's going to make trouble over {topic}. Not while I'm here.",
            "Breathe, {listener}. {Topic} can wait.",
            "I've handled worse than {topic}.",
            "It's only {topic}. We'll manage.",
            "Trust me on {topic}. I know how {place} works.",
        ),
        ("You're safe with me.", "Sit down before you fall down.", "We'll be fine."),
        "reassures {listener} about {topic}",
    ),
    "tease": (
        (
            "You've been chewing on {topic} since we got here. It's all over your face.",
            "Careful, {listener}. Worry about {topic} much longer and you'll go grey.",
            "Is that your serious face? Over {topic}?",
            "I'd pay good coin to watch you explain {topic} to {npc}.",
        ),
        ("Relax.", "I'm only half joking.", "Oh, don't sulk."),
        "teases {listener} about {topic}",
    ),
    "remember": (
        (
            "The last time I heard about {topic}, it ended with a knife in somebody's boot.",
            "My father used to say {topic} was bad luck.",
            "I knew a sailor who lost everything over {topic}.",
            "Funny. {Topic} reminds me of the first ship I ever flew.",
        ),
        ("Never mind. Old story.", "Funny how things come back around.", "Forget I said it."),
        "recalls an old story about {topic}",
    ),
    "observe": (
        (
            "Everyone {prep} {place} seems to have an opinion about {topic}.",
            "Look at {npc}. I'd bet money they know something about {topic}.",
            "Strange. Nobody {prep} {place} will meet my eyes when {topic} comes up.",
            "So this is {place}. I see why people whisper about {topic}.",
        ),
        ("Stay close.", "Interesting.", "Don't stare."),
        "remarks on {topic}",
    ),
    "argue": (
        (
            "No. I'm not risking the ship for {topic}.",
            "You're wrong about {topic}, {listener}, and you know it.",
            "That's the worst idea I've heard all week. {Topic} isn't worth it.",
            "Don't tell me to calm down. {Topic} is my problem as much as yours.",
        ),
        ("Find another way.", "I won't budge on this.", "Don't push me."),
        "argues with {listener} over {topic}",
    ),
    "agree": (
        (
            "Fine. You're right about {topic}.",
            "All right, {listener}. We do it your way with {topic}.",
            "I hate it, but you've got a point about {topic}.",
            "Agreed. {Topic} first, everything else after.",
        ),
        ("Don't make me regret it.", "Let's get on with it.", "Shake on it."),
        "agrees with {listener} about {topic}",
    ),
}
_INTENT_NAMES = tuple(_INTENTS)
_REPLIES: dict[str, tuple[str, ...]] = {
    "ask": ("reassure", "warn", "remember", "plan", "observe", "argue"),
    "warn": ("agree", "argue", "reassure", "ask", "plan"),
    "plan": ("agree", "argue", "ask", "warn"),
    "reassure": ("tease", "agree", "ask", "argue"),
    "tease": ("tease", "argue", "reassure", "ask"),
    "remember": ("ask", "observe", "reassure", "tease"),
    "observe": ("ask", "warn", "plan", "agree"),
    "argue": ("argue", "agree", "reassure", "plan"),
    "agree": ("plan", "ask", "tease", "observe"),
}

_PLACE_REMARKS = (
    "I never liked {place}.",
    "{Place} hasn't changed a bit.",
    "Everyone {prep} {place} is listening, remember that.",
    "Mind your purse {prep} {place}.",
    "Of all the places to end up, {place}.",
    "I could spend a month {prep} {place} and never get bored.",
    "Nothing {prep} {place} is ever what it looks like.",
)

_CHARACTER_ACTIONS = (
    "{c} turns {prop} over in {their} hands.",
    "{c} glances around {place}, then back at you.",
    "{c} drums {their} fingers on the nearest surface.",
    "{c} keeps one eye on {npc}.",
    "{c} lowers {their} voice.",
    "{c} laughs, short and surprised.",
    "{c} folds {their} arms and studies you.",
    "{c} nods toward {npc}.",
    "{c} shrugs, not quite convinced.",
    "{c} steps closer, so that {npc} can't overhear.",
    "{c} rubs the bridge of {their} nose.",
    "{c} sets {prop} down between you.",
    "{c} picks up {prop} and squints at it.",
    "{c} tilts {their} head, considering.",
    "{c} snorts.",
    "{c} looks at you for a long moment.",
    "{c} pushes {their} hair out of {their} eyes.",
    "{c} leans against the nearest wall and sighs.",
    "{c}'s mouth twitches toward a smile.",
    "{c} taps {their} boot, impatient.",
    "{c} pockets {prop} when nobody is looking.",
)

_USER_ACTIONS = (
    "I turn {prop} over in my hands.",
    "I glance around {place}.",
    "I lean closer to {c}.",
    "I shove my hands in my pockets.",
    "I hand {prop} to {c}.",
    "I follow {c}'s gaze to {npc}.",
    "I rub the back of my neck.",
    "I shift my weight, uneasy.",
    "I pick up {prop} and study it.",
    "I lower my voice.",
    "I can't help smiling.",
    "I frown at {npc}.",
    "I check the map tube under my arm.",
    "I take a slow breath.",
)

_NPC_DOINGS = (
    "stops to listen, then pretends not to",
    "drops something and swears loudly",
    "hurries past without looking up",
    "argues with someone out of sight",
    "keeps glancing at the newcomers",
    "laughs at a joke nobody else heard",
    "counts a handful of coins twice and frowns",
    "edges a little closer to {user} and {c}",
    "watches the crew of the Kestrel with open interest",
)

_GENERIC_LINES = (
    "Don't look at me like that.",
    "Hm.",
    "Go on, then.",
    "That's not nothing.",
    "You heard me.",
    "Right.",
    "Gods, what a mess.",
    "I'm not saying it again.",
    "Honestly.",
    "We've been in worse spots.",
    "I don't like it.",
    "Let me think.",
    "That's the trouble, isn't it?",
    "You always say that.",
)

_OOC_REASONS = (
    "brb, dinner's ready",
    "sorry, phone call",
    "gotta feed the cat",
    "quick break, my tea went cold",
    "kid woke up, one sec",
    "my connection is acting up",
    "stepping away for a bit",
    "doorbell, hang on",
    "grabbing a snack",
    "need to stretch my legs",
    "laptop's about to die, plugging in",
    "my roommate needs help with something",
)
_OOC_TAILS = (
    "",
    " back soon!",
    " don't let {c} do anything rash without me 😄",
    " this scene is great btw",
    " loving where this is going",
    " can we keep the pace a bit slower?",
    " remind me about the chart thing",
    " the descriptions of {place} are so good",
    " sorry for the short replies",
    " feel free to keep the NPCs talking",
)

_NAME_TITLES = frozenset({"Captain", "Sister", "Brother", "Doctor", "Lady", "Lord", "Master"})
_POSSESSIVES = {"Mira": "her", "Élodie": "her", "Cass": "her", "Jory": "his"}
_SUBJECTS = {"her": "She", "his": "He"}
_GROUP_COMPANIONS = ("Élodie", "Jory", "Sister Cass")

# --------------------------------------------------------------------------------------------
# Fact pools: invented words that never occur in chatter, combined into many distinct answers.
# --------------------------------------------------------------------------------------------

_FACT_FIRST_NAMES = (
    "Harrow", "Bellamy", "Corwin", "Ysolde", "Marek", "Tamsin", "Idris", "Lucan", "Saffron",
    "Doran", "Petra", "Anselm", "Greer", "Hollis", "Ivo", "Junia", "Kasimir", "Liesl",
    "Matthias", "Nell", "Orla", "Perrin", "Quentin", "Rosamund", "Sabine", "Teodor", "Ulla",
    "Viggo", "Wilhelmina", "Xavi", "Yara", "Zeno", "Agathe", "Barnaby", "Cosima", "Desmond",
    "Edda", "Fenwick", "Griselda", "Hester",
)  # fmt: skip
_FACT_LAST_NAMES = (
    "Vane", "Thorne", "Merrow", "Quillon", "Ashgrove", "Blackwood", "Calloway", "Drummond",
    "Everly", "Farrow", "Galloway", "Hartwell", "Ingram", "Jessup", "Kettering", "Lowell",
    "Marchetti", "Norcross", "Oakes", "Pemberton", "Radley", "Sallow", "Tindall", "Underhill",
    "Voss", "Whitlock", "Yarrow", "Zabel", "Abernathy", "Brackett",
)  # fmt: skip
_FACT_PLACE_PREFIXES = (
    "Larkspur", "Thimble", "Gannet", "Wicker", "Hollin", "Marrowby", "Pinchgate", "Tallow",
    "Brindle", "Cresset", "Dunmore", "Fennick", "Gallowglass", "Heddle", "Inkwell", "Juniper",
    "Kettlewell", "Mallory", "Nettlebed", "Orrin", "Plover", "Quarrington", "Rookwood",
    "Sorrel", "Tannery", "Umber", "Vellum", "Wrenfield", "Yewdale", "Saltire",
)  # fmt: skip
_FACT_PLACE_SUFFIXES = (
    "Row", "Steps", "Yard", "Lane", "Court", "Quay", "Alley", "Stair", "Close", "Wharf",
    "Cross", "Gate",
)  # fmt: skip
_MONTHS = (
    "Frostmonth", "Emberfall", "Thawmonth", "Seedtide", "Rainmoot", "Highsun", "Reaping",
    "Leaffall", "Deepwinter", "Stormturn", "Greentide", "Ashmonth",
)  # fmt: skip

_CODE_CONTAINERS = (
    "the vault", "the strongbox", "the lockbox", "the chart case", "the sea chest",
    "the iron safe", "the reliquary", "the signal cabinet", "the gun locker", "the cipher lock",
)  # fmt: skip
_CODE_LOCATIONS = (
    "under the old mill", "behind the chapel altar", "in the harbourmaster's office",
    "beneath the customs house", "in the captain's cabin", "at the back of the chandlery",
    "below the lighthouse stairs", "in the guild archive", "under the galley floor",
    "in the pawnbroker's cellar", "behind the tavern bar", "in the bank on Salt Street",
    "inside the signal tower", "under the canal bridge", "in the counting house",
    "beside the boiler", "in the bosun's locker", "under the chapel bell",
    "in the salvage broker's shop", "behind the waterwheel", "in the tram depot",
    "below the market stalls", "inside the wreck's cabin", "in the keeper's quarters",
)  # fmt: skip
_ROLES = (
    "the forger", "the fence", "the smuggler", "the informant", "the courier", "the physician",
    "the locksmith", "the pilot", "the moneylender's clerk", "the priest", "the archivist",
    "the bosun", "the spy", "the gunsmith", "the ferryman", "the innkeeper", "the magistrate",
    "the herbalist", "the clockmaker", "the diver", "the tattooist", "the bookbinder",
    "the lamplighter", "the customs officer", "the dockmaster",
)  # fmt: skip
_ROLE_CLAUSES = (
    "who owes the crew a favour", "who was asking questions about the chart",
    "who can get a ship past the customs cordon", "who was paid to keep quiet about the fire",
    "who wrote the unsigned letter", "who saw the fire start in the warehouse",
    "who hid the stolen ledger", "who carries messages for the guild",
    "who patched up the wounded deckhand", "who rents rooms above the chandlery",
    "who bought the stolen compass", "who keeps the keys to the customs shed",
    "who followed the crew from the docks", "who runs the card game in the back room",
    "who sold the forged landing papers", "who knows the way through the Shear",
    "who testified at the salvage hearing", "who used to fly with Rook Danner",
    "who found the drowned courier", "who lent the crew a spyglass",
)  # fmt: skip
_SELLERS = (
    "the chandler", "the glassblower", "the fence", "the harbourmaster", "the salvage broker",
    "the quartermaster of the Grey Widow", "the old trader", "the smuggler", "the sailmaker",
    "the apothecary", "the pawnbroker", "the coal merchant",
)  # fmt: skip
_PRICED_ITEMS = (
    "a new topsail", "the brass spyglass", "the forged permit", "a berth for the week",
    "the salvage rights", "two casks of fresh water", "the old chart of the Shear",
    "a crate of lamp oil", "the silver compass", "passage to Lumen Reach",
    "the replacement boiler valve", "the news about the pirates", "the healer's salve",
    "a month's mooring", "the captured signal book",
)  # fmt: skip
_EVENTS = (
    "the meeting with", "the payment owed to", "the dinner promised to", "the delivery promised to",
    "the hand-over arranged with", "the rendezvous with",
)  # fmt: skip
_HIDERS = (
    "the smuggler", "the bosun", "the old trader", "the informant", "the courier", "the diver",
    "the spy", "the fence",
)  # fmt: skip
_HIDDEN_ITEMS = (
    "the stolen ledger", "the spare key to the hold", "the second chart", "the captain's pistol",
    "the bag of salvage coins", "the letter from the guild", "the signal book",
    "the smuggled lenses", "the crate of rifles", "the forged papers", "the map to the wreck",
    "the missing logbook", "the medicine chest", "the ransom money", "the stolen figurehead",
)  # fmt: skip


@dataclass(frozen=True)
class _FactKind:
    weight: int
    question: str  # format fields: a, b (the subject's parts)
    clause: str  # for recaps; fields: a, b, ans
    said: tuple[str, ...]  # dialogue sentences; fields: a, A, b, B, ans, place, prep
    narrated: tuple[str, ...]  # narration sentences; same fields


_FACT_KINDS: dict[str, _FactKind] = {
    "code": _FactKind(
        weight=5,
        question="What is the code of {a} {b}?",
        clause="the code of {a} {b} is {ans}",
        said=(
            "The code for {a} {b} is {ans}.",
            "{A} {b} opens on {ans}, and on nothing else.",
            "Four numbers: {ans}. That's what opens {a} {b}.",
            "If anything happens to me, {a} {b} opens with {ans}.",
            "Write this down somewhere safe: {ans} opens {a} {b}.",
        ),
        narrated=(
            "The dial of {a} {b} clicks round to {ans}, and the door swings open.",
            "Scratched inside the lid of {a} {b} is its code: {ans}.",
        ),
    ),
    "name": _FactKind(
        weight=5,
        question="What is the name of {a} {b}?",
        clause="{a} {b} is called {ans}",
        said=(
            "{A} {b} goes by {ans}.",
            "You want a name? {ans}. That's {a} {b}.",
            "{A} {b} is called {ans}, if anyone asks.",
            "Remember the name {ans}. That's {a} {b}.",
            "The name you want is {ans}: {a} {b}.",
        ),
        narrated=(
            "Word {prep} {place} is that {a} {b} is called {ans}.",
            "A scrawled note names {a} {b}: {ans}.",
        ),
    ),
    "price": _FactKind(
        weight=4,
        question="How much does {a} want for {b}?",
        clause="{a} wants {ans} for {b}",
        said=(
            "{A} wants {ans} for {b}.",
            "{ans} for {b}? {A} must think we're made of money.",
            "I asked {a} about {b}. The price is {ans}, and not a copper less.",
            "{A} won't part with {b} for less than {ans}.",
        ),
        narrated=(
            "{A} names a price for {b}: {ans}, and not a copper less.",
            "The tag tied to {b} reads {ans}, in the cramped hand of {a}.",
        ),
    ),
    "date": _FactKind(
        weight=3,
        question="When is {a} {b}?",
        clause="{a} {b} is set for the {ans}",
        said=(
            "{A} {b} is set for the {ans}.",
            "Mark it down: the {ans}. That's when {a} {b} happens.",
            "The {ans}. That's the date of {a} {b}, and it won't move.",
            "{A} {b} falls on the {ans}, so we don't have long.",
        ),
        narrated=("A notice pinned up {prep} {place} gives the date of {a} {b}: the {ans}.",),
    ),
    "place": _FactKind(
        weight=3,
        question="Where did {a} hide {b}?",
        clause="{a} hid {b} at {ans}",
        said=(
            "{A} hid {b} at {ans}.",
            "{ans}. That's where {a} stashed {b}.",
            "If you want {b}, look at {ans}. That's where {a} left it.",
            "{A} swears {b} is safe at {ans}, under a loose stone.",
        ),
        narrated=("Unseen by anyone, {a} has tucked {b} away at {ans}.",),
    ),
}
_FACT_KIND_NAMES = tuple(_FACT_KINDS)
_FACT_KIND_WEIGHTS = tuple(kind.weight for kind in _FACT_KINDS.values())

_T = TypeVar("_T")
_EPOCH = datetime(2026, 3, 2)


def _cap(text: str) -> str:
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
    if len(words) > 1 and words[0] in _NAME_TITLES:
        words = words[1:]
    return words[0] if words else name


_DAYS: dict[int, str] = {}


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


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


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
    builder = _Builder(
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


# --------------------------------------------------------------------------------------------
# The builder
# --------------------------------------------------------------------------------------------


@dataclass
class _Content:
    """One message's text (or one swipe's) and its recap."""

    text: str
    recap: str


@dataclass
class _FactDraft:
    kind: _FactKind
    a: str
    b: str
    answer: str

    @property
    def question(self) -> str:
        return self.kind.question.format(a=self.a, b=self.b)

    @property
    def clause(self) -> str:
        return self.kind.clause.format(a=self.a, b=self.b, ans=self.answer)


class _FactPools:
    """Per chat: shuffled subjects and answers of every fact kind, handed out without repeats."""

    def __init__(self, rng: random.Random, names_in_use: Sequence[str]) -> None:
        self._rng = rng
        taken = " ".join(names_in_use)
        self._firsts = [w for w in _FACT_FIRST_NAMES if w not in taken]
        self._prefixes = [w for w in _FACT_PLACE_PREFIXES if w not in taken]
        self._subjects: dict[str, list[tuple[str, str]]] = {}
        self._answers: dict[str, list[str]] = {}

    def draw(self, kind_name: str) -> _FactDraft | None:
        if kind_name not in self._subjects:
            self._fill(kind_name)
        subjects = self._subjects[kind_name]
        answers = self._answers[kind_name]
        if not subjects or not answers:
            return None
        a, b = subjects.pop()
        return _FactDraft(_FACT_KINDS[kind_name], a, b, answers.pop())

    def _fill(self, kind_name: str) -> None:
        rng = self._rng
        subjects: list[tuple[str, str]]
        answers: list[str]
        if kind_name == "code":
            subjects = [(c, loc) for c in _CODE_CONTAINERS for loc in _CODE_LOCATIONS]
            answers = [str(n) for n in rng.sample(range(1000, 10000), len(subjects))]
        elif kind_name == "name":
            subjects = [(r, cl) for r in _ROLES for cl in _ROLE_CLAUSES]
            answers = [f"{f} {s}" for f in self._firsts for s in _FACT_LAST_NAMES]
        elif kind_name == "price":
            subjects = [(s, i) for s in _SELLERS for i in _PRICED_ITEMS]
            answers = [f"{n} crowns" for n in rng.sample(range(120, 990), len(subjects))]
        elif kind_name == "date":
            subjects = [(e, r) for e in _EVENTS for r in _ROLES]
            answers = [f"{d}th of {m}" for d in range(10, 29) for m in _MONTHS]
        else:
            subjects = [(h, i) for h in _HIDERS for i in _HIDDEN_ITEMS]
            answers = [f"{p} {s}" for p in self._prefixes for s in _FACT_PLACE_SUFFIXES]
        rng.shuffle(subjects)
        rng.shuffle(answers)
        self._subjects[kind_name] = subjects
        self._answers[kind_name] = answers


class _Builder:
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
        self.rng = random.Random(seed)
        self._random = self.rng.random
        self._shorts: dict[str, str] = {}
        self._caps: dict[str, str] = {}
        self._base_ctx: dict[tuple[str, str], dict[str, str]] = {}
        self.n = n
        self.group = group
        self.with_recaps = with_recaps
        self.scene_length = scene_length
        self.facts_per_scene = facts_per_scene
        self.hidden_rate = hidden_rate
        self.swipe_rate = swipe_rate
        self.narrator_rate = narrator_rate
        self.user = user
        self.user_short = self._short(user)
        self.characters = [character]
        if group:
            companions = [c for c in _GROUP_COMPANIONS if c not in (user, character)]
            self.characters += self.rng.sample(companions, self._pick((1, 2)))
        self.pools = _FactPools(self.rng, [user, *self.characters])
        self.seen: set[str] = set()
        self.ms = 18 * 3_600_000 + self._below(3_600_000)
        self.place = _PLACES[0]
        self.prev_place: _Place | None = None
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
        recent: list[_Place] = []
        for number, (start, end) in enumerate(bounds):
            choices = [p for p in _PLACES if all(p is not r for r in recent)] or list(_PLACES)
            place = self._pick(choices)
            recent = [*recent[-3:], place]
            self.prev_place, self.place = (self.place if number else None), place
            self._base_ctx.clear()
            self.intent = self.topic = ""
            title = (
                self._pick(place.titles)
                if rng.random() < 0.5
                else f"{self._pick(_TITLE_HEADS)} {place.prep} {place.name}"
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

    def _fact_positions(self, start: int, end: int) -> dict[int, _FactDraft]:
        # Never the scene's opening message; not its last one either when the scene is long
        # enough to avoid it.
        eligible = list(range(start + 1, end if end - start >= 2 else end + 1))
        want = min(self._int(*self.facts_per_scene), len(eligible))
        positions = sorted(self.rng.sample(eligible, want)) if want else []
        drafts: dict[int, _FactDraft] = {}
        for position in positions:
            draft = self._draw_fact()
            if draft is None:
                break
            drafts[position] = draft
        return drafts

    def _draw_fact(self) -> _FactDraft | None:
        rng = self.rng
        kind = rng.choices(_FACT_KIND_NAMES, _FACT_KIND_WEIGHTS)[0]
        draft = self.pools.draw(kind)
        if draft is not None:
            return draft
        for other in _FACT_KIND_NAMES:
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
        facts: dict[int, _FactDraft],
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

    def _unique(self, make: Callable[[int], _Content]) -> _Content:
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

    def _recap(self, message: dict[str, Any], content: _Content) -> None:
        if self.with_recaps:
            message["extra"][NAMESPACE] = {"memory": content.recap, "include": None}

    def _user(self, *, draft: _FactDraft | None) -> tuple[dict[str, Any], str]:
        """A user message, and the fact sentence planted in it (if `draft`)."""
        listener = self._pick(self.characters)
        intent, topic = self._intent_topic()
        fact_text = ""

        def make(attempt: int) -> _Content:
            nonlocal fact_text
            count = self._int(1, 3) + (attempt // 10)
            blocks, fact_text = self._body("user", listener, listener, intent, topic, count, draft)
            return _Content(
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

        def make(attempt: int) -> _Content:
            reason = self._pick(_OOC_REASONS)
            tail = self._pick(_OOC_TAILS).format(c=c, place=self.place.name)
            if attempt > 3:
                tail += self._pick((" 🙏", " ty!", " :)", " ❤️", " lol"))
            return _Content(f"(OOC: {reason}.{tail})" if tail else f"(OOC: {reason})", "")

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
        self, *, opening: bool = False, draft: _FactDraft | None = None
    ) -> tuple[dict[str, Any], str]:
        """A narrator message, and the fact sentence planted in it (if `draft`)."""
        rng = self.rng
        fact_text = ""

        def make(attempt: int) -> _Content:
            nonlocal fact_text
            if opening:
                return self._opening_content(None, attempt)
            ctx = self._ctx(self._short(self._pick(self.characters)), self.user_short)
            npc = self._pick(self.place.npcs)
            doing = self._pick(_NPC_DOINGS).format_map(ctx)
            sentences = [f"{_cap(npc)} {doing}."]
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
            return _Content(f"*{text}*" if rng.random() < 0.7 else text, recap)

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
        self, name: str, *, opening: bool = False, draft: _FactDraft | None = None
    ) -> tuple[dict[str, Any], str]:
        """A character reply with its swipes, and the fact sentence planted in it (if `draft`).

        The fact goes into the active swipe only; the other swipes are alternative replies."""
        rng = self.rng
        listener = self.user
        intent, topic = self._intent_topic()
        fact_text = ""

        def make_plain(attempt: int) -> _Content:
            if opening:
                return self._opening_content(name, attempt)
            count = self._int(2, 7) + attempt // 10
            blocks, _ = self._body("char", name, listener, intent, topic, count, None)
            return _Content(
                self._render(blocks), self._chatter_recap(name, listener, intent, topic, None)
            )

        def make_active(attempt: int) -> _Content:
            nonlocal fact_text
            if draft is None:
                return make_plain(attempt)
            count = self._int(2, 6) + attempt // 10
            blocks, fact_text = self._body("char", name, listener, intent, topic, count, draft)
            return _Content(
                self._render(blocks), self._chatter_recap(name, listener, intent, topic, draft)
            )

        swipe_count = 1 if rng.random() >= self.swipe_rate else self._int(2, 3)
        active = self._below(swipe_count)
        contents: list[_Content] = []
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

    # -- text --------------------------------------------------------------------------------

    def _intent_topic(self) -> tuple[str, str]:
        """What the next line is about: usually a reply to the last one, on the same topic."""
        r = self._random
        replies = _REPLIES.get(self.intent, _INTENT_NAMES) if r() < 0.7 else _INTENT_NAMES
        self.intent = replies[int(r() * len(replies))]
        if not self.topic or r() < 0.4:
            topics = self.place.topics if r() < 0.7 else _GLOBAL_TOPICS
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
                "their": _POSSESSIVES.get(c, "their"),
                "listener": listener,
                "user": self.user_short,
                "place": place.name,
                "Place": _cap(place.name),
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
            capped = self._caps[text] = _cap(text)
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
        draft: _FactDraft | None,
    ) -> tuple[list[tuple[str, list[str]]], str]:
        """Blocks of ("a", action sentences) / ("d", speech sentences), and the fact sentence.

        `voice` is "user" (first person) or "char" (third person, the user is "you"). `actor` is
        who {c} names in actions: the speaker for a character, the one spoken to for the user.
        The first speech sentence carries the message's intent and topic.
        """
        r = self._random
        actor_short = self._short(actor)
        ctx = self._ctx(actor_short, self._short(listener), topic)
        pronoun = "" if voice == "user" else _SUBJECTS.get(ctx["their"], "")
        main_lines, follow_ups, _ = _INTENTS[intent]
        is_user = voice == "user"
        # Layout: alternating blocks of actions and speech, each at least one sentence long.
        most = min(count, 4)
        least = 1 if is_user or count < 2 else 2
        n_blocks = least + int(r() * (most - least + 1)) if most > least else least
        action_first = n_blocks > 1 and r() < (0.4 if is_user else 0.65)
        sizes = [1] * n_blocks
        for _ in range(count - n_blocks):
            sizes[int(r() * n_blocks)] += 1
        actions = _USER_ACTIONS if is_user else _CHARACTER_ACTIONS
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
                        follow_ups
                        if roll < 0.5
                        else _PLACE_REMARKS
                        if roll < 0.7
                        else _GENERIC_LINES
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

    def _fact_fields(self, draft: _FactDraft) -> dict[str, str]:
        return {
            "a": draft.a,
            "A": _cap(draft.a),
            "b": draft.b,
            "B": _cap(draft.b),
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
        self, speaker: str, listener: str, intent: str, topic: str, draft: _FactDraft | None
    ) -> str:
        listener_short = self._short(listener)
        if draft is not None:
            return f"{speaker} tells {listener_short} that {draft.clause}."
        verb = _INTENTS[intent][2].format(listener=listener_short, topic=topic)
        return f"{speaker} {verb} {self.place.prep} {self.place.name}."

    def _opening_content(self, speaker: str | None, attempt: int) -> _Content:
        """The first message of a scene: a time cue, the arrival at the new place, a look around.

        `speaker` None is the narrator (names everyone); else the character (says "you")."""
        rng = self.rng
        place = self.place
        cue = self._pick(_TIME_CUES)
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
            first = f"{_cap(arrival)}."
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
            return _Content(f"*{text}*" if rng.random() < 0.75 else text, f"{recap_head}.")
        remark = self._pick(_PLACE_REMARKS).format_map(ctx)
        line = self._pick(_INTENTS[self._pick(("observe", "plan", "warn"))][0]).format_map(ctx)
        speech = [remark, line] if rng.random() < 0.5 else [line]
        action = self._pick(_CHARACTER_ACTIONS).format_map(ctx)
        blocks: list[tuple[str, list[str]]] = [("a", [first, *look]), ("d", speech)]
        if rng.random() < 0.4:
            blocks.append(("a", [action]))
        return _Content(self._render(blocks), f"{recap_head}.")
