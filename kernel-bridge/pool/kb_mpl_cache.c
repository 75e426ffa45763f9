#include "kernel-bridge/pool/kb_mpl_cache.h"

#include "common/fileio.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PYTHON "/usr/bin/python3"
#define CACHE_MAX (8 << 20)

static char *
s_cache_dir(void)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (xdg && *xdg == '/')
        return xasprintf("%s/jupyter-agent/matplotlib", xdg);
    if (home && *home == '/')
        return xasprintf("%s/.cache/jupyter-agent/matplotlib", home);
    return NULL;
}

static time_t
s_mtime(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_mtime : 0;
}

/* True if `dir` holds a font list newer than every font directory. */
static bool
s_fresh(const char *dir)
{
    static const char *const fonts[] = {"/usr/share/fonts", "/etc/fonts",
                                        "/usr/share/matplotlib", NULL};
    DIR *d = opendir(dir);
    time_t built = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, "fontlist-", 9) == 0) {
            char *p = xasprintf("%s/%s", dir, e->d_name);
            built = s_mtime(p);
            free(p);
        }
    if (d)
        closedir(d);
    if (!built)
        return false;
    for (int i = 0; fonts[i]; i++)
        if (s_mtime(fonts[i]) > built)
            return false;
    return true;
}

static void
s_mkdirs(const char *path)
{
    char *p = xstrdup(path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0700);
            *s = '/';
        }
    mkdir(p, 0700);
    free(p);
}

/* Remove a directory holding only plain files. */
static void
s_remove_dir(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlinkat(dirfd(d), e->d_name, 0);
    if (d)
        closedir(d);
    rmdir(path);
}

/* Build the font list into a fresh temporary dir, then rename it into
 * place, so concurrent agents never see half a cache. */
static int
s_build(const char *dir)
{
    char *tmp = xasprintf("%s.tmp-%ld", dir, (long)getpid());
    char *old = xasprintf("%s.old-%ld", dir, (long)getpid());
    char *env_dir = xasprintf("MPLCONFIGDIR=%s", tmp);
    /* posix_spawn wants mutable strings; these arrays are ours. */
    char backend[] = "MPLBACKEND=Agg", path[] = "PATH=/usr/bin:/bin";
    char python[] = PYTHON, dash_c[] = "-c";
    char code[] = "import matplotlib.font_manager";
    char *envp[] = {env_dir, backend, path, NULL};
    char *argv[] = {python, dash_c, code, NULL};
    posix_spawn_file_actions_t fa;
    int rc = -1, status = 0;
    pid_t pid;

    s_mkdirs(tmp);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&pid, PYTHON, &fa, NULL, argv, envp) == 0 &&
        waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
        WEXITSTATUS(status) == 0 && s_fresh(tmp)) {
        rename(dir, old); /* a stale cache, if any, goes aside */
        rc = rename(tmp, dir);
        s_remove_dir(old);
    }
    posix_spawn_file_actions_destroy(&fa);
    if (rc)
        s_remove_dir(tmp);
    free(env_dir);
    free(old);
    free(tmp);
    return rc;
}

/* Copy the regular files of `from` into `to` (created), chowned. */
static int
s_copy(const char *from, const char *to, uid_t uid, gid_t gid)
{
    DIR *d = opendir(from);
    if (!d)
        return -1;
    if (mkdir(to, 0700) != 0 || chown(to, uid, gid) != 0) {
        closedir(d);
        return -1;
    }
    int out = open(to, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct dirent *e;
    int rc = out < 0 ? -1 : 0;
    while (rc == 0 && (e = readdir(d))) {
        if (strncmp(e->d_name, "fontlist-", 9) != 0)
            continue;
        int in = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (in < 0 || fstat(in, &st) || !S_ISREG(st.st_mode) ||
            st.st_size > CACHE_MAX) {
            if (in >= 0)
                close(in);
            continue;
        }
        char *buf = xmalloc((size_t)st.st_size + 1);
        ssize_t n = read(in, buf, (size_t)st.st_size);
        close(in);
        if (n == st.st_size &&
            file_write_atomic_at(out, e->d_name, buf, (size_t)n, 0600,
                                 e->d_name, NULL) == 0 &&
            fchownat(out, e->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) == 0)
            rc = 0;
        else
            rc = -1;
        free(buf);
    }
    closedir(d);
    if (out >= 0)
        close(out);
    return rc;
}

char *
kb_mpl_cache_seed(const char *dir, uid_t uid, gid_t gid)
{
    char *cache = s_cache_dir();
    char *target = NULL, *entry = NULL;
    if (!cache || access(PYTHON, X_OK) != 0)
        goto out;
    if (!s_fresh(cache)) {
        char *parent = xstrdup(cache);
        *strrchr(parent, '/') = '\0';
        s_mkdirs(parent);
        free(parent);
        if (s_build(cache) != 0) {
            log_debug("matplotlib font cache: build failed; each sandbox "
                      "builds its own");
            goto out;
        }
    }
    target = xasprintf("%s/matplotlib", dir);
    if (s_copy(cache, target, uid, gid) == 0)
        entry = xasprintf("MPLCONFIGDIR=%s", target);
out:
    free(target);
    free(cache);
    return entry;
}
