#include "agent/session/ag_archive.h"
#include "agent/session/ag_envlock.h"
#include "agent/session/ag_session.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/jsonlim.h"
#include "common/version.h"
#include "common/xalloc.h"
#include "notebook-io/nb_provenance.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUTPUTS_MAX_ENTRIES 10000
#define OUTPUTS_MAX_DEPTH 32

/* ---- packing ------------------------------------------------------------ */

typedef struct packer {
    nb_archive_writer_t *w;
    json_t *subjects; /* in-toto subjects, in archive order */
    json_t *parts;    /* RO-Crate File entities */
    json_t *objects;  /* RO-Crate ids of the inputs */
    json_t *results;  /* ... of the outputs */
} packer_t;

static void
s_note(packer_t *p, const char *name, const char *sha, uint64_t size,
       const char *format, json_t *role_list)
{
    json_array_append_new(p->subjects, nb_intoto_subject(name, sha));
    char sz[32];
    snprintf(sz, sizeof sz, "%llu", (unsigned long long)size);
    json_t *f = json_pack("{s:s, s:s, s:s, s:s}", "@id", name, "@type", "File",
                          "contentSize", sz, "sha256", sha);
    if (format)
        json_object_set_new(f, "encodingFormat", json_string(format));
    json_array_append_new(p->parts, f);
    if (role_list)
        json_array_append_new(role_list, json_pack("{s:s}", "@id", name));
}

static int
s_add_mem(packer_t *p, const char *name, const char *data, size_t len,
          const char *format, json_t *role, err_t *err)
{
    char sha[NB_SHA256_HEX];
    if (nb_archive_add_mem(p->w, name, data, len, sha, err))
        return -1;
    s_note(p, name, sha, len, format, role);
    return 0;
}

/* Add the file at `path`, or when path is NULL the open file `fd`. */
static int
s_add_file(packer_t *p, const char *name, const char *path, int fd,
           json_t *role, char sha_out[NB_SHA256_HEX], err_t *err)
{
    char sha[NB_SHA256_HEX];
    uint64_t size = 0;
    if (path ? nb_archive_add_file(p->w, name, path, sha, &size, err)
             : nb_archive_add_fd(p->w, name, fd, sha, &size, err))
        return -1;
    s_note(p, name, sha, size, NULL, role);
    if (sha_out)
        memcpy(sha_out, sha, NB_SHA256_HEX);
    return 0;
}

/* The inputs: recorded ones (their host file must still hash the same,
 * unless --input names a replacement) and --input extras. Appends to
 * `recorded_out` what environment.json says of each. */
