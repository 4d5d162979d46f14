#!/usr/bin/env bash
# The dind sidecar's entrypoint (docker/dind-nvidia.Dockerfile): make a nested Docker
# daemon work in a privileged container, then run the command (dockerd and its flags).
#
# What docker:dind's own `dind` wrapper does, for the two things dockerd needs here:
# - cgroup v2: the container's processes move to a child cgroup ("init"), so that the
#   root cgroup of the container may delegate its controllers to the containers dockerd
#   starts (a cgroup with processes in it cannot enable controllers for its children);
# - securityfs mounted, which AppArmor-aware runc expects.
# Exit status: the command's.
set -euo pipefail

if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    mkdir -p /sys/fs/cgroup/init
    # Moving a process can fail for one that has just exited: move the others.
    xargs -rn1 < /sys/fs/cgroup/cgroup.procs > /sys/fs/cgroup/init/cgroup.procs 2>/dev/null || true
    sed -e 's/ / +/g' -e 's/^/+/' < /sys/fs/cgroup/cgroup.controllers > /sys/fs/cgroup/cgroup.subtree_control
fi
if [[ -d /sys/kernel/security ]] && ! mountpoint -q /sys/kernel/security; then
    mount -t securityfs none /sys/kernel/security || echo "dind: could not mount securityfs (AppArmor profiles may fail)" >&2
fi
# A stale pid file from a restarted sidecar would stop dockerd from starting.
rm -f /var/run/docker.pid

[[ $# -gt 0 ]] || set -- dockerd --host=unix:///var/run/docker.sock
exec "$@"
