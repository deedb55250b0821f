"""Generated fill-in forms (:func:`form`): labelled fields in several layouts, ruled grids, tables whose headers are
asked for their whole column, and the field kinds they draw (:data:`FORM_FIELDS`)."""

from __future__ import annotations

import random
from collections.abc import Callable

from . import vocab as V
from .layout import Doc, Item


def _number(r: random.Random) -> str:
    return f"{r.choice(['', '', 'No. ', '#', 'A-', 'PO '])}{r.randint(100, 99999999)}"


#: a form's kinds of field: the labels one may carry (each form uses a label once) and a value drawer
FORM_FIELDS: tuple[tuple[tuple[str, ...], Callable[[random.Random], str]], ...] = (
    (("Name", "Full Name", "Applicant", "Employee Name", "Contact", "Attention"), V.person),
    (("Company", "Organization", "Firm", "Account Name", "Customer", "Supplier"), V.company),
    (("Address", "Street Address", "Mailing Address", "Ship To"), V.street),
    (("City", "City/State/Zip", "Location"), V.city),
    (("Phone", "Telephone", "Tel. No.", "Fax", "Fax No.", "Mobile"), V.phone),
    (("Date", "Date Submitted", "Start Date", "End Date", "Effective Date", "Date of Birth", "Received"), V.date),
    (("Account No.", "Reference", "Order No.", "File No.", "Project No.", "ID Number", "Code"), _number),
    (
        ("Amount", "Budget", "Total Cost", "Estimated Cost", "Unit Price", "Deposit"),
        lambda r: V.money(r.uniform(5, 90000), r.choice(["$", "$", "", "£"])),
    ),
    (("Department", "Division", "Region", "Territory", "District", "Branch"), lambda r: r.choice(V.DEPARTMENTS)),
    (("Title", "Position", "Job Title"), lambda r: r.choice(V.JOB_TITLES)),
    (("Quantity", "Units", "No. of Pages", "Copies", "Cases"), lambda r: str(r.randint(1, 500))),
    (("Brand", "Product", "Item", "Description"), lambda r: f"{r.choice(V.ADJECTIVES)} {r.choice(V.ITEMS)}"),
    (("Approved by", "Signature", "Prepared by", "Requested by", "Submitted by"), V.person),
    (
        ("Status", "Priority", "Type", "Method"),
        lambda r: r.choice(["Approved", "Pending", "Urgent", "Routine", "New", "Renewal", "Yes", "No", "Mail", "Fax"]),
    ),
)


def _cell_size(font: str | None, size: int, text: str, cell_width: float) -> int:
    """The print size of ``text`` in a cell ``cell_width`` wide: ``size``, smaller when the text would not fit
    (never below 8)."""
    return max(8, min(size, int(size * (cell_width - 12) / max(1.0, V.font(font, size).getlength(text)))))


def _find(r: random.Random, text: str, p: float = 0.25) -> str | None:
    """A label asked for itself ("Where does it say "Region"?") with probability ``p``."""
    return f"find|{text}" if r.random() < p else None


def form(r: random.Random) -> Doc:
    """A fill-in form: title, a line of instructions, then 8-16 labelled fields in one or two columns -- the value
    right after its label (often close enough to make one OCR line, "Label: value"), in an aligned column, below
    it, or in a grid of ruled cells -- some left blank; half the forms end with a table whose headers are asked for
    their whole column (:func:`_table`), and half look faxed or photocopied (:func:`.draw._scanned`).  Besides the
    fields' questions, some of its printed text (title, header, a label) is asked for itself: ``find``."""
    w = 850
    body, bold = V.pick_fonts(r)
    typed = V.pick_fonts(r, mono=True)[0] if r.random() < 0.5 else body
    s = r.randint(12, 17)
    items: list[Item] = []
    rules: list[tuple[float, float, float, float]] = []
    m = r.randint(40, 90)
    y: float = r.randint(40, 80)
    if r.random() < 0.5:
        name = V.company(r)
        items.append(Item(name, m, y, int(s * 1.4), bold, role=f"find|{name}"))
        y += s * 2.2
    title = r.choice(
        [
            "REQUEST FORM",
            "Application Form",
            "EXPENSE REPORT",
            "ORDER FORM",
            "Registration",
            "TRANSMITTAL SHEET",
            "Change Request",
        ]
    )
    items.append(Item(title, w / 2, y, int(s * 1.8), bold, "c", f"find|{title}"))
    y += s * 3
    note = r.choice(
        [
            "Please complete all fields and return to the office below.",
            "Print clearly. Incomplete forms will be returned.",
            "For internal use only.",
        ]
    )
    items.append(Item(note, m, y, s - 1, body, role=f"find|{note}" if r.random() < 0.5 else None))
    y += s * 2.5
    fields: list[tuple[str, str | None]] = []
    for labels, draw in r.sample(FORM_FIELDS, r.randint(8, min(14, len(FORM_FIELDS)))):
        for label in r.sample(labels, 2 if r.random() < 0.2 else 1):  # two fields of one kind: only labels differ
            label = label.upper() if r.random() < 0.4 else label
            fields.append((label, draw(r) if r.random() > 0.15 else None))  # some fields left blank
    r.shuffle(fields)
    mode = r.choice(["right", "column", "below", "grid", "inline"])
    if mode == "grid":
        i = 0
        while i < len(fields):
            row = fields[i : i + r.randint(2, 4)]
            i += len(row)
            cw, rh = (w - 2 * m) / len(row), s * r.uniform(3.2, 4.5)
            rules += [(m, y, w - m, y), (m, y + rh, w - m, y + rh)]
            for j, (label, value) in enumerate(row):
                cx = m + j * cw
                rules.append((cx, y, cx, y + rh))
                items.append(Item(label, cx + 4, y + 3, max(9, int(s * 0.75)), body, role=_find(r, label)))
                if value is not None:
                    items.append(
                        Item(value, cx + 8, y + s * 1.5, _cell_size(typed, s, value, cw), typed, role=f"field|{label}")
                    )
            rules.append((w - m, y, w - m, y + rh))
            y += rh
        if r.random() < 0.5:
            y = _table(r, items, rules, m, w, y + s * 2, s, body, bold, typed, {f[0] for f in fields})
        return Doc("form", w, int(max(600, y + r.randint(40, 200))), items, rules)
    two = r.random() < 0.5
    col_w = (w - 2 * m) / (2 if two else 1)
    ys = [y, y]
    for k, (label, value) in enumerate(fields):
        c = k % 2 if two else 0
        x, fy = m + c * col_w, ys[c]
        how = mode if r.random() < 0.8 else r.choice(["right", "column", "below", "inline"])
        text = label + (":" if r.random() < 0.6 else "")
        items.append(Item(text, x, fy, s, bold if r.random() < 0.3 else body, role=_find(r, text)))
        lw = V.font(body, s).getlength(text)
        vx, vy = {
            "right": (x + lw + s * r.uniform(0.6, 2.5), fy),
            "column": (x + max(lw + s, col_w * 0.38), fy),
            "below": (x + s * r.uniform(0, 1.5), fy + s * 1.5),
            "inline": (x + lw + s * r.uniform(0.25, 0.5), fy),
        }[how]  # one OCR line: "Label: value"
        if value is not None and vx + V.font(typed, s).getlength(value) > w - 10:  # no room on the row: below
            vx, vy = x + s * r.uniform(0, 1.5), fy + s * 1.5
        if r.random() < 0.5:  # a ruled line to write on
            rules.append((vx - 4, vy + s * 1.3, x + col_w - s, vy + s * 1.3))
        if value is not None:
            items.append(Item(value, vx, vy, s, typed, role=f"field|{label}"))
        ys[c] = vy + s * r.uniform(2.0, 3.4)
    y = max(ys)
    if r.random() < 0.5:
        y = _table(r, items, rules, m, w, y + s, s, body, bold, typed, {f[0] for f in fields})
    return Doc("form", w, int(max(600, y + r.randint(40, 200))), items, rules)


