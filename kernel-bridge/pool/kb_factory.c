/* The forking kernel factory: host side. The Python side is s_zygote. */
#include "kernel-bridge/pool/kb_factory.h"

#include "common/clock.h"
#include "common/xalloc.h"
#include "kernel-bridge/pool/kb_warm.h"
#include "sandbox/sb_files.h"
#include "sandbox/sb_seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define OUT_CAP (256 << 10)
#define FORK_TIMEOUT_MS 20000
#define MAX_MSG (1 << 16)

/* The factory's Python side, one line per element (ISO C caps a single
 * string literal at 4095 bytes). */
static const char *const s_zygote_lines[] = {
    "import ctypes, json, os, select, socket, sys\n",
    "def _ja_zygote():\n",
    "    ctl = socket.socket(fileno=3)\n",
    "    def say(o, fds=()):\n",
    "        socket.send_fds(ctl, [json.dumps(o).encode()], list(fds))\n",
    "    libc = ctypes.CDLL(None, use_errno=True)\n",
    "    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: grandchildren "
    "come back to us\n",
    "    preload, warm_src = sys.argv[1], sys.argv[2]\n",
    "    if sys.path and sys.path[0] == '':\n",
    "        del sys.path[0]\n",
    "    try:\n",
    "        import random\n",
    "        import ipykernel.kernelapp, tornado.ioloop, zmq\n",
    "        if preload:\n",
    "            exec(compile(preload, '<preload>', 'exec'), {'__name__': "
    "'__ja_preload__'})\n",
    "        tasks = len(os.listdir('/proc/self/task'))\n",
    "        if tasks != 1:\n",
    "            raise RuntimeError('%d threads after the imports; fork would "
    "lose them' % tasks)\n",
    "    except BaseException as e:\n",
    "        say({'error': 'factory warm-up failed: %s: %s' % "
    "(type(e).__name__, e)})\n",
    "        os._exit(1)\n",
    "    import signal\n",
    "    kids = set()\n",
    "    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)\n",
    "    signal.signal(signal.SIGCHLD, lambda *a: None)\n",
    "    signal.set_wakeup_fd(wake_w)\n",
    "    say({'ready': True, 'pid': os.getpid(), 'threads': tasks})\n",
    "\n",
    "    def child(req, boxfd, ctlfd, outfd, wfd):\n",
    "        # Intermediate: still on the host. Join the box's cgroup, then "
    "its\n",
    "        # namespaces; our child is born inside its pid namespace.\n",
    "        try:\n",
    "            for p in req['cgroup_procs']:\n",
    "                with open(p, 'w') as f:\n",
    "                    f.write(str(os.getpid()))\n",
    "            if libc.setns(boxfd, req['ns_flags']) != 0:\n",
    "                raise OSError(ctypes.get_errno(), 'setns into the box')\n",
    "            os.close(boxfd)\n",
    "            pid = os.fork()\n",
    "        except BaseException as e:\n",
    "            os.write(wfd, ('err %s\\n' % e).encode())\n",
    "            os._exit(1)\n",
    "        if pid:\n",
    "            os.write(wfd, ('pid %d\\n' % pid).encode())\n",
    "            os._exit(0)\n",
    "        try:\n",
    "            signal.set_wakeup_fd(-1)\n",
    "            signal.signal(signal.SIGCHLD, signal.SIG_DFL)\n",
    "            os.chdir('/mnt/data')\n",
    "            os.setsid()\n",
    "            import resource\n",
    "            for name, v in req['rlimits'].items():\n",
    "                resource.setrlimit(getattr(resource, name), (v, v))\n",
    "            for cap in range(64):\n",
    "                libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP\n",
    "            try:\n",
    "                os.setgroups([])\n",
    "            except OSError:\n",
    "                pass  # setgroups is denied in an unprivileged user "
    "namespace\n",
    "            os.setresgid(1000, 1000, 1000)\n",
    "            os.setresuid(1000, 1000, 1000)\n",
    "            hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)\n",
    "            data = (ctypes.c_uint32 * 6)()\n",
    "            if libc.capset(hdr, data) != 0:\n",
    "                raise OSError(ctypes.get_errno(), 'capset')\n",
    "            libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL\n",
    "            if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS\n",
    "                raise OSError(ctypes.get_errno(), 'no_new_privs')\n",
    "            os.dup2(ctlfd, 0)\n",
    "            os.dup2(outfd, 1)\n",
    "            os.dup2(outfd, 2)\n",
    "            os.closerange(3, wfd)\n",
    "            os.closerange(wfd + 1, 65536)\n",
    "            random.seed()\n",
    "            fm = sys.modules.get('matplotlib.font_manager')\n",
    "            if fm and hasattr(fm, '_get_font'):\n",
    "                fm._get_font.cache_clear()  # its open font files are "
    "ours no more\n",
    "            if 'numpy' in sys.modules:\n",
    "                sys.modules['numpy'].random.seed()\n",
    "            os.environ.clear()\n",
    "            os.environ.update(req['env'])\n",
    "            prog = bytes.fromhex(req['seccomp'])\n",
    "            buf = ctypes.create_string_buffer(prog, len(prog))\n",
    "            class FProg(ctypes.Structure):\n",
    "                _fields_ = [('len', ctypes.c_ushort), ('filter', "
    "ctypes.c_void_p)]\n",
    "            fp = FProg(len(prog) // 8, ctypes.addressof(buf))\n",
    "            if libc.prctl(22, 2, ctypes.byref(fp), 0, 0) != 0:  # "
    "PR_SET_SECCOMP\n",
    "                raise OSError(ctypes.get_errno(), 'seccomp')\n",
    "            os.write(wfd, b'ok\\n')\n",
    "            os.close(wfd)\n",
    "        except BaseException as e:\n",
    "            os.write(wfd, ('err %s\\n' % e).encode())\n",
    "            os._exit(1)\n",
    "        sys.argv = ['-c', req['connection_file'], '']\n",
    "        g = {'__name__': '__main__'}\n",
    "        exec(compile(warm_src, '<warm>', 'exec'), g)\n",
    "        os._exit(0)\n",
    "\n",
    "    while True:\n",
    "        r, _, _ = select.select([ctl, wake_r], [], [], 5.0)\n",
    "        try:\n",
    "            os.read(wake_r, 512)\n",
    "        except BlockingIOError:\n",
    "            pass\n",
    "        while True:\n",
    "            try:\n",
    "                pid, st = os.waitpid(-1, os.WNOHANG)\n",
    "            except ChildProcessError:\n",
    "                break\n",
    "            if pid == 0:\n",
    "                break\n",
    "            if pid in kids:\n",
    "                kids.discard(pid)\n",
    "                say({'exited': pid, 'status': st})\n",
    "        if ctl not in r:\n",
    "            continue\n",
    "        try:\n",
    "            msg, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 4)\n",
    "        except OSError:\n",
    "            msg, fds = b'', []\n",
    "        if not msg:\n",
    "            os._exit(0)\n",
    "        try:\n",
    "            req = json.loads(msg)\n",
    "            boxfd, ctlfd, outfd = fds\n",
    "        except Exception as e:\n",
    "            for fd in fds:\n",
    "                os.close(fd)\n",
    "            say({'ok': False, 'error': 'bad request: %s' % e})\n",
    "            continue\n",
    "        rfd, wfd = os.pipe()\n",
    "        if tasks != len(os.listdir('/proc/self/task')):\n",
    "            say({'ok': False, 'error': 'the factory grew threads; "
    "refusing to fork'})\n",
    "            continue\n",
    "        ipid = os.fork()\n",
    "        if ipid == 0:\n",
    "            os.close(rfd)\n",
    "            child(req, boxfd, ctlfd, outfd, wfd)\n",
    "        for fd in (wfd, boxfd, ctlfd, outfd):\n",
    "            os.close(fd)\n",
    "        out, kpid, err = b'', 0, 'no answer from the new kernel'\n",
    "        while True:\n",
    "            rr, _, _ = select.select([rfd], [], [], 10.0)\n",
    "            chunk = os.read(rfd, 4096) if rr else b''\n",
    "            if not chunk:\n",
    "                break\n",
    "            out += chunk\n",
    "            lines = out.decode(errors='replace').splitlines()\n",
    "            done = False\n",
    "            for line in lines:\n",
    "                if line.startswith('pid '):\n",
    "                    kpid = int(line[4:])\n",
    "                elif line.startswith('err '):\n",
    "                    err, done = line[4:], True\n",
    "                elif line == 'ok':\n",
    "                    err, done = '', True\n",
    "            if done:\n",
    "                break\n",
    "        os.close(rfd)\n",
    "        try:\n",
    "            os.waitpid(ipid, 0)\n",
    "        except ChildProcessError:\n",
    "            pass\n",
    "        if kpid:\n",
    "            kids.add(kpid)\n",
    "        if err or not kpid:\n",
    "            say({'ok': False, 'error': err or 'the kernel did not start', "
    "'pid': kpid})\n",
    "        else:\n",
    "            say({'ok': True, 'pid': kpid})\n",
    "_ja_zygote()\n",
    NULL};

