/*
 * A box must not steer a connect() of ours to a host socket (issue 24,
 * item 1). The kernel can write its socket dir: code in it unlinks its
 * five socket files, puts symlinks to host sockets in their place and
 * breaks every connection, so that the agent reconnects. Each link here
 * points at a host listener of this test (a unix socket in a temp dir);
 * a reconnect that followed it would be a connect by root in the host's
 * mount namespace, the way to reach systemd, dbus or docker.sock.
 *
 *   - no listener sees a single connection, over several seconds and all
 *     five channels (shell, iopub, stdin, control, hb);
 *   - the session says which socket file was replaced and stops;
 *   - a restart gives a working kernel again.
 */
#include "../tap.h"

#include "common/clock.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/launch/kb_launch_sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char *const s_names[KB_NCHANNELS] = {[KB_SHELL] = "shell",
                                                  [KB_IOPUB] = "iopub",
                                                  [KB_STDIN] = "stdin",
                                                  [KB_CONTROL] = "control",
                                                  [KB_HB] = "hb"};

static int s_listen[KB_NCHANNELS];
static atomic_int s_conns[KB_NCHANNELS];
static atomic_bool s_stop;

/* Accept and close every connection to the host listeners, counting. */
static void *
s_acceptor(void *arg)
{
    (void)arg;
    struct pollfd pf[KB_NCHANNELS];
    for (int i = 0; i < KB_NCHANNELS; i++)
        pf[i] = (struct pollfd){.fd = s_listen[i], .events = POLLIN};
    while (!atomic_load(&s_stop)) {
        if (poll(pf, KB_NCHANNELS, 50) <= 0)
            continue;
        for (int i = 0; i < KB_NCHANNELS; i++) {
            int c;
            while ((c = accept4(s_listen[i], NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                atomic_fetch_add(&s_conns[i], 1);
                close(c);
            }
        }
    }
    return NULL;
}

static kb_launcher_t *
s_sandbox(void *arg, err_t *err)
{
    (void)arg;
    return kb_launcher_sandbox_new(NULL, err);
}

static int
s_total(void)
{
    int n = 0;
    for (int i = 0; i < KB_NCHANNELS; i++)
        n += atomic_load(&s_conns[i]);
    return n;
}

int
main(void)
{
    char dir[] = "/tmp/ja-hostsock-XXXXXX";
    if (!mkdtemp(dir)) {
        ok(0, "a temp dir for the host listeners");
        return done_testing();
    }
    for (int i = 0; i < KB_NCHANNELS; i++) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s.sock", dir,
                 s_names[i]);
        s_listen[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (s_listen[i] < 0 ||
            bind(s_listen[i], (struct sockaddr *)&sa, sizeof sa) < 0 ||
            listen(s_listen[i], 512) < 0) {
            ok(0, "host listener %s", sa.sun_path);
            return done_testing();
        }
    }
    pthread_t th;
    pthread_create(&th, NULL, s_acceptor, NULL);

    err_t err = {0};
    kb_kernel_opts_t kopts = {.launcher = s_sandbox,
                              .interrupt_grace_ms = 2000};
    kb_kernel_t *k = kb_kernel_start(&kopts, &err);
    if (!ok(k != NULL, "a sandboxed ipykernel starts")) {
        diag("%s", err.text);
        goto out;
    }
    kb_output_t *out = kb_output_new(NULL, 1 << 20);
    int rc = kb_kernel_execute(k, "1 + 1", NULL, 30000, out, NULL, &err);
    ok(rc == 0, "a plain cell runs (the test's control)");
    kb_output_destroy(&out);

    char *code = xasprintf(
        "import json, os, socket\n"
        "from ipykernel.kernelapp import IPKernelApp\n"
        "c = json.load(open(IPKernelApp.instance().abs_connection_file))\n"
        "for ch in ('shell', 'iopub', 'stdin', 'control', 'hb'):\n"
        "    p = '%%s-%%d' %% (c['ip'], c[ch + '_port'])\n"
        "    os.unlink(p)\n"
        "    os.symlink('%s/' + ch + '.sock', p)\n"
        "for fd in map(int, os.listdir('/proc/self/fd')):\n"
        "    try:\n"
        "        s = socket.socket(fileno=fd)\n"
        "    except OSError:\n"
        "        continue\n"
        "    try:\n"
        "        if s.family == socket.AF_UNIX and not s.getsockopt(\n"
        "                socket.SOL_SOCKET, socket.SO_ACCEPTCONN):\n"
        "            s.shutdown(socket.SHUT_RDWR)\n"
        "    except OSError:\n"
        "        pass\n"
        "    finally:\n"
        "        s.detach()\n",
        dir);
    int64_t start = clock_mono_ms();
    out = kb_output_new(NULL, 1 << 20);
    rc = kb_kernel_execute(k, code, NULL, 6000, out, NULL, &err);
    free(code);
    kb_output_destroy(&out);
    if (rc == 0) {
        /* The cell's reply can beat the transport's next look at the
         * socket files (every ~100 ms); the next request cannot. */
        usleep(500 * 1000);
        out = kb_output_new(NULL, 1 << 20);
        rc = kb_kernel_execute(k, "1", NULL, 6000, out, NULL, &err);
        kb_output_destroy(&out);
    }
    ok(rc != 0 && err.code == ERR_KERNEL && strstr(err.text, "socket file") &&
           strstr(err.text, "symlink"),
       "the session stops and names the socket file replaced by a link");
    diag("%s", err.text);
    /* Several seconds with the session's sockets still open. */
    while (clock_mono_ms() - start < 6000)
        usleep(100 * 1000);
    for (int i = 0; i < KB_NCHANNELS; i++)
        is_int(atomic_load(&s_conns[i]), 0,
               "no connect reached the host socket the %s link points at",
               s_names[i]);

    rc = kb_kernel_restart(k, &err);
    out = kb_output_new(NULL, 1 << 20);
    if (rc == 0)
        rc = kb_kernel_execute(k, "print('fresh')", NULL, 30000, out, NULL,
                               &err);
    ok(rc == 0, "a restart gives a working kernel (%s)", rc ? err.text : "ok");
    kb_output_destroy(&out);
    kb_kernel_destroy(&k);
    ok(s_total() == 0, "and nothing reached the host listeners after (%d)",
       s_total());
out:
    atomic_store(&s_stop, true);
    pthread_join(th, NULL);
    for (int i = 0; i < KB_NCHANNELS; i++) {
        char *p = xasprintf("%s/%s.sock", dir, s_names[i]);
        close(s_listen[i]);
        unlink(p);
        free(p);
    }
    rmdir(dir);
    return done_testing();
}
