/* e2b_sandbox_pause: pausing and resuming a sandbox (e2b_sandbox.h,
 * docs/e2b.md "Pause and resume"), and its auto-pause at the timeout. */
#include "agent/e2b/e2b_sandbox.h"
#include "agent/e2b/e2b_sandbox_impl.h"

#include "agent/session/ag_pause.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_kernel.h"
#include "sandbox/sb_files.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

typedef struct s_pause_job {
    bool memory;      /* in: keep the kernel's memory */
    bool keep_tokens; /* in (resume): autoResume keeps the client's tokens */
    int rc;           /* out: 0 done, 1 already so, -1 err */
    bool memory_kept; /* out */
    err_t err;
} s_pause_job_t;

/* Count `bytes` against --pause-disk for sb: 0, or -1 with ERR_USAGE
 * (nothing counted) when the paused sandboxes would hold more. */
static int
s_reserve(e2b_sandbox_t *sb, uint64_t bytes, err_t *err)
{
    e2b_pause_use_t *u = sb->cfg->pause_use;
    uint64_t cap = sb->cfg->pause_disk_bytes;
    if (!u)
        return 0;
    pthread_mutex_lock(&u->lock);
    uint64_t have = u->bytes;
    bool over = cap && have + bytes > cap;
    if (!over)
        u->bytes += bytes;
    pthread_mutex_unlock(&u->lock);
    if (over)
        return err_set(err, ERR_USAGE,
                       "the paused sandboxes would hold %llu MiB, over this "
                       "server's --pause-disk of %llu MiB (%llu MiB held "
                       "now); the sandbox runs on",
                       (unsigned long long)((have + bytes) >> 20),
                       (unsigned long long)(cap >> 20),
                       (unsigned long long)(have >> 20));
    sb->pause_bytes = bytes;
    return 0;
}

void
e2b_sandbox_pause_unreserve(e2b_sandbox_t *sb)
{
    e2b_pause_use_t *u = sb->cfg->pause_use;
    if (!u || !sb->pause_bytes)
        return;
    pthread_mutex_lock(&u->lock);
    u->bytes -= sb->pause_bytes < u->bytes ? sb->pause_bytes : u->bytes;
    pthread_mutex_unlock(&u->lock);
    sb->pause_bytes = 0;
}

/* What /mnt/data holds (its own tmpfs): what a files-only pause keeps. */
static uint64_t
s_workspace_used(ag_session_t *s)
{
    const char *ws = ag_session_workspace(s);
    struct statvfs v;
    if (!ws || statvfs(ws, &v) != 0)
        return 0;
    return (uint64_t)(v.f_blocks - v.f_bfree) * v.f_frsize;
}

/* The memory kind: the box checkpointed into dir/image-XXXXXX, the session
 * kept (held) with its kernel saved. Commands are stopped first (their
 * streams cannot be saved); the interpreter's helpers and contexts stay
 * loaded in the saved kernel. 0, or -1 with *s put back when it still
 * runs (ERR_USAGE), else lost (the caller ends the sandbox). */
static int
s_pause_memory(e2b_sandbox_t *sb, ag_session_t *s, const char *dir,
               s_pause_job_t *pj)
{
    if (sb->slots[E2B_SLOT_PROCESS].state && sb->slots[E2B_SLOT_PROCESS].end)
        sb->slots[E2B_SLOT_PROCESS].end(sb, sb->slots[E2B_SLOT_PROCESS].state);
    ag_mem_pause_t *mp = NULL;
    if (mkdir(dir, 0700) != 0)
        err_errno(&pj->err, ERR_IO, "cannot create %s for the image", dir);
    else
        mp = ag_session_pause_memory(s, dir, &pj->err);
    if (mp && s_reserve(sb, ag_mem_pause_bytes(mp), &pj->err) < 0) {
        err_t rerr = {0}; /* over --pause-disk: back as it was */
        if (ag_session_resume_memory(s, &mp, &rerr) < 0) {
            pj->err = rerr;
            err_prefix(&pj->err, "over --pause-disk, and resuming failed");
        }
        ag_mem_pause_release(&mp);
    }
    pthread_mutex_lock(&sb->lock);
    if (mp) {
        sb->held = s;
        sb->mem = mp;
        pj->memory_kept = true;
    } else {
        sb->session = s; /* ERR_USAGE: running; else ended just below */
        rmdir(dir);
    }
    pthread_mutex_unlock(&sb->lock);
    if (!mp && pj->err.code != ERR_USAGE) {
        log_warn("e2b: sandbox %.8s… lost its kernel in a memory pause (%s)",
                 ag_reg_id(sb->entry), pj->err.text);
        err_prefix(&pj->err, "the sandbox is ended");
        ag_reg_end(sb->entry, "a memory pause failed");
    }
    return mp ? 0 : -1;
}

