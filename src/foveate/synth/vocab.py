"""Random but plausible values for synthetic documents (names, companies, addresses, dates, amounts) and the
fonts to draw them with.  Every function takes a ``random.Random`` so that a document is a function of its seed."""

from __future__ import annotations

import os
import random
from functools import lru_cache

from PIL import ImageFont

FIRST = (
    "James Mary Robert Linda Michael Sarah David Karen Daniel Laura Paul Nancy Mark Helen Steven Anna Kevin Ruth "
    "Brian Emma Jose Sofia Wei Mei Hiro Yuki Omar Aisha Ivan Olga Pierre Claire Lars Ingrid Raj Priya Tom Ana"
).split()
LAST = (
    "Smith Johnson Garcia Miller Davis Lopez Wilson Anderson Thomas Moore Martin Lee Walker Hall Young King Wright "
    "Scott Green Baker Nelson Carter Mitchell Perez Roberts Turner Phillips Campbell Parker Evans Edwards Collins "
    "Stewart Morris Nguyen Tanaka Kumar Novak Dubois Berg"
).split()
WORD1 = (
    "Blue Golden Silver Green Red Northern Pacific Eastern Royal Urban Coastal Summit Maple Cedar Harbor River "
    "Sunrise Lakeside Pioneer Union Metro Prime Alpine Liberty Oak"
).split()
WORD2 = (
    "Market Grill Cafe Bakery Pharmacy Hardware Books Deli Foods Kitchen Outfitters Electronics Supply Mart Bistro "
    "Diner Optics Textiles Logistics Systems Labs Partners Holdings Studio Garden"
).split()
SUFFIX = ("", "", " Inc.", " LLC", " Ltd", " Co.", " & Co", " GmbH", " Sdn Bhd", " Corp.")
STREETS = (
    "Main Oak Pine Maple Cedar Elm Washington Lake Hill Park Market Church High Bridge Mill Station River Spring "
    "Union Harbor"
).split()
STREET_TYPES = ("St", "Street", "Ave", "Avenue", "Rd", "Road", "Blvd", "Lane", "Dr", "Way")
CITIES = (
    ("Portland", "OR"),
    ("Austin", "TX"),
    ("Denver", "CO"),
    ("Boston", "MA"),
    ("Seattle", "WA"),
    ("Oxnard", "CA"),
    ("Madison", "WI"),
    ("Tampa", "FL"),
    ("Leeds", ""),
    ("Bristol", ""),
    ("Kuala Lumpur", ""),
    ("Toronto", "ON"),
    ("Dublin", ""),
    ("Phoenix", "AZ"),
    ("Raleigh", "NC"),
)
ITEMS = (
    "Coffee Latte Espresso Bagel Croissant Sandwich Salad Burger Fries Soda Water Tea Muffin Pasta Pizza Soup Rice "
    "Noodles Chicken Beef Salmon Tofu Apples Bananas Milk Bread Eggs Cheese Butter Yogurt Cereal Juice Cookies "
    "Chips Batteries Cable Charger Notebook Pens Paper Tape Gloves Lamp Filter Lens Mount Screws Paint Brush"
).split()
ADJECTIVES = "Large Small Organic Fresh Iced Hot Spicy Classic Deluxe Mini Family Whole Green Red Premium".split()
DEPARTMENTS = (
    "Sales",
    "Marketing",
    "Finance",
    "Research",
    "Operations",
    "Legal",
    "Purchasing",
    "Northeast",
    "Midwest",
    "Region 4",
    "Quality Control",
    "Human Resources",
    "Field Services",
    "Production",
)
JOB_TITLES = (
    "Manager",
    "Sales Representative",
    "Director",
    "Analyst",
    "Coordinator",
    "Supervisor",
    "Buyer",
    "Account Executive",
    "Vice President",
    "Technician",
    "Assistant",
)
MONTHS = ("January February March April May June July August September October November December").split()
SENTENCES = (
    "We are pleased to confirm the arrangements discussed at our last meeting.",
    "Please find enclosed the documents you requested.",
    "The committee will review the proposal before the end of the quarter.",
    "Let us know if any of the figures need to be revised.",
    "Our team remains available to answer any further questions.",
    "The shipment is expected to arrive within two weeks.",
    "We appreciate your patience while the review is completed.",
    "A copy of this letter has been sent to the regional office.",
)


