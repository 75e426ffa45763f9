#!/bin/sh
# TAP: test_sb_attacks (the box attacked from inside: network, files,
# mounts, devices, privilege, fork bomb, memory, pids, disk, signals,
# launcher death, environment) under --engine gvisor. Its network, files,
# mounts, devices and privilege attacks share one gVisor box; a check that
# cannot apply under gVisor says why (a TAP skip). gvisor_* suites are left
# out of make asan (Makefile: ASAN_SKIP).
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
ENGINE=gvisor exec "$(dirname "$BIN")/tests/security/test_sb_attacks"