static void
s_pause_job(e2b_sandbox_t *sb, void *arg)
{
    s_pause_job_t *pj = arg;
    pthread_mutex_lock(&sb->lock);
    sb->auto_pausing = false;
    if (sb->paused || !sb->session) {
        pthread_mutex_unlock(&sb->lock);
        pj->rc = 1;
        return;
    }
    /* From now on enter() and calls are refused; wait out the users. */
    ag_session_t *s = sb->session;
    sb->session = NULL;
    while (sb->users > 0)
        pthread_cond_wait(&sb->cond, &sb->lock);
    pthread_mutex_unlock(&sb->lock);
    char *dir = xasprintf("%s/%s", sb->cfg->pause_dir, ag_reg_id(sb->entry));
    int64_t t0 = clock_mono_ms();
    if (pj->memory) {
        pj->rc = s_pause_memory(sb, s, dir, pj);
    } else if ((pj->rc = s_reserve(sb, s_workspace_used(s), &pj->err)) == 0) {
        /* Stop what runs in the box (commands); the interpreter forgets
         * the kernel it had loaded its helpers into. */
        for (int i = 0; i < E2B_NSLOTS; i++)
            if (sb->slots[i].state && sb->slots[i].end)
                sb->slots[i].end(sb, sb->slots[i].state);
        pj->rc = ag_session_pause(&s, &sb->sopts.policy, dir, false,
                                  &pj->memory_kept, &pj->err);
    }
    if (!pj->memory && pj->rc < 0) {
        e2b_sandbox_pause_unreserve(sb);
        pthread_mutex_lock(&sb->lock);
        sb->session = s; /* still running */
        pthread_mutex_unlock(&sb->lock);
    }
    pthread_mutex_lock(&sb->lock);
    if (pj->rc < 0) {
        free(dir);
    } else {
        sb->paused = true;
        sb->pause_dir = dir;
        if (!pj->memory && sb->workspace_fd >= 0)
            close(sb->workspace_fd); /* memory: the box's, kept */
        if (!pj->memory)
            sb->workspace_fd = -1;
    }
    pthread_cond_broadcast(&sb->cond);
    pthread_mutex_unlock(&sb->lock);
    if (pj->rc == 0) {
        ag_reg_set_deadline(sb->entry, 0); /* paused: kept until killed */
        if (pj->memory)
            log_info("e2b: sandbox %.8s… paused with its memory in %lld ms "
                     "(image %llu KiB in %s)",
                     ag_reg_id(sb->entry), (long long)(clock_mono_ms() - t0),
                     (unsigned long long)ag_mem_pause_bytes(sb->mem) >> 10,
                     ag_mem_pause_dir(sb->mem));
        else
            log_info("e2b: sandbox %.8s… paused (files only, %llu KiB in %s)",
                     ag_reg_id(sb->entry),
                     (unsigned long long)sb->pause_bytes >> 10, sb->pause_dir);
    }
}

int
e2b_sandbox_pause(e2b_sandbox_t *sb, bool memory, err_t *err)
{
    if (ag_pause_check(&sb->sopts.policy, memory, err) < 0)
        return -1;
    if (!sb->cfg->pause_dir)
        return err_set(err, ERR_IO,
                       "this server has no directory for paused sandboxes");
    s_pause_job_t pj = {.memory = memory};
    if (e2b_sandbox_call_job(sb, s_pause_job, &pj, true) < 0)
        return err_set(err, ERR_KERNEL, "the sandbox ended meanwhile");
    if (pj.rc < 0 && err)
        *err = pj.err;
    return pj.rc;
}

/* The memory kind: the seal checked, the box restored, a new client. On
 * failure the sandbox stays paused when the image was refused before
 * anything ran (the kernel still saved), else it is ended. */
static ag_session_t *
s_resume_memory(e2b_sandbox_t *sb, s_pause_job_t *pj)
{
    ag_session_t *s = sb->held; /* only this thread changes held and mem */
    if (ag_session_resume_memory(s, &sb->mem, &pj->err) == 0) {
        pthread_mutex_lock(&sb->lock);
        sb->held = NULL;
        pthread_mutex_unlock(&sb->lock);
        pj->memory_kept = true;
        return s;
    }
    /* Still paused: the image was refused before runsc read it. Not: the
     * restore went half-way and the kernel is dead. */
    kb_kernel_t *k = ag_session_kernel(s);
    if (!k || !kb_kernel_paused(k)) {
        log_warn("e2b: sandbox %.8s… lost its kernel in a resume (%s)",
                 ag_reg_id(sb->entry), pj->err.text);
        err_prefix(&pj->err, "the sandbox is ended");
        ag_reg_end(sb->entry, "a resume failed");
    }
    return NULL;
}