static int
s_pack_inputs(packer_t *p, const char *nb_path, const json_t *recorded,
              char *const *extra, json_t *env_inputs, err_t *err)
{
    json_t *given = json_object(); /* NAME -> PATH from --input */
    int rc = -1;
    for (size_t i = 0; extra && extra[i]; i++) {
        char *path, *name;
        ag_session_split_file_arg(extra[i], &path, &name);
        json_object_set_new(given, name, json_string(path));
        free(path);
        free(name);
    }
    size_t i;
    json_t *in;
    json_array_foreach(recorded, i, in)
    {
        const char *name = json_string_value(json_object_get(in, "name"));
        const char *path = json_string_value(json_object_get(in, "path"));
        const char *want = json_string_value(json_object_get(in, "sha256"));
        if (!name || !path || !want)
            continue;
        const char *override = json_string_value(json_object_get(given, name));
        /* A relative recorded path (a committed example's) is relative to
         * the notebook's directory. */
        char *rel = NULL;
        if (path[0] != '/') {
            char *dup = xstrdup(nb_path);
            rel = xasprintf("%s/%s", dirname(dup), path);
            free(dup);
            path = rel;
        }
        char *aname = xasprintf("inputs/%s", name);
        char sha[NB_SHA256_HEX];
        int r = s_add_file(p, aname, override ? override : path, -1, p->objects,
                           sha, err);
        free(aname);
        if (r) {
            if (!override)
                err_prefix(err,
                           "input %s (recorded by the session; give its "
                           "current place with --input PATH:%s)",
                           name, name);
            free(rel);
            goto out;
        }
        if (!override && strcmp(sha, want) != 0) {
            err_set(err, ERR_VERIFY,
                    "input %s changed since the session used it (%s: sha256 "
                    "%.12s..., recorded %.12s...); pass the file it used with "
                    "--input PATH:%s",
                    name, path, sha, want, name);
            free(rel);
            goto out;
        }
        free(rel);
        json_t *rec = json_pack("{s:s, s:s}", "name", name, "sha256", sha);
        if (strcmp(sha, want) != 0)
            json_object_set_new(rec, "recorded_sha256", json_string(want));
        json_array_append_new(env_inputs, rec);
        json_object_del(given, name);
    }
    const char *name;
    json_t *pv;
    json_object_foreach(given, name, pv)
    {
        char *aname = xasprintf("inputs/%s", name);
        char sha[NB_SHA256_HEX];
        int r = s_add_file(p, aname, json_string_value(pv), -1, p->objects, sha,
                           err);
        free(aname);
        if (r)
            goto out;
        json_array_append_new(
            env_inputs, json_pack("{s:s, s:s}", "name", name, "sha256", sha));
    }
    rc = 0;
out:
    json_decref(given);
    return rc;
}

