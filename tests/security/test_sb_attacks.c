/*
 * Security tests: attacks from inside the sandbox, each a guarantee.
 *
 * This program is both sides. Run normally, it is the TAP test: it builds
 * sandboxes with the library and runs *itself* inside them (bound
 * read-only at /opt/ja-test/attack) as "attack --inside MODE ARGS", which
 * tries one thing and prints "result: N" (0 = the attempt worked, else
 * the errno or error code that stopped it). Run with --unprivileged (by
 * tests/security/sandbox_unprivileged.sh, through setpriv) it checks the
 * subset that must also hold for an ordinary user.
 */
#include "common/strv.h"
#include "sandbox/sb_landlock.h"
#include "sandbox/sb_policy.h"
#include "sandbox/sb_sandbox.h"
#include "tests/tap.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/if_ether.h>
#include <linux/netlink.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define INSIDE_EXE "/opt/ja-test/attack"
#define HOST_RW_INSIDE "/opt/ja-test-hostrw"

/* The test-only weakenings of sb_sandbox.h: defining this symbol is what
 * makes them reachable (the release binary does not define it). */
sb_unsafe_test_knobs_t sb_unsafe_test_knobs;

#if defined(__SANITIZE_ADDRESS__)
#define S_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define S_ASAN 1
#endif
#endif

static int s_count_token(const char *token);
static int s_inside(const char *mode, int argc, char **argv);
static int a_batch(const char *list);

/* ================= inside the box: the attacker ================= */

static int
e(int rc)
{
    return rc < 0 ? errno : 0;
}

static int
a_connect(int family, const char *addr, int port)
{
    int s = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return errno;
    int rc;
    if (family == AF_INET) {
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, addr, &sa.sin_addr);
        rc = connect(s, (struct sockaddr *)&sa, sizeof sa);
    } else {
        struct sockaddr_in6 sa = {.sin6_family = AF_INET6,
                                  .sin6_port = htons((uint16_t)port)};
        inet_pton(AF_INET6, addr, &sa.sin6_addr);
        rc = connect(s, (struct sockaddr *)&sa, sizeof sa);
    }
    int err = rc < 0 ? errno : 0;
    close(s);
    return err;
}

static int
a_abstract(const char *name)
{
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    memcpy(sa.sun_path + 1, name, n);
    int rc =
        connect(s, (struct sockaddr *)&sa,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n));
    int err = rc < 0 ? errno : 0;
    close(s);
    return err;
}

static int
a_fill(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/fill", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return errno;
    static char chunk[1 << 20];
    memset(chunk, 'x', sizeof chunk);
    long long total = 0;
    int err = 0;
    signal(SIGXFSZ, SIG_IGN);
    for (;;) {
        ssize_t w = write(fd, chunk, sizeof chunk);
        if (w < 0) {
            err = errno;
            break;
        }
        total += w;
        if (total > (4LL << 30))
            break;
    }
    printf("written: %lld\n", total);
    close(fd);
    return err;
}

static int
a_forkbomb(void)
{
    int n = 0;
    for (;;) {
        pid_t p = fork();
        if (p == 0) {
            pause();
            _exit(0);
        }
        if (p < 0)
            break;
        n++;
        if (n > 100000)
            return 0;
    }
    int err = errno;
    printf("forked: %d\n", n);
    return err;
}

static int
a_membomb(void)
{
    for (long i = 0;; i++) {
        char *p = malloc(1 << 20);
        if (!p)
            return ENOMEM;
        memset(p, (int)i, 1 << 20);
        if (i > 64 * 1024)
            return 0;
    }
}

static int
a_status(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int bad = 0, seen = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "Cap", 3) == 0) {
            seen++;
            char *colon = strchr(line, ':');
            if (strtoull(colon + 1, NULL, 16) != 0)
                bad++;
        }
        if (strncmp(line, "NoNewPrivs:", 11) == 0 && atoi(line + 11) != 1)
            bad++;
        if (strncmp(line, "Seccomp:", 8) == 0 && atoi(line + 8) != 2)
            bad++;
        fputs(line, stdout);
    }
    if (f)
        fclose(f);
    return bad || seen != 5 ? 0 : 1;
}

static int
a_su(void)
{
    struct statvfs sv;
    if (statvfs("/usr/bin/su", &sv) == 0)
        printf("nosuid: %d\n", (sv.f_flag & ST_NOSUID) != 0);
    pid_t p = fork();
    if (p == 0) {
        int fd = open("/dev/null", O_RDWR);
        dup2(fd, 0);
        execl("/usr/bin/su", "su", "root", "-c", "true", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(p, &st, 0);
    printf("su status: %d\n", st);
    if (geteuid() == 0)
        return 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static int
a_tricks(void)
{
    int err = 0;
    err |= symlink("/etc/passwd", "/mnt/data/link");
    err |= symlink("/", "/mnt/data/rootlink");
    err |= mkfifo("/mnt/data/fifo", 0644);
    err |= mkdir("/mnt/data/sub", 0755);
    int fd = open("/mnt/data/sub/inner.txt", O_WRONLY | O_CREAT, 0644);
    err |= fd < 0 || write(fd, "inner\n", 6) != 6;
    close(fd);
    fd = open("/mnt/data/ok.txt", O_WRONLY | O_CREAT, 0644);
    err |= fd < 0 || write(fd, "ok\n", 3) != 3;
    close(fd);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, "/mnt/data/sock");
    err |= bind(s, (struct sockaddr *)&sa, sizeof sa);
    return err ? 1 : 0;
}

static int
a_listdir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return errno;
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            printf("entry: %s\n", de->d_name);
            n++;
        }
    closedir(d);
    return n;
}