/* The factory's source as one new string. */
static char *
s_zygote_source(void)
{
    size_t n = 1;
    for (size_t i = 0; s_zygote_lines[i]; i++)
        n += strlen(s_zygote_lines[i]);
    char *s = xmalloc(n), *p = s;
    for (size_t i = 0; s_zygote_lines[i]; i++) {
        size_t k = strlen(s_zygote_lines[i]);
        memcpy(p, s_zygote_lines[i], k);
        p += k;
    }
    *p = '\0';
    return s;
}

struct kb_factory {
    pid_t pid;      /* the factory process */
    int pidfd;      /* owned pidfd of it */
    int ctl;        /* owned control socket (SEQPACKET) */
    int out_fd;     /* owned memfd with its stdout/stderr */
    int threads;    /* threads it reported when ready */
    char *tmp;      /* owned: its MPLCONFIGDIR, removed at destroy */
    json_t *exited; /* owned: {"<pid>": status} reported by the factory */
};

/* The last lines the factory printed, for errors. */
static void
s_tail(const kb_factory_t *f, char *buf, size_t size)
{
    buf[0] = '\0';
    char *all = xmalloc(OUT_CAP + 1);
    ssize_t n = pread(f->out_fd, all, OUT_CAP, 0);
    all[n > 0 ? n : 0] = '\0';
    size_t len = strlen(all), keep = len < size - 1 ? len : size - 1;
    memcpy(buf, all + len - keep, keep);
    buf[keep] = '\0';
    free(all);
}

