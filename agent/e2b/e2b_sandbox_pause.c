/* e2b_sandbox_pause: pausing and resuming a sandbox (e2b_sandbox.h,
 * docs/e2b.md "Pause and resume"), and its auto-pause at the timeout. */
#include "agent/e2b/e2b_sandbox.h"
#include "agent/e2b/e2b_sandbox_impl.h"

#include "agent/session/ag_pause.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "sandbox/sb_files.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct s_pause_job {
    bool memory;      /* in: keep the kernel's memory */
    int rc;           /* out: 0 done, 1 already so, -1 err */
    bool memory_kept; /* out */
    err_t err;
} s_pause_job_t;

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
    /* Stop what runs in the box (commands); the interpreter forgets the
     * kernel it had loaded its helpers into. */
    for (int i = 0; i < E2B_NSLOTS; i++)
        if (sb->slots[i].state && sb->slots[i].end)
            sb->slots[i].end(sb, sb->slots[i].state);
    char *dir = xasprintf("%s/%s", sb->cfg->pause_dir, ag_reg_id(sb->entry));
    pj->rc = ag_session_pause(&s, &sb->sopts.policy, dir, pj->memory,
                              &pj->memory_kept, &pj->err);
    pthread_mutex_lock(&sb->lock);
    if (pj->rc < 0) {
        sb->session = s; /* still running */
        free(dir);
    } else {
        sb->paused = true;
        sb->pause_dir = dir;
        if (sb->workspace_fd >= 0)
            close(sb->workspace_fd);
        sb->workspace_fd = -1;
    }
    pthread_cond_broadcast(&sb->cond);
    pthread_mutex_unlock(&sb->lock);
    if (pj->rc == 0) {
        ag_reg_set_deadline(sb->entry, 0); /* paused: kept until killed */
        log_info("e2b: sandbox %.8s… paused (files only, in %s)",
                 ag_reg_id(sb->entry), sb->pause_dir);
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

static void
s_resume_job(e2b_sandbox_t *sb, void *arg)
{
    s_pause_job_t *pj = arg;
    pthread_mutex_lock(&sb->lock);
    bool paused = sb->paused;
    pthread_mutex_unlock(&sb->lock);
    if (!paused) {
        pj->rc = 1;
        return;
    }
    ag_session_t *s = ag_session_resume(&sb->sopts, sb->pause_dir,
                                        &pj->memory_kept, &pj->err);
    if (!s) {
        pj->rc = -1;
        return;
    }
    const char *ws = ag_session_workspace(s);
    int fd = ws ? open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    pthread_mutex_lock(&sb->lock);
    sb->session = s;
    sb->workspace_fd = fd;
    sb->paused = false;
    free(sb->pause_dir);
    sb->pause_dir = NULL;
    e2b_sandbox_new_token(
        sb->envd_token); /* the old tokens reach nothing any more */
    e2b_sandbox_new_token(sb->traffic_token);
    pthread_cond_broadcast(&sb->cond);
    pthread_mutex_unlock(&sb->lock);
    pj->rc = 0;
    log_info("e2b: sandbox %.8s… resumed (a fresh kernel, the files kept)",
             ag_reg_id(sb->entry));
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

bool
e2b_sandbox_paused(e2b_sandbox_t *sb)
{
    pthread_mutex_lock(&sb->lock);
    bool p = sb->paused;
    pthread_mutex_unlock(&sb->lock);
    return p;
}

void
e2b_sandbox_set_auto_pause(e2b_sandbox_t *sb, bool on)
{
    pthread_mutex_lock(&sb->lock);
    sb->auto_pause = on;
    pthread_mutex_unlock(&sb->lock);
}

static void
s_auto_pause_job(e2b_sandbox_t *sb, void *arg)
{
    (void)arg;
    if (e2b_sandbox_ending(sb))
        return; /* posted: only clean up */
    s_pause_job_t pj = {0};
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