static int
s_strcmp_p(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Regular files below `dfd` (taken) as PREFIX/REL, never following a symlink;
 * anything else is left out and counted in *skipped. */
static int
s_pack_tree(packer_t *p, int dfd, const char *prefix, int depth, size_t *count,
            size_t *skipped, json_t *role, err_t *err)
{
    if (depth > OUTPUTS_MAX_DEPTH) {
        close(dfd);
        return err_set(err, ERR_USAGE, "%s is nested deeper than %d levels",
                       prefix, OUTPUTS_MAX_DEPTH);
    }
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return err_errno(err, ERR_IO, "cannot list %s", prefix);
    }
    /* Sorted, so the same folder always packs the same way. */
    json_t *names = json_array();
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            json_array_append_new(names, json_string(e->d_name));
    size_t n = json_array_size(names);
    const char **v = xcalloc(n + 1, sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = json_string_value(json_array_get(names, i));
    qsort(v, n, sizeof *v, s_strcmp_p);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct stat st;
        if (fstatat(dfd, v[i], &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        char *name = xasprintf("%s/%s", prefix, v[i]);
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dfd, v[i],
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            rc = sub < 0 ? err_set(err, ERR_IO, "cannot open %s", name)
                         : s_pack_tree(p, sub, name, depth + 1, count, skipped,
                                       role, err);
        } else if (S_ISREG(st.st_mode) &&
                   nb_archive_name_check(name, NULL) == 0) {
            if (++*count > OUTPUTS_MAX_ENTRIES)
                rc = err_set(err, ERR_USAGE, "more than %d output files",
                             OUTPUTS_MAX_ENTRIES);
            else {
                int fd = openat(dfd, v[i],
                                O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
                rc = fd < 0 ? err_set(err, ERR_IO, "cannot read %s", name)
                            : s_add_file(p, name, NULL, fd, role, NULL, err);
                if (fd >= 0)
                    close(fd);
            }
        } else {
            (*skipped)++;
        }
        free(name);
    }
    free((void *)v);
    json_decref(names);
    closedir(d);
    return rc;
}

static int
s_pack_dir(packer_t *p, const char *dir, const char *prefix, json_t *role,
           size_t *skipped, err_t *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return err_errno(err, ERR_USAGE, "cannot open %s", dir);
    size_t count = 0;
    return s_pack_tree(p, fd, prefix, 0, &count, skipped, role, err);
}

/* "report_files" for "report.ipynb"; NULL when there is no such folder. */
static char *
s_default_outputs(const char *nb_path)
{
    char *dir = nb_path_sibling(nb_path, "_files");
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        return dir;
    free(dir);
    return NULL;
}

static json_t *
s_get(const json_t *j, const char *a, const char *b)
{
    json_t *x = json_object_get(j, a);
    return b ? json_object_get(x, b) : x;
}

/* environment.json. Never holds a key: only names and versions. */
static json_t *
s_environment(const nb_notebook_t *nb, const json_t *envlock, json_t *inputs,
              const char *packed)
{
    json_t *md = nb_notebook_metadata(nb);
    json_t *ja = json_object_get(md, "jupyter_agent");
    json_t *run = json_object_get(ja, "run");
    json_t *sandbox =
        run ? json_object_get(run, "sandbox") : json_object_get(ja, "sandbox");
    json_t *env = json_pack(
        "{s:s, s:s, s:s, s:O*, s:O*, s:O*, s:o, s:O*}", "format",
        "jupyter-agent-archive/1", "jupyter_agent", JUPYTER_AGENT_VERSION,
        "packed", packed, "kernelspec", json_object_get(md, "kernelspec"),
        "language_info", json_object_get(md, "language_info"), "sandbox",
        sandbox, "inputs", inputs, "python", envlock);
    json_t *provider = json_object_get(ja, "provider");
    if (provider)
        json_object_set_new(env, "model",
                            json_pack("{s:O, s:O*}", "provider", provider,
                                      "model", json_object_get(ja, "model")));
    json_t *when = run ? json_pack("{s:O*, s:O*, s:O*}", "started",
                                   json_object_get(run, "started"), "ended",
                                   json_object_get(run, "finished"), "status",
                                   json_object_get(run, "status"))
                       : json_pack("{s:O*, s:O*, s:O*}", "started",
                                   s_get(ja, "timings", "started"), "ended",
                                   s_get(ja, "timings", "ended"), "status",
                                   json_object_get(ja, "status"));
    json_object_set_new(env, "session", when);
    return env;
}

static json_t *
s_crate(packer_t *p, const json_t *env, const char *packed)
{
    const char *started = json_string_value(s_get(env, "session", "started"));
    const char *ended = json_string_value(s_get(env, "session", "ended"));
    const char *status = json_string_value(s_get(env, "session", "status"));
    const char *python = json_string_value(s_get(env, "python", "python"));
    json_t *kernel = s_get(env, "kernelspec", "display_name");
    json_t *graph = json_array();
    json_array_append_new(graph, json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}",
                                           "@id", AG_ARCHIVE_CRATE, "@type",
                                           "CreativeWork", "conformsTo", "@id",
                                           "https://w3id.org/ro/crate/1.2",
                                           "about", "@id", "./"));
    json_t *parts = json_array();
    size_t i;
    json_t *f;
    json_array_foreach(p->parts, i, f) json_array_append_new(
        parts, json_pack("{s:O}", "@id", json_object_get(f, "@id")));
    json_array_append_new(
        graph,
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s}, s:o, s:{s:s}, s:{s:s}}",
                  "@id", "./", "@type", "Dataset", "name",
                  "Report archive made by jupyter-agent", "description",
                  "A notebook session with its inputs, outputs and "
                  "environment, signed and re-runnable "
                  "(jupyter-agent archive rerun).",
                  "datePublished", packed, "conformsTo", "@id",
                  "https://w3id.org/ro/wfrun/process/0.4", "hasPart", parts,
                  "mentions", "@id", "#session", "license", "@id", "#license"));
    json_array_append_new(
        graph, json_pack("{s:s, s:s, s:s, s:s}", "@id", "#license", "@type",
                         "CreativeWork", "name", "Not stated", "description",
                         "jupyter-agent does not choose a licence for a "
                         "report; its owner's terms apply."));
    json_array_append_new(graph,
                          json_pack("{s:s, s:s, s:s, s:s}", "@id",
                                    "https://w3id.org/ro/wfrun/process/0.4",
                                    "@type", "CreativeWork", "name",
                                    "Process Run Crate", "version", "0.4"));
    json_array_extend(graph, p->parts);
    json_array_append_new(
        graph, json_pack("{s:s, s:s, s:s, s:s}", "@id", "#jupyter-agent",
                         "@type", "SoftwareApplication", "name",
                         "jupyter-agent", "version", JUPYTER_AGENT_VERSION));
    json_t *kernel_app =
        json_pack("{s:s, s:s, s:s}", "@id", "#kernel", "@type",
                  "SoftwareApplication", "name",
                  json_string_value(kernel) ? json_string_value(kernel)
                                            : "Jupyter kernel");
    if (python)
        json_object_set_new(kernel_app, "version", json_string(python));
    json_array_append_new(graph, kernel_app);
    json_t *results = json_array();
    json_array_append_new(results,
                          json_pack("{s:s}", "@id", AG_ARCHIVE_NOTEBOOK));
    json_array_extend(results, p->results);
    json_t *action = json_pack(
        "{s:s, s:s, s:s, s:[{s:s},{s:s}], s:O, s:o, s:{s:s}}", "@id",
        "#session", "@type", "CreateAction", "name",
        "Notebook session recorded by jupyter-agent", "instrument", "@id",
        "#jupyter-agent", "@id", "#kernel", "object", p->objects, "result",
        results, "actionStatus", "@id",
        status && strcmp(status, "ok") != 0 && strcmp(status, "answered") != 0
            ? "http://schema.org/FailedActionStatus"
            : "http://schema.org/CompletedActionStatus");
    if (started)
        json_object_set_new(action, "startTime", json_string(started));
    if (ended)
        json_object_set_new(action, "endTime", json_string(ended));
    json_array_append_new(graph, action);
    return json_pack("{s:s, s:o}", "@context",
                     "https://w3id.org/ro/crate/1.2/context", "@graph", graph);
}

