"""The animation as an H.264 MP4 that PowerPoint, Keynote and Google Slides play: yuv420p,
even dimensions, the moov atom first (``+faststart``). The encoder is the ffmpeg binary that the
``imageio-ffmpeg`` wheel ships, so nothing needs installing beyond pip."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterable

import imageio_ffmpeg
from PIL import Image


def even_size(width: int, height: int) -> tuple[int, int]:
    return width + width % 2, height + height % 2


def mp4(images: Iterable[Image.Image], fps: float) -> bytes:
    """``images`` (RGB, one a step, same size) as one video frame each at ``fps``, each sent
    to ffmpeg as it arrives."""
    images = iter(images)
    first = next(images)
    width, height = even_size(*first.size)
    fd, path = tempfile.mkstemp(suffix=".mp4")
    os.close(fd)
    try:
        writer = imageio_ffmpeg.write_frames(
            path, (width, height), fps=fps, codec="libx264", pix_fmt_in="rgb24",
            pix_fmt_out="yuv420p", macro_block_size=1, quality=None, ffmpeg_log_level="error",
            output_params=["-preset", "veryfast", "-crf", "20", "-tune", "stillimage",
                           "-movflags", "+faststart", "-profile:v", "high", "-level", "4.1"])
        writer.send(None)
        for im in itertools.chain([first], images):
            if im.size != (width, height):
                canvas = Image.new("RGB", (width, height), "white")
                canvas.paste(im, (0, 0))
                im = canvas
            writer.send(im.tobytes())
        writer.close()
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)
