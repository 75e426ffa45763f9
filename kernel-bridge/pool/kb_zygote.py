# The forking kernel factory ("zygote"): Python side of kb_factory.c,
# embedded into jupyter-agent at build time and run by kb_zygote_boot.py
# (this source travels in a memfd, not on the command line). argv: PRELOAD
# WARM_ENTRY_SOURCE; fd 0 is the control socket (SEQPACKET) to the host.
# It runs in a box of its own as uid 1000 with no capability; each kernel
# box it forks into is nested in that box and owned by that uid, which is
# what lets it setns(). The next message on fd 0 carries the privilege
# drop (sandbox/sb_drop.c, the same code the sandbox runs) as a shared
# object in a memfd.
import ctypes
import importlib
import json
import os
import select
import socket
import sys


def _ja_zygote():
    ctl = socket.socket(fileno=0)
    def say(o, fds=()):
        socket.send_fds(ctl, [json.dumps(o).encode()], list(fds))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: grandchildren come back to us
    preload, warm_src = sys.argv[1], sys.argv[2]
    if sys.path and sys.path[0] == '':
        del sys.path[0]
    try:
        _, fds, _, _ = socket.recv_fds(ctl, 4096, 1)
        if len(fds) != 1:
            raise RuntimeError('no privilege-drop library from the host')
        drop = ctypes.CDLL('/proc/self/fd/%d' % fds[0], use_errno=True)
        os.close(fds[0])
        drop.sb_drop_to_user.argtypes = [ctypes.c_uint,
                                         ctypes.POINTER(ctypes.c_char_p)]
        import random
        for name in ('ipykernel.kernelapp', 'tornado.ioloop', 'zmq'):
            importlib.import_module(name)
        if preload:
            exec(compile(preload, '<preload>', 'exec'), {'__name__': '__ja_preload__'})
        tasks = len(os.listdir('/proc/self/task'))
        if tasks != 1:
            raise RuntimeError('%d threads after the imports; fork would lose them' % tasks)
    except BaseException as e:
        say({'error': 'factory warm-up failed: %s: %s' % (type(e).__name__, e)})
        os._exit(1)
    import signal
    kids = set()
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda *a: None)
    signal.set_wakeup_fd(wake_w)
    say({'ready': True, 'pid': os.getpid(), 'threads': tasks})

    def landlock(ll):
        # The kernel box's Landlock rules (sandbox/sb_landlock.h), as
        # sb_landlock_prepare applies them: a rule on a file keeps only file
        # rights, a device rule on a directory may also list it.
        if ll['abi'] <= 0:
            return
        import struct
        attr = struct.pack('=QQQ', ll['handled_fs'], ll['handled_net'],
                           ll['scoped'])[:ll['attr_size']]
        rs = libc.syscall(444, attr, ctypes.c_long(len(attr)), 0)
        if rs < 0:
            raise OSError(ctypes.get_errno(), 'landlock_create_ruleset')
        for path, access, dev in ll['rules']:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not in this box: nothing to allow
            if not os.path.isdir(path):
                access &= ll['file_rights']
            elif dev:
                access |= ll['read_dir']
            r = libc.syscall(445, rs, 1, struct.pack('=Qi', access, fd), 0)
            e = ctypes.get_errno()
            os.close(fd)
            if r != 0:
                raise OSError(e, 'landlock_add_rule ' + path)
        if ll.get('net_port'):  # --allow-net: connect to the proxy's port
            r = libc.syscall(445, rs, 2, struct.pack('=QQ', 2, ll['net_port']), 0)
            if r != 0:
                raise OSError(ctypes.get_errno(), 'landlock_add_rule net_port')
        if libc.syscall(446, rs, 0) != 0:
            raise OSError(ctypes.get_errno(), 'landlock_restrict_self')
        os.close(rs)

    def child(req, nsfds, ctlfd, outfd, cgfds, wfd):
        # Intermediate: still in the factory's box. Join the kernel box's
        # cgroups (fds the host opened: "0" is the writer), then its
        # namespaces; our child is born inside its pid namespace.
        try:
            for fd in cgfds:
                os.write(fd, b'0')
                os.close(fd)
            # The box's namespaces, its user namespace first: as the
            # owner of that one we may then enter the others.
            for fd in nsfds:
                if libc.setns(fd, 0) != 0:
                    raise OSError(ctypes.get_errno(), 'setns into the box')
                os.close(fd)
            pid = os.fork()
        except BaseException as e:
            os.write(wfd, ('err %s\n' % e).encode())
            os._exit(1)
        if pid:
            os.write(wfd, ('pid %d\n' % pid).encode())
            os._exit(0)
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.chdir('/mnt/data')
            os.setsid()
            import resource
            for name, v in req['rlimits'].items():
                resource.setrlimit(getattr(resource, name), (v, v))
            # The sandbox's own drop (sb_drop_to_user): bounding set,
            # groups, uid/gid 1000, capabilities, no_new_privs. Any failure
            # ends this child before user code.
            step = ctypes.c_char_p()
            if drop.sb_drop_to_user(1000, ctypes.byref(step)) != 0:
                raise OSError(ctypes.get_errno(), (step.value or b'drop').decode())
            os.dup2(ctlfd, 0)
            os.dup2(outfd, 1)
            os.dup2(outfd, 2)
            os.closerange(3, wfd)
            os.closerange(wfd + 1, 65536)
            random.seed()
            fm = sys.modules.get('matplotlib.font_manager')
            if fm and hasattr(fm, '_get_font'):
                fm._get_font.cache_clear()  # its open font files are ours no more
            if 'numpy' in sys.modules:
                sys.modules['numpy'].random.seed()
            os.environ.clear()
            os.environ.update(req['env'])
            landlock(req['landlock'])
            class FProg(ctypes.Structure):
                _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_void_p)]
            for h in req['seccomp']:  # the allow list, then the deny rows
                prog = bytes.fromhex(h)
                buf = ctypes.create_string_buffer(prog, len(prog))
                fp = FProg(len(prog) // 8, ctypes.addressof(buf))
                if libc.prctl(22, 2, ctypes.byref(fp), 0, 0) != 0:  # PR_SET_SECCOMP
                    raise OSError(ctypes.get_errno(), 'seccomp')
            try:
                os.write(wfd, b'ok\n')  # the factory may be gone from it
            except OSError:
                pass
            os.close(wfd)
        except BaseException as e:
            # The factory may have answered already (it does not wait for
            # this): the kernel's output is where the host looks then.
            for fd in (wfd, outfd):
                try:
                    os.write(fd, ('err %s\n' % e).encode())
                except OSError:
                    pass
            os._exit(1)
        sys.argv = ['-c', req['connection_file'], '']
        g = {'__name__': '__main__'}
        exec(compile(warm_src, '<warm>', 'exec'), g)
        os._exit(0)

    while True:
        r, _, _ = select.select([ctl, wake_r], [], [], 5.0)
        try:
            os.read(wake_r, 512)
        except BlockingIOError:
            pass
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in kids:
                kids.discard(pid)
                say({'exited': pid, 'status': st})
        if ctl not in r:
            continue
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 16)
        except OSError:
            msg, fds = b'', []
        if not msg:
            os._exit(0)
        try:
            req = json.loads(msg)
            ctlfd, outfd = fds[:2]
            nsfds = fds[2:2 + req['n_ns']]
            cgfds = fds[2 + req['n_ns']:]
        except Exception as e:
            for fd in fds:
                os.close(fd)
            say({'ok': False, 'error': 'bad request: %s' % e})
            continue
        if tasks != len(os.listdir('/proc/self/task')):
            for fd in fds:
                os.close(fd)
            say({'ok': False, 'error': 'the factory grew threads; refusing to fork'})
            continue
        rfd, wfd = os.pipe()
        ipid = os.fork()
        if ipid == 0:
            os.close(rfd)
            child(req, nsfds, ctlfd, outfd, cgfds, wfd)
        for fd in [wfd] + fds:
            os.close(fd)
        out, kpid, err = b'', 0, 'no answer from the new kernel'
        while True:
            rr, _, _ = select.select([rfd], [], [], 10.0)
            chunk = os.read(rfd, 4096) if rr else b''
            if not chunk:
                break
            out += chunk
            lines = out.decode(errors='replace').splitlines()
            failed = False
            for line in lines:
                if line.startswith('pid '):
                    kpid = int(line[4:])
                elif line.startswith('err '):
                    err, failed = line[4:], True
            # Answer once the kernel's pid is known, without waiting for
            # its set-up (niced, it is slow under load): a set-up that fails
            # later ends the kernel before any user code, which the host
            # sees as a failed warm-up (the kernel never says "ready").
            if failed or kpid:
                if not failed:
                    err = ''
                break
        os.close(rfd)
        try:
            os.waitpid(ipid, 0)
        except ChildProcessError:
            pass
        if kpid:
            kids.add(kpid)
        if err or not kpid:
            say({'ok': False, 'error': err or 'the kernel did not start', 'pid': kpid})
        else:
            # The host knows the kernel by its host pid: a pidfd tells it.
            pidfd = os.pidfd_open(kpid)
            say({'ok': True, 'pid': kpid}, [pidfd])
            os.close(pidfd)
_ja_zygote()
