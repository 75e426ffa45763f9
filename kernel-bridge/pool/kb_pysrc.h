/*
 * kb_pysrc: the pool's Python sources, built into the binary.
 *
 * Python that runs inside kernels lives in .py files next to the C that
 * drives it, where Python's own tools check it (tests/unit/python_sources.sh
 * runs py_compile and pyflakes on every one). The Makefile turns each
 * NAME.py into `const char NAME_py[]` (tools/embed): the file's bytes and
 * one NUL; NAME_py_len counts the bytes without the NUL.
 *
 * This header is the only thing kb_factory and kb_warm share about each
 * other's Python, so neither includes the other's header for it.
 */
#ifndef KERNEL_BRIDGE_POOL_KB_PYSRC_H
#define KERNEL_BRIDGE_POOL_KB_PYSRC_H

#include <stddef.h>

/* kb_zygote_boot.py: the factory's command line (python3 -c): reads the
 * first message on fd 0, a memfd with [kb_zygote.py, PRELOAD,
 * kb_warm_entry.py], and runs the zygote. */
extern const char kb_zygote_boot_py[];
extern const size_t kb_zygote_boot_py_len;

/* kb_zygote.py: the factory process (kb_factory.c), run by the boot.
 * argv: PRELOAD WARM_ENTRY; fd 0 its control socket. */
extern const char kb_zygote_py[];
extern const size_t kb_zygote_py_len;

/* kb_warm_entry.py: a warm kernel's entry point (kb_warm.c), also run by
 * each kernel the factory forks. argv: CONNECTION_FILE PRELOAD; fd 0 the
 * control socket. */
extern const char kb_warm_entry_py[];
extern const size_t kb_warm_entry_py_len;

#endif
