"""Regenerate the bundled example images in src/foveate/examples/.

    python scripts/make_examples.py

page.png  -- rendered by foveate.synth.invoice_page() (this project's own work, Apache-2.0).
photo.jpg -- scikit-image's ``data.astronaut()`` (NASA, public domain), stored as JPEG.
"""

from pathlib import Path

import cv2
import skimage.data

from foveate.synth import invoice_page

out = Path(__file__).resolve().parent.parent / "src" / "foveate" / "examples"
out.mkdir(parents=True, exist_ok=True)
page = invoice_page()
cv2.imwrite(str(out / "page.png"), cv2.cvtColor(page.image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 9])
cv2.imwrite(
    str(out / "photo.jpg"), cv2.cvtColor(skimage.data.astronaut(), cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 90]
)
print("wrote", *sorted(p.name for p in out.iterdir()))
