/*
 * ag_kernel_files: %upload and %download, files between the directory the
 * agent kernel runs in (the notebook's, in JupyterLab) and the session's
 * /mnt/data, which is all the sandboxed Python sees.
 *
 * Both go by the copy rules of sandbox/sb_files.h and nothing else:
 * - in: each NAME is a path relative to the kernel's working directory,
 *   opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) from it (no
 *   "..", no symbolic link anywhere on the way), a regular file of at most
 *   the workspace's size (--disk), copied to /mnt/data/BASENAME, created
 *   fresh (an existing file there is never replaced);
 * - out: a file or a directory of /mnt/data goes next to the notebook
 *   under the copy-out rules (sb_outdir: O_EXCL, never overwriting, no
 *   dot-files, links or devices, modes 0644/0755, bytes/entries/depth
 *   capped). A directory becomes a new directory of the same name.
 * Through a Jupyter Server the same rules apply with the kernel's own
 * directory there (kernel-bridge/kb_files.h: chunked, hash-checked).
 * Every name we print is escaped (common/escape.h).
 */
#include "agent/kernel/ag_kernel_impl.h"

#include "agent/session/ag_session.h"
#include "common/buf.h"
#include "common/escape.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_files.h"
#include "sandbox/sb_files.h"
#include "sandbox/sb_policy.h"
#include "sandbox/sb_sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One file out is read whole before it is written: this bounds what that
 * costs. A bigger result goes out as a directory (streamed). */
#define DOWNLOAD_FILE_MAX (256u * 1024 * 1024)
#define MAX_ARGS 256

/* Split a magic's argument at blanks; "..." or '...' keep blanks. Returns
 * the number of words (at most MAX_ARGS) in words[] (caller frees each). */
static size_t
s_words(const char *a, char **words)
{
    size_t n = 0;
    while (*a && n < MAX_ARGS) {
        while (*a == ' ' || *a == '\t')
            a++;
        if (!*a)
            break;
        buf_t b;
        buf_init(&b, 0);
        while (*a && *a != ' ' && *a != '\t') {
            if (*a == '"' || *a == '\'') {
                char q = *a++;
                while (*a && *a != q)
                    buf_append(&b, a++, 1);
                if (*a)
                    a++;
            } else {
                buf_append(&b, a++, 1);
            }
        }
        words[n++] = buf_detach(&b, NULL);
    }
    return n;
}

/* The kernel's working directory as text to show (escaped, new). */
static char *
s_cwd_shown(void)
{
    char *cwd = getcwd(NULL, 0);
    char *shown = esc_dup(cwd ? cwd : ".", ESC_NAME);
    free(cwd);
    return shown;
}

