/*
 * Writing a notebook never makes a set-id file (issue 24, item 13). The
 * writer kept "the existing file's mode" through stat(), which follows a
 * link: `-o out.ipynb` with out.ipynb -> a setuid binary produced a
 * root-owned setuid notebook. Now:
 *   - a link at the path is replaced by a plain file with a new file's
 *     mode, and its target is left alone;
 *   - an existing regular file keeps its rwx bits, never setuid, setgid
 *     or sticky.
 */
#include "../tap.h"

#include "notebook-io/nb_notebook.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/ja-nbmode-XXXXXX";
int
main(void)
{
    if (!mkdtemp(dir)) {
        ok(0, "a temp dir");
        return done_testing();
    }
    err_t err = {0};
    nb_notebook_t *nb = nb_notebook_new();
    nb_notebook_append(nb, nb_cell_new_code("1 + 1\n"));

    char target[64], link[64], reg[64];
    snprintf(target, sizeof target, "%s/suid-tool", dir);
    snprintf(link, sizeof link, "%s/out.ipynb", dir);
    snprintf(reg, sizeof reg, "%s/kept.ipynb", dir);
    /* A stand-in for /usr/bin/passwd: ours, 04755. */
    int fd = open(target, O_WRONLY | O_CREAT | O_EXCL, 0755);
    ok(fd >= 0 && write(fd, "#!/bin/sh\n", 10) == 10, "a setuid target");
    close(fd);
    chmod(target, 04755);
    ok(symlink(target, link) == 0, "out.ipynb is a link to it");

    int rc = nb_notebook_write_file(nb, link, &err);
    struct stat st = {0}, tst;
    rc |= lstat(link, &st);
    ok(rc == 0 && S_ISREG(st.st_mode),
       "writing onto the link replaces the link with a plain file");
    ok((st.st_mode & 07000) == 0,
       "the notebook is not setuid, setgid or sticky (mode %04o)",
       (unsigned)(st.st_mode & 07777));
    ok((st.st_mode & 0111) == 0,
       "nor executable: a link's target lends it no mode (mode %04o)",
       (unsigned)(st.st_mode & 07777));
    char head[16] = "";
    fd = open(target, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, head, sizeof head - 1) : -1;
    close(fd);
    ok(stat(target, &tst) == 0 && (tst.st_mode & 07777) == 04755 && n == 10 &&
           !strncmp(head, "#!/bin/sh\n", 10),
       "the link's target is untouched");

    /* An existing regular notebook with set-id bits (set by hand). */
    ok(nb_notebook_write_file(nb, reg, &err) == 0, "a notebook is written");
    chmod(reg, 06755);
    rc = nb_notebook_write_file(nb, reg, &err);
    rc |= stat(reg, &st);
    ok(rc == 0 && (st.st_mode & 07777) == 0755,
       "rewriting a 06755 file keeps rwx (0755) and drops set-id (mode "
       "%04o)",
       (unsigned)(st.st_mode & 07777));
    chmod(reg, 01640);
    rc = nb_notebook_write_file(nb, reg, &err);
    rc |= stat(reg, &st);
    ok(rc == 0 && (st.st_mode & 07777) == 0640,
       "and a sticky 01640 file becomes 0640 (mode %04o)",
       (unsigned)(st.st_mode & 07777));

    nb_notebook_destroy(&nb);
    unlink(link);
    unlink(target);
    unlink(reg);
    rmdir(dir);
    return done_testing();
}
