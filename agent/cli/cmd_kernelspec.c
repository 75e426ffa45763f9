/*
 * jupyter-agent kernelspec install|uninstall: make the agent a kernel that
 * Jupyter frontends list ("Agent (sandboxed Python)"), in the directories
 * jupyter_client searches.
 *
 * install writes NAME/kernel.json and two logos (PNG files drawn here, so
 * the binary carries no asset files).
 */
#include "agent/cli/ag_cmd.h"
#include "agent/kernel/ag_kernel.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/jpaths.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_kernelspec.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#ifndef JUPYTER_AGENT_VERSION
#include "common/version.h"
#endif

static const char s_usage[] =
    "usage: jupyter-agent kernelspec install [LOCATION] [--name NAME]\n"
    "                                        [--display-name TEXT]\n"
    "                                        [-- KERNEL OPTIONS...]\n"
    "       jupyter-agent kernelspec uninstall [LOCATION] [--name NAME]\n"
    "\n"
    "Install (or remove) the kernelspec that lets JupyterLab, Notebook and\n"
    "jupyter console start this binary as a kernel. Options after '--' are\n"
    "added to the kernel's command line (see 'jupyter-agent kernel --help'),\n"
    "e.g. -- --model openai:gpt-4o --memory 4G --timeout 300.\n"
    "\n"
    "LOCATION (default: --sys-wide as root, else --user):\n"
    "      --user             ~/.local/share/jupyter/kernels (or\n"
    "                         $JUPYTER_DATA_DIR/kernels)\n"
    "      --sys-wide         /usr/local/share/jupyter/kernels\n"
    "      --prefix P         P/share/jupyter/kernels\n"
    "      --sys-prefix       like --prefix $VIRTUAL_ENV (or $CONDA_PREFIX,\n"
    "                         else /usr): next to the Jupyter you run\n"
    "uninstall without LOCATION removes the spec Jupyter would use.\n"
    "\n"
    "options:\n"
    "      --name NAME        kernel name (default agent)\n"
    "      --display-name T   name shown in menus (default "
    "\"" AG_KERNEL_DISPLAY_NAME "\")\n";

/* ---- PNG logos ---- */

static void
s_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static int
s_chunk(FILE *f, const char type[4], const uint8_t *data, uint32_t len)
{
    uint8_t head[8], tail[4];
    s_put32(head, len);
    memcpy(head + 4, type, 4);
    uLong crc = crc32(crc32(0L, Z_NULL, 0), head + 4, 4);
    if (len)
        crc = crc32(crc, data, len);
    s_put32(tail, (uint32_t)crc);
    /* IEND has no data: fwrite(NULL, ...) is undefined even for 0 bytes. */
    return fwrite(head, 1, 8, f) == 8 &&
                   (len == 0 || fwrite(data, 1, len, f) == len) &&
                   fwrite(tail, 1, 4, f) == 4
               ? 0
               : -1;
}

/* Is (x, y) of a size x size logo inside the letter "A" (a 5x7 bitmap
 * scaled into the middle of the badge)? */
static bool
s_glyph(int x, int y, int size)
{
    static const char *const rows[7] = {"..#..", ".#.#.", "#...#", "#...#",
                                        "#####", "#...#", "#...#"};
    int cell = size / 10;
    int gx = (x - (size - 5 * cell) / 2), gy = (y - (size - 7 * cell) / 2);
    if (gx < 0 || gy < 0 || gx >= 5 * cell || gy >= 7 * cell)
        return false;
    return rows[gy / cell][gx / cell] == '#';
}

/* An RGBA logo: an orange rounded badge with a white "A", as a PNG whose
 * image data zlib compresses. */