static int
s_inside(const char *mode, int argc, char **argv)
{
    const char *a1 = argc > 0 ? argv[0] : "";
    const char *a2 = argc > 1 ? argv[1] : "";
    char c = 'x';
    if (!strcmp(mode, "connect4"))
        return a_connect(AF_INET, "127.0.0.1", atoi(a1));
    if (!strcmp(mode, "connect6"))
        return a_connect(AF_INET6, "::1", atoi(a1));
    if (!strcmp(mode, "bind4")) {
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET};
        inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
        int rc = e(bind(s, (struct sockaddr *)&sa, sizeof sa));
        close(s);
        return rc;
    }
    if (!strcmp(mode, "sysfs")) /* obsolete, harmless, on no allow list */
        return e((int)syscall(SYS_sysfs, 3));
    if (!strcmp(mode, "newer-syscall")) /* beyond every table row */
        return e((int)syscall(470, 0, 0, 0));
    if (!strcmp(mode, "testnet"))
        return a_connect(AF_INET, "192.0.2.1", 80);
    if (!strcmp(mode, "dns")) {
        struct addrinfo *ai = NULL;
        int rc = getaddrinfo(a1, "80", NULL, &ai);
        if (ai)
            freeaddrinfo(ai);
        return rc;
    }
    if (!strcmp(mode, "raw"))
        return e(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP));
    if (!strcmp(mode, "packet"))
        return e(socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL)));
    if (!strcmp(mode, "netlink-audit"))
        return e(socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT));
    if (!strcmp(mode, "netlink-route"))
        return e(socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE));
    if (!strcmp(mode, "vsock"))
        return e(socket(40 /* AF_VSOCK */, SOCK_STREAM, 0));
    if (!strcmp(mode, "family-hibits"))
        return e(
            (int)syscall(SYS_socket, (1UL << 32) | AF_PACKET, SOCK_RAW, 0));
    if (!strcmp(mode, "abstract"))
        return a_abstract(a1);
    if (!strcmp(mode, "read"))
        return e(open(a1, O_RDONLY));
    if (!strcmp(mode, "write"))
        return e(open(a1, O_WRONLY | O_CREAT, 0644));
    if (!strcmp(mode, "stat")) {
        struct stat st;
        return e(stat(a1, &st));
    }
    if (!strcmp(mode, "listdir"))
        return a_listdir(a1);
    if (!strcmp(mode, "ptrace")) {
        pid_t p = fork();
        if (p == 0) {
            pause();
            _exit(0);
        }
        int err = e((int)ptrace(PTRACE_ATTACH, p, 0, 0));
        kill(p, SIGKILL);
        return err;
    }
    if (!strcmp(mode, "traceme"))
        return e((int)ptrace(PTRACE_TRACEME, 0, 0, 0));
    if (!strcmp(mode, "mount"))
        return e(mount("none", "/tmp", "tmpfs", 0, NULL));
    if (!strcmp(mode, "remount-usr"))
        return e(mount(NULL, "/usr", NULL, MS_REMOUNT | MS_BIND, NULL));
    if (!strcmp(mode, "umount"))
        return e(umount2("/usr", MNT_DETACH));
    if (!strcmp(mode, "unshare-user"))
        return e(unshare(CLONE_NEWUSER));
    if (!strcmp(mode, "clone-newuser")) {
        long p = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        if (p == 0)
            _exit(0);
        return p < 0 ? errno : 0;
    }
    if (!strcmp(mode, "clone3")) {
        uint64_t args[11] = {0};
        args[4] = SIGCHLD;
        long p = syscall(SYS_clone3, args, sizeof args);
        if (p == 0)
            _exit(0);
        return p < 0 ? errno : 0;
    }
    if (!strcmp(mode, "setns")) {
        int fd = open("/proc/self/ns/net", O_RDONLY);
        return e(setns(fd, 0));
    }
    if (!strcmp(mode, "chroot"))
        return e(chroot("/tmp"));
    if (!strcmp(mode, "keyctl"))
        return e((int)syscall(SYS_keyctl, 0, -3, 0));
    if (!strcmp(mode, "bpf"))
        return e((int)syscall(SYS_bpf, 5, NULL, 0));
    if (!strcmp(mode, "perf")) {
        char attr[128] = {0};
        return e((int)syscall(SYS_perf_event_open, attr, 0, -1, -1, 0));
    }
    if (!strcmp(mode, "io_uring")) {
        char params[120] = {0};
        return e((int)syscall(SYS_io_uring_setup, 8, params));
    }
    if (!strcmp(mode, "userfaultfd"))
        return e((int)syscall(SYS_userfaultfd, 0));
    if (!strcmp(mode, "tiocsti"))
        return e(ioctl(0, TIOCSTI, &c));
    if (!strcmp(mode, "tiocsti-hibits"))
        return e((int)syscall(SYS_ioctl, 0, (1UL << 32) | TIOCSTI, &c));
    if (!strcmp(mode, "mknod"))
        return e(mknod("/mnt/data/null2", S_IFCHR | 0666, makedev(1, 3)));
    if (!strcmp(mode, "setuid0"))
        return e((int)syscall(SYS_setresuid, 0, 0, 0));
    if (!strcmp(mode, "personality"))
        return e(personality(ADDR_NO_RANDOMIZE));
    if (!strcmp(mode, "su"))
        return a_su();
    if (!strcmp(mode, "int80")) {
        long ret;
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20) : "memory");
        printf("int 0x80 returned %ld\n", ret);
        return 0;
    }
    if (!strcmp(mode, "x32")) {
        long r = syscall(0x40000000L | 39 /* getpid */);
        printf("x32 getpid returned %ld\n", r);
        return 0;
    }
    if (!strcmp(mode, "sysrq"))
        return e(open("/proc/sysrq-trigger", O_WRONLY));
    if (!strcmp(mode, "status"))
        return a_status();
    if (!strcmp(mode, "fill"))
        return a_fill(a1);
    if (!strcmp(mode, "forkbomb"))
        return a_forkbomb();
    if (!strcmp(mode, "membomb"))
        return a_membomb();
    if (!strcmp(mode, "spin-ignore")) {
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        printf("ready\n");
        fflush(stdout);
        for (volatile unsigned long i = 0;; i++)
            ;
    }
    if (!strcmp(mode, "busy")) {
        int child = 0;
        for (int i = 0; i < 3 && !child; i++)
            child = fork() == 0;
        if (!child) {
            printf("ready\n");
            fflush(stdout);
        }
        for (volatile unsigned long i = 0;; i++)
            ;
    }
    if (!strcmp(mode, "sleep")) {
        printf("ready\n");
        fflush(stdout);
        sleep(300);
        return 0;
    }
    if (!strcmp(mode, "daemon")) {
        if (fork() == 0) {
            setsid();
            if (fork() == 0) {
                execl(INSIDE_EXE, INSIDE_EXE, "--inside", "sleep", a1,
                      (char *)NULL);
                _exit(1);
            }
            _exit(0);
        }
        wait(NULL);
        /* Return only once the daemon runs (so its death means something). */
        for (int i = 0; i < 200; i++) {
            if (s_count_token(a1) > 0) {
                printf("daemon seen\n");
                return 0;
            }
            usleep(50 * 1000);
        }
        return 1;
    }
    if (!strcmp(mode, "killall")) {
        int err = e(kill(-1, SIGKILL));
        printf("survived kill(-1)\n");
        return err;
    }
    if (!strcmp(mode, "env")) {
        extern char **environ;
        for (char **p = environ; *p; p++)
            printf("env: %s\n", *p);
        return 0;
    }
    if (!strcmp(mode, "tricks"))
        return a_tricks();
    if (!strcmp(mode, "batch"))
        return a_batch(a1);
    (void)a2;
    fprintf(stderr, "unknown mode %s\n", mode);
    return 255;
}

/* ================= outside: the tests ================= */

static char s_self[4096];
static int s_asan; /* built with AddressSanitizer */

struct box {
    sb_exit_t ex;    /* how it ended */
    char out[65536]; /* its stdout */
    int result;      /* the "result: N" line, or -1000 if none */
    int spawned;     /* spawn succeeded */
    err_t err;       /* spawn error */
};

typedef void (*inspect_fn)(sb_sandbox_t *sb, void *arg);

static void
s_policy(sb_policy_t *p)
{
    sb_policy_init_default(p);
    sb_policy_add_bind(p, s_self, INSIDE_EXE, NULL);
}

/* Run "attack --inside ARGS..." in a box with policy `p`; wait at most
 * `secs`, then kill. `inspect` runs with the sandbox before destroy. */
static void
s_run(const sb_policy_t *p, const char *const args[], int secs, struct box *b,
      inspect_fn inspect, void *arg)
{
    memset(b, 0, sizeof *b);
    b->result = -1000;
    sb_sandbox_t *sb = sb_sandbox_new(p, &b->err);
    if (!sb)
        return;
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)INSIDE_EXE;
    argv[n++] = (char *)"--inside";
    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    char e0[] = "PATH=/usr/bin:/bin", e1[] = "HOME=/home/user",
         e2[] = "ASAN_OPTIONS=detect_leaks=0",
         e3[] = "OPENAI_API_KEY_PLANTED=no";
    char *envp[] = {e0, e1, e2, e3, NULL};
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        goto out;
    b->spawned = sb_sandbox_spawn(sb, argv, envp, pipefd[1], 2, &b->err) == 0;
    close(pipefd[1]);
    size_t len = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* Read until EOF or until the box has ended: under gVisor the engine
     * keeps a dup of the program's stdout (for a restore) until destroy,
     * so EOF never comes first. */
    bool ended = false;
    while (b->spawned) {
        struct pollfd pf = {.fd = pipefd[0], .events = POLLIN};
        int pr = poll(&pf, 1, ended ? 0 : 100);
        if (pr > 0) {
            ssize_t r = read(pipefd[0], b->out + len, sizeof b->out - 1 - len);
            if (r <= 0)
                break;
            len += (size_t)r;
            continue;
        }
        if (ended)
            break; /* drained */
        ended = sb_sandbox_wait(sb, 0, &b->ex) == 0;
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec >= secs) {
            sb_sandbox_kill(sb);
            break;
        }
    }
    close(pipefd[0]);
    b->out[len] = '\0';
    if (b->spawned)
        sb_sandbox_wait(sb, -1, &b->ex);
    const char *r = strstr(b->out, "result: ");
    if (r)
        b->result = atoi(r + 8);
    if (inspect)
        inspect(sb, arg);
out:
    sb_sandbox_destroy(&sb);
}

static const char *
s_errname(int err)
{
    static char buf[32];
    if (err == 0)
        return "success";
    if (err == -1000)
        return "no result";
    const char *n = err > 0 ? strerrorname_np(err) : NULL;
    if (n)
        return n;
    snprintf(buf, sizeof buf, "%d", err);
    return buf;
}

static void
s_take_report(sb_sandbox_t *sb, void *arg)
{
    *(char **)arg = sb_sandbox_seccomp_audit_report(sb);
}

/* One box, one guarantee: the attack must fail with `want` (0 = any). */
static void
s_expect(const sb_policy_t *p, const char *const args[], int want,
         const char *what)
{
    struct box b;
    s_run(p, args, 20, &b, NULL, NULL);
    int held = b.spawned && b.result != 0 && b.result != -1000 &&
               (want == 0 || b.result == want);
    ok(held, "%s (stopped by: %s)", what,
       b.spawned ? s_errname(b.result) : b.err.text);
    if (!held)
        diag("output: %s", b.out);
}

static void
s_expect_killed(const sb_policy_t *p, const char *const args[], int sig,
                const char *what)
{
    struct box b;
    s_run(p, args, 20, &b, NULL, NULL);
    ok(b.spawned && b.ex.kind == SB_SIGNALED && b.ex.signal == sig &&
           !strstr(b.out, "returned"),
       "%s (%s)", what, b.spawned ? strsignal(b.ex.signal) : b.err.text);
}

