#!/bin/sh
echo "# hello from $(uname -r) $(cat /proc/self/cgroup) $(cat /sys/fs/cgroup/cgroup.controllers)"
t0=$(date +%s)
/usr/bin/python3 -c 'import pandas; print("# pandas", pandas.__version__)'
echo "# pandas import took $(( $(date +%s) - t0 )) s"
echo "ok 1 - boot"
echo "1..1"