#: a form table's columns: the headers one may carry and a cell drawer
TABLE_COLUMNS: tuple[tuple[tuple[str, ...], Callable[[random.Random], str]], ...] = (
    (("Qty", "Quantity", "Units", "Count", "Cases", "No. of Stores"), lambda r: str(r.randint(1, 900))),
    (
        ("Amount", "Cost", "Price", "Value", "Total", "Payment"),
        lambda r: V.money(r.uniform(1, 9000), r.choice(["$", ""])),
    ),
    (("Rate", "Average", "Per Unit", "Mean", "Result"), lambda r: f"{r.uniform(0, 200):.2f}"),
    (("Share", "Percent", "% Change", "Target %"), lambda r: f"{r.uniform(0, 100):.1f}%"),
    (("Date", "Week Ending", "Ship Date", "Period", "Start"), V.date),
    (("Code", "Item No.", "Lot No.", "Ref.", "Account"), _number),
    (("Brand", "Product", "Description", "Item"), lambda r: f"{r.choice(V.ADJECTIVES)} {r.choice(V.ITEMS)}"),
    (("Region", "Market", "Area", "Division"), lambda r: r.choice(V.DEPARTMENTS)),
    (("Contact", "Rep", "Buyer", "Name"), V.person),
)


def _table(
    r: random.Random,
    items: list[Item],
    rules: list,
    m: float,
    w: int,
    y: float,
    s: int,
    body: str | None,
    bold: str | None,
    typed: str | None,
    taken: set[str],
) -> float:
    """A table at ``y``: 2-5 column headers over 1-5 rows of values, ruled or not.  A header's question asks for
    every value under it (``field|header`` on each cell: one question, several boxes, as a form's column is asked in
    FUNSD); headers differ from the form's field labels (``taken``).  Returns the next free y."""
    taken = {t.upper() for t in taken}
    cols = []
    for labels, value in r.sample(TABLE_COLUMNS, r.randint(2, 5)):
        free = [lb for lb in labels if lb.upper() not in taken]
        if free:
            cols.append((r.choice(free), value))
    if len(cols) < 2:
        return y
    upper, head_font = r.random() < 0.5, bold if r.random() < 0.6 else body
    cw = (w - 2 * m) / len(cols)
    n_rows, rh = r.randint(1, 5), s * r.uniform(1.5, 2.2)
    ruled = r.random() < 0.4
    for j, (label, value) in enumerate(cols):
        text = label.upper() if upper else label
        items.append(Item(text, m + j * cw + 4, y, s, head_font, role=_find(r, text, 0.15)))
        right = r.random() < 0.5  # numbers often right-aligned under their header
        cells = [value(r) if k == 0 or r.random() > 0.1 else None for k in range(n_rows)]
        for k, cell in enumerate(cells):
            if cell is None:
                continue
            cy = y + s * 1.6 + k * rh
            x = m + (j + 1) * cw - 8 if right else m + j * cw + 4
            items.append(
                Item(cell, x, cy, _cell_size(typed, s, cell, cw), typed, "r" if right else "l", f"field|{text}")
            )
    bottom = y + s * 1.6 + n_rows * rh
    rules.append((m, y + s * 1.35, w - m, y + s * 1.35))  # the header's rule
    if ruled:
        rules += [(m + j * cw, y - s * 0.3, m + j * cw, bottom) for j in range(len(cols) + 1)]
        rules.append((m, bottom, w - m, bottom))
    return bottom + s
