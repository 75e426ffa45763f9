#include "agent/e2b/e2b_envd.h"
#include "agent/e2b/e2b_path.h"
#include "agent/e2b/e2b_watch.h"

#include "agent/e2b/e2b_connect.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "sandbox/sb_files_ws.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIST_ENTRIES 10000

/* The box user's host ids: the owner of the workspace's top. */
static void
s_owner(int ws_fd, uid_t *uid, gid_t *gid)
{
    struct stat st;
    if (fstat(ws_fd, &st) == 0) {
        *uid = st.st_uid;
        *gid = st.st_gid;
    } else {
        *uid = (uid_t)-1;
        *gid = (gid_t)-1;
    }
}

/* ---- errors ------------------------------------------------------------- */

static const char *
s_connect_code(int e)
{
    switch (-e) {
    case ENOENT:
        return "not_found";
    case EEXIST:
        return "already_exists";
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case E2BIG:
        return "resource_exhausted";
    case ELOOP:
    case EXDEV:
    case EACCES:
    case EPERM:
    case EBUSY:
        return "permission_denied";
    case EINVAL:
    case ENOTDIR:
    case EISDIR:
    case ENOTEMPTY:
        return "invalid_argument";
    default:
        return "internal";
    }
}

static unsigned
s_http_status(int e)
{
    switch (-e) {
    case ENOENT:
        return 404;
    case EEXIST:
        return 409;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
        return 507;
    case ELOOP:
    case EXDEV:
    case EACCES:
    case EPERM:
        return 403;
    case EINVAL:
    case ENOTDIR:
    case EISDIR:
        return 400;
    default:
        return 500;
    }
}

/* ---- GET /files --------------------------------------------------------- */

