#!/usr/bin/env python3
"""Every relative link and image in the project's Markdown (README.md, docs/, the component READMEs) resolves:
the file or folder exists in the tree and, for a link to a heading (`page.md#anchor`), the page has that heading.

Usage: doc_links.py SOURCE_DIR
"""
import pathlib
import re
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose_lines(path):
    """The page's lines outside fenced code blocks."""
    inside = False
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line.strip()):
            inside = not inside
            continue
        if not inside:
            yield n, line


def anchors(path):
    return {slug(m.group(1)) for _, l in prose_lines(path) if (m := re.match(r"#+\s+(.*)", l))}


def check(root):
    def ours(p):  # not a build tree, nor a hidden folder (.git, carried tools)
        rel = p.relative_to(root).parts
        return not any(part == "build" or part.startswith(".") for part in rel)

    pages = [root / "README.md"] + sorted(p for p in root.glob("docs/**/*.md") if ours(p)) + sorted(
        p for p in root.glob("*/**/README.md") if ours(p) and not p.is_relative_to(root / "docs"))
    bad = []
    for page in pages:
        for n, line in prose_lines(page):
            for target in LINK.findall(line):
                if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                    continue  # a URL, or a heading of the same page (not checked)
                file, _, anchor = target.partition("#")
                dest = (page.parent / file).resolve()
                where = f"{page.relative_to(root)}:{n}"
                if not dest.exists():
                    bad.append(f"{where}: {target} does not exist")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    bad.append(f"{where}: {target}: no such heading in {dest.relative_to(root)}")
    return pages, bad


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    pages, bad = check(pathlib.Path(argv[1]).resolve())
    for b in bad:
        print(f"FAIL {b}")
    print(f"{len(pages)} pages, {len(bad)} broken links")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
