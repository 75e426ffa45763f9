/* sb_gvisor_ckpt: pause a gVisor box with its memory and resume it
 * (sb_sandbox_pause, sb_sandbox_resume in sb_sandbox.h).
 *
 * Pause: the box's relay lets go of its host stream (gVisor cannot save a
 * host socket: sb_gvisor_relay.py), `runsc checkpoint` writes the whole
 * sandbox to the image dir and ends it, and we seal the image: an
 * HMAC-SHA256, by the caller's key, over the box's id and every file's
 * name, size and bytes. The workspace tmpfs stays mounted in runsc's
 * mount namespace, which we hold by an fd: no process is left.
 * Resume: the image dir must be ours (a directory owned by our euid,
 * mode 0700, holding only regular files of ours that no one else may
 * write, each with one link) and its seal must match, before runsc reads
 * it; then `runsc restore` (a new container id, the same bundle) in that
 * mount namespace and the box's cgroup, and a new relay host end, which
 * the parked relay reconnects to. */
#include "sandbox/sb_gvisor.h"

#include "common/strv.h"
#include "common/xalloc.h"
#include "sandbox/sb_engine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/sb_sandbox_impl.h"

#define S_SEAL "seal"
#define S_MAX_FILES 64
#define S_PARK_MS 10000
#define S_END_MS 20000

extern char **environ;

static char *
s_container_id(const sb_sandbox_t *sb)
{
    return sb->gv->restores ? xasprintf("ja-%s-r%u", sb->id, sb->gv->restores)
                            : xasprintf("ja-%s", sb->id);
}

/* Run a runsc command to its end; its exit status, or -1. */
static int
s_runsc(char **argv)
{
    pid_t pid;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
    char *env[] = {path_env, NULL};
    int e = posix_spawn(&pid, argv[0], &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    if (e) {
        errno = e;
        return -1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int
s_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The image's files (not the seal), sorted; checks each is a plain file
 * of ours. New strv, or NULL + err. */
static char **
s_image_files(int dfd, const char *dir, err_t *err)
{
    DIR *d = fdopendir(dup(dfd));
    if (!d) {
        err_errno(err, ERR_SANDBOX, "sandbox: reading the image %s", dir);
        return NULL;
    }
    char **v = xcalloc(S_MAX_FILES + 1, sizeof *v);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            !strcmp(e->d_name, S_SEAL))
            continue;
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
            (st.st_mode & 022) || st.st_nlink != 1 || n == S_MAX_FILES) {
            err_set(err, ERR_VERIFY,
                    "sandbox: the checkpoint image %s holds '%.60s', which is "
                    "not a plain file of ours (uid %u, not writable by "
                    "others, one link); refusing to restore it",
                    dir, e->d_name, (unsigned)geteuid());
            closedir(d);
            strv_free(v);
            return NULL;
        }
        v[n++] = xstrdup(e->d_name);
    }
    closedir(d);
    qsort(v, n, sizeof *v, s_cmp);
    return v;
}

/* The seal of the image in `dfd` for box `id`, into mac. 0 or -1. */
static int
s_seal(int dfd, const char *dir, const char *id,
       const unsigned char key[SB_SEAL_KEY_BYTES],
       unsigned char mac[crypto_auth_hmacsha256_BYTES], err_t *err)
{
    char **files = s_image_files(dfd, dir, err);
    if (!files)
        return -1;
    crypto_auth_hmacsha256_state h;
    crypto_auth_hmacsha256_init(&h, key, SB_SEAL_KEY_BYTES);
    static const char tag[] = "jupyter-agent gvisor image v1";
    crypto_auth_hmacsha256_update(&h, (const unsigned char *)tag, sizeof tag);
    crypto_auth_hmacsha256_update(&h, (const unsigned char *)id,
                                  strlen(id) + 1);
    int rc = 0;
    unsigned char *buf = xmalloc(1 << 20);
    for (size_t i = 0; files[i] && rc == 0; i++) {
        int fd = openat(dfd, files[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
            rc = err_errno(err, ERR_SANDBOX, "sandbox: reading %s/%s", dir,
                           files[i]);
            if (fd >= 0)
                close(fd);
            break;
        }
        unsigned char sz[8];
        for (int b = 0; b < 8; b++)
            sz[b] =
                (unsigned char)((unsigned long long)st.st_size >> (56 - 8 * b));
        crypto_auth_hmacsha256_update(&h, (const unsigned char *)files[i],
                                      strlen(files[i]) + 1);
        crypto_auth_hmacsha256_update(&h, sz, sizeof sz);
        ssize_t got;
        long long total = 0;
        while ((got = read(fd, buf, 1 << 20)) > 0) {
            crypto_auth_hmacsha256_update(&h, buf, (size_t)got);
            total += got;
        }
        if (got < 0 || total != (long long)st.st_size)
            rc = err_errno(err, ERR_SANDBOX, "sandbox: reading %s/%s", dir,
                           files[i]);
        close(fd);
    }
    free(buf);
    strv_free(files);
    crypto_auth_hmacsha256_final(&h, mac);
    return rc;
}

/* The image dir `dir` is a directory of ours that no one else may enter:
 * an fd on it, or -1 + err. */
static int
s_open_image(const char *dir, err_t *err)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (dfd < 0) {
        err_errno(err, ERR_SANDBOX, "sandbox: opening the checkpoint image %s",
                  dir);
        return -1;
    }
    if (fstat(dfd, &st) < 0 || st.st_uid != geteuid() ||
        (st.st_mode & 07777) != 0700) {
        err_set(err, ERR_VERIFY,
                "sandbox: the checkpoint image %s is owned by uid %u with "
                "mode %04o, not ours (uid %u, 0700): another user could "
                "have read or swapped it; refusing to restore it",
                dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
                (unsigned)geteuid());
        close(dfd);
        return -1;
    }
    return dfd;
}

