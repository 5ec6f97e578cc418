"""Issue 36: write the truth corpora (pairs and chats), reproducibly, before any rule changes.

    python studies/36_truth_corpus.py            # writes both JSON files (seed 36)
    python studies/36_truth_corpus.py --check    # regenerate in memory and compare with the committed files

Pairs  -> nbs/memory/rules/data/truth_pairs.json  (old/new memory, kinds, expected update|distinct|restatement, split)
Chats  -> nbs/memory/store/data/truth_chats.json  (short conversations with changes and corrections, questions with the
          substring the current fact must contain and the substring of the superseded one)

Hand-written pairs and chats come first (note "hand: ..."); template pairs fill each category's quota (note
"template <category>/<expected>#<k>: ..."). Templates vary names, places, objects, numbers, first/third person and tense;
a pair is never repeated and no two pairs of a category share both texts' skeleton with the same fillers.
The split is 50/50 tune/heldout, stratified by category x expected (pairs) and category (chats), with the fixed seed.
"""
from __future__ import annotations
import argparse, json, random, sys
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

SEED = 36
ROOT = Path(__file__).resolve().parents[1]
PAIRS_OUT = ROOT / "nbs/memory/rules/data/truth_pairs.json"
CHATS_OUT = ROOT / "nbs/memory/store/data/truth_chats.json"
KINDS = ("episode", "observation", "failure", "fact", "preference", "decision", "correction")  # earmem.memory.rules.hygiene.KINDS

# ---------------------------------------------------------------- pools
NAMES = """Ana Ben Chloe Dev Elena Farid Grace Hiro Ines Jonas Kemi Liam Maya Nikos Olga Pablo Priya Quinn Rosa Sam Tariq Uma
Viktor Wen Yusuf Zoe Marta Omar Lena Kofi Aisha Bruno Carmen Diego Erik Fatima Goran Hana Ivan Julia""".split()
CITIES = """Paris Berlin Lisbon Madrid Oslo Vienna Prague Dublin Warsaw Athens Toronto Chicago Denver Austin Seattle Boston
Osaka Seoul Nairobi Lagos Lima Quito Munich Hamburg Lyon Milan Porto Krakow Zurich Geneva Utrecht Leeds Bergen Gdansk""".split()
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella Labs", "Stark Logistics", "Wayne Foods", "Hooli", "Vandelay Imports",
             "Soylent", "Cyberdyne", "Tyrell Systems", "Aperture Bank", "Pied Piper", "Monarch Health", "Nimbus Air", "Orbit Media"]
ROLES = ["nurse", "accountant", "data engineer", "teacher", "product manager", "chef", "architect", "pharmacist", "lawyer",
         "designer", "site manager", "paramedic"]
STREETS = ["Elm Street", "Harbour Road", "Mill Lane", "Oak Avenue", "Station Road", "King Street", "Rue Cler", "Canal Street"]
CARS = ["Toyota Corolla", "Volkswagen Golf", "Honda Civic", "Tesla Model 3", "Ford Focus", "Fiat Panda", "Volvo XC40", "Kia Niro"]
LAPTOPS = ["ThinkPad X1", "MacBook Air", "Dell XPS 13", "Surface Laptop", "Framework 13", "HP Spectre"]
PHONES = ["Pixel 7", "Moto G54", "Galaxy S22", "Fairphone 4", "Xperia 10", "Pixel 8"]
DEVICES = ["dishwasher", "washing machine", "boiler", "fridge", "car radio", "printer", "bike", "oven"]
FOODS = ["sushi", "spicy curry", "olives", "blue cheese", "mushrooms", "oysters", "pineapple pizza", "dark chocolate", "tofu", "lamb"]
DRINKS = ["coffee", "green tea", "black tea", "espresso", "hot chocolate", "matcha", "orange juice"]
BANDS = ["Radiohead", "Daft Punk", "ABBA", "Fleetwood Mac", "Metallica", "Bjork", "Coldplay", "Queen"]
GENRES = ["horror", "romantic", "science fiction", "war", "animated", "western"]
ALLERGENS = ["peanuts", "shellfish", "cats", "pollen", "penicillin", "gluten", "dust mites", "latex"]
SPORTS = ["tennis", "squash", "football", "badminton", "chess", "volleyball"]
EVENTS = ["standup", "design review", "budget meeting", "team offsite", "sprint planning", "board review", "quarterly review",
          "onboarding session", "town hall", "code review", "client workshop", "retro"]
RESTAURANTS = ["Luigi's", "the Golden Dragon", "Casa Lola", "the Blue Door", "Sakura", "Chez Marcel", "the Old Mill"]
MONTHS = "January February March April May June July August September October November December".split()
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
RELS = ["sister", "brother", "mother", "father", "cousin", "uncle", "aunt", "neighbour", "flatmate", "son", "daughter"]
COLORS = """red blue green black white yellow grey navy coral purple brown silver golden pink teal beige maroon mustard
lilac crimson""".split()
THINGS = """milk eggs bread rice lemons apples onions batteries candles stamps envelopes lightbulbs towels socks soap
shampoo coffee beans pasta tomatoes carrots garlic butter yoghurt cheese flour sugar napkins tape glue string nails
screws paint brushes notebooks pencils folders""".split()
TASKS = ["renew the SSL certificate", "update the onboarding wiki", "fix the flaky login test", "book the venue for the offsite",
         "migrate the billing cron job", "review the vendor contract", "archive the 2024 invoices", "order new ink cartridges",
         "clean up the staging bucket", "call the landlord about the heating", "draft the newsletter", "rotate the API keys",
         "replace the hallway bulb", "send the tax documents", "prepare the demo slides", "test the backup restore"]
ISSUES = ["the password reset email", "a crash on startup", "slow search results", "a missing invoice PDF", "the dark mode toggle",
          "duplicate notifications", "a broken export button", "timezone errors in reports", "the CSV import", "a typo on the pricing page"]
CLIENTS = ["Northwind", "Contoso", "Fabrikam", "Tailspin", "Wingtip", "Litware", "Proseware", "Adatum"]
ORDER_ITEMS = ["two desk lamps", "a standing desk", "three monitors", "a box of paper", "ergonomic chairs", "a coffee grinder",
               "USB-C cables", "a whiteboard", "noise-cancelling headphones", "a label printer"]
QUANTITY_THINGS = {  # group -> pairs of countable things of one context (a quantity of one is no quantity of the other)
    "food": [("pizzas", "salads"), ("bottles of wine", "cakes"), ("vegetarian meals", "vegan meals"), ("bananas", "oranges"),
             ("apples", "lemons"), ("sandwiches", "fruit platters"), ("croissants", "muffins")],
    "gear": [("chairs", "tables"), ("laptops", "monitors"), ("printers", "scanners"), ("microphones", "projectors"),
             ("whiteboards", "flip charts"), ("extension cords", "HDMI cables")],
    "kitchen": [("mugs", "plates"), ("forks", "knives"), ("glasses", "bowls"), ("teaspoons", "saucepans")],
    "family": [("sisters", "brothers"), ("cats", "dogs"), ("daughters", "sons"), ("nieces", "nephews")],
    "people": [("developers", "testers"), ("volunteers", "speakers"), ("drivers", "cooks"), ("nurses", "porters")],
    "clothes": [("shirts", "socks"), ("sweaters", "scarves"), ("pairs of shoes", "hats")],
    "rooms": [("single rooms", "double rooms"), ("suites", "parking spaces"), ("twin rooms", "family rooms")],
}
TOOLS = ["Postgres", "MySQL", "Kafka", "RabbitMQ", "React", "Vue", "Jenkins", "GitHub Actions", "Terraform", "Pulumi"]
LANGS = ["Spanish", "Japanese", "German", "Portuguese", "Arabic", "Italian", "Korean", "Dutch"]


def person(rng, name=None, first=None):
    "Grammatical forms of a subject: first person ('I') or third person (a name)."
    first = rng.random() < 0.4 if first is None else first
    if first:
        return dict(S="I", s="", es="", be="am", P="my", pp="my", has="have", dont="don't", was="was", refl="myself", obj="me")
    n = name or rng.choice(NAMES)
    return dict(S=n, s="s", es="es", be="is", P=f"{n}'s", pp="their", has="has", dont="doesn't", was="was", refl="themselves", obj=n)


def two(rng, pool):
    a, b = rng.sample(pool, 2)
    return a, b


