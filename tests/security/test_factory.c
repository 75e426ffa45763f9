/*
 * Kernels forked from one preloaded factory (kb_factory.h) must be as
 * isolated from each other and from the factory as cold sandboxed
 * kernels: their own random streams and keys, files, variables and
 * environment; a bomb or crash in one harms neither the other nor the
 * factory; no signal or ptrace reaches the factory; and the sandbox's key
 * guarantees (no network, no host files, no privileges) hold in them.
 * Real kernels, real sandboxes.
 */
#include "../tap.h"

#include "common/clock.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/pool/kb_factory.h"
#include "kernel-bridge/pool/kb_pool.h"
#include "kernel-bridge/pool/kb_warm.h"
#include "sandbox/sb_landlock.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static kb_launcher_t *
s_once(void *arg, err_t *err)
{
    kb_launcher_t *l = arg;
    if (!l)
        err_set(err, ERR_KERNEL, "no launcher");
    return l;
}

static char *
s_eval(kb_kernel_t *k, const char *code, int timeout_ms, err_t *err)
{
    kb_output_t *out = kb_output_new(NULL, 0);
    kb_exec_opts_t opts;
    kb_exec_opts_init(&opts);
    /* one cell after another, also after a failed one: no aborts */
    opts.stop_on_error = false;
    char *text = NULL;
    err_t local;
    if (!err)
        err = &local;
    if (kb_kernel_execute(k, code, &opts, timeout_ms, out, NULL, err) == 0) {
        size_t i;
        json_t *o;
        json_array_foreach(kb_output_outputs(out), i, o)
        {
            const char *t = json_string_value(json_object_get(o, "text"));
            json_t *d = json_object_get(o, "data");
            if (!t && d && json_object_get(d, "image/png"))
                t = "<png>";
            if (!t && d)
                t = json_string_value(json_object_get(d, "text/plain"));
            if (!t && json_object_get(o, "ename"))
                t = json_string_value(json_object_get(o, "ename"));
            /* ipykernel may send one print as several stream messages:
             * they are one text, as a notebook shows them. */
            if (t && !text) {
                text = strdup(t);
            } else if (t && json_object_get(o, "name")) {
                size_t n = strlen(text), m = strlen(t);
                char *more = realloc(text, n + m + 1);
                if (more) {
                    memcpy(more + n, t, m + 1);
                    text = more;
                }
            }
        }
    }
    kb_output_destroy(&out);
    if (text && *text && text[strlen(text) - 1] == '\n')
        text[strlen(text) - 1] = '\0';
    return text ? text : strdup("");
}

static sb_policy_t s_policy;

static kb_kernel_t *
s_take(kb_pool_t *pool, err_t *err)
{
    int64_t end = clock_mono_ms() + 60000;
    kb_launcher_t *l = NULL;
    while (!l && clock_mono_ms() < end) {
        kb_pool_poll(pool, 200);
        l = kb_pool_take(pool, NULL, &s_policy, err);
    }
    if (!l)
        return NULL;
    kb_kernel_opts_t ko = {.launcher = s_once, .launcher_arg = l};
    return kb_kernel_start(&ko, err);
}

static char *
s_key(kb_kernel_t *k)
{
    kb_launcher_t *l = kb_kernel_launcher(k);
    char *path = NULL, *key = NULL;
    if (asprintf(&path, "%s/kernel.json", l->ops->run_dir(l->self)) < 0)
        return NULL;
    json_t *j = json_load_file(path, 0, NULL);
    free(path);
    if (j)
        key = strdup(json_string_value(json_object_get(j, "key")));
    json_decref(j);
    return key;
}

/* The value of field `name` ("Uid:", "CapEff:") in /proc/PID/status, as a
 * new string (the rest of the line), or NULL. */
