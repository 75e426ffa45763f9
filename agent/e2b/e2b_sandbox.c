#include "agent/e2b/e2b_sandbox.h"
#include "agent/e2b/e2b_sandbox_impl.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/strv.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_kernel.h"
#include "sandbox/sb_files.h"
#include "sandbox/sb_sandbox.h"

#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the table's ops --------------------------------------------------- */

static void
s_end(void *payload, const char *why)
{
    e2b_sandbox_t *sb = payload;
    log_info("e2b: sandbox %.8s… ends (%s)", ag_reg_id(sb->entry), why);
    pthread_mutex_lock(&sb->lock);
    sb->ending = true;
    pthread_cond_broadcast(&sb->cond);
    pthread_mutex_unlock(&sb->lock);
}

static void
s_free(void *payload)
{
    e2b_sandbox_t *sb = payload;
    for (int i = 0; i < E2B_NSLOTS; i++)
        if (sb->slots[i].state && sb->slots[i].free)
            sb->slots[i].free(sb->slots[i].state);
    sodium_memzero(sb->envd_token, sizeof sb->envd_token);
    sodium_memzero(sb->traffic_token, sizeof sb->traffic_token);
    free(sb->template_id);
    free(sb->pause_dir);
    free(sb->kernel_name);
    json_decref(sb->metadata);
    json_decref(sb->env_vars);
    sb->sopts.kernel_name = NULL; /* borrowed from kernel_name */
    ag_session_opts_release(&sb->sopts);
    free(sb->net_rules);
    pthread_cond_destroy(&sb->cond);
    pthread_mutex_destroy(&sb->lock);
    free(sb);
}

static const ag_reg_ops_t s_ops = {
    .end = s_end, .free = s_free, .expire = e2b_sandbox_expire};

/* ---- the thread -------------------------------------------------------- */

static void
s_run_jobs(e2b_sandbox_t *sb)
{
    /* With the lock held on entry and exit. */
    while (sb->jobs && !sb->ending) {
        e2b_job_t *j = sb->jobs;
        sb->jobs = j->next;
        if (!sb->jobs)
            sb->jobs_tail = NULL;
        if (!sb->session && !j->control && !j->posted) {
            j->done = j->refused = true; /* paused meanwhile */
            pthread_cond_broadcast(&sb->cond);
            continue;
        }
        pthread_mutex_unlock(&sb->lock);
        j->fn(sb, j->arg); /* posted while paused: e2b_sandbox_ending() */
        pthread_mutex_lock(&sb->lock);
        if (j->posted) {
            free(j);
            continue;
        }
        j->done = true;
        pthread_cond_broadcast(&sb->cond);
    }
}

/* A new session of the sandbox's (a resume) gets the operator's rules. */
void
e2b_sandbox_apply_net_rules(e2b_sandbox_t *sb, ag_session_t *s)
{
    pthread_mutex_lock(&sb->lock);
    char *rules = sb->net_rules ? xstrdup(sb->net_rules) : NULL;
    pthread_mutex_unlock(&sb->lock);
    err_t err = {0};
    if (rules && ag_session_set_net_rules(s, rules, &err) < 0)
        log_warn("e2b: --allow-net: %s", err.text);
    free(rules);
}

int
e2b_sandbox_set_net_rules(e2b_sandbox_t *sb, const char *rules, err_t *err)
{
    if (!sb->sopts.policy.allow_net)
        return err_set(err, ERR_USAGE,
                       "this sandbox has no egress proxy: it was created "
                       "without network.allowOut on a server started "
                       "without --allow-net");
    if (sb_net_rules_check(rules, err) < 0)
        return -1;
    if (!e2b_sandbox_enter(sb))
        return err_set(err, ERR_USAGE,
                       "the sandbox is paused or ending; resume it first");
    int rc = ag_session_set_net_rules(e2b_sandbox_session(sb), rules, err);
    if (rc == 0) {
        pthread_mutex_lock(&sb->lock);
        free(sb->net_rules);
        sb->net_rules = xstrdup(rules);
        pthread_mutex_unlock(&sb->lock);
    }
    e2b_sandbox_leave(sb);
    return rc;
}

