#!/bin/sh
# TAP: sandbox_cli.sh ('jupyter-agent sandbox' as a user drives it: exit
# status, signals, memory, timeouts, uploads, copy-out, network, ptrace,
# disk, launcher death) with every box under --engine gvisor; a check that
# cannot apply under gVisor says why (a TAP skip).
ENGINE=gvisor exec sh "$(dirname "$0")/sandbox_cli.sh"
