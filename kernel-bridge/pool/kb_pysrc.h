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

/* kb_zygote.py: the factory process (kb_factory.c). argv: PRELOAD
 * WARM_ENTRY; fd 3 its control socket. */
extern const char kb_zygote_py[];
extern const size_t kb_zygote_py_len;

/* kb_warm_entry.py: a warm kernel's entry point (kb_warm.c), also run by
 * each kernel the factory forks. argv: CONNECTION_FILE PRELOAD; fd 0 the
 * control socket. */
extern const char kb_warm_entry_py[];
extern const size_t kb_warm_entry_py_len;

#endif