/* One message from the factory within timeout_ms: new object or NULL. */
static json_t *
s_recv(kb_factory_t *f, int timeout_ms)
{
    struct pollfd pf[2] = {{.fd = f->ctl, .events = POLLIN},
                           {.fd = f->pidfd, .events = POLLIN}};
    int pr;
    while ((pr = poll(pf, 2, timeout_ms)) < 0 && errno == EINTR)
        ;
    if (pr <= 0 || !(pf[0].revents & POLLIN))
        return NULL;
    char *buf = xmalloc(MAX_MSG + 1);
    ssize_t n;
    while ((n = recv(f->ctl, buf, MAX_MSG, MSG_DONTWAIT)) < 0 && errno == EINTR)
        ;
    json_t *m = NULL;
    if (n > 0) {
        buf[n] = '\0';
        m = json_loads(buf, 0, NULL);
        if (m && !json_is_object(m)) {
            json_decref(m);
            m = NULL;
        }
    }
    free(buf);
    return m;
}

/* Record an {"exited": pid, "status": st} report; true if it was one. */
static bool
s_note_exit(kb_factory_t *f, json_t *m)
{
    json_t *pid = json_object_get(m, "exited");
    if (!json_is_integer(pid))
        return false;
    char key[24];
    snprintf(key, sizeof key, "%lld", (long long)json_integer_value(pid));
    json_object_set(f->exited, key, json_object_get(m, "status"));
    return true;
}