/* Processes on the host whose command line contains `token`. */
static int
s_count_token(const char *token)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        char path[300], buf[4096];
        snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t r = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (r <= 0)
            continue;
        for (ssize_t i = 0; i < r; i++)
            if (!buf[i])
                buf[i] = ' ';
        buf[r] = '\0';
        if (strstr(buf, token))
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

static int
s_wait_token_gone(const char *token, int secs)
{
    for (int i = 0; i < secs * 20; i++) {
        if (s_count_token(token) == 0)
            return 1;
        usleep(50 * 1000);
    }
    return 0;
}

static int
s_listen(int family, int *port)
{
    int s = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    int rc;
    if (family == AF_INET) {
        struct sockaddr_in sa = {.sin_family = AF_INET};
        inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
        rc = bind(s, (struct sockaddr *)&sa, sizeof sa);
    } else {
        struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
        inet_pton(AF_INET6, "::1", &sa.sin6_addr);
        rc = bind(s, (struct sockaddr *)&sa, sizeof sa);
    }
    if (rc < 0 || listen(s, 4) < 0) {
        close(s);
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(s, (struct sockaddr *)&ss, &sl);
    *port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                    : ((struct sockaddr_in6 *)&ss)->sin6_port);
    return s;
}

/* Each wall by itself: the namespace checks run without Landlock, the
 * Landlock checks with the namespace weakened (test-only knobs). */
static void
t_network(const sb_policy_t *p)
{
    sb_unsafe_test_knobs.no_landlock = true;
    char port[16];
    int lport = 0;
    int l4 = s_listen(AF_INET, &lport);
    snprintf(port, sizeof port, "%d", lport);
    if (l4 >= 0)
        s_expect(p, (const char *[]){"connect4", port, NULL}, ECONNREFUSED,
                 "network: a TCP listener on the host's 127.0.0.1 is "
                 "unreachable (own network namespace)");
    else
        skip("no IPv4 loopback on this host");
    int l6 = s_listen(AF_INET6, &lport);
    snprintf(port, sizeof port, "%d", lport);
    if (l6 >= 0)
        s_expect(p, (const char *[]){"connect6", port, NULL}, 0,
                 "network: a TCP listener on the host's ::1 is unreachable");
    else
        skip("no IPv6 loopback on this host");
    if (l4 >= 0)
        close(l4);
    if (l6 >= 0)
        close(l6);
    s_expect(p, (const char *[]){"testnet", NULL}, ENETUNREACH,
             "network: 192.0.2.1:80 fails at once with ENETUNREACH (no "
             "route out)");
    s_expect(p, (const char *[]){"dns", "example.com", NULL}, 0,
             "network: DNS lookup of example.com fails");
    s_expect(p, (const char *[]){"raw", NULL}, EPERM,
             "network: a raw IP socket is refused");
    s_expect(p, (const char *[]){"packet", NULL}, EPERM,
             "network: a packet socket is refused");
    s_expect(p, (const char *[]){"family-hibits", NULL}, EPERM,
             "network: AF_PACKET with garbage high bits is still refused");
    s_expect(p, (const char *[]){"vsock", NULL}, EPERM,
             "network: a vsock socket (to the hypervisor) is refused");
    s_expect(p, (const char *[]){"netlink-audit", NULL}, EPERM,
             "network: netlink other than NETLINK_ROUTE is refused");
    struct box b;
    s_run(p, (const char *[]){"netlink-route", NULL}, 20, &b, NULL, NULL);
    is_int(b.result, 0, "network: NETLINK_ROUTE still works (libzmq needs it)");

    char name[64];
    snprintf(name, sizeof name, "ja-attack-%d", (int)getpid());
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path + 1, name, strlen(name));
    socklen_t sl =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
    if (bind(s, (struct sockaddr *)&sa, sl) == 0 && listen(s, 1) == 0)
        s_expect(p, (const char *[]){"abstract", name, NULL}, ECONNREFUSED,
                 "network: a host abstract unix socket is unreachable");
    else
        skip("cannot bind an abstract socket");
    close(s);
    sb_unsafe_test_knobs.no_landlock = false;
}

static void
t_landlock(const sb_policy_t *p)
{
    const char *gap = sb_landlock_gap(sb_landlock_abi());
    if (sb_landlock_abi() <= 0) {
        skip("%s", gap);
        return;
    }
    struct box b;
    /* Files: a host directory bound writable into the box by mistake. */
    char host[] = "/tmp/ja-hostrw-XXXXXX", victim[64];
    if (!mkdtemp(host) || chmod(host, 0777) < 0) {
        ok(0, "landlock: a host directory for the test: %s", strerror(errno));
        return;
    }
    snprintf(victim, sizeof victim, "%s/planted", host);
    sb_unsafe_test_knobs.rw_bind_host = host;
    sb_unsafe_test_knobs.rw_bind_inside = HOST_RW_INSIDE;
    sb_unsafe_test_knobs.no_landlock = true;
    s_run(p, (const char *[]){"write", HOST_RW_INSIDE "/planted", NULL}, 20, &b,
          NULL, NULL);
    ok(b.result == 0 && access(victim, F_OK) == 0,
       "landlock: (control) with the mount namespace weakened and no "
       "Landlock, the box writes into the host directory (%s)",
       s_errname(b.result));
    unlink(victim);
    sb_unsafe_test_knobs.no_landlock = false;
    s_expect(p, (const char *[]){"write", HOST_RW_INSIDE "/planted", NULL},
             EACCES,
             "landlock: with a host directory bound writable by mistake, "
             "Landlock alone still refuses the write");
    ok(access(victim, F_OK) < 0, "landlock: ...and nothing appeared on the "
                                 "host");
    sb_unsafe_test_knobs.rw_bind_host = sb_unsafe_test_knobs.rw_bind_inside =
        NULL;
    rmdir(host);
    s_run(p, (const char *[]){"write", "/mnt/data/fine", NULL}, 20, &b, NULL,
          NULL);
    is_int(b.result, 0, "landlock: /mnt/data stays writable");
    s_run(p, (const char *[]){"write", "/dev/shm/fine", NULL}, 20, &b, NULL,
          NULL);
    is_int(b.result, 0, "landlock: /dev/shm stays writable");

    /* Network: the launcher's network namespace shared by mistake. */
    if (sb_landlock_abi() < 4) {
        skip("%s", gap);
        return;
    }
    char port[16];
    int lport = 0;
    int l4 = s_listen(AF_INET, &lport);
    if (l4 < 0) {
        skip("no IPv4 loopback on this host");
        return;
    }
    snprintf(port, sizeof port, "%d", lport);
    sb_unsafe_test_knobs.share_netns = true;
    sb_unsafe_test_knobs.no_landlock = true;
    s_run(p, (const char *[]){"connect4", port, NULL}, 20, &b, NULL, NULL);
    is_int(b.result, 0,
           "landlock: (control) in a shared network namespace without "
           "Landlock, the box reaches the host's 127.0.0.1 listener");
    sb_unsafe_test_knobs.no_landlock = false;
    s_expect(p, (const char *[]){"connect4", port, NULL}, EACCES,
             "landlock: in a shared network namespace, Landlock alone "
             "refuses a TCP connect to the host's 127.0.0.1 listener");
    s_expect(p, (const char *[]){"bind4", NULL}, EACCES,
             "landlock: in a shared network namespace, Landlock alone "
             "refuses a TCP bind");
    sb_unsafe_test_knobs.share_netns = false;
    close(l4);
    s_expect(p, (const char *[]){"bind4", NULL}, EACCES,
             "landlock: a normal box cannot bind TCP ports either");
}

static void
t_seccomp_allow_list(const sb_policy_t *base)
{
    s_expect(base, (const char *[]){"sysfs", NULL}, EPERM,
             "seccomp: a system call outside the allow list (sysfs) fails "
             "with EPERM");
    s_expect(base, (const char *[]){"newer-syscall", NULL}, ENOSYS,
             "seccomp: a system call newer than the table fails with "
             "ENOSYS (so libc falls back)");
    sb_policy_t p;
    sb_policy_copy(&p, base);
    p.seccomp_audit = true;
    struct box b;
    char *report = NULL;
    s_run(&p, (const char *[]){"sysfs", NULL}, 20, &b, s_take_report, &report);
    ok(b.result == 0 && report && strstr(report, "sysfs (#139, 1 call)"),
       "seccomp: --seccomp-audit lets sysfs through and reports it (%s)",
       report ? report : "no report");
    free(report);
    report = NULL;
    s_run(&p, (const char *[]){"ptrace", NULL}, 20, &b, s_take_report, &report);
    ok(b.result == EPERM,
       "seccomp: in audit mode the deny rows still refuse "
       "(ptrace: %s)",
       s_errname(b.result));
    free(report);
    sb_policy_release(&p);
}

