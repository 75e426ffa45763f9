# What jupyter-agent needs from Debian, in one place. The Makefile includes
# this file; tools/install-deps and tools/fuzz read it with tools/pkglist,
# so keep it to `NAME := words` assignments (a trailing \ continues a line).

# pkg-config modules of the libraries the C code links against.
# libssl: the egress proxy's TLS termination (--net-secret); the same
# OpenSSL 3 libcurl already links, from libssl-dev (DEB_BUILD).
PKG_MODULES := libzmq jansson yajl libsodium libcrypto libssl libcurl \
    libseccomp zlib libarchive libpng libmicrohttpd libwebsockets

# Debian packages to build: `make`, `make asan`, `make fuzz` (clang and
# libclang-rt for libFuzzer, clang-format for `make format-check`).
DEB_BUILD := build-essential pkg-config clang clang-format libclang-rt-14-dev \
    libzmq3-dev libjansson-dev libyajl-dev libsodium-dev libssl-dev \
    libcurl4-openssl-dev libseccomp-dev zlib1g-dev libarchive-dev libpng-dev \
    libmicrohttpd-dev libwebsockets-dev

# ... to run the C suites (unit, fuzz replay, integration, security: what
# `make asan` runs) and the demo: sandboxed ipykernels with the data stack,
# the wheels tests (wheel, setuptools, pip, cryptography), the deploy/k8s
# checker (yaml, jinja2: tests/unit/deploy_manifests.sh), pyflakes
# (tests/unit/python_sources.sh), jsonschema (tests/unit/mcp_schemas.sh;
# nbformat pulls it in too), a real jupyter-server and tornado
# (tests/security/hostile_gateway.sh), node (tests/integration/mcp_sdk.sh),
# runsc (gVisor: --engine gvisor and tests/security/gvisor_*).
DEB_C_SUITES := iproute2 procps util-linux runsc \
    python3 python3-ipykernel python3-jupyter-client python3-nbformat \
    python3-nbclient python3-pandas python3-matplotlib \
    python3-wheel python3-setuptools python3-pip python3-pyflakes \
    python3-cryptography python3-yaml python3-jinja2 python3-tornado \
    python3-jsonschema \
    jupyter-core jupyter-client python3-jupyter-server nodejs

# The box Python stack: what a data analyst reaches for, importable inside
# the sandbox (it mounts the host's /usr read-only, so Debian's packages are
# the box's); installed with the C suites (tests/integration/
# box_python_stack.sh imports each inside a box) and for the demo. pandas,
# numpy, matplotlib, scipy, sympy, Pillow, bs4, lxml, pytz and dateutil
# also come with the groups above. Excel and OpenDocument: openpyxl (.xlsx
# read/write), xlsxwriter (.xlsx write), xlrd (old .xls), odf (.ods).
# agent/loop/ag_env_probe.py names these to the model and
# docs/packages.md lists them: keep the lists together. (Debian 12 has no
# pyarrow or polars.)
DEB_BOX_PYTHON := python3-openpyxl python3-xlsxwriter python3-xlrd \
    python3-odf python3-seaborn python3-statsmodels python3-sklearn \
    python3-plotly python3-networkx python3-requests python3-tabulate \
    python3-sqlalchemy python3-xarray python3-numexpr python3-bottleneck \
    python3-h5py python3-docx python3-pypdf python3-markdown python3-chardet \
    python3-tqdm python3-joblib python3-reportlab python3-tz \
    python3-dateutil python3-bs4 python3-lxml python3-sympy python3-scipy \
    python3-pil

# ... and for the rest of `make test`: interop and gateway (pytest, the
# kernel conformance suite, console, Notebook + Chromium for the browser
# test, R's kernel, widgets, nbconvert, unzip, tmux) and cgroup2 (Debian's
# kernel under qemu: qemu-system-x86 and linux-image-amd64, of which only
# /boot and /lib/modules are used; cpio for its initramfs; strace).
DEB_OTHER_SUITES := python3-pytest python3-jupyter-kernel-test jupyter-console \
    jupyter-notebook chromium r-cran-irkernel python3-ipywidgets \
    python3-nbconvert unzip tmux \
    qemu-system-x86 linux-image-amd64 cpio strace