def person(r: random.Random) -> str:
    return f"{r.choice(FIRST)} {r.choice(LAST)}"


def company(r: random.Random) -> str:
    return f"{r.choice(WORD1)} {r.choice(WORD2)}{r.choice(SUFFIX)}"


def street(r: random.Random) -> str:
    return f"{r.randint(1, 9899)} {r.choice(STREETS)} {r.choice(STREET_TYPES)}"


def city(r: random.Random) -> str:
    name, state = r.choice(CITIES)
    return (
        f"{name}, {state} {r.randint(10000, 99999)}" if state else f"{name} {r.randint(10, 99)}{r.choice('ABCDEFGH')}"
    )


def phone(r: random.Random) -> str:
    a, b, c = r.randint(200, 989), r.randint(200, 999), r.randint(0, 9999)
    return r.choice([f"({a}) {b}-{c:04d}", f"{a}-{b}-{c:04d}", f"+1 {a} {b} {c:04d}", f"0{a % 100}-{b}{c:04d}"])


def date(r: random.Random) -> str:
    y, m, d = r.randint(2015, 2026), r.randint(1, 12), r.randint(1, 28)
    return r.choice(
        [
            f"{m:02d}/{d:02d}/{y}",
            f"{d:02d}/{m:02d}/{y % 100:02d}",
            f"{y}-{m:02d}-{d:02d}",
            f"{MONTHS[m - 1]} {d}, {y}",
            f"{d} {MONTHS[m - 1][:3]} {y}",
            f"{d:02d}.{m:02d}.{y}",
        ]
    )


def clock(r: random.Random) -> str:
    h, m, s = r.randint(0, 23), r.randint(0, 59), r.randint(0, 59)
    return r.choice(
        [f"{h:02d}:{m:02d}", f"{h:02d}:{m:02d}:{s:02d}", f"{(h % 12) or 12}:{m:02d} {'PM' if h >= 12 else 'AM'}"]
    )


def money(value: float, currency: str) -> str:
    return f"{currency}{value:,.2f}"


@lru_cache(maxsize=1)
def font_files() -> tuple[str, ...]:
    """DejaVu font files found on this machine (the system's, or matplotlib's copy); empty: Pillow's own font."""
    dirs = ["/usr/share/fonts/truetype/dejavu"]
    try:
        import matplotlib

        dirs.append(os.path.join(os.path.dirname(matplotlib.__file__), "mpl-data", "fonts", "ttf"))
    except ImportError:
        pass
    seen: dict[str, str] = {}
    for d in dirs:
        if os.path.isdir(d):
            for f in sorted(os.listdir(d)):
                if (
                    f.startswith("DejaVu")
                    and f.endswith(".ttf")
                    and f not in seen
                    and not any(x in f for x in ("Math", "ExtraLight", "Display"))
                ):
                    seen[f] = os.path.join(d, f)
    return tuple(seen[k] for k in sorted(seen))


@lru_cache(maxsize=256)
def font(path: str | None, size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size) if path is None else ImageFont.truetype(path, size)


def pick_fonts(r: random.Random, mono: bool = False) -> tuple[str | None, str | None]:
    """(body, bold) font files: mostly upright regular text, a bold face for headings and totals."""
    files = font_files()
    if not files:
        return None, None
    if mono and r.random() < 0.6:
        m = [f for f in files if "Mono" in f and "Oblique" not in f]
        if m:
            return r.choice(m), r.choice(m)
    upright = [f for f in files if not any(x in f for x in ("Bold", "Oblique", "Italic"))] or list(files)
    bold = [f for f in files if "Bold" in f and not any(x in f for x in ("Oblique", "Italic"))]
    body = r.choice(upright) if r.random() < 0.85 else r.choice(files)
    return body, (r.choice(bold) if bold and r.random() < 0.7 else body)