static char *
s_status(pid_t pid, const char *name)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *fp = fopen(path, "r");
    char *v = NULL;
    while (fp && !v && fgets(line, sizeof line, fp))
        if (strncmp(line, name, strlen(name)) == 0) {
            line[strcspn(line, "\n")] = '\0';
            v = strdup(line + strlen(name) +
                       strspn(line + strlen(name), "\t "));
        }
    if (fp)
        fclose(fp);
    return v;
}

/* /proc/PID/cmdline with its NULs as spaces, what ps shows (a new
 * string, at most 64 KiB; "" when unreadable). */
static char *
s_cmdline(pid_t pid)
{
    char path[64];
    size_t cap = 64 << 10;
    char *buf = calloc(1, cap + 1);
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *fp = fopen(path, "r");
    size_t n = fp ? fread(buf, 1, cap, fp) : 0;
    if (fp)
        fclose(fp);
    for (size_t i = 0; i < n; i++)
        if (!buf[i])
            buf[i] = ' ';
    return buf;
}

static bool
s_cmdline_has(pid_t pid, const char *needle)
{
    char *c = s_cmdline(pid);
    bool has = strstr(c, needle) != NULL;
    free(c);
    return has;
}

static bool
s_same_ns(pid_t a, pid_t b, const char *ns)
{
    char pa[64], pb[64], la[64] = "a", lb[64] = "b";
    snprintf(pa, sizeof pa, "/proc/%d/ns/%s", (int)a, ns);
    snprintf(pb, sizeof pb, "/proc/%d/ns/%s", (int)b, ns);
    if (readlink(pa, la, sizeof la - 1) < 0 ||
        readlink(pb, lb, sizeof lb - 1) < 0)
        return false;
    return strcmp(la, lb) == 0;
}

/* The factory's Python process as the host sees it: kb_factory_pid() if
 * that runs the zygote itself, else the child of it that does and shares
 * its user namespace (not a forked kernel in a box of its own). */
static pid_t
s_zygote_pid(pid_t fpid)
{
    if (s_cmdline_has(fpid, "kb_zygote_boot"))
        return fpid;
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)fpid,
             (int)fpid);
    FILE *fp = fopen(path, "r");
    size_t n = fp ? fread(buf, 1, sizeof buf - 1, fp) : 0;
    if (fp)
        fclose(fp);
    buf[n] = '\0';
    for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n")) {
        pid_t p = (pid_t)atoi(t);
        if (s_cmdline_has(p, "kb_zygote_boot") && s_same_ns(p, fpid, "user"))
            return p;
    }
    return -1;
}

/* Every id of a "Uid:"/"Gid:" line is non-zero. */
static bool
s_ids_not_root(const char *ids)
{
    int n = 0;
    for (const char *p = ids; p && *p; n++) {
        if (strtol(p, (char **)&p, 10) == 0)
            return false;
        p += strspn(p, "\t ");
    }
    return n == 4;
}

#define EVAL_IS(k, code, want, ...)                                            \
    do {                                                                       \
        char *r_ = s_eval(k, code, 30000, NULL);                               \
        is_str(r_, want, __VA_ARGS__);                                         \
        free(r_);                                                              \
    } while (0)

