/*
 * sb_cgroup: v2, else v1, else a warning.
 */
#include "sandbox/sb_cgroup.h"

#include "common/buf.h"
#include "common/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#define CG_ROOT "/sys/fs/cgroup"
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

enum { CG_MEMORY, CG_PIDS, CG_CPU, CG_N };
static const char *const s_ctl_names[CG_N] = {"memory", "pids", "cpu"};

struct sb_cgroup {
    int version;        /* 2, 1, or 0 when nothing is enforced */
    char *dir[CG_N];    /* owned; per-controller directory we created, or NULL
                           (v2: all three point to the same string in dir[0]) */
    char *parent[CG_N]; /* owned; the shared "jupyter-agent" parent, or
                           NULL (v1 cpu: the box's group has none) */
    bool limited[CG_N]; /* the limit was written successfully */
    char *warning;      /* owned; what is not enforced, or NULL */
    char *why;          /* owned; why v1 directories could not be made */
};

static int
s_write(const char *dir, const char *file, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int e = n < 0 ? errno : 0;
    close(fd);
    return n < 0 ? -e : 0;
}

static char *
s_read(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    buf_t b;
    buf_init(&b, 1 << 20);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (buf_append(&b, chunk, n) < 0)
            break;
    fclose(f);
    return buf_detach(&b, NULL);
}

/* Our cgroup path for a v1 controller (or "" for v2's "0::" line). */
static char *
s_own_path(const char *ctl)
{
    char *text = s_read("/proc/self/cgroup");
    char *result = NULL;
    if (!text)
        return NULL;
    for (char *line = strtok(text, "\n"); line && !result;
         line = strtok(NULL, "\n")) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0'; /* line: the hierarchy id ("0" on v2) */
        const char *list = c1 + 1, *path = c2 + 1;
        if (!ctl) {
            if (strcmp(line, "0") == 0 && *list == '\0')
                result = xstrdup(path);
            continue;
        }
        char *copy = xstrdup(list), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t;
             t = strtok_r(NULL, ",", &save))
            if (strcmp(t, ctl) == 0)
                result = xstrdup(path);
        free(copy);
    }
    free(text);
    return result;
}

static void
s_warn(sb_cgroup_t *cg, const char *add)
{
    char *w =
        cg->warning ? xasprintf("%s; %s", cg->warning, add) : xstrdup(add);
    free(cg->warning);
    cg->warning = w;
}

static bool
s_has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = text; p && (p = strstr(p, word)); p += n)
        if ((p == text || p[-1] == ' ' || p[-1] == '\n') &&
            (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
            return true;
    return false;
}

static int s_kill_listed(const char *dir);

/* The pid of the launcher that made sandbox cgroup `name`
 * ("<prefix><pid>-<suffix>"), or 0 when `name` is not one. */
static long
s_box_pid(const char *name, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0 || name[n] < '1' || name[n] > '9')
        return 0;
    char *end = NULL;
    long pid = strtol(name + n, &end, 10);
    return pid > 0 && end && *end == '-' ? pid : 0;
}

/* CPU fairness on v2, where a box's one directory (all controllers) sits
 * in the shared parent: a group weighs as much as its own weight says,
 * however many boxes it holds, so give the parent one ordinary task's
 * weight (cpu.weight 100) per live box: N busy boxes together get what N
 * unsandboxed kernels would rather than what one task gets (idle boxes
 * lend their share to busy ones; --cpus still caps each). Called whenever
 * a box is created or removed; launchers racing here each write a fresh
 * count, so the last write of a burst is right. Best effort. (v1 needs
 * none of this: each box's cpu group stands on its own, see s_v1_mkdir.) */
static void
s_weigh_parent(const char *parent)
{
    DIR *d = parent ? opendir(parent) : NULL;
    if (!d)
        return;
    long n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (s_box_pid(de->d_name, ""))
            n++;
    closedir(d);
    long w = (n < 1 ? 1 : n) * 100;
    char v[32];
    snprintf(v, sizeof v, "%ld", w < 10000 ? w : 10000);
    s_write(parent, "cpu.weight", v);
}

/* Remove the sandbox cgroups ("<prefix><pid>-<suffix>") under `parent` whose
 * launcher pid is gone: a launcher killed outright cannot clean up. What is
 * still inside is an orphan of that launcher's box (normally already dying
 * from the parent-death signal): kill it (cgroup.kill where the kernel has
 * it), then retry for up to ~100 ms,
 * since the kernel empties a cgroup a little after its tasks exit. */