/* Some process is still in the box's cgroup. */
static bool
s_cgroup_busy(const sb_sandbox_t *sb)
{
    const char *d = sb_cgroup_dir(sb->cg, "pids");
    if (!d)
        d = sb_cgroup_dir(sb->cg, "memory");
    if (!d)
        return false;
    char *path = xasprintf("%s/cgroup.procs", d);
    FILE *f = fopen(path, "r");
    free(path);
    int c = f ? fgetc(f) : EOF;
    if (f)
        fclose(f);
    return c != EOF;
}

static int
s_gvisor_only(const sb_sandbox_t *sb, const char *what, err_t *err)
{
    if (sb->gv)
        return 0;
    return err_set(err, ERR_USAGE,
                   "sandbox: cannot %s with memory on the namespaces engine: "
                   "the host kernel runs the box and nothing can save its "
                   "processes; use --engine gvisor (its checkpoint), or a "
                   "files-only pause (/mnt/data kept, the kernel restarted)",
                   what);
}

int
sb_sandbox_pause(sb_sandbox_t *sb, const char *dir,
                 const unsigned char key[SB_SEAL_KEY_BYTES], err_t *err)
{
    if (s_gvisor_only(sb, "pause a box", err) < 0)
        return -1;
    struct sb_gv *g = sb->gv;
    if (g->paused || sb->state != ST_RUNNING || !g->relay)
        return err_set(err, ERR_USAGE, "sandbox: cannot pause box %s: it is %s",
                       sb->id, g->paused ? "paused already" : "not running");
    if (!dir)
        return 0;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return err_errno(err, ERR_SANDBOX,
                         "sandbox: making the checkpoint image dir %s", dir);
    int dfd = s_open_image(dir, err);
    if (dfd < 0)
        return -1;
    int rc = -1;
    char **argv = NULL, *id = s_container_id(sb);
    if (sb_gv_relay_park(g->relay, S_PARK_MS) < 0) {
        err_errno(err, ERR_SANDBOX,
                  "sandbox: the relay in box %s did not let go of its host "
                  "stream for the checkpoint",
                  sb->id);
        goto out;
    }
    int k = 0;
    argv = sb_gv_runsc_argv(g, &k);
    argv[k++] = xstrdup("checkpoint");
    argv[k++] = xasprintf("--image-path=%s", dir);
    argv[k++] = xstrdup(id);
    int st = s_runsc(argv);
    /* runsc run ends with the checkpointed sandbox (or a failed one) */
    struct pollfd pf = {.fd = sb->pidfd, .events = POLLIN};
    if (poll(&pf, 1, S_END_MS) <= 0)
        syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
    sb_cgroup_kill(sb->cg);
    siginfo_t si;
    waitid((idtype_t)P_PIDFD, (id_t)sb->pidfd, &si, WEXITED);
    close(sb->pidfd);
    sb->pidfd = -1;
    sb->pid = -1;
    if (sb->ctl >= 0)
        close(sb->ctl);
    sb->ctl = -1;
    sb_gv_relay_destroy(&g->relay);
    sb->state = ST_REAPED;
    memset(&sb->exit, 0, sizeof sb->exit);
    sb->exit.kind = SB_SIGNALED;
    sb->exit.signal = SIGKILL;
    if (st != 0) {
        char *why = sb_gv_runsc_reason(g);
        err_set(err, ERR_SANDBOX,
                "sandbox: runsc could not checkpoint box %s (exit %d), and "
                "the box ended: %s",
                sb->id, st, why);
        free(why);
        goto out;
    }
    if (s_cgroup_busy(sb)) {
        err_set(err, ERR_SANDBOX,
                "sandbox: box %s was checkpointed but processes are left in "
                "its cgroup; it was killed",
                sb->id);
        goto out;
    }
    g->paused = true;
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    if (s_seal(dfd, dir, sb->id, key, mac, err) < 0)
        goto out;
    int sfd =
        openat(dfd, S_SEAL,
               O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (sfd < 0 || write(sfd, mac, sizeof mac) != (ssize_t)sizeof mac ||
        fsync(sfd) < 0) {
        err_errno(err, ERR_SANDBOX, "sandbox: writing the seal of %s", dir);
        if (sfd >= 0)
            close(sfd);
        goto out;
    }
    close(sfd);
    rc = 0;
out:
    close(dfd);
    strv_free(argv);
    free(id);
    return rc;
}

int
sb_sandbox_resume(sb_sandbox_t *sb, const char *dir,
                  const unsigned char key[SB_SEAL_KEY_BYTES], err_t *err)
{
    if (s_gvisor_only(sb, "resume a box", err) < 0)
        return -1;
    struct sb_gv *g = sb->gv;
    if (!g->paused)
        return err_set(err, ERR_USAGE,
                       "sandbox: cannot resume box %s: it is not paused",
                       sb->id);
    int dfd = s_open_image(dir, err);
    if (dfd < 0)
        return -1;
    int rc = -1;
    char **argv = NULL, *id = NULL, *state = NULL, *relay = NULL;
    unsigned char want[crypto_auth_hmacsha256_BYTES],
        got[crypto_auth_hmacsha256_BYTES + 1];
    int sfd = openat(dfd, S_SEAL, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    ssize_t n = sfd >= 0 ? read(sfd, got, sizeof got) : -1;
    bool seal_ok = sfd >= 0 && fstat(sfd, &st) == 0 && S_ISREG(st.st_mode) &&
                   st.st_uid == geteuid() && n == (ssize_t)sizeof want;
    if (sfd >= 0)
        close(sfd);
    if (!seal_ok) {
        err_set(err, ERR_VERIFY,
                "sandbox: the checkpoint image %s has no seal of ours; "
                "refusing to restore it",
                dir);
        goto out;
    }
    if (s_seal(dfd, dir, sb->id, key, want, err) < 0)
        goto out;
    if (sodium_memcmp(want, got, sizeof want) != 0) {
        err_set(err, ERR_VERIFY,
                "sandbox: the checkpoint image %s does not match its seal: "
                "it was changed, truncated or swapped since box %s was "
                "paused; refusing to restore it",
                dir, sb->id);
        goto out;
    }
    g->restores++;
    id = s_container_id(sb);
    state = xasprintf("%s/state", g->dir);
    relay = xasprintf("%s/relay", g->relay_dir);
    sb_files_remove_tree(state);
    if (mkdir(state, 0700) < 0) {
        err_errno(err, ERR_SANDBOX, "sandbox: preparing %s", state);
        goto out;
    }
    g->relay = sb_gv_relay_new(relay, sb->sock_dir, err);
    if (!g->relay)
        goto out;
    int k = 0;
    argv = sb_gv_runsc_argv(g, &k);
    argv[k++] = xstrdup("restore");
    argv[k++] = xasprintf("--image-path=%s", dir);
    argv[k++] = xasprintf("--bundle=%s", g->dir);
    argv[k++] = xstrdup(id);
    if (sb_gv_restore(sb, argv, err) < 0) {
        sb_gv_relay_destroy(&g->relay);
        goto out;
    }
    g->paused = false;
    sb->killed = false;
    rc = 0;
out:
    close(dfd);
    strv_free(argv);
    free(id);
    free(state);
    free(relay);
    return rc;
}

bool
sb_sandbox_paused(const sb_sandbox_t *sb)
{
    return sb->gv && sb->gv->paused;
}
