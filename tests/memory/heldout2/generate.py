"""Write the second held-out set: multi-evidence questions whose evidence is told in other words than the question.

Run: python tests/memory/heldout2/generate.py [OUT_DIR] (default: this directory). The seed is fixed, so the files
are the same on every run; they were written and committed before any "all evidence" mechanism was designed, and
``--check`` tells whether the committed files still equal what this script makes (the set is frozen).

Each conversation has two speakers, 14-30 sessions, 300-560 turns and one date a session, in LoCoMo's format
(``speaker_a``, ``speaker_b``, ``session_K``, ``session_K_date_time``, ``qa`` with ``evidence`` dia_ids and a
``category``: 1 multi-hop, 2 temporal, 4 single-hop) plus a ``kind`` per question:

- ``count``: "How many times has Wren gone fishing?" (2-4 occurrences in different sessions, each told in its own
  words: "caught a rainbow trout at Lake Ardis", "spent the morning with a rod out on the pier");
- ``count-dated``: the same, bounded by a year ("... in 2023?") or "as of" a month;
- ``which``: "What books has Wren read?", "Where has Wren camped?", "What pets does Wren have?" (2-4 items, each
  told once, most without the question's noun: "Just finished 'The Salt Road', what an ending");
- ``activities``: "What activities has Wren done with the kids?" (2-4 different outings, one a session);
- ``both``: "What do both Wren and Ilya do to relax?", "Which country have both been to?" (one turn each, the
  two told in different words);
- ``when``: "When did Wren adopt the kitten?" (told "the week before last" in a later session);
- ``dated``: "What did Wren do on 3 May 2023?" (told "yesterday" / "on Saturday" in the next session);
- ``single``: a fact told once.

Distractors share the answers' words: the other speaker's plans and wishes about the same activity, replies that
repeat the item, the same person's talk about the activity without doing it.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

SEED = 20261206
CONVERSATIONS = 8
DAY = timedelta(days=1)

NAMES = """Wren Ilya Odile Marek Sunniva Tobias Leilani Cormac Ngozi Silas Paloma Arjun Mireille Declan Astrid
Kofi Henrike Joaquin Saoirse Dmitri Imani Linus Rosalind Tariq Ottilie Ravi Esme Bastian Yusra Alvaro""".split()
PLACES = """Lake Ardis|Pine Hollow|Cedar Point|Bluewater Bay|Miller's Ridge|Fox Creek|Stone Harbor|Elk Meadow|
Silver Falls|Granite Peak|Willow Bend|Otter Lake|Hawk Hill|Sandy Cove|Maple Run""".replace("\n", "").split("|")
COUNTRIES = ["Portugal", "Japan", "Mexico", "Iceland", "Greece", "Morocco", "Vietnam", "Peru", "Norway", "Chile"]
BOOKS = ["The Salt Road", "Nine Winters", "A Map of Ash", "The Lantern Keeper", "Quiet Harbor", "Paper Moons",
         "The Orchard Year", "Under Copper Skies", "The Glass Library", "Wild Inheritance"]  # fmt: skip
PETS = [("cat", "Pickle"), ("dog", "Juniper"), ("rabbit", "Clover"), ("parrot", "Sunny"), ("hamster", "Nacho"),
        ("turtle", "Gus"), ("kitten", "Miso")]  # fmt: skip

RECURRING = [
    # (the count question's verb phrase, tellings of one occurrence: {p} a place; few use the question's words)
    (
        "go fishing",
        [
            "caught a rainbow trout at {p}, biggest one yet",
            "spent the whole morning with a rod out on the pier at {p}",
            "went fishing at {p} and came home with nothing but a sunburn",
            "landed a bass at {p}, released it right away",
        ],
    ),
    (
        "go to a pottery class",
        [
            "made a lopsided bowl on the wheel at the studio",
            "glazed the mugs I threw, they came out of the kiln today",
            "was at pottery class again and finally centered the clay",
            "threw a vase at the studio, my teacher said it's my best",
        ],
    ),
    (
        "volunteer at the food bank",
        [
            "sorted cans for four hours at the food bank",
            "packed meal boxes for families at the community pantry",
            "did a shift handing out groceries at the pantry",
            "helped unload a truck of donations for the food drive",
        ],
    ),
    (
        "go hiking",
        [
            "did the loop trail around {p}, my legs are dead",
            "hiked up to the lookout at {p}",
            "spent the day on the trails near {p}, saw a deer",
            "climbed to the summit of {p} with a group from work",
        ],
    ),
    (
        "go to the theater",
        [
            "saw a musical downtown and cried at the finale",
            "caught a play at the little playhouse on Main Street",
            "got last-minute tickets to a stage show, the actors were incredible",
            "went to the theater for a comedy, laughed the whole time",
        ],
    ),
    (
        "bake for someone",
        [
            "made a lemon tart for my neighbor's birthday",
            "baked cinnamon rolls for the whole office",
            "brought a batch of brownies to my cousin's party",
            "pulled a loaf of focaccia out of the oven for my in-laws",
        ],
    ),
    (
        "go swimming",
        [
            "swam laps at the community pool before work",
            "did a mile in the lake at {p}, the water was freezing",
            "jumped off the dock at {p} and swam to the raft",
            "went for a long swim at the pool, felt brand new",
        ],
    ),
]
WHICH = [
    # (question, tellings with {x}, the item list key)
    (
        "What books has {p} read?",
        [
            "Just finished '{x}', what an ending.",
            "I'm halfway through '{x}' and I can't put it down.",
            "'{x}' made me cry on the train this morning.",
            "Stayed up until 2am reading '{x}'.",
        ],
        "books",
    ),
    (
        "Where has {p} gone camping?",
        [
            "We pitched the tent by {x}, the stars were unreal.",
            "Slept under the stars at {x} with the kids.",
            "Spent two nights in a cabin tent at {x}, it rained the whole time.",
            "Set up camp at {x} and cooked over the fire.",
        ],
        "places",
    ),
    (
        "What pets does {p} have?",
        [
            "My {x} {n} knocked a glass off the table again.",
            "Took {n}, my {x}, to the vet for a checkup.",
            "{n} the {x} has been sleeping on my laptop all week.",
            "We brought home a {x} and named it {n}.",
        ],
        "pets",
    ),
    (
        "Which countries has {p} visited?",
        [
            "The food in {x} was the best I've ever had.",
            "Flew back from {x} last night, still jet-lagged.",
            "I'll never forget the coastline in {x}.",
            "Two weeks in {x} went by way too fast.",
        ],
        "countries",
    ),
]
KIDS = [
    "took the kids to the science museum",
    "went apple picking with the kids",
    "built a huge sandcastle with the kids at the beach",
    "went ice skating with my son and daughter",
    "took the little ones to the zoo to see the new giraffe",
    "did a scavenger hunt in the park with the kids",
    "made paper lanterns with the kids at home",
]
BOTH = [
    # (question, answer, one telling per speaker)
    (
        "What do both {a} and {b} do to relax?",
        "yoga",
        ["A morning yoga flow is the only thing keeping me sane", "I unwind with a vinyasa class on Thursdays"],
    ),
    (
        "What instrument do both {a} and {b} play?",
        "guitar",
        ["I've been practicing chords on my guitar every night", "I restrung my old acoustic and played for an hour"],
    ),
    (
        "Which sport do both {a} and {b} play?",
        "tennis",
        ["Won my tennis match on Sunday in straight sets", "My backhand on the court is finally getting better"],
    ),
    (
        "What kind of car do both {a} and {b} drive?",
        "a hatchback",
        ["My little hatchback just hit 200,000 miles", "I traded the truck for a hatchback, way easier to park"],
    ),
    (
        "What language are both {a} and {b} learning?",
        "Italian",
        ["My Italian tutor says my accent is improving", "I practice Italian verbs on the bus every morning"],
    ),
]
FACTS = [
    ("My daughter {x} just lost her first tooth", "What is the name of {p}'s daughter?", ["Ada", "Bea", "Lila"]),
    ("I work night shifts as a {x} at the hospital", "What is {p}'s job?", ["paramedic", "lab technician", "nurse"]),
    ("My favorite band is {x}, I've seen them five times", "What is {p}'s favorite band?", ["Low Tide", "The Vanes"]),
    ("I grew up in {x}, a tiny town by the river", "Where did {p} grow up?", ["Harlow", "Bexley", "Ashford"]),
]
EVENTS = [
    # (telling of a one-off event, the "when" question's verb phrase, the "dated" answer)
    ("adopted a kitten from the shelter", "adopt the kitten", "adopted a kitten"),
    ("ran my first 5k", "run a 5k", "ran a 5k"),
    ("got my motorcycle license", "get a motorcycle license", "got a motorcycle license"),
    ("repainted the whole living room", "repaint the living room", "repainted the living room"),
    ("went to my high school reunion", "go to a high school reunion", "went to a reunion"),
    ("planted an apple tree in the yard", "plant an apple tree", "planted an apple tree"),
    ("fixed the leaky roof with my dad", "fix the roof", "fixed the roof"),
    ("signed the lease on a new apartment", "sign a new lease", "signed a lease"),
]
FILLER = [
    "How was your week?",
    "Busy as always, but good busy.",
    "I've been sleeping terribly, too much coffee maybe.",
    "Ha, that is so you.",
    "Tell me everything!",
    "The traffic this week has been brutal.",
    "I finally caught up on laundry, a small victory.",
    "My sister called, she says hello.",
    "I need a vacation from my vacation.",
    "Work keeps throwing surprises at me.",
    "That's wonderful, I'm really happy for you.",
    "I've been meal prepping on Sundays, it helps.",
    "Did you see the storm last night?",
    "I'm trying to spend less time on my phone.",
    "It's been a long month, honestly.",
    "We should catch up in person soon.",
    "That sounds exhausting, take care of yourself.",
    "My landlord finally fixed the heater.",
    "I found a great new coffee place near work.",
    "Anyway, enough about me, what's new with you?",
]
TOPICAL = [
    "I keep meaning to {v}, maybe next month.",
    "My brother wants me to {v} with him sometime.",
    "Do you ever {v}? I'm thinking of trying it.",
    "A friend at work won't stop talking about how she loves to {v}.",
    "I used to {v} a lot as a kid, I miss it.",
    "I should read more, my stack of books keeps growing.",
    "Camping sounds fun until you remember the bugs.",
    "My neighbor's pets are louder than mine would ever be.",
    "I'd love to travel abroad next year if money allows.",
    "The kids at the park today were having the best time.",
]
REPLIES = ["Oh wow, how was it?", "That sounds like so much fun!", "Love that for you!", "No way! Pics please.",
           "That's amazing, I'm jealous.", "You always find the best things to do."]  # fmt: skip
NUMBER = {2: "two", 3: "three", 4: "four"}
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def relative(rng: random.Random, said: date) -> tuple[str, date]:
    """A phrase for a day shortly before ``said`` and that day."""
    back = rng.choice([1, 1, 2, 3, 5, 7, 14])
    day = said - back * DAY
    if back == 1:
        return rng.choice(["yesterday", "last night"]), day
    if back == 7:
        return rng.choice(["a week ago", "last week"]), day
    if back == 14:
        return rng.choice(["two weeks ago", "the week before last"]), day
    return rng.choice([f"{NUMBER.get(back, str(back))} days ago", f"on {WEEKDAYS[day.weekday()]}"]), day


def day_text(rng: random.Random, d: date) -> str:
    """A date as questions write it."""
    return rng.choice([f"{d.strftime('%B')} {d.day}, {d.year}", f"{d.day} {d.strftime('%B')} {d.year}"])


@dataclass
class Turn:
    speaker: str
    text: str
    key: str = ""
    """Marks a planted turn: questions find their evidence by key."""


@dataclass
class Session:
    at: datetime
    planted: list[list[Turn]] = field(default_factory=list)


def cap(text: str) -> str:
    return text[0].upper() + text[1:]


def conversation(rng: random.Random, index: int) -> dict[str, object]:
    a, b = rng.sample(NAMES, 2)
    people = (a, b)
    count = rng.randint(14, 30)
    at = datetime(rng.choice([2022, 2023]), rng.randint(1, 12), rng.randint(1, 28), 8) + timedelta(
        minutes=rng.randint(0, 700)
    )
    sessions: list[Session] = []
    for _ in range(count):
        sessions.append(Session(at))
        at += timedelta(days=rng.randint(6, 30), minutes=rng.randint(-240, 240))
    qa: list[dict[str, object]] = []
    serial = iter(range(100_000))

    def other(person: str) -> str:
        return b if person == a else a

    def plant(s: int, turns: list[Turn]) -> None:
        sessions[s].planted.append(turns)

    def told(person: str, text: str, s: int) -> str:
        key = f"k{next(serial)}"
        plant(s, [Turn(person, text, key), Turn(other(person), rng.choice(REPLIES))])
        return key

    def ask(question: str, answer: str, keys: list[str], category: int, kind: str) -> None:
        qa.append({"question": question, "answer": answer, "evidence": keys, "category": category, "kind": kind})

    def said_on(s: int) -> date:
        return sessions[s].at.date()

    # Recurring activities: counted overall, by year and "as of" a month; each occurrence in its own words.
    for n, (verb, tellings) in enumerate(rng.sample(RECURRING, 4)):
        person = people[n % 2]
        times = rng.choice([2, 3, 3, 4])
        picked = sorted(rng.sample(range(count), times))
        words = rng.sample(tellings, times)
        occurrences: list[tuple[date, str]] = []
        for s, words_ in zip(picked, words, strict=True):
            phrase, day = relative(rng, said_on(s))
            text = words_.format(p=rng.choice(PLACES))
            line = rng.choice([f"{cap(phrase)} I {text}.", f"Guess what, I {text} {phrase}!", f"So I {text}."])
            occurrences.append((day, told(person, line, s)))
        for template in rng.sample(TOPICAL[:5], 2):
            plant(rng.randrange(count), [Turn(rng.choice(people), template.format(v=verb))])
        keys = [k for _, k in occurrences]
        ask(f"How many times did {person} {verb}?", str(times), keys, 1, "count")
        years: dict[int, list[str]] = {}
        for day, key in occurrences:
            years.setdefault(day.year, []).append(key)
        year, inyear = max(years.items(), key=lambda kv: len(kv[1]))
        if len(inyear) >= 2 and len(years) > 1:
            ask(f"How many times did {person} {verb} in {year}?", str(len(inyear)), inyear, 1, "count-dated")
        elif times >= 3:
            last = occurrences[1][0]
            if (last.replace(day=1) + 32 * DAY).replace(day=1) <= occurrences[2][0]:
                bound = f"up to {last.strftime('%B %Y')}"
                ask(f"How many times did {person} {verb} {bound}?", "2", keys[:2], 1, "count-dated")
    # "Which ones": items of one kind, each told once in its own session.
    pools = {"books": BOOKS, "places": PLACES, "countries": COUNTRIES}
    for n, (question, tellings, pool) in enumerate(rng.sample(WHICH, 3)):
        person = people[n % 2]
        times = rng.choice([2, 3, 3, 4])
        keys, answers = [], []
        for s, template in zip(rng.sample(range(count), times), rng.sample(tellings, times), strict=True):
            if pool == "pets":
                kind, name = rng.choice(PETS)
                text, answer = template.format(x=kind, n=name), f"{kind} {name}"
            else:
                answer = rng.choice(pools[pool])
                text = template.format(x=answer)
            keys.append(told(person, text, s))
            answers.append(answer)
        plant(rng.randrange(count), [Turn(other(person), rng.choice(TOPICAL[5:9]))])
        ask(question.format(p=person), ", ".join(answers), keys, 1, "which")
    # Outings with the kids: 2-4 different ones.
    parent = rng.choice(people)
    times = rng.choice([2, 3, 4])
    keys = []
    for s, outing in zip(rng.sample(range(count), times), rng.sample(KIDS, times), strict=True):
        phrase, _ = relative(rng, said_on(s))
        keys.append(told(parent, f"{cap(phrase)} I {outing}, they loved it.", s))
    plant(rng.randrange(count), [Turn(other(parent), TOPICAL[9])])
    ask(f"What activities has {parent} done with the kids?", "outings", keys, 1, "activities")
    # Both: one telling each, in different sessions and different words.
    for question, answer, tellings in rng.sample(BOTH, 2):
        keys = [
            told(person, text + ".", s)
            for person, text, s in zip(people, tellings, rng.sample(range(count), 2), strict=True)
        ]
        ask(question.format(a=a, b=b), answer, keys, 1, "both")
    # One-off events: told relative to the session, asked "when" and by date.
    for n, (telling, verb, did) in enumerate(rng.sample(EVENTS, 5)):
        person = people[n % 2]
        s = rng.randrange(count)
        phrase, day = relative(rng, said_on(s))
        key = told(person, rng.choice([f"{cap(phrase)} I {telling}!", f"Big news: I {telling} {phrase}."]), s)
        ask(f"When did {person} {verb}?", day.isoformat(), [key], 2, "when")
        if n < 3:
            ask(f"What did {person} do on {day_text(rng, day)}?", did, [key], 2, "dated")
    # Single facts.
    for n, (statement, question, values) in enumerate(FACTS):
        person = people[n % 2]
        key = told(person, statement.format(x=rng.choice(values)) + ".", rng.randrange(count))
        ask(question.format(p=person), "", [key], 4, "single")
    return render(rng, index, a, b, sessions, qa)


def filler(rng: random.Random) -> str:
    """Small talk; a quarter of it names an activity the questions ask about."""
    if rng.random() < 0.25:
        return rng.choice(TOPICAL).format(v=rng.choice(RECURRING)[0])
    return rng.choice(FILLER)


def render(
    rng: random.Random, index: int, a: str, b: str, sessions: list[Session], qa: list[dict[str, object]]
) -> dict[str, object]:
    """Lay each session's planted exchanges among filler turns, number the turns, resolve evidence keys."""
    out: dict[str, object] = {"speaker_a": a, "speaker_b": b}
    total = rng.randint(300, 560)
    planted = sum(len(p) for s in sessions for p in s.planted)
    each = max(4, (total - planted) // len(sessions))
    ids: dict[str, str] = {}
    for n, session in enumerate(sessions, start=1):
        opener = rng.choice([a, b])
        chunks: list[list[Turn]] = [[Turn("", filler(rng))] for _ in range(each + rng.randint(-3, 3))]
        chunks += session.planted
        rng.shuffle(chunks)
        turns = [Turn(opener, f"Hi {b if opener == a else a}! {rng.choice(FILLER)}")]
        for chunk in chunks:
            turns.extend(chunk)
        rendered: list[dict[str, str]] = []
        for i, t in enumerate(turns, start=1):
            who = t.speaker or (b if rendered and rendered[-1]["speaker"] == a else a)
            dia = f"D{n}:{i}"
            if t.key:
                ids[t.key] = dia
            rendered.append({"speaker": who, "dia_id": dia, "text": t.text})
        at = session.at
        out[f"session_{n}_date_time"] = (
            f"{at.strftime('%-I:%M')} {at.strftime('%p').lower()} on {at.day} {at.strftime('%B, %Y')}"
        )
        out[f"session_{n}"] = rendered
    out["qa"] = [{**q, "evidence": [ids[k] for k in q["evidence"]]} for q in qa]  # type: ignore[union-attr]
    out["sample_id"] = f"heldout2-{index}"
    return out


def main() -> None:
    args = [x for x in sys.argv[1:] if x != "--check"]
    here = Path(args[0]) if args else Path(__file__).resolve().parent
    rng = random.Random(SEED)
    made = {f"gen2-{i}.json": json.dumps(conversation(rng, i), indent=1) + "\n" for i in range(1, CONVERSATIONS + 1)}
    if "--check" in sys.argv:
        stale = [n for n, text in made.items() if not (here / n).is_file() or (here / n).read_text() != text]
        raise SystemExit(f"held-out files differ from the generator: {stale}" if stale else 0)
    for name, text in made.items():
        (here / name).write_text(text)


if __name__ == "__main__":
    main()