def md(rng):
    "A month-day like 'May 3' in one of the ways people write it."
    m, d = rng.choice(MONTHS), rng.randint(1, 28)
    return m, d


def clock(rng):
    h = rng.choice([8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20])
    mm = rng.choice([0, 0, 0, 30, 15, 45])
    ap = "am" if h < 12 else "pm"
    h12 = h if h <= 12 else h - 12
    return (f"{h12}{ap}" if mm == 0 else f"{h12}:{mm:02d}{ap}"), h, mm


def fill(rng) -> dict:
    "Fresh random fillers for one template (every template uses a subset)."
    f = person(rng)
    x, y, a, b = rng.sample([n for n in NAMES if n != f["S"]], 4)
    c1, c2 = two(rng, CITIES)
    co1, co2 = two(rng, COMPANIES)
    r1, r2 = two(rng, ROLES)
    m1, d1 = md(rng)
    while True:
        m2, d2 = md(rng)
        if (m2, d2) != (m1, d1): break
    (t1, h1, mm1), (t2, h2, mm2) = clock(rng), clock(rng)
    while (h2, mm2) == (h1, mm1): t2, h2, mm2 = clock(rng)
    n1 = rng.randint(2, 40)
    n2 = rng.choice([v for v in range(2, 48) if v != n1])
    wd1, wd2 = two(rng, WEEKDAYS)
    qs = {f"q{g}{i}": v for g, opts in QUANTITY_THINGS.items() for i, v in enumerate(rng.choice(opts), 1)}
    return dict(f, X=x, Y=y, A=a, B=b, c1=c1, c2=c2, co1=co1, co2=co2, role1=r1, role2=r2,
                md1=f"{m1} {d1}", md2=f"{m2} {d2}", dm1=f"{d1} {m1}", mon1=m1, mon2=m2 if m2 != m1 else MONTHS[(MONTHS.index(m1) + 3) % 12],
                t1=t1, t2=t2, t1_24=f"{h1:02d}:{mm1:02d}", n1=n1, n2=n2, n1p=n1 + 1,
                wd1=wd1, wd2=wd2, arole1=art(r1), arole2=art(r2), **dict(zip(("street1", "street2"), two(rng, STREETS))),
                **dict(zip(("car1", "car2"), two(rng, CARS))), **dict(zip(("lap1", "lap2"), two(rng, LAPTOPS))),
                **dict(zip(("phone1", "phone2"), two(rng, PHONES))), **dict(zip(("dev1", "dev2"), two(rng, DEVICES))),
                **dict(zip(("food1", "food2"), two(rng, FOODS))), **dict(zip(("drink1", "drink2"), two(rng, DRINKS))),
                **dict(zip(("band1", "band2"), two(rng, BANDS))), **dict(zip(("genre1", "genre2"), two(rng, GENRES))),
                **dict(zip(("all1", "all2"), two(rng, ALLERGENS))), **dict(zip(("sport1", "sport2"), two(rng, SPORTS))),
                **dict(zip(("ev1", "ev2"), two(rng, EVENTS))), **dict(zip(("rest1", "rest2"), two(rng, RESTAURANTS))),
                **dict(zip(("rel1", "rel2"), two(rng, RELS))), **dict(zip(("tool1", "tool2"), two(rng, TOOLS))),
                **dict(zip(("lang1", "lang2"), two(rng, LANGS))), **dict(zip(("task1", "task2"), two(rng, TASKS))),
                **dict(zip(("iss1", "iss2"), two(rng, ISSUES))), **dict(zip(("cl1", "cl2"), two(rng, CLIENTS))),
                **dict(zip(("oi1", "oi2"), two(rng, ORDER_ITEMS))),
                **dict(zip(("col1", "col2"), two(rng, COLORS))), **dict(zip(("th1", "th2"), two(rng, THINGS))),
                **qs, **dict(zip(("id1", "id2"), rng.sample(range(100, 9800), 2))), idn=rng.randint(2, 9), code1=rng.choice(["LH", "BA", "AF", "KL", "IB"]),
                code2=rng.choice(["LX", "SK", "TP", "OS", "EI"]), fno1=rng.randint(100, 999), fno2=rng.randint(100, 999),
                rent1=rng.choice([950, 1200, 1450, 1800, 2100, 760]), rent_up=rng.choice([50, 100, 150, 200]),
                gb1=rng.choice([8, 16, 32]), gb2=rng.choice([64, 128]), kg1=rng.randint(58, 95), kg_d=rng.randint(2, 9),
                sal1=rng.choice([48, 55, 62, 70, 85]), sal_d=rng.choice([3, 5, 8, 10]), age1=rng.randint(3, 15),
                rpm1=rng.choice([100, 300, 500, 1000]), rpm2=rng.choice([60, 200, 600, 2000]), km1=rng.choice([10, 15, 20, 25]),
                km2=rng.choice([30, 35, 40, 5]), pct1=rng.choice([10, 15, 20]), pct2=rng.choice([25, 30, 5]),
                room1=rng.choice(["Room A", "Room B", "the Oak room", "the Lisbon room"]),
                room2=rng.choice(["Room C", "Room D", "the Maple room", "the Oslo room"]),
                email1=f"{x.lower()}@{co1.split()[0].lower()}.com", email2=f"{x.lower()}.{y.lower()}@{co2.split()[0].lower()}.org")


def art(w: str) -> str: return ("an " if w[0] in "aeiou" else "a ") + w


def cap(s: str) -> str: return s[:1].upper() + s[1:]


def render(tpl: str, f: dict) -> str:
    return cap(tpl.format(**f))


