"""A page's encode against the OCR engine alone, in one process, page by page.

    python scripts/bench_ocr.py ../shared/data/funsd_forms [-n 20] [--split test] [--recogniser float|int8]
        [--json out/bench-ocr.json]

For each page (the first of the chosen ones is a warm-up, not counted): a plain full-page pass of the bundled OCR
engine (``rapidocr.RapidOCR()`` with its own defaults, every model on onnxruntime) and foveate's ``default``-preset
encode of the same pixels (its OCR cache cleared first), one after the other, in alternating order so that a slow
moment of the machine falls on both.  Reports the median of each and the ratio of the medians, and how many of the
set's answers (``answer_text`` of queries.jsonl, normalised: lower case, letters and digits only) are present in the
text each one read -- the plain pass's lines, the texture's stored lines.

Backs BENCHMARKS.md ("Encode against the OCR engine alone").
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections import defaultdict
from pathlib import Path


def norm(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", text.lower())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("-n", type=int, default=20, help="pages timed (after one warm-up page)")
    ap.add_argument("--split", default="test", help="train / val / test / all (foveate.eval.data.split_of)")
    ap.add_argument(
        "--recogniser", default="float", help="the encode's recogniser: float or int8 (foveate prepare --int8)"
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    import cv2
    from rapidocr import RapidOCR

    import foveate
    from foveate.channels.text.ocr import clear_ocr_cache
    from foveate.core.device import ocr_backend, tune_allocator
    from foveate.core.io import load_image
    from foveate.eval.data import read_queries, split_of

    tune_allocator()
    queries, _, _ = read_queries(args.data_dir)
    answers: dict[str, list[str]] = defaultdict(list)
    for q in queries:
        if args.split == "all" or split_of(args.data_dir.name, q.image) == args.split:
            answers[q.image] += [norm(a) for a, _ in q.answers if norm(a)]
    pages = sorted(answers)[: args.n + 1]
    plain = RapidOCR(params={"Global.log_level": "error"})
    rows = []
    for i, name in enumerate(pages):
        rgb = load_image(args.data_dir / name)
        bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)

        def run_plain(bgr=bgr) -> tuple[float, str]:
            t0 = time.perf_counter()
            res = plain(bgr)
            return time.perf_counter() - t0, " ".join(res.txts or ())

        def run_encode(rgb=rgb) -> tuple[float, str, dict]:
            clear_ocr_cache()
            t0 = time.perf_counter()
            tex = foveate.encode(rgb, preset="default", options={"recogniser": args.recogniser})
            dt = time.perf_counter() - t0
            text = tex.extras["text"]
            return dt, " ".join(ln["text"] for ln in text["lines"]), text.get("timings_ms", {})

        if i % 2:
            (t_enc, enc_text, parts), (t_plain, plain_text) = run_encode(), run_plain()
        else:
            (t_plain, plain_text), (t_enc, enc_text, parts) = run_plain(), run_encode()
        if i == 0:
            continue
        p_norm, e_norm = norm(plain_text), norm(enc_text)
        rows.append(
            {
                "image": name,
                "plain_s": t_plain,
                "encode_s": t_enc,
                "encode_ocr_ms": parts.get("ocr"),
                "answers": len(answers[name]),
                "in_plain": sum(a in p_norm for a in answers[name]),
                "in_encode": sum(a in e_norm for a in answers[name]),
            }
        )
        r = rows[-1]
        print(
            f"{name}: plain {t_plain:.3f} s, encode {t_enc:.3f} s ({t_enc / t_plain:.2f}x); answers "
            f"{r['in_encode']}/{r['in_plain']}/{r['answers']} (encode/plain/all)",
            flush=True,
        )
    med_plain = statistics.median(r["plain_s"] for r in rows)
    med_enc = statistics.median(r["encode_s"] for r in rows)
    in_plain, in_enc = sum(r["in_plain"] for r in rows), sum(r["in_encode"] for r in rows)
    summary = {
        "pages": len(rows),
        "split": args.split,
        "ocr_backend": ocr_backend(),
        "recogniser": args.recogniser,
        "plain_median_s": round(med_plain, 4),
        "encode_median_s": round(med_enc, 4),
        "ratio_of_medians": round(med_enc / med_plain, 3),
        "answers": sum(r["answers"] for r in rows),
        "answers_in_plain": in_plain,
        "answers_in_encode": in_enc,
        "answers_ratio": round(in_enc / max(1, in_plain), 4),
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": summary, "pages": rows}, indent=1))


if __name__ == "__main__":
    main()
