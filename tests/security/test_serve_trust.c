/*
 * The serve socket is a trust boundary: a client hands the server its
 * --file inputs and attaches to the kernel the server names, so it must
 * talk only to its own user's server; and the single-threaded server must
 * not be wedged or refused by a client of that user. Each check attacks:
 *   - with HOME and XDG_RUNTIME_DIR unset there is no default socket (it
 *     used to be /tmp/.cache/..., which any local user can create first);
 *   - a socket planted by another user (uid 65534, in a forked child) in a
 *     directory of theirs gets nothing from the client;
 *   - nor does one in a directory of ours that another user listens on
 *     (SO_PEERCRED);
 *   - a client that never reads its replies is dropped, and others are
 *     still served;
 *   - a burst of 200 connections is accepted whole.
 * The real server runs on a private socket with one warm sandboxed kernel.
 */
#include "../tap.h"

#include "agent/cli/ag_cmd.h"
#include "common/clock.h"
#include "kernel-bridge/pool/kb_serve.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define OTHER_UID 65534
#define BURST 200

static char s_sock[128];

static pid_t
s_start_server(void)
{
    int pfd[2];
    if (pipe(pfd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        char a0[] = "serve", a1[] = "--pool", a2[] = "1", a3[] = "--socket";
        char *argv[] = {a0, a1, a2, a3, s_sock, NULL};
        _exit(ag_cmd_serve(5, argv));
    }
    close(pfd[1]);
    char line[512] = "";
    ssize_t n = read(pfd[0], line, sizeof line - 1);
    close(pfd[0]);
    return n > 0 ? pid : -1;
}

static int
s_unix(const char *path, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    if (strlen(path) < sizeof sa->sun_path)
        strcpy(sa->sun_path, path);
    return socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
}

/* A listener run by another user: forks a child that becomes OTHER_UID,
 * makes `dir` (its own, mode 0755), listens on dir/serve.sock and reports
 * through the returned pipe, after `wait_s`: -1 if no one connected, else
 * the bytes the first client sent before hanging up. `ready` is read once
 * it listens. */
static pid_t
s_plant(const char *dir, int wait_s, int *report)
{
    int pfd[2];
    if (pipe(pfd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        if (setgid(OTHER_UID) || setuid(OTHER_UID))
            _exit(3);
        if (mkdir(dir, 0755) && errno != EEXIST)
            _exit(4);
        char path[400];
        snprintf(path, sizeof path, "%s/serve.sock", dir);
        struct sockaddr_un sa;
        int lfd = s_unix(path, &sa);
        if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 8) ||
            chmod(path, 0777))
            _exit(5);
        long got = -1;
        if (write(pfd[1], "L", 1) != 1)
            _exit(6);
        struct pollfd pf = {.fd = lfd, .events = POLLIN};
        if (poll(&pf, 1, wait_s * 1000) == 1) {
            int c = accept(lfd, NULL, NULL);
            got = 0;
            char buf[4096];
            pf = (struct pollfd){.fd = c, .events = POLLIN};
            while (poll(&pf, 1, 5000) == 1) {
                ssize_t n = recv(c, buf, sizeof buf, 0);
                if (n <= 0)
                    break;
                got += n;
            }
        }
        if (write(pfd[1], &got, sizeof got) != sizeof got)
            _exit(7);
        _exit(0);
    }
    close(pfd[1]);
    char ready;
    if (read(pfd[0], &ready, 1) != 1) {
        close(pfd[0]);
        return -1;
    }
    *report = pfd[0];
    return pid;
}

static long
s_planted_result(pid_t pid, int report)
{
    long got = -2;
    if (read(report, &got, sizeof got) != sizeof got)
        got = -2;
    close(report);
    waitpid(pid, NULL, 0);
    return got;
}

static bool
s_stats_ok(void)
{
    err_t err;
    json_t *r = kb_serve_request(s_sock, "stats", &err);
    bool ok = r && json_is_true(json_object_get(r, "ok"));
    if (!ok)
        diag("stats: %s", err.text);
    json_decref(r);
    return ok;
}

static void
s_no_default(void)
{
    char *saved[3];
    const char *names[3] = {"HOME", "XDG_RUNTIME_DIR",
                            "JUPYTER_AGENT_SERVE_SOCKET"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(names[i]);
        saved[i] = v ? strdup(v) : NULL;
        unsetenv(names[i]);
    }
    char *path = kb_serve_default_path();
    bool none = path == NULL;
    ok(none,
       "with HOME and XDG_RUNTIME_DIR unset there is no default socket "
       "(not /tmp/.cache/...: %s)",
       path ? path : "none");
    free(path);
    err_t err = {0};
    json_t *r = kb_serve_request(NULL, "stats", &err);
    ok(!r && strstr(err.text, "XDG_RUNTIME_DIR") && strstr(err.text, "HOME"),
       "the client says what to set instead (%s)", err.text);
    json_decref(r);
    bool no_server = false;
    kb_launcher_t *l = kb_serve_take(NULL, NULL, NULL, &no_server, &err);
    ok(!l && no_server, "so a session starts cold instead of asking anyone");
    kb_launcher_destroy(&l);
    kb_serve_opts_t so = {0};
    /* (Where there is a default, serve would start and run: not here.) */
    ok(none && kb_serve_run(&so, &err) != 0 &&
           strstr(err.text, "XDG_RUNTIME_DIR"),
       "and serve refuses to start without a safe place for its socket");
    for (int i = 0; i < 3; i++) {
        if (saved[i])
            setenv(names[i], saved[i], 1);
        free(saved[i]);
    }
}

