/*
 * host_pids: the host pids of processes whose command line is exactly
 * "A0 A1" (for tests that show a process started in a box is there, or
 * is gone). Header-only, for test programs.
 */
#ifndef TESTS_HOST_PIDS_H
#define TESTS_HOST_PIDS_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fill pids[] (at most max) and return how many there are. */
static inline int
host_pids(const char *a0, const char *a1, int *pids, int max)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int n = 0;
    size_t l0 = strlen(a0);
    while (d && (de = readdir(d))) {
        char path[64], buf[256];
        int pid = atoi(de->d_name);
        if (pid <= 0)
            continue;
        snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        if (len == l0 + strlen(a1) + 2 && strcmp(buf, a0) == 0 &&
            strcmp(buf + l0 + 1, a1) == 0) {
            if (n < max)
                pids[n] = pid;
            n++;
        }
    }
    if (d)
        closedir(d);
    return n;
}

#endif