struct tricks {
    char msg[6][1100];  /* errors from the way out */
    int rc[6];          /* their return codes */
    int copied_ok;      /* ok.txt came out */
    int copied_inner;   /* sub/inner.txt came out */
    int copied_bad;     /* something unsafe came out */
    int planted_dev;    /* a device node was planted (root only) */
    int dev_rc;         /* reading it out */
    char dev_msg[1100]; /* ...and the error */
};

/* Plant a character device in the workspace from the host (root only: a
 * device cannot be made inside). A child switches fsuid to the sandbox
 * user, as the userns tmpfs requires, and re-raises CAP_MKNOD. */
/* Many attacks in one box (a gVisor box takes a second or more to start):
 * `list` is "MODE[=ARG],..."; each runs in a child of its own, which
 * prints "result MODE: N" (or "signal MODE: SIG" if it was killed). */
static int
a_batch(const char *list)
{
    char *copy = strdup(list), *save = NULL;
    for (char *m = strtok_r(copy, ",", &save); m;
         m = strtok_r(NULL, ",", &save)) {
        char *arg = strchr(m, '=');
        if (arg)
            *arg++ = '\0';
        /* A fork costs a gVisor box under ptrace ~0.2 s: only the attacks
         * that change the attacker (a new user namespace, a tracer) or
         * may kill it run in a child. */
        static const char *const own[] = {
            "unshare-user", "traceme", "int80", "x32", "forkbomb", "killall"};
        bool fork_it = false;
        for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
            fork_it |= strcmp(m, own[i]) == 0;
        if (!fork_it) {
            printf("result %s: %d\n", m, s_inside(m, arg ? 1 : 0, &arg));
            continue;
        }
        pid_t c = fork();
        if (c == 0) {
            int r = s_inside(m, arg ? 1 : 0, &arg);
            printf("result %s: %d\n", m, r);
            _exit(0);
        }
        int st = 0;
        if (c > 0 && waitpid(c, &st, 0) == c && WIFSIGNALED(st))
            printf("signal %s: %d\n", m, WTERMSIG(st));
    }
    free(copy);
    return 0;
}

static int
s_plant_device(sb_sandbox_t *sb)
{
    if (geteuid() != 0)
        return -1;
    pid_t c = fork();
    if (c == 0) {
        setfsgid(sb_sandbox_host_gid(sb));
        setfsuid(sb_sandbox_host_uid(sb));
        struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct d[2];
        syscall(SYS_capget, &h, d);
        d[0].effective |= 1u << CAP_MKNOD;
        syscall(SYS_capset, &h, d);
        _exit(mknodat(sb_sandbox_workspace_fd(sb), "devnull", S_IFCHR | 0666,
                      makedev(1, 3)) == 0
                  ? 0
                  : 1);
    }
    int st = 1;
    waitpid(c, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void
s_inspect_tricks(sb_sandbox_t *sb, void *arg)
{
    struct tricks *t = arg;
    t->planted_dev = s_plant_device(sb) == 0;
    if (t->planted_dev) {
        err_t err;
        err_clear(&err);
        char *data = NULL;
        size_t len = 0;
        t->dev_rc =
            sb_sandbox_read_file(sb, "devnull", 1 << 20, &data, &len, &err);
        snprintf(t->dev_msg, sizeof t->dev_msg, "%s", err.text);
        free(data);
    }
    const char *paths[] = {"link", "fifo",        "sock",
                           "../x", "/etc/passwd", "rootlink/etc/passwd"};
    for (int i = 0; i < 6; i++) {
        err_t err;
        err_clear(&err);
        char *data = NULL;
        size_t len = 0;
        t->rc[i] =
            sb_sandbox_read_file(sb, paths[i], 1 << 20, &data, &len, &err);
        snprintf(t->msg[i], sizeof t->msg[i], "%s", err.text);
        free(data);
    }
    char dest[] = "/tmp/ja-attack-out-XXXXXX";
    if (!mkdtemp(dest))
        return;
    err_t err;
    sb_files_out_opts_t oo;
    sb_files_out_opts_init(&oo, 1 << 20);
    sb_sandbox_copy_out(sb, ".", dest, &oo, NULL, &err);
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/ok.txt", dest);
    t->copied_ok = stat(path, &st) == 0 && S_ISREG(st.st_mode);
    snprintf(path, sizeof path, "%s/sub/inner.txt", dest);
    t->copied_inner = stat(path, &st) == 0;
    const char *bad[] = {"link", "fifo", "sock", "rootlink", "devnull"};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", dest, bad[i]);
        if (lstat(path, &st) == 0)
            t->copied_bad++;
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dest);
    if (system(cmd) != 0)
        diag("could not remove %s", dest);
}

static void
t_files(const sb_policy_t *p)
{
    s_expect(p, (const char *[]){"read", "/etc/shadow", NULL}, ENOENT,
             "files: /etc/shadow does not exist inside");
    s_expect(p, (const char *[]){"stat", "/root", NULL}, ENOENT,
             "files: /root does not exist inside");
    struct box b;
    s_run(p, (const char *[]){"listdir", "/home", NULL}, 20, &b, NULL, NULL);
    ok(b.result == 1 && strstr(b.out, "entry: user"),
       "files: /home holds only the sandbox user's empty home");
    sb_sandbox_t *other = sb_sandbox_new(p, NULL);
    if (other) {
        const char *rd = sb_sandbox_run_dir(other);
        s_expect(p, (const char *[]){"stat", rd, NULL}, ENOENT,
                 "files: another sandbox's run dir is not visible");
        sb_sandbox_destroy(&other);
    }
    s_run(p, (const char *[]){"listdir", "/tmp", NULL}, 20, &b, NULL, NULL);
    ok(b.result == 1, "files: /tmp holds only this sandbox's run dir path");
    s_expect(p, (const char *[]){"write", "/evil", NULL}, 0,
             "files: writing to / fails");
    s_expect(p, (const char *[]){"write", "/usr/evil", NULL}, 0,
             "files: writing to /usr fails");
    s_expect(p, (const char *[]){"write", "/etc/passwd", NULL}, 0,
             "files: writing /etc/passwd fails");
    s_expect(p, (const char *[]){"write", "/dev/evil", NULL}, 0,
             "files: creating files in /dev fails");

    struct tricks t;
    memset(&t, 0, sizeof t);
    s_run(p, (const char *[]){"tricks", NULL}, 20, &b, s_inspect_tricks, &t);
    is_int(b.result, 0,
           "files: the attacker planted a symlink, a FIFO, a "
           "socket and a link to /");
    ok(t.rc[0] < 0 && strstr(t.msg[0], "symbolic link"),
       "files out: a symlink to /etc/passwd is refused: %s", t.msg[0]);
    ok(t.rc[1] < 0 && strstr(t.msg[1], "FIFO"),
       "files out: a FIFO is refused without blocking: %s", t.msg[1]);
    ok(t.rc[2] < 0 && strstr(t.msg[2], "socket"),
       "files out: a socket is refused: %s", t.msg[2]);
    ok(t.rc[3] < 0 && strstr(t.msg[3], ".."),
       "files out: '../x' is refused: %s", t.msg[3]);
    ok(t.rc[4] < 0 && strstr(t.msg[4], "absolute"),
       "files out: an absolute path is refused: %s", t.msg[4]);
    ok(t.rc[5] < 0 && strstr(t.msg[5], "symbolic link"),
       "files out: a path through a symlinked directory is refused: %s",
       t.msg[5]);
    if (t.planted_dev)
        ok(t.dev_rc < 0 && strstr(t.dev_msg, "character device"),
           "files out: a device node is refused: %s", t.dev_msg);
    else
        skip("could not plant a device node in /mnt/data (needs root)");
    ok(t.copied_ok && t.copied_inner && t.copied_bad == 0,
       "files out: copying the workspace takes regular files and skips "
       "the rest");

    sb_sandbox_t *sb = sb_sandbox_new(p, NULL);
    err_t err;
    err_clear(&err);
    ok(sb && sb_sandbox_add_file(sb, "/etc/hostname", "../../x", &err) < 0 &&
           strstr(err.text, "../../x"),
       "files in: an upload named ../../x is refused: %s", err.text);
    ok(sb && sb_sandbox_add_file(sb, "/dev/zero", NULL, &err) < 0,
       "files in: a device is refused as an upload");
    sb_sandbox_destroy(&sb);
}

static void
t_privilege(const sb_policy_t *p, int unpriv)
{
    struct box b;
    s_run(p, (const char *[]){"status", NULL}, 20, &b, NULL, NULL);
    ok(b.result == 1, "privilege: no capabilities at all, NO_NEW_PRIVS set, "
                      "seccomp filter on");
    s_expect(p, (const char *[]){"ptrace", NULL}, EPERM,
             "privilege: ptrace of a sibling process is refused");
    s_expect(p, (const char *[]){"traceme", NULL}, EPERM,
             "privilege: PTRACE_TRACEME is refused");
    s_expect(p, (const char *[]){"mount", NULL}, EPERM,
             "privilege: mount is refused");
    s_expect(p, (const char *[]){"remount-usr", NULL}, EPERM,
             "privilege: remounting /usr writable is refused");
    s_expect(p, (const char *[]){"umount", NULL}, EPERM,
             "privilege: unmounting is refused");
    s_expect(p, (const char *[]){"unshare-user", NULL}, EPERM,
             "privilege: unshare(CLONE_NEWUSER) is refused");
    s_expect(p, (const char *[]){"clone-newuser", NULL}, EPERM,
             "privilege: clone(CLONE_NEWUSER) is refused");
    s_expect(p, (const char *[]){"clone3", NULL}, ENOSYS,
             "privilege: clone3 reports ENOSYS (flags unfilterable)");
    s_expect(p, (const char *[]){"setns", NULL}, EPERM,
             "privilege: setns is refused");
    s_expect(p, (const char *[]){"chroot", NULL}, EPERM,
             "privilege: chroot is refused");
    s_expect(p, (const char *[]){"keyctl", NULL}, EPERM,
             "privilege: keyctl is refused");
    s_expect(p, (const char *[]){"bpf", NULL}, EPERM,
             "privilege: bpf is refused");
    s_expect(p, (const char *[]){"perf", NULL}, EPERM,
             "privilege: perf_event_open is refused");
    s_expect(p, (const char *[]){"io_uring", NULL}, EPERM,
             "privilege: io_uring_setup is refused");
    s_expect(p, (const char *[]){"userfaultfd", NULL}, EPERM,
             "privilege: userfaultfd is refused");
    s_expect(p, (const char *[]){"tiocsti", NULL}, EPERM,
             "privilege: TIOCSTI (typing into the terminal) is refused");
    s_expect(p, (const char *[]){"tiocsti-hibits", NULL}, EPERM,
             "privilege: TIOCSTI with garbage high bits is still refused");
    sb_unsafe_test_knobs.no_landlock = true;
    s_expect(p, (const char *[]){"mknod", NULL}, EPERM,
             "privilege: creating a device node is refused (no CAP_MKNOD, "
             "without Landlock)");
    sb_unsafe_test_knobs.no_landlock = false;
    if (sb_landlock_abi() > 0)
        s_expect(p, (const char *[]){"mknod", NULL}, EACCES,
                 "privilege: Landlock refuses a device node by itself "
                 "(MAKE_CHAR is never granted)");
    s_expect(p, (const char *[]){"setuid0", NULL}, 0,
             "privilege: becoming uid 0 is refused (EINVAL where 0 is "
             "unmapped)");
    s_expect(p, (const char *[]){"personality", NULL}, EPERM,
             "privilege: personality(ADDR_NO_RANDOMIZE) is refused");
    s_run(p, (const char *[]){"su", NULL}, 20, &b, NULL, NULL);
    ok(b.result == 1 && strstr(b.out, "nosuid: 1"),
       "privilege: setuid /usr/bin/su does not gain root (/usr is nosuid, "
       "NO_NEW_PRIVS)");
    /* Some hypervisors fault int 0x80 outright; probe outside first. */
    pid_t probe = fork();
    if (probe == 0) {
        signal(SIGSEGV, SIG_DFL); /* no sanitizer report for the probe */
        long ret;
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20) : "memory");
        _exit(ret > 0 ? 0 : 1);
    }
    int pst = 0;
    waitpid(probe, &pst, 0);
    if (WIFEXITED(pst) && WEXITSTATUS(pst) == 0)
        s_expect_killed(p, (const char *[]){"int80", NULL}, SIGSYS,
                        "privilege: an i386 system call (int 0x80) kills the "
                        "process");
    else
        skip("int 0x80 fails even outside a sandbox here (%s): no i386 "
             "system calls to filter; the arch rule is checked in "
             "test_sb_seccomp",
             WIFSIGNALED(pst) ? strsignal(WTERMSIG(pst)) : "error");
    s_expect_killed(p, (const char *[]){"x32", NULL}, SIGSYS,
                    "privilege: an x32 system call kills the process");
    s_expect(p, (const char *[]){"read", "/proc/1/root/etc/hostname", NULL}, 0,
             "privilege: /proc/1/root is not reachable");
    s_expect(p, (const char *[]){"read", "/proc/1/environ", NULL}, 0,
             "privilege: init's environment (the launcher's copy) is not "
             "readable");
    s_expect(p, (const char *[]){"sysrq", NULL}, 0,
             "privilege: /proc/sysrq-trigger is not writable");
    s_expect(p, (const char *[]){"write", "/proc/sys/kernel/hostname", NULL}, 0,
             "privilege: /proc/sys is not writable");
    (void)unpriv;
}