# ---------------------------------------------------------------- templates
# Each category: {expected: [(old template, new template, note) or (old, new, note, old_kind, new_kind)]}
T = {}
T["residence_work"] = {
    "update": [
        ("{S} live{s} in {c1}", "{S} moved to {c2}", "residence, reworded as a move (the issue's Ana example)"),
        ("{S} live{s} in {c1}", "{S} now live{s} in {c2}", "residence changed"),
        ("{S} {has} been living in {c1} since {mon1}", "{S} relocated to {c2} last month", "relocation"),
        ("{S} work{s} at {co1}", "{S} started a new job at {co2}", "employer changed, reworded"),
        ("{S} work{s} at {co1} as {arole1}", "{S} left {co1} and joined {co2}", "employer changed, old named"),
        ("{P} office is in {c1}", "{P} office relocated to {c2}", "office moved"),
        ("{S} {be} {arole1} at {co1}", "{S} {be} now {arole2} at {co1}", "role changed, same employer"),
        ("{S} work{s} from the {c1} office", "{S} transferred to the {c2} office", "office transfer"),
        ("{S} rent{s} a flat on {street1}", "{S} moved to a flat on {street2}", "address changed"),
        ("{S} work{s} for {co1}", "{S} {be} working for {co2} now", "employer changed"),
        ("{P} home address is 12 {street1}", "{P} new home address is 40 {street2}", "address with numbers"),
    ],
    "restatement": [
        ("{S} live{s} in {c1}", "{S} {be} based in {c1}", "same city"),
        ("{S} work{s} at {co1}", "{S} {be} employed by {co1}", "same employer"),
        ("{P} office is in {c1}", "{S} work{s} out of the {c1} office", "same office"),
        ("{S} {be} {arole1} at {co1}", "{S} work{s} at {co1} as {arole1}", "same role"),
    ],
    "distinct": [
        ("{A} lives in {c1}", "{B} lives in {c2}", "another person"),
        ("{S} work{s} at {co1}", "{P} {rel1} works at {co2}", "a relative's employer"),
        ("{S} live{s} in {c1}", "{P} {rel1} lives in {c2}", "a relative's city"),
        ("{S} work{s} at {co1}", "{S} volunteer{s} at a food bank in {c1}", "a second activity, both true"),
    ],
}
T["relationships"] = {
    "update": [
        ("{S} {be} dating {X}", "{S} and {X} broke up", "relationship ended"),
        ("{S} {be} engaged to {X}", "{S} married {X} in {mon1}", "engaged -> married"),
        ("{S} {be} single", "{S} {be} in a relationship with {X}", "single -> together"),
        ("{P} manager is {X}", "{P} new manager is {Y}", "manager changed"),
        ("{P} best friend is {X}", "{P} closest friend these days is {Y}", "best friend changed"),
        ("{S} {be} married to {X}", "{S} and {X} got divorced", "married -> divorced"),
        ("{P} flatmate is {X}", "{X} moved out and {Y} is {P} flatmate now", "flatmate replaced"),
        ("{P} dentist is Dr. {X}", "{S} switched to Dr. {Y} as {pp} dentist", "dentist changed"),
        ("{S} report{s} to {X}", "{S} report{s} to {Y} since the reorg", "reporting line changed"),
        ("{P} mentor is {X}", "{X} is no longer {P} mentor", "mentor ended (negation)"),
    ],
    "restatement": [
        ("{P} manager is {X}", "{S} report{s} to {X}", "same manager"),
        ("{S} {be} married to {X}", "{X} is {P} spouse", "same marriage"),
        ("{P} best friend is {X}", "{X} is {P} best friend", "word order"),
    ],
    "distinct": [
        ("{P} manager is {X}", "{P} {rel1}'s manager is {Y}", "another person's manager"),
        ("{P} {rel1} is called {X}", "{P} {rel2} is called {Y}", "another relative"),
        ("{A} is dating {X}", "{B} is dating {Y}", "another couple"),
        ("{P} dentist is Dr. {X}", "{P} doctor is Dr. {Y}", "dentist and doctor, both kept"),
    ],
}
T["state_possession"] = {
    "update": [
        ("{S} {has} a {car1}", "{S} sold the {car1} and bought a {car2}", "car replaced"),
        ("{P} laptop is a {lap1}", "{P} laptop is now a {lap2}", "laptop replaced"),
        ("{P} {dev1} is broken", "{P} {dev1} was repaired", "state broken -> working"),
        ("{S} {has} a dog named {X}", "{S} gave {X} the dog to {pp} {rel1}", "possession ended"),
        ("{P} passport is valid", "{P} passport expired", "state valid -> expired"),
        ("{S} {be} vegetarian", "{S} started eating fish again", "diet changed"),
        ("{S} {be} unemployed", "{S} found a job at {co1}", "state changed"),
        ("{P} phone is a {phone1}", "{S} replaced {pp} phone with a {phone2}", "phone replaced"),
        ("{P} {dev1} works fine", "{P} {dev1} is out of order again", "working -> broken"),
        ("{S} drive{s} a {car1}", "{S} {dont} have a car anymore", "possession ended (negation)"),
    ],
    "restatement": [
        ("{S} {has} a {car1}", "{S} own{s} a {car1}", "same car"),
        ("{P} {dev1} is broken", "{P} {dev1} is out of order", "same state, synonym"),
        ("{P} laptop is a {lap1}", "{S} use{s} a {lap1} as {pp} laptop", "same laptop"),
    ],
    "distinct": [
        ("{S} {has} a {car1}", "{P} {rel1} has a {car2}", "another owner"),
        ("{P} {dev1} is broken", "{P} {dev2} is broken", "another device"),
        ("{P} laptop is a {lap1}", "{P} phone is a {phone1}", "another object"),
    ],
}
T["preference_reversal"] = {
    "update": [
        ("{S} love{s} {food1}", "{S} can't stand {food1} anymore", "like -> dislike"),
        ("{S} prefer{s} {drink1} in the morning", "{S} switched to {drink2} in the morning", "morning drink changed"),
        ("{P} favourite band is {band1}", "{P} favourite band is now {band2}", "favourite changed"),
        ("{S} like{s} working late", "{S} prefer{s} to start early now", "schedule preference reversed"),
        ("{S} prefer{s} window seats", "{S} prefer{s} aisle seats now", "seat preference reversed"),
        ("{S} hate{s} {genre1} films", "{S} actually enjoy{s} {genre1} films now", "dislike -> like"),
        ("{S} like{s} {drink1} with sugar", "{S} take{s} {drink1} without sugar these days", "with -> without"),
        ("{S} prefer{s} email over phone calls", "{S} prefer{s} phone calls over email now", "contact preference reversed"),
        ("{P} favourite restaurant is {rest1}", "{S} {dont} like {rest1} anymore; {rest2} is {pp} favourite", "favourite restaurant changed"),
        ("{S} enjoy{s} running outdoors", "{S} prefer{s} the treadmill to running outdoors now", "preference reversed"),
    ],
    "restatement": [
        ("{S} love{s} {food1}", "{food1} is {P} favourite food", "same love"),
        ("{S} prefer{s} window seats", "{S} always want{s} a window seat", "same seat"),
        ("{S} {dont} like {food1}", "{S} dislike{s} {food1}", "same dislike"),
    ],
    "distinct": [
        ("{S} love{s} {food1}", "{S} love{s} {food2}", "two likes, both true"),
        ("{S} like{s} {band1}", "{P} {rel1} likes {band2}", "another person's taste"),
        ("{S} prefer{s} window seats on planes", "{S} prefer{s} quiet carriages on trains", "another setting"),
    ],
}
T["negation"] = {
    "update": [
        ("{S} live{s} in {c1}", "{S} no longer live{s} in {c1}", "no longer"),
        ("{S} smoke{s}", "{S} {dont} smoke anymore", "not anymore"),
        ("{S} work{s} at {co1}", "{S} {dont} work at {co1} anymore", "not ... anymore"),
        ("{S} {be} allergic to {all1}", "{S} {be} not allergic to {all1} after all", "negated"),
        ("{S} drink{s} {drink1} every day", "{S} stopped drinking {drink1}", "stopped"),
        ("{S} {be} vegan", "{S} {be} no longer vegan", "no longer"),
        ("{S} {has} a gym membership", "{S} cancelled {pp} gym membership", "cancelled"),
        ("{S} play{s} {sport1} on {wd1}s", "{S} {dont} play {sport1} anymore", "not anymore"),
        ("{S} {be} on the {ev1} invite list", "{S} {be} not on the {ev1} invite list anymore", "not anymore"),
        ("{S} take{s} the bus to work", "{S} never take{s} the bus to work now", "never now"),
    ],
    "restatement": [
        ("{S} {dont} eat meat", "{S} never eat{s} meat", "same negation"),
        ("{S} {be} not a morning person", "{S} {be} no morning person", "same negation"),
        ("{S} {dont} drink alcohol", "{S} {dont} drink any alcohol", "same negation"),
    ],
    "distinct": [
        ("{S} {dont} eat meat", "{S} {dont} drink milk", "another thing negated"),
        ("{S} no longer live{s} in {c1}", "{P} {rel1} no longer lives in {c2}", "another person"),
        ("{S} {be} not allergic to {all1}", "{S} {be} allergic to {all2}", "another allergen"),
    ],
}
T["plan_cancel_move"] = {
    "update": [
        ("The {ev1} is on {wd1}", "The {ev1} moved to {wd2}", "weekday moved"),
        ("{S} {be} flying to {c1} on {md1}", "{S} cancelled the trip to {c1}", "trip cancelled"),
        ("The {ev1} with {X} is at {t1}", "The {ev1} with {X} was pushed to {t2}", "time moved"),
        ("{S} plan{s} to visit {c1} in {mon1}", "{S} will visit {c1} in {mon2} instead", "month moved"),
        ("The {ev1} is booked for {md1}", "The {ev1} was called off", "called off"),
        ("{S} {be} going to the conference in {c1}", "{S} {be} not going to the conference in {c1} anymore", "plan dropped"),
        ("Dinner with {X} is at {rest1}", "Dinner with {X} moved to {rest2}", "place moved"),
        ("The {ev1} is in {room1}", "The {ev1} moved to {room2}", "room moved"),
        ("{S} will meet {X} on {wd1}", "{S} postponed meeting {X} until next week", "postponed"),
        ("The {ev1} happens every {wd1}", "The {ev1} was cancelled for good", "recurring cancelled"),
    ],
    "restatement": [
        ("The {ev1} is on {wd1}", "The {ev1} takes place on {wd1}", "same day"),
        ("The {ev1} is at {t1}", "The {ev1} starts at {t1_24}", "same time, 24h"),
        ("Dinner with {X} is at {rest1}", "{S} {be} having dinner with {X} at {rest1}", "same dinner"),
    ],
    "distinct": [
        ("The {ev1} is on {wd1}", "The {ev2} is on {wd2}", "another event"),
        ("{S} fl{fly} to {c1} on {md1}", "{S} fl{fly} to {c2} on {md2}", "two trips"),
        ("Dinner with {X} is at {rest1}", "Lunch with {Y} is at {rest2}", "another meal"),
    ],
}
T["number_same_slot"] = {
    "update": [
        ("The rent is ${rent1} a month", "The rent went up to ${rent2} a month", "rent raised"),
        ("{P} monthly budget for groceries is ${n1}0", "{P} monthly budget for groceries is now ${n2}0", "budget changed"),
        ("{S} run{s} {km1} km every week", "{S} run{s} {km2} km every week now", "distance changed"),
        ("{P} daughter is {age1} years old", "{P} daughter turned {age2}", "age changed"),
        ("The team has {n1} engineers", "The team grew to {n2} engineers", "headcount changed"),
        ("{P} salary is {sal1}k euros", "{P} salary was raised to {sal2}k euros", "salary raised"),
        ("The server has {gb1} GB of RAM", "The server was upgraded to {gb2} GB of RAM", "RAM upgraded"),
        ("The API limit is {rpm1} requests per minute", "The API limit is now {rpm2} requests per minute", "limit changed"),
        ("{S} weigh{s} {kg1} kg", "{S} now weigh{s} {kg2} kg", "weight changed"),
        ("The discount is {pct1}%", "The discount was increased to {pct2}%", "percent changed"),
        ("{S} sleep{s} {n1} hours a night", "{S} sleep{s} about {n2} hours a night lately", "hours changed"),
    ],
    "restatement": [
        ("The rent is ${rent1} a month", "Rent costs {rent1} dollars per month", "same amount, other notation"),
        ("The team has {n1} engineers", "There are {n1} engineers on the team", "same number"),
        ("The discount is {pct1}%", "The discount is {pct1} percent", "same percent"),
    ],
    "distinct": [
        ("The rent is ${rent1} a month", "The deposit is ${rent2}", "rent and deposit"),
        ("The team has {n1} engineers", "The team has {n2} designers", "another role counted"),
        ("The server has {gb1} GB of RAM", "The server has {gb2} GB of disk", "another resource"),
    ],
}
T["date_time"] = {
    "update": [
        ("{P} dentist appointment is on {md1}", "{P} dentist appointment is on {md2}", "date changed"),
        ("The {ev1} starts at {t1}", "The {ev1} now starts at {t2}", "time changed"),
        ("{P} flight to {c1} is on {md1}", "{P} flight to {c1} was moved to {md2}", "date moved"),
        ("{S} {be} on call every {wd1}", "{S} {be} on call every {wd2} now", "weekday changed"),
        ("The deadline is {md1}", "The deadline was extended to {md2}", "deadline extended"),
        ("{P} birthday party is on {wd1} at {t1}", "{P} birthday party is on {wd1} at {t2}", "time changed, weekday kept"),
        ("The {ev1} is on {md1} at {t1}", "The {ev1} is on {md2} at {t1}", "date changed, time kept"),
        ("{P} haircut is booked for {wd1}", "{S} rebooked {pp} haircut for {wd2}", "rebooked"),
        ("The {c1} office opens at {t1}", "The {c1} office opens at {t2} from now on", "opening time changed"),
        ("{P} yoga class is at {t1} on {wd1}s", "{P} yoga class moved to {wd2}s at {t1}", "weekday moved"),
    ],
    "restatement": [
        ("The {ev1} is at {t1}", "The {ev1} is at {t1_24}", "12h vs 24h"),
        ("The deadline is {md1}", "The deadline is {dm1}", "date written the other way"),
        ("{P} flight to {c1} is on {md1}", "{S} fl{fly} to {c1} on {md1}", "same flight"),
    ],
    "distinct": [
        ("{P} flight to {c1} is on {md1}", "{P} flight back from {c1} is on {md2}", "outbound and return"),
        ("{P} dentist appointment is on {md1}", "{P} vet appointment is on {md2}", "another appointment"),
        ("The {ev1} starts at {t1}", "The {ev2} starts at {t2}", "another event"),
    ],
}
T["correction"] = {
    "update": [
        ("{P} flight to {c1} is on {md1}", "Correction: {P} flight to {c1} is on {md2}, not {md1}", "correction: date", "fact", "correction"),
        ("The {ev1} is at {t1}", "Actually the {ev1} is at {t2}, not {t1}", "correction: time", "fact", None),
        ("{S} live{s} in {c1}", "Actually, {S} live{s} in {c2}, not {c1}", "correction: city", "fact", "correction"),
        ("{X}'s email is {email1}", "Correction: {X}'s email is {email2}", "correction: email", "fact", "correction"),
        ("The budget is ${n1}00", "To correct an earlier note: the budget is ${n2}00", "correction: money", "fact", None),
        ("{S} {be} allergic to {all1}", "Correction: {S} {be} allergic to {all2}, not {all1}", "correction: allergen", "fact", "correction"),
        ("The {ev1} is in {room1}", "Scratch that, the {ev1} is in {room2}", "correction: room", "fact", None),
        ("{P} {rel1}'s name is {X}", "Sorry, it is {Y}, not {X}: {P} {rel1}'s name is {Y}", "correction: name", "fact", "correction"),
        ("The {ev1} is on {wd1}", "I meant {wd2}: the {ev1} is on {wd2}", "correction: weekday", "decision", "correction"),
        ("{S} work{s} at {co1}", "Correction: {S} work{s} at {co2}, not at {co1}", "correction: employer", None, None),
    ],
    "distinct": [
        ("Ticket #{id1} is about {iss1}", "Correction: ticket #{id2} is about {iss2}", "correction of another ticket", "fact", "correction"),
        ("{A}'s flight is on {md1}", "Correction: {B}'s flight is on {md2}", "correction about another person", "fact", "correction"),
        ("The {ev1} is at {t1}", "Correction: the {ev2} is at {t2}", "correction of another event", "fact", "correction"),
    ],
}
T["cross_kind"] = {
    "update": [
        ("{S} live{s} in {c1}", "{S} moved to {c2}", "fact -> inferred (the issue's Ana example)", "fact", None),
        ("{S} live{s} in {c1}", "{S} moved to {c2}", "both inferred", None, None),
        ("{S} prefer{s} the {t1} train", "{S} decided to take the {t2} train", "preference -> decision", "preference", "decision"),
        ("{S} plan{s} to fly on {md1}", "{P} flight is on {md2}", "decision -> fact", "decision", "fact"),
        ("{S} love{s} {drink1}", "{S} gave up {drink1}", "preference -> fact", "preference", "fact"),
        ("We'll use {tool1} for the project", "The project uses {tool2} now", "decision -> fact", "decision", "fact"),
        ("Meet {X} at {t1}", "The meeting with {X} was moved to {t2}", "observation -> decision", "observation", "decision"),
        ("{S} work{s} at {co1}", "{S} decided to join {co2}", "fact -> decision", "fact", "decision"),
        ("{P} favourite cafe is on {street1}", "{S} {dont} like the cafe on {street1} anymore", "preference -> inferred", "preference", None),
        ("The {ev1} is on {wd1}", "We agreed to hold the {ev1} on {wd2}", "fact -> decision", "fact", "decision"),
        ("{S} {be} learning {lang1}", "{S} switched from {lang1} to {lang2}", "fact -> observation", "fact", "observation"),
    ],
    "restatement": [
        ("{S} prefer{s} {drink1}", "{S} usually choose{s} {drink1}", "preference -> fact, same", "preference", "fact"),
        ("We'll use {tool1} for the project", "The project uses {tool1}", "decision -> fact, same", "decision", "fact"),
        ("{S} live{s} in {c1}", "{S} {be} based in {c1}", "fact -> inferred, same", "fact", None),
    ],
    "distinct": [
        ("{S} love{s} {drink1}", "{S} bought a {col1} kettle", "preference vs fact, other thing", "preference", "fact"),
        ("We'll use {tool1} for the project", "{X} prefers {tool2} for side projects", "decision vs preference", "decision", "preference"),
        ("{S} live{s} in {c1}", "{S} decided to visit {c2} in {mon1}", "fact vs decision", "fact", "decision"),
    ],
}
T["distinct_shared_words"] = {"distinct": [
    ("{S} bought a {col1} jacket", "{S} bought a {col2} umbrella", "two purchases"),
    ("{X} recommended the book about {c1}", "{X} recommended the film about {c2}", "book and film"),
    ("The {c1} office printer is out of toner", "The {c1} office coffee machine is out of beans", "two machines"),
    ("{S} need{s} to renew {pp} passport", "{S} need{s} to renew {pp} gym membership", "two renewals"),
    ("Ask {X} about the budget report", "Ask {X} about the holiday rota", "two questions"),
    ("{S} {be} learning {lang1}", "{S} {be} learning the guitar", "two skills"),
    ("The {c1} office has a gym", "The {c1} office has a rooftop terrace", "two amenities"),
    ("{X} is allergic to {all1}", "{X} is allergic to {all2}", "two allergies"),
    ("Call {X} about the {ev1}", "Email {X} about the {ev2}", "two errands"),
    ("{P} {rel1} lives in {c1}", "{P} {rel1} studied in {c2}", "two facts about one person"),
    ("The {ev1} needs a projector", "The {ev1} needs a caterer", "two needs"),
    ("{S} planted tomatoes in the garden", "{S} planted roses by the gate", "two plantings"),
]}
T["distinct_numbered_items"] = {"distinct": [
    ("Task {n1}: {task1}", "Task {n1p}: {task2}", "consecutive tasks"),
    ("Ticket #{id1} is about {iss1}", "Ticket #{id2} is about {iss2}", "two tickets"),
    ("Invoice {id1} for {cl1} is paid", "Invoice {id2} for {cl2} is unpaid", "two invoices"),
    ("Room {n1}0{idn} is booked for the {ev1}", "Room {n2}0{idn} is booked for the {ev2}", "two rooms"),
    ("Order {id1} contains {oi1}", "Order {id2} contains {oi2}", "two orders"),
    ("Item {n1}: buy {col1} {th1}", "Item {n1p}: buy {col2} {th2}", "the concurrency texts"),
    ("Flight {code1} {fno1} departs at {t1}", "Flight {code2} {fno2} departs at {t2}", "two flights"),
    ("Bug {id1}: {iss1}", "Bug {id2}: {iss2}", "two bugs"),
    ("Step {n1}: {task1}", "Step {n1p}: {task2}", "two steps"),
    ("Locker {n1} belongs to {X}", "Locker {n2} belongs to {Y}", "two lockers"),
    ("Note {n1}: {task1}", "Note {n2}: {task2}", "two notes"),
    ("Seat {n1}A is assigned to {X}", "Seat {n2}C is assigned to {Y}", "two seats"),
]}
T["distinct_quantity_other_thing"] = {"distinct": [
    ("{X} ordered {n1} {qfood1} for the {wd1} party", "{X} ordered {n2} {qfood2} for the {wd1} party", "the issue's pizzas/salads class"),
    ("We need {n1} {qgear1} for the workshop", "We need {n2} {qgear2} for the workshop", "two needs"),
    ("{S} bought {n1} {qfood1} at the market", "{S} bought {n2} {qfood2} at the market", "two purchases"),
    ("The kitchen has {n1} {qkitchen1}", "The kitchen has {n2} {qkitchen2}", "two stocks"),
    ("{X} has {s1} {qfamily1}", "{X} has {s2} {qfamily2}", "two possessions"),
    ("The project needs {n1} {qpeople1}", "The project needs {n2} {qpeople2}", "two needs"),
    ("{S} packed {s1} {qclothes1} for the trip", "{S} packed {s2} {qclothes2} for the trip", "two packings"),
    ("The order for {cl1} includes {n1} {qgear1}", "The order for {cl1} includes {n2} {qgear2}", "two lines of one order"),
    ("The hotel in {c1} has {n1} {qrooms1} left", "The hotel in {c1} has {n2} {qrooms2} left", "two availabilities"),
    ("{S} spent ${n1}0 on groceries", "{S} spent ${n2}0 on fuel", "two expenses"),
    ("For the {ev1} we booked {n1} {qfood1}", "For the {ev1} we booked {n2} {qfood2}", "two bookings"),
]}
T["distinct_person_place"] = {"distinct": [
    ("{A} lives in {c1}", "{B} lives in {c2}", "two people"),
    ("{A} works at {co1}", "{B} works at {co1}", "same company, two people"),
    ("{A}'s birthday is on {md1}", "{B}'s birthday is on {md2}", "two birthdays"),
    ("{A} is allergic to {all1}", "{B} is allergic to {all1}", "same allergy, two people"),
    ("The {c1} office opens at {t1}", "The {c2} office opens at {t2}", "two offices"),
    ("{A} flies to {c1} on {md1}", "{B} flies to {c1} on {md2}", "two travellers"),
    ("The weather in {c1} is sunny today", "The weather in {c2} is rainy today", "two places"),
    ("{A}'s manager is {X}", "{B}'s manager is {Y}", "two teams"),
    ("{A} is {arole1} at {co1}", "{B} is {arole2} at {co1}", "two colleagues"),
    ("The {c1} store closes at {t1}", "The {c2} store closes at {t2}", "two shops"),
    ("{A}'s daughter is {age1} years old", "{B}'s daughter is {age2} years old", "two children"),
    ("{A} drives a {car1}", "{B} drives a {car2}", "two drivers"),
]}
T["restatement"] = {"restatement": [
    ("{S} live{s} in {c1}", "{S} {be} based in {c1}", "same city"),
    ("The {ev1} is at {t1}", "The {ev1} is at {t1_24}", "12h vs 24h"),
    ("The rent is ${rent1} a month", "Monthly rent is {rent1} dollars", "money notation"),
    ("{P} flight is on {md1}", "{P} flight is on {dm1}", "date notation"),
    ("{S} {dont} like {food1}", "{S} dislike{s} {food1}", "negation reworded"),
    ("{X} is {P} manager", "{S} report{s} to {X}", "manager reworded"),
    ("The team has {n1} people", "There are {n1} people on the team", "number reworded"),
    ("{S} work{s} at {co1}", "{S} {be} an employee of {co1}", "employer reworded"),
    ("{P} car is a {car1}", "{S} drive{s} a {car1}", "car reworded"),
    ("{S} prefer{s} {drink1} to {drink2}", "{S} like{s} {drink1} better than {drink2}", "preference reworded"),
    ("The {ev1} is on {wd1}", "The {ev1} happens on {wd1}", "day reworded"),
    ("{S} {be} allergic to {all1}", "{S} {has} an allergy to {all1}", "allergy reworded"),
    ("The deadline is {md1}", "It is due on {md1}", "deadline reworded"),
    ("{S} {be} vegetarian", "{S} {dont} eat meat", "diet reworded"),
    ("The {ev1} is in {room1}", "The {ev1} takes place in {room1}", "room reworded"),
]}

