/* gvisor_ckpt: a real ipykernel in a gVisor box, paused with its memory
 * (runsc checkpoint) and resumed (runsc restore): a variable, an imported
 * module, an open file handle, a numpy array's bytes and a file in
 * /mnt/data come back; no process is left while paused; the image dir is
 * 0700; a hostile image (edited, truncated, owned by another uid, open to
 * others, sealed by another key) is refused before runsc reads it. */
#include "../tap.h"
#include "../tools/kernel_run.h"
#include "agent/session/ag_pause_memory.h"
#include "common/clock.h"
#include "sandbox/sb_engine.h"

#include <dirent.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_tmp[] = "/tmp/ja-gvckpt-XXXXXX";

/* Processes whose command line names `needle` (the box's top dir). */
static int
s_procs_naming(const char *needle)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    char self[16];
    snprintf(self, sizeof self, "%d", (int)getpid());
    while (d && (e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9' ||
            !strcmp(e->d_name, self))
            continue;
        char path[300], buf[4096];
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t got = read(fd, buf, sizeof buf - 1);
        close(fd);
        for (ssize_t i = 0; i < got; i++)
            if (!buf[i])
                buf[i] = ' ';
        buf[got > 0 ? got : 0] = '\0';
        if (strstr(buf, needle))
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

/* Lines in the box's pids cgroup.procs (its name ends in the top dir's
 * suffix), or -1 if not found. */
static int
s_cgroup_procs(const char *suffix)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "f=$(find /sys/fs/cgroup/pids /sys/fs/cgroup/unified -maxdepth 5 "
             "-type d -name '*-%s' 2>/dev/null | head -1); "
             "[ -n \"$f\" ] && wc -l < \"$f/cgroup.procs\" || echo -1",
             suffix);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1)
        n = -1;
    if (p)
        pclose(p);
    return n;
}

static int
s_resume_refused(kb_kernel_t *k, const char *img, const unsigned char *key,
                 const char *want, const char *what)
{
    err_t err = {0};
    int rc = kb_kernel_resume(k, img, key, &err);
    return ok(rc < 0 && err.code == ERR_VERIFY && strstr(err.text, want) &&
                  kb_kernel_paused(k),
              "an image %s is refused before restore (%s)", what, err.text);
}

static void
s_copy(const char *from, const char *to)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cp -p '%s' '%s'", from, to);
    if (system(cmd) != 0)
        diag("cp failed");
}

