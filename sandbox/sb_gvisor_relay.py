# sb_gvisor_relay.py: pid 1 of a gVisor box (sandbox/sb_gvisor.c).
#
# The kernel's ZeroMQ sockets live inside the sandbox, in its own tmpfs
# (the socket dir): nothing in the box binds a host socket, so `runsc
# checkpoint` can save it. This relay holds the box's only host
# connection, one Unix stream to the launcher (sandbox/sb_gvisor_relay.c),
# and multiplexes over it every connection the host makes to a socket the
# kernel bound. Frames: type (1 byte), channel (4, big-endian), length (4),
# payload.
#   host -> box: C connect channel to socket <name>; D data; X close;
#                S deliver signal <channel> to the program;
#                P park: let go of the host stream (for `runsc checkpoint`)
#   box -> host: H hello; L a socket <name> now listens; D data; X close;
#                E the program ended with wait status <channel>;
#                p parked: every channel is closed, waiting for the host to
#                close the stream
# Parked, the relay holds no host socket (gVisor cannot save one: "encoding
# error at object transport.connectionedEndpoint", which also ends the
# sandbox) and tries to connect again every 20 ms; the host removes its
# socket first, so the tries fail until it listens again after `runsc
# restore`. Then the relay says hello and announces every socket anew.
# argv: HOST_SOCKET SOCK_DIR BOX_FILES_DIR -- PROGRAM ARGS... ("--2>&1"
# for "--": the program's stderr is a dup of its stdout)
import os
import selectors
import signal
import socket
import stat
import struct
import sys
import time

HDR = struct.Struct(">cII")
CHUNK = 65536


def copy_box_files(src, dst):
    for name in sorted(os.listdir(src)):
        with open(os.path.join(src, name), "rb") as f:
            data = f.read()
        fd = os.open(os.path.join(dst, name),
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                     0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def main():
    host_path, sock_dir, box_dir = sys.argv[1:4]
    merge_stdio = sys.argv[4] == "--2>&1"
    argv = sys.argv[5:]
    copy_box_files(box_dir, sock_dir)
    host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    host.connect(host_path)
    parked = False
    rfd, wfd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda s, f: None)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(s, signal.SIG_IGN)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rfd)
            os.close(wfd)
            host.close()
            for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                      signal.SIGQUIT, signal.SIGCHLD, signal.SIGPIPE):
                signal.signal(s, signal.SIG_DFL)
            os.setsid()
            if merge_stdio:
                os.dup2(1, 2)
            os.execve(argv[0], argv, os.environ)
        except OSError as e:
            os.write(2, ("sandbox: exec %s: %s\n" % (argv[0], e.strerror))
                     .encode())
        os._exit(127)

    def send(kind, chan, payload=b""):
        host.sendall(HDR.pack(kind, chan, len(payload)) + payload)

    send(b"H", 0)
    sel = selectors.DefaultSelector()
    sel.register(host, selectors.EVENT_READ, "host")
    sel.register(rfd, selectors.EVENT_READ, "sig")
    chans = {}  # channel -> socket
    parking = False
    seen = set()
    inbuf = b""
    start = time.monotonic()
    next_scan = 0.0
    while True:
        if parked:  # the host closed its end after our "p"
            sel.unregister(host)
            host.close()
            while True:
                time.sleep(0.02)
                host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    host.connect(host_path)
                    break
                except OSError:
                    host.close()
            parked = False
            inbuf = b""
            seen = set()
            next_scan = 0.0
            sel.register(host, selectors.EVENT_READ, "host")
            send(b"H", 0)
        now = time.monotonic()
        if now >= next_scan:
            try:
                for e in os.scandir(sock_dir):
                    if e.name not in seen and stat.S_ISSOCK(
                            e.stat(follow_symlinks=False).st_mode):
                        seen.add(e.name)
                        send(b"L", 0, e.name.encode())
            except OSError:
                pass
            next_scan = now + (0.02 if now - start < 30 else 0.5)
        for key, _ in sel.select(max(0.0, next_scan - time.monotonic())):
            if key.data == "sig":
                try:
                    os.read(rfd, 512)
                except BlockingIOError:
                    pass
                while True:
                    try:
                        got, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        got = 0
                    if got == 0:
                        break
                    if got == pid:
                        send(b"E", status & 0xffffffff)
                        host.close()
                        os._exit(os.waitstatus_to_exitcode(status) & 0xff
                                 if os.WIFEXITED(status)
                                 else 128 + os.WTERMSIG(status))
            elif key.data == "host":
                data = host.recv(CHUNK)
                if not data and parking:
                    parked, parking = True, False
                    break
                if not data:  # the launcher is gone
                    os.kill(pid, signal.SIGKILL)
                    os._exit(137)
                inbuf += data
                while len(inbuf) >= HDR.size:
                    kind, chan, n = HDR.unpack_from(inbuf)
                    if len(inbuf) < HDR.size + n:
                        break
                    body = inbuf[HDR.size:HDR.size + n]
                    inbuf = inbuf[HDR.size + n:]
                    if kind == b"C":
                        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        try:
                            c.connect(os.path.join(sock_dir, body.decode()))
                        except (OSError, UnicodeDecodeError):
                            c.close()
                            send(b"X", chan)
                            continue
                        chans[chan] = c
                        sel.register(c, selectors.EVENT_READ, chan)
                    elif kind == b"D" and chan in chans:
                        try:
                            chans[chan].sendall(body)
                        except OSError:
                            sel.unregister(chans[chan])
                            chans.pop(chan).close()
                            send(b"X", chan)
                    elif kind == b"X" and chan in chans:
                        sel.unregister(chans[chan])
                        chans.pop(chan).close()
                    elif kind == b"P":
                        for c in chans.values():
                            sel.unregister(c)
                            c.close()
                        chans = {}
                        parking = True
                        send(b"p", 0)
                    elif kind == b"S":
                        try:
                            os.kill(pid, chan)
                        except OSError:
                            pass
            else:
                chan = key.data
                try:
                    data = key.fileobj.recv(CHUNK)
                except OSError:
                    data = b""
                if data:
                    send(b"D", chan, data)
                else:
                    sel.unregister(key.fileobj)
                    chans.pop(chan).close()
                    send(b"X", chan)


main()
