"""Write the held-out conversations: LoCoMo's size and shape, with the question kinds that failed on unseen data.

Run: python tests/memory/heldout/generate.py [OUT_DIR] (default: this directory). The seed is fixed, so the files
are the same on every run; they were written and committed before any mechanism was tuned against them, and
``--check`` tells whether the committed files still equal what this script makes (the set is frozen).

Each conversation has two speakers, 12-28 sessions, 300-600 turns and one date a session, in LoCoMo's format
(``speaker_a``, ``speaker_b``, ``session_K``, ``session_K_date_time``, ``qa`` with ``evidence`` dia_ids and a
``category``: 1 multi-hop, 2 temporal, 4 single-hop) plus a ``kind`` per question:

- ``dated-event``: what happened on a day, told relative to a later session's date ("yesterday I met some
  artists in Boston", said on 4 October, asked "Which city was Calvin in on October 3, 2023?"); the phrases
  include ones no rule of aleph-memory names ("the weekend before last", "a fortnight ago", "over Easter");
- ``dated-holiday``: "this past Christmas", "on Thanksgiving", "over Labor Day weekend", asked by the holiday
  and year or by the date;
- ``dated-month``: "last month", "back in March", asked "in March 2023";
- ``when``: "When did Maya adopt her dog?" (the answer is in a turn that says "two weeks ago");
- ``as-of-count``: "How many times had Maya run a race as of June 2023?" (2-4 evidence turns before the bound,
  more after it);
- ``count``: "How many times did Maya go to a pottery class?" (2-4 evidence turns across sessions);
- ``both``: "Which city have both Maya and Leo been to?" (one turn each, in different sessions);
- ``list-dated``: "Which cities did Maya visit in 2023?" (every such trip that year);
- ``single``: a fact told once ("the name of Maya's dog"), asked without a date.

Distractor turns share words with the answers: the same person's other trips, the other speaker's trips to the
same city, plans and wishes that mention the same activity, replies that repeat the city or activity.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

SEED = 3301
CONVERSATIONS = 5
DAY = timedelta(days=1)

NAMES = """Maya Leo Priya Tomas Ines Caleb Noor Felix Hana Oscar Lucia Darius Amara Jonas Keiko Mateo Ruth Idris
Sofia Emeka Freya Rafael Yara Anton Beatriz Kwame Elif Nils Zara Hugo Marisol Tariq Greta Santiago Aiko Bram""".split()
CITIES = """Boston Lisbon Denver Kyoto Austin Seattle Montreal Chicago Porto Vienna Nashville Portland Toronto
Edinburgh Prague Savannah Phoenix Dublin Madrid Oslo Memphis Tucson Halifax Copenhagen""".split()
PURPOSES = [
    ("met with some incredible artists", "the gallery scene there is something else"),
    ("went to a work conference", "the talks were better than I expected"),
    ("visited my aunt", "she cooked the whole weekend"),
    ("was at a friend's wedding", "the ceremony was by the water"),
    ("went to a food festival", "I ate way too many dumplings"),
    ("did a photography workshop", "we shot the old town at sunrise"),
    ("ran a charity 10k", "the crowd was amazing the whole way"),
    ("toured a couple of breweries", "one of them had a cat that lived there"),
    ("saw a jazz show", "the trumpet player was unreal"),
    ("helped my brother move", "so many boxes, my back still hurts"),
]
ACTIVITIES = [
    # (past phrase, question verb phrase, gerund, reply word)
    ("went kayaking", "go kayaking", "kayaking", "kayaking"),
    ("baked sourdough bread", "bake sourdough bread", "baking", "sourdough"),
    ("went rock climbing", "go rock climbing", "climbing", "climbing"),
    ("painted a mural", "paint a mural", "painting", "mural"),
    ("volunteered at the animal shelter", "volunteer at the animal shelter", "volunteering", "shelter"),
    ("went to a pottery class", "go to a pottery class", "pottery", "pottery"),
    ("planted tomatoes in the garden", "plant tomatoes", "gardening", "garden"),
    ("went horseback riding", "go horseback riding", "riding", "horses"),
    ("played chess at the park", "play chess at the park", "chess", "chess"),
    ("went to a cooking class", "go to a cooking class", "cooking", "cooking class"),
    ("went birdwatching at the lake", "go birdwatching", "birdwatching", "birds"),
    ("fixed up an old bike", "fix up an old bike", "fixing bikes", "bike"),
    ("went to an escape room", "go to an escape room", "escape rooms", "escape room"),
    ("hosted a board game night", "host a board game night", "board games", "game night"),
]
RECURRING = [
    # (one occurrence told, the count question's verb phrase, as-of wording, distractor mention)
    (
        "ran a half marathon",
        "run a half marathon",
        "run a half marathon",
        "I keep thinking about signing up for another half marathon",
    ),
    (
        "went to a concert",
        "go to a concert",
        "been to a concert",
        "There's a concert in the park I might check out someday",
    ),
    (
        "gave a talk at a meetup",
        "give a talk at a meetup",
        "given a talk at a meetup",
        "Meetups are fun but talks make me nervous",
    ),
    ("went camping", "go camping", "gone camping", "Camping gear is so expensive these days"),
    (
        "went to the climbing gym",
        "go to the climbing gym",
        "been to the climbing gym",
        "The climbing gym near me raised its prices",
    ),
    (
        "took my niece to the aquarium",
        "take their niece to the aquarium",
        "taken their niece to the aquarium",
        "My niece keeps asking about sharks",
    ),
    (
        "went to a salsa class",
        "go to a salsa class",
        "been to a salsa class",
        "Salsa music always puts me in a good mood",
    ),
]
FACTS = [
    # (statement, question, distractor said by the other speaker)
    (
        "My dog's name is {x}, he's a goofy golden retriever",
        "What is the name of {p}'s dog?",
        "My neighbor's dog barks at everything",
    ),
    (
        "I work as a {x} at a small clinic",
        "What does {p} do for work?",
        "Work at the clinic downtown has been crazy for my friend",
    ),
    ("My sister {x} just started college", "What is the name of {p}'s sister?", "My sister is coming to visit soon"),
    ("I drive an old {x}, it refuses to die", "What car does {p} drive?", "I'm thinking about selling my car"),
    (
        "My favorite dish is {x}, I could eat it every day",
        "What is {p}'s favorite dish?",
        "I tried a new dish at that place you mentioned",
    ),
    (
        "I've been learning the {x} for about a year",
        "What instrument is {p} learning?",
        "Learning an instrument as an adult is hard",
    ),
]
FACT_VALUES = [
    ["Biscuit", "Pepper", "Rocket", "Mango", "Waffles"],
    ["nurse", "pharmacist", "physiotherapist", "receptionist", "dental hygienist"],
    ["Lena", "Marta", "Juno", "Clara", "Rosa"],
    ["Volvo wagon", "Honda Civic", "Subaru Outback", "Ford Ranger", "Mini Cooper"],
    ["pad thai", "shakshuka", "ramen", "lasagna", "pho"],
    ["cello", "banjo", "saxophone", "ukulele", "violin"],
]
BOTH = [
    # (theme, how each tells it, question)
    ("city", "I spent a few days in {x} back in {y} and loved it", "Which city have both {a} and {b} been to?"),
    ("pet", "We adopted a {x} from the shelter in {y}", "What kind of pet did both {a} and {b} adopt?"),
    (
        "sport",
        "I joined a {x} league in {y}, we're terrible but it's fun",
        "What sport do both {a} and {b} play in a league?",
    ),
]
BOTH_VALUES = {
    "city": CITIES,
    "pet": ["rabbit", "tabby cat", "beagle", "parrot"],
    "sport": ["volleyball", "softball", "kickball", "ultimate frisbee"],
}
FILLER = [
    "How has your week been?",
    "Work has been a lot lately, but I'm hanging in there.",
    "I've been trying to sleep more, it helps with everything.",
    "Honestly I just needed a quiet evening with a book.",
    "That reminds me, I still owe you a call about the playlist.",
    "Haha, that sounds exactly like something you'd do!",
    "I love hearing about this stuff, keep me posted.",
    "The weather here has been all over the place.",
    "Did you end up watching that show I recommended?",
    "I'm trying to cook at home more, it saves so much money.",
    "My mom says hi, by the way.",
    "I'm so proud of you, seriously.",
    "That's such a good way to look at it.",
    "We should plan something together soon.",
    "I have been thinking about what you said last time we talked.",
    "It's nice to slow down once in a while.",
    "Ugh, my phone screen cracked again.",
    "I finally cleaned out the garage, it took forever.",
    "Sounds like you've had a full few weeks!",
    "I can't believe how fast this year is going.",
]
TOPICAL = [
    "{city} is on my list, I've heard the food there is great.",
    "My cousin is thinking about moving to {city} for a job.",
    "Have you ever tried {gerund}? I keep seeing people post about it.",
    "I'm not sure {gerund} is for me, but I admire people who do it.",
    "A coworker of mine is obsessed with {gerund}.",
    "I saw a documentary about {city} and now I want to go.",
    "There's a new place near me that does {gerund} lessons.",
    "I'd love to see {city} in the fall someday.",
]
REPLIES = [
    "Wow, {w} sounds amazing! How was it?",
    "No way, {w}? That's awesome!",
    "That's so cool. Was {w} as fun as you hoped?",
    "Love that! I've always wanted to try {w}.",
    "Oh nice, tell me more about {w}!",
]
HOLIDAYS = [
    "Christmas",
    "Christmas Eve",
    "Thanksgiving",
    "New Year's Eve",
    "Halloween",
    "Easter",
    "Labor Day",
    "Memorial Day",
    "the Fourth of July",
    "Valentine's Day",
]


def holiday_date(name: str, year: int) -> date:
    """The holiday's date in ``year`` (US calendar)."""
    if name == "Christmas":
        return date(year, 12, 25)
    if name == "Christmas Eve":
        return date(year, 12, 24)
    if name == "New Year's Eve":
        return date(year, 12, 31)
    if name == "Halloween":
        return date(year, 10, 31)
    if name == "Valentine's Day":
        return date(year, 2, 14)
    if name == "the Fourth of July":
        return date(year, 7, 4)
    if name == "Thanksgiving":
        first = date(year, 11, 1)
        return first + timedelta(days=(3 - first.weekday()) % 7 + 21)
    if name == "Labor Day":
        first = date(year, 9, 1)
        return first + timedelta(days=(0 - first.weekday()) % 7)
    if name == "Memorial Day":
        last = date(year, 5, 31)
        return last - timedelta(days=last.weekday())
    # Easter (anonymous Gregorian algorithm).
    a, b, c = year % 19, year // 100, year % 100
    d, e = b // 4, b % 4
    g = (8 * b + 13) // 25
    h = (19 * a + b - d - g + 15) % 30
    i, k = c // 4, c % 4
    l_ = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * l_) // 451
    month = (h + l_ - 7 * m + 114) // 31
    return date(year, month, (h + l_ - 7 * m + 114) % 31 + 1)


NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five"}
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def relative(rng: random.Random, said: date, level: str) -> tuple[str, date, date]:
    """A phrase for a time before ``said`` at ``level`` (day, weekend, week, month), and its [start, end) days."""
    if level == "day":
        back = rng.choice([1, 1, 1, 2, 2, 3, 4, 5, 6])
        day = said - back * DAY
        wd = WEEKDAYS[day.weekday()]
        options = {
            1: ["yesterday", "yesterday", "last night"],
            2: ["the day before yesterday", "two days ago", f"on {wd}"],
        }.get(back, [f"{NUMBER_WORDS.get(back, str(back))} days ago", f"last {wd}", f"this past {wd}", f"on {wd}"])
        return rng.choice(options), day, day + DAY
    if level == "weekend":
        saturday = said - timedelta(days=said.weekday() + 2)
        if rng.random() < 0.5:
            return rng.choice(["last weekend", "this past weekend", "over the weekend"]), saturday, saturday + 2 * DAY
        saturday -= 7 * DAY
        phrase = rng.choice(["two weekends ago", "the weekend before last", "a couple of weekends back"])
        return phrase, saturday, saturday + 2 * DAY
    if level == "week":
        monday = said - timedelta(days=said.weekday())
        n = rng.choice([1, 1, 2, 2, 3])
        start = monday - 7 * n * DAY
        phrase = {1: ["last week", "last week"], 2: ["two weeks ago", "the week before last", "a fortnight ago"]}.get(
            n, ["three weeks ago"]
        )
        return rng.choice(phrase), start, start + 7 * DAY
    # month
    n = rng.choice([1, 1, 2, 3])
    first = said.replace(day=1)
    for _ in range(n):
        first = (first - DAY).replace(day=1)
    end = (first + 32 * DAY).replace(day=1)
    month = first.strftime("%B")
    phrase = rng.choice(["last month", "a month ago"]) if n == 1 else rng.choice([f"back in {month}", f"in {month}"])
    return phrase, first, end