static void *
s_main(void *arg)
{
    e2b_sandbox_t *sb = arg;
    err_t err = {0};
    ag_session_t *s = ag_session_start(&sb->sopts, &err);
    pthread_mutex_lock(&sb->lock);
    sb->session = s;
    sb->started = true;
    if (!s) {
        sb->start_failed = true;
        sb->start_err = err;
    } else {
        const char *ws = ag_session_workspace(s);
        sb->workspace_fd =
            ws ? open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    }
    pthread_cond_broadcast(&sb->cond);
    while (s && !sb->ending) { /* s: the start went well */
        s_run_jobs(sb);
        if (!sb->ending)
            pthread_cond_wait(&sb->cond, &sb->lock);
    }
    /* Ending: refuse the calls still waiting (posted ones run, to clean
     * up), wait for users to leave. */
    e2b_job_t *left = sb->jobs;
    sb->jobs = sb->jobs_tail = NULL;
    while (left) {
        e2b_job_t *j = left;
        left = j->next;
        if (j->posted) {
            pthread_mutex_unlock(&sb->lock);
            j->fn(sb, j->arg);
            free(j);
            pthread_mutex_lock(&sb->lock);
        } else {
            j->done = j->refused = true;
        }
    }
    pthread_cond_broadcast(&sb->cond);
    while (sb->users > 0)
        pthread_cond_wait(&sb->cond, &sb->lock);
    pthread_mutex_unlock(&sb->lock);
    for (int i = 0; i < E2B_NSLOTS; i++) /* set once: no lock needed now */
        if (sb->slots[i].state && sb->slots[i].end)
            sb->slots[i].end(sb, sb->slots[i].state);
    pthread_mutex_lock(&sb->lock);
    s = sb->session ? sb->session : sb->held; /* held: memory-paused */
    sb->session = sb->held = NULL;
    ag_mem_pause_t *mem = sb->mem;
    sb->mem = NULL;
    int fd = sb->workspace_fd;
    sb->workspace_fd = -1;
    char *paused = sb->pause_dir;
    sb->pause_dir = NULL;
    pthread_mutex_unlock(&sb->lock);
    if (fd >= 0)
        close(fd);
    if (s)
        ag_session_destroy(&s); /* kernel killed; box, cgroup, run dir gone */
    ag_mem_pause_release(&mem); /* key wiped, image removed */
    e2b_sandbox_pause_unreserve(sb);
    if (paused && sb_files_remove_tree(paused) < 0)
        log_warn("e2b: could not remove all of %s (a paused sandbox's files)",
                 paused);
    free(paused);
    log_info("e2b: sandbox %.8s… removed", ag_reg_id(sb->entry));
    ag_reg_entry_t *e = sb->entry;
    ag_reg_gone(e);
    ag_reg_unref(&e);
    return NULL;
}

/* ---- creating ---------------------------------------------------------- */

static char **
s_strv_copy(char *const *v)
{
    if (!v)
        return NULL;
    size_t n = strv_len(v);
    char **c = xcalloc(n + 1, sizeof *c);
    for (size_t i = 0; i < n; i++)
        c[i] = xstrdup(v[i]);
    return c;
}

void
e2b_sandbox_new_token(char out[E2B_TOKEN_LEN + 1])
{
    unsigned char raw[E2B_TOKEN_LEN / 2];
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(out, E2B_TOKEN_LEN + 1, raw, sizeof raw);
    sodium_memzero(raw, sizeof raw);
}