struct cg_check {
    char quota[64]; /* cpu.cfs_quota_us or cpu.max */
    int pid_in;     /* pid 1 is listed in the cgroup */
};

static void
s_read_small(const char *path, char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
    while (n && (buf[n - 1] == '\n'))
        buf[--n] = '\0';
}

/* A loop that ignores SIGINT and SIGTERM still dies when killed. */
static void
s_spin_ignore(const sb_policy_t *base)
{
    sb_sandbox_t *sb = sb_sandbox_new(base, NULL);
    char e0[] = "ASAN_OPTIONS=detect_leaks=0";
    char *envp[] = {e0, NULL};
    char *argv[] = {(char *)INSIDE_EXE, (char *)"--inside",
                    (char *)"spin-ignore", NULL};
    err_t err;
    int rfd[2] = {-1, -1};
    int spawned = sb && pipe2(rfd, O_CLOEXEC) == 0 &&
                  sb_sandbox_spawn(sb, argv, envp, rfd[1], 2, &err) == 0;
    if (rfd[1] >= 0)
        close(rfd[1]);
    sb_exit_t ex;
    memset(&ex, 0, sizeof ex);
    int still = 0;
    if (spawned) {
        /* Signal only once its handlers are set ("ready"). */
        char rbuf[64] = "";
        struct pollfd pf = {.fd = rfd[0], .events = POLLIN};
        if (poll(&pf, 1, 30000) > 0 && read(rfd[0], rbuf, sizeof rbuf - 1) > 0)
            usleep(100 * 1000);
        sb_sandbox_signal(sb, SIGINT);
        sb_sandbox_signal(sb, SIGTERM);
        still = sb_sandbox_wait(sb, 300, &ex) == 1;
        sb_sandbox_kill(sb);
        sb_sandbox_wait(sb, 10000, &ex);
    }
    if (rfd[0] >= 0)
        close(rfd[0]);
    ok(spawned && still && ex.kind == SB_SIGNALED && ex.signal == SIGKILL,
       "resources: a loop ignoring SIGINT and SIGTERM survives them but not "
       "the kill");
    sb_sandbox_destroy(&sb);
}

/* CPU quota: set, and the box is in the cgroup. */
static void
s_cpu_quota(const sb_policy_t *base)
{
    sb_policy_t p;
    sb_policy_copy(&p, base);
    p.cpus = 0.5;
    sb_sandbox_t *sb = sb_sandbox_new(&p, NULL);
    char e0[] = "ASAN_OPTIONS=detect_leaks=0";
    char *envp[] = {e0, NULL};
    char *argv[] = {(char *)INSIDE_EXE, (char *)"--inside", (char *)"busy",
                    NULL};
    err_t err;
    int bfd[2] = {-1, -1};
    int spawned = sb && pipe2(bfd, O_CLOEXEC) == 0 &&
                  sb_sandbox_spawn(sb, argv, envp, bfd[1], 2, &err) == 0;
    if (bfd[1] >= 0)
        close(bfd[1]);
    const char *dir = sb ? sb_sandbox_cgroup_dir(sb, "cpu") : NULL;
    char path[4200], quota[64] = "", procs[4096] = "", mine[4096] = "";
    if (spawned && dir) {
        char rbuf[64];
        struct pollfd pf = {.fd = bfd[0], .events = POLLIN};
        if (poll(&pf, 1, 30000) > 0 && read(bfd[0], rbuf, sizeof rbuf) < 0)
            diag("no ready line from the busy attacker");
        snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
        s_read_small(path, quota, sizeof quota);
        if (!quota[0]) {
            snprintf(path, sizeof path, "%s/cpu.max", dir);
            s_read_small(path, quota, sizeof quota);
        }
        snprintf(path, sizeof path, "%s/cgroup.procs", dir);
        s_read_small(path, procs, sizeof procs);
        snprintf(path, sizeof path, "/proc/%d/cgroup", (int)sb_sandbox_pid(sb));
        s_read_small(path, mine, sizeof mine);
    }
    if (bfd[0] >= 0)
        close(bfd[0]);
    int lines = 0;
    for (char *c = procs; *c; c++)
        lines += *c == '\n';
    ok(spawned && dir && (atoi(quota) == 50000) && lines >= 4,
       "resources: busy processes run under a CPU quota of 0.5 CPU "
       "(quota '%s', %d processes in the cgroup)",
       quota, lines + 1);
    ok(dir && strstr(mine, strrchr(dir, '/')),
       "resources: the box's init is in the sandbox's cgroup");
    sb_sandbox_destroy(&sb);
    sb_policy_release(&p);
}