static void
s_planted(const char *base)
{
    char dir[300], path[400];
    snprintf(dir, sizeof dir, "%s/theirs", base);
    snprintf(path, sizeof path, "%s/serve.sock", dir);
    int report;
    pid_t pid = s_plant(dir, 3, &report);
    if (!ok(pid > 0, "another user plants a listening socket")) {
        return;
    }
    err_t err = {0};
    json_t *r = kb_serve_request(path, "stats", &err);
    ok(!r && strstr(err.text, "not trusting") &&
           strstr(err.text, "JUPYTER_AGENT_SERVE_SOCKET"),
       "the client refuses a socket in another user's directory (%s)",
       err.text);
    json_decref(r);
    long got = s_planted_result(pid, report);
    ok(got == -1, "and never even connects to it (%ld)", got);

    /* The same listener, its directory then made ours (0700): only the
     * peer's credentials tell. */
    snprintf(dir, sizeof dir, "%s/ours", base);
    snprintf(path, sizeof path, "%s/serve.sock", dir);
    pid = s_plant(dir, 15, &report);
    if (!ok(pid > 0 && chown(dir, geteuid(), getegid()) == 0 &&
                chmod(dir, 0700) == 0,
            "another user listens in a directory that is then ours"))
        return;
    r = kb_serve_request(path, "stats", &err);
    ok(!r && strstr(err.text, "runs as uid 65534"),
       "the client refuses a server of another uid (%s)", err.text);
    json_decref(r);
    got = s_planted_result(pid, report);
    ok(got == 0, "and sends it nothing, not even the request (%ld bytes)", got);
}

static void
s_non_reader(void)
{
    struct sockaddr_un sa;
    int fd = s_unix(s_sock, &sa);
    if (!ok(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0,
            "a client of ours connects"))
        return;
    /* Ask for stats 5000 times and never read a reply. */
    const char req[] = "{\"op\":\"stats\"}";
    int sent = 0;
    int64_t end = clock_mono_ms() + 30000;
    while (sent < 5000 && clock_mono_ms() < end) {
        if (send(fd, req, sizeof req - 1, MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {
            sent++;
            continue;
        }
        if (errno != EAGAIN)
            break; /* dropped already */
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        poll(&pf, 1, 100);
    }
    diag("sent %d requests without reading a reply", sent);
    ok(s_stats_ok(), "another client is still served while one never reads "
                     "its replies");
    /* The non-reader was dropped: after its queued replies, end of file. */
    char buf[4096];
    bool eof = false;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    while (poll(&pf, 1, 10000) == 1) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) {
            eof = n == 0;
            break;
        }
    }
    ok(eof, "and the client that never read was dropped");
    close(fd);
}

static void
s_burst(void)
{
    int fds[BURST], connected = 0, again = 0;
    for (int i = 0; i < BURST; i++) {
        struct sockaddr_un sa;
        close(s_unix(s_sock, &sa));
        fds[i] =
            socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (connect(fds[i], (struct sockaddr *)&sa, sizeof sa) == 0)
            connected++;
        else if (errno == EAGAIN)
            again++;
    }
    ok(connected == BURST,
       "a burst of %d connections is accepted (%d connected, %d EAGAIN)", BURST,
       connected, again);
    const char req[] = "{\"op\":\"stats\"}";
    int answered = 0;
    for (int i = 0; i < BURST; i++) {
        char buf[4096];
        struct pollfd pf = {.fd = fds[i], .events = POLLIN};
        if (send(fds[i], req, sizeof req - 1, MSG_NOSIGNAL) > 0 &&
            poll(&pf, 1, 20000) == 1 && recv(fds[i], buf, sizeof buf, 0) > 0)
            answered++;
        close(fds[i]);
    }
    ok(answered == BURST, "and every one of them is answered (%d)", answered);
}

int
main(void)
{
    signal(SIGPIPE, SIG_IGN);
    alarm(600);
    char base[] = "/tmp/ja-serve-trust-XXXXXX";
    if (!mkdtemp(base))
        return 1;
    snprintf(s_sock, sizeof s_sock, "%s/serve.sock", base);
    setenv("JUPYTER_AGENT_SERVE_SOCKET", s_sock, 1);

    s_no_default();
    if (geteuid() == 0 && chmod(base, 0755) == 0) {
        char plant[200];
        snprintf(plant, sizeof plant, "%s/plant", base);
        if (mkdir(plant, 0755) == 0 && chown(plant, OTHER_UID, OTHER_UID) == 0)
            s_planted(plant);
        else
            ok(0, "a directory for another user: %s", strerror(errno));
        chmod(base, 0700);
    } else {
        skip("planting a socket as another user needs root");
    }

    pid_t server = s_start_server();
    if (ok(server > 0, "our own server starts") && s_stats_ok()) {
        ok(1, "and the client trusts it (our uid, our 0700 directory)");
        s_non_reader();
        s_burst();
    }
    json_decref(kb_serve_request(s_sock, "stop", NULL));
    if (server > 0)
        waitpid(server, NULL, 0);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", base);
    if (system(cmd) != 0)
        diag("could not remove %s", base);
    return done_testing();
}