ag_reg_entry_t *
e2b_sandbox_create(const e2b_config_t *cfg, const e2b_create_t *c, err_t *err)
{
    e2b_sandbox_t *sb = xcalloc(1, sizeof *sb);
    sb->cfg = cfg;
    e2b_sandbox_new_token(sb->envd_token);
    e2b_sandbox_new_token(sb->traffic_token);
    sb->template_id = xstrdup(c->template_id);
    sb->kernel_name = xstrdup(c->kernel_name ? c->kernel_name : "python3");
    sb->metadata = c->metadata ? json_deep_copy(c->metadata) : json_object();
    sb->env_vars = c->env_vars ? json_deep_copy(c->env_vars) : json_object();
    sb->workspace_fd = -1;
    pthread_mutex_init(&sb->lock, NULL);
    pthread_cond_init(&sb->cond, NULL);
    /* The operator's session flags, with this box's kernel and the home
     * directory E2B code expects. */
    const ag_session_opts_t *o = cfg->session;
    sb->sopts = *o;
    sb_policy_copy(&sb->sopts.policy, &o->policy);
    sb->sopts.files = s_strv_copy(o->files);
    sb->sopts.installs = s_strv_copy(o->installs);
    sb->sopts.trusts = s_strv_copy(o->trusts);
    sb->sopts.packages_dir = o->packages_dir ? xstrdup(o->packages_dir) : NULL;
    sb->sopts.gateway_url = NULL; /* refused by the command */
    sb->sopts.gateway_token_file = NULL;
    sb->sopts.gateway_ca = NULL;
    sb->sopts.audit = audit_log_ref(o->audit); /* the server's one log */
    sb->sopts.kernel_name = sb->kernel_name;
    sb->sopts.policy.home_is_workspace = true;
    if (c->allow_net) { /* network.allowOut: this box's own rules */
        free(sb->sopts.policy.allow_net);
        sb->sopts.policy.allow_net = xstrdup(c->allow_net);
    }
    /* As the pool warms them: the same command line (no history flag). */
    sb->sopts.history_in_memory = false;
    sb->started_at = time(NULL);
    sb->started_ms = clock_mono_ms();
    int timeout_s = c->timeout_s > 0 ? c->timeout_s : cfg->default_timeout_s;
    sb->timeout_s = timeout_s;
    ag_reg_entry_t *e = ag_registry_add(
        cfg->registry, c->owner, sb->started_ms + (int64_t)timeout_s * 1000, sb,
        &s_ops, err);
    if (!e) {
        s_free(sb);
        return NULL;
    }
    sb->entry = e;
    ag_reg_ref(e); /* the thread's */
    if (pthread_create(&sb->thread, NULL, s_main, sb) != 0) {
        err_set(err, ERR_IO, "cannot start a thread for the sandbox");
        ag_reg_end(e, "failed");
        ag_reg_gone(e);
        ag_reg_unref(&e); /* the thread's */
        ag_reg_unref(&e);
        return NULL;
    }
    pthread_detach(sb->thread);
    pthread_mutex_lock(&sb->lock);
    while (!sb->started)
        pthread_cond_wait(&sb->cond, &sb->lock);
    bool failed = sb->start_failed;
    if (failed && err)
        *err = sb->start_err;
    pthread_mutex_unlock(&sb->lock);
    if (failed || !ag_reg_set_running(e)) {
        if (!failed)
            err_set(err, ERR_KERNEL, "the sandbox ended while it started");
        ag_reg_end(e, "failed");
        ag_reg_unref(&e);
        return NULL;
    }
    log_info("e2b: sandbox %.8s… running (%s, %s, %s kernel, timeout %d s)",
             ag_reg_id(e), sb->template_id, sb->kernel_name,
             ag_session_is_warm(sb->session) ? "a warm" : "a cold", timeout_s);
    return e;
}

/* ---- accessors --------------------------------------------------------- */

e2b_sandbox_t *
e2b_sandbox_of(ag_reg_entry_t *e)
{
    return ag_reg_payload(e);
}

ag_reg_entry_t *
e2b_sandbox_entry(e2b_sandbox_t *sb)
{
    return sb->entry;
}

