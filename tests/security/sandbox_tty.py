"""`jupyter-agent sandbox` run from a terminal (issue 24, item 11).

The command in the box must not be able to change the invoking terminal:
its line discipline (TIOCSETD to N_NULL loses all further I/O; n_hdlc and
n_gsm are kernel attack surface), its modes, its console. Each check runs
the real binary on a pty made here, the way a terminal emulator would
(its own session, the pty as controlling terminal), and looks at that
pty afterwards. Each check is one TAP line.
"""
import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import tempfile
import termios
import time

BIN = os.environ.get("JUPYTER_AGENT_BIN", "build/jupyter-agent")
PY = "/usr/bin/python3"
N = 0
FAILED = 0


def ok(cond, what, diag=None):
    global N, FAILED
    N += 1
    print(("ok" if cond else "not ok") + f" {N} - {what}")
    if not cond:
        FAILED += 1
        if diag is not None:
            for line in str(diag)[:3000].splitlines():
                print(f"# {line}")
    sys.stdout.flush()


def ldisc(fd):
    return struct.unpack("i", fcntl.ioctl(fd, termios.TIOCGETD, b"\0" * 4))[0]


def on_pty(code, send=None, winsize=None, stdout=None, timeout=30):
    """Run `sandbox -- python3 -c CODE` on a fresh pty; type `send` once
    the command printed READY. Returns a dict of what happened."""
    master, slave = pty.openpty()
    if winsize:
        fcntl.ioctl(slave, termios.TIOCSWINSZ,
                    struct.pack("HHHH", winsize[0], winsize[1], 0, 0))
    before = termios.tcgetattr(slave)
    size = fcntl.ioctl(slave, termios.TIOCGWINSZ, b"\0" * 8)

    def child():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen([BIN, "sandbox", "--quiet", "--", PY, "-c", code],
                         stdin=slave, stdout=stdout or slave, stderr=slave,
                         preexec_fn=child)
    out = b""
    start = time.time()
    sent = send is None
    while time.time() - start < timeout:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                data = os.read(master, 65536)
            except OSError:
                data = b""
            out += data
            if not sent and b"READY" in out:
                os.write(master, send)
                sent = True
            if data:
                continue
        if p.poll() is not None:
            break
    if p.poll() is None:
        p.kill()
    p.wait()
    res = {"rc": p.returncode, "out": out.decode(errors="replace")}
    try:
        res["same_modes"] = (termios.tcgetattr(slave) == before and
                             fcntl.ioctl(slave, termios.TIOCGWINSZ,
                                         b"\0" * 8) == size)
        res["ldisc"] = ldisc(slave)
    except termios.error as e:
        res["same_modes"] = False
        res["ldisc"] = f"unreadable: {e}"
    os.close(master)
    os.close(slave)
    return res


TRY = """
import errno, fcntl, os, struct, termios
def t(name, fd, req, arg):
    try:
        fcntl.ioctl(fd, req, arg)
        print(name, 'ALLOWED', flush=True)
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno), flush=True)
"""

# 1. The attack of the issue: N_NULL on the terminal.
r = on_pty(TRY + """
t('setd0', 0, termios.TIOCSETD, struct.pack('i', 27))
t('setd1', 1, termios.TIOCSETD, struct.pack('i', 27))
print('still talking', flush=True)
""")
ok("setd0 EPERM" in r["out"] and "setd1 EPERM" in r["out"],
   "TIOCSETD (N_NULL) on the command's stdin and stdout is refused", r)
ok(r["ldisc"] == 0 and "still talking" in r["out"],
   "the invoking terminal keeps its line discipline (N_TTY) and its I/O",
   r)

# 2. What the filter lets through (modes, flow control) reaches only our
# pty: the invoking terminal is exactly as it was.
r = on_pty(TRY + """
a = termios.tcgetattr(0)
a[3] &= ~(termios.ECHO | termios.ICANON | termios.ISIG)
a[1] &= ~termios.OPOST
termios.tcsetattr(0, termios.TCSANOW, a)
fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack('HHHH', 1, 1, 0, 0))
print('changed', flush=True)
""")
ok(r["rc"] == 0 and "changed" in r["out"] and r["same_modes"],
   "echo off, raw mode and a new window size set by the command leave the "
   "invoking terminal's modes and size as they were", r)

# 3. The box's own ptys (/dev/ptmx), and the rest of the terminal ioctls.
r = on_pty(TRY + """
m = os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY)
t('setd-own', m, termios.TIOCSETD, struct.pack('i', 27))
t('cons', 0, termios.TIOCCONS, 0)
t('sctty1', 0, termios.TIOCSCTTY, 1)
t('sti', 0, termios.TIOCSTI, b'x')
t('linux', 0, termios.TIOCLINUX if hasattr(termios, 'TIOCLINUX')
  else 0x541C, b'\\x0c')
""")
for name, what in (("setd-own", "TIOCSETD on a pty the box opened itself "
                    "through /dev/ptmx"),
                   ("cons", "TIOCCONS (console redirection)"),
                   ("sctty1", "TIOCSCTTY with argument 1 (stealing a "
                    "controlling terminal)"),
                   ("sti", "TIOCSTI"), ("linux", "TIOCLINUX")):
    ok(f"{name} EPERM" in r["out"], f"{what} is refused (EPERM)", r)

# 4. Still a usable terminal: forkpty (pexpect, IPython's !cmd), input,
# ^C, the window size.
r = on_pty("""
import os, pty
pid, fd = pty.fork()
if pid == 0:
    print('child on its own pty', flush=True)
    os._exit(0)
data = b''
while True:
    try:
        d = os.read(fd, 1024)
    except OSError:
        break
    if not d:
        break
    data += d
os.waitpid(pid, 0)
print('forkpty:', data.decode().strip(), flush=True)
""")
ok("forkpty: child on its own pty" in r["out"],
   "a pty of the box's own still works (forkpty: TIOCSCTTY with 0)", r)
r = on_pty("print('READY', flush=True); print('got', repr(input()))",
           send=b"hello\r")
ok("got 'hello'" in r["out"] and r["rc"] == 0 and r["same_modes"],
   "what the user types reaches the command", r)
r = on_pty("import time\nprint('READY', flush=True)\ntime.sleep(20)",
           send=b"\x03")
ok(r["rc"] == 130 and r["same_modes"],
   "^C typed interrupts the command (exit 130)", r)
r = on_pty("import os; print('size', tuple(os.get_terminal_size()))",
           winsize=(33, 101))
ok("size (101, 33)" in r["out"],
   "the command sees the terminal's window size", r)

# 5. Output that is not a terminal is not put through the pty.
with tempfile.TemporaryFile() as f:
    r = on_pty("import os, sys; print('tty', os.isatty(0), os.isatty(1))",
               stdout=f)
    f.seek(0)
    text = f.read().decode()
ok(text == "tty True False\n",
   "a redirected stdout stays a plain file (no pty, no \\r)", repr(text))

print(f"1..{N}")
print(f"{N - FAILED} passed, {FAILED} failed")
sys.exit(1 if FAILED else 0)
