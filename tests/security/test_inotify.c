/*
 * inotify is no window on the host (issue 24, item 12). /usr and every
 * --bind are the host's own inodes, bound read-only into the box: a watch
 * on /usr/bin/env would report each time the host, or another session,
 * runs it. fanotify was already refused; inotify is too. And what a
 * kernel does is not hurt: plots, autoreload and !commands still work.
 */
#include "../tap.h"

#include "common/xalloc.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/launch/kb_launch_sandbox.h"

#include <stdlib.h>

static kb_launcher_t *
s_sandbox(void *arg, err_t *err)
{
    (void)arg;
    return kb_launcher_sandbox_new(NULL, err);
}

/* Run code; all its stream text and the names of its display types
 * (caller frees), or NULL when the execution failed. */
static char *
s_run(kb_kernel_t *k, const char *code)
{
    err_t err;
    kb_output_t *out = kb_output_new(NULL, 1 << 22);
    char *text = NULL;
    if (kb_kernel_execute(k, code, NULL, 60000, out, NULL, &err) == 0) {
        text = json_dumps(kb_output_outputs(out), 0);
    } else {
        diag("%s", err.text);
    }
    kb_output_destroy(&out);
    return text;
}

int
main(void)
{
    err_t err = {0};
    kb_kernel_opts_t kopts = {.launcher = s_sandbox};
    kb_kernel_t *k = kb_kernel_start(&kopts, &err);
    if (!ok(k != NULL, "a sandboxed ipykernel starts")) {
        diag("%s", err.text);
        return done_testing();
    }
    char *t =
        s_run(k, "import ctypes, errno, os, select\n"
                 "libc = ctypes.CDLL(None, use_errno=True)\n"
                 "fd = libc.inotify_init1(os.O_NONBLOCK)\n"
                 "if fd < 0:\n"
                 "    print('init', errno.errorcode[ctypes.get_errno()])\n"
                 "else:\n"
                 "    IN_ACCESS, IN_OPEN = 0x1, 0x20\n"
                 "    wd = libc.inotify_add_watch(fd, b'/usr/bin/env',\n"
                 "                                IN_ACCESS | IN_OPEN)\n"
                 "    print('watching', wd)\n");
    ok(t && strstr(t, "init EPERM"),
       "inotify_init1 is refused in the box (EPERM)");
    diag("%s", t ? t : "(failed)");
    free(t);
    t = s_run(k, "import ctypes, errno\n"
                 "libc = ctypes.CDLL(None, use_errno=True)\n"
                 "r = libc.inotify_init()\n"
                 "print('old', r, errno.errorcode.get(ctypes.get_errno()))\n");
    ok(t && strstr(t, "old -1 EPERM"), "and so is inotify_init");
    free(t);
    /* The host runs a program the box can see... */
    for (int i = 0; i < 3; i++)
        if (system("/usr/bin/env >/dev/null"))
            diag("/usr/bin/env failed");
    /* ...and the box learns nothing of it. */
    t = s_run(k, "n = 0\n"
                 "if fd >= 0 and select.select([fd], [], [], 2)[0]:\n"
                 "    n = len(os.read(fd, 4096))\n"
                 "print('event bytes', n)\n");
    ok(t && strstr(t, "event bytes 0"),
       "the box sees no event when the host runs /usr/bin/env");
    diag("%s", t ? t : "(failed)");
    free(t);

    /* What kernels do still works without inotify. */
    t = s_run(k, "import matplotlib\n"
                 "matplotlib.use('module://matplotlib_inline.backend_inline')\n"
                 "import matplotlib.pyplot as plt\n"
                 "plt.plot([1, 2, 3])\n"
                 "plt.show()\n");
    ok(t && strstr(t, "image/png"), "a matplotlib plot still gives a PNG");
    free(t);
    t = s_run(k, "%load_ext autoreload\n%autoreload 2\nprint('autoreload on')");
    ok(t && strstr(t, "autoreload on"), "IPython's autoreload still loads");
    free(t);
    t = s_run(k, "!echo shell says hi");
    ok(t && strstr(t, "shell says hi"),
       "!commands (IPython's pexpect, on a pty of the box's own) still work");
    free(t);
    kb_kernel_destroy(&k);
    return done_testing();
}
