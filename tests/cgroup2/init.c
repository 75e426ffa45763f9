/*
 * init: PID 1 of the cgroup v2 test guest (tests/cgroup2/vm.sh).
 *
 * Static, so the initramfs holds only this file, the kernel modules listed
 * in /modules.order (loaded in that order) and nothing else. It mounts the
 * host's root filesystem read-only over 9p (mount tag "hostroot") at /root,
 * gives it proc, sys, devtmpfs and tmpfs for the writable paths, chroots
 * there and runs `/bin/sh $JA_GUEST_SCRIPT` with stdout on the second
 * serial port (the TAP channel; the console stays on the first). It reaps
 * every orphan until the script exits, then powers the machine off.
 *
 * The kernel passes unknown NAME=value boot parameters to init as its
 * environment: vm.sh sets JA_GUEST_SCRIPT and the test's variables there.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

__attribute__((format(printf, 1, 2))) static void
say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ja-init: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void
power_off(void)
{
    sync();
    reboot(RB_POWER_OFF);
    for (;;)
        pause();
}

static void
must_mount(const char *src, const char *dst, const char *type,
           unsigned long flags, const char *opts)
{
    mkdir(dst, 0755);
    if (mount(src, dst, type, flags, opts) < 0) {
        say("mount %s on %s failed", type, dst);
        perror("ja-init: mount");
        power_off();
    }
}

static void
load_modules(void)
{
    FILE *f = fopen("/modules.order", "re");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!line[0])
            continue;
        int fd = open(line, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || syscall(SYS_finit_module, fd, "", 0) < 0)
            if (errno != EEXIST)
                say("loading %s: %s", line, strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    if (f)
        fclose(f);
}

int
main(void)
{
    if (getpid() != 1) {
        fprintf(stderr, "init: this is PID 1 of the cgroup v2 test guest "
                        "(tests/cgroup2/vm.sh boots it); not run here\n");
        return 2;
    }
    must_mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
    int con = open("/dev/console", O_RDWR);
    if (con >= 0) {
        dup2(con, 1);
        dup2(con, 2);
    }
    load_modules();

    /* The virtio device is probed asynchronously: retry for ~10 s. */
    const char *opts = "trans=virtio,version=9p2000.L,msize=512000,cache=loose";
    mkdir("/root", 0755);
    int rc = -1;
    for (int i = 0; i < 100 && rc < 0; i++) {
        rc = mount("hostroot", "/root", "9p", MS_RDONLY, opts);
        if (rc < 0) {
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (rc < 0) {
        perror("ja-init: mounting the host root over 9p");
        power_off();
    }
    must_mount("proc", "/root/proc", "proc", MS_NOSUID | MS_NODEV, NULL);
    must_mount("sysfs", "/root/sys", "sysfs", MS_NOSUID | MS_NODEV, NULL);
    must_mount("cgroup2", "/root/sys/fs/cgroup", "cgroup2",
               MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    must_mount("devtmpfs", "/root/dev", "devtmpfs", MS_NOSUID, NULL);
    must_mount("devpts", "/root/dev/pts", "devpts", MS_NOSUID,
               "newinstance,ptmxmode=0666");
    must_mount("tmpfs", "/root/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
               "mode=1777");
    must_mount("tmpfs", "/root/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
               "mode=1777");
    must_mount("tmpfs", "/root/run", "tmpfs", MS_NOSUID | MS_NODEV,
               "mode=0755");
    must_mount("tmpfs", "/root/var/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
               "mode=1777");
    /* The checkout, shared on its own (tag "checkout") and mounted at its
     * own path: where it lies under a path given a tmpfs above (a clone in
     * /tmp, as CI may make), the host root's copy is hidden. */
    const char *dir = getenv("JA_DIR");
    if (dir && dir[0] == '/') {
        char path[4096];
        snprintf(path, sizeof path, "/root%s", dir);
        for (char *p = path + 6; *p; p++)
            if (*p == '/') {
                *p = '\0';
                mkdir(path, 0755); /* exists already outside a tmpfs */
                *p = '/';
            }
        mkdir(path, 0755);
        if (mount("checkout", path, "9p", MS_RDONLY, opts) < 0) {
            perror("ja-init: mounting the checkout over 9p");
            power_off();
        }
    }
    /* switch_root, not a bare chroot: the kernel refuses user namespaces
     * (which the sandbox needs) to a chrooted process. */
    if (chdir("/root") < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 ||
        chroot(".") < 0 || chdir("/") < 0) {
        perror("ja-init: moving /root to /");
        power_off();
    }

    const char *script = getenv("JA_GUEST_SCRIPT");
    if (!script) {
        say("no JA_GUEST_SCRIPT= on the kernel command line");
        power_off();
    }
    setenv("PATH",
           "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
    setenv("HOME", "/root", 1);
    pid_t child = fork();
    if (child == 0) {
        setsid();
        int tap = open("/dev/ttyS1", O_WRONLY | O_NOCTTY);
        if (tap >= 0)
            dup2(tap, 1);
        else
            perror("ja-init: /dev/ttyS1");
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0)
            dup2(null, 0);
        execl("/bin/sh", "sh", script, (char *)NULL);
        perror("ja-init: exec /bin/sh");
        _exit(127);
    }
    for (;;) {
        int status;
        pid_t p = wait(&status);
        if (p == child) {
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                say("the guest suite ended with %s %d",
                    WIFEXITED(status) ? "exit status" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            break;
        }
        if (p < 0 && errno == ECHILD)
            break;
    }
    power_off();
}