static void
s_gc(const char *parent, const char *prefix)
{
    DIR *d = opendir(parent);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        long pid = s_box_pid(de->d_name, prefix);
        if (!pid || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char *path = xasprintf("%s/%s", parent, de->d_name);
        for (int round = 0; round < 50; round++) {
            if (rmdir(path) == 0 || errno != EBUSY)
                break;
            if (s_write(path, "cgroup.kill", "1") < 0) /* v1, or v2 < 5.14 */
                s_kill_listed(path);
            struct timespec ts = {0, 2 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        free(path);
    }
    if (d)
        closedir(d);
}

/* Enable `ctl` for the children of `dir` unless already on. */
static int
s_v2_enable(const char *dir, const char *ctl)
{
    char path[4096], plus[16];
    snprintf(path, sizeof path, "%s/cgroup.subtree_control", dir);
    char *sub = s_read(path);
    bool on = sub && s_has_word(sub, ctl);
    free(sub);
    if (on)
        return 0;
    snprintf(plus, sizeof plus, "+%s", ctl);
    return s_write(dir, "cgroup.subtree_control", plus);
}

/* The leaf a delegated cgroup's own processes move into, so that the
 * delegated cgroup itself may enable controllers for its children. */
#define CG_LEAF "jupyter-agent-launcher"

/* Whether `pid` is this process or one of its children. */
static bool
s_ours(long pid)
{
    if (pid == (long)getpid())
        return true;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    char *text = s_read(path);
    const char *rp = text ? strrchr(text, ')') : NULL;
    long ppid = -1;
    if (rp && sscanf(rp + 1, " %*c %ld", &ppid) != 1)
        ppid = -1;
    free(text);
    return ppid == (long)getpid();
}

/* Move the processes of `base` into base/CG_LEAF. The v2 "no internal
 * processes" rule forbids enabling controllers in a non-root cgroup that
 * holds processes, and a delegated cgroup (systemd's Delegate=yes) holds at
 * least the launcher; systemd expects the delegatee to do exactly this.
 * Only when every process there is ours (us or our children): a shell or a
 * terminal sharing the cgroup is left alone (-EBUSY). Returns 0 or -errno. */
static int
s_v2_evacuate(const char *base)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/cgroup.procs", base);
    char *text = s_read(path);
    if (!text)
        return -EACCES;
    int rc = 0;
    for (const char *t = text; *t && rc == 0; t = strchr(t, '\n') + 1) {
        if (!s_ours(strtol(t, NULL, 10)))
            rc = -EBUSY;
        if (!strchr(t, '\n'))
            break;
    }
    char *leaf = xasprintf("%s/" CG_LEAF, base);
    if (rc == 0 && mkdir(leaf, 0755) < 0 && errno != EEXIST)
        rc = -errno;
    for (char *t = rc == 0 ? strtok(text, "\n") : NULL; t && rc == 0;
         t = strtok(NULL, "\n")) {
        rc = s_write(leaf, "cgroup.procs", t);
        if (rc == -ESRCH) /* it exited meanwhile */
            rc = 0;
    }
    free(text);
    free(leaf);
    return rc;
}

/* v2 under `base`: base/jupyter-agent (no processes of its own, so it may
 * enable controllers for its children) and base/jupyter-agent/<id>. With
 * `delegated`, base's own processes move to base/CG_LEAF when they keep
 * base from enabling controllers. */
static int
s_try_v2_under(sb_cgroup_t *cg, const sb_policy_t *p, const char *base,
               bool delegated, const char *id)
{
    char *parent = xasprintf("%s/jupyter-agent", base);
    char *dir = NULL;
    int rc = -1;
    int e = s_v2_enable(base, "memory");
    if (e == -EBUSY && delegated && s_v2_evacuate(base) == 0)
        e = s_v2_enable(base, "memory");
    if (e < 0 || s_v2_enable(base, "pids") < 0)
        goto out;
    bool cpu = s_v2_enable(base, "cpu") == 0;
    if (mkdir(parent, 0755) < 0 && errno != EEXIST)
        goto out;
    if (s_v2_enable(parent, "memory") < 0 || s_v2_enable(parent, "pids") < 0)
        goto out;
    s_gc(parent, "");
    if (cpu)
        s_v2_enable(parent, "cpu");
    dir = xasprintf("%s/%s", parent, id);
    if (mkdir(dir, 0755) < 0)
        goto out;
    char v[64];
    snprintf(v, sizeof v, "%llu", (unsigned long long)p->memory_bytes);
    cg->limited[CG_MEMORY] = s_write(dir, "memory.max", v) == 0;
    snprintf(v, sizeof v, "%llu", (unsigned long long)p->swap_bytes);
    if (s_write(dir, "memory.swap.max", v) < 0 && p->swap_bytes == 0)
        s_warn(cg, "swap use not limited (no memory.swap.max)");
    snprintf(v, sizeof v, "%u", p->pids);
    cg->limited[CG_PIDS] = s_write(dir, "pids.max", v) == 0;
    long long q = (long long)(p->cpus * 100000.0);
    snprintf(v, sizeof v, "%lld 100000", q < 1000 ? 1000 : q);
    cg->limited[CG_CPU] = s_write(dir, "cpu.max", v) == 0;
    if (!cg->limited[CG_MEMORY] || !cg->limited[CG_PIDS]) {
        rmdir(dir);
        goto out;
    }
    cg->version = 2;
    if (cpu)
        s_weigh_parent(parent);
    cg->dir[0] = cg->dir[1] = cg->dir[2] = dir;
    cg->parent[0] = parent;
    parent = dir = NULL;
    rc = 0;
out:
    if (rc < 0)
        memset(cg->limited, 0, sizeof cg->limited);
    free(parent);
    free(dir);
    return rc;
}

/* v2: first under the hierarchy's root (exempt from the "no internal
 * processes" rule; root only), then under our own cgroup (works when it
 * was delegated with controllers on, e.g. a systemd unit with Delegate=). */
static int
s_try_v2(sb_cgroup_t *cg, const sb_policy_t *p, const char *id)
{
    struct statfs sf;
    if (statfs(CG_ROOT, &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC)
        return -1;
    if (s_try_v2_under(cg, p, CG_ROOT, false, id) == 0)
        return 0;
    char *own = s_own_path(NULL);
    int rc = -1;
    if (own && strcmp(own, "/") != 0) {
        /* Already moved to our leaf (an earlier sandbox): its parent. */
        size_t n = strlen(own), l = strlen("/" CG_LEAF);
        if (n > l && strcmp(own + n - l, "/" CG_LEAF) == 0)
            own[n - l] = '\0';
        char *base = xasprintf("%s%s", CG_ROOT, own);
        rc = s_try_v2_under(cg, p, base, true, id);
        free(base);
    }
    free(own);
    if (rc < 0)
        cg->why = xstrdup("cgroup v2 without delegated memory and pids "
                          "controllers; run as root, or under systemd-run "
                          "--user --scope -p Delegate=yes");
    return rc;
}

/* Create the v1 directory for controller i; returns 0 or -errno. */
static int
s_v1_mkdir(sb_cgroup_t *cg, int i, const char *id)
{
    char mnt[256];
    snprintf(mnt, sizeof mnt, "%s/%s", CG_ROOT, s_ctl_names[i]);
    struct statfs sf;
    if (statfs(mnt, &sf) < 0)
        return -errno;
    if (sf.f_type != CGROUP_SUPER_MAGIC)
        return -ENOENT;
    char *own = s_own_path(s_ctl_names[i]);
    if (!own)
        return -ENOENT;
    char *base = xasprintf("%s%s", mnt, strcmp(own, "/") ? own : "");
    free(own);
    if (i == CG_CPU) {
        /* CPU fairness: each box's cpu group stands beside the launcher's
         * own processes with the default weight (cpu.shares 1024), so a
         * busy box weighs what one unsandboxed process does and an idle
         * one nothing. In a shared parent, every box together would weigh
         * one task. */
        s_gc(base, "jupyter-agent-");
        cg->dir[i] = xasprintf("%s/jupyter-agent-%s", base, id);
        free(base);
        if (mkdir(cg->dir[i], 0755) == 0)
            return 0;
        int e = -errno;
        free(cg->dir[i]);
        cg->dir[i] = NULL;
        return e;
    }
    cg->parent[i] = xasprintf("%s/jupyter-agent", base);
    free(base);
    cg->dir[i] = xasprintf("%s/%s", cg->parent[i], id);
    int e = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        if (mkdir(cg->parent[i], 0755) < 0 && errno != EEXIST) {
            e = -errno;
            break;
        }
        s_gc(cg->parent[i], "");
        if (mkdir(cg->dir[i], 0755) == 0)
            return 0;
        e = -errno;
        if (errno != ENOENT) /* ENOENT: another sandbox removed the parent */
            break;
    }
    free(cg->dir[i]);
    cg->dir[i] = NULL;
    return e;
}

static void
s_try_v1(sb_cgroup_t *cg, const sb_policy_t *p, const char *id)
{
    char v[64];
    int first_error = 0;
    for (int i = 0; i < CG_N; i++) {
        int e = s_v1_mkdir(cg, i, id);
        if (e < 0) {
            if (!first_error)
                first_error = -e;
            continue;
        }
        const char *d = cg->dir[i];
        if (i == CG_MEMORY) {
            snprintf(v, sizeof v, "%llu", (unsigned long long)p->memory_bytes);
            cg->limited[i] = s_write(d, "memory.limit_in_bytes", v) == 0;
            snprintf(v, sizeof v, "%llu",
                     (unsigned long long)(p->memory_bytes + p->swap_bytes));
            if (s_write(d, "memory.memsw.limit_in_bytes", v) < 0)
                s_warn(cg,
                       "swap use not limited (no memory.memsw.limit_in_bytes; "
                       "boot with swapaccount=1)");
            if (p->swap_bytes == 0)
                s_write(d, "memory.swappiness", "0");
        } else if (i == CG_PIDS) {
            snprintf(v, sizeof v, "%u", p->pids);
            cg->limited[i] = s_write(d, "pids.max", v) == 0;
        } else {
            s_write(d, "cpu.cfs_period_us", "100000");
            long long q = (long long)(p->cpus * 100000.0);
            snprintf(v, sizeof v, "%lld", q < 1000 ? 1000 : q);
            cg->limited[i] = s_write(d, "cpu.cfs_quota_us", v) == 0;
        }
        if (!cg->limited[i]) {
            rmdir(d);
            free(cg->dir[i]);
            cg->dir[i] = NULL;
        }
    }
    if (cg->dir[CG_MEMORY] || cg->dir[CG_PIDS] || cg->dir[CG_CPU])
        cg->version = 1;
    if (first_error && !cg->version)
        cg->why = cg->why ? cg->why : xstrdup(strerror(first_error));
}

sb_cgroup_t *
sb_cgroup_new(const sb_policy_t *p, const char *id)
{
    sb_cgroup_t *cg = xcalloc(1, sizeof *cg);
    if (s_try_v2(cg, p, id) < 0)
        s_try_v1(cg, p, id);
    char missing[64] = "";
    for (int i = 0; i < CG_N; i++) {
        if (cg->limited[i])
            continue;
        if (missing[0])
            strcat(missing, ", ");
        strcat(missing, s_ctl_names[i]);
    }
    if (missing[0]) {
        char *w = xasprintf(
            "cgroups %s%s%s: %s limits not enforced (rlimits only: "
            "RLIMIT_DATA caps each process's memory, RLIMIT_NPROC the "
            "process count)",
            cg->version ? "partly unavailable" : "unavailable",
            cg->why ? " - " : "", cg->why ? cg->why : "", missing);
        s_warn(cg, w);
        free(w);
    }
    return cg;
}

int
sb_cgroup_enter(sb_cgroup_t *cg, pid_t pid, err_t *err)
{
    char v[32];
    snprintf(v, sizeof v, "%d", (int)pid);
    for (int i = 0; i < CG_N; i++) {
        if (!cg->dir[i] || (cg->version == 2 && i > 0))
            continue;
        int e = s_write(cg->dir[i], "cgroup.procs", v);
        if (e < 0)
            return err_errnum(err, ERR_SANDBOX, -e,
                              "sandbox: moving pid %d into cgroup %s", (int)pid,
                              cg->dir[i]);
    }
    return 0;
}

/* Kill what cgroup.procs lists; returns how many were listed. */
static int
s_kill_listed(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    char *text = s_read(path);
    int n = 0;
    for (char *t = text ? strtok(text, "\n") : NULL; t;
         t = strtok(NULL, "\n")) {
        long pid = strtol(t, NULL, 10);
        if (pid > 1 && kill((pid_t)pid, SIGKILL) == 0)
            n++;
    }
    free(text);
    return n;
}

void
sb_cgroup_kill(sb_cgroup_t *cg)
{
    if (!cg)
        return;
    if (cg->version == 2 && s_write(cg->dir[0], "cgroup.kill", "1") == 0)
        return;
    const char *dir = cg->dir[CG_PIDS] ? cg->dir[CG_PIDS] : cg->dir[CG_MEMORY];
    if (!dir)
        dir = cg->dir[CG_CPU];
    for (int round = 0; dir && round < 50; round++) {
        if (s_kill_listed(dir) == 0)
            break;
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

long
sb_cgroup_oom_kills(const sb_cgroup_t *cg)
{
    if (!cg || !cg->dir[CG_MEMORY])
        return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", cg->dir[CG_MEMORY],
             cg->version == 2 ? "memory.events" : "memory.oom_control");
    char *text = s_read(path);
    long n = 0;
    char *at = text ? strstr(text, "oom_kill ") : NULL;
    if (at)
        n = strtol(at + strlen("oom_kill "), NULL, 10);
    free(text);
    return n;
}

long
sb_cgroup_pids_max_hits(const sb_cgroup_t *cg)
{
    if (!cg || !cg->dir[CG_PIDS])
        return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/pids.events", cg->dir[CG_PIDS]);
    char *text = s_read(path);
    long n = 0;
    char *at = text ? strstr(text, "max ") : NULL;
    if (at)
        n = strtol(at + strlen("max "), NULL, 10);
    free(text);
    return n;
}

void
sb_cgroup_destroy(sb_cgroup_t **pcg)
{
    if (!pcg || !*pcg)
        return;
    sb_cgroup_t *cg = *pcg;
    *pcg = NULL;
    int n = cg->version == 2 ? 1 : CG_N;
    for (int i = 0; i < n; i++) {
        if (!cg->dir[i])
            continue;
        /* Processes leave the cgroup only once reaped; retry for ~2 s. */
        for (int round = 0; round < 200; round++) {
            if (rmdir(cg->dir[i]) == 0 || errno == ENOENT)
                break;
            if (errno != EBUSY)
                break;
            sb_cgroup_kill(cg);
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (cg->version == 2)
            s_weigh_parent(cg->parent[i]);
        if (cg->parent[i])
            rmdir(cg->parent[i]); /* fails harmlessly while others use it */
    }
    sb_cgroup_forget(&cg);
}

void
sb_cgroup_forget(sb_cgroup_t **pcg)
{
    if (!pcg || !*pcg)
        return;
    sb_cgroup_t *cg = *pcg;
    *pcg = NULL;
    int n = cg->version == 2 ? 1 : CG_N;
    for (int i = 0; i < n; i++)
        free(cg->dir[i]);
    for (int i = 0; i < CG_N; i++)
        free(cg->parent[i]);
    free(cg->warning);
    free(cg->why);
    free(cg);
}

bool
sb_cgroup_limits_memory(const sb_cgroup_t *cg)
{
    return cg && cg->limited[CG_MEMORY];
}

bool
sb_cgroup_limits_cpu(const sb_cgroup_t *cg)
{
    return cg && cg->limited[CG_CPU];
}

int
sb_cgroup_set_cpu_weight(sb_cgroup_t *cg, unsigned weight)
{
    /* v2 only: there the boxes are siblings under one parent weighed per
     * live box, so a weight moves CPU between boxes. A v1 box's cpu group
     * stands beside everything else on the machine, where a low weight
     * would starve it under anyone's load. */
    if (!cg || cg->version != 2 || !cg->dir[CG_CPU])
        return -1;
    weight = weight < 1 ? 1 : weight > 10000 ? 10000 : weight;
    char v[32];
    snprintf(v, sizeof v, "%u", weight);
    return s_write(cg->dir[CG_CPU], "cpu.weight", v) == 0 ? 0 : -1;
}

const char *
sb_cgroup_dir(const sb_cgroup_t *cg, const char *controller)
{
    for (int i = 0; cg && i < CG_N; i++)
        if (strcmp(controller, s_ctl_names[i]) == 0)
            return cg->dir[i];
    return NULL;
}

const char *
sb_cgroup_warning(const sb_cgroup_t *cg)
{
    return cg ? cg->warning : NULL;
}
