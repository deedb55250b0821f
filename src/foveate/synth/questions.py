"""The questions a generated document is asked (:data:`QUESTIONS`: several phrasings per role) and their answers'
boxes, text heights and texts (:func:`questions`)."""

from __future__ import annotations

import random

from .layout import Doc, Item

#: role -> question phrasings ({item}: the item's name)
QUESTIONS: dict[str, tuple[str, ...]] = {
    "issuer": (
        "What is the name of the store?",
        "Which shop is this receipt from?",
        "Who issued it?",
        "What company issued this?",
        "What is the merchant's name?",
        "Which business is this from?",
        "Who is this document from?",
        "What is the vendor's name?",
    ),
    "issuer_addr": (
        "What is the store's address?",
        "Where is the store located?",
        "What is the address of the company that issued it?",
        "Where is the sender based?",
        "What address is printed at the top?",
    ),
    "phone": (
        "What is the phone number?",
        "What phone number is printed on it?",
        "What number can I call?",
        "What is the contact telephone number?",
    ),
    "date": (
        "What is the date?",
        "When was it issued?",
        "What is the date of this purchase?",
        "On what date was this written?",
        "When was this bought?",
        "When is it dated?",
    ),
    "time": ("What time was this printed?", "At what time was the purchase made?", "What time is shown?"),
    "total": (
        "What is the total?",
        "How much was paid?",
        "How much was paid in total?",
        "What is the amount due?",
        "How much do I owe?",
        "What is the total amount?",
        "What does it come to in the end?",
    ),
    "subtotal": ("What is the subtotal?", "How much before tax?", "What does the subtotal come to?"),
    "tax": ("How much tax was charged?", "What is the tax amount?", "How much VAT is there?"),
    "number": ("What is the invoice number?", "What is the reference number?", "What is the document number?"),
    "due": ("When is payment due?", "What is the due date?", "By when must it be paid?"),
    "recipient": (
        "Who is it addressed to?",
        "Who is the customer?",
        "Who is the bill for?",
        "To whom is it written?",
        "Who is the recipient?",
    ),
    "signer": (
        "Who signed it?",
        "Who wrote this letter?",
        "Whose signature is at the bottom?",
        "Who is the letter from?",
    ),
    "signer_title": ("What is the position of the person who signed?", "What is the signer's job title?"),
    "email": ("What is the email address?", "What email can I write to?"),
    "cashier": ("Who was the cashier?", "Who served the customer?"),
    "change": ("How much change was given?", "What was the change?"),
    "subject": ("What is the letter about?", "What is the subject?"),
    "item_price": (
        "How much did the {item} cost?",
        "What was the price of the {item}?",
        "What is the amount for {item}?",
    ),
    "item_qty": ("How many {item} were bought?", "What quantity of {item} was ordered?"),
    "find": (
        'Where does it say "{item}"?',
        'Find the text "{item}".',
        'Which line reads "{item}"?',
        'Point to "{item}".',
        'Where is "{item}" written?',
        'Locate the words "{item}".',
    ),
    "field": (
        "What is the {item}?",
        'What was entered for "{item}"?',
        'What is the value of "{item}"?',
        "What does the form give as the {item}?",
        "What is filled in for {item}?",
        "What is the {item} on this form?",
    ),
}


def questions(doc: Doc, r: random.Random, max_questions: int = 10) -> list[dict]:
    """Questions about the drawn document, one per answerable role (item questions for some items), each with the
    answer's boxes, text heights and texts.  Roles spread over several lines (the issuer's address) become one box."""
    by_role: dict[str, list[Item]] = {}
    for it in doc.items:
        if it.role:
            by_role.setdefault(it.role, []).append(it)
    out = []
    for role, its in by_role.items():
        base, _, item = role.partition("|")
        if base not in QUESTIONS or (base.startswith("item_") and r.random() < 0.6):
            continue
        text = r.choice(QUESTIONS[base]).format(item=item)
        if base == "issuer_addr":
            box = [
                min(i.box[0] for i in its),
                min(i.box[1] for i in its),
                max(i.box[2] for i in its),
                max(i.box[3] for i in its),
            ]
            boxes, heights, answers = [box], [its[0].box[3] - its[0].box[1]], [" ".join(i.text for i in its)]
        else:
            boxes, heights, answers = [i.box for i in its], [i.box[3] - i.box[1] for i in its], [i.text for i in its]
        q: dict[str, object] = {
            "query": text,
            "boxes": boxes,
            "text_heights": heights,
            "answer_text": answers,
            "type": "find" if base == "find" else "key_value",
            "key": base,
        }
        if base == "field":
            q["key_text"] = item  # the label the question quotes, as printed (FUNSD's field of the same name)
        if len(its) > 1 and base == "total":
            q["repeated_value"] = True
        out.append(q)
    r.shuffle(out)
    return out[:max_questions]