static int
s_write_logo(const char *path, int size, err_t *err)
{
    size_t row = 1 + (size_t)size * 4, raw_len = row * (size_t)size;
    uint8_t *raw = xcalloc(1, raw_len);
    int r = size / 5; /* corner radius */
    for (int y = 0; y < size; y++) {
        uint8_t *p = raw + (size_t)y * row;
        p[0] = 0; /* filter: none */
        for (int x = 0; x < size; x++) {
            uint8_t *px = p + 1 + 4 * x;
            int cx = x < r ? r - x : x >= size - r ? x - (size - r - 1) : 0;
            int cy = y < r ? r - y : y >= size - r ? y - (size - r - 1) : 0;
            if (cx * cx + cy * cy > r * r)
                continue; /* transparent corner */
            bool white = s_glyph(x, y, size);
            px[0] = white ? 255 : 0xF3;
            px[1] = white ? 255 : 0x77;
            px[2] = white ? 255 : 0x26;
            px[3] = 255;
        }
    }
    /* The IDAT payload is one zlib stream of the filtered rows. */
    uLongf z_len = compressBound((uLong)raw_len);
    uint8_t *z = xmalloc(z_len);
    if (compress2(z, &z_len, raw, (uLong)raw_len, Z_BEST_COMPRESSION) != Z_OK) {
        free(raw);
        free(z);
        return err_set(err, ERR_IO, "cannot compress the logo for %s", path);
    }

    uint8_t ihdr[13];
    s_put32(ihdr, (uint32_t)size);
    s_put32(ihdr + 4, (uint32_t)size);
    ihdr[8] = 8;  /* bit depth */
    ihdr[9] = 6;  /* RGBA */
    ihdr[10] = 0; /* deflate */
    ihdr[11] = 0; /* adaptive filtering */
    ihdr[12] = 0; /* no interlace */
    int rc = 0;
    /* A new or regular file: never a device, FIFO or link made one. */
    int fd = file_open_output(path, NULL, 0644, err);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    if (fd < 0)
        rc = -1;
    else if (!f || fwrite("\x89PNG\r\n\x1a\n", 1, 8, f) != 8 ||
             s_chunk(f, "IHDR", ihdr, sizeof ihdr) ||
             s_chunk(f, "IDAT", z, (uint32_t)z_len) ||
             s_chunk(f, "IEND", NULL, 0))
        rc = err_errno(err, ERR_IO, "cannot write %s", path);
    if (f && fclose(f) != 0 && rc == 0)
        rc = err_errno(err, ERR_IO, "cannot write %s", path);
    free(raw);
    free(z);
    return rc;
}

/* ---- locations ---- */

enum where { W_DEFAULT, W_USER, W_SYSWIDE, W_PREFIX, W_SYSPREFIX };

static char *
s_user_dir(void)
{
    char *data = jpaths_data_dir();
    char *dir = data ? xasprintf("%s/kernels", data) : NULL;
    free(data);
    return dir;
}

/* The kernels directory for `w` (new string). */
static char *
s_kernels_dir(enum where w, const char *prefix)
{
    switch (w) {
    case W_DEFAULT:
        return geteuid() == 0 ? xstrdup("/usr/local/share/jupyter/kernels")
                              : s_user_dir();
    case W_USER:
        return s_user_dir();
    case W_SYSWIDE:
        return xstrdup("/usr/local/share/jupyter/kernels");
    case W_PREFIX:
        return xasprintf("%s/share/jupyter/kernels", prefix);
    case W_SYSPREFIX: {
        const char *p = getenv("VIRTUAL_ENV");
        if (!p || !*p)
            p = getenv("CONDA_PREFIX");
        return xasprintf("%s/share/jupyter/kernels", p && *p ? p : "/usr");
    }
    }
    return NULL;
}

static int
s_mkdirs(const char *path, err_t *err)
{
    char *p = xstrdup(path);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            rc = err_errno(err, ERR_IO, "cannot create %s", p);
            break;
        }
        *s = c;
        if (c == '\0')
            break;
    }
    free(p);
    return rc;
}

/* Jupyter's rule for kernel names. */
static bool
s_valid_name(const char *name)
{
    if (!*name)
        return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
            return false;
    return true;
}

/* ---- install / uninstall ---- */

