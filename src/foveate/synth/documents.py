"""Synthetic documents with natural questions and their answer boxes: receipts, invoices, letters and forms.

Each kind is a layout program (:func:`receipt`, :func:`invoice`, :func:`letter`; :func:`.forms.form`) that places text
items with a role (``issuer``, ``date``, ``total``, ...); labels are optional and vary (same row, below,
``Label: value``, none), so that what a ranker learns is the *kind* of answer and where such answers sit, not one
label's wording.  Questions are drawn from several phrasings per role (:mod:`.questions`): on receipts, invoices
and letters most quote no label ("How much was paid?", "Who issued it?"); on a form they quote the field's label
("What was entered for "Region"?"; only the label tells apart fields whose values look alike, two dates, two names)
or ask for a printed text itself ("Where does it say "Order Form"?").  Pages are drawn by :mod:`.draw`;
:func:`make_dataset` writes a data set in
the ``queries.jsonl`` format (answer boxes, text heights, answer texts; ``repeated_value`` where the answer is
printed twice).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path

from PIL import Image

from . import vocab as V
from .draw import render
from .forms import form
from .layout import Doc, Item, _pair
from .questions import questions


def receipt(r: random.Random) -> Doc:
    """A till receipt: store name, address, phone, date/time, items, subtotal/tax/total, payment, footer."""
    w = r.randint(380, 600)
    body, bold = V.pick_fonts(r, mono=True)
    s, cur = r.randint(13, 20), r.choice(["$", "$", "£", "€", "RM ", ""])
    items: list[Item] = []
    y: float
    y, m = r.randint(20, 50), r.randint(18, 40)
    right, centre = w - m, w / 2
    name = V.company(r)
    items.append(
        Item(name.upper() if r.random() < 0.6 else name, centre, y, int(s * r.uniform(1.3, 2.0)), bold, "c", "issuer")
    )
    y += s * 2.6
    for line in (V.street(r), V.city(r)):
        items.append(Item(line, centre, y, s, body, "c", "issuer_addr"))
        y += s * 1.4
    if r.random() < 0.8:
        label = r.choice(["Tel", "TEL", "Phone", "Ph", ""])
        ph = V.phone(r)
        items.append(Item(f"{label}: {ph}" if label else ph, centre, y, s, body, "c", "phone"))
        y += s * 1.4
    y += s
    d, t = V.date(r), V.clock(r)
    if r.random() < 0.5:
        items += [Item(d, m, y, s, body, role="date"), Item(t, right, y, s, body, "r", "time")]
        y += s * 1.5
    else:
        y = _pair(
            r, items, m, y, s, body, r.choice(["Date", "DATE"]), d, "date", r.choice(["colon", "same"]), right=right
        )
        y = _pair(
            r,
            items,
            m,
            y,
            s,
            body,
            r.choice(["Time", "TIME"]),
            t,
            "time",
            r.choice(["colon", "same", "none"]),
            right=right,
        )
    if r.random() < 0.5:
        y = _pair(
            r,
            items,
            m,
            y,
            s,
            body,
            r.choice(["Cashier", "Server", "Clerk"]),
            V.person(r),
            "cashier",
            r.choice(["colon", "same"]),
            right=right,
        )
    y += s * 0.8
    subtotal, qty_column = 0.0, r.random() < 0.6
    for it in r.sample(V.ITEMS, r.randint(2, 9)):
        name = f"{r.choice(V.ADJECTIVES)} {it}" if r.random() < 0.4 else it
        name = name.upper() if r.random() < 0.5 else name
        q, p = r.randint(1, 4), round(r.uniform(0.5, 40), 2)
        subtotal += q * p
        if qty_column:
            items += [Item(str(q), m, y, s, body, role=f"item_qty|{name}"), Item(name, m + s * 2.2, y, s, body)]
        else:
            items.append(Item(name, m, y, s, body))
        items.append(Item(V.money(q * p, cur), right, y, s, body, "r", f"item_price|{name}"))
        y += s * 1.45
    rule_y = y + s * 0.3
    y += s * 0.9
    tax = round(subtotal * r.choice([0.05, 0.06, 0.08, 0.1, 0.2]), 2)
    total = subtotal + tax
    mode = r.choice(["same", "same", "colon"])
    y = _pair(
        r,
        items,
        m,
        y,
        s,
        body,
        r.choice(["Subtotal", "SUBTOTAL", "Sub Total", "Net"]),
        V.money(subtotal, cur),
        "subtotal",
        mode,
        right=right,
    )
    y = _pair(
        r,
        items,
        m,
        y,
        s,
        body,
        r.choice(["Tax", "TAX", "VAT", "GST", "Sales Tax"]),
        V.money(tax, cur),
        "tax",
        mode,
        right=right,
    )
    y = _pair(
        r,
        items,
        m,
        y,
        int(s * r.choice([1.0, 1.0, 1.3])),
        bold,
        r.choice(["TOTAL", "Total", "Amount Due", "Grand Total", "BALANCE DUE", "Net Total"]),
        V.money(total, cur),
        "total",
        mode,
        right=right,
    )
    if r.random() < 0.5:
        paid = math.ceil(total / 10) * 10
        y = _pair(
            r,
            items,
            m,
            y,
            s,
            body,
            r.choice(["Cash", "CASH", "Tendered"]),
            V.money(paid, cur),
            None,
            "same",
            right=right,
        )
        y = _pair(
            r,
            items,
            m,
            y,
            s,
            body,
            r.choice(["Change", "CHANGE"]),
            V.money(paid - total, cur),
            "change",
            "same",
            right=right,
        )
    elif r.random() < 0.6:  # the card line repeats the total
        y = _pair(
            r,
            items,
            m,
            y,
            s,
            body,
            f"{r.choice(['VISA', 'Mastercard', 'Card', 'AMEX'])} ****{r.randint(1000, 9999)}",
            V.money(total, cur),
            "total",
            "same",
            right=right,
        )
    y += s
    for line in r.sample(
        [
            "Thank you for shopping!",
            "Please come again",
            "No refunds without receipt",
            "Have a nice day",
            f"Receipt #{r.randint(1000, 99999)}",
        ],
        2,
    ):
        items.append(Item(line, centre, y, s - 2, body, "c"))
        y += s * 1.4
    return Doc(
        "receipt", w, int(y + r.randint(20, 60)), items, [(m, rule_y, right, rule_y)] if r.random() < 0.7 else []
    )


def invoice(r: random.Random) -> Doc:
    """An invoice page: issuer block, title, number/date/due fields, bill-to block, item table, totals, terms."""
    w, h = 850, 1100
    body, bold = V.pick_fonts(r)
    s, cur = r.randint(12, 17), r.choice(["$", "$", "£", "€", ""])
    items: list[Item] = []
    m = r.randint(40, 80)
    right = w - m
    issuer = V.company(r)
    head_right = r.random() < 0.3
    hx, anchor = (right, "r") if head_right else (m, "l")
    y: float = r.randint(40, 70)
    items.append(Item(issuer, hx, y, int(s * r.uniform(1.6, 2.4)), bold, anchor, "issuer"))
    y += s * 3
    for line in (V.street(r), V.city(r)):
        items.append(Item(line, hx, y, s, body, anchor, "issuer_addr"))
        y += s * 1.4
    items.append(Item(r.choice(["Phone: ", "Tel ", "T: ", ""]) + V.phone(r), hx, y, s, body, anchor, "phone"))
    y += s * 1.4
    if r.random() < 0.5:
        mail = f"{r.choice(['billing', 'accounts', 'info', 'sales'])}@{issuer.split()[0].lower()}.example"
        items.append(Item(mail, hx, y, s, body, anchor, "email"))
        y += s * 1.4
    items.append(
        Item(
            r.choice(["INVOICE", "Invoice", "TAX INVOICE", "BILL"]),
            m if head_right else right,
            r.randint(40, 70),
            int(s * 2),
            bold,
            "l" if head_right else "r",
        )
    )
    y += s * 2
    mode = r.choice(["same", "below", "colon"])
    fx = w * r.uniform(0.5, 0.6)
    fy = _pair(
        r,
        items,
        fx,
        y,
        s,
        body,
        r.choice(["Invoice No", "Invoice #", "Number", "Ref"]),
        f"{r.choice(['INV', 'N', ''])}{r.randint(1000, 999999)}",
        "number",
        mode,
        x_value=fx + s * 8,
    )
    fy = _pair(
        r,
        items,
        fx,
        fy,
        s,
        body,
        r.choice(["Date", "Invoice Date", "Issued"]),
        V.date(r),
        "date",
        mode,
        x_value=fx + s * 8,
    )
    if r.random() < 0.7:
        fy = _pair(
            r,
            items,
            fx,
            fy,
            s,
            body,
            r.choice(["Due Date", "Due", "Payment Due"]),
            V.date(r),
            "due",
            mode,
            x_value=fx + s * 8,
        )
    items.append(Item(r.choice(["Bill to:", "BILL TO", "Customer:", "Billed To"]), m, y, s, bold))
    by = y + s * 1.5
    items.append(Item(V.person(r) if r.random() < 0.5 else V.company(r), m, by, s, body, role="recipient"))
    by += s * 1.4
    for line in (V.street(r), V.city(r)):
        items.append(Item(line, m, by, s, body))
        by += s * 1.4
    y = max(fy, by) + s * 2
    cols = [m, w * 0.55, w * 0.78, right]
    for text, x, a in zip(["Description", "Qty", "Unit Price", "Amount"], cols, "llrr"):
        items.append(Item(text, x, y, s, bold, a))
    y += s * 1.4
    rules: list[tuple[float, float, float, float]] = [(m, y, right, y)]
    y += s * 0.6
    subtotal = 0.0
    for it in r.sample(V.ITEMS, r.randint(2, 8)):
        name = f"{r.choice(V.ADJECTIVES)} {it}" if r.random() < 0.5 else it
        q, p = r.randint(1, 20), round(r.uniform(2, 500), 2)
        subtotal += q * p
        items += [
            Item(name, cols[0], y, s, body),
            Item(str(q), cols[1], y, s, body, role=f"item_qty|{name}"),
            Item(V.money(p, cur), cols[2], y, s, body, "r"),
            Item(V.money(q * p, cur), cols[3], y, s, body, "r", f"item_price|{name}"),
        ]
        y += s * 1.6
    rules.append((m, y, right, y))
    y += s
    tax = round(subtotal * r.choice([0, 0.05, 0.1, 0.2]), 2)
    for label, value, role in (
        (r.choice(["Subtotal", "Sub-total", "Net amount"]), subtotal, "subtotal"),
        (r.choice(["Tax", "VAT", "GST"]), tax, "tax"),
        (r.choice(["Total", "TOTAL DUE", "Amount Due", "Balance Due", "Total (incl. tax)"]), subtotal + tax, "total"),
    ):
        f = bold if role == "total" else body
        items += [Item(label, w * 0.6, y, s, f), Item(V.money(value, cur), right, y, s, f, "r", role)]
        y += s * 1.7
    y += s * 2
    items.append(
        Item(
            r.choice(["Payment terms: 30 days", "Please pay by bank transfer", "Thank you for your business"]),
            m,
            y,
            s - 1,
            body,
        )
    )
    if r.random() < 0.5:
        iban = f"GB{r.randint(10, 99)} {r.randint(1000, 9999)} {r.randint(1000, 9999)} {r.randint(1000, 9999)}"
        items.append(Item(f"Bank: IBAN {iban}", m, y + s * 1.5, s - 2, body))
    return Doc("invoice", w, h, items, rules)


def letter(r: random.Random) -> Doc:
    """A business letter: letterhead, date (no label), recipient block, subject, body, closing, signer."""
    w, h = 850, 1100
    body, bold = V.pick_fonts(r)
    s = r.randint(13, 17)
    items: list[Item] = []
    m = r.randint(60, 100)
    right = w - m
    y: float = r.randint(40, 80)
    hx, anchor = (w / 2, "c") if r.random() < 0.5 else (m, "l")
    items.append(Item(V.company(r), hx, y, int(s * r.uniform(1.5, 2.2)), bold, anchor, "issuer"))
    y += s * 2.6
    items.append(Item(f"{V.street(r)}, {V.city(r)}", hx, y, s - 1, body, anchor, "issuer_addr"))
    y += s * 1.4
    items.append(Item(V.phone(r), hx, y, s - 1, body, anchor, "phone"))
    y += s * 3
    d = V.date(r)
    items.append(Item(d, right, y, s, body, "r", "date") if r.random() < 0.5 else Item(d, m, y, s, body, role="date"))
    y += s * 3
    recipient = V.person(r)
    for text, role in ((recipient, "recipient"), (V.company(r), None), (V.street(r), None), (V.city(r), None)):
        items.append(Item(text, m, y, s, body, role=role))
        y += s * 1.4
    y += s * 1.1
    if r.random() < 0.6:
        subject = r.choice(
            [
                "Renewal of the service agreement",
                "Quarterly report",
                "Change of address",
                "Outstanding balance",
                "Project proposal",
            ]
        )
        items.append(Item(f"Re: {subject}", m, y, s, bold, role="subject"))
        y += s * 2.2
    items.append(Item(f"Dear {recipient.split()[0] if r.random() < 0.5 else 'Sir or Madam'},", m, y, s, body))
    y += s * 2
    for _ in range(r.randint(2, 4)):
        for sentence in r.sample(V.SENTENCES, r.randint(1, 3)):
            items.append(Item(sentence, m, y, s, body))
            y += s * 1.45
        y += s * 0.8
    y += s
    items.append(Item(r.choice(["Sincerely,", "Yours faithfully,", "Best regards,", "Kind regards,"]), m, y, s, body))
    y += s * 4
    items.append(Item(V.person(r), m, y, s, body, role="signer"))
    items.append(
        Item(
            r.choice(
                [
                    "Director of Operations",
                    "Account Manager",
                    "Chief Financial Officer",
                    "Office Manager",
                    "Head of Sales",
                ]
            ),
            m,
            y + s * 1.4,
            s,
            body,
            role="signer_title",
        )
    )
    return Doc("letter", w, h, items)


KINDS: dict[str, Callable[[random.Random], Doc]] = {
    "receipt": receipt,
    "invoice": invoice,
    "letter": letter,
    "form": form,
}
#: what ``foveate synth`` and ``synth:N`` draw unless told: the documents ``synth:N`` drew before forms existed, the
#: same ones for a seed (the shipped recipe names all four: ``synth:400:receipt,invoice,letter,form``)
DEFAULT_KINDS = ("receipt", "invoice", "letter")


def check_kinds(kinds: tuple[str, ...]) -> tuple[str, ...]:
    """``kinds`` if it names at least one kind and only kinds of :data:`KINDS`, else a ``ConfigError``."""
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds:
        from ..core.errors import ConfigError

        what = f"unknown document kind(s) {sorted(unknown)}" if unknown else "no document kind"
        raise ConfigError(f"{what}; choose from {', '.join(KINDS)}")
    return kinds


def parse_kinds(text: str) -> tuple[str, ...]:
    """Kinds written comma-separated (``"form, letter"``), checked (:func:`check_kinds`)."""
    return check_kinds(tuple(k.strip() for k in text.split(",") if k.strip()))


#: bumped whenever a kind's documents change for a seed (a layout changed); recorded in :data:`GENERATED_MARK`, and
#: ``foveate train`` draws a cached set again when its mark does not match (:func:`generated_mark`)
GENERATOR_VERSION = 4

#: the file that marks a data set as generated (``foveate train`` lets such sets teach the ranker but not choose
#: the text term's display constants)
GENERATED_MARK = "generated.json"


def generated_mark(n: int, kinds: tuple[str, ...], seed: int) -> dict:
    """What :func:`make_dataset` records in :data:`GENERATED_MARK`: the generator and its version, ``n``, ``seed``
    and the kinds."""
    return {
        "generator": "foveate.synth.documents",
        "version": GENERATOR_VERSION,
        "n": n,
        "seed": seed,
        "kinds": list(kinds),
    }


#: the most documents one data set draws, and about what one takes on disk (a PNG page: ~0.6 MB, 800 drawn)
MAX_DOCUMENTS = 10_000
DOCUMENT_BYTES = 600_000


def check_count(n: int, out: Path) -> None:
    """A :class:`ConfigError` for ``n`` documents out of ``[1, MAX_DOCUMENTS]`` or more than the disk under ``out``
    holds (checked before the first is drawn: a count read wrong would otherwise fill the disk)."""
    import shutil

    from ..core.errors import ConfigError

    if not 1 <= n <= MAX_DOCUMENTS:
        raise ConfigError(f"the number of documents must be in [1, {MAX_DOCUMENTS}], got {n}")
    existing = next((p for p in (out, *out.parents) if p.exists()), Path("."))
    free = shutil.disk_usage(existing).free
    if n * DOCUMENT_BYTES > free:
        raise ConfigError(
            f"{n} documents take about {n * DOCUMENT_BYTES / 1e9:.1f} GB; {existing} has {free / 1e9:.1f} GB free"
        )


def make_dataset(out: str | Path, n: int, kinds: tuple[str, ...] = DEFAULT_KINDS, seed: int = 0) -> Path:
    """Write ``n`` documents (kinds in turn) as PNG images plus ``queries.jsonl``; a function of ``seed``.

    Raises:
        ConfigError: an unknown kind, or ``n`` out of range or too many for the disk (:func:`check_count`)."""
    check_kinds(kinds)
    out = Path(out)
    check_count(n, out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        r = random.Random(f"{seed}:{i}:{kind}")
        doc = KINDS[kind](r)
        rgb = render(doc, r)
        name = f"images/{kind}_{seed}_{i:05d}.png"
        Image.fromarray(rgb).save(out / name)
        lines += [json.dumps({"image": name, **q, "kind": kind}) for q in questions(doc, r)]
    (out / GENERATED_MARK).write_text(json.dumps(generated_mark(n, kinds, seed)) + "\n", encoding="utf-8")
    tmp = out / "queries.jsonl.tmp"
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(out / "queries.jsonl")
    return out
