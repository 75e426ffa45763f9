/* ag_pause_memory: a session paused with its memory (ag_pause_memory.h) on top
 * of kb_kernel_pause (the gVisor engine's checkpoint). */
#include "agent/session/ag_pause_memory.h"

#include "common/jpaths.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_kernel.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ag_mem_pause {
    char *dir;                             /* owned: the image dir */
    unsigned char key[KB_PAUSE_KEY_BYTES]; /* the seal's key (wiped) */
};

static char *
s_default_state_dir(err_t *err)
{
    char *data = jpaths_data_dir();
    if (!data) {
        err_set(err, ERR_USAGE,
                "no home directory is known for the paused sessions' "
                "images: set HOME or JUPYTER_DATA_DIR");
        return NULL;
    }
    char *agent = xasprintf("%s/jupyter-agent", data);
    char *dir = xasprintf("%s/paused", agent);
    if ((mkdir(data, 0700) < 0 && errno != EEXIST) ||
        (mkdir(agent, 0700) < 0 && errno != EEXIST) ||
        (mkdir(dir, 0700) < 0 && errno != EEXIST)) {
        err_errno(err, ERR_IO, "making %s", dir);
        free(dir);
        dir = NULL;
    }
    free(agent);
    free(data);
    return dir;
}

/* Remove the image dir (plain files only, as the sandbox left it). */
static void
s_remove_image(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlinkat(dirfd(d), e->d_name, 0);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

ag_mem_pause_t *
ag_session_pause_memory(ag_session_t *s, const char *state_dir, err_t *err)
{
    kb_kernel_t *k = ag_session_kernel(s);
    if (!k) {
        err_set(err, ERR_USAGE, "the session has no kernel to pause");
        return NULL;
    }
    char *base = state_dir ? xstrdup(state_dir) : s_default_state_dir(err);
    if (!base)
        return NULL;
    char *dir = xasprintf("%s/image-XXXXXX", base);
    free(base);
    if (!mkdtemp(dir)) { /* 0700 */
        err_errno(err, ERR_IO, "making the image dir %s", dir);
        free(dir);
        return NULL;
    }
    ag_mem_pause_t *p = xcalloc(1, sizeof *p);
    p->dir = dir;
    randombytes_buf(p->key, sizeof p->key);
    if (kb_kernel_pause(k, p->dir, p->key, err) < 0) {
        ag_mem_pause_release(&p);
        return NULL;
    }
    return p;
}

int
ag_session_resume_memory(ag_session_t *s, ag_mem_pause_t **pp, err_t *err)
{
    kb_kernel_t *k = ag_session_kernel(s);
    ag_mem_pause_t *p = pp ? *pp : NULL;
    if (!k || !p)
        return err_set(err, ERR_USAGE, "the session is not paused");
    if (kb_kernel_resume(k, p->dir, p->key, err) < 0)
        return -1;
    ag_mem_pause_release(pp);
    return 0;
}

const char *
ag_mem_pause_dir(const ag_mem_pause_t *p)
{
    return p->dir;
}

uint64_t
ag_mem_pause_bytes(const ag_mem_pause_t *p)
{
    uint64_t n = 0;
    DIR *d = opendir(p->dir);
    struct dirent *e;
    struct stat st;
    while (d && (e = readdir(d)))
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode))
            n += (uint64_t)st.st_blocks * 512;
    if (d)
        closedir(d);
    return n;
}

void
ag_mem_pause_release(ag_mem_pause_t **pp)
{
    ag_mem_pause_t *p = pp ? *pp : NULL;
    if (!p)
        return;
    *pp = NULL;
    sodium_memzero(p->key, sizeof p->key);
    s_remove_image(p->dir);
    free(p->dir);
    free(p);
}
