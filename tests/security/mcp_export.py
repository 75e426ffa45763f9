"""export_notebook writes only inside the --notebook directory, never
through a symlink, and never over a file this session did not write.

The client choosing the path is a model open to prompt injection, so each
case is a path such a client could send. stdio, no kernel needed.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_tap import BIN, INIT, done, ok, private_env  # noqa: E402

T, ENV = private_env("ja-mcp-export-")
NB = os.path.join(T, "nb")
ELSE = os.path.join(T, "elsewhere")
os.makedirs(os.path.join(NB, "sub"))
os.makedirs(ELSE)
os.symlink(ELSE, os.path.join(NB, "shared"))
with open(os.path.join(ELSE, "analysis.ipynb"), "w") as f:
    f.write("precious\n")
with open(os.path.join(ELSE, "target"), "w") as f:
    f.write("precious\n")
os.symlink(os.path.join(ELSE, "target"), os.path.join(NB, "link.ipynb"))
with open(os.path.join(NB, "theirs.ipynb"), "w") as f:
    f.write("precious\n")
def export(i, path):
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "export_notebook",
                       "arguments": {"path": path}}}


def run(paths, between=None):
    p = subprocess.Popen([BIN, "mcp", "--notebook",
                          os.path.join(NB, "session.ipynb")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=ENV)
    res = {}

    def send(m):
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()
        return json.loads(p.stdout.readline())

    send(INIT)
    for i, path in enumerate(paths, 1):
        if between and i in between:
            between[i]()
        r = send(export(i, path))
        res[path if path not in res else path + "#%d" % i] = r["result"]
    p.stdin.close()
    p.wait(timeout=60)
    return res


def text(r):
    return " ".join(c.get("text", "") for c in r["content"])


def unchanged(path):
    with open(path) as f:
        return f.read() == "precious\n"


def swap_mine():
    os.unlink(os.path.join(NB, "mine.ipynb"))
    with open(os.path.join(NB, "mine.ipynb"), "w") as f:
        f.write("precious\n")


r = run(["shared/analysis.ipynb", os.path.join(NB, "shared/new.ipynb"),
         "link.ipynb", "theirs.ipynb", "mine.ipynb", "mine.ipynb",
         "sub/deep.ipynb", "mine.ipynb"], between={8: swap_mine})
x = r["shared/analysis.ipynb"]
ok(x["isError"] and unchanged(os.path.join(ELSE, "analysis.ipynb")),
   "export_notebook through a symlinked subdirectory is refused and the "
   "file it points at is untouched", x)
ok("symbolic link" in text(x), "the refusal says a directory on the way is "
   "a symbolic link", text(x))
x = r[os.path.join(NB, "shared/new.ipynb")]
ok(x["isError"] and not os.path.exists(os.path.join(ELSE, "new.ipynb")),
   "an absolute path through the symlinked subdirectory is refused too", x)
x = r["link.ipynb"]
ok(x["isError"] and unchanged(os.path.join(ELSE, "target")) and
   os.path.islink(os.path.join(NB, "link.ipynb")),
   "a symlink named like a notebook is neither followed nor replaced", x)
x = r["theirs.ipynb"]
ok(x["isError"] and unchanged(os.path.join(NB, "theirs.ipynb")),
   "a notebook this session did not write is not replaced", x)
ok("did not write" in text(x), "the refusal says the session did not write "
   "it and to choose a new name", text(x))
x, y = r["mine.ipynb"], r["mine.ipynb#6"]
with open(os.path.join(NB, "sub", "deep.ipynb")) as f:
    deep = json.load(f)
ok(not x["isError"] and not y["isError"] and
   r["sub/deep.ipynb"]["isError"] is False and deep["nbformat"] == 4,
   "a new notebook is written, in a real subdirectory too, and the session "
   "may replace its own", (x, y, r["sub/deep.ipynb"]))
x = r["mine.ipynb#8"]
ok(x["isError"] and unchanged(os.path.join(NB, "mine.ipynb")),
   "once someone else put a file in its place, the session's own name is "
   "not replaced either", x)
done(T)
