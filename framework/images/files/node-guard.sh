#!/bin/bash
# ambientmc-node-guard runs first in a kind node's entrypoint, before systemd, containerd or
# kubelet: nothing in the node or its pods may reach beyond this host. It allows loopback, the
# framework's cluster ranges, the run's Docker network and link-local, rejects everything else
# (counted in the AMBIENTMC-EGRESS chain), and rejects Docker's embedded DNS (127.0.0.11), through
# which kind's entrypoint and CoreDNS's loop and forward plugins would ask the host's resolver.
# It then writes the node's CNI configuration and masquerades pod traffic to other nodes.
set -o errexit -o nounset -o pipefail

env_file=/etc/ambientmc/node.env
# Without the run's settings the node is closed: only loopback is allowed.
POD_RANGE="" ALLOW=""
if [[ -f "${env_file}" ]]; then
  # shellcheck disable=SC1090
  source "${env_file}"
fi

chain=AMBIENTMC-EGRESS
iptables -w -N "${chain}" 2>/dev/null || iptables -w -F "${chain}"
# 127.0.0.8/29 holds Docker's DNS (127.0.0.11); written as a /29 so that kind's later rewrite of
# "-d 127.0.0.11" rules leaves it alone.
iptables -w -A "${chain}" -d 127.0.0.8/29 -j REJECT --reject-with icmp-port-unreachable
iptables -w -A "${chain}" -d 127.0.0.0/8 -j RETURN
iptables -w -A "${chain}" -d 169.254.0.0/16 -j RETURN
for cidr in ${ALLOW}; do
  iptables -w -A "${chain}" -d "${cidr}" -j RETURN
done
iptables -w -A "${chain}" -j REJECT --reject-with icmp-net-unreachable
for hook in OUTPUT FORWARD; do
  iptables -w -C "${hook}" -j "${chain}" 2>/dev/null || iptables -w -I "${hook}" 1 -j "${chain}"
done
# Pods' DNS queries reach Docker's DNS through kind's DNAT to 127.0.0.11, delivered locally.
iptables -w -C INPUT -d 127.0.0.8/29 -j REJECT 2>/dev/null || iptables -w -I INPUT 1 -d 127.0.0.8/29 -j REJECT

chain6=AMBIENTMC-EGRESS6
ip6tables -w -N "${chain6}" 2>/dev/null || ip6tables -w -F "${chain6}"
for cidr in ::1/128 fe80::/10 ff00::/8; do
  ip6tables -w -A "${chain6}" -d "${cidr}" -j RETURN
done
ip6tables -w -A "${chain6}" -j REJECT
for hook in OUTPUT FORWARD; do
  ip6tables -w -C "${hook}" -j "${chain6}" 2>/dev/null || ip6tables -w -I "${hook}" 1 -j "${chain6}"
done

date +%s.%N >/run/ambientmc-guard-applied

if [[ -n "${POD_RANGE}" ]]; then
  mkdir -p /etc/cni/net.d
  cat >/etc/cni/net.d/10-ambientmc.conflist <<CONF
{"cniVersion": "1.0.0", "name": "ambientmc", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "${POD_RANGE}"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
CONF
  # Pods reach anything beyond their node (API servers, gateways) as this node: Docker drops
  # bridged traffic of an internal network whose source is outside its subnet, so a pod address
  # would not cross to another node. The provider's tunnel to clusters on the same network puts
  # its own exception first (framework/provider/kind/tunnel.go).
  rule=(-s "${POD_RANGE}" ! -d "${POD_RANGE}" -j MASQUERADE)
  iptables -w -t nat -C POSTROUTING "${rule[@]}" 2>/dev/null || iptables -w -t nat -A POSTROUTING "${rule[@]}"
fi
