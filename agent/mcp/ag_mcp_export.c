/* export_notebook and reset: the session as a notebook, written only
 * where the operator allowed; a fresh kernel (see ag_mcp_tools_impl.h). */
#include "agent/mcp/ag_mcp_tools_impl.h"

#include "common/escape.h"
#include "common/version.h"
#include "common/xalloc.h"
#include "sandbox/sb_files.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/openat2.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void
s_update_metadata(ag_mcp_box_t *b)
{
    json_t *m = json_pack("{s:s, s:s}", "version", JUPYTER_AGENT_VERSION,
                          "source", "mcp");
    /* The --file inputs with their hashes, as ask and run record them, so
     * that 'archive pack' packs them; kept from the last session when none
     * is running. */
    json_t *old = json_object_get(
        nb_notebook_metadata(nb_record_notebook(b->record)), "jupyter_agent");
    if (b->session) {
        json_object_set_new(m, "sandbox", ag_session_policy_json(b->session));
        json_object_set_new(m, "inputs", ag_session_inputs_json(b->session));
    } else {
        json_t *v;
        if ((v = json_object_get(old, "sandbox")))
            json_object_set(m, "sandbox", v);
        if ((v = json_object_get(old, "inputs")))
            json_object_set(m, "inputs", v);
    }
    if (b->cfg->session->timeout_ms > 0)
        json_object_set_new(m, "timeout_s",
                            json_real(b->cfg->session->timeout_ms / 1000.0));
    nb_record_set_metadata(b->record, "jupyter_agent", m);
}

int
ag_mcp_box_save_notebook(ag_mcp_box_t *b, const char *path, err_t *err)
{
    s_update_metadata(b);
    return nb_record_save(b->record, path, err);
}

/* openat2 beneath `dirfd`, never through a symlink or onto another
 * mount: an fd, or -1 with errno. */