kb_factory_t *
kb_factory_new(const kb_factory_opts_t *o, err_t *err)
{
    kb_factory_t *f = xcalloc(1, sizeof *f);
    f->pid = -1;
    f->pidfd = f->ctl = f->out_fd = -1;
    f->exited = json_object();
    int sv[2] = {-1, -1};
    char *argv[6] = {0}, *env[16] = {0};
    f->tmp = xstrdup("/tmp/ja-factory-XXXXXX");
    if (!mkdtemp(f->tmp)) {
        err_set(err, ERR_SANDBOX, "factory: mkdtemp: %s", strerror(errno));
        free(f->tmp);
        f->tmp = NULL;
        goto fail;
    }
    f->out_fd = memfd_create("factory-out", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (f->out_fd < 0 || ftruncate(f->out_fd, OUT_CAP) ||
        fcntl(f->out_fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK) ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        err_set(err, ERR_SANDBOX, "factory: setting up: %s", strerror(errno));
        goto fail;
    }
    argv[0] = xstrdup(o && o->python ? o->python : "/usr/bin/python3");
    argv[1] = xstrdup("-c");
    argv[2] = s_zygote_source();
    argv[3] = xstrdup(o && o->preload ? o->preload : "");
    argv[4] = xstrdup(kb_warm_entry_source());
    size_t ne = 0;
    env[ne++] = xstrdup("PATH=/usr/local/bin:/usr/bin:/bin");
    env[ne++] = xstrdup("LANG=C.UTF-8");
    env[ne++] = xstrdup("HOME=" SB_HOME_PATH);
    env[ne++] = xasprintf("MPLCONFIGDIR=%s", f->tmp);
    env[ne++] = xstrdup("MPLBACKEND=module://matplotlib_inline.backend_inline");
    env[ne++] = xstrdup("OPENBLAS_NUM_THREADS=1");
    env[ne++] = xstrdup("MKL_NUM_THREADS=1");
    env[ne++] = xstrdup("OMP_NUM_THREADS=1");
    env[ne++] = xstrdup("NUMEXPR_NUM_THREADS=1");
    env[ne++] = xstrdup("PYTHONDONTWRITEBYTECODE=1");
    env[ne++] = xstrdup("PYDEVD_DISABLE_FILE_VALIDATION=1");
    pid_t parent = getpid();
    f->pid = fork();
    if (f->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != parent)
            _exit(127);
        setsid();
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        int null = open("/dev/null", O_RDONLY);
        if (null < 0 || dup2(null, 0) < 0 || dup2(f->out_fd, 1) < 0 ||
            dup2(f->out_fd, 2) < 0 || dup2(sv[1], 3) < 0 || chdir("/") < 0)
            _exit(127);
        syscall(SYS_close_range, 4, ~0U, 0);
        execve(argv[0], argv, env);
        _exit(127);
    }
    if (f->pid < 0) {
        err_set(err, ERR_SANDBOX, "factory: fork: %s", strerror(errno));
        goto fail;
    }
    close(sv[1]);
    sv[1] = -1;
    f->ctl = sv[0];
    sv[0] = -1;
    f->pidfd = (int)syscall(SYS_pidfd_open, f->pid, 0);
    int64_t deadline =
        clock_mono_ms() + (o && o->timeout_ms > 0 ? o->timeout_ms : 120000);
    for (;;) {
        int left = (int)(deadline - clock_mono_ms());
        json_t *m = left > 0 ? s_recv(f, left) : NULL;
        if (m && json_is_true(json_object_get(m, "ready"))) {
            f->threads = (int)json_integer_value(json_object_get(m, "threads"));
            json_decref(m);
            break;
        }
        char tail[600];
        s_tail(f, tail, sizeof tail);
        const char *why = json_string_value(json_object_get(m, "error"));
        err_set(err, ERR_KERNEL, "factory: %s%s%s",
                why        ? why
                : left > 0 ? "it exited while starting"
                           : "not ready in time",
                tail[0] ? "\n" : "", tail);
        json_decref(m);
        goto fail;
    }
    for (int i = 0; argv[i]; i++)
        free(argv[i]);
    for (int i = 0; env[i]; i++)
        free(env[i]);
    return f;
fail:
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    for (int i = 0; argv[i]; i++)
        free(argv[i]);
    for (int i = 0; env[i]; i++)
        free(env[i]);
    kb_factory_destroy(&f);
    return NULL;
}

void
kb_factory_destroy(kb_factory_t **pf)
{
    if (!pf || !*pf)
        return;
    kb_factory_t *f = *pf;
    if (f->pid > 0) {
        kill(f->pid, SIGKILL);
        waitpid(f->pid, NULL, 0);
    }
    if (f->pidfd >= 0)
        close(f->pidfd);
    if (f->ctl >= 0)
        close(f->ctl);
    if (f->out_fd >= 0)
        close(f->out_fd);
    if (f->tmp) {
        char *cmd_dir = f->tmp; /* matplotlib may have left a cache */
        sb_files_remove_tree(cmd_dir);
        free(f->tmp);
    }
    json_decref(f->exited);
    free(f);
    *pf = NULL;
}

pid_t
kb_factory_pid(const kb_factory_t *f)
{
    return f->pid;
}

int
kb_factory_threads(const kb_factory_t *f)
{
    return f->threads;
}

static json_t *
s_env_json(char *const envp[])
{
    json_t *env = json_object();
    for (char *const *e = envp; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char *k = strndup(*e, (size_t)(eq - *e));
        json_object_set_new(env, k, json_string(eq + 1));
        free(k);
    }
    return env;
}