static json_t *
s_predicate(const json_t *env, json_t *deps, const char *packed)
{
    return json_pack(
        "{s:{s:s, s:{s:s, s:O*, s:O*}, s:{s:s, s:s}, s:o}, "
        "s:{s:{s:s}, s:{s:O*, s:O*}}}",
        "buildDefinition", "buildType", "urn:jupyter-agent:notebook-session:v1",
        "externalParameters", "notebook", AG_ARCHIVE_NOTEBOOK, "kernelspec",
        json_object_get(env, "kernelspec"), "sandbox",
        json_object_get(env, "sandbox"), "internalParameters", "jupyter_agent",
        JUPYTER_AGENT_VERSION, "packed", packed, "resolvedDependencies", deps,
        "runDetails", "builder", "id",
        "urn:jupyter-agent:" JUPYTER_AGENT_VERSION, "metadata", "startedOn",
        s_get(env, "session", "started"), "finishedOn",
        s_get(env, "session", "ended"));
}

static int
s_add_json(packer_t *p, const char *name, const json_t *j, err_t *err)
{
    char *s = json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS);
    size_t n = strlen(s);
    s = xrealloc(s, n + 2);
    s[n++] = '\n';
    s[n] = '\0';
    int rc = s_add_mem(p, name, s, n, "application/json", NULL, err);
    free(s);
    return rc;
}