# (category) -> {expected: count}; hand-written pairs count toward it
QUOTA = {c: {"update": 20, "restatement": 5, "distinct": 5} for c in
         ("residence_work", "relationships", "state_possession", "preference_reversal", "negation", "plan_cancel_move",
          "number_same_slot", "date_time", "cross_kind")}
QUOTA["correction"] = {"update": 25, "distinct": 5}
for c in ("distinct_shared_words", "distinct_numbered_items", "distinct_quantity_other_thing", "distinct_person_place"):
    QUOTA[c] = {"distinct": 36}
QUOTA["restatement"] = {"restatement": 40}

DEFAULT_KIND = {"residence_work": "fact", "relationships": "fact", "state_possession": "fact", "preference_reversal": "preference",
                "negation": "fact", "plan_cancel_move": "decision", "number_same_slot": "fact", "date_time": "fact",
                "distinct_shared_words": "fact", "distinct_numbered_items": "fact", "distinct_quantity_other_thing": "fact",
                "distinct_person_place": "fact", "restatement": "fact", "correction": "fact", "cross_kind": None}

# hand-written: (category, old, new, old_kind, new_kind, expected, note)
HAND = [
    ("distinct_quantity_other_thing", "Alice ordered 2 pizzas for the Friday party", "Alice ordered 3 salads for the Friday party", "fact", "fact", "distinct", "issue 36: hidden as 'quantity 2 -> 3'"),
    ("distinct_quantity_other_thing", "I bought 6 eggs and a loaf of bread", "I bought 2 kilos of flour", None, None, "distinct", "two shopping facts"),
    ("distinct_quantity_other_thing", "The venue seats 120 guests", "The venue has 40 parking spaces", "fact", "fact", "distinct", "capacity vs parking"),
    ("distinct_numbered_items", "Item 17: buy milk", "Item 18: buy batteries", "fact", "fact", "distinct", "issue 36 concurrency texts"),
    ("distinct_numbered_items", "Memory 203 from worker A: water the plants", "Memory 204 from worker B: feed the cat", None, None, "distinct", "concurrent writers"),
    ("distinct_numbered_items", "PR 482 adds retry logic to the uploader", "PR 483 removes the legacy CSV exporter", "fact", "fact", "distinct", "two pull requests"),
    ("distinct_numbered_items", "Invoice INV-2041 is due on March 3", "Invoice INV-2042 is due on March 10", "fact", "fact", "distinct", "two invoices with dates"),
    ("distinct_person_place", "Ana lives in Paris", "Marco lives in Paris", "fact", "fact", "distinct", "same city, two people"),
    ("distinct_person_place", "The Lisbon team meets at 9am", "The Porto team meets at 10am", "fact", "fact", "distinct", "two teams"),
    ("distinct_shared_words", "Dana chose Postgres for the orders service", "Dana chose Redis for the session cache", "decision", "decision", "distinct", "two decisions"),
    ("distinct_shared_words", "The kids' swimming lesson is on Saturday", "The kids' piano lesson is on Saturday", "fact", "fact", "distinct", "two lessons"),
    ("residence_work", "Ana lives in Paris", "Ana moved to Berlin", "fact", "fact", "update", "issue 36 (b), same kind given"),
    ("residence_work", "I work remotely from Lisbon", "I'm back in the office in Madrid full time", None, None, "update", "remote -> office"),
    ("residence_work", "Tom is a junior developer at Hooli", "Tom got promoted to senior developer", "fact", "fact", "update", "promotion"),
    ("cross_kind", "Ana lives in Paris", "Ana moved to Berlin", None, None, "update", "issue 36 (b): inferred as different kinds"),
    ("cross_kind", "I prefer to work from home on Fridays", "From now on I have to be in the office on Fridays", "preference", "fact", "update", "preference overruled"),
    ("relationships", "Sara is my girlfriend", "Sara and I got married last spring", "fact", "fact", "update", "girlfriend -> wife"),
    ("relationships", "My team lead is Priya", "Priya left; Jonas leads my team now", None, None, "update", "lead replaced"),
    ("state_possession", "The basement flat is vacant", "The basement flat is occupied since May", "fact", "fact", "update", "vacant -> occupied"),
    ("state_possession", "I have two bikes", "I sold one of my bikes, so I have one bike left", None, None, "update", "count of possessions"),
    ("preference_reversal", "I like my coffee black", "These days I take my coffee with oat milk", "preference", "preference", "update", "coffee"),
    ("negation", "Oops, I'm allergic to peanuts", "I'm not allergic to peanuts, it's shellfish", None, None, "update", "issue 36 (c)"),
    ("negation", "Luis still lives with his parents", "Luis doesn't live with his parents anymore", "fact", "fact", "update", "not ... anymore"),
    ("plan_cancel_move", "The Lisbon offsite is on June 12", "The Lisbon offsite has been cancelled", "decision", "decision", "update", "cancelled"),
    ("plan_cancel_move", "We fly to Rome on Friday", "We are taking the train to Rome on Friday instead", "decision", "decision", "update", "mode changed"),
    ("number_same_slot", "We expect 40 guests at the wedding", "We now expect 55 guests at the wedding", "fact", "fact", "update", "guest count"),
    ("number_same_slot", "The car needs 2 new tyres", "The car needs all 4 tyres replaced", "fact", "fact", "update", "same slot, reworded"),
    ("date_time", "My flight to Berlin is on May 3", "My flight to Berlin is on May 5", "fact", "fact", "update", "issue 36 (c) fact pair"),
    ("date_time", "The kickoff is next Monday at 9am", "The kickoff is next Tuesday at 9am", "decision", "decision", "update", "relative weekday"),
    ("correction", "My flight to Berlin is on May 3", "Sorry, it's May 5, not May 3", "fact", None, "update", "issue 36 (c): elliptic correction"),
    ("correction", "I live in Berlin", "Actually I meant Munich", "fact", None, "update", "issue 36 (c): bare correction"),
    ("correction", "The invoice total is $1,200", "Correction: the invoice total is $1,250", "fact", "correction", "update", "money correction"),
    ("restatement", "The standup moved to 3pm", "The standup has moved to 15:00", "decision", "decision", "restatement", "update_pairs p01 style"),
    ("restatement", "Maya lives in Porto", "Maya's home is in Porto", "fact", "fact", "restatement", "possessive rewording"),
    ("restatement", "The contract ends on 2026-06-30", "The contract ends on June 30, 2026", "fact", "fact", "restatement", "ISO vs written date"),
    ("restatement", "Kofi has three kids", "Kofi has 3 children", "fact", "fact", "restatement", "number word vs digit"),
]