/* kill(-1) inside harms nothing outside. */
static void
s_killall(const sb_policy_t *base)
{
    pid_t sleeper = fork();
    if (sleeper == 0) {
        execl("/bin/sleep", "sleep", "30", (char *)NULL);
        _exit(1);
    }
    struct box b;
    s_run(base, (const char *[]){"killall", NULL}, 20, &b, NULL, NULL);
    int alive = kill(sleeper, 0) == 0 && waitpid(sleeper, NULL, WNOHANG) == 0;
    ok(strstr(b.out, "survived") && alive,
       "resources: kill(-1, SIGKILL) inside leaves processes outside alive");
    kill(sleeper, SIGKILL);
    waitpid(sleeper, NULL, 0);
}

static void
t_resources(const sb_policy_t *base, int unpriv)
{
    sb_policy_t p;
    sb_policy_copy(&p, base);
    p.pids = 32;
    struct box b;
    s_run(&p, (const char *[]){"forkbomb", NULL}, 30, &b, NULL, NULL);
    const char *f = strstr(b.out, "forked: ");
    int forked = f ? atoi(f + 8) : -1;
    ok(b.result == EAGAIN && forked >= 0 && forked < 32,
       "resources: a fork bomb stops at the pids limit (%d forks, then %s)",
       forked, s_errname(b.result));

    p.memory_bytes = 64ULL << 20;
    s_run(&p, (const char *[]){"membomb", NULL}, 30, &b, NULL, NULL);
    char how[128];
    if (!unpriv) {
        ok(b.ex.kind == SB_OOM_KILLED &&
               strstr(sb_exit_describe(&b.ex, &p, how, sizeof how),
                      "out of memory (limit 64 MiB)"),
           "resources: a memory bomb is OOM-killed and reported as such: %s",
           sb_exit_describe(&b.ex, &p, how, sizeof how));
    } else if (s_asan) {
        skip("memory bomb without cgroups: RLIMIT_DATA had to be lifted for "
             "this AddressSanitizer build of the attacker");
    } else {
        ok(b.result == ENOMEM || b.ex.kind == SB_OOM_KILLED,
           "resources: a memory bomb is stopped (RLIMIT_DATA without "
           "cgroups): %s",
           b.result == ENOMEM ? "ENOMEM" : "OOM");
    }
    sb_policy_release(&p);

    static const struct {
        const char *dir;
        const char *flag;
    } fills[] = {
        {"/mnt/data", "--disk"}, {"/tmp", "--tmp"}, {"/dev/shm", "--shm"}};
    for (size_t i = 0; i < 3; i++) {
        sb_policy_copy(&p, base);
        sb_policy_parse_flag(&p, fills[i].flag, "8M", NULL);
        s_run(&p, (const char *[]){"fill", fills[i].dir, NULL}, 30, &b, NULL,
              NULL);
        const char *w = strstr(b.out, "written: ");
        long long written = w ? atoll(w + 9) : -1;
        ok((b.result == ENOSPC || b.result == EFBIG) && written >= 0 &&
               written <= (8LL << 20),
           "resources: filling %s stops at the %s cap (%lld bytes, %s)",
           fills[i].dir, fills[i].flag, written, s_errname(b.result));
        sb_policy_release(&p);
    }

    s_spin_ignore(base);
    if (!unpriv)
        s_cpu_quota(base);

    /* A double-forked daemon does not outlive the box. */
    char token[64];
    snprintf(token, sizeof token, "ja-daemon-%d-%ld", (int)getpid(),
             (long)time(NULL));
    s_run(base, (const char *[]){"daemon", token, NULL}, 20, &b, NULL, NULL);
    ok(b.result == 0 && strstr(b.out, "daemon seen") &&
           s_wait_token_gone(token, 5),
       "resources: a double-forked daemon dies with the sandbox");

    s_killall(base);
}

/* The launcher dies (SIGKILL): the box must die with it. Under gVisor
 * the box's processes are not host processes: what must die are the
 * runsc processes, found by the run dir in their command lines. */
static void
t_launcher_death(const sb_policy_t *p, bool gvisor)
{
    char token[64];
    snprintf(token, sizeof token, "ja-orphan-%d-%ld", (int)getpid(),
             (long)time(NULL));
    int pfd[2];
    if (pipe(pfd) < 0)
        return;
    pid_t launcher = fork();
    if (launcher == 0) {
        close(pfd[0]);
        sb_sandbox_t *sb = sb_sandbox_new(p, NULL);
        char e0[] = "ASAN_OPTIONS=detect_leaks=0";
        char *envp[] = {e0, NULL};
        char *argv[] = {(char *)INSIDE_EXE, (char *)"--inside", (char *)"sleep",
                        token, NULL};
        if (!sb || sb_sandbox_spawn(sb, argv, envp, -1, 2, NULL) < 0)
            _exit(1);
        dprintf(pfd[1], "%s\n%s\n%s\n%s\n", sb_sandbox_run_dir(sb),
                sb_sandbox_cgroup_dir(sb, "memory")
                    ? sb_sandbox_cgroup_dir(sb, "memory")
                    : "-",
                sb_sandbox_cgroup_dir(sb, "pids")
                    ? sb_sandbox_cgroup_dir(sb, "pids")
                    : "-",
                sb_sandbox_cgroup_dir(sb, "cpu")
                    ? sb_sandbox_cgroup_dir(sb, "cpu")
                    : "-");
        close(pfd[1]);
        for (;;)
            pause();
    }
    close(pfd[1]);
    char info[16384] = "";
    ssize_t n = 0, r;
    while ((r = read(pfd[0], info + n, sizeof info - 1 - (size_t)n)) > 0)
        n += r;
    info[n > 0 ? n : 0] = '\0';
    close(pfd[0]);
    char look[4096];
    snprintf(look, sizeof look, "%s", token);
    if (gvisor) { /* the box's top dir: runsc's --root=TOP/gv/state */
        snprintf(look, sizeof look, "%.*s", (int)strcspn(info, "\n"), info);
        char *slash = strrchr(look, '/');
        if (slash)
            slash[1] = '\0';
    }
    int before = 0;
    for (int i = 0; i < 40 && !before; i++) {
        before = s_count_token(look);
        usleep(50 * 1000);
    }
    kill(launcher, SIGKILL);
    waitpid(launcher, NULL, 0);
    if (!before)
        diag("no host process named %s before the kill", look);
    ok(before > 0 && s_wait_token_gone(look, 10),
       "resources: SIGKILL of the launcher kills the box (parent-death "
       "signal%s)",
       gvisor ? "; runsc's processes are gone" : "");
    /* The next sandbox removes the dead launcher's (empty) cgroups. */
    char *save = NULL;
    char *run = strtok_r(info, "\n", &save);
    sb_sandbox_t *next = sb_sandbox_new(p, NULL);
    int left = 0, had = 0;
    struct stat st;
    for (char *cg = strtok_r(NULL, "\n", &save); cg;
         cg = strtok_r(NULL, "\n", &save)) {
        if (cg[0] != '/')
            continue;
        had++;
        if (stat(cg, &st) == 0) {
            left++;
            rmdir(cg);
        }
    }
    sb_sandbox_destroy(&next);
    if (had)
        ok(left == 0,
           "resources: the next sandbox removes the cgroups a "
           "killed launcher left behind (%d of %d left)",
           left, had);
    else
        skip("no cgroups in use here");
    if (run && strstr(run, "/ja-")) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%.*s'",
                 (int)(strrchr(run, '/') - run), run);
        if (system(cmd) != 0)
            diag("could not remove %s", run);
    }
}

static void
t_environment(const sb_policy_t *p)
{
    setenv("OPENAI_API_KEY", "sk-attack-test-secret", 1);
    sb_policy_t q;
    sb_policy_copy(&q, p);
    sb_policy_allow_env(&q, "OPENAI_API_KEY", NULL);
    extern char **environ;
    const char *extra[] = {"ASAN_OPTIONS=detect_leaks=0", NULL};
    char **env = sb_policy_build_env(&q, environ, extra);
    sb_sandbox_t *sb = sb_sandbox_new(&q, NULL);
    char *argv[] = {(char *)INSIDE_EXE, (char *)"--inside", (char *)"env",
                    NULL};
    int pfd[2];
    char out[65536] = "";
    ssize_t n = 0, r;
    if (sb && pipe2(pfd, O_CLOEXEC) == 0) {
        if (sb_sandbox_spawn(sb, argv, env, pfd[1], 2, NULL) == 0) {
            close(pfd[1]);
            /* wait first: under gVisor EOF comes only at destroy (s_run) */
            sb_sandbox_wait(sb, 60000, NULL);
            fcntl(pfd[0], F_SETFL, O_NONBLOCK);
            while ((r = read(pfd[0], out + n, sizeof out - 1 - (size_t)n)) > 0)
                n += r;
        } else {
            close(pfd[1]);
        }
        close(pfd[0]);
    }
    out[n > 0 ? n : 0] = '\0';
    ok(strstr(out, "env: HOME=") && !strstr(out, "sk-attack-test-secret"),
       "environment: an API key set in the launcher is not visible inside, "
       "even when allow-listed");
    strv_free(env);
    sb_sandbox_destroy(&sb);
    sb_policy_release(&q);
    unsetenv("OPENAI_API_KEY");
}

