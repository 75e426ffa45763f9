/* sb_engine: engine names, the default, and what gVisor would use here. */
#include "sandbox/sb_engine.h"

#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

const char *
sb_engine_name(sb_engine_t e)
{
    return e == SB_ENGINE_NAMESPACES ? "namespaces"
           : e == SB_ENGINE_GVISOR   ? "gvisor"
                                     : "?";
}

int
sb_engine_parse(const char *name, sb_engine_t *out, err_t *err)
{
    if (name && strcmp(name, "namespaces") == 0)
        *out = SB_ENGINE_NAMESPACES;
    else if (name && strcmp(name, "gvisor") == 0)
        *out = SB_ENGINE_GVISOR;
    else
        return err_set(err, ERR_USAGE,
                       "--engine: '%s' is not an engine; use namespaces (the "
                       "host kernel) or gvisor (runsc)",
                       name ? name : "");
    return 0;
}

sb_engine_t
sb_engine_default(void)
{
    const char *v = getenv("JUPYTER_AGENT_ENGINE");
    sb_engine_t e = SB_ENGINE_NAMESPACES;
    if (v && *v && sb_engine_parse(v, &e, NULL) < 0)
        return SB_ENGINE_BAD;
    return e;
}

const char *
sb_engine_nesting_gap(sb_engine_t e)
{
    if (e != SB_ENGINE_GVISOR)
        return NULL;
    return "--factory cannot run with --engine gvisor: the factory forks "
           "each kernel into a box nested in its own and enters it with "
           "setns(), and a gVisor sandbox is one user-space kernel that no "
           "host process can enter or fork into; use --no-factory (each "
           "warm kernel gets a runsc sandbox of its own), or --engine "
           "namespaces";
}

/* An executable runsc: $JUPYTER_AGENT_RUNSC, else on a fixed list (never
 * $PATH: the launcher may be root and PATH the caller's). */
char *
sb_gvisor_find_runsc(err_t *err)
{
    const char *env = getenv("JUPYTER_AGENT_RUNSC");
    const char *const paths[] = {env && *env ? env : "/usr/bin/runsc",
                                 "/usr/sbin/runsc", "/usr/local/bin/runsc"};
    for (size_t i = 0; i < (env && *env ? 1 : 3); i++) {
        struct stat st;
        if (stat(paths[i], &st) == 0 && S_ISREG(st.st_mode) &&
            access(paths[i], X_OK) == 0)
            return xstrdup(paths[i]);
    }
    err_set(err, ERR_SANDBOX,
            "--engine gvisor: runsc (gVisor) is not installed%s%s; install "
            "it with 'apt-get install runsc', or use --engine namespaces",
            env && *env ? " at $JUPYTER_AGENT_RUNSC=" : "",
            env && *env ? env : "");
    return NULL;
}

const char *
sb_gvisor_platform(void)
{
    const char *force = getenv("JUPYTER_AGENT_GVISOR_PLATFORM");
    if (force && (strcmp(force, "kvm") == 0 || strcmp(force, "ptrace") == 0))
        return force;
    int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        return "kvm";
    }
    return "ptrace"; /* runsc 20221219 has no systrap */
}

/* The first line runsc --version prints (new string) or NULL. */
static char *
s_runsc_version(const char *runsc)
{
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0)
        return NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pp[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char ver[] = "--version";
    char *const argv[] = {(char *)runsc, ver, NULL};
    pid_t pid = -1;
    int rc = posix_spawn(&pid, runsc, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pp[1]);
    char text[256] = {0};
    size_t got = 0;
    ssize_t n;
    while (rc == 0 && got < sizeof text - 1 &&
           (n = read(pp[0], text + got, sizeof text - 1 - got)) > 0)
        got += (size_t)n;
    close(pp[0]);
    if (rc == 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    text[strcspn(text, "\n")] = '\0';
    return rc == 0 && text[0] ? xstrdup(text) : NULL;
}

json_t *
sb_gvisor_info(void)
{
    err_t err = {0};
    char *runsc = sb_gvisor_find_runsc(&err);
    json_t *j = json_object();
    json_object_set_new(j, "engine", json_string("gvisor"));
    if (!runsc) {
        json_object_set_new(j, "runsc", json_null());
        json_object_set_new(j, "error", json_string(err.text));
        return j;
    }
    char *ver = s_runsc_version(runsc);
    json_object_set_new(j, "runsc", json_string(runsc));
    json_object_set_new(j, "version", ver ? json_string(ver) : json_null());
    json_object_set_new(j, "platform", json_string(sb_gvisor_platform()));
    json_object_set_new(
        j, "platform_why",
        json_string(strcmp(sb_gvisor_platform(), "kvm") == 0
                        ? "/dev/kvm is usable"
                        : "no usable /dev/kvm; this runsc has no systrap, "
                          "so ptrace (slower system calls)"));
    json_object_set_new(
        j, "in_force",
        json_pack("[sssssssss]", "runsc --network=none (no network stack)",
                  "--host-uds=open on one relay socket (the kernel's sockets "
                  "live inside the sandbox)",
                  "read-only root, /usr, /etc entries and lib links",
                  "tmpfs /tmp, home, /dev/shm, socket dir with size caps "
                  "(inside gVisor)",
                  "/mnt/data: a size-capped host tmpfs in a private mount "
                  "namespace",
                  "uid 1000, no capabilities, no_new_privs, rlimits",
                  "cgroup (memory, cpu, pids) around runsc itself",
                  "the Sentry's own seccomp filter on the host",
                  "no Landlock or seccomp of ours inside (gVisor answers "
                  "every call)"));
    free(ver);
    free(runsc);
    return j;
}