static void
s_resume_job(e2b_sandbox_t *sb, void *arg)
{
    s_pause_job_t *pj = arg;
    pthread_mutex_lock(&sb->lock);
    bool paused = sb->paused;
    bool memory = sb->mem != NULL;
    pthread_mutex_unlock(&sb->lock);
    if (!paused) {
        pj->rc = 1;
        return;
    }
    int64_t t0 = clock_mono_ms();
    ag_session_t *s = memory ? s_resume_memory(sb, pj)
                             : ag_session_resume(&sb->sopts, sb->pause_dir,
                                                 &pj->memory_kept, &pj->err);
    if (!s) {
        pj->rc = -1;
        return;
    }
    int fd = -1;
    if (!memory) {
        e2b_sandbox_apply_net_rules(sb,
                                    s); /* the operator's, not the create's */
        const char *ws = ag_session_workspace(s);
        fd = ws ? open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    }
    pthread_mutex_lock(&sb->lock);
    sb->session = s;
    if (!memory)
        sb->workspace_fd = fd;
    sb->paused = false;
    if (memory)
        rmdir(sb->pause_dir); /* the image is gone with the handle */
    free(sb->pause_dir);
    sb->pause_dir = NULL;
    if (!pj->keep_tokens) { /* the old tokens reach nothing any more */
        e2b_sandbox_new_token(sb->envd_token);
        e2b_sandbox_new_token(sb->traffic_token);
    }
    pthread_cond_broadcast(&sb->cond);
    pthread_mutex_unlock(&sb->lock);
    e2b_sandbox_pause_unreserve(sb);
    pj->rc = 0;
    log_info("e2b: sandbox %.8s… resumed in %lld ms (%s)", ag_reg_id(sb->entry),
             (long long)(clock_mono_ms() - t0),
             memory ? "with its memory" : "a fresh kernel, the files kept");
}

int
e2b_sandbox_resume(e2b_sandbox_t *sb, bool *memory_kept, err_t *err)
{
    s_pause_job_t pj = {0};
    *memory_kept = true;
    if (e2b_sandbox_call_job(sb, s_resume_job, &pj, true) < 0)
        return err_set(err, ERR_KERNEL, "the sandbox ended meanwhile");
    if (pj.rc < 0 && err)
        *err = pj.err;
    if (pj.rc == 0)
        *memory_kept = pj.memory_kept;
    return pj.rc;
}

int
e2b_sandbox_wake(e2b_sandbox_t *sb, const char *envd_token,
                 const char *traffic_token, err_t *err)
{
    pthread_mutex_lock(&sb->lock);
    bool may = sb->auto_resume;
    bool match = e2b_sandbox_token_match(sb, envd_token, traffic_token);
    pthread_mutex_unlock(&sb->lock);
    if (!may)
        return err_set(err, ERR_USAGE,
                       "the sandbox is paused: resume it with "
                       "Sandbox.connect() (POST /v2/sandboxes/{id}/connect) "
                       "first, or create it with autoResume");
    if (!match)
        return err_set(err, ERR_VERIFY,
                       "this sandbox needs its access token: send "
                       "X-Access-Token (the envdAccessToken its create "
                       "answered)");
    s_pause_job_t pj = {.keep_tokens = true};
    if (e2b_sandbox_call_job(sb, s_resume_job, &pj, true) < 0)
        return err_set(err, ERR_KERNEL, "the sandbox ended meanwhile");
    if (pj.rc < 0) {
        if (err)
            *err = pj.err;
        return -1;
    }
    if (pj.rc == 0) {
        ag_reg_set_deadline(sb->entry,
                            clock_mono_ms() + (int64_t)sb->timeout_s * 1000);
        log_info("e2b: sandbox %.8s… resumed by a request (autoResume)",
                 ag_reg_id(sb->entry));
    }
    return 0;
}

bool
e2b_sandbox_paused(e2b_sandbox_t *sb)
{
    pthread_mutex_lock(&sb->lock);
    bool p = sb->paused;
    pthread_mutex_unlock(&sb->lock);
    return p;
}

void
e2b_sandbox_set_auto_pause(e2b_sandbox_t *sb, bool on, bool memory, bool resume)
{
    pthread_mutex_lock(&sb->lock);
    sb->auto_pause = on;
    sb->auto_pause_memory = on && memory;
    sb->auto_resume = on && memory && resume;
    pthread_mutex_unlock(&sb->lock);
}

static void
s_auto_pause_job(e2b_sandbox_t *sb, void *arg)
{
    (void)arg;
    if (e2b_sandbox_ending(sb))
        return; /* posted: only clean up */
    pthread_mutex_lock(&sb->lock);
    s_pause_job_t pj = {.memory = sb->auto_pause_memory};
    pthread_mutex_unlock(&sb->lock);
    s_pause_job(sb, &pj);
    if (pj.rc < 0) {
        log_warn("e2b: sandbox %.8s… could not pause at its timeout (%s); "
                 "killing it",
                 ag_reg_id(sb->entry), pj.err.text);
        ag_reg_end(sb->entry, "timeout");
    }
}

/* The table's expire hook: an autoPause sandbox pauses at its timeout. */
bool
e2b_sandbox_expire(void *payload)
{
    e2b_sandbox_t *sb = payload;
    pthread_mutex_lock(&sb->lock);
    bool pause = sb->auto_pause && !sb->paused && !sb->ending;
    bool queue = pause && !sb->auto_pausing;
    sb->auto_pausing = sb->auto_pausing || pause;
    pthread_mutex_unlock(&sb->lock);
    if (queue)
        e2b_sandbox_post(sb, s_auto_pause_job, NULL);
    return pause;
}