static int
s_install(const char *dir, const char *name, const char *display, char **extra,
          int nextra, err_t *err)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return err_errno(err, ERR_IO, "cannot find this program's path");
    exe[n] = '\0';
    bool no_sandbox = false;
    for (int i = 0; i < nextra; i++) {
        if (strcmp(extra[i], "-f") == 0 ||
            strncmp(extra[i], "--connection-file", 17) == 0)
            return err_set(err, ERR_USAGE,
                           "the connection file is Jupyter's to pass; drop "
                           "'%s' after '--'",
                           extra[i]);
        if (strcmp(extra[i], "--no-sandbox") == 0)
            no_sandbox = true;
    }
    if (!display)
        display = no_sandbox ? "Agent (Python, NOT sandboxed)"
                             : AG_KERNEL_DISPLAY_NAME;

    json_t *argv =
        json_pack("[s, s, s, s]", exe, "kernel", "-f", "{connection_file}");
    for (int i = 0; i < nextra; i++)
        json_array_append_new(argv, json_string(extra[i]));
    json_t *spec = json_pack(
        "{s:o, s:s, s:s, s:s, s:{s:b, s:{s:s, s:b}}}", "argv", argv,
        "display_name", display, "language", AG_KERNEL_LANGUAGE,
        "interrupt_mode", "message", "metadata", "debugger", 0, "jupyter_agent",
        "version", JUPYTER_AGENT_VERSION, "sandboxed", !no_sandbox);

    char *kdir = xasprintf("%s/%s", dir, name);
    char *json_path = xasprintf("%s/kernel.json", kdir);
    char *logo32 = xasprintf("%s/logo-32x32.png", kdir);
    char *logo64 = xasprintf("%s/logo-64x64.png", kdir);
    int rc = s_mkdirs(kdir, err);
    char *text = json_dumps(spec, JSON_INDENT(1) | JSON_ENSURE_ASCII);
    if (rc == 0 &&
        file_write_atomic(json_path, text, strlen(text), 0644, err) != 0)
        rc = -1;
    free(text);
    if (rc == 0)
        rc = s_write_logo(logo32, 32, err);
    if (rc == 0)
        rc = s_write_logo(logo64, 64, err);
    if (rc == 0)
        printf("Installed kernelspec %s in %s\n", name, kdir);
    json_decref(spec);
    free(kdir);
    free(json_path);
    free(logo32);
    free(logo64);
    return rc;
}

static int
s_uninstall(const char *dir, const char *name, err_t *err)
{
    char *kdir = NULL;
    kb_kernelspec_t ks;
    if (dir) {
        kdir = xasprintf("%s/%s", dir, name);
    } else if (kb_kernelspec_find(name, &ks, NULL) == 0) {
        kdir = xstrdup(ks.resource_dir);
        kb_kernelspec_release(&ks);
    } else {
        return err_set(err, ERR_USAGE,
                       "no kernelspec named '%s' is installed (see 'jupyter "
                       "kernelspec list')",
                       name);
    }
    static const char *const files[] = {"kernel.json", "logo-32x32.png",
                                        "logo-64x64.png"};
    int rc = 0;
    bool found = false;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *p = xasprintf("%s/%s", kdir, files[i]);
        if (unlink(p) == 0)
            found = true;
        else if (errno != ENOENT)
            rc = err_errno(err, ERR_IO, "cannot remove %s", p);
        free(p);
    }
    if (rc == 0 && !found)
        rc = err_set(err, ERR_USAGE, "no kernelspec '%s' in %s", name, kdir);
    if (rc == 0 && rmdir(kdir) != 0)
        rc = err_errno(err, ERR_IO,
                       "removed the kernelspec files, but %s is not empty",
                       kdir);
    if (rc == 0)
        printf("Removed kernelspec %s from %s\n", name, kdir);
    free(kdir);
    return rc;
}

/* The flags of install and uninstall, filled by s_on_opt. */
typedef struct {
    enum where where;
    int nwhere; /* how many LOCATION flags were given */
    const char *prefix, *name, *display;
} s_args_t;

