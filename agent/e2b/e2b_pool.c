#include "agent/e2b/e2b_pool.h"

#include "common/log.h"
#include "common/xalloc.h"
#include "kernel-bridge/pool/kb_serve.h"
#include "sandbox/sb_sandbox.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

struct e2b_pool {
    pid_t pid;  /* the serve child */
    char *dir;  /* owned: its 0700 directory */
    char *sock; /* owned: the socket path in it */
};

e2b_pool_t *
e2b_pool_start(const ag_session_opts_t *session, unsigned n, err_t *err)
{
    char tmpl[] = "/tmp/ja-e2b-pool-XXXXXX";
    if (!mkdtemp(tmpl)) {
        err_errno(err, ERR_IO,
                  "--pool: cannot make a directory for its "
                  "socket");
        return NULL;
    }
    e2b_pool_t *p = xcalloc(1, sizeof *p);
    p->dir = xstrdup(tmpl);
    p->sock = xasprintf("%s/serve.sock", tmpl);
    sb_policy_t policy;
    sb_policy_copy(&policy, &session->policy);
    policy.home_is_workspace = true; /* as e2b_sandbox asks for it */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        err_errno(err, ERR_IO, "--pool: cannot fork its server");
        sb_policy_release(&policy);
        e2b_pool_stop(&p);
        return NULL;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
        if (getppid() != parent)
            _exit(0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        kb_serve_opts_t o = {.socket_path = p->sock,
                             .kernel_name = session->kernel_name,
                             .policy = &policy,
                             .pool_size = n};
        err_t e = {0};
        if (kb_serve_run(&o, &e) < 0) {
            fprintf(stderr, "jupyter-agent e2b: --pool: %s\n", e.text);
            _exit(e.code ? e.code : 1);
        }
        _exit(0);
    }
    sb_policy_release(&policy);
    p->pid = pid;
    /* This process's sessions take their kernels from it. */
    setenv("JUPYTER_AGENT_SERVE_SOCKET", p->sock, 1);
    log_info("e2b: --pool %u: warm kernels from a private serve (pid %d)", n,
             (int)pid);
    return p;
}

void
e2b_pool_stop(e2b_pool_t **pp)
{
    if (!pp || !*pp)
        return;
    e2b_pool_t *p = *pp;
    *pp = NULL;
    if (p->pid > 0) {
        kill(p->pid, SIGTERM);
        int st;
        while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
            ;
    }
    unlink(p->sock);
    rmdir(p->dir);
    free(p->sock);
    free(p->dir);
    free(p);
}
