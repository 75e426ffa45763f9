/*
 * jpaths: the per-user Jupyter directories, found the way jupyter_core
 * finds them (jupyter_core.paths), so we read and write where Jupyter does.
 *
 * data dir:    $JUPYTER_DATA_DIR, else $XDG_DATA_HOME/jupyter, else
 *              HOME/.local/share/jupyter
 * runtime dir: $JUPYTER_RUNTIME_DIR, else DATA_DIR/runtime
 *
 * Empty variables count as unset. HOME is $HOME, else the home directory
 * in the password database (as Python's expanduser("~") does). When
 * neither is known the answer is NULL: there is never a fallback to a
 * shared place such as /tmp or "/", where another user could plant files.
 */
#ifndef COMMON_JPATHS_H
#define COMMON_JPATHS_H

/* New strings, or NULL when no home directory is known. */
char *jpaths_data_dir(void);
char *jpaths_runtime_dir(void);

#endif