static void
s_download(e2b_req_t *r, e2b_sandbox_t *sb)
{
    err_t err = {0};
    char *rel = e2b_path_rel(e2b_req_arg(r, "path"), &err);
    if (!rel) {
        e2b_reply_error(r, 400, "%s", err.text);
        return;
    }
    if (!e2b_sandbox_enter(sb)) {
        free(rel);
        {
            e2b_reply_error(r, 404, "the sandbox ended");
            return;
        }
    }
    struct stat st;
    int fd = sb_ws_open_read(e2b_sandbox_workspace_fd(sb), rel, &st, &err);
    err_t aerr = {0};
    if (fd >= 0 && ag_session_audit_fd(e2b_sandbox_session(sb), "out",
                                       "e2b download", rel, fd, &aerr))
        log_warn("--audit: %s", aerr.text);
    e2b_sandbox_leave(sb);
    free(rel);
    if (fd < 0) {
        e2b_reply_error(r, s_http_status(fd), "%s", err.text);
        return;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    if (!resp) {
        close(fd);
        {
            e2b_reply_error(r, 500, "cannot answer with the file");
            return;
        }
    }
    MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
    r->answered = true;
    r->ret = MHD_queue_response(r->conn, 200, resp);
    MHD_destroy_response(resp);
}

/* ---- POST /files -------------------------------------------------------- */

struct e2b_upload {
    e2b_sandbox_t *sb;
    struct MHD_PostProcessor *pp; /* multipart; NULL for a raw body */
    char *path;                   /* ?path=, or NULL */
    sb_ws_upload_t *cur;          /* the file being written */
    char *cur_key;                /* its part's filename (multipart) */
    json_t *done;                 /* the files written */
    int rc;                       /* the first failure, -errno */
    err_t err;
    uint64_t max;                  /* bytes per file: the disk size */
    crypto_hash_sha256_state hash; /* of the file being written */
    uint64_t size;
};

static int
s_up_open(e2b_upload_t *u, const char *target)
{
    char *rel = e2b_path_rel(target, &u->err);
    if (!rel)
        return u->rc = -EINVAL;
    if (!*rel) {
        free(rel);
        err_set(&u->err, ERR_USAGE,
                "upload: give a file path, not the "
                "directory itself");
        return u->rc = -EISDIR;
    }
    if (!e2b_sandbox_enter(u->sb)) {
        free(rel);
        err_set(&u->err, ERR_IO, "the sandbox ended");
        return u->rc = -ENOENT;
    }
    int ws = e2b_sandbox_workspace_fd(u->sb);
    uid_t uid;
    gid_t gid;
    s_owner(ws, &uid, &gid);
    int rc = 0;
    u->cur = sb_ws_upload_begin(ws, rel, uid, gid, u->max, &rc, &u->err);
    crypto_hash_sha256_init(&u->hash);
    u->size = 0;
    e2b_sandbox_leave(u->sb);
    free(rel);
    return u->rc = rc;
}

static void
s_up_commit(e2b_upload_t *u)
{
    if (!u->cur)
        return;
    char *rel = xstrdup(sb_ws_upload_path(u->cur));
    int rc = sb_ws_upload_commit(&u->cur, &u->err);
    if (rc < 0) {
        u->rc = rc;
    } else {
        unsigned char h[crypto_hash_sha256_BYTES];
        char hex[65];
        crypto_hash_sha256_final(&u->hash, h);
        sodium_bin2hex(hex, sizeof hex, h, sizeof h);
        err_t aerr = {0};
        if (e2b_sandbox_enter(u->sb)) {
            if (ag_session_audit_file(e2b_sandbox_session(u->sb), "in",
                                      "e2b upload", rel, NULL, u->size, hex,
                                      &aerr))
                log_warn("--audit: %s", aerr.text);
            e2b_sandbox_leave(u->sb);
        }
        char *abs = e2b_path_abs(rel);
        const char *slash = strrchr(rel, '/');
        json_array_append_new(u->done, json_pack("{s:s, s:s, s:s}", "name",
                                                 slash ? slash + 1 : rel,
                                                 "type", "file", "path", abs));
        free(abs);
    }
    free(rel);
}

static void
s_up_chunk(e2b_upload_t *u, const char *data, size_t len)
{
    if (u->rc < 0 || !u->cur || !len)
        return;
    int rc = sb_ws_upload_write(u->cur, data, len, &u->err);
    crypto_hash_sha256_update(&u->hash, (const unsigned char *)data, len);
    u->size += len;
    if (rc < 0) {
        u->rc = rc;
        sb_ws_upload_abort(&u->cur);
    }
}

static enum MHD_Result
s_up_part(void *cls, enum MHD_ValueKind kind, const char *key,
          const char *filename, const char *content_type,
          const char *transfer_encoding, const char *data, uint64_t off,
          size_t size)
{
    (void)kind;
    (void)content_type;
    (void)transfer_encoding;
    e2b_upload_t *u = cls;
    if (u->rc < 0)
        return MHD_YES; /* failed: the rest is read and dropped */
    if (!filename && !(key && strcmp(key, "file") == 0))
        return MHD_YES; /* a plain field */
    const char *name = filename ? filename : key;
    if (off == 0 && !(u->cur_key && strcmp(u->cur_key, name) == 0 && u->cur)) {
        s_up_commit(u);
        if (u->rc < 0)
            return MHD_YES;
        free(u->cur_key);
        u->cur_key = xstrdup(name);
        /* One file: ?path= names it; several: each part's filename. */
        const char *target =
            u->path && json_array_size(u->done) == 0 ? u->path : name;
        if (s_up_open(u, target) < 0)
            return MHD_YES;
    }
    s_up_chunk(u, data, size);
    return MHD_YES;
}

e2b_upload_t *
e2b_envd_upload_begin(e2b_req_t *r, e2b_sandbox_t *sb)
{
    e2b_upload_t *u = xcalloc(1, sizeof *u);
    u->sb = sb;
    u->done = json_array();
    u->max = e2b_sandbox_policy(sb)->workspace_bytes;
    const char *path = e2b_req_arg(r, "path");
    u->path = path && *path ? xstrdup(path) : NULL;
    const char *ct = e2b_req_header(r, "Content-Type");
    const char *ce = e2b_req_header(r, "Content-Encoding");
    if (ce && strcasecmp(ce, "identity") != 0) {
        u->rc = -EINVAL;
        err_set(&u->err, ERR_USAGE,
                "Content-Encoding %.40s is not supported: send the bytes "
                "as they are",
                ce);
    } else if (ct && strncasecmp(ct, "multipart/form-data", 19) == 0) {
        u->pp = MHD_create_post_processor(r->conn, 65536, s_up_part, u);
        if (!u->pp) {
            u->rc = -EINVAL;
            err_set(&u->err, ERR_USAGE, "the multipart body has no boundary");
        }
    } else if (!u->path) {
        u->rc = -EINVAL;
        err_set(&u->err, ERR_USAGE,
                "a raw upload needs ?path=; or send multipart/form-data");
    } else {
        s_up_open(u, u->path);
    }
    return u;
}

void
e2b_envd_upload_data(e2b_upload_t *u, const char *data, size_t len)
{
    if (u->rc < 0)
        return;
    if (u->pp) {
        if (MHD_post_process(u->pp, data, len) != MHD_YES && u->rc == 0) {
            u->rc = -EINVAL;
            err_set(&u->err, ERR_USAGE, "the multipart body is malformed");
        }
    } else {
        s_up_chunk(u, data, len);
    }
}

void
e2b_envd_upload_free(e2b_upload_t **p)
{
    if (!p || !*p)
        return;
    e2b_upload_t *u = *p;
    *p = NULL;
    if (u->pp)
        MHD_destroy_post_processor(u->pp);
    sb_ws_upload_abort(&u->cur);
    json_decref(u->done);
    free(u->cur_key);
    free(u->path);
    free(u);
}

void
e2b_envd_upload_end(e2b_upload_t **p, e2b_req_t *r)
{
    e2b_upload_t *u = *p;
    if (u->pp && u->rc == 0) {
        MHD_destroy_post_processor(u->pp); /* flushes the last part */
        u->pp = NULL;
    }
    if (u->rc == 0)
        s_up_commit(u);
    if (u->rc < 0)
        e2b_reply_error(r, s_http_status(u->rc), "upload: %s", u->err.text);
    else if (json_array_size(u->done) == 0)
        e2b_reply_error(r, 400, "upload: the body held no file");
    else
        e2b_reply_json(r, 200, json_incref(u->done));
    e2b_envd_upload_free(p);
}

/* ---- filesystem.Filesystem --------------------------------------------- */

/* Run one call on the workspace: the path fields of `msg` resolved. */
static void
s_fs(e2b_req_t *r, e2b_sandbox_t *sb, const char *method)
{
    json_t *msg = e2b_connect_request(r);
    if (!msg)
        return;
    err_t err = {0};
    bool move = strcmp(method, "Move") == 0;
    const char *p1 =
        json_string_value(json_object_get(msg, move ? "source" : "path"));
    const char *p2 = json_string_value(json_object_get(msg, "destination"));
    char *rel = e2b_path_rel(p1, &err);
    char *rel2 = move ? e2b_path_rel(p2, &err) : NULL;
    if (!rel || (move && !rel2)) {
        e2b_connect_error(r, "permission_denied", "%s", err.text);
        goto out;
    }
    if (!e2b_sandbox_enter(sb)) {
        e2b_connect_error(r, "unavailable", "the sandbox ended");
        goto out;
    }
    int ws = e2b_sandbox_workspace_fd(sb);
    uid_t uid;
    gid_t gid;
    s_owner(ws, &uid, &gid);
    int rc = 0;
    sb_ws_entry_t e = {0};
    json_t *resp = NULL;
    if (strcmp(method, "Stat") == 0) {
        if ((rc = sb_ws_stat(ws, rel, &e, &err)) == 0)
            resp = json_pack("{s:o}", "entry", e2b_path_entry_json(&e));
    } else if (strcmp(method, "ListDir") == 0) {
        json_int_t depth = json_integer_value(json_object_get(msg, "depth"));
        sb_ws_entry_t *v = NULL;
        size_t n = 0;
        rc = sb_ws_list(ws, rel, depth > 0 && depth < 64 ? (unsigned)depth : 1,
                        MAX_LIST_ENTRIES, &v, &n, &err);
        if (rc == 0) {
            json_t *a = json_array();
            for (size_t i = 0; i < n; i++)
                json_array_append_new(a, e2b_path_entry_json(&v[i]));
            resp = json_pack("{s:o}", "entries", a);
        }
        sb_ws_entries_free(v, n);
    } else if (strcmp(method, "MakeDir") == 0) {
        bool created = false;
        rc = sb_ws_mkdirs(ws, rel, uid, gid, &created, &err);
        if (rc == 0 && !created) {
            rc = -EEXIST;
            err_set(&err, ERR_IO, "'%s' already exists", p1 ? p1 : "");
        }
        if (rc == 0 && (rc = sb_ws_stat(ws, rel, &e, &err)) == 0)
            resp = json_pack("{s:o}", "entry", e2b_path_entry_json(&e));
    } else if (move) {
        rc = sb_ws_move(ws, rel, rel2, uid, gid, &err);
        if (rc == 0 && (rc = sb_ws_stat(ws, rel2, &e, &err)) == 0)
            resp = json_pack("{s:o}", "entry", e2b_path_entry_json(&e));
    } else if (strcmp(method, "Remove") == 0) {
        rc = sb_ws_remove(ws, rel, uid, gid, &err);
        if (rc == 0)
            resp = json_object();
    } else {
        e2b_sandbox_leave(sb);
        e2b_connect_error(r, "unimplemented",
                          "filesystem.Filesystem/%.40s is not supported here "
                          "(Stat, ListDir, MakeDir, Move, Remove, WatchDir "
                          "and the watcher calls are)",
                          method);
        goto out;
    }
    e2b_sandbox_leave(sb);
    sb_ws_entry_release(&e);
    if (rc < 0)
        e2b_connect_error(r, s_connect_code(rc), "%s", err.text);
    else
        e2b_connect_reply(r, resp);
out:
    free(rel);
    free(rel2);
    json_decref(msg);
}

void
e2b_envd_handle(e2b_req_t *r, e2b_sandbox_t *sb)
{
    if (strcmp(r->path, "/health") == 0) {
        e2b_reply_empty(r, 204);
        return;
    }
    if (strcmp(r->path, "/files") == 0) {
        if (strcmp(r->method, "GET") == 0) {
            s_download(r, sb);
            return;
        }
        {
            e2b_reply_error(r, 405, "GET or POST /files");
            return;
        }
    }
    static const char fs[] = "/filesystem.Filesystem/";
    if (strncmp(r->path, fs, sizeof fs - 1) == 0) {
        if (strcmp(r->method, "POST") != 0) {
            e2b_reply_error(r, 405, "Connect-RPC calls are POST");
            return;
        }
        const char *method = r->path + sizeof fs - 1;
        if (strcmp(method, "WatchDir") == 0)
            e2b_watch_dir(r, sb);
        else if (!e2b_watch_rpc(r, sb, method))
            s_fs(r, sb, method);
        return;
    }
    if (strcmp(r->path, "/metrics") == 0) {
        e2b_reply_error(r, 501,
                        "sandbox metrics are not provided "
                        "here");
        return;
    }
    if (strcmp(r->path, "/envs") == 0) {
        e2b_reply_json(r, 200, json_deep_copy(e2b_sandbox_env(sb)));
        return;
    }
    e2b_reply_error(r, 404, "no such envd endpoint: %s %s", r->method, r->path);
}
