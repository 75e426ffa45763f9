#include "agent/session/ag_pause.h"

#include "common/xalloc.h"
#include "sandbox/sb_engine.h"
#include "sandbox/sb_files.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int
ag_pause_check(const sb_policy_t *p, bool memory, err_t *err)
{
    if (!memory || (p && p->engine == SB_ENGINE_GVISOR))
        return 0; /* memory: ag_session_pause_memory (ag_pause_memory.h) */
    return err_set(err, ERR_USAGE,
                   "memory pause needs --engine gvisor: the namespaces "
                   "engine cannot checkpoint a kernel; pause with files "
                   "only (autoPauseMemory: false): the files are kept, the "
                   "kernel restarts");
}

static const char *
s_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* mkdir 0700 if missing; then it must be a directory of ours (lstat: not
 * a link), and is made 0700 if it was more open. */
static int
s_private_dir(const char *path, err_t *err)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return err_errno(err, ERR_IO, "cannot create %s", path);
    struct stat st;
    if (lstat(path, &st) != 0)
        return err_errno(err, ERR_IO, "cannot read %s", path);
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
        return err_set(err, ERR_IO,
                       "%s is not a directory of ours (a link, or another "
                       "user's); remove it or set JUPYTER_AGENT_STATE_DIR",
                       path);
    if ((st.st_mode & 077) && chmod(path, 0700) != 0)
        return err_errno(err, ERR_IO, "cannot make %s private", path);
    return 0;
}

char *
ag_pause_dir(const char *door, err_t *err)
{
    char *base = NULL;
    const char *v;
    if ((v = s_env("JUPYTER_AGENT_STATE_DIR"))) {
        base = xstrdup(v);
    } else {
        char *parent = NULL;
        if ((v = s_env("XDG_STATE_HOME"))) {
            parent = xstrdup(v);
        } else {
            if (!(v = s_env("HOME"))) {
                struct passwd *pw = getpwuid(getuid());
                v = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir
                                                             : NULL;
            }
            if (!v) {
                err_set(err, ERR_IO,
                        "no home directory to keep paused sessions in; set "
                        "JUPYTER_AGENT_STATE_DIR");
                return NULL;
            }
            char *local = xasprintf("%s/.local", v);
            parent = xasprintf("%s/.local/state", v);
            mkdir(local, 0700); /* as XDG: made when missing */
            free(local);
        }
        mkdir(parent, 0700);
        base = xasprintf("%s/jupyter-agent", parent);
        free(parent);
    }
    char *dir = xasprintf("%s/paused-%s", base, door);
    int rc = s_private_dir(base, err);
    if (rc == 0)
        rc = s_private_dir(dir, err);
    free(base);
    if (rc < 0) {
        free(dir);
        return NULL;
    }
    return dir;
}

/* `dir`/files, the copy of /mnt/data: owned by the box user (the owner
 * of the workspace's top, the same host uid for every box of this user),
 * 0700, inside `dir` (ours, 0700: no one else gets through). Both copies
 * run as that user (fsuid), as the box's own file operations do. */
#define FILES "files"

int
ag_session_pause(ag_session_t **sp, const sb_policy_t *p, const char *dir,
                 bool memory, bool *memory_kept, err_t *err)
{
    *memory_kept = false;
    if (ag_pause_check(p, memory, err) < 0)
        return -1;
    if (memory)
        return err_set(err, ERR_USAGE,
                       "a memory pause goes through ag_session_pause_memory "
                       "(ag_pause_memory.h); this is the files-only one");
    ag_session_t *s = *sp;
    const char *ws = s ? ag_session_workspace(s) : NULL;
    if (!ws)
        return err_set(err, ERR_USAGE,
                       "only a sandboxed session can be paused (this one has "
                       "no workspace of ours)");
    if (mkdir(dir, 0700) != 0)
        return err_errno(err, ERR_IO, "cannot create %s for the paused files",
                         dir);
    int rc = -1, ffd = -1;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int wfd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (dfd < 0 || wfd < 0 || fstat(wfd, &st) != 0) {
        err_errno(err, ERR_IO, "pause: cannot open the workspace or %s", dir);
        goto out;
    }
    if (mkdirat(dfd, FILES, 0700) != 0 ||
        (st.st_uid != geteuid() &&
         fchownat(dfd, FILES, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW)) ||
        (ffd = openat(dfd, FILES,
                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        err_errno(err, ERR_IO, "pause: cannot create %s/" FILES, dir);
        goto out;
    }
    if (sb_files_copy_tree(wfd, ffd, p ? p->workspace_bytes : UINT64_MAX,
                           st.st_uid, st.st_gid, err) < 0) {
        err_prefix(err, "pause: keeping /mnt/data");
        goto out;
    }
    rc = 0;
out:
    if (ffd >= 0)
        close(ffd);
    if (dfd >= 0)
        close(dfd);
    if (wfd >= 0)
        close(wfd);
    if (rc < 0) {
        sb_files_remove_tree(dir);
        return -1;
    }
    ag_session_destroy(sp); /* kernel killed; box, cgroup, run dir gone */
    return 0;
}

ag_session_t *
ag_session_resume(const ag_session_opts_t *o, const char *dir,
                  bool *memory_kept, err_t *err)
{
    *memory_kept = false;
    char *files = xasprintf("%s/" FILES, dir);
    int ffd = open(files, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    free(files);
    if (ffd < 0) {
        err_errno(err, ERR_IO, "cannot open the paused files in %s", dir);
        return NULL;
    }
    ag_session_t *s = ag_session_start(o, err);
    const char *ws = s ? ag_session_workspace(s) : NULL;
    int wfd = ws ? open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    struct stat st;
    if (s && (wfd < 0 || fstat(wfd, &st) != 0)) {
        err_errno(err, ERR_IO, "resume: cannot open the new workspace");
        ag_session_destroy(&s);
    }
    if (s && sb_files_copy_tree(ffd, wfd, o->policy.workspace_bytes, st.st_uid,
                                st.st_gid, err) < 0) {
        err_prefix(err, "resume: putting the paused files back");
        ag_session_destroy(&s);
    }
    if (wfd >= 0)
        close(wfd);
    close(ffd);
    if (s)
        sb_files_remove_tree(dir);
    return s;
}
