# Enterprise Gateway settings that must stay out of its environment: EG's
# Kubernetes launcher copies its environment into every kernel pod's env
# (launch_kubernetes.py, extend_pod_env), so a token or key passed as an
# environment variable would be readable by the code in every kernel.
# Read from the secrets mounted by enterprise-gateway.yaml instead.
import pathlib

c = get_config()  # noqa: F821 (provided by traitlets when EG loads this)

c.EnterpriseGatewayApp.auth_token = (
    pathlib.Path("/etc/eg-auth/token").read_text().strip())
c.EnterpriseGatewayApp.certfile = "/etc/eg-tls/tls.crt"
c.EnterpriseGatewayApp.keyfile = "/etc/eg-tls/tls.key"
