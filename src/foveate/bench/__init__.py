"""Benchmarks (medians and spread, the machine and the commit in every JSON; the figures in BENCHMARKS.md):
``encode`` (``foveate bench``: encode per channel group, select, memory), ``store`` (``foveate store bench``: the
store's database against LMDB and files), ``service`` (``foveate bench-serve``: a real server under load),
``video`` (``foveate bench-video``: incremental updates against encoding every frame), ``vlm`` (``foveate
bench-prompt``: a VLM request's plan and body, and the pictures' encoding), and ``common`` (the example images,
``machine_info``, JSON output).
"""
