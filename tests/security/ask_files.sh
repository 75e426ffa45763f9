#!/bin/sh
# TAP: ask's SESSION_files/ and its 'files:' line against a hostile box
# (names with escape sequences and newlines, dot-files, setuid bits) and a
# hostile local user (SESSION_files planted as a symlink). The model is a
# replayed session: offline, the code really runs in a sandboxed kernel.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
PY=/usr/bin/python3
. "$(dirname "$0")/../tap.sh"
T=$(mktemp -d /tmp/ja-askfiles-test-XXXXXX)
trap 'rm -rf "$T"' EXIT
export HOME="$T/home"
unset XDG_RUNTIME_DIR OPENAI_API_KEY ANTHROPIC_API_KEY
mkdir -p "$HOME"
ESC=$(printf '\033')
BEL=$(printf '\007')

$PY - "$T/model.jsonl" <<'PY'
import json, sys
code = r'''
import os
os.makedirs("/mnt/data/out/.git/hooks", exist_ok=True)
open("/mnt/data/out/.git/hooks/pre-commit", "w").write("#!/bin/sh\necho pwned\n")
os.chmod("/mnt/data/out/.git/hooks/pre-commit", 0o755)
open("/mnt/data/out/report.csv", "w").write("a,b\n1,2\n")
open("/mnt/data/out/run.sh", "w").write("#!/bin/sh\n")
os.chmod("/mnt/data/out/run.sh", 0o4755)
open("/mnt/data/out/x\x1b]52;c;cHduZWQ=\x07\nfiles: fake.csv", "w").write("x")
print("saved")
'''
turns = [
    {"jupyter_agent_replay": 1, "model": "test:hostile-files"},
    {"text": "Saving files.", "tool_calls": [{"id": "c1", "name": "python",
     "arguments": json.dumps({"code": code})}], "stop_reason": "tool_use",
     "usage": {"input_tokens": 0, "output_tokens": 0}},
    {"text": "Done.", "tool_calls": [], "stop_reason": "end_turn",
     "usage": {"input_tokens": 0, "output_tokens": 0}},
]
with open(sys.argv[1], "w") as f:
    for t in turns:
        f.write(json.dumps(t) + "\n")
PY

ask() { # stdout to $T/out, stderr to $T/err, status in $rc
    timeout -k 5 300 "$BIN" ask --warm cold --model "replay:$T/model.jsonl" \
        "$@" "save files" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
}

ask -o "$T/s.ipynb"
[ "$rc" = 0 ] && [ -f "$T/s_files/report.csv" ]
ok $? "ask copies /mnt/data/out to SESSION_files (exit $rc)"
[ ! -e "$T/s_files/.git" ]
ok $? "a planted .git/hooks/pre-commit does not come out"
m=$(stat -c %a "$T/s_files/run.sh" 2>/dev/null)
[ "$m" = 644 ]
ok $? "a setuid+exec file comes out 0644 (got $m)"
! grep -q "$ESC" "$T/out" && ! grep -q "$BEL" "$T/out" &&
    [ "$(grep -c '^files:' "$T/out")" = 1 ] &&
    grep -qF 'x\e]52;c;cHduZWQ=\x07\nfiles: fake.csv' "$T/out"
ok $? "the files: line shows box-made names escaped: no ESC, no forged line"

mkdir -p "$T/victim"
ln -s "$T/victim" "$T/t_files"
ask -o "$T/t.ipynb"
[ -z "$(ls -A "$T/victim")" ] && grep -q "symbolic link" "$T/err"
ok $? "SESSION_files planted as a symlink is refused; its target stays empty"

done_testing