const char *
e2b_sandbox_id(const e2b_sandbox_t *sb)
{
    return ag_reg_id(sb->entry);
}

const char *
e2b_sandbox_template(const e2b_sandbox_t *sb)
{
    return sb->template_id;
}

const char *
e2b_sandbox_envd_token(const e2b_sandbox_t *sb)
{
    return sb->envd_token;
}

const char *
e2b_sandbox_traffic_token(const e2b_sandbox_t *sb)
{
    return sb->traffic_token;
}

/* Compared as SHA-256 digests: neither the bytes nor the length of what
 * the client sent shape the time. */
static bool
s_same(const char *want, const char *got)
{
    if (!got)
        return false;
    unsigned char a[crypto_hash_sha256_BYTES], b[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(a, (const unsigned char *)want, strlen(want));
    crypto_hash_sha256(b, (const unsigned char *)got, strlen(got));
    return sodium_memcmp(a, b, sizeof a) == 0;
}

bool
e2b_sandbox_token_match(const e2b_sandbox_t *sb, const char *envd_token,
                        const char *traffic_token)
{
    bool a = s_same(sb->envd_token, envd_token);
    bool b = s_same(sb->traffic_token, traffic_token);
    return a || b;
}

bool
e2b_sandbox_token_ok(const e2b_sandbox_t *sb, const char *envd_token,
                     const char *traffic_token)
{
    e2b_sandbox_t *m = (e2b_sandbox_t *)sb; /* the lock only */
    pthread_mutex_lock(&m->lock);           /* a resume renews them */
    bool match = e2b_sandbox_token_match(sb, envd_token, traffic_token);
    bool live = sb->session != NULL; /* paused: nothing to reach */
    pthread_mutex_unlock(&m->lock);
    return match && live;
}

static void
s_iso_time(time_t t, char *buf, size_t size)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

json_t *
e2b_sandbox_info(e2b_sandbox_t *sb, bool with_tokens)
{
    char started[32], end[32];
    s_iso_time(sb->started_at, started, sizeof started);
    int64_t deadline = ag_reg_deadline(sb->entry);
    time_t end_at =
        deadline ? sb->started_at + (time_t)((deadline - sb->started_ms) / 1000)
                 : sb->started_at + 365 * 86400;
    s_iso_time(end_at, end, sizeof end);
    const sb_policy_t *p = &sb->sopts.policy;
    int cpus = (int)(p->cpus + 0.999);
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:O, s:s, s:s, s:s, s:i, s:i, s:I, s:s, s:b, s:[]}",
        "sandboxID", ag_reg_id(sb->entry), "templateID", sb->template_id,
        "clientID", "jupyter-agent", "metadata", sb->metadata, "startedAt",
        started, "endAt", end, "state", "running", "cpuCount",
        cpus > 0 ? cpus : 1, "memoryMB", (int)(p->memory_bytes >> 20),
        "diskSizeMB", (json_int_t)(p->workspace_bytes >> 20), "envdVersion",
        E2B_ENVD_VERSION, "allowInternetAccess", 0, "volumeMounts");
    if (e2b_sandbox_paused(sb))
        json_object_set_new(j, "state", json_string("paused"));
    json_object_set_new(j, "alias", json_string(sb->template_id));
    if (with_tokens) {
        json_object_set_new(j, "envdAccessToken", json_string(sb->envd_token));
        json_object_set_new(j, "trafficAccessToken",
                            json_string(sb->traffic_token));
    }
    return j;
}

const json_t *
e2b_sandbox_env(const e2b_sandbox_t *sb)
{
    return sb->env_vars;
}

const sb_policy_t *
e2b_sandbox_policy(const e2b_sandbox_t *sb)
{
    return &sb->sopts.policy;
}

int
e2b_sandbox_exec_timeout_ms(const e2b_sandbox_t *sb)
{
    return sb->sopts.timeout_ms;
}

