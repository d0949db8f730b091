"""Plots saved as small PNGs: a plot's few colours fit a 64-colour palette, a quarter of the bytes of full colour,
so a page can carry its plot without growing the repository."""
import io


def save_png(fig, path, dpi=110):
    from PIL import Image  # matplotlib's own dependency
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    buf.seek(0)
    Image.open(buf).convert("RGB").quantize(colors=64).save(path, optimize=True)