def pairs(rng) -> list:
    out, seen = [], set()
    def push(cat, old, new, ok, nk, exp, note):
        key = (old.casefold(), new.casefold())
        if key in seen or old.casefold() == new.casefold(): return False
        assert ok in KINDS or ok is None, ok
        assert nk in KINDS or nk is None, nk
        seen.add(key)
        out.append(dict(category=cat, old=old, new=new, old_kind=ok, new_kind=nk, expected=exp, note=note))
        return True
    for cat, old, new, ok, nk, exp, note in HAND: push(cat, old, new, ok, nk, exp, "hand: " + note)
    for cat in QUOTA:
        for exp, n in QUOTA[cat].items():
            have = sum(p["category"] == cat and p["expected"] == exp for p in out)
            tpls = T[cat][exp]
            order = list(range(len(tpls)))
            rng.shuffle(order)
            k, tries, used = 0, 0, Counter()
            while have < n:
                tries += 1
                assert tries < 5000, (cat, exp)
                i = order[k % len(order)]; k += 1
                tpl = tpls[i]
                old_t, new_t, note = tpl[:3]
                f = fill(rng)
                f["fly"] = "y" if f["S"] == "I" else "ies"
                f["age2"] = f["age1"] + 1 if exp == "update" else f["age1"] + rng.randint(2, 6)
                f["rent2"] = f["rent1"] + f["rent_up"] if exp == "update" else f["rent1"] * 2
                f["kg2"], f["sal2"] = f["kg1"] - f["kg_d"], f["sal1"] + f["sal_d"]
                f["s1"] = f["n1"] % 5 + 2; f["s2"] = f["n2"] % 5 + 2 if f["n2"] % 5 + 2 != f["s1"] else (f["s1"] - 1) % 5 + 2  # small counts (no draw)
                if f["gb2"] == f["gb1"]: continue
                if len(tpl) == 5: ok, nk = tpl[3], tpl[4]
                else:
                    d = DEFAULT_KIND[cat]
                    ok = nk = (None if rng.random() < 0.2 else d)
                if push(cat, render(old_t, f), render(new_t, f), ok, nk, exp, f"template {cat}/{exp}#{i}: {note}"):
                    have += 1; used[i] += 1
    return out