def day_text(rng: random.Random, d: date) -> str:
    """A date as questions write it, in one of LoCoMo's forms."""
    return rng.choice(
        [
            f"{d.strftime('%B')} {d.day}, {d.year}",
            f"{d.day} {d.strftime('%B')}, {d.year}",
            f"{d.day} {d.strftime('%B')} {d.year}",
        ]
    )


@dataclass
class Turn:
    speaker: str
    text: str
    key: str = ""
    """Marks a planted turn: questions find their evidence by key."""


@dataclass
class Session:
    at: datetime
    turns: list[Turn] = field(default_factory=list)
    planted: list[list[Turn]] = field(default_factory=list)


def cap(text: str) -> str:
    return text[0].upper() + text[1:]


def conversation(rng: random.Random, index: int) -> dict[str, object]:
    a, b = rng.sample(NAMES, 2)
    people = (a, b)
    count = rng.randint(12, 28)
    start = datetime(rng.choice([2021, 2022, 2023]), rng.randint(1, 12), rng.randint(1, 28), 9) + timedelta(
        minutes=rng.randint(0, 600)
    )
    sessions: list[Session] = []
    at = start
    for _ in range(count):
        sessions.append(Session(at))
        at += timedelta(days=rng.randint(5, 24), minutes=rng.randint(-300, 300))
    qa: list[dict[str, object]] = []
    cities = rng.sample(CITIES, len(CITIES))

    def plant(s: int, turns: list[Turn]) -> None:
        sessions[s].planted.append(turns)

    def reply(speaker: str, word: str) -> Turn:
        other = b if speaker == a else a
        return Turn(other, rng.choice(REPLIES).format(w=word))

    def ask(question: str, answer: str, keys: list[str], category: int, kind: str) -> None:
        qa.append({"question": question, "answer": answer, "evidence": keys, "category": category, "kind": kind})

    serial = iter(range(10_000))
    trips: dict[str, list[tuple[date, str, str]]] = {a: [], b: []}
    # Trips: each person several, on different dates; the other person mentions the same cities elsewhere.
    for person in people:
        for _ in range(rng.randint(3, 5)):
            s = rng.randrange(1, count)
            said = sessions[s].at.date()
            level = "weekend" if said.weekday() < 4 and rng.random() < 0.35 else "day"
            phrase, first, end = relative(rng, said, level)
            city = cities.pop()
            purpose, detail = rng.choice(PURPOSES)
            key = f"trip{next(serial)}"
            text = rng.choice(
                [
                    f"{cap(phrase)} I {purpose} in {city}, {detail}.",
                    f"Guess where I was {phrase}? {city}! I {purpose}, {detail}.",
                    f"So {phrase} I was in {city} because I {purpose}. Honestly {detail}.",
                ]
            )
            plant(s, [Turn(person, text, key), reply(person, city)])
            asked = first + rng.randrange((end - first).days) * DAY
            q = rng.choice(
                [
                    f"Which city was {person} in on {day_text(rng, asked)}?",
                    f"Where did {person} travel on {day_text(rng, asked)}?",
                ]
            )
            ask(q, city, [key], 2, "dated-event")
            trips[person].append((first, city, key))
            # The other speaker names the same city another time, with nothing happening there then.
            other = b if person == a else a
            plant(
                rng.randrange(count),
                [Turn(other, rng.choice(TOPICAL[:2] + TOPICAL[5:6] + TOPICAL[7:]).format(city=city))],
            )
    # Activities told relative to the session: asked by date and by "when".
    acts = rng.sample(ACTIVITIES, len(ACTIVITIES))
    for n in range(rng.randint(8, 11)):
        person = people[n % 2]
        past, verb, gerund, word = acts[n % len(acts)]
        s = rng.randrange(count)
        said = sessions[s].at.date()
        level = rng.choice(["day", "day", "weekend" if said.weekday() < 4 else "day", "week", "month"])
        phrase, first, end = relative(rng, said, level)
        friend = rng.choice([x for x in NAMES if x not in people])
        key = f"act{next(serial)}"
        text = rng.choice(
            [
                f"{cap(phrase)} I {past} with {friend}, it was such a good time.",
                f"Oh, I {past} {phrase}! {friend} came along too.",
                f"Hey {b if person == a else a}! Quick update: {phrase} I {past} with my friend {friend}.",
            ]
        )
        plant(s, [Turn(person, text, key), reply(person, word)])
        if level in ("day", "weekend"):
            asked = first + rng.randrange((end - first).days) * DAY
            q = rng.choice(
                [
                    f"What did {person} do on {day_text(rng, asked)}?",
                    f"Who did {person} spend time with on {day_text(rng, asked)}?",
                ]
            )
            ask(q, past, [key], 2, "dated-event")
        elif level == "month":
            ask(f"What did {person} do with {friend} in {first.strftime('%B %Y')}?", past, [key], 2, "dated-month")
        ask(f"When did {person} {verb} with {friend}?", f"{first.isoformat()} to {end.isoformat()}", [key], 2, "when")
        # Someone else talks about the same activity without doing it.
        plant(
            rng.randrange(count),
            [Turn(rng.choice(people), rng.choice(TOPICAL[2:5] + TOPICAL[6:7]).format(gerund=gerund))],
        )
    # Holidays: told in the first session after them, asked by holiday and year or by date.
    done = set()
    for s in range(1, count):
        said = sessions[s].at.date()
        for name in HOLIDAYS:
            when = holiday_date(name, said.year)
            if when >= said:
                when = holiday_date(name, said.year - 1)
            if not 2 <= (said - when).days <= 40 or (name, when.year) in done or len(done) >= 4:
                continue
            done.add((name, when.year))
            person = rng.choice(people)
            past, _, _, word = rng.choice(ACTIVITIES)
            city = rng.choice(CITIES)
            lead = rng.choice([f"this past {name}", f"on {name}", f"over {name}"])
            key = f"hol{next(serial)}"
            plant(
                s,
                [
                    Turn(
                        person,
                        f"{cap(lead)} we {past.replace('went', 'all went')} near {city}, a new tradition maybe!",
                        key,
                    ),
                    reply(person, word),
                ],
            )
            asked = f"{name.replace('the ', '')} {when.year}" if rng.random() < 0.6 else day_text(rng, when)
            ask(f"What did {person} do on {asked}?", past, [key], 2, "dated-holiday")
            break
    # Recurring events: 3-6 occurrences each, told in different sessions, counted with and without a bound.
    for n, (told, verb, perfect, mention) in enumerate(rng.sample(RECURRING, 3)):
        person = people[n % 2]
        times = rng.choice([2, 3, 3, 4, 4])
        picked = sorted(rng.sample(range(count), min(times, count)))
        occurrences: list[tuple[date, str]] = []
        for s in picked:
            said = sessions[s].at.date()
            phrase, first, _ = relative(
                rng, said, rng.choice(["day", "week", "weekend" if said.weekday() < 4 else "day"])
            )
            key = f"rec{next(serial)}"
            where = rng.choice(CITIES)
            text = rng.choice(
                [f"{cap(phrase)} I {told} in {where}, what a rush.", f"Oh and I {told} {phrase}, this time in {where}."]
            )
            plant(s, [Turn(person, text, key), reply(person, told.split()[-1])])
            occurrences.append((first, key))
        plant(rng.randrange(count), [Turn(person, mention + ".")])
        keys = [k for _, k in occurrences]
        ask(f"How many times did {person} {verb}?", str(len(keys)), keys, 1, "count")
        if len(occurrences) >= 3:
            cut = rng.randint(2, len(occurrences) - 1)
            last, nxt = occurrences[cut - 1][0], occurrences[cut][0]
            end_month = (last.replace(day=1) + 32 * DAY).replace(day=1)
            if end_month <= nxt:
                bound = rng.choice([f"as of {last.strftime('%B %Y')}", f"until {last.strftime('%B %Y')}"])
            else:
                bound = f"as of {day_text(rng, last + (nxt - last) // 2)}"
            ask(f"How many times had {person} {perfect} {bound}?", str(cut), keys[:cut], 1, "as-of-count")
    # Trips listed by year ("Which cities did Maya visit in 2023?"): every trip of that year.
    for person in people:
        years: dict[int, list[tuple[str, str]]] = {}
        for first, city, key in trips[person]:
            years.setdefault(first.year, []).append((city, key))
        year, found = max(years.items(), key=lambda kv: (len(kv[1]), kv[0]))
        if len(found) >= 2:
            ask(
                f"Which cities did {person} visit in {year}?",
                ", ".join(c for c, _ in found),
                [k for _, k in found],
                1,
                "list-dated",
            )
    # Both: each person tells the same thing once, in different sessions.
    for theme, template, question in rng.sample(BOTH, 2):
        value = rng.choice(BOTH_VALUES[theme])
        keys = []
        for person, s in zip(people, rng.sample(range(count), 2), strict=True):
            year = sessions[s].at.year - rng.randint(1, 4)
            key = f"both{next(serial)}"
            plant(s, [Turn(person, template.format(x=value, y=year) + ".", key), reply(person, value)])
            keys.append(key)
        ask(question.format(a=a, b=b), value, keys, 1, "both")
    # Single facts, with distractors from the other speaker.
    for n, (statement, question, distractor) in enumerate(FACTS):
        person = people[n % 2]
        value = rng.choice(FACT_VALUES[n])
        key = f"fact{next(serial)}"
        plant(rng.randrange(count), [Turn(person, statement.format(x=value) + ".", key)])
        plant(rng.randrange(count), [Turn(b if person == a else a, distractor + ".")])
        ask(question.format(p=person), value, [key], 4, "single")
    return render(rng, index, a, b, sessions, qa)