static const char *
s_base(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Where files go for this session: a local box, or a kernel on a Jupyter
 * Server; anything else is refused with the reason. */
typedef struct s_target {
    ag_session_t *session; /* the inner session (its --audit log) */
    sb_sandbox_t *box;     /* local sandbox, or NULL */
    kb_kernel_t *remote;   /* kernel on a gateway, or NULL */
    uint64_t max_bytes;    /* the workspace's size (--disk) */
    kb_files_opts_t fo;    /* for remote */
    const char *ws_shown;  /* "/mnt/data" or the kernel's directory */
} s_target_t;

static int
s_target(ag_kernel_t *k, const char *magic, s_target_t *t, err_t *err)
{
    memset(t, 0, sizeof *t);
    ag_session_t *s = ag_kernel_session(k, err);
    if (!s)
        return -1;
    t->session = s;
    t->max_bytes = k->inner->policy.workspace_bytes;
    if (k->inner->gateway_url && *k->inner->gateway_url) {
        t->remote = ag_session_kernel(s);
        kb_files_opts_init(&t->fo);
        t->fo.kernel_dir = kb_kernel_workdir(t->remote);
        t->ws_shown =
            t->fo.kernel_dir ? t->fo.kernel_dir : "the kernel's directory";
        return 0;
    }
    t->box = ag_session_sandbox(s);
    if (t->box && sb_sandbox_workspace_fd(t->box) >= 0) {
        t->max_bytes = sb_sandbox_policy(t->box)->workspace_bytes;
        t->ws_shown = SB_WORKSPACE_PATH;
        return 0;
    }
    if (k->inner->no_sandbox)
        return err_set(err, ERR_USAGE,
                       "%s is for the sandbox's /mnt/data; with --no-sandbox "
                       "Python runs as you and opens your files directly",
                       magic);
    return err_set(err, ERR_USAGE,
                   "%s is not supported yet for a kernel from 'jupyter-agent "
                   "serve' (--warm); start the agent kernel without --warm",
                   magic);
}

static int
s_upload_one(s_target_t *t, int cwd_fd, const char *cwd_shown, const char *path,
             buf_t *said, err_t *err)
{
    struct stat st;
    int fd =
        sb_files_open_input_at(cwd_fd, path, cwd_shown, t->max_bytes, &st, err);
    if (fd < 0)
        return -1;
    const char *name = s_base(path);
    int rc = t->remote
                 ? kb_files_push_fd(t->remote, fd, path, name, &t->fo, err)
                 : sb_sandbox_copy_in_fd(t->box, fd, path, name, err);
    close(fd);
    err_t aerr = {0};
    if (rc == 0 &&
        ag_session_audit_file(t->session, "in", "%upload", name, path,
                              (uint64_t)st.st_size, NULL, &aerr))
        log_warn("--audit: %s", aerr.text);
    if (rc == 0) {
        char *a = esc_dup(path, ESC_NAME), *b = esc_dup(name, ESC_NAME);
        buf_printf(said, "copied %s (%lld bytes) to %s/%s\n", a,
                   (long long)st.st_size, t->ws_shown, b);
        free(a);
        free(b);
    }
    return rc;
}

/* A path the user gives for /mnt/data: relative to it, or under it. */
static const char *
s_ws_rel(const s_target_t *t, const char *path)
{
    size_t n = strlen(t->ws_shown);
    if (strncmp(path, t->ws_shown, n) == 0 && path[n] == '/')
        return path + n + 1;
    return path;
}

static int
s_download_one(s_target_t *t, const char *cwd, const char *path, buf_t *said,
               err_t *err)
{
    char relbuf[4096];
    snprintf(relbuf, sizeof relbuf, "%s", s_ws_rel(t, path));
    for (size_t n = strlen(relbuf); n > 1 && relbuf[n - 1] == '/'; n--)
        relbuf[n - 1] = '\0'; /* "results/" is the directory results */
    const char *rel = relbuf;
    if (sb_files_check_relpath(rel, err) < 0)
        return -1;
    const char *name = s_base(rel);
    sb_files_out_opts_t oo;
    sb_files_out_opts_init(&oo, t->max_bytes);
    ag_session_audit_out_opts(t->session, &oo);
    bool is_dir = false;
    json_t *list = NULL;
    if (t->remote) {
        err_t probe = {0};
        list = kb_files_list(t->remote, rel, 1, &t->fo, &probe);
        is_dir = list != NULL;
        json_decref(list);
    } else {
        struct stat st;
        is_dir = fstatat(sb_sandbox_workspace_fd(t->box), rel, &st,
                         AT_SYMLINK_NOFOLLOW) == 0 &&
                 S_ISDIR(st.st_mode);
    }
    int rc = -1;
    size_t n = 0;
    char *dest = NULL;
    if (is_dir) {
        /* A new directory next to the notebook, the same rules as
         * --keep-workspace. */
        dest = xasprintf("%s/%s", cwd, name);
        sb_outdir_t *d = sb_outdir_open(dest, &oo, err);
        if (d)
            rc = t->remote ? kb_files_pull(t->remote, rel, d, &t->fo, &n, err)
                           : sb_outdir_copy(d, sb_sandbox_workspace_fd(t->box),
                                            rel, &n, err);
        sb_outdir_destroy(&d);
    } else {
        char *data = NULL;
        size_t len = 0;
        size_t cap =
            t->max_bytes < DOWNLOAD_FILE_MAX ? t->max_bytes : DOWNLOAD_FILE_MAX;
        int got = t->remote ? kb_files_read(t->remote, rel, cap, &data, &len,
                                            &t->fo, err)
                            : sb_files_read(sb_sandbox_workspace_fd(t->box),
                                            rel, cap, &data, &len, err);
        if (got == 0) {
            /* DIR is the notebook's directory, which holds files already:
             * force, under which nothing existing is ever overwritten. */
            oo.force = true;
            sb_outdir_t *d = sb_outdir_open(cwd, &oo, err);
            rc = d ? sb_outdir_write(d, name, data, len, err) : -1;
            sb_outdir_destroy(&d);
            dest = xasprintf("%s/%s", cwd, name);
        }
        free(data);
        n = len;
    }
    if (rc == 0) {
        char *a = esc_dup(rel, ESC_NAME), *b = esc_dup(dest, ESC_NAME);
        buf_printf(said, "copied %s/%s%s to %s (%zu %s)\n", t->ws_shown, a,
                   is_dir ? "/" : "", b, n,
                   is_dir ? "files and directories" : "bytes");
        free(a);
        free(b);
    }
    free(dest);
    return rc;
}

static void
s_run(ag_kernel_t *k, const char *magic, const char *args, bool in)
{
    char *words[MAX_ARGS];
    size_t nw = s_words(args, words);
    if (!nw) {
        char *m = xasprintf(
            in ? "%s needs the files to copy, relative to the notebook's "
                 "directory, e.g. %s sales.csv data/q1.xlsx"
               : "%s needs what to copy from /mnt/data, e.g. %s chart.png "
                 "results",
            magic, magic);
        ag_kernel_error(k, "UsageError", m);
        free(m);
        return;
    }
    err_t err = {0};
    s_target_t t;
    buf_t said, failed;
    buf_init(&said, 1 << 20);
    buf_init(&failed, 1 << 20);
    int code = 0;
    char *cwd = getcwd(NULL, 0);
    char *cwd_shown = s_cwd_shown();
    int cwd_fd = open(cwd ? cwd : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (!cwd || cwd_fd < 0) {
        code = err_errno(&err, ERR_IO, "cannot open the kernel's directory");
        buf_printf(&failed, "%s\n", err.text);
    } else if (s_target(k, magic, &t, &err) < 0) {
        code = err.code;
        buf_printf(&failed, "%s\n", err.text);
    } else {
        for (size_t i = 0; i < nw; i++) {
            err_t e = {0};
            int rc =
                in ? s_upload_one(&t, cwd_fd, cwd_shown, words[i], &said, &e)
                   : s_download_one(&t, cwd, words[i], &said, &e);
            if (rc < 0) {
                char *w = esc_dup(words[i], ESC_NAME);
                char *why = esc_dup(e.text, ESC_KEEP_LINES);
                buf_printf(&failed, "%s: not copied: %s\n", w, why);
                free(w);
                free(why);
                code = code ? code : e.code;
            }
        }
    }
    if (said.len)
        kb_server_stream(k->server, k->cell, "stdout", buf_cstr(&said));
    if (failed.len) {
        while (failed.len && buf_cstr(&failed)[failed.len - 1] == '\n')
            failed.len--;
        char *text = xstrndup(buf_cstr(&failed), failed.len);
        ag_kernel_error(k, code == ERR_USAGE ? "UsageError" : "FileError",
                        text);
        free(text);
    }
    if (cwd_fd >= 0)
        close(cwd_fd);
    free(cwd);
    free(cwd_shown);
    buf_release(&said);
    buf_release(&failed);
    for (size_t i = 0; i < nw; i++)
        free(words[i]);
}

void
ag_kernel_upload(ag_kernel_t *k, const char *args)
{
    s_run(k, AG_KERNEL_MAGIC_UPLOAD, args, true);
}

void
ag_kernel_download(ag_kernel_t *k, const char *args)
{
    s_run(k, AG_KERNEL_MAGIC_DOWNLOAD, args, false);
}