int
ag_archive_pack(const ag_archive_pack_opts_t *o, size_t *nfiles_out, err_t *err)
{
    int rc = -1;
    nb_notebook_t *own = NULL;
    pk_seckey_t *key = NULL;
    packer_t p = {.subjects = json_array(),
                  .parts = json_array(),
                  .objects = json_array(),
                  .results = json_array()};
    json_t *env = NULL, *env_inputs = json_array();
    char *nbtext = NULL, *outputs = NULL, *manifest = NULL;
    char packed[40];
    clock_iso8601_now(packed, sizeof packed);

    const nb_notebook_t *nb = o->nb;
    if (!nb && !(nb = own = nb_notebook_read_file(o->notebook_path, err)))
        goto out;
    if (o->key_path && !(key = pk_seckey_load(o->key_path, err))) {
        err_prefix(err, "--key");
        goto out;
    }
    if (!(p.w = nb_archive_writer_new(o->out_path, o->force, err)))
        goto out;

    size_t len;
    nbtext = nb_notebook_write_mem(nb, &len);
    if (s_add_mem(&p, AG_ARCHIVE_NOTEBOOK, nbtext, len,
                  "application/x-ipynb+json", p.results, err))
        goto out;
    json_t *recorded =
        s_get(nb_notebook_metadata(nb), "jupyter_agent", "inputs");
    if (s_pack_inputs(&p, o->notebook_path, recorded, o->inputs, env_inputs,
                      err))
        goto out;
    outputs = o->outputs_dir ? xstrdup(o->outputs_dir)
                             : s_default_outputs(o->notebook_path);
    size_t skipped = 0;
    if (outputs && s_pack_dir(&p, outputs, "outputs", p.results, &skipped, err))
        goto out;
    if (o->packages_dir &&
        s_pack_dir(&p, o->packages_dir, "packages", p.objects, &skipped, err))
        goto out;

    env = s_environment(nb, o->envlock, env_inputs, packed);
    env_inputs = NULL; /* stolen */
    if (skipped)
        json_object_set_new(env, "left_out",
                            json_pack("{s:I, s:s}", "count",
                                      (json_int_t)skipped, "why",
                                      "not regular files (symlinks, devices, "
                                      "FIFOs) or names an archive refuses"));
    if (s_add_json(&p, AG_ARCHIVE_ENVIRONMENT, env, err))
        goto out;
    json_t *crate = s_crate(&p, env, packed);
    int crc = s_add_json(&p, AG_ARCHIVE_CRATE, crate, err);
    json_decref(crate);
    if (crc)
        goto out;
    manifest = nb_bag_manifest(p.subjects);
    if (s_add_mem(&p, AG_ARCHIVE_MANIFEST, manifest, strlen(manifest),
                  "text/plain", NULL, err))
        goto out;

    json_t *deps = json_array();
    size_t i;
    json_t *s;
    json_array_foreach(p.subjects, i, s)
    {
        const char *name = json_string_value(json_object_get(s, "name"));
        if (strncmp(name, "inputs/", 7) == 0 ||
            strncmp(name, "packages/", 9) == 0)
            json_array_append(deps, s);
    }
    json_t *statement = nb_intoto_statement(json_incref(p.subjects),
                                            s_predicate(env, deps, packed));
    char *body = json_dumps(statement, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(statement);
    json_t *envelope =
        nb_dsse_sign(NB_DSSE_INTOTO_TYPE, body, strlen(body), key, err);
    free(body);
    if (!envelope)
        goto out;
    crc = s_add_json(&p, AG_ARCHIVE_PROVENANCE, envelope, err);
    json_decref(envelope);
    if (crc)
        goto out;
    if (nfiles_out)
        *nfiles_out = json_array_size(p.subjects);
    rc = nb_archive_writer_commit(&p.w, err);
out:
    nb_archive_writer_destroy(&p.w);
    pk_seckey_destroy(&key);
    nb_notebook_destroy(&own);
    json_decref(p.subjects);
    json_decref(p.parts);
    json_decref(p.objects);
    json_decref(p.results);
    json_decref(env);
    json_decref(env_inputs);
    free(nbtext);
    free(outputs);
    free(manifest);
    return rc;
}

static int
s_set_archive(void *f, const char *v, err_t *err)
{
    (void)err;
    ((ag_archive_flags_t *)f)->path = v;
    return 0;
}

static int
s_set_archive_key(void *f, const char *v, err_t *err)
{
    (void)err;
    ((ag_archive_flags_t *)f)->key = v;
    return 0;
}

static const cliopt_t s_archive_flags[] = {
    {"archive", "ZIP",
     "also pack a report archive of the result\n"
     "(see 'jupyter-agent archive --help')",
     s_set_archive, "report.zip", NULL, NULL},
    {"archive-key", "KEY", "sign that archive with KEY", s_set_archive_key,
     "signing.key", NULL, NULL},
};

cliopt_group_t
ag_archive_flags(ag_archive_flags_t *f)
{
    return CLIOPT_GROUP("report archive", s_archive_flags, f);
}

int
ag_archive_session(ag_session_t *session, const char *nb_path,
                   const char *archive_path, const char *key_path, err_t *err)
{
    nb_notebook_t *nb = nb_notebook_read_file(nb_path, err);
    if (!nb)
        return -1;
    json_t *lock = NULL;
    kb_kernel_t *k = session ? ag_session_kernel(session) : NULL;
    if (k && kb_kernel_alive(k)) {
        err_t lerr = {0};
        lock = ag_envlock_capture(k, nb, 120000, &lerr);
    }
    ag_archive_pack_opts_t po = {.notebook_path = nb_path,
                                 .nb = nb,
                                 .out_path = archive_path,
                                 .key_path = key_path,
                                 .envlock = lock,
                                 .force = true};
    int rc = ag_archive_pack(&po, NULL, err);
    json_decref(lock);
    nb_notebook_destroy(&nb);
    return rc;
}

/* ---- verifying ---------------------------------------------------------- */

static json_t *
s_load_json(const nb_archive_t *a, const char *name, err_t *err)
{
    const nb_archive_file_t *f = nb_archive_find(a, name);
    if (!f) {
        err_set(err, ERR_VERIFY, "%s is missing from the archive", name);
        return NULL;
    }
    json_error_t je;
    json_t *j =
        jsonlim_loadb(f->data, f->size, JSON_REJECT_DUPLICATES, NULL, &je);
    if (!json_is_object(j)) {
        json_decref(j);
        err_set(err, ERR_VERIFY, "%s is not a JSON object (line %d: %s)", name,
                je.line, je.text);
        return NULL;
    }
    return j;
}

/* The signed statement's subjects as NAME -> sha256 (new), or NULL with
 * err set. */
static json_t *
s_subject_names(const json_t *statement, err_t *err)
{
    const char *t = json_string_value(json_object_get(statement, "_type"));
    json_t *subjects = json_object_get(statement, "subject");
    if (!t || strcmp(t, NB_INTOTO_STATEMENT_V1) != 0 ||
        !json_is_array(subjects)) {
        err_set(err, ERR_VERIFY,
                "the signed payload is not an in-toto Statement v1");
        return NULL;
    }
    json_t *want = json_object();
    size_t i;
    json_t *s;
    json_array_foreach(subjects, i, s)
    {
        const char *name = json_string_value(json_object_get(s, "name"));
        const char *sha = json_string_value(
            json_object_get(json_object_get(s, "digest"), "sha256"));
        if (!name || !sha || json_object_get(want, name)) {
            json_decref(want);
            err_set(err, ERR_VERIFY,
                    "the statement's subjects are malformed (at %zu)", i);
            return NULL;
        }
        json_object_set_new(want, name, json_string(sha));
    }
    return want;
}

/* Every file but provenance.json must be a subject with the same hash,
 * and every subject a file. */
static int
s_check_subjects(const nb_archive_t *a, const json_t *statement, err_t *err)
{
    json_t *want = s_subject_names(statement, err);
    if (!want)
        return -1;
    int rc = 0;
    for (size_t k = 0; k < a->nfiles && rc == 0; k++) {
        const nb_archive_file_t *f = &a->files[k];
        if (strcmp(f->name, AG_ARCHIVE_PROVENANCE) == 0)
            continue;
        const char *sha = json_string_value(json_object_get(want, f->name));
        if (!sha)
            rc = err_set(err, ERR_VERIFY,
                         "%s is in the archive but not in its signed "
                         "statement (added after signing)",
                         f->name);
        else if (strcmp(sha, f->sha256) != 0)
            rc = err_set(err, ERR_VERIFY,
                         "%s does not match its signed hash (sha256 %.16s..., "
                         "signed %.16s...): it was changed",
                         f->name, f->sha256, sha);
        json_object_del(want, f->name);
    }
    if (rc == 0 && json_object_size(want)) {
        const char *missing = json_object_iter_key(json_object_iter(want));
        rc = err_set(err, ERR_VERIFY,
                     "%s is named in the signed statement but missing from "
                     "the archive",
                     missing);
    }
    json_decref(want);
    return rc;
}

/* manifest-sha256.txt must list exactly what the statement lists. */
static int
s_check_manifest(const nb_archive_t *a, const json_t *statement, err_t *err)
{
    const nb_archive_file_t *m = nb_archive_find(a, AG_ARCHIVE_MANIFEST);
    if (!m)
        return err_set(err, ERR_VERIFY, "%s is missing from the archive",
                       AG_ARCHIVE_MANIFEST);
    json_t *subjects = json_array();
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(statement, "subject"), i, s)
    {
        const char *name = json_string_value(json_object_get(s, "name"));
        if (strcmp(name, AG_ARCHIVE_MANIFEST) != 0)
            json_array_append(subjects, s);
    }
    char *want = nb_bag_manifest(subjects);
    json_decref(subjects);
    int rc = strcmp(want, m->data) == 0
                 ? 0
                 : err_set(err, ERR_VERIFY,
                           "%s does not list the files the statement signs",
                           AG_ARCHIVE_MANIFEST);
    free(want);
    return rc;
}