static int
s_open_beneath(int dirfd, const char *rel, int flags, mode_t mode)
{
    struct open_how how = {.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
                           .mode = (flags & O_CREAT) ? mode : 0,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
    return (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
}

static bool
s_exported(const ag_mcp_box_t *b, const struct stat *st)
{
    for (size_t i = 0; i < b->nexported; i++)
        if (b->exported[i].dev == st->st_dev &&
            b->exported[i].ino == st->st_ino &&
            b->exported[i].ctime.tv_sec == st->st_ctim.tv_sec &&
            b->exported[i].ctime.tv_nsec == st->st_ctim.tv_nsec)
            return true;
    return false;
}

/* Write `len` bytes of `text` as `rel` (checked: plain components) under
 * directory `dir`: every component reached from dir's fd without
 * following a symlink; a new file, or one this session wrote before
 * (swapped in atomically, and only if it still is that file). 0, or -1 +
 * err saying what was refused. */
static int
s_export_write(ag_mcp_box_t *b, const char *dir, const char *rel,
               const char *label, const char *text, size_t len, err_t *err)
{
    int rc = -1, dfd = -1, pfd = -1, fd = -1;
    char *parent = xstrdup(rel), *tmp = NULL;
    char *slash = strrchr(parent, '/');
    const char *name = slash ? slash + 1 : parent;
    if (slash)
        *slash = '\0';
    dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        err_errno(err, ERR_IO, "cannot open the --notebook directory %s", dir);
        goto out;
    }
    pfd =
        slash ? s_open_beneath(dfd, parent, O_PATH | O_DIRECTORY, 0) : dup(dfd);
    if (pfd < 0) {
        err_set(err, ERR_USAGE, "%s refused: %s%s", label,
                errno == ELOOP || errno == EXDEV || errno == ENOTDIR
                    ? "a directory on the way is a symbolic link (or not a "
                      "directory, or another mount); export_notebook writes "
                      "only in real directories under "
                    : "no such directory under ",
                dir);
        goto out;
    }
    struct stat old;
    bool exists = fstatat(pfd, name, &old, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists && !(S_ISREG(old.st_mode) && s_exported(b, &old))) {
        err_set(err, ERR_USAGE,
                "%s refused: it exists and this session did not write it "
                "(export_notebook never replaces other files, nor follows "
                "symbolic links); choose a new name",
                label);
        goto out;
    }
    unsigned char rnd[6];
    char hex[13];
    randombytes_buf(rnd, sizeof rnd);
    sodium_bin2hex(hex, sizeof hex, rnd, sizeof rnd);
    tmp = xasprintf(".%.200s.%s.tmp", name, hex);
    fd = s_open_beneath(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOCTTY, 0644);
    if (fd < 0) {
        err_errno(err, ERR_IO, "cannot create a file in %s", dir);
        goto out;
    }
    struct stat st;
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    if (off < len || fsync(fd) < 0) {
        err_errno(err, ERR_IO, "writing %s under %s", label, dir);
        goto unlink;
    }
    int r;
    if (!exists) {
        /* Never over an entry that appeared meanwhile. */
        r = renameat2(pfd, tmp, pfd, name, RENAME_NOREPLACE);
        if (r < 0 && (errno == EINVAL || errno == ENOSYS) &&
            (r = linkat(pfd, tmp, pfd, name, 0)) == 0)
            unlinkat(pfd, tmp, 0);
    } else {
        /* Swap, then check what came out is the file we wrote before. */
        r = renameat2(pfd, tmp, pfd, name, RENAME_EXCHANGE);
        struct stat out_st;
        if (r == 0 &&
            (fstatat(pfd, tmp, &out_st, AT_SYMLINK_NOFOLLOW) < 0 ||
             out_st.st_dev != old.st_dev || out_st.st_ino != old.st_ino)) {
            renameat2(pfd, tmp, pfd, name, RENAME_EXCHANGE);
            errno = EEXIST;
            r = -1;
        }
    }
    if (r < 0) {
        err_set(err, errno == EEXIST ? ERR_USAGE : ERR_IO, "%s refused: %s",
                label,
                errno == EEXIST ? "a file this session did not write took "
                                  "its place; choose a new name"
                                : strerror(errno));
        goto unlink;
    }
    if (exists)
        unlinkat(pfd, tmp, 0);
    if (fstat(fd, &st) < 0) { /* cannot fail on an open fd */
        err_errno(err, ERR_IO, "%s", label);
        goto out;
    }
    b->exported =
        xrealloc(b->exported, (b->nexported + 1) * sizeof *b->exported);
    b->exported[b->nexported++] =
        (s_file_id_t){st.st_dev, st.st_ino, st.st_ctim};
    rc = 0;
    goto out;
unlink:
    unlinkat(pfd, tmp, 0);
out:
    if (fd >= 0)
        close(fd);
    if (pfd >= 0)
        close(pfd);
    if (dfd >= 0)
        close(dfd);
    free(tmp);
    free(parent);
    return rc;
}

json_t *
ag_mcp_tool_export(ag_mcp_box_t *b, const json_t *args)
{
    json_t *jp = json_object_get(args, "path");
    if (jp && !json_is_string(jp))
        return ag_mcp_text_result(true, "error: \"path\" must be a string");
    nb_notebook_t *nb = nb_record_notebook(b->record);
    if (!jp) {
        s_update_metadata(b);
        char *text = nb_notebook_write_mem(nb, NULL);
        if (!text)
            return ag_mcp_text_result(true, "error: the notebook could not be "
                                            "serialised");
        json_t *r = json_pack(
            "{s:[{s:s, s:{s:s, s:s, s:s}}, {s:s, s:s}], s:b}", "content",
            "type", "resource", "resource", "uri",
            "jupyter-agent://session/notebook.ipynb", "mimeType",
            "application/x-ipynb+json", "text", text, "type", "text", "text",
            "the session as an nbformat 4.5 notebook (resource above)",
            "isError", 0);
        free(text);
        return r;
    }
    const char *path = json_string_value(jp);
    if (!b->cfg->notebook_path)
        return ag_mcp_text_result(
            true, "error: export_notebook: this server was started "
                  "without --notebook PATH, so it writes no host "
                  "files; call export_notebook without a path to "
                  "get the notebook as a resource");
    char *copy = xstrdup(b->cfg->notebook_path);
    char *dir = xstrdup(dirname(copy));
    free(copy);
    size_t dl = strlen(dir);
    const char *rel = path;
    if (path[0] == '/') {
        if (strncmp(path, dir, dl) != 0 || path[dl] != '/')
            rel = NULL;
        else
            rel = path + dl + 1;
    }
    err_t err = {0};
    json_t *r;
    size_t rl = rel ? strlen(rel) : 0;
    char *shown = esc_dup(path, ESC_NAME);
    if (!rel || sb_files_check_relpath(rel, &err) < 0 || rl < 7 ||
        strcmp(rel + rl - 6, ".ipynb") != 0) {
        r = ag_mcp_text_result(
            true,
            "error: export_notebook: %s refused: the path must "
            "end in .ipynb and stay under %s (the directory of "
            "--notebook)",
            shown, dir);
    } else {
        s_update_metadata(b);
        size_t len = 0;
        char *text = nb_notebook_write_mem(nb, &len);
        if (!text)
            r = ag_mcp_text_result(true, "error: the notebook could not be "
                                         "serialised");
        else if (s_export_write(b, dir, rel, shown, text, len, &err) == 0)
            r = ag_mcp_text_result(
                false, "wrote the session (%zu cells) to %s%s%s",
                nb_notebook_ncells(nb), path[0] == '/' ? "" : dir,
                path[0] == '/' ? "" : "/", shown);
        else
            r = ag_mcp_text_result(true, "error: export_notebook: %s",
                                   err.text);
        free(text);
    }
    free(shown);
    free(dir);
    return r;
}

json_t *
ag_mcp_tool_reset(ag_mcp_box_t *b, const json_t *args)
{
    (void)args;
    if (!b->session)
        return ag_mcp_text_result(false, "no kernel was running; the next call "
                                         "starts a fresh one");
    err_t err = {0};
    if (kb_kernel_restart(ag_session_kernel(b->session), &err) < 0) {
        ag_mcp_box_stop(b, "reset failed");
        return ag_mcp_text_result(true,
                                  "error: reset: %s; the next call starts a "
                                  "new session",
                                  err.text);
    }
    json_t *cell = nb_record_add_markdown(
        b->record, "*jupyter-agent: the kernel was reset (variables and "
                   "imports gone, files kept)*");
    json_t *md = json_object_get(cell, "metadata");
    /* "action": "reset" is what 'archive rerun' replays (a restart). */
    if (json_is_object(md))
        json_object_set_new(
            md, "jupyter_agent",
            json_pack("{s:s, s:s}", "role", "note", "action", "reset"));
    return ag_mcp_text_result(
        false,
        "a fresh kernel was started: variables and imports "
        "are gone; files in %s were kept",
        b->cfg->session->gateway_url ? "the kernel's working directory on the "
                                       "Jupyter server"
                                     : SB_WORKSPACE_PATH);
}
