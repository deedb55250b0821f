"""Documents: what a born-digital page saves, and what a 20-page scan costs.

    python scripts/bench_documents.py [--reps 3] [--pages 20] [--json out.json]

1. A born-digital form page (reportlab: 2 columns of ``label: value`` fields, 10 pt) encoded with its text layer
   against the same page rasterised and OCR'd (``text_layer=False``, the OCR cache cleared before every run), after
   one warm-up encode of each: encode time (median of ``--reps``, load + render included), the text group's own
   time, and for a question per field ("What is the <label>?") whether the selection at 273 tokens shows the value
   legibly (hit, :func:`foveate.eval.metrics.query_metrics`) under each.
2. A scanned PDF of ``--pages`` pages (each page an image only, every page's values different): encode time, the
   process's peak RSS (ru_maxrss), and the median time of a select across all pages against a select on one page, each
   for a question it has not seen (``--only scanned`` runs this part alone).
Backs BENCHMARKS.md ("Documents").
"""

from __future__ import annotations

import argparse
import io
import json
import random
import resource
import statistics
import time

import numpy as np

LABELS = [
    "Invoice number", "Customer", "Account", "Order date", "Due date", "Ship to", "Phone", "Fax", "Contact",
    "Reference", "Total due", "Tax", "Subtotal", "Discount", "Terms", "Currency", "Project", "Department",
    "Approved by", "Batch",
]  # fmt: skip


def form_pdf(pages: int, seed: int, scanned: bool = False) -> tuple[bytes, list[list[tuple[str, str]]]]:
    """A PDF of form pages and each page's (label, value) fields; ``scanned``: each page is a picture of the page."""
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    rng = random.Random(seed)
    fields = [[(lab, f"{rng.randint(10000, 99999)}-{rng.choice('ABCDEFGH')}") for lab in LABELS] for _ in range(pages)]
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=(612, 792))
    for fs in fields:
        c.setFont("Helvetica-Bold", 16)
        c.drawString(72, 730, "ACME SUPPLY CO. -- ORDER FORM")
        c.setFont("Helvetica", 10)
        for k, (lab, val) in enumerate(fs):
            x, y = (72 if k % 2 == 0 else 330), 680 - 26 * (k // 2)
            c.drawString(x, y, f"{lab}:")
            c.drawString(x + 110, y, val)
        c.showPage()
    c.save()
    if not scanned:
        return buf.getvalue(), fields
    import pypdfium2 as pdfium

    src = pdfium.PdfDocument(buf.getvalue())
    out = io.BytesIO()
    c = canvas.Canvas(out, pagesize=(612, 792))
    for page in src:
        img = page.render(scale=2.0).to_pil()
        c.drawImage(ImageReader(img), 0, 0, width=612, height=792)
        c.showPage()
    c.save()
    return out.getvalue(), fields


def value_box(tex, value: str) -> tuple[int, int, int, int] | None:
    """Where ``value`` is written on the page (the text-layer or OCR line that reads it)."""
    for ln in tex.extras.get("text", {}).get("lines", []):
        for w in ln.get("words") or [ln]:
            if w["text"] == value:
                return tuple(w["box"])
    return None


def hit(sel, box) -> bool:
    from foveate.eval.metrics import query_metrics

    m = query_metrics(sel.boxes, None, np.array([box]), sel.image_size, token_scales=sel.scales)
    return bool(m.hit)


def born_digital(reps: int) -> dict:
    from foveate.channels.text.ocr import clear_ocr_cache
    from foveate.document.texture import encode_document
    from foveate.selection import select

    pdf, fields = form_pdf(1, seed=1)
    times: dict[str, list[float]] = {"text-layer": [], "ocr": []}
    text_ms: dict[str, list[float]] = {"text-layer": [], "ocr": []}  # the text group's own time
    texs = {}
    for source in ("text-layer", "ocr"):  # warm-up: models load, arenas grow
        clear_ocr_cache()
        encode_document(pdf, text_layer=source == "text-layer", device="cpu")
    for r in range(reps):
        for source in ["text-layer", "ocr"] if r % 2 == 0 else ["ocr", "text-layer"]:
            clear_ocr_cache()
            t0 = time.perf_counter()
            doc = encode_document(pdf, text_layer=source == "text-layer", device="cpu")
            times[source].append((time.perf_counter() - t0) * 1000.0)
            texs[source] = doc.pages[0]
            text_ms[source].append(doc.pages[0].timings_ms.get("text", float("nan")))
    truth = texs["text-layer"]
    found = {"text-layer": 0, "ocr": 0}
    n = 0
    for lab, val in fields[0]:
        box = value_box(truth, val)
        if box is None:
            continue
        n += 1
        for source, tex in texs.items():
            found[source] += hit(select(tex, f"What is the {lab.lower()}?", 273), box)
    ocr_words = {w["text"] for ln in texs["ocr"].extras["text"]["lines"] for w in (ln.get("words") or [ln])}
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "encode_ms": {k: {"median": round(v, 1), "runs": [round(x, 1) for x in times[k]]} for k, v in med.items()},
        "speedup": round(med["ocr"] / med["text-layer"], 2),
        "text_group_ms": {k: round(statistics.median(v), 1) for k, v in text_ms.items()},
        "questions": n,
        "hits_273": found,
        "values_read_by_ocr": sum(val in ocr_words for _, val in fields[0]),
        "values": len(fields[0]),
    }


def scanned(pages: int) -> dict:
    from foveate.document.select import select_document
    from foveate.document.texture import encode_document
    from foveate.selection import select

    pdf, fields = form_pdf(pages, seed=2, scanned=True)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    doc = encode_document(pdf, max_pages=max(pages, 1), device="cpu")
    encode_ms = (time.perf_counter() - t0) * 1000.0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    select_document(doc, "warm up", 273)
    select(doc.pages[0], "warm up", 273)
    doc_ms, one_ms, right = [], [], 0
    for k, (lab, _) in enumerate(fields[0][:8]):
        target = k % pages
        val = fields[target][k][1]
        # two new questions, so each select embeds its question once (MiniLM) and ranks the lines afresh
        q_doc, q_one = f"Which page lists {lab.lower()} {val}?", f"Where is {lab.lower()} {val} written?"
        t = time.perf_counter()
        sel = select_document(doc, q_doc, 273)
        doc_ms.append((time.perf_counter() - t) * 1000.0)
        right += int(np.argmax(sel.relevance)) == target
        t = time.perf_counter()
        select(doc.pages[target], q_one, 273)
        one_ms.append((time.perf_counter() - t) * 1000.0)
    return {
        "pages": pages,
        "text_sources": sorted(set(doc.text_sources)),
        "encode_ms": round(encode_ms, 1),
        "encode_ms_per_page": round(encode_ms / pages, 1),
        "peak_rss_mb": round(rss1 / 1024, 1),
        "rss_before_mb": round(rss0 / 1024, 1),
        "select_document_ms": round(statistics.median(doc_ms), 1),
        "select_one_page_ms": round(statistics.median(one_ms), 1),
        "ratio": round(statistics.median(doc_ms) / statistics.median(one_ms), 2),
        "best_page_right": f"{right}/{len(doc_ms)}",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--pages", type=int, default=20)
    ap.add_argument("--json", default=None)
    ap.add_argument("--only", choices=["born-digital", "scanned"], default=None)
    args = ap.parse_args()
    out = {}
    if args.only != "scanned":
        out["born_digital"] = born_digital(args.reps)
    if args.only != "born-digital":
        out["scanned"] = scanned(args.pages)
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