# ---------------------------------------------------------------- chats
def iso(t: datetime) -> str: return t.strftime("%Y-%m-%dT%H:%M:%SZ")

ACKS = ["Got it.", "Thanks for letting me know!", "Noted.", "Okay, I'll remember that.", "Good to know.", "Sounds good.",
        "Thanks, updated.", "Understood."]
FILLER = ["The weather has been lovely this week.", "I'm reading a novel about sailors.", "Work has been busy lately.",
          "I watched a documentary about bees yesterday evening.", "My plants are finally growing."]

def chat_templates():
    "(category, builder) pairs; a builder takes (rng, base time) and returns (turns [(role, text, minutes after base)], questions)."
    C = []
    def add(cat):
        def deco(fn): C.append((cat, fn)); return fn
        return deco

    @add("move")
    def _(r, t):
        a, b = two(r, CITIES)
        v = r.randrange(3)
        first = [f"I live in {a} with my partner.", f"I've been living in {a} for five years.", f"My home is in {a}, near the river."][v]
        later = [f"We just moved to {b}, the new flat is lovely.", f"Big news: I moved to {b} last month.", f"I relocated to {b} for good."][v]
        return [("user", first, 0), ("assistant", r.choice(ACKS), 1), ("user", r.choice(FILLER), 2), ("user", later, 60 * 24 * 30)], \
               [dict(q="Where do I live?", current=b, stale=a), dict(q=f"Do I still live in {a}?", current=b, stale=a)]

    @add("job_change")
    def _(r, t):
        a, b = two(r, COMPANIES); role = r.choice(ROLES)
        v = r.randrange(3)
        first = [f"I work at {a} as a {role}.", f"I'm a {role} at {a}.", f"My employer is {a}."][v]
        later = [f"I just started a new job at {b}.", f"I left {a} and joined {b} this week.", f"I work for {b} now."][v]
        return [("user", first, 0), ("assistant", r.choice(ACKS), 1), ("user", later, 60 * 24 * 60), ("assistant", "Congratulations!", 60 * 24 * 60 + 1)], \
               [dict(q="Where do I work?", current=b, stale=a), dict(q="Who is my employer?", current=b, stale=a)]

    @add("plan_rescheduled")
    def _(r, t):
        (m1, d1), (m2, d2) = md(r), md(r)
        if (m1, d1) == (m2, d2): d2 = d1 % 28 + 1
        thing = r.choice(["dentist appointment", "job interview", "driving test", "haircut", "vet appointment", "parent-teacher meeting"])
        tm = r.choice(["10am", "2pm", "4:30pm", "9am"])
        v = r.randrange(3)
        later = [f"They moved my {thing} to {m2} {d2}.", f"My {thing} was rescheduled to {m2} {d2}.", f"The {thing} got pushed to {m2} {d2}, same time."][v]
        return [("user", f"My {thing} is on {m1} {d1} at {tm}.", 0), ("assistant", r.choice(ACKS), 1), ("user", later, 60 * 24 * 3),
                ("assistant", r.choice(ACKS), 60 * 24 * 3 + 1)], \
               [dict(q=f"When is my {thing}?", current=f"{m2} {d2}", stale=f"{m1} {d1}")]

    @add("plan_rescheduled")
    def _(r, t):
        ev = r.choice(EVENTS); (a, _, _), (b, _, _) = clock(r), clock(r)
        if a == b: b = "5pm" if a != "5pm" else "8am"
        wd = r.choice(WEEKDAYS)
        return [("user", f"The {ev} is on {wd} at {a}.", 0), ("assistant", r.choice(ACKS), 1), ("user", r.choice(FILLER), 5),
                ("user", f"Heads up: the {ev} was moved to {b}.", 60 * 24)], \
               [dict(q=f"What time is the {ev}?", current=b, stale=a)]

    @add("plan_cancelled")
    def _(r, t):
        c = r.choice(CITIES); m, d = md(r)
        v = r.randrange(3)
        first = [f"I'm flying to {c} on {m} {d}.", f"I booked a trip to {c} for {m} {d}.", f"We're going to {c} on {m} {d} for a wedding."][v]
        later = [f"I cancelled the trip to {c}.", f"The {c} trip is off, I cancelled it.", f"We called off the {c} trip."][v]
        return [("user", first, 0), ("assistant", "Have a great trip!", 1), ("user", later, 60 * 24 * 7), ("assistant", r.choice(ACKS), 60 * 24 * 7 + 1)], \
               [dict(q=f"Am I still travelling to {c}?", current=["cancelled", "off", "called off"][v], stale=f"{m} {d}")]

    @add("plan_cancelled")
    def _(r, t):
        ev = r.choice(EVENTS); wd = r.choice(WEEKDAYS)
        return [("user", f"Our {ev} is every {wd} morning.", 0), ("assistant", r.choice(ACKS), 1),
                ("user", f"The {ev} was cancelled for good, we don't do it anymore.", 60 * 24 * 14)], \
               [dict(q=f"When is our {ev}?", current="cancelled", stale=f"every {wd}")]

    @add("correction_sorry")
    def _(r, t):
        c = r.choice(CITIES); m = r.choice(MONTHS); d1, d2 = r.sample(range(1, 29), 2)
        return [("user", f"My flight to {c} is on {m} {d1}.", 0), ("assistant", f"Noted: {m} {d1}.", 1),
                ("user", f"Sorry, it's {m} {d2}, not {m} {d1}.", 2)], \
               [dict(q=f"When is my flight to {c}?", current=f"{m} {d2}", stale=f"{m} {d1}")]

    @add("correction_sorry")
    def _(r, t):
        ev = r.choice(EVENTS); (a, _, _), (b, _, _) = clock(r), clock(r)
        if a == b: b = "5pm" if a != "5pm" else "8am"
        return [("user", f"The {ev} starts at {a} tomorrow.", 0), ("assistant", r.choice(ACKS), 1),
                ("user", f"Sorry, my mistake: it starts at {b}, not {a}.", 2), ("assistant", r.choice(ACKS), 3)], \
               [dict(q=f"When does the {ev} start?", current=b, stale=a)]

    @add("correction_meant")
    def _(r, t):
        a, b = two(r, CITIES)
        return [("user", f"I live in {a}.", 0), ("assistant", f"How do you like {a}?", 1), ("user", f"Actually I meant {b}.", 2)], \
               [dict(q="Where do I live?", current=b, stale=a)]

    @add("correction_meant")
    def _(r, t):
        x, y = r.sample(NAMES, 2); rel = r.choice(RELS)
        return [("user", f"My {rel} is called {x}.", 0), ("assistant", r.choice(ACKS), 1),
                ("user", f"Wait, I meant {y}, not {x}. My {rel}'s name is {y}.", 2)], \
               [dict(q=f"What is my {rel}'s name?", current=y, stale=x)]

    @add("correction_oops")
    def _(r, t):
        a, b = two(r, ALLERGENS)
        return [("user", f"I'm allergic to {a}.", 0), ("assistant", f"I'll keep {a} out of recipes.", 1),
                ("user", f"Oops, I'm not allergic to {a}, it's {b}.", 2)], \
               [dict(q="What am I allergic to?", current=b, stale=f"allergic to {a}")]

    @add("correction_oops")
    def _(r, t):
        x, y = two(r, RESTAURANTS); wd = r.choice(WEEKDAYS); p = r.choice(NAMES)
        return [("user", f"Dinner with {p} is at {x} on {wd}.", 0), ("assistant", r.choice(ACKS), 1),
                ("user", f"Oops, not {x}, it's {y}.", 2)], \
               [dict(q=f"Where is dinner with {p}?", current=y, stale=x)]

    @add("negation")
    def _(r, t):
        dr = r.choice(DRINKS); other = r.choice([d for d in DRINKS if d != dr])
        return [("user", f"I drink {dr} every morning.", 0), ("assistant", r.choice(ACKS), 1), ("user", r.choice(FILLER), 3),
                ("user", f"I don't drink {dr} anymore, I switched to {other}.", 60 * 24 * 20)], \
               [dict(q=f"Do I drink {dr}?", current=f"don't drink {dr}", stale=f"drink {dr} every morning"),
                dict(q="What do I drink in the morning?", current=other, stale=f"drink {dr} every morning")]

    @add("negation")
    def _(r, t):
        v = r.randrange(3)
        first, later, cur, st = [("I'm a vegetarian.", "I'm no longer vegetarian, I eat fish now.", "no longer vegetarian", "i'm a vegetarian"),
                                 ("I smoke about five cigarettes a day.", "I quit smoking last month.", "quit smoking", "five cigarettes"),
                                 ("I have a gym membership at FitZone.", "I cancelled my FitZone membership, I don't go anymore.", "cancelled", "i have a gym membership")][v]
        return [("user", first, 0), ("assistant", r.choice(ACKS), 1), ("user", later, 60 * 24 * 40)], \
               [dict(q=["Am I vegetarian?", "Do I smoke?", "Do I have a gym membership?"][v], current=cur, stale=st)]

    @add("quantity")
    def _(r, t):
        a, b = sorted(r.sample(range(2, 6), 2))
        pet = r.choice(["cats", "dogs", "rabbits"])
        words = "zero one two three four five six".split()
        return [("user", f"I have {words[a]} {pet}.", 0), ("assistant", r.choice(ACKS), 1),
                ("user", f"We adopted {'another one' if b == a + 1 else 'some more'}, so now I have {words[b]} {pet}.", 60 * 24 * 30)], \
               [dict(q=f"How many {pet} do I have?", current=f"{words[b]} {pet}", stale=f"{words[a]} {pet}")]

    @add("quantity")
    def _(r, t):
        n1 = r.randint(4, 15); n2 = n1 + r.randint(1, 5)
        return [("user", f"My team has {n1} engineers.", 0), ("assistant", r.choice(ACKS), 1), ("user", r.choice(FILLER), 2),
                ("user", f"Two hires later, the team has {n2} engineers.", 60 * 24 * 45)], \
               [dict(q="How many engineers are on my team?", current=f"{n2} engineers", stale=f"{n1} engineers")]

    @add("quantity")
    def _(r, t):
        n1, n2 = r.sample(range(2, 9), 2); p = r.choice(NAMES); q1, q2 = r.choice(QUANTITY_THINGS["food"])
        return [("user", f"{p} ordered {n1} {q1} for the party.", 0), ("assistant", r.choice(ACKS), 1),
                ("user", f"{p} also ordered {n2} {q2} for the party.", 2)], \
               [dict(q=f"How many {q1} did {p} order?", current=f"{n1} {q1}", stale=None),
                dict(q=f"How many {q2} did {p} order?", current=f"{n2} {q2}", stale=None)]

    @add("relative_date")
    def _(r, t):
        co = r.choice(COMPANIES)
        mon = t - timedelta(days=t.weekday() + 7)
        return [("user", f"I started at {co} last week.", 0), ("assistant", "Congratulations on the new job!", 1),
                ("user", "The team seems friendly.", 2)], \
               [dict(q=f"When did I start at {co}?", current=mon.date().isoformat(), stale=None)]

    @add("relative_date")
    def _(r, t):
        what = r.choice(["knee surgery", "driving test", "job interview", "first marathon"])
        return [("user", f"I had my {what} two days ago.", 0), ("assistant", "How did it go?", 1), ("user", "Really well, thanks.", 2)], \
               [dict(q=f"When was my {what}?", current=(t - timedelta(days=2)).date().isoformat(), stale=None)]

    @add("relative_date")
    def _(r, t):
        c = r.choice(CITIES)
        nm = (t.replace(day=1) + timedelta(days=32)).strftime("%Y-%m")
        return [("user", f"I'm moving to {c} next month.", 0), ("assistant", r.choice(ACKS), 1), ("user", r.choice(FILLER), 2)], \
               [dict(q=f"When am I moving to {c}?", current=nm, stale=None)]

    @add("relative_date")
    def _(r, t):
        rel = r.choice(RELS)
        month = MONTHS[(t.month + 1) % 12]  # two months ahead
        yr = t.year + (1 if t.month + 2 > 12 else 0)
        return [("user", f"My {rel}'s wedding is in {month}.", 0), ("assistant", "How exciting!", 1),
                ("user", f"Sorry, I mixed it up: the wedding is next month, not in {month}.", 2)], \
               [dict(q=f"When is my {rel}'s wedding?", current=(t.replace(day=1) + timedelta(days=32)).strftime("%Y-%m"),
                     stale=f"wedding is in {month}")]
    return C

