"""Training data: annotated sets in the ``queries.jsonl`` format, encoded once (cached in a texture store), split
by image into train / validation / test (:func:`foveate.eval.data.split_of`).

A source is a folder (its name is the set's name) or ``synth:N[:KINDS]`` -- ``N`` synthetic documents
(:mod:`foveate.synth.documents`) generated once into the cache folder.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.config import EncodeConfig
from ..core.errors import DatasetError, FoveateError
from ..core.texture import Texture
from ..eval.data import check_boxes, read_queries, split_of
from ..synth.documents import GENERATED_MARK


@dataclass
class Sample:
    """One question about a page and its ground truth (boxes (N, 4) float64 in source pixels)."""

    text: str | None
    boxes: np.ndarray
    heights: np.ndarray | None
    any_box: bool = False  # the answer is printed several times: any box answers
    points: tuple = ()  # a SAM-style point prompt (training the prompt term), with or without text

    @property
    def query(self) -> dict:
        return {"text": self.text, "points": list(self.points)} if self.points else {"text": self.text}


@dataclass
class Page:
    """An encoded image of one set, its split, and its questions."""

    set: str
    image: str
    split: str
    texture: Texture
    samples: list[Sample] = field(default_factory=list)
    generated: bool = False  # from a set ``foveate synth`` wrote


def _mark(path: Path) -> dict | None:
    """A generated set's mark, ``None`` when it is missing or unreadable (the set is then drawn again)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def resolve_sources(specs: list[str], cache: Path, seed: int) -> list[Path]:
    """Folders for ``specs``: existing folders as they are, ``synth:N`` generated into ``cache`` (once)."""
    from ..core.errors import ConfigError
    from ..synth import make_dataset
    from ..synth.documents import DEFAULT_KINDS, GENERATED_MARK, KINDS, generated_mark, parse_kinds

    out = []
    for spec in specs:
        if spec.startswith("synth:"):
            _, count, *rest = spec.split(":", 2)
            try:
                n = int(count)
            except ValueError:
                raise DatasetError(
                    f"{spec!r}: write synth:N or synth:N:KIND,KIND with N the number of documents, e.g. synth:300"
                ) from None
            if n < 1:
                raise DatasetError(f"{spec!r}: N must be at least 1")
            try:
                kinds = parse_kinds(rest[0]) if rest else DEFAULT_KINDS
            except ConfigError:
                raise DatasetError(f"{spec!r}: kinds must be among {', '.join(KINDS)}") from None
            # the default kinds keep the name they always had: the split hashes the set's name
            folder = cache / (f"synth-s{seed}-n{n}" + ("" if kinds == DEFAULT_KINDS else "-" + "+".join(kinds)))
            mark = _mark(folder / GENERATED_MARK)
            if not (folder / "queries.jsonl").is_file() or mark != generated_mark(n, kinds, seed):
                make_dataset(folder, n, kinds, seed)  # absent, or drawn by another version of the generator
            out.append(folder)
        else:
            folder = Path(spec)
            if not (folder / "queries.jsonl").is_file():
                raise DatasetError(
                    f"{spec}: not a data set (no queries.jsonl); pass folders in the queries.jsonl format or synth:N"
                )
            out.append(folder)
    names = [p.resolve().name for p in out]
    if len(set(names)) != len(names):
        raise DatasetError(f"two sources share a folder name ({names}); set names must differ")
    return out


def load_pages(
    folders: list[Path],
    cache: Path,
    encode: EncodeConfig,
    seed: int,
    progress: Callable[[str, int, int], None] | None = None,
    prompts: float = 0.0,
) -> tuple[list[Page], dict]:
    """Read every set, encode each image once (the texture store in ``cache`` keeps them across runs), and split
    by image.  ``prompts``: the share of questions that also get a copy asked with a point prompt on the answer.

    Returns the pages and counts (images, questions, skipped lines, encode seconds, cached textures)."""
    from ..core.io import load_image
    from ..core.texture import content_hash, encode_array, texture_id
    from ..store import TextureStore

    store = TextureStore(cache / "textures", max_bytes=64 << 30)
    pages: list[Page] = []
    counts: dict[str, float] = defaultdict(float)
    rng = np.random.default_rng(seed)
    for folder in folders:
        name = folder.resolve().name
        generated = (folder / GENERATED_MARK).is_file()
        queries, problems, _ = read_queries(folder)
        counts["skipped_lines"] += sum(p.skipped for p in problems)
        by_image: dict[str, list] = defaultdict(list)
        for q in queries:
            by_image[q.image].append(q)
        for i, (image, qs) in enumerate(sorted(by_image.items())):
            if progress:
                progress(name, i, len(by_image))
            try:
                rgb = load_image(folder / image, max_pixels=encode.max_pixels)
            except (FoveateError, OSError) as exc:
                counts["unreadable_images"] += 1
                counts["skipped_lines"] += len(qs)
                if counts["unreadable_images"] <= 5:
                    print(f"warning: {folder / image}: {exc}")
                continue
            ch = content_hash(rgb)
            tid = texture_id(ch, encode)
            tex = store.get(tid)
            if tex is None:
                t0 = time.perf_counter()
                tex = encode_array(rgb, encode, content_hash=ch)
                counts["encode_s"] += time.perf_counter() - t0
                store.put(tex, source=Path(image).name)
            else:
                counts["cached"] += 1
            page = Page(name, image, split_of(name, image, seed), tex, generated=generated)
            size = (int(rgb.shape[0]), int(rgb.shape[1]))
            for q in qs:
                cq, _ = check_boxes(q, size)
                if cq is None:
                    counts["skipped_lines"] += 1
                    continue
                s = Sample(cq.text, cq.boxes, cq.text_heights, bool(cq.meta.get("repeated_value")))
                page.samples.append(s)
                if prompts and rng.random() < prompts:  # the same question, pointed at
                    b = cq.boxes[int(rng.integers(len(cq.boxes)))]
                    pt = (float(rng.uniform(b[0], b[2])), float(rng.uniform(b[1], b[3])))
                    page.samples.append(
                        Sample(None if rng.random() < 0.5 else cq.text, cq.boxes, cq.text_heights, s.any_box, (pt,))
                    )
            if page.samples:
                pages.append(page)
                counts["images"] += 1
                counts["questions"] += len(page.samples)
    store.close()
    if not pages:
        raise DatasetError("no usable question in the training sources")
    return pages, dict(counts)


def by_split(pages: list[Page], split: str) -> list[Page]:
    return [p for p in pages if p.split == split]