def filler(rng: random.Random) -> str:
    """Small talk; a third of it names a city or an activity the events use (it shares words with answers)."""
    if rng.random() < 0.35:
        return rng.choice(TOPICAL).format(city=rng.choice(CITIES), gerund=rng.choice(ACTIVITIES)[2])
    return rng.choice(FILLER)


def render(
    rng: random.Random, index: int, a: str, b: str, sessions: list[Session], qa: list[dict[str, object]]
) -> dict[str, object]:
    """Lay each session's planted exchanges among filler turns, number the turns, resolve evidence keys."""
    out: dict[str, object] = {"speaker_a": a, "speaker_b": b}
    total_target = rng.randint(330, 560)
    planted = sum(len(t) for s in sessions for p in s.planted for t in [p])
    filler_each = max(4, (total_target - planted) // len(sessions))
    ids: dict[str, str] = {}
    for n, session in enumerate(sessions, start=1):
        speaker = rng.choice([a, b])
        turns: list[Turn] = [Turn(speaker, f"Hey {b if speaker == a else a}! {rng.choice(FILLER)}")]
        blocks = list(session.planted)
        fillers = filler_each + rng.randint(-3, 3)
        chunks: list[list[Turn]] = [[Turn("", filler(rng))] for _ in range(fillers)] + blocks
        rng.shuffle(chunks)
        # Some planted news opens the session ("Hey Leo! Yesterday I ..."), as LoCoMo's catch-ups do.
        if blocks and rng.random() < 0.3:
            first = blocks[0]
            chunks.remove(first)
            turns = [
                Turn(first[0].speaker, f"Hey {b if first[0].speaker == a else a}! {first[0].text}", first[0].key),
                *first[1:],
            ]
        for chunk in chunks:
            turns.extend(chunk)
        rendered = []
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
    out["sample_id"] = f"heldout-{index}"
    return out


def main() -> None:
    args = [x for x in sys.argv[1:] if x != "--check"]
    here = Path(args[0]) if args else Path(__file__).resolve().parent
    rng = random.Random(SEED)
    made = {f"gen-{i}.json": json.dumps(conversation(rng, i), indent=1) + "\n" for i in range(1, CONVERSATIONS + 1)}
    if "--check" in sys.argv:
        stale = [
            name for name, text in made.items() if not (here / name).is_file() or (here / name).read_text() != text
        ]
        raise SystemExit(f"held-out files differ from the generator: {stale}" if stale else 0)
    for name, text in made.items():
        (here / name).write_text(text)


if __name__ == "__main__":
    main()
