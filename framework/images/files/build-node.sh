#!/bin/bash
# Runs inside the node image's build container (framework/images): lays the root filesystem out as
# kind's images/base/Dockerfile does, then preloads the images archive into containerd as kind's
# node-image builder does.
set -o errexit -o nounset -o pipefail
chmod 755 /kind /kind/bin /usr/local/bin/entrypoint /usr/local/bin/clean-install /usr/local/bin/ambientmc-node-guard /kind/bin/*.sh
find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete
rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
  /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
  /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >>/etc/systemd/journald.conf
ln -sf /usr/lib/systemd/systemd /sbin/init
systemctl enable kubelet.service containerd.service undo-mount-hacks.service
systemctl mask systemd-binfmt.service
mkdir -p /etc/kubernetes/manifests /opt/cni/bin
ctr oci spec \
  | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
  | jq 'del(.process.rlimits)' >/etc/containerd/cri-base.json

containerd >/tmp/containerd.log 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  ctr version >/dev/null 2>&1 && break
  sleep 0.1
done
ctr -n k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests /tmp/images.tar
ctr -n k8s.io images ls -q
kill "${pid}"
wait "${pid}" || true
rm -f /tmp/images.tar /tmp/containerd.log /tmp/build-node.sh
