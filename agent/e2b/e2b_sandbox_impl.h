/*
 * e2b_sandbox_impl: private to agent/e2b/e2b_sandbox*.c: the sandbox,
 * shared by e2b_sandbox.c (the thread, creating, calls, accessors) and
 * e2b_sandbox_pause.c (pause, resume, auto-pause).
 */
#ifndef AGENT_E2B_E2B_SANDBOX_IMPL_H
#define AGENT_E2B_E2B_SANDBOX_IMPL_H

#include "agent/e2b/e2b_sandbox.h"
#include "agent/session/ag_pause_memory.h"

#include <pthread.h>
#include <time.h>

/* A call waiting for the sandbox's thread. */
typedef struct e2b_job {
    void (*fn)(e2b_sandbox_t *, void *);
    void *arg;
    bool done;    /* ran, or was refused */
    bool refused; /* the sandbox ended first */
    bool posted;  /* e2b_sandbox_post: on the heap, runs even when refused */
    bool control; /* pause/resume: runs while paused too */
    struct e2b_job *next;
} e2b_job_t;

struct e2b_sandbox {
    const e2b_config_t *cfg; /* borrowed */
    ag_reg_entry_t *entry;   /* the table's entry; the thread holds a ref */
    char envd_token[E2B_TOKEN_LEN + 1];
    char traffic_token[E2B_TOKEN_LEN + 1];
    char *template_id;       /* owned */
    char *kernel_name;       /* owned */
    json_t *metadata;        /* owned object */
    json_t *env_vars;        /* owned object */
    ag_session_opts_t sopts; /* owned: the operator's, with this box's
                                kernel and home_is_workspace */
    time_t started_at;       /* wall clock, for startedAt */
    int64_t started_ms;      /* clock_mono_ms */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;   /* jobs, users, ending, started changed */
    ag_session_t *session; /* owned by the thread */
    int workspace_fd;      /* the session's, or -1 */
    int users;             /* e2b_sandbox_enter holders */
    bool ending;           /* asked to end */
    bool started;          /* the start finished (ok or not) */
    bool start_failed;
    err_t start_err;
    int timeout_s;          /* the create's life, given again by autoResume */
    bool paused;            /* no process runs (files only, or memory) */
    char *pause_dir;        /* owned while paused: pause_dir/ID, 0700 */
    ag_session_t *held;     /* a memory pause: the session whose box is
                               saved in mem's image (session is NULL) */
    ag_mem_pause_t *mem;    /* owned: that image and its key, or NULL */
    uint64_t pause_bytes;   /* counted in cfg->pause_use while paused */
    bool auto_pause;        /* the timeout pauses instead of killing */
    bool auto_pause_memory; /* ... with the kernel's memory */
    bool auto_resume;       /* a request with a token resumes it */
    bool auto_pausing;      /* an automatic pause is queued */
    e2b_job_t *jobs, *jobs_tail; /* waiting calls */
    char *net_rules; /* owned: set by PUT .../network (under lock), or NULL */
    struct {
        void *state;
        void (*end)(e2b_sandbox_t *, void *);
        void (*free)(void *);
    } slots[E2B_NSLOTS]; /* e2b_sandbox_slot */
};

/* Run fn on the sandbox's thread and wait; `control` jobs (pause,
 * resume) run while paused too. 0, or -1 when refused. */
int e2b_sandbox_call_job(e2b_sandbox_t *sb, void (*fn)(e2b_sandbox_t *, void *),
                         void *arg, bool control);
/* Is either token one of sb's (constant time; paused or not)? With
 * sb->lock held. */
bool e2b_sandbox_token_match(const e2b_sandbox_t *sb, const char *envd_token,
                             const char *traffic_token);
/* Give a session that a resume started the operator's --allow-net rules
 * (PUT .../network), if any were set. */
void e2b_sandbox_apply_net_rules(e2b_sandbox_t *sb, ag_session_t *s);
/* Give back what a paused sandbox counted against --pause-disk. */
void e2b_sandbox_pause_unreserve(e2b_sandbox_t *sb);
/* A new random access token. */
void e2b_sandbox_new_token(char out[E2B_TOKEN_LEN + 1]);
/* The table's expire hook (e2b_sandbox_pause.c): an autoPause sandbox
 * pauses at its timeout. */
bool e2b_sandbox_expire(void *payload);

#endif
