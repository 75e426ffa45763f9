# The kernel's PEP 508 marker environment, printed as one JSON line after
# `mark`. Embedded into jupyter-agent (packages/pk_pysrc.h); the installer appends a
# call `_ja_marker_env(MARK)` and runs it in a private namespace.
import json
import os
import platform
import sys


def _ja_marker_env(mark):
    def v(i):
        s = '%d.%d.%d' % (i.major, i.minor, i.micro)
        if i.releaselevel != 'final':
            s += i.releaselevel[0] + str(i.serial)
        return s
    print(mark + json.dumps({
        'implementation_name': sys.implementation.name,
        'implementation_version': v(sys.implementation.version),
        'os_name': os.name,
        'platform_machine': platform.machine(),
        'platform_release': platform.release(),
        'platform_system': platform.system(),
        'platform_version': platform.version(),
        'python_full_version': platform.python_version(),
        'platform_python_implementation': platform.python_implementation(),
        'python_version': '.'.join(platform.python_version_tuple()[:2]),
        'sys_platform': sys.platform}))