static int
s_on_opt(void *arg, const ag_cmd_opt_t *o, err_t *err)
{
    (void)err;
    s_args_t *a = arg;
    switch (o->opt) {
    case 'u':
        a->where = W_USER, a->nwhere++;
        return 0;
    case 'w':
        a->where = W_SYSWIDE, a->nwhere++;
        return 0;
    case 'p':
        a->where = W_PREFIX, a->nwhere++, a->prefix = o->value;
        return 0;
    case 's':
        a->where = W_SYSPREFIX, a->nwhere++;
        return 0;
    case 'n':
        a->name = o->value;
        return 0;
    case 'd':
        a->display = o->value;
        return 0;
    default:
        return 1;
    }
}

int
ag_cmd_kernelspec(int argc, char **argv)
{
    static const struct option own[] = {
        {"user", no_argument, 0, 'u'},
        {"sys-wide", no_argument, 0, 'w'},
        {"prefix", required_argument, 0, 'p'},
        {"sys-prefix", no_argument, 0, 's'},
        {"name", required_argument, 0, 'n'},
        {"display-name", required_argument, 0, 'd'},
        {0, 0, 0, 0}};
    /* '+': the first operand ends the flags (kernel options follow --). */
    static const ag_cmd_spec_t spec = {.name = "kernelspec",
                                       .shortopts = "+h",
                                       .own = own,
                                       .usage = s_usage,
                                       .on_opt = s_on_opt};
    err_t err = {0};
    if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        fputs(s_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? ERR_USAGE : 0;
    }
    const char *action = argv[1];
    bool install = strcmp(action, "install") == 0;
    if (!install && strcmp(action, "uninstall") != 0 &&
        strcmp(action, "remove") != 0) {
        fprintf(stderr,
                "jupyter-agent kernelspec: unknown action '%s'; use install "
                "or uninstall\n",
                action);
        return ERR_USAGE;
    }
    s_args_t a = {.where = W_DEFAULT, .name = "agent"};
    int parsed = ag_cmd_parse(&spec, argc - 1, argv + 1, NULL, 0, &a, &err);
    if (parsed == 1)
        return 0; /* --help */
    if (parsed) {
        fprintf(stderr, "jupyter-agent kernelspec: %s\n", err.text);
        return ERR_USAGE;
    }
    enum where where = a.where;
    int nwhere = a.nwhere;
    const char *prefix = a.prefix, *name = a.name, *display = a.display;
    int rest = optind + 1; /* index into argv of the first non-option */
    if (nwhere > 1) {
        fprintf(stderr, "jupyter-agent kernelspec: give at most one of "
                        "--user, --sys-wide, --prefix, --sys-prefix\n");
        return ERR_USAGE;
    }
    if (!s_valid_name(name)) {
        fprintf(stderr,
                "jupyter-agent kernelspec: '%s' is not a kernel name "
                "(letters, digits, '.', '_' and '-' only)\n",
                name);
        return ERR_USAGE;
    }
    if (!install && rest < argc) {
        fprintf(stderr, "jupyter-agent kernelspec: unexpected '%s'\n",
                argv[rest]);
        return ERR_USAGE;
    }
    if (install && rest < argc && strcmp(argv[rest - 1], "--") != 0) {
        fprintf(stderr,
                "jupyter-agent kernelspec: unexpected '%s' (put kernel "
                "options after '--')\n",
                argv[rest]);
        return ERR_USAGE;
    }
    char *dir = install || nwhere ? s_kernels_dir(where, prefix) : NULL;
    if ((install || nwhere) && !dir) {
        fprintf(stderr,
                "jupyter-agent kernelspec %s: no Jupyter data dir (neither "
                "JUPYTER_DATA_DIR nor a home directory is known); set "
                "JUPYTER_DATA_DIR or pass --prefix\n",
                action);
        return ERR_USAGE;
    }
    int rc = install
                 ? s_install(dir, name, display, argv + rest, argc - rest, &err)
                 : s_uninstall(dir, name, &err);
    free(dir);
    if (rc) {
        fprintf(stderr, "jupyter-agent kernelspec %s: %s\n", action, err.text);
        return err.code ? err.code : ERR_IO;
    }
    return 0;
}