/* What a verified archive may keep in memory, file by file: the only
 * files read into memory at all (everything else is hashed as it streams
 * by, and extracted when asked). */
#define PROVENANCE_MAX ((size_t)32 << 20)  /* 100 000 subjects fit */
#define ENVIRONMENT_MAX ((size_t)16 << 20) /* names and versions */
#define MANIFEST_MAX ((size_t)16 << 20)    /* 100 000 lines fit */
#define NOTEBOOK_MAX ((size_t)256 << 20)   /* the notebook, images inline */

/* The names the signed statement lists, with their hashes. */
typedef struct signed_names {
    json_t *want; /* NAME -> sha256 */
} signed_names_t;

/* nb_archive's admit: only a name the signature covers is read at all. */
static int
s_admit(void *ctx, const char *name, err_t *err)
{
    const signed_names_t *sn = ctx;
    if (strcmp(name, AG_ARCHIVE_PROVENANCE) == 0 ||
        json_object_get(sn->want, name))
        return 0;
    return err_set(err, ERR_VERIFY,
                   "%s is in the archive but not in its signed statement "
                   "(added after signing)",
                   name);
}

/* nb_archive's keep: the four files read after verifying, each capped. */
static size_t
s_keep(void *ctx, const char *name)
{
    (void)ctx;
    if (strcmp(name, AG_ARCHIVE_NOTEBOOK) == 0)
        return NOTEBOOK_MAX;
    if (strcmp(name, AG_ARCHIVE_ENVIRONMENT) == 0)
        return ENVIRONMENT_MAX;
    if (strcmp(name, AG_ARCHIVE_MANIFEST) == 0)
        return MANIFEST_MAX;
    if (strcmp(name, AG_ARCHIVE_PROVENANCE) == 0)
        return PROVENANCE_MAX;
    return 0;
}

