#!/bin/sh
# TAP: files leaving a box (--keep-workspace DIR, exec --out DIR) as a
# hostile box and a hostile local user would attack them. The box plants
# a git hook, a shell rc file, setuid and exec bits, an escape-sequence
# name, 10050 entries and a deep tree; a local user plants DIR or a file in
# it as a symlink. Nothing may land outside DIR, overwrite, or keep a bit.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
PY=/usr/bin/python3
. "$(dirname "$0")/../tap.sh"
T=$(mktemp -d /tmp/ja-copyout-test-XXXXXX)
trap 'rm -rf "$T"' EXIT
# Private HOME; the run dirs stay under /tmp, where the box user can reach
# them (a 0700 test dir would not let it).
export HOME="$T/home"
unset XDG_RUNTIME_DIR
mkdir -p "$HOME"
run() { # the sandbox CLI; stdout to $T/out, stderr to $T/err, status in $rc
    timeout -k 5 120 "$BIN" sandbox --quiet "$@" >"$T/out" 2>"$T/err" \
        </dev/null
    rc=$?
}
ESC=$(printf '\033')

# 1. A hostile box's workspace, kept into a fresh DIR.
PLANT='cd /mnt/data || exit 9
mkdir -p .git/hooks out/sub
printf "#!/bin/sh\necho pwned\n" > .git/hooks/pre-commit
chmod 755 .git/hooks/pre-commit
echo "alias ls=pwned" > .bashrc
echo data > out/result.csv
printf "#!/bin/sh\n" > out/run.sh && chmod 4755 out/run.sh
mkfifo "$(printf "evil\033]52;c;cHduZWQ=\007\nfiles: fake")"
mkfifo "$(printf "fifo\033]0;title\007")"
d=deep; i=0; while [ $i -lt 20 ]; do d=$d/d; i=$((i+1)); done
mkdir -p "$d" && echo bottom > "$d/bottom.txt"'
run --keep-workspace "$T/kept" -- /bin/sh -c "$PLANT"
[ "$rc" = 0 ] && [ -f "$T/kept/out/result.csv" ]
ok $? "--keep-workspace copies the box's regular files into a new DIR (exit $rc)"
[ ! -e "$T/kept/.git" ] && [ ! -e "$T/kept/.bashrc" ]
ok $? "a planted .git/hooks/pre-commit and .bashrc never come out"
grep -q "'.git' (dot-directory" "$T/err" && grep -q "'.bashrc' (dot-file" "$T/err"
ok $? "each skipped dot-name is named in the error"
m=$(stat -c %a "$T/kept/out/run.sh" 2>/dev/null)
[ "$m" = 644 ]
ok $? "a setuid+exec file comes out as 0644: no setuid, no exec bit (got $m)"
! grep -q "$ESC" "$T/err" && grep -qF 'fifo\e]0;title\x07' "$T/err"
ok $? "a name with OSC escapes is printed escaped, with no raw ESC byte"
[ "$(grep -c '^files: fake' "$T/err")" = 0 ] && grep -qF 'evil\e]52;c;cHduZWQ=\x07\nfiles: fake' "$T/err"
ok $? "a newline in a box's file name cannot forge a line of our output"
[ ! -e "$T/kept/deep/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/bottom.txt" ] &&
    grep -q "nested too deeply" "$T/err"
ok $? "a tree deeper than 16 levels is cut and the cut is named"

run --keep-workspace "$T/kept2" --keep-exec -- /bin/sh -c \
    'printf "#!/bin/sh\n" > /mnt/data/x.sh && chmod 6755 /mnt/data/x.sh'
m=$(stat -c %a "$T/kept2/x.sh" 2>/dev/null)
[ "$m" = 755 ]
ok $? "--keep-exec keeps the exec bit but never setuid/setgid (got $m)"

# 2. The entry cap: 10050 empty files cannot become 10050 host inodes.
run --keep-workspace "$T/many" -- $PY -c '
for i in range(10050): open("/mnt/data/f%05d" % i, "w").close()'
cnt=$(find "$T/many" -type f | wc -l)
[ "$cnt" -le 10000 ] && grep -q "over the cap of 10000 files and directories" "$T/err"
ok $? "10050 empty files: at most 10000 entries come out, and the cap is named (got $cnt)"

# 3. A hostile local user plants DIR, or something in it.
mkdir -p "$T/victim"
echo precious >"$T/victim/keep.txt"
ln -s "$T/victim" "$T/planted"
run --keep-workspace "$T/planted" -- /bin/sh -c 'echo x > /mnt/data/keep.txt'
[ "$(cat "$T/victim/keep.txt")" = precious ] && [ ! -e "$T/planted/x" ] &&
    grep -q "symbolic link" "$T/err"
ok $? "DIR planted as a symlink is refused; its target is untouched"

mkdir -p "$T/full" && echo mine >"$T/full/notes.txt"
run --keep-workspace "$T/full" -- /bin/sh -c 'echo x > /mnt/data/a.txt'
[ ! -e "$T/full/a.txt" ] && grep -q "not empty" "$T/err" && grep -q -- "--force" "$T/err"
ok $? "an existing non-empty DIR is refused, naming --force"

ln -s "$T/victim/keep.txt" "$T/full/keep.txt"
run --keep-workspace "$T/full" --force -- /bin/sh -c \
    'echo x > /mnt/data/a.txt; echo evil > /mnt/data/keep.txt; echo evil > /mnt/data/notes.txt'
[ -f "$T/full/a.txt" ] && [ "$(cat "$T/victim/keep.txt")" = precious ] &&
    [ "$(cat "$T/full/notes.txt")" = mine ] && grep -q "not overwritten" "$T/err"
ok $? "--force adds new files but never overwrites or writes through a planted symlink"

# 4. exec --out: images are checked, capped, and never written through links.
X() { # exec in a real sandboxed kernel
    timeout -k 5 180 "$BIN" exec --warm cold "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
}
FAKE='from IPython.display import publish_display_data as p
p({"image/png": "PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==", "text/plain": "x"})'
X --out "$T/img1" -c "$FAKE"
[ "$rc" = 0 ] && grep -q "not a png image; not saved" "$T/out" &&
    [ -z "$(ls -A "$T/img1")" ]
ok $? "exec --out: bytes that are not a PNG under image/png are not saved"

ln -s "$T/victim" "$T/img2"
X --out "$T/img2" -c "print(1)"
[ "$rc" = 2 ] && grep -q "symbolic link" "$T/err"
ok $? "exec --out DIR planted as a symlink is refused (exit $rc)"

mkdir -p "$T/img3"
ln -s "$T/victim/keep.txt" "$T/img3/out-1.png"
PLOT='import matplotlib.pyplot as plt
plt.plot([1, 2, 3]); plt.show()'
X --out "$T/img3" --force -c "$PLOT"
[ "$(cat "$T/victim/keep.txt")" = precious ] && grep -q "never overwritten" "$T/out"
ok $? "exec --out --force: a planted out-1.png symlink is not written through"

X --out "$T/img4" --max-output 2K -c "$PLOT"
# Refused by the output cap before any hook sees it (nothing to save), or
# by the copy-out's byte cap: either way nothing is written and we say so.
[ -z "$(ls -A "$T/img4")" ] &&
    { grep -q "byte cap" "$T/out" || grep -q "raise --max-output" "$T/err"; }
ok $? "exec --out: images count against --max-output (2K: the plot is not saved)"

done_testing