/* ============ the same attacks under gVisor (ENGINE=gvisor) ============ */

#define GV_OK (-1)   /* the attack must work */
#define GV_KILL (-2) /* the attacker must be killed by a signal */
#define GV_SENTRY                                                              \
    "gVisor answers this call in the Sentry; the host seccomp filter is "      \
    "not the wall"
#define GV_OWN_KERNEL                                                          \
    "gVisor implements this in the Sentry: the box may use it on its own "     \
    "tasks, as a VM guest may; nothing reaches a host process or the host "    \
    "kernel's code for it"

/* The attacks of t_network, t_files and t_privilege, in one box. Each row
 * must fail with `want` (0: any error), or, with `skip` set, the
 * namespaces check cannot apply under gVisor and `skip` says why (what
 * the box saw is added). */
struct gv_row {
    const char *mode, *arg;
    int want;
    const char *what, *skip;
};

static const struct gv_row s_gv_rows[] = {
    {"connect4", "PORT4", ECONNREFUSED,
     "network: a TCP listener on the host's 127.0.0.1 is unreachable "
     "(gVisor's own loopback, --network=none)",
     NULL},
    {"connect6", "PORT6", 0,
     "network: a TCP listener on the host's ::1 is unreachable", NULL},
    {"testnet", NULL, 0,
     "network: 192.0.2.1:80 fails at once (no route out: ENETUNREACH or "
     "EHOSTUNREACH)",
     NULL},
    {"dns", "example.com", 0, "network: DNS lookup of example.com fails", NULL},
    {"raw", NULL, EPERM, "network: a raw IP socket is refused", NULL},
    {"packet", NULL, EPERM, "network: a packet socket is refused", NULL},
    {"family-hibits", NULL, 0,
     "network: AF_PACKET with garbage high bits is still refused", NULL},
    {"vsock", NULL, 0, "network: a vsock socket (to the hypervisor) is refused",
     NULL},
    {"netlink-audit", NULL, 0,
     "network: netlink other than NETLINK_ROUTE is refused", NULL},
    {"netlink-route", NULL, GV_OK,
     "network: NETLINK_ROUTE still works (libzmq needs it)", NULL},
    {"abstract", "ABSTRACT", ECONNREFUSED,
     "network: a host abstract unix socket is unreachable (the Sentry has "
     "its own abstract namespace)",
     NULL},
    {"read", "/etc/shadow", ENOENT, "files: /etc/shadow does not exist inside",
     NULL},
    {"stat", "/root", ENOENT, "files: /root does not exist inside", NULL},
    {"stat", "RUNDIR", ENOENT,
     "files: another sandbox's run dir is not visible", NULL},
    {"write", "/evil", 0, "files: writing to / fails", NULL},
    {"write", "/usr/evil", 0, "files: writing to /usr fails", NULL},
    {"write", "/etc/passwd", 0, "files: writing /etc/passwd fails", NULL},
    {"write", "/dev/evil", 0, "files: creating files in /dev fails", NULL},
    {"mount", NULL, EPERM, "mounts: mount is refused", NULL},
    {"remount-usr", NULL, EPERM, "mounts: remounting /usr writable is refused",
     NULL},
    {"umount", NULL, EPERM, "mounts: unmounting is refused", NULL},
    {"chroot", NULL, EPERM, "mounts: chroot is refused", NULL},
    {"mknod", NULL, EPERM,
     "devices: creating a device node is refused (no CAP_MKNOD)", NULL},
    {"tiocsti", NULL, 0,
     "devices: TIOCSTI (typing into the terminal) is refused", NULL},
    {"tiocsti-hibits", NULL, 0,
     "devices: TIOCSTI with garbage high bits is still refused", NULL},
    {"sysrq", NULL, 0, "devices: /proc/sysrq-trigger is not writable", NULL},
    {"write", "/proc/sys/kernel/hostname", 0,
     "privilege: /proc/sys is not writable", NULL},
    {"read", "/proc/1/root/etc/hostname", 0,
     "privilege: /proc/1/root is not reachable", NULL},
    {"setuid0", NULL, 0, "privilege: becoming uid 0 is refused", NULL},
    {"setns", NULL, 0, "privilege: setns is refused", NULL},
    {"clone3", NULL, ENOSYS,
     "privilege: clone3 reports ENOSYS (libc falls back to clone)", NULL},
    {"keyctl", NULL, 0, "privilege: keyctl is refused", NULL},
    {"bpf", NULL, 0, "privilege: bpf is refused", NULL},
    {"perf", NULL, 0, "privilege: perf_event_open is refused", NULL},
    {"userfaultfd", NULL, 0, "privilege: userfaultfd is refused", NULL},
    {"personality", NULL, 0,
     "privilege: personality(ADDR_NO_RANDOMIZE) is refused", NULL},
    {"int80", NULL, GV_KILL,
     "privilege: an i386 system call (int 0x80) kills the process (gVisor "
     "has no 32-bit system call table)",
     NULL},
    {"x32", NULL, GV_OK,
     "privilege: an x32 system call runs nothing (getpid returns -1)", NULL},
    {"su", NULL, 1,
     "privilege: setuid /usr/bin/su does not gain root (no_new_privs)", NULL},
    {"ptrace", NULL, 0, "privilege: ptrace of a sibling process",
     GV_OWN_KERNEL " (ptrace of the box's own task)"},
    {"traceme", NULL, 0, "privilege: PTRACE_TRACEME",
     GV_OWN_KERNEL " (ptrace)"},
    {"unshare-user", NULL, 0, "privilege: unshare(CLONE_NEWUSER)",
     GV_OWN_KERNEL " (a user namespace of the Sentry's, not the host's: the "
                   "door the namespaces engine's EPERM closes is not there)"},
    {"clone-newuser", NULL, 0, "privilege: clone(CLONE_NEWUSER)",
     GV_OWN_KERNEL " (a user namespace)"},
    {"io_uring", NULL, 0, "privilege: io_uring_setup",
     GV_OWN_KERNEL " (gVisor's own io_uring, not the host's)"},
    {"read", "/proc/1/environ", 0, "privilege: init's environment",
     "pid 1 of a gVisor box is our relay, running as the box's user with the "
     "box's environment only; the launcher's environment never enters it "
     "(environment: below)"},
    {"sysfs", NULL, 0, "seccomp: a call outside the allow list (sysfs)",
     GV_SENTRY},
    {"newer-syscall", NULL, 0, "seccomp: a call newer than the table",
     GV_SENTRY},
};

/* "result MODE: N" (or "signal MODE: N") after *at in `out`; moves *at
 * past it so repeated modes are read in order. -1000 if missing. */
static int
s_gv_result(const char *out, const char **at, const char *mode, int *sig)
{
    char key[80];
    snprintf(key, sizeof key, "result %s: ", mode);
    char skey[80];
    snprintf(skey, sizeof skey, "signal %s: ", mode);
    const char *r = strstr(*at, key), *k = strstr(*at, skey);
    *sig = 0;
    if (k && (!r || k < r)) {
        *sig = atoi(k + strlen(skey));
        *at = k + strlen(skey);
        return -1000;
    }
    if (!r) {
        (void)out;
        return -1000;
    }
    *at = r + strlen(key);
    return atoi(*at);
}

