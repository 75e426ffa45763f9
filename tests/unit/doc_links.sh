#!/bin/sh
# Every relative link and image in README.md, CONTRIBUTING.md, docs/*.md
# and bench/README.md resolves to a file (and an #anchor to a heading of
# it), and README.md links every docs/*.md page, so nothing moved out of
# the README is unreachable (tests/tools/check_doc_links.py).
set -u
exec "${PYTHON:-/usr/bin/python3}" tests/tools/check_doc_links.py .