CHAT_HAND = [  # the issue's own examples
    ("correction_sorry", [("user", "My flight to Berlin is on May 3.", 0), ("assistant", "Noted.", 1), ("user", "Sorry, it's May 5, not May 3.", 2)],
     [dict(q="When is my flight to Berlin?", current="May 5", stale="May 3")]),
    ("correction_oops", [("user", "I'm allergic to peanuts.", 0), ("assistant", "Okay.", 1), ("user", "Oops, I'm not allergic to peanuts, it's shellfish.", 2)],
     [dict(q="What am I allergic to?", current="shellfish", stale="allergic to peanuts")]),
    ("correction_meant", [("user", "I live in Berlin.", 0), ("assistant", "Nice city!", 1), ("user", "Actually I meant Munich.", 2)],
     [dict(q="Where do I live?", current="Munich", stale="Berlin")]),
    ("move", [("user", "Ana lives in Paris.", 0), ("assistant", "Noted.", 1), ("user", "Ana moved to Berlin last spring.", 60 * 24 * 200)],
     [dict(q="Where does Ana live?", current="Berlin", stale="Paris")]),
]

PER_CATEGORY_CHATS = 6

def chats(rng) -> list:
    out, seen = [], set()
    for cat, turns, qs in CHAT_HAND:
        out.append((cat, turns, qs, datetime(2026, 3, 10, 9, 0, tzinfo=timezone.utc), "hand"))
    builders = chat_templates()
    cats = list(dict.fromkeys(c for c, _ in builders))
    for cat in cats:
        mine = [b for c, b in builders if c == cat]
        have, k, tries = sum(o[0] == cat for o in out), 0, 0
        while have < PER_CATEGORY_CHATS:
            tries += 1; assert tries < 500, cat
            base = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc) + timedelta(days=rng.randint(0, 300), minutes=rng.randint(0, 600))
            turns, qs = mine[k % len(mine)](rng, base); k += 1
            key = tuple(x[1] for x in turns)
            if key in seen: continue
            seen.add(key); out.append((cat, turns, qs, base, "template")); have += 1
    res = []
    for cat, turns, qs, base, how in out:
        msgs = [dict(role=role, content=text, time=iso(base + timedelta(minutes=m))) for role, text, m in turns]
        assert 3 <= len(msgs) <= 8 or how == "hand", msgs
        res.append(dict(category=cat, messages=msgs, questions=qs, note=how))
    return res


