"""The animation as a looping GIF (Pillow): one frame a step, each shown 1/fps seconds."""

from __future__ import annotations

import io
from collections.abc import Iterable

from PIL import Image


def gif(images: Iterable[Image.Image], fps: float) -> bytes:
    """``images`` (RGB, one a step) as a GIF that loops forever. Each frame gets its own
    palette from the fast octree (the decks use a few dozen flat colours plus antialiased
    edges; a tenth of median cut's time), undithered so flat fills stay flat. Each is
    quantized as it arrives: a frame is kept at one byte a pixel, not three."""
    frames = [im.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
              for im in images]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], loop=0,
                   duration=max(20, round(1000 / fps)), disposal=1, optimize=False)
    return out.getvalue()
