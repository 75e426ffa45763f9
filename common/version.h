/* The one place the version lives: --version, notebook metadata, the
 * kernelspec, archives. */
#ifndef COMMON_VERSION_H
#define COMMON_VERSION_H

#define JUPYTER_AGENT_VERSION "0.1.0"

#endif