def split(rng, items: list, key) -> None:
    "50/50 tune/heldout, stratified by key(item): within each stratum alternate over a seeded shuffle (odd strata: a coin for the extra)."
    groups = {}
    for i, it in enumerate(items): groups.setdefault(key(it), []).append(i)
    for g in sorted(groups):
        idx = groups[g][:]; rng.shuffle(idx)
        flip = rng.random() < 0.5
        for j, i in enumerate(idx): items[i]["split"] = "tune" if (j % 2 == 0) != flip else "heldout"


def build(seed: int = SEED) -> tuple:
    rng = random.Random(seed)
    P = pairs(rng)
    split(rng, P, lambda p: (p["category"], p["expected"]))
    P = [dict(id=f"t{i:03d}", category=p["category"], old=p["old"], new=p["new"], old_kind=p["old_kind"], new_kind=p["new_kind"],
              expected=p["expected"], split=p["split"], note=p["note"]) for i, p in enumerate(P)]
    Ch = chats(rng)
    split(rng, Ch, lambda c: c["category"])
    Ch = [dict(id=f"c{i:02d}", category=c["category"], split=c["split"], messages=c["messages"], questions=c["questions"], note=c["note"])
          for i, c in enumerate(Ch)]
    return P, Ch


def summary(P, Ch) -> str:
    lines = [f"pairs: {len(P)}  " + "  ".join(f"{k}={v}" for k, v in sorted(Counter(p['expected'] for p in P).items())) +
             "  " + "  ".join(f"{k}={v}" for k, v in sorted(Counter(p['split'] for p in P).items()))]
    lines.append(f"{'category':32s} {'n':>4s} {'upd':>4s} {'dist':>4s} {'rest':>4s} {'tune':>5s} {'held':>5s}")
    for cat in dict.fromkeys(p["category"] for p in P):
        s = [p for p in P if p["category"] == cat]
        c = Counter(p["expected"] for p in s); sp = Counter(p["split"] for p in s)
        lines.append(f"{cat:32s} {len(s):4d} {c['update']:4d} {c['distinct']:4d} {c['restatement']:4d} {sp['tune']:5d} {sp['heldout']:5d}")
    lines.append(f"chats: {len(Ch)}  questions: {sum(len(c['questions']) for c in Ch)}  " +
                 "  ".join(f"{k}={v}" for k, v in sorted(Counter(c['split'] for c in Ch).items())))
    for cat in dict.fromkeys(c["category"] for c in Ch):
        s = [c for c in Ch if c["category"] == cat]; sp = Counter(c["split"] for c in s)
        lines.append(f"  {cat:22s} {len(s):3d}  tune={sp['tune']} heldout={sp['heldout']}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--check", action="store_true", help="compare a fresh build with the committed files instead of writing")
    a = ap.parse_args(argv)
    P, Ch = build(a.seed)
    dump = lambda x: json.dumps(x, indent=1, ensure_ascii=False) + "\n"
    if a.check:
        same = PAIRS_OUT.read_text() == dump(P) and CHATS_OUT.read_text() == dump(Ch)
        print("the committed corpora match a fresh build" if same else "the committed corpora DIFFER from a fresh build")
        return 0 if same else 1
    PAIRS_OUT.parent.mkdir(parents=True, exist_ok=True); CHATS_OUT.parent.mkdir(parents=True, exist_ok=True)
    PAIRS_OUT.write_text(dump(P)); CHATS_OUT.write_text(dump(Ch))
    print(summary(P, Ch))
    print(f"wrote {PAIRS_OUT.relative_to(ROOT)} and {CHATS_OUT.relative_to(ROOT)}")


if __name__ == "__main__": sys.exit(main())
