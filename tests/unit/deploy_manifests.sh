#!/bin/sh
# The Kubernetes deployment (deploy/k8s, docs/scale-out.md) says what it
# claims: gVisor, limits, a read-only root, a non-root uid, no capabilities,
# no service-account token, no network but the gateway, nothing a client
# can change. tests/tools/check_deploy.py parses every manifest with
# python3-yaml, renders the pod template as Enterprise Gateway does, checks
# each claim, then breaks each one in a copy and checks that it is noticed.
set -u
exec "${PYTHON:-/usr/bin/python3}" tests/tools/check_deploy.py .