ag_archive_t *
ag_archive_open(const char *path, int extract_dirfd, const pk_trust_t *trust,
                bool allow_unsigned, err_t *err)
{
    ag_archive_t *ar = xcalloc(1, sizeof *ar);
    json_t *env = NULL;
    char *body = NULL, *prov = NULL;
    signed_names_t sn = {0};
    /* The signature first, from a pass that reads no other content: until
     * it verifies, nothing else in the archive is read into memory. */
    size_t plen = 0;
    if (!(prov = nb_archive_read_one(path, AG_ARCHIVE_PROVENANCE,
                                     PROVENANCE_MAX, NULL, &plen, err)))
        goto fail;
    json_error_t je;
    env = jsonlim_loadb(prov, plen, JSON_REJECT_DUPLICATES, NULL, &je);
    if (!json_is_object(env)) {
        err_set(err, ERR_VERIFY, "%s is not a JSON object (line %d: %s)",
                AG_ARCHIVE_PROVENANCE, je.line, je.text);
        goto fail;
    }
    size_t blen;
    body = nb_dsse_open(env, NB_DSSE_INTOTO_TYPE, trust, allow_unsigned,
                        &ar->signer, &ar->is_signed, &blen, err);
    if (!body)
        goto fail;
    ar->statement =
        jsonlim_loadb(body, blen, JSON_REJECT_DUPLICATES, NULL, &je);
    if (!json_is_object(ar->statement)) {
        err_set(err, ERR_VERIFY, "the signed statement is not JSON: %s",
                je.text);
        goto fail;
    }
    if (!(sn.want = s_subject_names(ar->statement, err)))
        goto fail;
    /* Then every file the statement lists, hashed as it streams; a name it
     * does not list is refused before its content is read. */
    nb_archive_limits_t lim;
    nb_archive_limits_init(&lim);
    lim.admit = s_admit;
    lim.keep = s_keep;
    lim.ctx = &sn;
    if (!(ar->files = nb_archive_read(path, extract_dirfd, &lim, err)))
        goto fail;
    const nb_archive_file_t *pf =
        nb_archive_find(ar->files, AG_ARCHIVE_PROVENANCE);
    if (!pf || pf->size != plen || memcmp(pf->data, prov, plen) != 0) {
        err_set(err, ERR_VERIFY,
                "%s changed between two reads of the archive; refused",
                AG_ARCHIVE_PROVENANCE);
        goto fail;
    }
    if (s_check_subjects(ar->files, ar->statement, err) ||
        s_check_manifest(ar->files, ar->statement, err))
        goto fail;
    if (!(ar->environment =
              s_load_json(ar->files, AG_ARCHIVE_ENVIRONMENT, err)))
        goto fail;
    const nb_archive_file_t *f =
        nb_archive_find(ar->files, AG_ARCHIVE_NOTEBOOK);
    if (!f) {
        err_set(err, ERR_VERIFY, "%s is missing from the archive",
                AG_ARCHIVE_NOTEBOOK);
        goto fail;
    }
    if (!(ar->nb =
              nb_notebook_read_mem(f->data, f->size, AG_ARCHIVE_NOTEBOOK, err)))
        goto fail;
    for (size_t k = 0; ar->is_signed && trust && k < pk_trust_count(trust); k++)
        if (memcmp(pk_trust_key(trust, k)->pk, ar->signer.pk,
                   PK_KEY_PUBLIC_BYTES) == 0)
            ar->signer_origin = pk_trust_origin(trust, k);
    json_decref(env);
    json_decref(sn.want);
    free(body);
    free(prov);
    return ar;
fail:
    json_decref(env);
    json_decref(sn.want);
    free(body);
    free(prov);
    ag_archive_destroy(&ar);
    return NULL;
}

void
ag_archive_destroy(ag_archive_t **p)
{
    ag_archive_t *a = p ? *p : NULL;
    if (!a)
        return;
    nb_archive_destroy(&a->files);
    json_decref(a->statement);
    json_decref(a->environment);
    nb_notebook_destroy(&a->nb);
    free(a);
    *p = NULL;
}