size_t
e2b_sandbox_max_output(const e2b_sandbox_t *sb)
{
    return sb->sopts.max_output_bytes ? sb->sopts.max_output_bytes
                                      : (size_t)64 << 20;
}

bool
e2b_sandbox_ending(e2b_sandbox_t *sb)
{
    pthread_mutex_lock(&sb->lock);
    /* Paused (or pausing): what runs must stop, as for an end. */
    bool e = sb->ending || (sb->started && !sb->session);
    pthread_mutex_unlock(&sb->lock);
    return e;
}

bool
e2b_sandbox_enter(e2b_sandbox_t *sb)
{
    pthread_mutex_lock(&sb->lock);
    bool ok = !sb->ending && sb->session;
    if (ok)
        sb->users++;
    pthread_mutex_unlock(&sb->lock);
    return ok;
}

void
e2b_sandbox_leave(e2b_sandbox_t *sb)
{
    pthread_mutex_lock(&sb->lock);
    sb->users--;
    pthread_cond_broadcast(&sb->cond);
    pthread_mutex_unlock(&sb->lock);
}

ag_session_t *
e2b_sandbox_session(e2b_sandbox_t *sb)
{
    return sb->session;
}

int
e2b_sandbox_workspace_fd(e2b_sandbox_t *sb)
{
    return sb->workspace_fd;
}

int
e2b_sandbox_call_job(e2b_sandbox_t *sb, void (*fn)(e2b_sandbox_t *, void *),
                     void *arg, bool control)
{
    e2b_job_t j = {.fn = fn, .arg = arg, .control = control};
    pthread_mutex_lock(&sb->lock);
    if (sb->ending || !sb->started || sb->start_failed ||
        (!sb->session && !control)) {
        pthread_mutex_unlock(&sb->lock);
        return -1;
    }
    if (pthread_equal(pthread_self(), sb->thread)) { /* already there */
        pthread_mutex_unlock(&sb->lock);
        fn(sb, arg);
        return 0;
    }
    if (sb->jobs_tail)
        sb->jobs_tail->next = &j;
    else
        sb->jobs = &j;
    sb->jobs_tail = &j;
    pthread_cond_broadcast(&sb->cond);
    while (!j.done)
        pthread_cond_wait(&sb->cond, &sb->lock);
    pthread_mutex_unlock(&sb->lock);
    return j.refused ? -1 : 0;
}

int
e2b_sandbox_call(e2b_sandbox_t *sb, void (*fn)(e2b_sandbox_t *, void *),
                 void *arg)
{
    return e2b_sandbox_call_job(sb, fn, arg, false);
}

void
e2b_sandbox_post(e2b_sandbox_t *sb, void (*fn)(e2b_sandbox_t *, void *),
                 void *arg)
{
    e2b_job_t *j = xcalloc(1, sizeof *j);
    j->fn = fn;
    j->arg = arg;
    j->posted = true;
    pthread_mutex_lock(&sb->lock);
    if (sb->ending || (sb->started && !sb->session)) { /* ends: clean up */
        pthread_mutex_unlock(&sb->lock);
        fn(sb, arg);
        free(j);
        return;
    }
    if (sb->jobs_tail)
        sb->jobs_tail->next = j;
    else
        sb->jobs = j;
    sb->jobs_tail = j;
    pthread_cond_broadcast(&sb->cond);
    pthread_mutex_unlock(&sb->lock);
}

void *
e2b_sandbox_slot(e2b_sandbox_t *sb, e2b_slot_t slot,
                 void *(*make)(e2b_sandbox_t *sb),
                 void (*end)(e2b_sandbox_t *sb, void *state),
                 void (*free_fn)(void *state))
{
    pthread_mutex_lock(&sb->lock);
    if (!sb->slots[slot].state && make) {
        sb->slots[slot].state = make(sb);
        sb->slots[slot].end = end;
        sb->slots[slot].free = free_fn;
    }
    void *state = sb->slots[slot].state;
    pthread_mutex_unlock(&sb->lock);
    return state;
}