int
main(void)
{
    err_t err = {0};
    int64_t t0 = clock_mono_ms();
    kb_factory_opts_t fo = {.preload =
                                "import numpy, pandas, matplotlib.pyplot"};
    kb_factory_t *f = kb_factory_new(&fo, &err);
    ok(f != NULL, "a factory starts with numpy, pandas and matplotlib");
    if (!f) {
        diag("%s", err.text);
        return done_testing();
    }
    diag("factory ready in %lld ms", (long long)(clock_mono_ms() - t0));
    is_int(kb_factory_threads(f), 1,
           "the factory has one thread when it "
           "forks (no lost locks in children)");
    pid_t fpid = kb_factory_pid(f);

    /* The factory as the host sees it: no host root, no host capability,
     * no host file (issue 11, part 7). */
    pid_t zpid = s_zygote_pid(fpid);
    char *uid = s_status(zpid, "Uid:"), *gid = s_status(zpid, "Gid:");
    char *cap = s_status(zpid, "CapEff:"), *bnd = s_status(zpid, "CapBnd:");
    char *nnp = s_status(zpid, "NoNewPrivs:");
    char *sec = s_status(zpid, "Seccomp:");
    ok(zpid > 0 && s_ids_not_root(uid) && s_ids_not_root(gid),
       "the factory's Python runs as no host root (uids %s, gids %s)",
       uid ? uid : "?", gid ? gid : "?");
    ok(zpid > 0 && !s_same_ns(zpid, getpid(), "user") && cap &&
           strcmp(cap, "0000000000000000") == 0 && bnd &&
           strcmp(bnd, "0000000000000000") == 0,
       "the factory's Python has no capability, and only in a user "
       "namespace of its own (CapEff %s, CapBnd %s)",
       cap ? cap : "?", bnd ? bnd : "?");
    ok(nnp && strcmp(nnp, "1") == 0 && sec && strcmp(sec, "2") == 0,
       "the factory runs with no_new_privs and a seccomp filter");
    ok(!s_same_ns(fpid, getpid(), "user") && !s_same_ns(fpid, getpid(), "pid"),
       "the factory's whole box (its pid 1 too) is in its own user and pid "
       "namespaces");
    /* What ps shows of it is the few lines of kb_zygote_boot.py: the
     * factory's code, the kernels' entry and the preload came in a memfd
     * (issue 25). */
    char *cl = s_cmdline(zpid);
    ok(zpid > 0 && !strstr(cl, "def _ja_zygote") &&
           !strstr(cl, "def _ja_warm") && !strstr(cl, fo.preload),
       "the factory's command line holds neither its code, nor the "
       "kernels' entry, nor the preload");
    ok(zpid > 0 && strlen(cl) < 1024,
       "the factory's command line is short (%zu bytes in "
       "/proc/%d/cmdline)",
       strlen(cl), (int)zpid);
    free(cl);
    char root[96];
    snprintf(root, sizeof root, "/proc/%d/root/etc/shadow", (int)zpid);
    ok(zpid > 0 && access(root, F_OK) < 0,
       "the factory sees no host file (/etc/shadow is not in its root)");
    free(uid);
    free(gid);
    free(cap);
    free(bnd);
    free(nnp);
    free(sec);

    sb_policy_init_default(&s_policy);
    s_policy.memory_bytes = 512ull << 20;
    kb_pool_opts_t po = {.size = 2, .factory = f, .policy = &s_policy};
    kb_pool_t *pool = kb_pool_new(&po, &err);
    kb_kernel_t *k1 = s_take(pool, &err);
    kb_kernel_t *k2 = s_take(pool, &err);
    ok(k1 && k2, "two kernels are forked from the factory");
    if (!k1 || !k2) {
        diag("%s", err.text);
        return done_testing();
    }
    pid_t kp1 = kb_launcher_warm_kernel_pid(kb_kernel_launcher(k1));
    pid_t kp2 = kb_launcher_warm_kernel_pid(kb_kernel_launcher(k2));
    ok(kp1 > 0 && kp2 > 0 && kp1 != kp2 && kp1 != fpid,
       "each is its own forked process");
    EVAL_IS(k1, "1+1", "2", "a forked kernel runs code under its session key");

    char *a = s_eval(k1, "import random; print(random.random())", 30000, 0);
    char *b = s_eval(k2, "import random; print(random.random())", 30000, 0);
    ok(*a && strcmp(a, b) != 0,
       "random: two forked sessions draw different "
       "sequences (%s / %s)",
       a, b);
    free(a);
    free(b);
    a = s_eval(k1, "import numpy; print(numpy.random.rand())", 30000, 0);
    b = s_eval(k2, "import numpy; print(numpy.random.rand())", 30000, 0);
    ok(*a && strcmp(a, b) != 0, "numpy.random: different sequences too");
    free(a);
    free(b);
    a = s_eval(k1, "import os; print(os.urandom(16).hex())", 30000, 0);
    b = s_eval(k2, "import os; print(os.urandom(16).hex())", 30000, 0);
    ok(strlen(a) == 32 && strcmp(a, b) != 0,
       "os.urandom needs no reseeding (the kernel's CSPRNG, no process "
       "state)");
    free(a);
    free(b);
    char *key1 = s_key(k1), *key2 = s_key(k2);
    ok(key1 && key2 && strlen(key1) >= 32 && strcmp(key1, key2) != 0,
       "each forked session has its own HMAC key");
    free(key1);
    free(key2);

    free(s_eval(k1,
                "secret_var = 7\n"
                "import os\n"
                "os.environ['JA_ONLY_ONE'] = '1'\n"
                "open('/mnt/data/one.txt', 'w').write('1')\n"
                "open('/tmp/one.txt', 'w').write('1')\n",
                30000, NULL));
    EVAL_IS(k2,
            "import os\n"
            "print('secret_var' in dir(), 'JA_ONLY_ONE' in os.environ,\n"
            "      os.listdir('/mnt/data'), os.path.exists('/tmp/one.txt'))",
            "False False [] False",
            "variables, environment, /mnt/data and /tmp of one forked "
            "session are invisible to the other");
    EVAL_IS(k1,
            "import os\n"
            "print(os.getuid(), os.getgid(), os.getgroups(),\n"
            "      [l.split()[1] for l in open('/proc/self/status')\n"
            "       if l.split()[0] in ('CapEff:', 'CapBnd:', "
            "'NoNewPrivs:', 'Seccomp:')])",
            "1000 1000 [] ['0000000000000000', '0000000000000000', '1', '2']",
            "a forked kernel runs as uid 1000 with no capabilities, "
            "no_new_privs and a seccomp filter");
    EVAL_IS(k1,
            "import ctypes\n"
            "print(ctypes.CDLL(None, use_errno=True).ptrace(16, 1, 0, 0), "
            "ctypes.get_errno())",
            "-1 1", "ptrace is refused (EPERM) in a forked kernel");
    EVAL_IS(k1,
            "import os\n"
            "print(len([p for p in os.listdir('/proc') if p.isdigit()]) <= 3)",
            "True", "a forked kernel sees only its own box's processes");
    char code[256];
    snprintf(code, sizeof code,
             "import os\n"
             "try:\n"
             "    os.kill(%d, 0); print('reached')\n"
             "except OSError as e:\n"
             "    print(type(e).__name__)",
             (int)fpid);
    EVAL_IS(k1, code, "ProcessLookupError",
            "the factory's pid names nothing inside a forked session");
    /* Landlock (ABI >= 4) refuses the connect before the network
     * namespace's missing route can. */
    EVAL_IS(k1,
            "import socket\n"
            "s = socket.socket(); s.settimeout(3)\n"
            "try:\n"
            "    s.connect(('192.0.2.1', 80)); print('connected')\n"
            "except OSError as e:\n"
            "    print(e.errno, [n for _, n in socket.if_nameindex()])",
            sb_landlock_abi() >= 4 ? "13 ['lo']" : "101 ['lo']",
            "no network in a forked kernel: only loopback, and TCP connect "
            "refused by Landlock");
    if (sb_landlock_abi() >= 4)
        EVAL_IS(k1,
                "import socket\n"
                "try:\n"
                "    socket.socket().bind(('127.0.0.1', 0)); print('bound')\n"
                "except OSError as e:\n"
                "    print(e.errno)",
                "13",
                "a forked kernel is under Landlock too: a TCP bind, fine in "
                "its own network namespace, is refused");
    else
        skip("%s", sb_landlock_gap(sb_landlock_abi()));
    EVAL_IS(
        k1,
        "import os\n"
        "print([os.path.exists(p) for p in ('/etc/shadow', '/root',\n"
        "       '/work', '/home/user/../../etc/shadow', '/sys/fs/cgroup')])",
        "[False, False, False, False, False]",
        "host files are not there in a forked kernel");
    EVAL_IS(k1,
            "import ctypes\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "print(libc.unshare(0x10000000), ctypes.get_errno(),\n"
            "      libc.setns(0, 0), libc.mount(b'x', b'/tmp', b'tmpfs', 0, "
            "None))",
            "-1 1 -1 -1",
            "unshare, setns and mount are refused in a forked kernel (the "
            "cold sandbox's seccomp filter)");
    EVAL_IS(k1,
            "import pandas as pd\n"
            "pd.DataFrame({'a': [1, 3, 2]}).plot();",
            "<png>", "a DataFrame plot gives a PNG in a forked kernel");

    /* The cgroup: the host moved it into its box's. */
    char path[64], line[512] = "";
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)kp1);
    FILE *cg = fopen(path, "r");
    bool in_box = false;
    sb_sandbox_t *box1 = kb_launcher_warm_box(kb_kernel_launcher(k1));
    const char *mdir = sb_sandbox_cgroup_dir(box1, "memory");
    while (cg && mdir && fgets(line, sizeof line, cg)) {
        line[strcspn(line, "\n")] = '\0';
        char *rel = strchr(line, ':') ? strchr(strchr(line, ':') + 1, ':') : 0;
        size_t n = rel ? strlen(rel + 1) : 0, m = strlen(mdir);
        if (rel && strstr(line, "memory") && n > 1 && n <= m &&
            strcmp(mdir + m - n, rel + 1) == 0)
            in_box = true;
    }
    if (cg)
        fclose(cg);
    ok(!mdir || in_box, "a forked kernel is in its own box's memory cgroup");

    /* Bombs and crashes in k2. */
    EVAL_IS(k2,
            "import os, time\n"
            "n = 0\n"
            "try:\n"
            "    while n < 10000:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(20); os._exit(0)\n"
            "        n += 1\n"
            "except OSError as e:\n"
            "    print('stopped', e.errno, n < 200)",
            "stopped 11 True", "a fork bomb in a forked kernel hits its limit");
    EVAL_IS(k1, "import subprocess; print(subprocess.run(['true']).returncode)",
            "0", "the other forked session can still start processes");
    err_t xerr;
    char *r = s_eval(k2, "x = bytearray(1 << 30)", 60000, &xerr);
    ok(strcmp(r, "MemoryError") == 0 || xerr.code == ERR_KERNEL,
       "a memory bomb in a forked kernel is stopped by its own limit (%s)",
       *r ? r : xerr.text);
    free(r);
    EVAL_IS(k1, "secret_var", "7", "the other forked session keeps running");
    kb_kernel_destroy(&k2);
    kb_kernel_t *k3 = s_take(pool, &err);
    ok(k3 != NULL, "after that the factory still forks new kernels");
    if (k3) {
        r = s_eval(k3,
                   "import os, signal; os.kill(os.getpid(), "
                   "signal.SIGSEGV)",
                   30000, &xerr);
        free(r);
        ok(xerr.code == ERR_KERNEL && strstr(xerr.text, "signal 11"),
           "a crash of a forked kernel is seen as its own death (%s)",
           xerr.text);
        kb_kernel_destroy(&k3);
    }
    ok(kill(fpid, 0) == 0, "the factory survives bombs and crashes of its "
                           "children");
    EVAL_IS(k1, "1+1", "2", "and so does the other session");

    ok(kb_kernel_restart(k1, &err) == 0,
       "a forked kernel restarts (cold, in the same box)");
    EVAL_IS(k1, "import os; print(os.listdir('/mnt/data'))", "['one.txt']",
            "the restart keeps /mnt/data");
    kb_kernel_destroy(&k1);
    kb_pool_destroy(&pool);
    kb_factory_destroy(&f);
    ok(kill(fpid, 0) < 0 && errno == ESRCH, "destroying the factory ends it");
    sb_policy_release(&s_policy);
    return done_testing();
}