static void
t_gvisor_batch(const sb_policy_t *p)
{
    char port4[16] = "1", port6[16] = "1", name[64];
    int lport = 0;
    int l4 = s_listen(AF_INET, &lport);
    if (l4 >= 0)
        snprintf(port4, sizeof port4, "%d", lport);
    int l6 = s_listen(AF_INET6, &lport);
    if (l6 >= 0)
        snprintf(port6, sizeof port6, "%d", lport);
    snprintf(name, sizeof name, "ja-attack-%d", (int)getpid());
    int as = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path + 1, name, strlen(name));
    socklen_t sl =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
    int abstract =
        bind(as, (struct sockaddr *)&sa, sl) == 0 && listen(as, 1) == 0;
    sb_sandbox_t *other = sb_sandbox_new(p, NULL);
    const char *rundir = other ? sb_sandbox_run_dir(other) : "/nonexistent";

    char list[4096] = "";
    size_t n = sizeof s_gv_rows / sizeof s_gv_rows[0];
    for (size_t i = 0; i < n; i++) {
        const char *arg = s_gv_rows[i].arg;
        if (arg && !strcmp(arg, "PORT4"))
            arg = port4;
        else if (arg && !strcmp(arg, "PORT6"))
            arg = port6;
        else if (arg && !strcmp(arg, "ABSTRACT"))
            arg = name;
        else if (arg && !strcmp(arg, "RUNDIR"))
            arg = rundir;
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%s%s%s", len ? "," : "",
                 s_gv_rows[i].mode, arg ? "=" : "", arg ? arg : "");
    }
    strncat(list, ",status,listdir=/home,listdir=/tmp",
            sizeof list - strlen(list) - 1);
    struct box b;
    s_run(p, (const char *[]){"batch", list, NULL}, 120, &b, NULL, NULL);
    if (!ok(b.spawned && strstr(b.out, "result: 0"),
            "a gVisor box runs the %zu attacks of one batch", n)) {
        diag("%s: %s", b.err.text, b.out);
        return;
    }
    const char *at = b.out;
    for (size_t i = 0; i < n; i++) {
        const struct gv_row *r = &s_gv_rows[i];
        int sig = 0;
        int got = s_gv_result(b.out, &at, r->mode, &sig);
        char seen[64];
        if (sig)
            snprintf(seen, sizeof seen, "killed by %s", strsignal(sig));
        else
            snprintf(seen, sizeof seen, "%s", s_errname(got));
        if (r->skip) {
            skip("%s: %s (inside: %s)", r->what, r->skip, seen);
            continue;
        }
        int held;
        if (r->want == GV_KILL)
            held = sig != 0;
        else if (r->want == GV_OK)
            held = !sig && got == 0;
        else
            held = !sig && got != 0 && got != -1000 &&
                   (r->want == 0 || got == r->want);
        if (r->want == GV_OK && !strcmp(r->mode, "x32"))
            held = held && strstr(b.out, "x32 getpid returned -1");
        if (r->want == 1) /* su: 1 = it did not become root */
            held = !sig && got == 1;
        ok(held, "%s (%s)", r->what, seen);
    }
    /* After the rows: status, then /home, then /tmp. */
    const char *st = strstr(at, "CapEff:");
    ok(st && strstr(b.out, "CapInh:\t0000000000000000") &&
           strstr(b.out, "CapPrm:\t0000000000000000") &&
           strstr(b.out, "CapEff:\t0000000000000000") &&
           strstr(b.out, "CapBnd:\t0000000000000000"),
       "privilege: no capabilities at all (gVisor's /proc/self/status has no "
       "NoNewPrivs line; su above shows no_new_privs holds)");
    int sig;
    const char *home = strstr(at, "entry: user");
    ok(home && s_gv_result(b.out, &at, "listdir", &sig) == 1,
       "files: /home holds only the sandbox user's empty home");
    ok(s_gv_result(b.out, &at, "listdir", &sig) == 1,
       "files: /tmp holds only this sandbox's run dir path");
    if (!abstract)
        diag("could not bind a host abstract socket: that row proves less");
    sb_sandbox_destroy(&other);
    if (l4 >= 0)
        close(l4);
    if (l6 >= 0)
        close(l6);
    close(as);
}

/* The resource attacks of t_resources, as few boxes as they allow. */
static void
t_gvisor_resources(const sb_policy_t *base)
{
    sb_policy_t p;
    sb_policy_copy(&p, base);
    p.pids = 32;
    struct box b;
    s_run(&p, (const char *[]){"forkbomb", NULL}, 60, &b, NULL, NULL);
    const char *f = strstr(b.out, "forked: ");
    int forked = f ? atoi(f + 8) : -1;
    ok(b.result == EAGAIN && forked >= 0 && forked < 32,
       "resources: a fork bomb stops at the pids limit (%d forks, then %s)",
       forked, s_errname(b.result));

    p.memory_bytes = 64ULL << 20;
    s_run(&p, (const char *[]){"membomb", NULL}, 60, &b, NULL, NULL);
    char how[128];
    ok(b.ex.kind == SB_OOM_KILLED &&
           strstr(sb_exit_describe(&b.ex, &p, how, sizeof how),
                  "out of memory (limit 64 MiB)"),
       "resources: a memory bomb is OOM-killed and reported as such: %s",
       sb_exit_describe(&b.ex, &p, how, sizeof how));
    sb_policy_release(&p);

    /* The three tmpfs caps in one box. */
    sb_policy_copy(&p, base);
    sb_policy_parse_flag(&p, "--disk", "8M", NULL);
    sb_policy_parse_flag(&p, "--tmp", "8M", NULL);
    sb_policy_parse_flag(&p, "--shm", "8M", NULL);
    s_run(&p,
          (const char *[]){"batch", "fill=/mnt/data,fill=/tmp,fill=/dev/shm",
                           NULL},
          60, &b, NULL, NULL);
    const char *at = b.out;
    static const char *const dirs[] = {"/mnt/data", "/tmp", "/dev/shm"};
    static const char *const flags[] = {"--disk", "--tmp", "--shm"};
    for (int i = 0; i < 3; i++) {
        const char *w = strstr(at, "written: ");
        long long written = w ? atoll(w + 9) : -1;
        int sig;
        int got = s_gv_result(b.out, &at, "fill", &sig);
        ok((got == ENOSPC || got == EFBIG) && written >= 0 &&
               written <= (8LL << 20),
           "resources: filling %s stops at the %s cap (%lld bytes, %s)",
           dirs[i], flags[i], written, s_errname(got));
    }
    sb_policy_release(&p);

    s_spin_ignore(base);
    s_cpu_quota(base);
    skip("resources: a double-forked daemon dies with the sandbox: the box's "
         "processes are Sentry tasks, not host processes, so there is no "
         "host process to outlive it; the Sentry ends with the box "
         "(gvisor_box.sh: no runsc process left after N sessions)");
    s_killall(base);
}

static void
t_gvisor(const sb_policy_t *p)
{
    t_gvisor_batch(p);
    skip("landlock: gVisor boxes run without Landlock: the host filesystem "
         "outside the bundle's mounts is not in the Sentry's mount table, "
         "and the Sentry, not the host kernel, answers every open");
    skip("seccomp: --seccomp-audit and the allow list: " GV_SENTRY);
    t_gvisor_resources(p);
    t_launcher_death(p, true);
    t_environment(p);
}

int
main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--inside") == 0) {
        setvbuf(stdout, NULL, _IONBF, 0);
        int r = s_inside(argv[2], argc - 3, argv + 3);
        printf("result: %d\n", r);
        return 0;
    }
    int unpriv = argc >= 2 && strcmp(argv[1], "--unprivileged") == 0;
    ssize_t n = readlink("/proc/self/exe", s_self, sizeof s_self - 1);
    if (n <= 0) {
        skip("cannot find this program's path");
        return done_testing();
    }
    s_self[n] = '\0';
    const char *engine = tap_engine();
    sb_policy_t p;
    s_policy(&p);
#ifdef S_ASAN
    /* This program is the attacker, so under ASan it needs its shadow
     * memory (terabytes of address space) inside the box; without cgroups
     * the memory limit is RLIMIT_DATA, which would forbid that. */
    if (unpriv)
        p.memory_bytes = 1ULL << 46;
    s_asan = 1;
#endif

    if (!strcmp(engine, "gvisor")) {
        /* runsc needs root; each box costs a second or more: no probe. */
        if (unpriv || geteuid() != 0)
            skip("--engine gvisor needs root (runsc does)");
        else
            t_gvisor(&p);
        sb_policy_release(&p);
        return done_testing();
    }
    /* Can we build a sandbox here at all? */
    struct box b;
    s_run(&p, (const char *[]){"status", NULL}, 20, &b, NULL, NULL);
    if (!b.spawned) {
        if (unpriv) {
            skip("user namespaces are not available to unprivileged users "
                 "here: %s",
                 b.err.text);
            sb_policy_release(&p);
            return done_testing();
        }
        ok(0, "a sandbox can be created: %s", b.err.text);
        sb_policy_release(&p);
        return done_testing();
    }
    if (unpriv)
        diag("running as uid %d: the unprivileged subset", (int)getuid());

    t_network(&p);
    t_landlock(&p);
    t_seccomp_allow_list(&p);
    if (!unpriv)
        t_files(&p);
    else
        s_expect(&p, (const char *[]){"write", "/usr/evil", NULL}, 0,
                 "files: writing to /usr fails");
    t_privilege(&p, unpriv);
    t_resources(&p, unpriv);
    if (!unpriv) {
        t_launcher_death(&p, false);
        t_environment(&p);
    }
    sb_policy_release(&p);
    return done_testing();
}
