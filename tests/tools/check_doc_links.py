"""Check the documentation's links; print TAP.

    python3 tests/tools/check_doc_links.py [REPO_ROOT]

Every relative link and image in README.md, CONTRIBUTING.md, docs/*.md and
bench/README.md must name a file or directory that exists, and a link with
an #anchor must name a heading of the target file (GitHub's anchor rules:
lower case, punctuation dropped, spaces to hyphens, -1/-2 for repeats).
Links inside code (fenced blocks, indented blocks, `spans`) are not links.
README.md must link every docs/*.md page, so a section moved out of it
stays reachable. Then each check is run against a broken copy and must
fail there: a check that cannot fail is reported as a failure.
"""
import glob
import os
import re
import sys

LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def strip_code(text, spans=True):
    """The text with code blocks (and code spans) blanked out (lines kept)."""
    out = []
    fence = None
    prev_blank = True
    for line in text.split("\n"):
        stripped = line.lstrip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            out.append("")
            continue
        if stripped.startswith("```") or stripped.startswith("~~~"):
            fence = stripped[:3]
            out.append("")
            continue
        # An indented block: four spaces after a blank line or inside one.
        if line.startswith("    ") and (prev_blank or (out and out[-1] == "\0")):
            out.append("\0")
            continue
        prev_blank = line.strip() == ""
        out.append(re.sub(r"`+[^`]*`+", "", line) if spans else line)
    return "\n".join("" if l == "\0" else l for l in out)


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)  # a link's text
    s = re.sub(r"[^\w\- ]", "", s)  # GitHub drops punctuation, keeps _ and -
    return s.replace(" ", "-")


def anchors(path):
    seen = {}
    result = set()
    text = strip_code(open(path, encoding="utf-8").read(), spans=False)
    for line in text.split("\n"):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else "%s-%d" % (base, n))
    return result


def links(path):
    text = strip_code(open(path, encoding="utf-8").read())
    for lineno, line in enumerate(text.split("\n"), 1):
        for m in LINK.finditer(line):
            yield lineno, m.group(2)


def check_file(path, root):
    """Problems with the links of one file, as strings."""
    problems = []
    for lineno, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
            continue
        file_part, _, anchor = target.partition("#")
        if file_part:
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
        else:
            dest = path
        where = "%s:%d" % (os.path.relpath(path, root), lineno)
        if not os.path.exists(dest):
            problems.append("%s: %s: no such file" % (where, target))
            continue
        if anchor:
            if not dest.endswith(".md"):
                problems.append("%s: %s: anchor into a non-markdown file" % (where, target))
            elif anchor not in anchors(dest):
                problems.append("%s: %s: no heading with that anchor" % (where, target))
    return problems


def doc_files(root):
    files = [os.path.join(root, "README.md"), os.path.join(root, "CONTRIBUTING.md"),
             os.path.join(root, "bench", "README.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    return [f for f in files if os.path.exists(f)]


def unlinked_pages(root):
    readme = os.path.join(root, "README.md")
    linked = set()
    for _, target in links(readme):
        file_part = target.partition("#")[0]
        if file_part:
            linked.add(os.path.normpath(os.path.join(root, file_part)))
    return [os.path.relpath(p, root) for p in sorted(glob.glob(os.path.join(root, "docs", "*.md")))
            if os.path.normpath(p) not in linked]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    tests = []
    for path in doc_files(root):
        tests.append(("links in %s resolve" % os.path.relpath(path, root), check_file(path, root)))
    tests.append(("README.md links every docs/*.md page", unlinked_pages(root)))

    # Each check must be able to fail.
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "docs"))
        with open(os.path.join(tmp, "docs", "a.md"), "w") as f:
            f.write("# A page\n\n## Files out\n\n## Files out\n\n    [code](nowhere.md)\n\n"
                    "`[span](nowhere.md)`\n")
        with open(os.path.join(tmp, "README.md"), "w") as f:
            f.write("# R\n\n[ok](docs/a.md#files-out) [ok2](docs/a.md#files-out-1) [self](#r)\n"
                    "[gone](docs/gone.md) [bad anchor](docs/a.md#files-in)\n"
                    "![img](docs/nothing.png)\n")
        problems = check_file(os.path.join(tmp, "README.md"), tmp)
        ok_a = check_file(os.path.join(tmp, "docs", "a.md"), tmp)
        want = ["docs/gone.md: no such file", "docs/a.md#files-in: no heading",
                "docs/nothing.png: no such file"]
        missed = [w for w in want if not any(w in p for p in problems)]
        extra = [p for p in problems if not any(w in p for w in want)]
        tests.append(("the checker notices a missing file, a missing anchor, a missing image",
                      ["not noticed: " + m for m in missed] + ["wrongly flagged: " + e for e in extra]))
        tests.append(("the checker ignores links in code", ok_a))
        with open(os.path.join(tmp, "docs", "b.md"), "w") as f:
            f.write("# B\n")
        tests.append(("the checker notices a page README.md does not link",
                      [] if unlinked_pages(tmp) == ["docs/b.md"] else ["got %r" % unlinked_pages(tmp)]))

    print("1..%d" % len(tests))
    failed = 0
    for i, (name, problems) in enumerate(tests, 1):
        if problems:
            failed += 1
            print("not ok %d - %s" % (i, name))
            for p in problems:
                print("#   " + p)
        else:
            print("ok %d - %s" % (i, name))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