int
main(void)
{
    err_t err = {0};
    char *runsc = sb_gvisor_find_runsc(&err);
    if (!runsc || geteuid() != 0) {
        printf("1..0 # SKIP --engine gvisor needs runsc and root\n");
        return 0;
    }
    free(runsc);
    if (!mkdtemp(s_tmp) || sodium_init() < 0)
        return 1;
    setenv("JUPYTER_AGENT_ENGINE", "gvisor", 1);
    /* The session layer, as the E2B server's pause would use it. */
    ag_session_opts_t so;
    ag_session_opts_init(&so);
    so.warm = AG_WARM_COLD;
    ag_session_t *s = ag_session_start(&so, &err);
    if (!ok(s != NULL, "a session's ipykernel starts under --engine gvisor")) {
        diag("%s", err.text);
        done_testing();
    }
    kb_kernel_t *k = ag_session_kernel(s);
    const char *run_dir =
        kb_kernel_launcher(k)->ops->run_dir(kb_kernel_launcher(k)->self);
    char *top = xstrdup(run_dir);
    *strrchr(top, '/') = '\0';
    const char *suffix = strrchr(top, '-') + 1;
    char *text = kernel_run_text(
        k,
        "import sys, hashlib, numpy as np\n"
        "import fractions\n"
        "x = 41\n"
        "fh = open('/mnt/data/handle.txt', 'w+'); fh.write('hello'); "
        "fh.flush()\n"
        "a = np.arange(100000, dtype=np.int64) * 7\n"
        "open('/mnt/data/kept.txt', 'w').write('kept')\n"
        "print(hashlib.sha256(a.tobytes()).hexdigest())\n",
        60000);
    ok(text && strlen(text) >= 64, "state set up in the kernel");
    char *digest = text ? xstrndup(text, 64) : xstrdup("?");
    free(text);

    unsigned char key[KB_PAUSE_KEY_BYTES], other[KB_PAUSE_KEY_BYTES];
    randombytes_buf(key, sizeof key);
    randombytes_buf(other, sizeof other);
    int64_t t0 = clock_mono_ms();
    ag_mem_pause_t *pz = ag_session_pause_memory(s, s_tmp, &err);
    int64_t t_pause = clock_mono_ms() - t0;
    if (!ok(pz != NULL, "the session is paused with its memory (%lld ms)",
            (long long)t_pause)) {
        diag("%s", err.text);
        done_testing();
    }
    char *img = xstrdup(ag_mem_pause_dir(pz));
    diag("image: %llu KiB", (unsigned long long)ag_mem_pause_bytes(pz) / 1024);
    struct stat st;
    memset(&st, 0, sizeof st);
    int sr = stat(img, &st);
    ok(sr == 0 && (st.st_mode & 07777) == 0700 && st.st_uid == geteuid(),
       "the image dir is ours, mode 0700 (%04o)", (unsigned)st.st_mode & 07777);
    is_int(s_procs_naming(top), 0,
           "no process of the paused box is left (runsc, gofer, Sentry)");
    is_int(s_cgroup_procs(suffix), 0, "the box's cgroup holds no process");
    text = kernel_run_text(k, "print(1)", 5000);
    ok(text == NULL, "a paused kernel refuses to execute");
    free(text);

    t0 = clock_mono_ms();
    int rc = ag_session_resume_memory(s, &pz, &err);
    int64_t t_resume = clock_mono_ms() - t0;
    if (!ok(rc == 0 && !pz && access(img, F_OK) < 0,
            "the box is restored, a new client connects, the image is "
            "removed (%lld ms)",
            (long long)t_resume))
        diag("%s", err.text);
    text =
        kernel_run_text(k,
                        "fh.seek(0)\n"
                        "print(x + 1, 'fractions' in sys.modules, fh.read(),\n"
                        "      hashlib.sha256(a.tobytes()).hexdigest(),\n"
                        "      open('/mnt/data/kept.txt').read())\n",
                        30000);
    char *want = xasprintf("42 True hello %s kept\n", digest);
    is_str(text, want,
           "variable, module, open file handle, array bytes and /mnt/data "
           "file are back");
    free(text);
    free(want);

    /* Hostile images: pause again, then spoil a copy of what runsc reads. */
    char *img2 = xasprintf("%s/image2", s_tmp);
    rc = kb_kernel_pause(k, img2, key, &err);
    if (!ok(rc == 0, "a second pause"))
        diag("%s", err.text);
    char *ck = xasprintf("%s/checkpoint.img", img2);
    char *bak = xasprintf("%s/checkpoint.bak", s_tmp);
    s_copy(ck, bak);
    int fd = open(ck, O_RDWR);
    char b = 0;
    if (fd >= 0 && pread(fd, &b, 1, 100) == 1) {
        b ^= 1;
        if (pwrite(fd, &b, 1, 100) != 1)
            diag("pwrite");
    }
    if (fd >= 0)
        close(fd);
    s_resume_refused(k, img2, key, "does not match its seal", "edited");
    s_copy(bak, ck);
    if (truncate(ck, 4096) < 0)
        diag("truncate");
    s_resume_refused(k, img2, key, "does not match its seal", "truncated");
    s_copy(bak, ck);
    s_resume_refused(k, img2, other, "does not match its seal",
                     "sealed by another key (another session's)");
    if (chown(img2, 4242, 4242) < 0)
        diag("chown");
    s_resume_refused(k, img2, key, "owned by uid 4242", "owned by another uid");
    if (chown(img2, 0, 0) < 0 || chmod(img2, 0755) < 0)
        diag("chown");
    s_resume_refused(k, img2, key, "mode 0755", "open to others");
    chmod(img2, 0700);
    if (chown(ck, 4242, 4242) < 0)
        diag("chown");
    s_resume_refused(k, img2, key, "not a plain file of ours",
                     "holding a file of another uid");
    if (chown(ck, 0, 0) < 0)
        diag("chown");
    rc = kb_kernel_resume(k, img2, key, &err);
    if (!ok(rc == 0, "the untouched image restores"))
        diag("%s", err.text);
    text = kernel_run_text(k, "print(x * 2)", 30000);
    is_str(text, "82\n", "the kernel answers after the second restore");
    free(text);

    ag_session_destroy(&s);
    is_int(s_procs_naming(top), 0, "teardown leaves no process");

    /* The namespaces engine says why it cannot, and its kernel runs on. */
    setenv("JUPYTER_AGENT_ENGINE", "namespaces", 1);
    ag_session_opts_t no;
    ag_session_opts_init(&no);
    no.warm = AG_WARM_COLD;
    ag_session_t *ns = ag_session_start(&no, &err);
    ag_mem_pause_t *nz = ns ? ag_session_pause_memory(ns, s_tmp, &err) : NULL;
    ok(ns && !nz && err.code == ERR_USAGE &&
           strstr(err.text, "--engine gvisor"),
       "a memory pause on the namespaces engine is refused with the reason "
       "(%s)",
       err.text);
    text = ns ? kernel_run_text(ag_session_kernel(ns), "print(6 * 7)", 30000)
              : NULL;
    is_str(text, "42\n", "and that kernel still answers");
    free(text);
    ag_session_destroy(&ns);
    ag_session_opts_release(&no);
    ag_session_opts_release(&so);
    printf("# pause %lld ms, resume to kernel_info %lld ms\n",
           (long long)t_pause, (long long)t_resume);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_tmp);
    if (system(cmd) != 0)
        diag("cleanup");
    free(img);
    free(img2);
    free(ck);
    free(bak);
    free(digest);
    free(top);
    done_testing();
}