int
kb_factory_fork(kb_factory_t *f, sb_sandbox_t *box, int ctl_fd, int out_fd,
                const char *conn_path, char *const envp[], pid_t *pid,
                err_t *err)
{
    sb_seccomp_prog_t prog;
    if (sb_seccomp_build(&prog, err) < 0)
        return -1;
    size_t nbytes = prog.len * 8;
    char *hex = xmalloc(nbytes * 2 + 1);
    for (size_t i = 0; i < nbytes; i++)
        snprintf(hex + 2 * i, 3, "%02x", ((unsigned char *)prog.insns)[i]);
    sb_seccomp_prog_release(&prog);
    json_t *procs = json_array();
    const char *ctls[] = {"memory", "pids", "cpu"};
    for (int i = 0; i < 3; i++) {
        const char *d = sb_sandbox_cgroup_dir(box, ctls[i]);
        if (!d)
            continue;
        json_t *p = json_sprintf("%s/cgroup.procs", d);
        size_t k;
        json_t *have;
        bool dup = false;
        json_array_foreach(procs, k, have) dup |= json_equal(have, p);
        if (dup)
            json_decref(p);
        else
            json_array_append_new(procs, p);
    }
    const sb_policy_t *pol = sb_sandbox_policy(box);
    json_t *rl = json_pack("{s:I, s:I, s:I, s:I}", "RLIMIT_NOFILE",
                           (json_int_t)pol->nofile, "RLIMIT_FSIZE",
                           (json_int_t)sb_policy_fsize(pol), "RLIMIT_NPROC",
                           (json_int_t)pol->pids, "RLIMIT_CORE", (json_int_t)0);
    if (!sb_sandbox_cgroup_dir(box, "memory"))
        json_object_set_new(rl, "RLIMIT_DATA",
                            json_integer((json_int_t)pol->memory_bytes));
    json_t *req =
        json_pack("{s:s, s:s, s:o, s:o, s:o, s:i, s:o}", "op", "fork",
                  "connection_file", conn_path, "env", s_env_json(envp),
                  "cgroup_procs", procs, "rlimits", rl, "ns_flags",
                  CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC |
                      CLONE_NEWUTS | CLONE_NEWPID | CLONE_NEWCGROUP,
                  "seccomp", json_string(hex));
    free(hex);
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    int fds[3] = {sb_sandbox_pidfd(box), ctl_fd, out_fd};
    struct iovec iov = {.iov_base = text, .iov_len = strlen(text)};
    union {
        char buf[CMSG_SPACE(sizeof fds)];
        struct cmsghdr align;
    } cm;
    memset(&cm, 0, sizeof cm);
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cm.buf,
                        .msg_controllen = sizeof cm.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t sent = sendmsg(f->ctl, &mh, MSG_NOSIGNAL);
    free(text);
    if (sent < 0)
        return err_set(err, ERR_SANDBOX, "factory: not reachable: %s",
                       strerror(errno));
    int64_t deadline = clock_mono_ms() + FORK_TIMEOUT_MS;
    for (;;) {
        int left = (int)(deadline - clock_mono_ms());
        json_t *m = left > 0 ? s_recv(f, left) : NULL;
        if (!m)
            return err_set(err, ERR_SANDBOX,
                           "factory: no answer to a fork request (is it "
                           "alive?)");
        if (s_note_exit(f, m)) {
            json_decref(m);
            continue;
        }
        int rc = 0;
        if (json_is_true(json_object_get(m, "ok"))) {
            *pid = (pid_t)json_integer_value(json_object_get(m, "pid"));
        } else {
            const char *why = json_string_value(json_object_get(m, "error"));
            rc = err_set(err, ERR_SANDBOX, "factory: forked kernel: %s",
                         why ? why : "failed");
        }
        json_decref(m);
        return rc;
    }
}

int
kb_factory_exit_status(kb_factory_t *f, pid_t pid, int *status)
{
    json_t *m;
    while ((m = s_recv(f, 0))) {
        s_note_exit(f, m);
        json_decref(m);
    }
    char key[24];
    snprintf(key, sizeof key, "%d", (int)pid);
    json_t *st = json_object_get(f->exited, key);
    if (!json_is_integer(st))
        return 0;
    *status = (int)json_integer_value(st);
    return 1;
}
