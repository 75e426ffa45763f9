/*
 * e2b_path: envd's paths and entries over the workspace, shared by
 * its file calls (e2b_envd.c) and its watch (e2b_watch.c).
 */
#include "agent/e2b/e2b_path.h"
#include "agent/e2b/e2b_sandbox.h" /* E2B_HOME */

#include "common/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ---- paths ------------------------------------------------------------- */

/* An E2B path (absolute, or relative to /home/user) as a workspace
 * relative path (new string; "" = the top), or NULL + err. /mnt/data and
 * /home/user are the same directory here; nothing else is reachable. */
char *
e2b_path_rel(const char *path, err_t *err)
{
    if (!path || !*path)
        return xstrdup("");
    const char *p = path;
    static const char *const tops[] = {E2B_HOME, "/mnt/data"};
    if (*p == '/') {
        const char *rest = NULL;
        for (size_t i = 0; i < 2 && !rest; i++) {
            size_t n = strlen(tops[i]);
            if (strncmp(p, tops[i], n) == 0 && (p[n] == '/' || !p[n]))
                rest = p + n;
        }
        if (!rest) {
            err_set(err, ERR_USAGE,
                    "'%.200s' is outside the sandbox's files: only "
                    "/home/user (the same directory as /mnt/data) is "
                    "reachable through the files API here",
                    path);
            return NULL;
        }
        p = rest;
    }
    /* Drop empty and "." components; refuse "..". */
    char *out = xcalloc(1, strlen(p) + 1);
    size_t o = 0;
    while (*p) {
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if (n == 0)
            break;
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            free(out);
            err_set(err, ERR_USAGE, "'%.200s': '..' is not allowed", path);
            return NULL;
        }
        if (!(n == 1 && p[0] == '.')) {
            if (o)
                out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
    }
    out[o] = '\0';
    return out;
}

char *
e2b_path_abs(const char *rel)
{
    return *rel ? xasprintf(E2B_HOME "/%s", rel) : xstrdup(E2B_HOME);
}

/* ---- entries ------------------------------------------------------------ */

static const char *
s_type(mode_t m)
{
    if (S_ISREG(m))
        return "FILE_TYPE_FILE";
    if (S_ISDIR(m))
        return "FILE_TYPE_DIRECTORY";
    if (S_ISLNK(m))
        return "FILE_TYPE_SYMLINK";
    return "FILE_TYPE_UNSPECIFIED";
}

json_t *
e2b_path_entry_json(const sb_ws_entry_t *e)
{
    char perms[11];
    mode_t m = e->st.st_mode;
    perms[0] = S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' : '-';
    static const char rwx[] = "rwxrwxrwx";
    for (int i = 0; i < 9; i++)
        perms[1 + i] = (m & (0400 >> i)) ? rwx[i] : '-';
    perms[10] = '\0';
    char mtime[40];
    struct tm tm;
    gmtime_r(&e->st.st_mtim.tv_sec, &tm);
    strftime(mtime, sizeof mtime, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char size[24];
    snprintf(size, sizeof size, "%lld", (long long)e->st.st_size);
    char *abs = e2b_path_abs(e->path);
    const char *name = *e->path ? e->name : "user";
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s}", "name", name,
                  "type", s_type(m), "path", abs, "size", size, "mode",
                  (int)(m & 07777), "permissions", perms, "owner", "user",
                  "group", "user", "modifiedTime", mtime);
    if (e->link_target)
        json_object_set_new(j, "symlinkTarget", json_string(e->link_target));
    free(abs);
    return j;
}
